package domain

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/baton-run/baton/sdk"
)

// finish ends the running run's root turn "u<n>" and, when captures are
// held, leaves it completing.
func (w *world) finish(turn string) Decision {
	return w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventTurnTerminal, TurnRef: turn, Status: sdk.TurnCompleted})
}

func (w *world) rollbackTo(p RollbackToCheckpoint) (Decision, error) {
	return w.decide(Command{ID: "rb", ThreadID: "thr", Payload: p})
}

// The run ends only when its checkpoint is recorded; until then it holds
// the thread but takes no more provider work.
func TestRunEndsWhenItsCheckpointIsRecorded(t *testing.T) {
	w := newWorld(t)
	w.caps.NativeSteering = true
	w.holdCaptures = true
	w.send("one")
	w.open("s1")
	w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventTurnStarted, ThreadRef: "pt", TurnRef: "u1"})
	w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventItemStarted, TurnRef: "u1", ItemRef: "a1", ItemKind: sdk.ItemAssistantMessage})
	d := w.finish("u1")
	if got := types(d); got != "message.completed node.completed node.completed run.completing checkpoint.scope.opened checkpoint.requested" {
		t.Fatalf("terminal: %s", got)
	}
	r := w.thread.Runs[0]
	cp := w.thread.Checkpoints[1]
	if r.Status != RunStatusRunning || r.Ending == nil || r.Ending.Status != RunStatusCompleted || r.CheckpointID != cp.ID {
		t.Fatalf("completing run: %+v", r)
	}
	base := w.thread.Checkpoints[0]
	if cp.Status != CheckpointCapturing || cp.BaseID != "" || cp.RunOrdinal != 1 || cp.Ref != "refs/baton/checkpoints/thr/root/1" {
		t.Fatalf("checkpoint: %+v (baseline %+v)", cp, base)
	}
	if e, ok := lastEffect(w).(CaptureCheckpoint); !ok || e.CheckpointID != cp.ID || e.Ref != cp.Ref {
		t.Fatalf("capture effect: %+v", e)
	}
	// Nothing more happens to it: no steering, no second interrupt, no
	// items, no failure from a provider exit.
	if d, err := w.dispatch(DispatchMessage{Text: "more"}); err != nil || types(d) != "message.added run.queued" {
		t.Fatalf("auto dispatch while completing: %s %v", types(d), err)
	}
	for _, mode := range []DispatchMode{ModeSteerActive, ModeRestartActive} {
		if _, err := w.dispatch(DispatchMessage{Text: "x", Mode: mode}); !errors.Is(err, ErrConflict) {
			t.Errorf("%s while completing: %v", mode, err)
		}
	}
	for _, cmd := range []CommandPayload{InterruptRun{RunID: r.ID}, FailRun{RunID: r.ID},
		RecordTurnDispatched{RunID: r.ID, AttemptID: r.ActiveAttempt, SessionID: "s1"}} {
		if d := w.must(Command{ID: "x", ThreadID: "thr", Payload: cmd}); len(d.Events)+len(d.Effects) != 0 {
			t.Errorf("%s on a completing run: %s", cmd.CommandType(), types(d))
		}
	}
	for _, ev := range []sdk.RuntimeEvent{
		{Kind: sdk.EventItemStarted, TurnRef: "u1", ItemRef: "late"},
		{Kind: sdk.EventPlanUpdated, TurnRef: "u1"},
		{Kind: sdk.EventUsage, TurnRef: "u1", Usage: &sdk.Usage{TotalTokens: 1}},
		{Kind: sdk.EventTurnTerminal, TurnRef: "u1", Status: sdk.TurnFailed},
		{Kind: sdk.EventTurnStarted, ThreadRef: "pt", TurnRef: "u-late", ClientTurnID: r.ActiveAttempt},
	} {
		if d := w.ev("s1", ev); strings.Contains(types(d), "run.") || strings.Contains(types(d), "node.started") {
			t.Errorf("%s on a completing run: %s", ev.Kind, types(d))
		}
	}
	if d := w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventTurnStarted, ThreadRef: "pt", TurnRef: "u-other"}); types(d) != "diagnostic.recorded" {
		t.Errorf("a turn with no live run: %s", types(d))
	}
	// Bad and unknown records.
	if _, err := w.decide(Command{ID: "c", ThreadID: "thr", Payload: RecordCheckpoint{CheckpointID: cp.ID, Status: "fine"}}); !errors.Is(err, ErrInvalid) {
		t.Errorf("bad status: %v", err)
	}
	if _, err := w.decide(Command{ID: "c", ThreadID: "thr", Payload: RecordCheckpoint{CheckpointID: "nope", Status: CheckpointReady}}); !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown checkpoint: %v", err)
	}
	files := []FileChange{{Path: "a.txt", Kind: "added", Additions: 1}}
	d = w.must(Command{ID: "c", ThreadID: "thr", Payload: RecordCheckpoint{CheckpointID: cp.ID, Status: CheckpointReady, Commit: "c1", Files: files}})
	if got := types(d); got != "checkpoint.recorded run.ended run.started attempt.started node.started" {
		t.Fatalf("recorded: %s", got)
	}
	if r := w.thread.Runs[0]; r.Status != RunStatusCompleted || r.Ending != nil || w.thread.checkpoint(cp.ID).Files[0].Path != "a.txt" {
		t.Fatalf("ended run: %+v", r)
	}
	if d := w.must(Command{ID: "c", ThreadID: "thr", Payload: RecordCheckpoint{CheckpointID: cp.ID, Status: CheckpointError}}); len(d.Events) != 0 {
		t.Fatalf("recorded twice: %s", types(d))
	}
	// The baseline is still capturing: run 2's base is the newest ready
	// root checkpoint, run 1's.
	w.must(Command{ID: "c", ThreadID: "thr", Payload: RecordCheckpoint{CheckpointID: base.ID, Status: CheckpointMissing, Reason: "not git"}})
	w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventTurnStarted, ThreadRef: "pt", TurnRef: "u2"})
	w.finish("u2")
	if c := w.thread.Checkpoints[2]; c.BaseID != cp.ID || c.RunOrdinal != 2 {
		t.Fatalf("run 2's checkpoint: %+v", c)
	}
}

// A run whose turn ended before the host stopped ends as it would have;
// recovery starts nothing.
func TestRecoverEndsACompletingRun(t *testing.T) {
	w := running(t, Capabilities{})
	w.holdCaptures = true
	w.finish("u1")
	w.send("queued")
	d := w.must(Command{ID: "r", ThreadID: "thr", Payload: Recover{Reason: "restart"}})
	if got := types(d); got != "provider.session.ended run.ended" {
		t.Fatalf("recover: %s", got)
	}
	if r := w.thread.Runs[0]; r.Status != RunStatusCompleted || r.CheckpointID == "" {
		t.Fatalf("run: %+v", r)
	}
	if w.thread.Runs[1].Status != RunStatusQueued {
		t.Fatalf("recovery started a run")
	}
	if !EffectCapture.Replayable() || !EffectRestoreFiles.Replayable() || !EffectReconcileThread.Replayable() || EffectStartTurn.Replayable() {
		t.Error("Replayable")
	}
}

// threeRuns is a thread with three completed runs, each with its checkpoint,
// and a subagent checkpoint in run 2.
func threeRuns(t *testing.T, caps Capabilities) *world {
	w := running(t, caps)
	w.finish("u1")
	for _, turn := range []string{"u2", "u3"} {
		w.send("next")
		w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventTurnStarted, ThreadRef: "pt", TurnRef: turn})
		if turn == "u2" {
			w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventThreadStarted, ThreadRef: "child", ParentThreadRef: "pt"})
			w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventTurnStarted, ThreadRef: "child", TurnRef: "c1"})
			w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventTurnTerminal, TurnRef: "c1", Status: sdk.TurnCompleted})
		}
		w.finish(turn)
	}
	return w
}

func TestRollbackNative(t *testing.T) {
	w := threeRuns(t, Capabilities{})
	th := w.thread
	if len(th.Checkpoints) != 5 || len(th.CheckpointScopes) != 5 {
		t.Fatalf("checkpoints: %+v\nscopes: %+v", th.Checkpoints, th.CheckpointScopes)
	}
	sub := th.CheckpointScopes[3]
	if sub.Kind != ScopeSubagent || sub.AdvancesRunCount || sub.ParentID != th.CheckpointScopes[2].ID || sub.Ordinal != 1 {
		t.Fatalf("subagent scope: %+v", sub)
	}
	if c := th.Checkpoints[2]; c.Ref != "refs/baton/checkpoints/thr/subagent/2-1" || c.NodeID == "" || c.BaseID != th.Checkpoints[1].ID {
		t.Fatalf("subagent checkpoint: %+v", c)
	}
	run1 := th.Checkpoints[1]
	for _, tc := range []struct {
		p    RollbackToCheckpoint
		want error
	}{
		{RollbackToCheckpoint{}, ErrInvalid},
		{RollbackToCheckpoint{CheckpointID: "nope"}, ErrNotFound},
		{RollbackToCheckpoint{ScopeID: "nope"}, ErrNotFound},
		{RollbackToCheckpoint{CheckpointID: run1.ID, ScopeID: sub.ID}, ErrInvalid},
		{RollbackToCheckpoint{ScopeID: sub.ID}, ErrUnsupported},
	} {
		if _, err := w.rollbackTo(tc.p); !errors.Is(err, tc.want) {
			t.Errorf("%+v: %v, want %v", tc.p, err, tc.want)
		}
	}
	d, err := w.rollbackTo(RollbackToCheckpoint{ScopeID: run1.ScopeID})
	if err != nil || types(d) != "rollback.started" {
		t.Fatalf("rollback: %s %v", types(d), err)
	}
	rb := w.thread.Rollbacks[0]
	if rb.TargetRunOrdinal != 1 || len(rb.Runs) != 2 || len(rb.Checkpoints) != 3 || rb.Status != RollbackRestoringFiles {
		t.Fatalf("rollback: %+v", rb)
	}
	if e, ok := lastEffect(w).(RestoreFiles); !ok || e.Commit != "commit-"+run1.ID || e.RollbackID != rb.ID {
		t.Fatalf("restore effect: %+v", e)
	}
	if _, err := w.rollbackTo(RollbackToCheckpoint{CheckpointID: run1.ID}); !errors.Is(err, ErrConflict) {
		t.Errorf("a second rollback while one runs: %v", err)
	}
	// Messages wait for the rollback.
	if _, err := w.dispatch(DispatchMessage{Text: "now", Mode: ModeStartImmediately}); !errors.Is(err, ErrConflict) {
		t.Errorf("start immediately during a rollback: %v", err)
	}
	if d, _ := w.dispatch(DispatchMessage{Text: "after"}); types(d) != "message.added run.queued" {
		t.Fatalf("a message during a rollback: %s", types(d))
	}
	if _, err := w.decide(Command{ID: "f", ThreadID: "thr", Payload: RecordFilesRestored{RollbackID: "nope"}}); !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown rollback: %v", err)
	}
	d = w.must(Command{ID: "f", ThreadID: "thr", Payload: RecordFilesRestored{RollbackID: rb.ID, Written: 2, Removed: 1, Replayed: true}})
	if types(d) != "rollback.files.restored" || !lastEffect(w).(ReconcileThread).Hold {
		t.Fatalf("files restored: %s", types(d))
	}
	e, ok := lastEffect(w).(ReconcileThread)
	if !ok || e.ThreadRef != "pt" || e.Turns != 2 || e.TurnRef != "u2" || len(e.Refs) != 3 {
		t.Fatalf("reconcile effect: %+v", e)
	}
	if d := w.must(Command{ID: "f", ThreadID: "thr", Payload: RecordFilesRestored{RollbackID: rb.ID}}); len(d.Events) != 0 {
		t.Fatalf("restored twice: %s", types(d))
	}
	rec := func(p RecordProviderReconciled) (Decision, error) {
		return w.decide(Command{ID: "p", ThreadID: "thr", Payload: p})
	}
	if _, err := rec(RecordProviderReconciled{RollbackID: "nope", Reconciliation: ReconcileNone}); !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown rollback: %v", err)
	}
	if _, err := rec(RecordProviderReconciled{RollbackID: rb.ID, Reconciliation: "magic"}); !errors.Is(err, ErrInvalid) {
		t.Errorf("bad reconciliation: %v", err)
	}
	d, _ = rec(RecordProviderReconciled{RollbackID: rb.ID, Reconciliation: ReconcileNative, ProviderThreadRef: "pt", TurnsDropped: 2})
	if got := types(d); got != "rollback.completed run.started attempt.started node.started" {
		t.Fatalf("reconciled: %s", got)
	}
	th = w.thread
	if th.Runs[1].Status != RunStatusRolledBack || th.Runs[2].Status != RunStatusRolledBack || th.Runs[0].Status != RunStatusCompleted {
		t.Fatalf("runs: %s %s %s", th.Runs[0].Status, th.Runs[1].Status, th.Runs[2].Status)
	}
	for i, c := range th.Checkpoints[:5] {
		if want := map[bool]CheckpointStatus{true: CheckpointStale, false: CheckpointReady}[i >= 2]; c.Status != want {
			t.Errorf("checkpoint %d: %s, want %s", i, c.Status, want)
		}
	}
	if r := th.Rollbacks[0]; r.Status != RollbackDone || r.Reconciliation != ReconcileNative || r.TurnsDropped != 2 || r.FilesWritten != 2 {
		t.Fatalf("rollback: %+v", r)
	}
	if th.ProviderThreads[0].Detached || len(th.Handoffs) != 0 {
		t.Fatalf("a native rollback keeps the conversation: %+v %+v", th.ProviderThreads, th.Handoffs)
	}
	if d, _ := rec(RecordProviderReconciled{RollbackID: rb.ID, Reconciliation: ReconcileNone}); len(d.Events) != 0 {
		t.Fatalf("reconciled twice: %s", types(d))
	}
	// A stale checkpoint cannot be restored; nor can one while a run is
	// active.
	if _, err := w.rollbackTo(RollbackToCheckpoint{CheckpointID: th.Checkpoints[3].ID}); !errors.Is(err, ErrConflict) {
		t.Errorf("stale checkpoint: %v", err)
	}
	if _, err := w.rollbackTo(RollbackToCheckpoint{CheckpointID: run1.ID}); !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), "run 4") {
		t.Errorf("rollback during a run: %v", err)
	}
}

func TestRollbackFreshThreadWithHandoff(t *testing.T) {
	w := threeRuns(t, Capabilities{})
	w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventContentDelta, TurnRef: "u1", ItemRef: "late", ItemKind: sdk.ItemAssistantMessage, Text: "ignored"})
	w.edit(func(t *Thread) {
		t.Messages = append(t.Messages, Message{RunID: t.Runs[0].ID, Role: RoleAssistant, Text: NewText("I wrote a.txt")})
		t.Checkpoints[1].Files = []FileChange{{Path: "a.txt", Kind: "added"}}
	})
	d, err := w.rollbackTo(RollbackToCheckpoint{CheckpointID: w.thread.Checkpoints[1].ID})
	if err != nil {
		t.Fatal(err)
	}
	rb := w.thread.Rollbacks[0]
	w.must(Command{ID: "f", ThreadID: "thr", Payload: RecordFilesRestored{RollbackID: rb.ID}})
	d = w.must(Command{ID: "p", ThreadID: "thr", Payload: RecordProviderReconciled{RollbackID: rb.ID, Reconciliation: ReconcileFreshThread,
		Note: "the provider has no rollback"}})
	if got := types(d); got != "rollback.completed handoff.created" {
		t.Fatalf("fresh thread: %s", got)
	}
	th := w.thread
	if !th.ProviderThreads[0].Detached || th.rootProviderThread() != nil {
		t.Fatalf("the old conversation is left behind: %+v", th.ProviderThreads)
	}
	h := th.Handoffs[0]
	if h.Status != HandoffReady || h.ToRun != 1 || h.Strategy != HandoffFullThreadSummary ||
		!strings.Contains(h.Text, "User: one") || !strings.Contains(h.Text, "Assistant: I wrote a.txt") ||
		!strings.Contains(h.Text, "a.txt (added, +0/-0)") || strings.Contains(h.Text, "Run 2") {
		t.Fatalf("handoff: %+v", h)
	}
	// The next run carries it; a run that fails before the provider took
	// its turn does not use it up.
	w.send("go on")
	if e, ok := lastEffect(w).(StartTurn); !ok || e.Text != "go on" ||
		w.thread.TurnText(e.RunID, e.AttemptID, e.Text) != h.Text+"\n\ngo on" {
		t.Fatalf("start effect: %+v; sent %q", e, w.thread.TurnText(e.RunID, e.AttemptID, e.Text))
	}
	w.must(Command{ID: "f", ThreadID: "thr", Payload: FailRun{RunID: w.thread.Runs[3].ID, Failure: Failure{Message: "no plugin"}}})
	if h := w.thread.Handoffs[0]; h.Status != HandoffReady {
		t.Fatalf("handoff after a failed start: %+v", h)
	}
	w.send("go on again")
	if e := lastEffect(w).(StartTurn); !strings.HasPrefix(w.thread.TurnText(e.RunID, e.AttemptID, e.Text), h.Text) {
		t.Fatalf("the handoff was not carried again: %+v", e)
	}
	w.open("s2")
	w.ev("s2", sdk.RuntimeEvent{Kind: sdk.EventTurnStarted, ThreadRef: "pt2", TurnRef: "v1"})
	if h := w.thread.Handoffs[0]; h.Status != HandoffStatusConsumed || h.RunID != w.thread.Runs[4].ID {
		t.Fatalf("handoff: %+v", h)
	}
	w.ev("s2", sdk.RuntimeEvent{Kind: sdk.EventTurnTerminal, TurnRef: "v1", Status: sdk.TurnCompleted})
	// Rolling back to the baseline: the handoff covers a rolled-back run
	// now, and a conversation from nothing needs none.
	d, err = w.rollbackTo(RollbackToCheckpoint{CheckpointID: w.thread.Checkpoints[0].ID})
	if err != nil {
		t.Fatal(err)
	}
	rb = w.thread.Rollbacks[1]
	if len(rb.Runs) != 3 { // runs 1, 4 (failed) and 5; 2 and 3 are rolled back already
		t.Fatalf("runs: %+v", rb.Runs)
	}
	d = w.must(Command{ID: "f", ThreadID: "thr", Payload: RecordFilesRestored{RollbackID: rb.ID}})
	if e := lastEffect(w).(ReconcileThread); e.ThreadRef != "pt2" || e.Turns != 1 || e.TurnRef != "v1" {
		t.Fatalf("reconcile effect: %+v", e)
	}
	d = w.must(Command{ID: "p", ThreadID: "thr", Payload: RecordProviderReconciled{RollbackID: rb.ID, Reconciliation: ReconcileFreshThread}})
	if got := types(d); got != "rollback.completed" || w.thread.Handoffs[0].Status != HandoffStatusSuperseded {
		t.Fatalf("to the baseline: %s %+v", got, w.thread.Handoffs)
	}
}

func TestRollbackThatFailsHoldsRuns(t *testing.T) {
	w := threeRuns(t, Capabilities{})
	w.rollbackTo(RollbackToCheckpoint{CheckpointID: w.thread.Checkpoints[1].ID})
	rb := w.thread.Rollbacks[0]
	d := w.must(Command{ID: "f", ThreadID: "thr", Payload: RecordFilesRestored{RollbackID: rb.ID, Failure: &Failure{Message: "disk full"}}})
	if types(d) != "rollback.failed" || w.thread.Rollbacks[0].FailedStage != "files" {
		t.Fatalf("failed: %s %+v", types(d), w.thread.Rollbacks[0])
	}
	if _, err := w.dispatch(DispatchMessage{Text: "x"}); !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), "half-restored") {
		t.Fatalf("dispatch after a failed rollback: %v", err)
	}
	// Another rollback may fix it; a checkpoint that is not ready cannot.
	w.edit(func(t *Thread) { t.Checkpoints[0].Status, t.Checkpoints[0].Reason = CheckpointMissing, "not git" })
	if _, err := w.rollbackTo(RollbackToCheckpoint{CheckpointID: w.thread.Checkpoints[0].ID}); !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), "not git") {
		t.Errorf("missing checkpoint: %v", err)
	}
	if _, err := w.rollbackTo(RollbackToCheckpoint{CheckpointID: w.thread.Checkpoints[1].ID}); err != nil {
		t.Fatalf("retry: %v", err)
	}
}

func TestRollbackWithNoProviderThread(t *testing.T) {
	w := newWorld(t)
	w.send("one")
	w.must(Command{ID: "f", ThreadID: "thr", Payload: FailRun{RunID: w.thread.Runs[0].ID, Failure: Failure{Message: "no plugin"}}})
	if _, err := w.rollbackTo(RollbackToCheckpoint{CheckpointID: w.thread.Checkpoints[0].ID}); err != nil {
		t.Fatal(err)
	}
	w.must(Command{ID: "f", ThreadID: "thr", Payload: RecordFilesRestored{RollbackID: w.thread.Rollbacks[0].ID}})
	if e, ok := lastEffect(w).(ReconcileThread); !ok || e.ThreadRef != "" || e.Turns != 0 || len(e.Refs) != 1 {
		t.Fatalf("reconcile effect: %+v", e)
	}
}

func TestRefComponentAndCut(t *testing.T) {
	for id, safe := range map[string]bool{"thr_1": true, "a.b-c": true, "a..b": false, "x.lock": false, "x.": false,
		"has space": false, ".hidden": false, "ü": false} {
		if got := refComponent(id); (got == id) != safe || !refSafe.MatchString(got) {
			t.Errorf("refComponent(%q) = %q", id, got)
		}
	}
	if got := cut("héllo", 2); got != "h [...]" || !utf8.ValidString(got) {
		t.Errorf("cut: %q", got)
	}
	th := &Thread{Runs: []Run{{ID: "r", Ordinal: 1, Status: RunStatusCompleted}},
		Messages: []Message{{RunID: "r", Role: RoleUser, Text: NewText(strings.Repeat("x", 40000))}, {RunID: "r", Role: RoleUser}}}
	for range 10 {
		th.Messages = append(th.Messages, th.Messages[0])
	}
	if h := composeHandoff(th, handoffSpec{Runs: []int{1}, MaxBytes: 32000}); len(h.Text) > 32000 || !strings.HasSuffix(h.Text, "[End of the handoff. The user's new message follows.]") ||
		h.Cut != "run 1 cut short" {
		t.Errorf("handoff of %d bytes: %s", len(h.Text), h.Cut)
	}
	for _, pad := range []string{"", "a"} { // one of them cuts inside a character
		for i := range th.Messages {
			th.Messages[i].Text = NewText(pad + strings.Repeat("é", 20000))
		}
		if s := composeHandoff(th, handoffSpec{Runs: []int{1}}).Text; !utf8.ValidString(s) {
			t.Errorf("handoff is not UTF-8")
		}
	}
}

func TestDecodeRollbackCommand(t *testing.T) {
	c, err := DecodeCommand([]byte(`{"type":"checkpoint.rollback","commandId":"c","threadId":"t","payload":{"scopeId":"s","checkpointId":"k"}}`))
	if err != nil || c.Payload.(RollbackToCheckpoint).CheckpointID != "k" {
		t.Fatalf("%+v %v", c, err)
	}
}

// A run's scope is opened by its subagent's checkpoint before the run has
// one of its own: rolling back to it is not found, not a crash. Nor can a
// run that is ending be rolled back past.
func TestRollbackToAScopeWithNoCheckpointYet(t *testing.T) {
	w := running(t, Capabilities{})
	w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventThreadStarted, ThreadRef: "child", ParentThreadRef: "pt"})
	w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventTurnStarted, ThreadRef: "child", TurnRef: "c1"})
	w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventTurnTerminal, TurnRef: "c1", Status: sdk.TurnCompleted})
	runScope := w.thread.rootScope(w.thread.Runs[0].ID)
	if _, err := w.rollbackTo(RollbackToCheckpoint{ScopeID: runScope.ID}); !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "no checkpoint yet") {
		t.Errorf("rollback to a scope with no checkpoint: %v", err)
	}
	w.holdCaptures = true
	w.finish("u1")
	if _, err := w.rollbackTo(RollbackToCheckpoint{CheckpointID: w.thread.Checkpoints[0].ID}); !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), "ending") {
		t.Errorf("rollback while a run is ending: %v", err)
	}
}

// A second rollback before any new run: the conversation the first one
// left is gone, so the next run starts afresh and is told what remains. A
// rollback a restarted host finishes starts nothing.
func TestSecondRollbackKeepsTheContext(t *testing.T) {
	w := threeRuns(t, Capabilities{})
	rollback := func(ordinal int, how Reconciliation, replayed bool) Decision {
		var id string
		for _, c := range w.thread.Checkpoints {
			if c.RunOrdinal == ordinal && c.NodeID == "" {
				id = c.ID
			}
		}
		if _, err := w.rollbackTo(RollbackToCheckpoint{CheckpointID: id}); err != nil {
			t.Fatal(err)
		}
		w.send("waits for the rollback")
		rb := w.thread.Rollbacks[len(w.thread.Rollbacks)-1]
		w.must(Command{ID: "f", ThreadID: "thr", Payload: RecordFilesRestored{RollbackID: rb.ID}})
		return w.must(Command{ID: "p", ThreadID: "thr", Payload: RecordProviderReconciled{RollbackID: rb.ID, Reconciliation: how, Replayed: replayed}})
	}
	if got := types(rollback(2, ReconcileFreshThread, true)); got != "rollback.completed handoff.created" {
		t.Fatalf("first rollback: %s", got)
	}
	if r := w.thread.Runs[len(w.thread.Runs)-1]; r.Status != RunStatusQueued {
		t.Fatalf("a rollback a restarted host finished started run %d", r.Ordinal)
	}
	if got := types(rollback(1, ReconcileNone, false)); !strings.HasPrefix(got, "rollback.completed handoff.created run.started") {
		t.Fatalf("second rollback: %s", got)
	}
	if hs := w.thread.Handoffs; len(hs) != 2 || hs[0].Status != HandoffStatusSuperseded || hs[1].Status != HandoffReady || hs[1].ToRun != 1 {
		t.Fatalf("handoffs: %+v", hs)
	}
}

// A thread whose runs ended before it had checkpoints gets its baseline as
// the checkpoint of the run before the next one.
func TestBaselineOfAnOlderThread(t *testing.T) {
	w := newWorld(t)
	w.edit(func(t *Thread) {
		t.Runs = append(t.Runs, Run{ID: "old", Ordinal: 1, Status: RunStatusCompleted}, Run{ID: "gone", Ordinal: 2, Status: RunStatusCancelled})
	})
	w.send("new")
	c := w.thread.Checkpoints[0]
	if c.RunOrdinal != 1 || c.RunID != "old" || w.thread.Runs[0].CheckpointID != c.ID || c.Ref != "refs/baton/checkpoints/thr/root/1" {
		t.Fatalf("baseline: %+v", c)
	}
}
