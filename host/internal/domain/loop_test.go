package domain

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/baton-run/baton/sdk"
	"github.com/google/go-cmp/cmp"
)

// limitTerminal is a root turn that failed on a limit.
func limitTerminal(turn string, l sdk.Limit) sdk.RuntimeEvent {
	return sdk.RuntimeEvent{Kind: sdk.EventTurnTerminal, TurnRef: turn, Status: sdk.TurnFailed, Limit: &l,
		Failure: &sdk.Failure{Code: "usage_limit", Message: l.Message}}
}

// setPolicy sets the thread's policy.
func (w *world) setPolicy(p ContinuationPolicy) {
	w.t.Helper()
	w.must(Command{ID: "pol", ThreadID: "thr", Payload: SetPolicy{Policy: p}})
}

// turnOn starts the active attempt's provider turn.
func (w *world) turnOn(session, ref string) {
	w.t.Helper()
	w.ev(session, sdk.RuntimeEvent{Kind: sdk.EventTurnStarted, ThreadRef: "pt", TurnRef: ref})
}

func TestLimitWithoutPolicyEndsTheRunBlocked(t *testing.T) {
	w := newWorld(t)
	w.send("one")
	w.open("s1")
	w.turnOn("s1", "u1")
	l := sdk.Limit{Kind: sdk.LimitUsageWindow, Scope: "five_hour", Message: "usage limit reached", ResetsAt: t0.Add(time.Hour)}
	w.ev("s1", limitTerminal("u1", l))
	r := w.thread.Runs[0]
	want := &Failure{Code: "limit", Message: "acp usage limit (five_hour): usage limit reached"}
	wantLimit := &Limit{Kind: LimitUsageWindow, Scope: "five_hour", Message: "usage limit reached", ResetsAt: t0.Add(time.Hour)}
	if r.Status != RunStatusBlocked || !cmp.Equal(r.Failure, want) || !cmp.Equal(r.Limit, wantLimit) {
		t.Fatalf("run: status %s failure %+v limit %+v", r.Status, r.Failure, r.Limit)
	}
	if w.thread.Loop != nil || w.thread.NextWait() != nil {
		t.Fatalf("no policy, yet a loop: %+v", w.thread.Loop)
	}
}

func TestWaitForTheResetThenContinueTheSameRun(t *testing.T) {
	w := newWorld(t)
	w.setPolicy(ContinuationPolicy{OnLimit: OnLimitWait, MaxProbes: 3})
	w.send("one")
	w.open("s1")
	w.turnOn("s1", "u1")
	reset := t0.Add(7 * 24 * time.Hour)
	l := sdk.Limit{Kind: sdk.LimitUsageWindow, Scope: "seven_day", ResetsAt: reset}
	d := w.ev("s1", limitTerminal("u1", l))
	if got := types(d); got != "run.limit_reached node.completed attempt.ended wait.armed" {
		t.Fatalf("limit: %s", got)
	}
	r := w.thread.Runs[0]
	wait := w.thread.NextWait()
	if r.Status != RunStatusWaiting || wait == nil || r.WaitID != wait.ID || wait.Probe != 1 || wait.Kind != WaitContinue {
		t.Fatalf("run %s wait %+v", r.Status, wait)
	}
	if want := reset.Add(Jitter(wait.ID)); !wait.At.Equal(want) {
		t.Fatalf("wait at %s, want the reset plus its jitter %s", wait.At, want)
	}
	// A new message waits behind the waiting run; the idle session may close.
	if got := types(w.must(Command{ID: "m2", ThreadID: "thr", Payload: DispatchMessage{Text: "two"}})); got != "message.added run.queued" {
		t.Fatalf("message during the wait: %s", got)
	}
	if w.thread.InUse() {
		t.Fatalf("a waiting run keeps its session in use")
	}
	// The session ends (idle): the waiting run is not failed by it.
	w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventRuntimeExited, Status: sdk.ExitClosed})
	if st := w.thread.Runs[0].Status; st != RunStatusWaiting {
		t.Fatalf("after the session ended the run is %s", st)
	}
	w.now = wait.At
	d = w.must(Command{ID: "f", ThreadID: "thr", Payload: FireWait{WaitID: wait.ID}})
	if got := types(d); got != "wait.ended attempt.started node.started" {
		t.Fatalf("fire: %s", got)
	}
	if e, ok := d.Effects[1].(StartTurn); !ok || e.Text != DefaultContinueText || e.RunID != r.ID {
		t.Fatalf("continuation effect %+v", e)
	}
	// Fired once: again is nothing.
	if d := w.must(Command{ID: "f2", ThreadID: "thr", Payload: FireWait{WaitID: wait.ID}}); len(d.Events) != 0 {
		t.Fatalf("a second fire: %s", types(d))
	}
	w.open("s2")
	w.turnOn("s2", "u2")
	w.ev("s2", sdk.RuntimeEvent{Kind: sdk.EventTurnTerminal, TurnRef: "u2", Status: sdk.TurnCompleted})
	r = w.thread.Runs[0]
	var reasons []AttemptReason
	for _, a := range r.Attempts {
		reasons = append(reasons, a.Reason)
	}
	if r.Status != RunStatusCompleted || !cmp.Equal(reasons, []AttemptReason{AttemptInitial, AttemptUsageLimitContinuation}) {
		t.Fatalf("run %s attempts %v", r.Status, reasons)
	}
	if w.thread.Runs[1].Status != RunStatusStarting {
		t.Fatalf("the queued run did not start after: %s", w.thread.Runs[1].Status)
	}
}

func TestProbesBackOffThenGiveUp(t *testing.T) {
	w := newWorld(t)
	w.setPolicy(ContinuationPolicy{OnLimit: OnLimitWait, MaxProbes: 2, Probe: Backoff{Interval: time.Minute, Factor: 3, Ceiling: time.Hour}})
	w.send("one")
	w.open("s1")
	w.turnOn("s1", "u1")
	l := sdk.Limit{Kind: sdk.LimitCredits, Message: "credit balance too low"}
	w.ev("s1", limitTerminal("u1", l))
	var at []time.Duration
	for i, turn := range []string{"u2", "u3"} {
		wait := w.thread.NextWait()
		at = append(at, wait.At.Sub(w.env().Now))
		w.now = wait.At
		w.must(Command{ID: "f" + turn, ThreadID: "thr", Payload: FireWait{WaitID: wait.ID}})
		w.turnOn("s1", turn)
		w.ev("s1", limitTerminal(turn, l))
		_ = i
	}
	if !cmp.Equal(at, []time.Duration{time.Minute, 3 * time.Minute}) {
		t.Fatalf("probe waits %v", at)
	}
	r := w.thread.Runs[0]
	if r.Status != RunStatusFailed || r.Failure.Code != "limit_wait_exhausted" {
		t.Fatalf("run %s %+v", r.Status, r.Failure)
	}
}

func TestInterruptCancelsAWait(t *testing.T) {
	w := newWorld(t)
	w.setPolicy(ContinuationPolicy{OnLimit: OnLimitWait})
	w.send("one")
	w.open("s1")
	w.turnOn("s1", "u1")
	w.ev("s1", limitTerminal("u1", sdk.Limit{Kind: sdk.LimitRate}))
	r := w.thread.Runs[0]
	d := w.must(Command{ID: "i", ThreadID: "thr", Payload: InterruptRun{RunID: r.ID}})
	if got := types(d); got != "wait.ended loop.ended run.completing checkpoint.scope.opened checkpoint.requested checkpoint.recorded run.ended" {
		t.Fatalf("interrupt: %s", got)
	}
	if r := w.thread.Runs[0]; r.Status != RunStatusBlocked || r.WaitID != "" || w.thread.NextWait() != nil {
		t.Fatalf("run %s wait %q next %+v", r.Status, r.WaitID, w.thread.NextWait())
	}
	if l := w.thread.Loop; l.Status != LoopStopped {
		t.Fatalf("loop %+v", l)
	}
}

func TestRecoveryKeepsAWait(t *testing.T) {
	w := newWorld(t)
	w.setPolicy(ContinuationPolicy{OnLimit: OnLimitWait})
	w.send("one")
	w.open("s1")
	w.turnOn("s1", "u1")
	w.ev("s1", limitTerminal("u1", sdk.Limit{Kind: sdk.LimitRate}))
	wait := *w.thread.NextWait()
	w.must(Command{ID: "r", ThreadID: "thr", Payload: Recover{Reason: "restart"}})
	w.must(Command{ID: "sd", ThreadID: "thr", Payload: ShutDown{Reason: "stop"}})
	if r := w.thread.Runs[0]; r.Status != RunStatusWaiting || !cmp.Equal(w.thread.NextWait(), &wait) || !w.thread.Live() {
		t.Fatalf("after recovery: run %s wait %+v", r.Status, w.thread.NextWait())
	}
}

func TestUntilLoop(t *testing.T) {
	w := newWorld(t)
	w.setPolicy(ContinuationPolicy{Until: "make check", MaxRuns: 3})
	w.send("fix it")
	check := func(i int, exit int) Decision {
		w.open("s" + string(rune('0'+i)))
		w.turnOn("s"+string(rune('0'+i)), "u"+string(rune('0'+i)))
		d := w.ev("s"+string(rune('0'+i)), sdk.RuntimeEvent{Kind: sdk.EventTurnTerminal, TurnRef: "u" + string(rune('0'+i)), Status: sdk.TurnCompleted})
		var eff *RunCheck
		for _, e := range d.Effects {
			if e, ok := e.(RunCheck); ok {
				eff = &e
			}
		}
		if eff == nil || eff.Command != "make check" || eff.Timeout != DefaultCheckTimeout {
			t.Fatalf("run %d: no check asked for: %+v", i, d.Effects)
		}
		return w.must(Command{ID: "chk", ThreadID: "thr", Payload: RecordCheck{CheckResult: CheckResult{RunID: eff.RunID,
			Command: eff.Command, ExitCode: exit, Output: "FAIL x\n"}}})
	}
	d := check(1, 1)
	if got := types(d); got != "loop.check_recorded message.added run.queued run.started attempt.started node.started" {
		t.Fatalf("failed check: %s", got)
	}
	if in := w.thread.Runs[1].Input; !strings.Contains(in, "The check `make check` did not pass (exit 1).") || !strings.Contains(in, "FAIL x") {
		t.Fatalf("continuation message %q", in)
	}
	check(2, 2)
	d = check(3, 0)
	if got := types(d); got != "loop.check_recorded loop.ended" {
		t.Fatalf("passing check: %s", got)
	}
	if l := w.thread.Loop; l.Status != LoopDone || l.Runs != 3 || w.thread.Unattended() {
		t.Fatalf("loop %+v", l)
	}
}

func TestSetPolicyRefusals(t *testing.T) {
	w := newWorld(t)
	_, err := w.decide(Command{ID: "p", ThreadID: "thr", Payload: SetPolicy{Policy: ContinuationPolicy{OnLimit: "later"}}})
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "on-limit") {
		t.Fatalf("bad on-limit: %v", err)
	}
	_, err = w.decide(Command{ID: "p", ThreadID: "thr", Payload: SetPolicy{Policy: ContinuationPolicy{OnLimit: OnLimitSwitch, SwitchTo: "claude"}}})
	if !errors.Is(err, ErrNoProviderCommand) {
		t.Fatalf("switch to an unused provider without a command: %v", err)
	}
	if d := w.must(Command{ID: "p", ThreadID: "thr", Payload: SetPolicy{}}); len(d.Events) != 0 {
		t.Fatalf("turning off no policy: %s", types(d))
	}
}

func TestSwitchOnLimitAndReturn(t *testing.T) {
	w := newWorld(t)
	w.setPolicy(ContinuationPolicy{OnLimit: OnLimitSwitch, SwitchTo: "claude", Return: true,
		SwitchCommand: ProviderCommand{Argv: []string{"claude"}}})
	w.send("one")
	w.open("s1")
	w.turnOn("s1", "u1")
	w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventTurnTerminal, TurnRef: "u1", Status: sdk.TurnCompleted})
	w.send("two")
	w.turnOn("s1", "u2")
	reset := t0.Add(2 * time.Hour)
	d := w.ev("s1", limitTerminal("u2", sdk.Limit{Kind: sdk.LimitUsageWindow, ResetsAt: reset}))
	if got := types(d); got != "run.limit_reached node.completed attempt.ended thread.provider_switched handoff.created attempt.started node.started wait.armed" {
		t.Fatalf("limit: %s", got)
	}
	r := w.thread.Runs[1]
	if r.Provider != "claude" || w.thread.Provider != "claude" {
		t.Fatalf("run on %s, thread on %s", r.Provider, w.thread.Provider)
	}
	h := w.thread.Handoffs[len(w.thread.Handoffs)-1]
	if h.ToProvider != "claude" || h.Strategy != HandoffFullThreadSummary || !cmp.Equal(h.ordinals(), []int{1}) {
		t.Fatalf("handoff %+v", h)
	}
	var start StartTurn
	var open OpenSession
	for _, e := range d.Effects {
		switch e := e.(type) {
		case StartTurn:
			start = e
		case OpenSession:
			open = e
		}
	}
	if open.Provider != "claude" || start.SessionID != open.SessionID || !strings.HasSuffix(start.Text, "\n\ntwo") {
		t.Fatalf("continuation %+v in %+v", start, open)
	}
	if text := w.thread.TurnText(r.ID, start.AttemptID, start.Text); !strings.HasPrefix(text, h.Text) {
		t.Fatalf("the continuation does not carry the handoff: %q", text)
	}
	ret := w.thread.Loop.Return
	if ret == nil || ret.Provider != "acp" || !ret.At.Equal(reset.Add(Jitter(ret.ID))) {
		t.Fatalf("return %+v", ret)
	}
	w.must(Command{ID: "o2", ThreadID: "thr", Payload: RecordSessionOpened{SessionID: "s2", Provider: "claude", ThreadRef: "ct"}})
	w.ev("s2", sdk.RuntimeEvent{Kind: sdk.EventTurnStarted, ThreadRef: "ct", TurnRef: "c1"})
	w.ev("s2", sdk.RuntimeEvent{Kind: sdk.EventTurnTerminal, TurnRef: "c1", Status: sdk.TurnCompleted})
	w.now = ret.At
	d = w.must(Command{ID: "ret", ThreadID: "thr", Payload: FireWait{WaitID: ret.ID}})
	if got := types(d); got != "wait.ended thread.provider_switched handoff.created" {
		t.Fatalf("return: %s", got)
	}
	h = w.thread.Handoffs[len(w.thread.Handoffs)-1]
	if w.thread.Provider != "acp" || h.Strategy != HandoffDeltaSinceLastSeen || !cmp.Equal(h.ordinals(), []int{2}) {
		t.Fatalf("back on %s with handoff %+v", w.thread.Provider, h)
	}
}

// A switch by hand cancels a return the loop had armed: the person's
// choice stands.
func TestSwitchByHandCancelsAReturn(t *testing.T) {
	w := newWorld(t)
	w.setPolicy(ContinuationPolicy{OnLimit: OnLimitSwitch, SwitchTo: "claude", Return: true,
		SwitchCommand: ProviderCommand{Argv: []string{"claude"}}})
	w.send("one")
	w.open("s1")
	w.turnOn("s1", "u1")
	w.ev("s1", limitTerminal("u1", sdk.Limit{Kind: sdk.LimitUsageWindow, ResetsAt: t0.Add(time.Hour)}))
	ret := w.thread.Loop.Return.ID
	d := w.must(Command{ID: "sw", ThreadID: "thr", Payload: SwitchProvider{Provider: "acp"}})
	if got := types(d); !strings.HasPrefix(got, "wait.ended thread.provider_switched") {
		t.Fatalf("switch by hand: %s", got)
	}
	if w.thread.NextWait() != nil || w.thread.wait(ret) != nil {
		t.Fatalf("the return is still armed: %+v", w.thread.Loop.Return)
	}
}

// A run's usage is its attempts': the tokens a limited attempt used count
// with its continuation's, toward the loop's budget too. A log from
// before attempts had usage keeps the run's as reported.
func TestUsageAddsUpOverAttempts(t *testing.T) {
	w := newWorld(t)
	w.setPolicy(ContinuationPolicy{OnLimit: OnLimitWait, MaxTokens: 1000})
	w.send("one")
	w.open("s1")
	w.turnOn("s1", "u1")
	w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventUsage, TurnRef: "u1", Usage: &sdk.Usage{InputTokens: 800, TotalTokens: 900}})
	w.ev("s1", limitTerminal("u1", sdk.Limit{Kind: sdk.LimitRate}))
	w.must(Command{ID: "f", ThreadID: "thr", Payload: FireWait{WaitID: w.thread.NextWait().ID}})
	w.turnOn("s1", "u2")
	w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventUsage, TurnRef: "u2", Usage: &sdk.Usage{InputTokens: 5, TotalTokens: 10}})
	w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventUsage, TurnRef: "u2", Usage: &sdk.Usage{InputTokens: 15, TotalTokens: 20}})
	w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventTurnTerminal, TurnRef: "u2", Status: sdk.TurnCompleted})
	r := w.thread.Runs[0]
	if diff := cmp.Diff(&Usage{InputTokens: 815, TotalTokens: 920}, r.Usage); diff != "" {
		t.Fatalf("run usage (-want +got):\n%s", diff)
	}
	if l := w.thread.Loop; l.Tokens != 920 {
		t.Fatalf("loop tokens %d", l.Tokens)
	}
	// An event from a log written before: the run's usage as reported.
	var old Thread
	for _, p := range []Payload{ThreadCreated{Provider: "acp", Cwd: "/w"}, RunQueued{RunID: "r1", Ordinal: 1},
		UsageReported{RunID: "r1", Usage: Usage{TotalTokens: 7}}} {
		Evolve(&old, Event{ThreadID: "thr", At: t0, Payload: p})
	}
	if diff := cmp.Diff(&Usage{TotalTokens: 7}, old.Runs[0].Usage); diff != "" {
		t.Fatalf("old log's usage (-want +got):\n%s", diff)
	}
}
