package domain

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"slices"
	"strings"
	"testing"

	gocmp "github.com/google/go-cmp/cmp"

	"github.com/baton-run/baton/sdk"
)

// A long thread's projection keeps what is live and its newest KeepRuns
// ended runs; the rest leaves it in parts. Nothing is lost and nothing
// decides otherwise: the tests here run the same commands on a thread
// whose runs leave it and on one that keeps everything (KeepAll), and
// require the same events, the same effects, and the same whole thread
// (what left, overlaid, with what stayed).

// twins are two worlds given the same commands: w's runs leave its
// projection, k keeps everything.
type twins struct {
	t      *testing.T
	w, k   *world
	hw, hk *host
}

func newTwins(t *testing.T, provider string) *twins {
	k := &world{t: t, thread: &Thread{}, replica: &Thread{}}
	k.thread.KeepAll()
	k.replica.KeepAll()
	k.must(Command{ID: "c", ThreadID: "thr", Payload: CreateThread{Provider: provider, Cwd: "/w",
		ProviderCommand: ProviderCommand{Argv: []string{provider}}}})
	w := newWorldOn(t, provider)
	return &twins{t: t, w: w, k: k, hw: newHost(w, nil), hk: newHost(k, nil)}
}

// both does f to each twin.
func (tw *twins) both(f func(w *world, h *host)) {
	tw.t.Helper()
	f(tw.w, tw.hw)
	f(tw.k, tw.hk)
}

// same requires the twins to have decided alike (a rollback to a
// checkpoint that had left brings it back: RollbackStarted says so), and
// the whole of w to be k.
func (tw *twins) same() {
	tw.t.Helper()
	events := func(w *world) string {
		var out []Payload
		for _, p := range w.events {
			if rb, ok := p.(RollbackStarted); ok {
				rb.Target = nil
				p = rb
			}
			out = append(out, p)
		}
		return jsonOf(out)
	}
	if a, b := events(tw.w), events(tw.k); a != b {
		tw.t.Fatalf("events differ:\n%s", gocmp.Diff(b, a))
	}
	if d := gocmp.Diff(tw.k.effects, tw.w.effects); d != "" {
		tw.t.Fatalf("effects differ (-keeps all +leaves):\n%s", d)
	}
	whole := tw.w.whole()
	if d := gocmp.Diff(normal(tw.k.thread), normal(&whole)); d != "" {
		tw.t.Fatalf("the whole thread differs (-keeps all +leaves):\n%s", d)
	}
}

// normal is a thread's JSON tree with each collection sorted by id (runs
// by ordinal), and each binding's runs as a count: what a page reader
// puts together of a thread is the same entries, not in the same order.
func normal(t *Thread) any {
	th := t.Clone()
	th.Earlier = nil
	for i := range th.ProviderBindings {
		b := &th.ProviderBindings[i]
		b.RunsBefore, b.Runs = b.RunsBefore+len(b.Runs), nil
	}
	byID := func(a, b any) int {
		x, _ := json.Marshal(a)
		y, _ := json.Marshal(b)
		return strings.Compare(string(x), string(y))
	}
	sort := func(s any) {
		switch s := s.(type) {
		case []Message:
			slices.SortFunc(s, func(a, b Message) int { return cmp.Compare(a.ID, b.ID) })
		case []TurnItem:
			slices.SortFunc(s, func(a, b TurnItem) int { return cmp.Compare(a.ID, b.ID) })
		case []ProviderSession:
			slices.SortFunc(s, func(a, b ProviderSession) int { return cmp.Compare(a.ID, b.ID) })
		case []ProviderThread:
			slices.SortFunc(s, func(a, b ProviderThread) int { return cmp.Compare(a.ID, b.ID) })
		case []ProviderTurn:
			slices.SortFunc(s, func(a, b ProviderTurn) int { return cmp.Compare(a.ID, b.ID) })
		case []RuntimeRequest:
			slices.SortFunc(s, func(a, b RuntimeRequest) int { return cmp.Compare(a.ID, b.ID) })
		case []Diagnostic:
			slices.SortFunc(s, func(a, b Diagnostic) int { return byID(a, b) })
		case []CheckpointScope:
			slices.SortFunc(s, func(a, b CheckpointScope) int { return cmp.Compare(a.ID, b.ID) })
		case []Checkpoint:
			slices.SortFunc(s, func(a, b Checkpoint) int { return cmp.Compare(a.ID, b.ID) })
		case []Rollback:
			slices.SortFunc(s, func(a, b Rollback) int { return cmp.Compare(a.ID, b.ID) })
		case []ContextHandoff:
			slices.SortFunc(s, func(a, b ContextHandoff) int { return cmp.Compare(a.ID, b.ID) })
		}
	}
	for _, s := range []any{th.Messages, th.TurnItems, th.ProviderSessions, th.ProviderThreads, th.ProviderTurns, th.Requests,
		th.Diagnostics, th.CheckpointScopes, th.Checkpoints, th.Rollbacks, th.Handoffs} {
		sort(s)
	}
	// None and an empty list are the same entries.
	th.Messages, th.TurnItems, th.ProviderSessions, th.ProviderThreads = nz(th.Messages), nz(th.TurnItems), nz(th.ProviderSessions), nz(th.ProviderThreads)
	th.ProviderTurns, th.Requests, th.Diagnostics, th.CheckpointScopes = nz(th.ProviderTurns), nz(th.Requests), nz(th.Diagnostics), nz(th.CheckpointScopes)
	th.Checkpoints, th.Rollbacks, th.Handoffs = nz(th.Checkpoints), nz(th.Rollbacks), nz(th.Handoffs)
	var tree any
	json.Unmarshal([]byte(jsonOf(&th)), &tree)
	return tree
}

func nz[S ~[]E, E any](s S) S {
	if len(s) == 0 {
		return nil
	}
	return s
}

// busy runs a run that does a bit of everything: a command with output,
// an answer, a tool, a plan, an approval the policy answers, a diagnostic
// and a subagent's turn (with its own checkpoint); then it completes.
func busy(w *world, h *host, text string) {
	w.t.Helper()
	w.send(text)
	h.start()
	r := w.thread.ActiveRun()
	ref := w.thread.rootTurn(r).ProviderRef
	n := r.Ordinal
	for _, e := range []sdk.RuntimeEvent{
		{Kind: sdk.EventItemStarted, TurnRef: ref, ItemRef: "cmd", ItemKind: "command_execution", Title: "go test ./..."},
		{Kind: sdk.EventContentDelta, TurnRef: ref, ItemRef: "cmd", Text: fmt.Sprintf("ok run %d\n", n)},
		{Kind: sdk.EventItemCompleted, TurnRef: ref, ItemRef: "cmd", Detail: json.RawMessage(`{"exitCode":0}`)},
		{Kind: sdk.EventItemStarted, TurnRef: ref, ItemRef: "say", ItemKind: sdk.ItemAssistantMessage},
		{Kind: sdk.EventContentDelta, TurnRef: ref, ItemRef: "say", Text: fmt.Sprintf("Done with run %d.", n)},
		{Kind: sdk.EventItemCompleted, TurnRef: ref, ItemRef: "say"},
		{Kind: sdk.EventItemStarted, TurnRef: ref, ItemRef: "tool", ItemKind: "tool_call", Title: "read_file"},
		{Kind: sdk.EventItemCompleted, TurnRef: ref, ItemRef: "tool"},
		{Kind: sdk.EventPlanUpdated, TurnRef: ref, Detail: json.RawMessage(`[{"content":"test","status":"completed"}]`)},
		{Kind: sdk.EventRequestOpened, TurnRef: ref, RequestRef: fmt.Sprintf("q%d", n), RequestKind: sdk.RequestCommandApproval, Title: "rm -rf"},
		{Kind: sdk.EventRequestResolved, RequestRef: fmt.Sprintf("q%d", n), Status: sdk.DecisionDecline},
		{Kind: sdk.EventDiagnostic, TurnRef: ref, Title: "stderr", Text: "warning"},
		{Kind: sdk.EventThreadStarted, ThreadRef: fmt.Sprintf("child-%d", n), ParentThreadRef: h.ref},
		{Kind: sdk.EventTurnStarted, ThreadRef: fmt.Sprintf("child-%d", n), TurnRef: fmt.Sprintf("sub-%d", n)},
		{Kind: sdk.EventTurnTerminal, TurnRef: fmt.Sprintf("sub-%d", n), Status: sdk.TurnCompleted},
	} {
		w.ev(h.session, e)
	}
	h.end(sdk.TurnCompleted)
}

// A long thread keeps its newest KeepRuns ended runs and what is live; the
// rest left in parts that hold it all, and the thread decides as one that
// keeps everything: handoffs of runs that left (a full summary, a delta),
// rollbacks to them (native and to a fresh conversation, by checkpoint
// and by scope, twice to the same run), and the next capture's base.
func TestLongThreadLeavesItsPast(t *testing.T) {
	tw := newTwins(t, "codex")
	for i := 1; i <= 12; i++ {
		tw.both(func(w *world, h *host) { busy(w, h, fmt.Sprintf("codex run %d", i)) })
	}
	if got := tw.w.thread.Earlier; got == nil || got.Runs != 4 || got.Messages != 8 || got.RootScopes != 4 {
		t.Fatalf("after 12 runs, what left: %+v", got)
	}
	if r := tw.w.thread.Runs; len(r) != KeepRuns || r[0].Ordinal != 5 || tw.w.thread.Summary().Runs != 12 {
		t.Fatalf("after 12 runs the projection holds %d runs from %d (a summary of %d)", len(r), r[0].Ordinal, tw.w.thread.Summary().Runs)
	}
	tw.same()
	// A full summary for a provider new to the thread tells of the runs
	// that left, as the thread that keeps them does.
	gathered := tw.w.gathered
	tw.both(func(w *world, h *host) { w.switchTo("claude") })
	if tw.w.gathered == gathered {
		t.Fatal("the full summary did not gather the runs that left")
	}
	tw.same()
	for i := 13; i <= 15; i++ {
		tw.both(func(w *world, h *host) { busy(w, h, fmt.Sprintf("claude run %d", i)) })
	}
	tw.both(func(w *world, h *host) { w.switchTo("codex"); busy(w, h, "back on codex") })
	tw.same()
	// Back to run 3, natively: its checkpoint had left; it is back.
	tw.both(func(w *world, h *host) { h.rollback(3, true) })
	tw.same()
	started := lastOf[RollbackStarted](tw.w)
	if started.Target == nil || started.Target.RunOrdinal != 3 || lastOf[RollbackStarted](tw.k).Target != nil {
		t.Fatalf("the rollback to run 3 brought back %+v", started.Target)
	}
	if kept := lastOf[RollbackCompleted](tw.w).KeptThrough; kept == nil || *kept != 3 {
		t.Fatalf("the native rollback's conversation has seen through %v, want run 3", kept)
	}
	for i := 17; i <= 28; i++ {
		tw.both(func(w *world, h *host) { busy(w, h, fmt.Sprintf("codex run %d", i)) })
	}
	tw.same()
	// The next capture's base was run 3's checkpoint, kept in the
	// projection until run 17's was ready; it has left again.
	if tw.w.thread.checkpoint(started.CheckpointID) != nil {
		t.Fatalf("run 3's checkpoint is still in the projection")
	}
	// Run 3 again, now by its scope, to a fresh conversation.
	tw.both(func(w *world, h *host) {
		var scope string
		for _, sc := range w.whole().CheckpointScopes {
			if sc.Kind == ScopeRootRun && sc.Ordinal == 3 {
				scope = sc.ID
			}
		}
		if _, err := w.rollbackTo(RollbackToCheckpoint{ScopeID: scope}); err != nil {
			t.Fatal(err)
		}
		rb := w.thread.Rollbacks[len(w.thread.Rollbacks)-1]
		w.must(Command{ID: "f", ThreadID: "thr", Payload: RecordFilesRestored{RollbackID: rb.ID}})
		w.must(Command{ID: "p", ThreadID: "thr", Payload: RecordProviderReconciled{RollbackID: rb.ID, Reconciliation: ReconcileFreshThread}})
		h.session = "" // the host leaves its conversation
		busy(w, h, "after the second rollback")
	})
	tw.same()
	if got := len(tw.w.thread.Earlier.Rollbacks); got != 2 {
		t.Fatalf("%d rollbacks reached among the runs that left, want 2", got)
	}
	// Its projection is what is live and the newest runs: a thread of 29
	// runs holds as many as one of 12.
	if r := tw.w.thread.Runs; len(r) != KeepRuns || r[0].Ordinal != 22 {
		t.Fatalf("the projection holds %d runs from %d", len(r), r[0].Ordinal)
	}
	// Its pages, put end to end, are the whole thread.
	for _, size := range []int{1, 5, 7, 40} {
		paged := pages(tw.w, size)
		if d := gocmp.Diff(normal(tw.k.thread), normal(&paged)); d != "" {
			t.Fatalf("pages of %d runs, end to end (-whole +pages):\n%s", size, d)
		}
	}
}

// pages is a thread read a page of size runs at a time, as a host reads
// it (each page given the parts filed under its runs), put end to end.
func pages(w *world, size int) Thread {
	var all Thread
	for from := 1; from <= w.thread.RunCount(); from += size {
		to := from + size - 1
		var parts []Archived
		for _, a := range w.parts {
			if a.Ordinal >= from && a.Ordinal <= to || a.Ordinal == 0 && from == 1 {
				parts = append(parts, a)
			}
		}
		all.AddPage(w.thread.Page(from, to, parts))
	}
	return all
}

// lastOf is the last event of type E w decided.
func lastOf[E Payload](w *world) E {
	var e E
	for _, p := range w.events {
		if x, ok := p.(E); ok {
			e = x
		}
	}
	return e
}

// A handoff's bound is spent on the newest runs: the runs that left and
// are older than what the bound holds are left out without being read
// (their digests are not gathered), and the text is the same as the one a
// thread that keeps every run writes.
func TestHandoffLeavesOutWhatLeftWithoutReadingIt(t *testing.T) {
	tw := newTwins(t, "codex")
	for i := 1; i <= 40; i++ {
		tw.both(func(w *world, h *host) {
			w.send(fmt.Sprintf("run %d: %s", i, strings.Repeat("make the parser accept trailing commas; ", 6)))
			h.start()
			h.end(sdk.TurnCompleted)
		})
	}
	tw.both(func(w *world, h *host) {
		w.must(Command{ID: "sw", ThreadID: "thr", Payload: SwitchProvider{Provider: "claude", ProviderCommand: ProviderCommand{Argv: []string{"claude"}},
			HandoffMaxBytes: MinHandoffMaxBytes}})
	})
	tw.same()
	h := tw.w.thread.readyHandoff()
	if !strings.Contains(h.Cut, "left out") || len(h.Runs) != 40 {
		t.Fatalf("the handoff: cut %q, %d runs covered", h.Cut, len(h.Runs))
	}
	past, err := tw.w.thread.GatherPast(&NeedPast{Told: true, ToldBudget: MinHandoffMaxBytes}, tw.w.stored())
	if err != nil {
		t.Fatal(err)
	}
	var digested []int
	for o := range past.digests {
		digested = append(digested, o)
	}
	slices.Sort(digested)
	var out int
	fmt.Sscanf(h.Text[strings.Index(h.Text, "(Runs 1-"):], "(Runs 1-%d left out", &out)
	if len(past.told) != 32 || len(digested) == 0 || len(digested) >= 32 || digested[len(digested)-1] != 32 || out < digested[0]-1 {
		t.Fatalf("told %d runs that left, digested %v; the text begins:\n%s", len(past.told), digested, h.Text[:400])
	}
}

// A run that left and whose text at its fullest is over digestWholeMax
// is told at most cut short, and the handoff says so.
func TestLongRunThatLeftIsToldCutShort(t *testing.T) {
	w := newWorldOn(t, "codex")
	h := newHost(w, nil)
	big := strings.Repeat("x", digestWholeMax)
	w.send("write the long answer")
	h.start()
	ref := w.thread.rootTurn(w.thread.ActiveRun()).ProviderRef
	w.ev(h.session, sdk.RuntimeEvent{Kind: sdk.EventItemStarted, TurnRef: ref, ItemRef: "say", ItemKind: sdk.ItemAssistantMessage})
	w.ev(h.session, sdk.RuntimeEvent{Kind: sdk.EventContentDelta, TurnRef: ref, ItemRef: "say", Text: big})
	h.end(sdk.TurnCompleted)
	for i := 2; i <= KeepRuns+1; i++ {
		w.send(fmt.Sprintf("run %d", i))
		h.start()
		h.end(sdk.TurnCompleted)
	}
	if w.thread.Earlier == nil || w.thread.Earlier.Runs != 1 {
		t.Fatalf("run 1 has not left: %+v", w.thread.Earlier)
	}
	w.switchTo("claude")
	hof := w.thread.readyHandoff()
	if !strings.Contains(hof.Cut, "run 1 cut short") || !hof.Runs[0].Shortened || strings.Contains(hof.Text, big) ||
		!strings.Contains(hof.Text, "Assistant: "+big[:handoffBriefMessage]+" [...]") {
		t.Fatalf("cut %q, runs %+v", hof.Cut, hof.Runs[:1])
	}
}

// What a thread keeps of what is not a run's: pending requests stay
// (even one no run holds), as do the newest keepDiagnostics of the
// thread's own diagnostics and the newest keepHandoffs handoffs that are
// not ready; more than that leaves, before any run has (ordinal 0).
func TestWhatOfTheThreadsOwnStays(t *testing.T) {
	w := running(t, Capabilities{})
	// A late request of a replaced attempt: no run holds it.
	w.dispatch(DispatchMessage{Text: "again", Mode: ModeRestartActive})
	w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventTurnTerminal, TurnRef: "u1", Status: sdk.TurnInterrupted})
	w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventTurnStarted, ThreadRef: "pt", TurnRef: "u2"})
	w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventRequestOpened, TurnRef: "u1", RequestRef: "late", RequestKind: sdk.RequestUserInput})
	late := w.thread.Requests[len(w.thread.Requests)-1]
	w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventTurnTerminal, TurnRef: "u2", Status: sdk.TurnCompleted})
	for i := range keepDiagnostics + 4 { // with no run active: the thread's own
		w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventDiagnostic, Title: fmt.Sprintf("of the thread %d", i)})
	}
	for i := range keepHandoffs + 3 {
		w.switchTo([]string{"claude", "codex"}[i%2])
	}
	var diags []string
	handoffs := 0
	for _, a := range w.parts {
		if a.Ordinal != 0 || len(a.Runs) != 0 {
			t.Fatalf("before a run left, a part holds %s", jsonOf(a))
		}
		for _, g := range a.Diagnostics {
			diags = append(diags, g.Title)
		}
		handoffs += len(a.Handoffs)
	}
	if ready, kept := w.thread.readyHandoff(), len(w.thread.Handoffs); w.thread.Earlier.Runs != 0 || ready == nil || kept != keepHandoffs+1 ||
		handoffs != 2 || fmt.Sprint(diags) != "[of the thread 0 of the thread 1 of the thread 2 of the thread 3]" {
		t.Fatalf("before a run left: %+v; %d handoffs kept (ready: %v), %d left; diagnostics left %v", w.thread.Earlier, kept, ready != nil, handoffs, diags)
	}
	for i := 2; i <= KeepRuns+2; i++ {
		w.send(fmt.Sprintf("run %d", i))
		w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventTurnStarted, ThreadRef: "pt", TurnRef: fmt.Sprintf("t%d", i)})
		w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventTurnTerminal, TurnRef: fmt.Sprintf("t%d", i), Status: sdk.TurnCompleted})
	}
	var own []string
	for _, g := range w.thread.Diagnostics {
		if g.RunID == "" {
			own = append(own, g.Title)
		}
	}
	if q := w.thread.request(late.ID); q == nil || q.Status != RequestStatusPending || w.thread.Earlier.Runs != 2 ||
		len(own) != keepDiagnostics || own[0] != "of the thread 4" {
		t.Fatalf("late request %+v; %d runs left; the thread's diagnostics %v", q, w.thread.Earlier.Runs, own)
	}
	// A rollback to a checkpoint the thread never had reads every part,
	// the thread's own before any run left too, and finds none.
	if _, err := w.rollbackTo(RollbackToCheckpoint{CheckpointID: "cp_none"}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("rollback to a checkpoint the thread never had: %v", err)
	}
	if _, err := w.rollbackTo(RollbackToCheckpoint{ScopeID: "cps_none"}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("rollback to a scope the thread never had: %v", err)
	}
}

// A thread that keeps everything leaves nothing, however long.
func TestKeepAllLeavesNothing(t *testing.T) {
	tw := newTwins(t, "acp")
	for i := 1; i <= 2*KeepRuns; i++ {
		tw.both(func(w *world, h *host) { w.send(fmt.Sprint(i)); h.start(); h.end(sdk.TurnCompleted) })
	}
	if k := tw.k.thread; len(k.Runs) != 2*KeepRuns || k.Earlier != nil || len(tw.k.parts) != 0 {
		t.Fatalf("the thread that keeps all holds %d runs, earlier %+v, %d parts", len(k.Runs), k.Earlier, len(tw.k.parts))
	}
	tw.same()
}

// A host whose store fails while it reads the parts says so: the
// decision is not made.
func TestGatherPastStopsAtAReadError(t *testing.T) {
	w := newWorld(t)
	broken := errors.New("disk on fire")
	parts := func(yield func(Archived, error) bool) { yield(Archived{}, broken) }
	if _, err := w.thread.GatherPast(&NeedPast{From: 1}, iter.Seq2[Archived, error](parts)); !errors.Is(err, broken) {
		t.Fatalf("gather over a failing read: %v", err)
	}
}

// What a decision needs of the past reads in words.
func TestNeedPastSaysWhat(t *testing.T) {
	n := &NeedPast{From: 4, Checkpoint: "cp_1", Scope: "cps_1", KeptIn: []string{"pthr_1"}, KeptUpTo: 3, Told: true, ToldAfter: 2}
	want := "the decision needs what has left the thread's projection: runs from 4 on, checkpoint cp_1, checkpoint scope cps_1, " +
		"what the kept conversation saw up to run 3, the runs told after run 2"
	if got := n.Error(); got != want {
		t.Fatalf("%q\nwant %q", got, want)
	}
}

// A log from before KeptThrough was recorded works it out from the
// projection, as it did.
func TestNativeRollbackFromAnOldLog(t *testing.T) {
	w := newWorldOn(t, "codex")
	h := newHost(w, nil)
	for i := 1; i <= 3; i++ {
		w.send(fmt.Sprint(i))
		h.start()
		h.end(sdk.TurnCompleted)
	}
	h.rollback(1, true)
	old := &Thread{}
	for i, p := range w.events {
		if done, ok := p.(RollbackCompleted); ok {
			if done.KeptThrough == nil || *done.KeptThrough != 1 {
				t.Fatalf("kept through %v, want 1", done.KeptThrough)
			}
			done.KeptThrough = nil
			p = done
		}
		Evolve(old, Event{Sequence: uint64(i + 1), ThreadID: "thr", At: t0, Payload: p})
	}
	if b, _ := old.Binding("codex"); b.SeenThrough != 1 {
		t.Fatalf("seen through %d, want 1", b.SeenThrough)
	}
}

// GatherPast reads parts as a store gives them: a part whose run is not
// there (a store that lost it) tells of no run, and the newest run a kept
// conversation took is the one whose root turn it took, not rolled back.
func TestGatherPastFromParts(t *testing.T) {
	run := func(ord int, status RunStatus, conv string, root bool) Archived {
		r := Run{ID: fmt.Sprintf("run_%d", ord), Ordinal: ord, Status: status, Provider: "codex",
			Attempts: []Attempt{{ID: fmt.Sprintf("att_%d", ord), RootNode: "root", SessionID: "s"}}}
		node := "root"
		if !root {
			node = "sub"
		}
		return Archived{Ordinal: ord, Part: ord, Runs: []Run{r},
			ProviderTurns: []ProviderTurn{{ID: fmt.Sprintf("pt_%d", ord), ProviderThreadID: conv, RunID: r.ID, AttemptID: r.Attempts[0].ID, NodeID: node}}}
	}
	parts := []Archived{
		run(5, RunStatusCompleted, "conv", true),                                      // after what is asked
		run(4, RunStatusRolledBack, "conv", true),                                     // rolled back
		run(3, RunStatusCompleted, "other", true),                                     // another conversation's
		run(2, RunStatusCompleted, "conv", false),                                     // a subagent's turn
		{Ordinal: 2, Part: 9, Checkpoints: []Checkpoint{{ID: "cp_2", RunOrdinal: 2}}}, // left later, beside it
		{Ordinal: 1, Part: 0, Checkpoints: []Checkpoint{{ID: "cp_1", RunOrdinal: 1}}}, // its run lost
	}
	th := &Thread{ID: "thr", Earlier: &Earlier{Runs: 5, Parts: 10}}
	seq := func(yield func(Archived, error) bool) {
		for _, a := range parts {
			if !yield(a, nil) {
				return
			}
		}
	}
	p, err := th.GatherPast(&NeedPast{KeptIn: []string{"conv"}, KeptUpTo: 4, Told: true, ToldAfter: 0, ToldBudget: 1}, seq)
	if err != nil {
		t.Fatal(err)
	}
	var told []int
	for _, hr := range p.told {
		told = append(told, hr.Ordinal)
	}
	if p.kept != 0 || fmt.Sprint(told) != "[2 3 5]" || len(p.digests) != 1 || p.digests[5] == nil {
		t.Fatalf("kept %d, told %v, digests %d", p.kept, told, len(p.digests))
	}
	p, err = th.GatherPast(&NeedPast{From: 2}, seq)
	if err != nil {
		t.Fatal(err)
	}
	var cps []string
	for _, c := range p.runs.Checkpoints {
		cps = append(cps, c.ID)
	}
	if p.from != 2 || len(p.runs.Runs) != 4 || fmt.Sprint(cps) != "[cp_2]" {
		t.Fatalf("from %d: %d runs, checkpoints %v", p.from, len(p.runs.Runs), cps)
	}
}

// fit counts the line naming the runs left out before it starts (those
// that left the projection and are older than the digests reach): the
// text it chooses fits its budget with that line.
func TestFitCountsWhatIsLeftOutAlready(t *testing.T) {
	var one runRanges
	one.add(1)
	line := len(leftOutLine(&one))
	long := strings.Repeat("x", 500)
	parts := []handoffPart{
		{run: &Run{Ordinal: 1}, level: levelOut},
		{run: &Run{Ordinal: 2}, text: [levelOut]string{long, "short", "short", "stub"}},
	}
	budget := len(long) + line - 1
	fit(parts, budget)
	if got := len(parts[1].text[parts[1].level]) + line; parts[1].level != levelNoOutput || got > budget {
		t.Fatalf("run 2 at level %d: %d bytes with the left-out line, over the budget %d", parts[1].level, got, budget)
	}
}

// A clone's Earlier is its own: a caller that changes it by hand (a page
// reader putting pages together) leaves the thread's as it was.
func TestCloneOwnsItsEarlier(t *testing.T) {
	th := Thread{Earlier: &Earlier{Runs: 12, Parts: 30, Rollbacks: []EarlierRollback{{Target: 3}}}}
	c := th.Clone()
	c.Earlier.Runs = 20
	c.Earlier.Rollbacks = append(c.Earlier.Rollbacks, EarlierRollback{Target: 5})
	if d := gocmp.Diff(Earlier{Runs: 12, Parts: 30, Rollbacks: []EarlierRollback{{Target: 3}}}, *th.Earlier); d != "" {
		t.Fatalf("the thread's earlier after its clone's changed (-want +got):\n%s", d)
	}
}
