package domain

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/baton-run/baton/sdk"
	"github.com/google/go-cmp/cmp"
)

// TestOutcomes: each effect kind's result becomes the one command its
// kind declares, with an id derived from the effect, so that an effect
// performed again (by a host that restarted) records its outcome once;
// a provider action that went well, or an interrupt or a forced end
// whatever came of it, records nothing.
func TestOutcomes(t *testing.T) {
	w := newWorld(t)
	w.holdCaptures = true
	w.send("one")
	w.open("s1")
	w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventTurnStarted, ThreadRef: "pt", TurnRef: "u1"})
	w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventRequestOpened, TurnRef: "u1", RequestRef: "q1", RequestKind: "permission"})
	q := w.thread.Requests[0]
	stored := func(e Effect, id string) Effect { return Stored(e, "thr", id) }
	var start StartTurn
	var respond Respond
	for i, e := range w.effects {
		switch e := stored(e, fmt.Sprint(i, ".0")).(type) {
		case StartTurn:
			start = e
		case Respond:
			respond = e
		}
	}
	if start.AttemptID == "" || respond.RequestRef != "q1" {
		t.Fatalf("effects: %+v", w.effects)
	}
	head := EffectHead{ID: "9.0", ThreadID: "thr"}
	steer := Steer{EffectHead: head, RunID: start.RunID, AttemptID: start.AttemptID, MessageID: "msg_9", Text: "focus"}
	refused := errors.New("the provider refused it")
	gone := fmt.Errorf("session s1: %w", sdk.ErrNotResumable)
	files := []FileChange{{Path: "a.go", Kind: "modified", Additions: 1}}
	check := CheckResult{ExitCode: 1, Output: "FAIL\n"}
	cmd := func(id string, p CommandPayload) *Command { return &Command{ID: id, ThreadID: "thr", Payload: p} }
	for _, c := range []struct {
		name string
		t    *Thread
		e    Effect
		r    Result
		want *Command
	}{
		{"a start taken", w.thread, start, Result{},
			cmd("dispatched:"+start.AttemptID, RecordTurnDispatched{RunID: start.RunID, AttemptID: start.AttemptID, SessionID: start.SessionID})},
		{"a start refused", w.thread, start, Result{Err: refused},
			cmd("fail:"+start.RunID+":"+start.AttemptID, FailRun{RunID: start.RunID,
				Failure: Failure{Code: "start_failed", Message: "the provider refused it"}})},
		{"a start skipped", w.thread, start, Result{Skipped: true}, nil},
		{"a steer sent", w.thread, steer, Result{}, nil},
		{"a steer refused", w.thread, steer, Result{Err: refused},
			cmd("steerfail:9.0", SteerFailed{RunID: start.RunID, MessageID: "msg_9", Reason: "the provider refused it"})},
		{"a steer skipped", w.thread, steer, Result{Skipped: true},
			cmd("steerfail:9.0", SteerFailed{RunID: start.RunID, MessageID: "msg_9", Reason: "its turn had ended before the message could be sent"})},
		{"an answer delivered", w.thread, respond, Result{}, nil},
		{"an answer refused", w.thread, respond, Result{Err: refused},
			cmd("respondfail:"+respond.ID, RespondFailed{RequestID: q.ID, Reason: "the provider refused it"})},
		{"an answer to a process that is gone", w.thread, respond, Result{Err: gone},
			cmd("unreachable:"+q.ID, MarkRequestUnreachable{RequestID: q.ID, Reason: "its provider process is gone"})},
		{"an answer to a request no longer there", w.thread, Respond{EffectHead: head, SessionID: "s1", RequestRef: "q9"},
			Result{Err: refused}, nil},
		{"an answer in a thread not found", nil, respond, Result{Err: refused}, nil},
		{"an interrupt that failed", w.thread, Interrupt{EffectHead: head, RunID: start.RunID}, Result{Err: gone}, nil},
		{"a forced end that failed", w.thread, EndSession{EffectHead: head, SessionID: "s1"}, Result{Err: refused}, nil},
		{"a capture", w.thread, CaptureCheckpoint{EffectHead: head, CheckpointID: "cp_1", Ref: "refs/x"},
			Result{Captured: RecordCheckpoint{CheckpointID: "cp_other", Status: CheckpointReady, Commit: "c1", Files: files}},
			cmd("capture:cp_1", RecordCheckpoint{CheckpointID: "cp_1", Status: CheckpointReady, Commit: "c1", Files: files})},
		{"a capture that failed", w.thread, CaptureCheckpoint{EffectHead: head, CheckpointID: "cp_1", Ref: "refs/x"},
			Result{Err: errors.New("git: no space left")},
			cmd("capture:cp_1", RecordCheckpoint{CheckpointID: "cp_1", Status: CheckpointError, Reason: "git: no space left"})},
		// What git gave, not UTF-8, is recorded as the log stores it: the
		// live projection reads as a reloaded one, and the API carries it.
		{"a capture of a file name that is not UTF-8", w.thread, CaptureCheckpoint{EffectHead: head, CheckpointID: "cp_1", Ref: "refs/x"},
			Result{Captured: RecordCheckpoint{Status: CheckpointReady, Commit: "c1", Files: []FileChange{{Path: "caf\xe9\xe9.txt", Kind: "added"}}}},
			cmd("capture:cp_1", RecordCheckpoint{CheckpointID: "cp_1", Status: CheckpointReady, Commit: "c1",
				Files: []FileChange{{Path: "caf\ufffd\ufffd.txt", Kind: "added"}}})},
		{"a capture that failed saying so in bytes", w.thread, CaptureCheckpoint{EffectHead: head, CheckpointID: "cp_1", Ref: "refs/x"},
			Result{Err: errors.New("git: caf\xe9: Permission denied")},
			cmd("capture:cp_1", RecordCheckpoint{CheckpointID: "cp_1", Status: CheckpointError, Reason: "git: caf\ufffd: Permission denied"})},
		{"files restored again", w.thread, RestoreFiles{EffectHead: head, RollbackID: "rb_1", Ref: "refs/pre", Replayed: true},
			Result{Restored: RecordFilesRestored{Written: 2, Removed: 1, SavedCommit: "c0"}},
			cmd("restored:rb_1", RecordFilesRestored{RollbackID: "rb_1", Written: 2, Removed: 1, SavedRef: "refs/pre", SavedCommit: "c0", Replayed: true})},
		{"files not restored", w.thread, RestoreFiles{EffectHead: head, RollbackID: "rb_1", Ref: "refs/pre"},
			Result{Err: errors.New("git: locked")},
			cmd("restored:rb_1", RecordFilesRestored{RollbackID: "rb_1", Failure: &Failure{Code: "restore_failed", Message: "git: locked"}})},
		{"turns dropped natively", w.thread, ReconcileThread{EffectHead: head, RollbackID: "rb_1", Turns: 2}, Result{ThreadRef: "pt"},
			cmd("reconciled:rb_1", RecordProviderReconciled{RollbackID: "rb_1", Reconciliation: ReconcileNative, ProviderThreadRef: "pt", TurnsDropped: 2})},
		{"a provider that cannot drop turns", w.thread, ReconcileThread{EffectHead: head, RollbackID: "rb_1", Turns: 2, Replayed: true},
			Result{Err: fmt.Errorf("acp: %w", sdk.ErrUnsupported)},
			cmd("reconciled:rb_1", RecordProviderReconciled{RollbackID: "rb_1", Reconciliation: ReconcileFreshThread, Replayed: true,
				Note: "the acp provider cannot drop turns; the next run starts a fresh conversation with a summary of the earlier one"})},
		{"a provider's rollback that failed, and refs left", nil, ReconcileThread{EffectHead: head, RollbackID: "rb_1", Turns: 1, Refs: []string{"refs/a"}},
			Result{Err: refused, RefsErr: errors.New("git: locked")},
			cmd("reconciled:rb_1", RecordProviderReconciled{RollbackID: "rb_1", Reconciliation: ReconcileFreshThread,
				Note: "the provider's rollback failed (the provider refused it); the next run starts a fresh conversation with a summary of the earlier one; " +
					"the refs of stale checkpoints could not be deleted: git: locked"})},
		{"no turns to drop, after a replayed stage", w.thread, ReconcileThread{EffectHead: head, RollbackID: "rb_1", Hold: true}, Result{},
			cmd("reconciled:rb_1", RecordProviderReconciled{RollbackID: "rb_1", Reconciliation: ReconcileNone, Replayed: true})},
		{"a check", w.thread, RunCheck{EffectHead: head, RunID: start.RunID, Command: "make test"}, Result{Checked: check},
			cmd("check:9.0", RecordCheck{CheckResult: CheckResult{RunID: start.RunID, Command: "make test", ExitCode: 1, Output: "FAIL\n"}})},
		{"an effect of a newer host", w.thread, unknownEffect{EffectHead: head, Type: "open_worktree"}, Result{}, nil},
	} {
		if diff := cmp.Diff(c.want, Outcome(c.t, c.e, c.r)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", c.name, diff)
		}
	}

	// Each outcome is decided like any command: a start reported taken
	// once its turn's own events are in records nothing more.
	taken := Outcome(w.thread, start, Result{})
	if d := w.must(*taken); types(d) != "" {
		t.Fatalf("a start taken after its turn started: %s", types(d))
	}
}

// TestCurrent: a start or a steering message is wanted only while its
// attempt is its run's active one; anything else always is.
func TestCurrent(t *testing.T) {
	w := newWorld(t)
	w.send("one")
	start := lastEffect(w).(StartTurn)
	steer := Steer{RunID: start.RunID, AttemptID: start.AttemptID}
	if !Current(w.thread, start) || !Current(w.thread, steer) || !Current(nil, Interrupt{RunID: start.RunID}) {
		t.Fatal("the active attempt's start and steer, or an interrupt, are not current")
	}
	if Current(nil, start) || Current(w.thread, StartTurn{RunID: "run_9", AttemptID: start.AttemptID}) ||
		Current(w.thread, Steer{RunID: start.RunID, AttemptID: "att_9"}) {
		t.Fatal("a start in no thread, of a run not there, or a steer of another attempt is current")
	}
	w.must(Command{ID: "f", ThreadID: "thr", Payload: FailRun{RunID: start.RunID, Failure: Failure{Message: "no plugin"}}})
	if Current(w.thread, start) {
		t.Fatal("the start of a run that ended is current")
	}
}

// TestGone: the errors that say a provider's session cannot be reached,
// however wrapped.
func TestGone(t *testing.T) {
	for _, err := range []error{sdk.ErrNotResumable, sdk.ErrUnknownSession, sdk.ErrProviderExited, sdk.ErrPluginUnavailable} {
		if !Gone(fmt.Errorf("respond: %w", err)) {
			t.Errorf("%v is not gone", err)
		}
	}
	if Gone(errors.New("timed out")) || Gone(sdk.ErrUnsupported) {
		t.Error("an error that leaves the session reachable is gone")
	}
}

// TestObservedIDs: an observation's command id is derived from what it
// carries, and is the id a host gave it before the domain did: a timer
// that fires again, a recovery made again against the same log, is the
// same command.
func TestObservedIDs(t *testing.T) {
	since := time.Unix(0, 1764504000123456789)
	for _, c := range []struct {
		o    Observation
		want string
	}{
		{FireWait{WaitID: "wait_1"}, "wait:wait_1"},
		{ForceStop{RunID: "run_1", AttemptID: "att_2"}, "force:att_2"},
		{StallTurn{AttemptID: "att_2", Since: since}, "stall:att_2:1764504000123456789"},
		{ExpireRequest{RequestID: "req_3", Failures: 2}, "expire:req_3:2"},
		{CloseIdleSession{SessionID: "ses_4"}, "idle:ses_4"},
		{RecordSessionOpened{SessionID: "ses_5"}, "open:ses_5"},
		{MarkRequestUnreachable{RequestID: "req_3"}, "unreachable:req_3"},
		{HostStopping{RunID: "run_1", AttemptID: "att_2"}, "drain:run_1:att_2"},
		{ProviderExited{SessionID: "ses_5", Message: "gone"}, "pexit:ses_5"},
		{Recover{Reason: "restart", After: 41}, "recover:thr:41"},
		{StartQueued{After: 42}, "startqueued:thr:42"},
		{ShutDown{Reason: "stop", After: 43}, "shutdown:thr:43"},
	} {
		want := Command{ID: c.want, ThreadID: "thr", Payload: c.o}
		if diff := cmp.Diff(want, Observed("thr", c.o)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", c.o.CommandType(), diff)
		}
	}
	if got := Unreachable("thr", "req_3"); got.ID != "unreachable:req_3" ||
		got.Payload != (MarkRequestUnreachable{RequestID: "req_3", Reason: "its provider process is gone"}) {
		t.Errorf("unreachable: %+v", got)
	}
	if got := [2]string{ProviderEventsID("ses_5", 7, 7), ProviderEventsID("ses_5", 7, 9)}; got != [2]string{"pev:ses_5:7", "pev:ses_5:7-9"} {
		t.Errorf("provider events' ids: %q", got)
	}
	// The log's sequence names the command; it is not its content.
	if Hash(Observed("thr", Recover{Reason: "r", After: 1})) != Hash(Observed("thr", Recover{Reason: "r", After: 2})) {
		t.Error("a recovery's hash depends on the sequence it was made at")
	}
}

// TestHostStoppingAndProviderExited: the host stopping asks a run's turn
// to stop as an interrupt would; a provider whose plugin went away ends
// its session and run as the provider's own exit would.
func TestHostStoppingAndProviderExited(t *testing.T) {
	for _, c := range []struct {
		name string
		p    CommandPayload
		same CommandPayload
	}{
		{"run.host_stopping", HostStopping{}, InterruptRun{}},
		{"provider.exited", ProviderExited{SessionID: "s1", Message: "the plugin exited"}, IngestProviderEvent{SessionID: "s1",
			Event: sdk.RuntimeEvent{Kind: sdk.EventRuntimeExited, Status: sdk.ExitFailed,
				Failure: &sdk.Failure{Code: "plugin_exited", Message: "the plugin exited"}}}},
	} {
		var decided [2]Decision
		for i, p := range []CommandPayload{c.p, c.same} {
			w := newWorld(t)
			w.send("one")
			w.open("s1")
			w.turnOn("s1", "u1")
			r := w.thread.Runs[0]
			if s, ok := p.(HostStopping); ok {
				s.RunID, s.AttemptID = r.ID, r.ActiveAttempt
				p = s
			}
			if s, ok := p.(InterruptRun); ok {
				s.RunID = r.ID
				p = s
			}
			decided[i] = w.must(Command{ID: "x", ThreadID: "thr", Payload: p})
		}
		if types(decided[0]) == "" || c.p.CommandType() != c.name {
			t.Fatalf("%s (%s) decided nothing", c.name, c.p.CommandType())
		}
		if diff := cmp.Diff(decided[1].Events, decided[0].Events); diff != "" {
			t.Errorf("%s: events (-as %s +got):\n%s", c.name, c.same.CommandType(), diff)
		}
		if diff := cmp.Diff(decided[1].Effects, decided[0].Effects); diff != "" {
			t.Errorf("%s: effects (-as %s +got):\n%s", c.name, c.same.CommandType(), diff)
		}
	}
}

// unencodable and undecodable are payloads the log could not store or
// read back: asStored leaves them as they are, for Decide to refuse.
type unencodable struct{ F func() }
type undecodable struct{ S string }

func (unencodable) CommandType() string           { return "test.unencodable" }
func (undecodable) CommandType() string           { return "test.undecodable" }
func (*undecodable) UnmarshalJSON(b []byte) error { return errors.New("no") }

func TestAsStoredLeavesWhatTheLogCannotHold(t *testing.T) {
	if p, ok := asStored(unencodable{}).(unencodable); !ok || p.F != nil {
		t.Errorf("an unencodable payload: %#v", p)
	}
	if p := asStored(undecodable{S: "caf\xe9"}); p != (undecodable{S: "caf\xe9"}) {
		t.Errorf("an undecodable payload: %#v", p)
	}
}
