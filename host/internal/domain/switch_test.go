package domain

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/baton-run/baton/sdk"
	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"
)

// host plays the orchestrator's part in a provider switch: it opens the
// session a run's provider needs (retiring another provider's, resuming
// the provider's own conversation where the thread has one), sends the
// turn with the handoff the thread holds for it, and keeps, for every
// provider conversation, what that conversation has been told: the runs
// whose turns it took, and the runs the handoffs in those turns carried.
type host struct {
	w        *world
	rt       *rapid.T
	session  string // the open session, if any
	provider string // its provider
	model    string // its model
	command  ProviderCommand
	ref      string // the conversation it runs
	n        int
	turns    int // the turns started
	// convs are the conversations by ref: each its turns, in order.
	convs map[string][]convTurn
	// resumeFails, when set, is asked whether a resume fails.
	resumeFails func() bool
}

// convTurn is one turn a conversation took: the run, and every run the
// conversation knew of after it (what the turn's handoff carried, and the
// run itself).
type convTurn struct {
	run     int
	learned []int
}

func newHost(w *world, rt *rapid.T) *host {
	w.holdSessions = true
	return &host{w: w, rt: rt, convs: map[string][]convTurn{}}
}

// view is what the conversation ref knows of the thread.
func (h *host) view(ref string) []int {
	var out []int
	for _, turn := range h.convs[ref] {
		out = append(out, turn.learned...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// told are the ordinals of the runs a provider is told of (a thread whose
// runs have left it is given whole: see world.whole).
func told(t *Thread) []int {
	var out []int
	for i := range t.Runs {
		if t.Runs[i].told() {
			out = append(out, t.Runs[i].Ordinal)
		}
	}
	return out
}

func (h *host) fatalf(format string, args ...any) {
	if h.rt != nil {
		h.rt.Fatalf(format, args...)
	}
	h.w.t.Fatalf(format, args...)
}

// open performs the session effects the domain decided for run r's
// turn, as the host does, and checks that it chose as the property
// expects: the open session goes on if it runs the provider, model and
// command the thread keeps for it, and the conversation it keeps (one a rollback left behind while
// another provider was the thread's is not resumed); else a new one,
// resuming that conversation where there is one.
func (h *host) open(r *Run) {
	var start StartTurn
	var open *OpenSession
	for _, e := range slices.Backward(h.w.effects) {
		switch e := e.(type) {
		case StartTurn:
			if start.AttemptID == "" && e.AttemptID == r.ActiveAttempt {
				start = e
			}
		case OpenSession:
			if open == nil && e.AttemptID == r.ActiveAttempt {
				open = &e
			}
		}
	}
	if s := h.w.thread.session(h.session); s != nil && s.Status != SessionStatusOpen {
		h.session = "" // retired by a run decided and cancelled before its turn started
	}
	b, _ := h.w.thread.Binding(r.Provider)
	reuse := h.session != "" && h.provider == r.Provider && h.model == r.Model && slices.Equal(h.command.Argv, b.Command.Argv) &&
		slices.Equal(h.command.Env, b.Command.Env) && b.ThreadRef == h.ref
	if start.Reused != reuse || (reuse && start.SessionID != h.session) {
		h.fatalf("run %d on %s: the domain sends its turn to session %s (reused %v); session %s on %s in %s was open (reuse %v)",
			r.Ordinal, r.Provider, start.SessionID, start.Reused, h.session, h.provider, h.ref, reuse)
	}
	if reuse {
		return
	}
	if open == nil || open.SessionID != start.SessionID || open.Provider != r.Provider || open.Resume != b.ThreadRef {
		h.fatalf("run %d on %s: no session opened for its turn %+v, or not the one it needs: %+v", r.Ordinal, r.Provider, start, open)
	}
	h.session, h.provider, h.model, h.command = open.SessionID, r.Provider, r.Model, b.Command
	h.n++
	resumed := b.ThreadRef != "" && (h.resumeFails == nil || !h.resumeFails())
	h.ref = b.ThreadRef
	if !resumed {
		h.ref = fmt.Sprintf("%s-conv-%d", r.Provider, h.n)
		h.convs[h.ref] = nil
	}
	h.w.must(Command{ID: "open", ThreadID: "thr", Payload: RecordSessionOpened{SessionID: h.session, Provider: r.Provider, Model: open.Model,
		ThreadRef: h.ref, ResumeRequested: open.Resume, Resumed: resumed}})
}

// start sends the active run's first turn, checking that the handoff it
// carries tells the conversation exactly the runs it has not seen.
func (h *host) start() {
	t := h.w.thread
	r := t.ActiveRun()
	h.open(r)
	t = h.w.thread
	r = t.ActiveRun()
	input := r.Input
	hof := t.readyHandoff()
	var carried []int
	if hof != nil && hof.ToProvider == r.Provider {
		carried = hof.ordinals()
		if got := t.TurnText(r.ID, r.ActiveAttempt, input); got != hof.Text+"\n\n"+input {
			h.fatalf("run %d is sent %q", r.Ordinal, got)
		}
	} else if got := t.TurnText(r.ID, r.ActiveAttempt, input); got != input {
		h.fatalf("run %d with no handoff is sent %q", r.Ordinal, got)
	}
	before := h.view(h.ref)
	whole := h.w.whole()
	all := told(&whole)
	if both := intersect(before, carried); len(both) > 0 {
		h.fatalf("run %d on %s: the handoff tells conversation %s runs %v again (it saw %v; handoff %+v)", r.Ordinal, r.Provider, h.ref, both, before, hof)
	}
	if got := slices.Sorted(slices.Values(slices.Concat(before, carried))); !slices.Equal(got, all) {
		h.fatalf("run %d on %s: conversation %s saw %v, its handoff carries %v; the thread's told runs are %v (handoff %+v)",
			r.Ordinal, r.Provider, h.ref, before, carried, all, hof)
	}
	if hof != nil && hof.Bytes > max(t.HandoffMaxBytes, DefaultHandoffMaxBytes*boolInt(t.HandoffMaxBytes == 0)) {
		h.fatalf("handoff of %d bytes over the bound %d", hof.Bytes, t.HandoffMaxBytes)
	}
	h.turns++
	turn := fmt.Sprintf("turn-%d", h.turns)
	d := h.w.ev(h.session, sdk.RuntimeEvent{Kind: sdk.EventTurnStarted, ThreadRef: h.ref, TurnRef: turn})
	if consumed := slices.ContainsFunc(d.Events, func(p Payload) bool { _, ok := p.(HandoffConsumed); return ok }); consumed != (carried != nil) {
		h.fatalf("run %d: handoff consumed %v, carried %v", r.Ordinal, consumed, carried)
	}
	h.convs[h.ref] = append(h.convs[h.ref], convTurn{run: r.Ordinal, learned: append(slices.Clone(carried), r.Ordinal)})
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func intersect(a, b []int) []int {
	var out []int
	for _, x := range a {
		if slices.Contains(b, x) {
			out = append(out, x)
		}
	}
	return out
}

// end ends the active run's turn with status.
func (h *host) end(status sdk.Status) {
	r := h.w.thread.ActiveRun()
	h.w.ev(h.session, sdk.RuntimeEvent{Kind: sdk.EventTurnTerminal, TurnRef: h.w.thread.rootTurn(r).ProviderRef, Status: status})
}

// rollback rolls back to the run ordinal's checkpoint; the provider drops
// the rolled-back runs' turns itself (native) or is left for a fresh
// conversation, as the orchestrator does.
func (h *host) rollback(ordinal int, native bool) {
	var id string
	for _, c := range h.w.whole().Checkpoints {
		if c.RunOrdinal == ordinal && c.NodeID == "" && c.Status == CheckpointReady {
			id = c.ID
		}
	}
	if _, err := h.w.rollbackTo(RollbackToCheckpoint{CheckpointID: id}); err != nil {
		h.fatalf("rollback to %d: %v", ordinal, err)
	}
	rb := h.w.thread.Rollbacks[len(h.w.thread.Rollbacks)-1]
	h.w.must(Command{ID: "f", ThreadID: "thr", Payload: RecordFilesRestored{RollbackID: rb.ID}})
	e := lastEffect(h.w).(ReconcileThread)
	how := ReconcileNone
	if e.Turns > 0 {
		how = ReconcileFreshThread
		if native {
			how = ReconcileNative
			var kept []convTurn
			for _, turn := range h.convs[e.ThreadRef] {
				if turn.run <= ordinal {
					kept = append(kept, turn)
				}
			}
			h.convs[e.ThreadRef] = kept
		} else if h.session != "" {
			// The host closes the session that runs the conversation left
			// behind: its provider reports its end.
			h.w.ev(h.session, sdk.RuntimeEvent{Kind: sdk.EventRuntimeExited, Status: sdk.ExitClosed})
			h.session = ""
		}
	}
	h.w.must(Command{ID: "p", ThreadID: "thr", Payload: RecordProviderReconciled{RollbackID: rb.ID, Reconciliation: how,
		ProviderThreadRef: e.ThreadRef, TurnsDropped: e.Turns}})
}

// Property (the issue's): for any sequence of runs, switches between three
// providers, failed resumes and rollbacks, each conversation that takes a
// run has been told every run the thread tells of, exactly once: what it
// saw itself, and what the handoffs it took carried.
func TestSwitchHandoffCoverageProperty(t *testing.T) {
	providers := []string{"codex", "claude", "acp"}
	rapid.Check(t, func(rt *rapid.T) {
		w := newWorldOn(t, "codex")
		h := newHost(w, rt)
		h.resumeFails = func() bool { return rapid.IntRange(0, 5).Draw(rt, "resume fails") == 0 }
		for range rapid.IntRange(1, 25).Draw(rt, "steps") {
			switch rapid.IntRange(0, 9).Draw(rt, "op") {
			case 0, 1, 2:
				p := rapid.SampledFrom(providers).Draw(rt, "provider")
				sw := SwitchProvider{Provider: p, Model: rapid.SampledFrom([]string{"", "big"}).Draw(rt, "model")}
				if rapid.Bool().Draw(rt, "command") {
					sw.ProviderCommand = ProviderCommand{Argv: []string{p}}
				}
				if rapid.IntRange(0, 3).Draw(rt, "bound") == 0 {
					sw.HandoffMaxBytes = MinHandoffMaxBytes
				}
				if _, err := w.decide(Command{ID: "sw", ThreadID: "thr", Payload: sw}); err != nil && w.thread.binding(p) != nil {
					rt.Fatalf("switch to %s, used before: %v", p, err)
				}
			case 3:
				var ends []int
				for _, r := range w.whole().Runs {
					if r.told() {
						ends = append(ends, r.Ordinal)
					}
				}
				if len(ends) > 0 {
					h.rollback(rapid.SampledFrom(append(ends, 0)).Draw(rt, "to"), rapid.Bool().Draw(rt, "native"))
				}
			default:
				w.send(fmt.Sprintf("message %d", w.thread.RunCount()+1))
				switch rapid.IntRange(0, 7).Draw(rt, "how the run goes") {
				case 0: // it fails before any provider takes it
					w.must(Command{ID: "f", ThreadID: "thr", Payload: FailRun{RunID: w.thread.ActiveRun().ID, Failure: Failure{Message: "no plugin"}}})
					continue
				case 1: // a switch while it runs applies to the next run
					h.start()
					p := rapid.SampledFrom(providers).Draw(rt, "provider")
					w.decide(Command{ID: "sw", ThreadID: "thr", Payload: SwitchProvider{Provider: p, ProviderCommand: ProviderCommand{Argv: []string{p}}}})
					if r := w.thread.ActiveRun(); r.Provider != h.provider {
						rt.Fatalf("a switch moved running run %d to %s", r.Ordinal, r.Provider)
					}
				case 2: // a switch before its turn starts, too
					p := rapid.SampledFrom(providers).Draw(rt, "provider")
					w.decide(Command{ID: "sw", ThreadID: "thr", Payload: SwitchProvider{Provider: p, ProviderCommand: ProviderCommand{Argv: []string{p}}}})
					h.start()
				default:
					h.start()
				}
				h.end(rapid.SampledFrom([]sdk.Status{sdk.TurnCompleted, sdk.TurnFailed, sdk.TurnInterrupted}).Draw(rt, "status"))
			}
			// A handoff ready for the next run covers runs ascending, and
			// only runs the thread tells of.
			if r := w.thread.readyHandoff(); r != nil {
				whole := w.whole()
				if !slices.IsSorted(r.ordinals()) || len(intersect(r.ordinals(), told(&whole))) != len(r.Runs) {
					rt.Fatalf("ready handoff %+v; told %v", r, told(&whole))
				}
			}
		}
	})
}

// A switch and a return, step by step: the handoffs, the bindings, and a
// return with nothing new.
func TestSwitchAndReturn(t *testing.T) {
	w := newWorldOn(t, "codex")
	h := newHost(w, nil)
	// Before any run: nothing to tell.
	if got := types(w.switchTo("claude")); got != "thread.provider_switched" {
		t.Fatalf("switch on a new thread: %s", got)
	}
	w.switchTo("codex")
	w.send("one")
	h.start()
	h.end(sdk.TurnCompleted)
	d := w.must(Command{ID: "sw", ThreadID: "thr", Payload: SwitchProvider{Provider: "claude", Model: "opus",
		ProviderCommand: ProviderCommand{Argv: []string{"claude"}, Env: []string{"A=1"}}, HandoffMaxBytes: 5000}})
	if got := types(d); got != "thread.provider_switched handoff.created" {
		t.Fatalf("switch: %s", got)
	}
	// A second switch before the first handoff is given supersedes it.
	d = w.must(Command{ID: "sw", ThreadID: "thr", Payload: SwitchProvider{Provider: "acp", ProviderCommand: ProviderCommand{Argv: []string{"acp"}}}})
	if got := types(d); got != "thread.provider_switched handoff.superseded handoff.created" {
		t.Fatalf("second switch: %s", got)
	}
	hs := w.thread.Handoffs
	if hs[0].Status != HandoffStatusSuperseded || hs[0].SupersededBy != hs[1].ID || hs[1].ToProvider != "acp" || hs[0].ToProvider != "claude" {
		t.Fatalf("handoffs: %+v", hs)
	}
	// Back to codex, which has seen everything: no handoff.
	d = w.must(Command{ID: "sw", ThreadID: "thr", Payload: SwitchProvider{Provider: "codex"}})
	if got := types(d); got != "thread.provider_switched handoff.superseded" || w.thread.Handoffs[1].SupersededBy != "" {
		t.Fatalf("return with nothing new: %s %+v", got, w.thread.Handoffs[1])
	}
	// Claude, used before, keeps its command and model when none is given;
	// the bound set with it is the thread's.
	w.must(Command{ID: "sw", ThreadID: "thr", Payload: SwitchProvider{Provider: "claude"}})
	if w.thread.Model != "opus" || !slices.Equal(w.thread.ProviderCommand.Env, []string{"A=1"}) || w.thread.HandoffMaxBytes != 5000 {
		t.Fatalf("thread after the return to claude: %s %+v %d", w.thread.Model, w.thread.ProviderCommand, w.thread.HandoffMaxBytes)
	}
	// The same again changes nothing; the same provider with another bound
	// or model is a switch.
	if d := w.must(Command{ID: "sw", ThreadID: "thr", Payload: SwitchProvider{Provider: "claude", HandoffMaxBytes: 5000}}); len(d.Events) != 0 {
		t.Fatalf("a switch to where the thread is: %s", types(d))
	}
	if got := types(w.must(Command{ID: "sw", ThreadID: "thr", Payload: SwitchProvider{Provider: "claude", HandoffMaxBytes: 6000}})); got != "thread.provider_switched" {
		t.Fatalf("another bound: %s", got)
	}
	w.send("two")
	h.start()
	h.end(sdk.TurnCompleted)
	w.switchTo("codex")
	w.send("three")
	h.start()
	h.end(sdk.TurnCompleted)
	want := []ProviderBinding{
		{Provider: "codex", Command: ProviderCommand{Argv: []string{"codex"}}, SessionID: "ses_3", ProviderThreadID: w.thread.binding("codex").ProviderThreadID,
			ThreadRef: "codex-conv-1", SeenThrough: 3, Runs: []int{1, 3}},
		{Provider: "claude", Model: "opus", Command: ProviderCommand{Argv: []string{"claude"}, Env: []string{"A=1"}}, SessionID: "ses_2",
			ProviderThreadID: w.thread.binding("claude").ProviderThreadID, ThreadRef: "claude-conv-2", SeenThrough: 2, Runs: []int{2}},
		{Provider: "acp", Command: ProviderCommand{Argv: []string{"acp"}}},
	}
	if diff := cmp.Diff(want, w.thread.ProviderBindings); diff != "" {
		t.Errorf("bindings (-want +got):\n%s", diff)
	}
	if r := w.thread.Runs; r[1].Provider != "claude" || r[1].Model != "opus" || r[2].Provider != "codex" {
		t.Errorf("runs' providers: %+v", r)
	}
	if b, ok := w.thread.Binding("cursor"); ok || b.Provider != "" {
		t.Errorf("a provider never used: %+v", b)
	}
}

func TestSwitchProviderRefused(t *testing.T) {
	w := newWorldOn(t, "codex")
	for _, p := range []SwitchProvider{
		{Provider: ""}, {Provider: "-x", ProviderCommand: ProviderCommand{Argv: []string{"x"}}},
		{Provider: "Codex"}, {Provider: string(make([]byte, 65))},
		{Provider: "claude"}, // never used: its command is needed
		{Provider: "codex", HandoffMaxBytes: MinHandoffMaxBytes - 1},
	} {
		if _, err := w.decide(Command{ID: "sw", ThreadID: "thr", Payload: p}); err == nil || !isInvalid(err) {
			t.Errorf("%+v: %v", p, err)
		}
	}
	c, err := DecodeCommand([]byte(`{"type":"thread.switch_provider","commandId":"c","threadId":"thr","payload":{"provider":"claude","model":"m","providerCommand":{"argv":["claude"]},"handoffMaxBytes":8192}}`))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(SwitchProvider{Provider: "claude", Model: "m", ProviderCommand: ProviderCommand{Argv: []string{"claude"}}, HandoffMaxBytes: 8192}, c.Payload); diff != "" {
		t.Errorf("decoded (-want +got):\n%s", diff)
	}
}

func isInvalid(err error) bool { return errors.Is(err, ErrInvalid) }

// A resume that fails falls back to a fresh conversation told the whole
// thread, also when the thread switched away after the run started: the
// run's provider gets the full summary, not the delta planned for its old
// conversation.
func TestResumeFailsAfterASwitch(t *testing.T) {
	w := newWorldOn(t, "codex")
	h := newHost(w, nil)
	w.send("one")
	h.start()
	h.end(sdk.TurnCompleted)
	w.switchTo("claude")
	w.send("two")
	h.start()
	h.end(sdk.TurnCompleted)
	w.switchTo("codex")
	w.send("three") // starts on codex with a delta of run 2
	delta := *w.thread.readyHandoff()
	w.switchTo("claude")
	fails := true
	h.resumeFails = func() bool { return fails }
	r := w.thread.ActiveRun()
	if r.Provider != "codex" || delta.Strategy != HandoffDeltaSinceLastSeen {
		t.Fatalf("run 3 on %s, handoff %+v", r.Provider, delta)
	}
	old := w.thread.binding("codex").ProviderThreadID
	h.start()
	hs := w.thread.Handoffs
	full := hs[len(hs)-1]
	why := "codex could not resume its conversation codex-conv-1"
	want := ContextHandoff{ID: full.ID, Strategy: HandoffFullThreadSummary, Version: HandoffVersion, FromProvider: "claude", ToProvider: "codex",
		FromRun: 1, ToRun: 2, Runs: []HandoffRun{{Ordinal: 1, RunID: w.thread.Runs[0].ID, Provider: "codex", MessageIDs: []string{w.thread.Runs[0].MessageID}},
			{Ordinal: 2, RunID: w.thread.Runs[1].ID, Provider: "claude", MessageIDs: []string{w.thread.Runs[1].MessageID}}},
		Bytes: len(full.Text), Fallback: why, Status: HandoffStatusConsumed, RunID: r.ID, Text: full.Text}
	if diff := cmp.Diff(want, full); diff != "" {
		t.Errorf("fallback handoff (-want +got):\n%s", diff)
	}
	if d := hs[len(hs)-2]; d.ID != delta.ID || d.Status != HandoffStatusSuperseded || d.SupersededBy != full.ID {
		t.Errorf("the delta: %+v", d)
	}
	if pt := w.thread.providerThread(old); !pt.Detached {
		t.Errorf("the old conversation: %+v", pt)
	}
	if !strings.Contains(full.Text, "could not be resumed ("+why+")") {
		t.Errorf("the text does not say why:\n%s", full.Text)
	}
}

// A log from before switches: runs and sessions name no provider; they are
// the thread's.
func TestSwitchLegacyLogAndEdges(t *testing.T) {
	th := &Thread{}
	for i, p := range []Payload{
		ThreadCreated{Provider: "acp", Model: "m", Cwd: "/w", ProviderCommand: ProviderCommand{Argv: []string{"agent"}}},
		RunQueued{RunID: "r1", Ordinal: 1, MessageID: "m1", Input: "one"},
		RunStarted{RunID: "r1"},
		SessionOpened{SessionID: "s1"},
		ProviderThreadDetached{ProviderThreadID: "never bound"},
	} {
		Evolve(th, Event{Sequence: uint64(i + 1), ThreadID: "thr", At: t0, Payload: p})
	}
	want := []ProviderBinding{{Provider: "acp", Model: "m", Command: ProviderCommand{Argv: []string{"agent"}}, SessionID: "s1", Runs: []int{1}}}
	if diff := cmp.Diff(want, th.ProviderBindings); diff != "" {
		t.Errorf("bindings (-want +got):\n%s", diff)
	}
	if r, s := th.Runs[0], th.ProviderSessions[0]; r.Provider != "acp" || r.Model != "m" || s.Provider != "acp" || s.Model != "m" {
		t.Errorf("run %+v, session %+v", r, s)
	}
	// Runs found by ordinal where ordinals and places differ (an older
	// thread's), and not found.
	th.Runs = []Run{{ID: "a", Ordinal: 2}, {ID: "b", Ordinal: 3}}
	if r := th.runByOrdinal(3); r == nil || r.ID != "b" {
		t.Errorf("run 3: %+v", r)
	}
	if r := th.runByOrdinal(7); r != nil {
		t.Errorf("run 7: %+v", r)
	}
}

// What a run's turn is sent: the handoff goes only with the first attempt
// of a run on the provider it is for.
func TestTurnText(t *testing.T) {
	w := newWorldOn(t, "codex")
	h := newHost(w, nil)
	w.send("one")
	h.start()
	h.end(sdk.TurnCompleted)
	w.switchTo("claude")
	w.send("two")
	r := w.thread.ActiveRun()
	hof := w.thread.readyHandoff()
	for _, tc := range []struct {
		run, attempt, want string
	}{
		{r.ID, r.ActiveAttempt, hof.Text + "\n\nin"},
		{"no run", r.ActiveAttempt, "in"},
		{r.ID, "another attempt", "in"},
		{w.thread.Runs[0].ID, w.thread.Runs[0].Attempts[0].ID, "in"}, // on codex: the handoff is claude's
	} {
		if got := w.thread.TurnText(tc.run, tc.attempt, "in"); got != tc.want {
			t.Errorf("TurnText(%s, %s) = %q, want %q", tc.run, tc.attempt, got, tc.want)
		}
	}
}

// Rollback after switching, both ways: the provider that rolls back
// natively keeps its conversation up to its newest kept turn; another
// provider's conversation that saw a dropped run is left behind, and a
// return to it starts afresh with the whole thread.
func TestRollbackAfterSwitch(t *testing.T) {
	w := newWorldOn(t, "codex")
	h := newHost(w, nil)
	run := func(provider string) {
		if w.thread.Provider != provider {
			w.switchTo(provider)
		}
		w.send("to " + provider)
		h.start()
		h.end(sdk.TurnCompleted)
	}
	run("codex")
	run("claude")
	run("codex") // carries run 2
	codex, claude := *w.thread.binding("codex"), *w.thread.binding("claude")
	if codex.SeenThrough != 3 || claude.SeenThrough != 2 {
		t.Fatalf("seen: codex %d, claude %d", codex.SeenThrough, claude.SeenThrough)
	}
	// Back to run 2 (claude's), natively: codex's turn of run 3, which
	// carried run 2, is dropped, so codex has seen run 1 only.
	h.rollback(2, true)
	rb := w.thread.Rollbacks[0]
	if rb.Reconciliation != ReconcileNative || w.thread.binding("codex").SeenThrough != 1 || w.thread.binding("claude").ProviderThreadID == "" {
		t.Fatalf("after the native rollback: %+v %+v", rb, w.thread.ProviderBindings)
	}
	w.send("codex again")
	if hof := w.thread.readyHandoff(); hof == nil || hof.Strategy != HandoffDeltaSinceLastSeen || !slices.Equal(hof.ordinals(), []int{2}) {
		t.Fatalf("codex's handoff after the rollback: %+v", hof)
	}
	h.start()
	h.end(sdk.TurnCompleted) // run 4
	// Back to run 1, natively again: claude's conversation, which saw run
	// 2, is left behind; codex has seen run 1, all there is to tell.
	h.rollback(1, true)
	var detached []string
	for _, pt := range w.thread.ProviderThreads {
		if pt.Detached {
			detached = append(detached, pt.ProviderRef)
		}
	}
	if want := []string{"claude-conv-2"}; !slices.Equal(detached, want) {
		t.Errorf("detached %v, want %v", detached, want)
	}
	if b := w.thread.binding("codex"); b.ThreadRef != "codex-conv-1" || b.SeenThrough != 1 || w.thread.readyHandoff() != nil {
		t.Fatalf("codex after the second rollback: %+v, handoff %+v", b, w.thread.readyHandoff())
	}
	w.switchTo("claude")
	if hof := w.thread.readyHandoff(); hof.ToProvider != "claude" || hof.Strategy != HandoffFullThreadSummary || !slices.Equal(hof.ordinals(), []int{1}) {
		t.Fatalf("claude's handoff: %+v", hof)
	}
	w.send("claude again")
	h.start()
	if b := w.thread.binding("claude"); b.ThreadRef == "claude-conv-2" || b.SeenThrough != 5 {
		t.Errorf("claude resumed the conversation left behind: %+v", b)
	}
	h.end(sdk.TurnCompleted)
	// Claude's conversation that saw runs 1 and 5 stays when codex, the
	// thread's again, cannot drop its turn of run 6 and starts afresh.
	w.switchTo("codex")
	w.send("codex once more")
	h.start()
	h.end(sdk.TurnCompleted) // run 6
	claudeConv := w.thread.binding("claude").ProviderThreadID
	h.rollback(5, false)
	if b := w.thread.binding("codex"); b.ProviderThreadID != "" || w.thread.binding("claude").ProviderThreadID != claudeConv {
		t.Errorf("after a fresh-thread rollback: %+v", w.thread.ProviderBindings)
	}
}

// Two native rollbacks: the turns the first one dropped stay dropped. A
// conversation whose only kept turns were rolled back earlier has seen
// nothing, so its next run is told every run (found by the coverage
// property).
func TestSecondNativeRollbackForgetsTheFirstsRuns(t *testing.T) {
	w := newWorldOn(t, "codex")
	h := newHost(w, nil)
	run := func(provider string) {
		if w.thread.Provider != provider {
			w.switchTo(provider)
		}
		w.send("to " + provider)
		h.start()
		h.end(sdk.TurnCompleted)
	}
	run("codex")  // 1
	run("claude") // 2, told run 1
	run("claude") // 3
	h.rollback(1, true)
	run("codex")  // 4
	run("claude") // 5, told run 4
	h.rollback(4, true)
	if b := w.thread.binding("claude"); b.ProviderThreadID == "" || b.SeenThrough != 0 {
		t.Fatalf("claude after the second rollback: %+v; want its conversation, having seen nothing kept", b)
	}
	w.send("claude again")
	if hof := w.thread.readyHandoff(); hof == nil || !slices.Equal(hof.ordinals(), []int{1, 4}) {
		t.Fatalf("claude's handoff: %+v; want runs 1 and 4", hof)
	}
}
