package domain

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-run/baton/sdk"
)

// Silence: a provider that says nothing mid-turn for the stall timeout has
// its process ended by the host and the run fails saying so; one waiting
// for an answer is not silent; a request nobody answers within the
// request timeout is declined (an approval) or cancelled (anything else)
// by the timeout.

const stallTimeout = 30 * time.Minute

func stallCmd(p StallTurn) Command { return Command{ID: "stall", ThreadID: "thr", Payload: p} }

func expireCmd(p ExpireRequest) Command { return Command{ID: "expire", ThreadID: "thr", Payload: p} }

// asking is a world whose thread leaves every request to a client (policy
// ask), with run 1's turn running in session s1.
func asking(t *testing.T) *world {
	w := &world{t: t, thread: &Thread{}, replica: &Thread{}}
	w.must(Command{ID: "c", ThreadID: "thr", Payload: CreateThread{Provider: "acp", Cwd: "/w", ApprovalPolicy: ApproveAsk,
		ProviderCommand: ProviderCommand{Argv: []string{"agent"}}}})
	w.send("one")
	w.open("s1")
	w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventTurnStarted, ThreadRef: "pt", TurnRef: "u1"})
	return w
}

// opened opens a request of a kind on run 1's turn.
func (w *world) opened(ref string, kind sdk.RequestKind) {
	w.t.Helper()
	w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventRequestOpened, TurnRef: "u1", RequestRef: ref, RequestKind: kind, Title: string(kind)})
}

// The stall timeout runs from the last thing recorded of the thread; when
// it has passed, StallTurn ends the session's process, and however the
// session's end comes, the run fails with the stall's reason, its session
// ended by the host.
func TestSilentTurnStalls(t *testing.T) {
	for _, end := range []string{"turn terminal, then the exit", "the exit alone"} {
		t.Run(end, func(t *testing.T) {
			w := running(t, Capabilities{})
			w.send("next")
			r := w.thread.Runs[0]
			if _, _, ok := w.thread.StallDeadline(0); ok {
				t.Fatal("a stall deadline with no timeout")
			}
			w.now = t0.Add(time.Minute)
			w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventContentDelta, TurnRef: "u1", ItemRef: "m1", ItemKind: sdk.ItemAssistantMessage, Text: "Thinking"})
			cmd, at, ok := w.thread.StallDeadline(stallTimeout)
			want := StallTurn{RunID: r.ID, AttemptID: r.ActiveAttempt, Since: t0.Add(time.Minute), Timeout: stallTimeout}
			if !ok || !cmp.Equal(cmd, want) || !at.Equal(t0.Add(time.Minute+stallTimeout)) {
				t.Fatalf("deadline: %+v at %v (%v); want %+v at %v", cmd, at, ok, want, t0.Add(time.Minute+stallTimeout))
			}
			w.now = at
			n := len(w.effects)
			if got := types(w.must(stallCmd(cmd))); got != "run.stalled" {
				t.Fatalf("stall: %s", got)
			}
			wantEff := []Effect{EndSession{EffectHead: EffectHead{ThreadID: "thr"}, RunID: r.ID, AttemptID: r.ActiveAttempt, SessionID: "s1"}}
			if diff := cmp.Diff(wantEff, w.effects[n:]); diff != "" {
				t.Fatalf("effects (-want +got):\n%s", diff)
			}
			if _, _, ok := w.thread.StallDeadline(stallTimeout); ok {
				t.Fatal("a stall deadline once the process is being ended")
			}
			// Asked again, or interrupted meanwhile: nothing more to do.
			if d := w.must(stallCmd(cmd)); len(d.Events) != 0 {
				t.Fatalf("stall twice: %s", types(d))
			}
			if d := w.must(interruptCmd(r.ID, false)); len(d.Events) != 0 {
				t.Fatalf("interrupt of a stalled run: %s", types(d))
			}
			reason := "the provider sent nothing for 30m0s mid-turn (the host's turn stall timeout), so the host ended its process"
			if end == "turn terminal, then the exit" {
				d := w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventTurnTerminal, TurnRef: "u1", Status: sdk.TurnFailed,
					Failure: &sdk.Failure{Code: "closed", Message: "the session was closed"}})
				if got := types(d); got != "message.completed node.completed node.completed run.completing checkpoint.scope.opened checkpoint.requested checkpoint.recorded run.ended run.started attempt.started node.started" {
					t.Fatalf("terminal: %s", got)
				}
			}
			w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventRuntimeExited, Status: sdk.ExitClosed})
			got := w.thread.Runs[0]
			if got.Status != RunStatusFailed || got.StopReason != "" {
				t.Fatalf("run: %s %q", got.Status, got.StopReason)
			}
			if diff := cmp.Diff(&Failure{Code: FailureStalled, Message: reason}, got.Failure); diff != "" {
				t.Fatalf("failure (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(RunStop{Forced: reason, Stalled: true}, got.Stop); diff != "" {
				t.Fatalf("run's stop (-want +got):\n%s", diff)
			}
			if s := w.thread.ProviderSessions[0]; s.Status != SessionStatusEnded || s.EndReason != "ended by the host: "+reason {
				t.Fatalf("session: %s %q", s.Status, s.EndReason)
			}
			if next := w.thread.Runs[1]; next.Status != RunStatusStarting {
				t.Fatalf("the next run: %s", next.Status)
			}
		})
	}
}

// Anything recorded of the thread after the deadline was armed moves it:
// the StallTurn of the old one finds the provider was heard from, and does
// nothing.
func TestATurnHeardFromIsNotStalled(t *testing.T) {
	w := running(t, Capabilities{})
	old, _, _ := w.thread.StallDeadline(stallTimeout)
	w.now = t0.Add(20 * time.Minute)
	w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventItemStarted, TurnRef: "u1", ItemRef: "c1", ItemKind: "command_execution"})
	w.now = t0.Add(stallTimeout)
	if d := w.must(stallCmd(old)); len(d.Events) != 0 || w.thread.Runs[0].Stop.Forced != "" {
		t.Fatalf("a stall of a turn heard from since: %s", types(d))
	}
	if _, at, ok := w.thread.StallDeadline(stallTimeout); !ok || !at.Equal(t0.Add(20*time.Minute+stallTimeout)) {
		t.Fatalf("deadline %v (%v), want 30m after the last event", at, ok)
	}
}

// No stall is due for a run whose turn no provider has yet (its start
// call has a deadline of its own), nor for one interrupted with a
// deadline (its grace ends it sooner), nor for one the host stopped by
// force, nor for one waiting for a limit.
func TestNoStallWithoutATurnToWaitFor(t *testing.T) {
	w := newWorld(t)
	w.send("one")
	if _, _, ok := w.thread.StallDeadline(stallTimeout); ok {
		t.Fatal("a stall deadline before the turn was sent")
	}
	w.open("s1")
	r := w.thread.Runs[0]
	w.must(Command{ID: "td", ThreadID: "thr", Payload: RecordTurnDispatched{RunID: r.ID, AttemptID: r.ActiveAttempt, SessionID: "s1"}})
	if _, _, ok := w.thread.StallDeadline(stallTimeout); !ok {
		t.Fatal("no stall deadline for a turn the provider took but never started")
	}
	w.must(interruptCmd(r.ID, false))
	if _, _, ok := w.thread.StallDeadline(stallTimeout); ok {
		t.Fatal("a stall deadline beside an interrupt's")
	}
	w.must(Command{ID: "f", ThreadID: "thr", Payload: ForceStop{RunID: r.ID, AttemptID: r.ActiveAttempt}})
	if _, _, ok := w.thread.StallDeadline(stallTimeout); ok {
		t.Fatal("a stall deadline once the stop is forced")
	}

	lw := newWorld(t)
	lw.setPolicy(ContinuationPolicy{OnLimit: OnLimitWait, MaxProbes: 3})
	lw.send("one")
	lw.open("s1")
	lw.turnOn("s1", "u1")
	lw.ev("s1", limitTerminal("u1", sdk.Limit{Kind: sdk.LimitUsageWindow, Scope: "five_hour", ResetsAt: t0.Add(time.Hour)}))
	if _, _, ok := lw.thread.StallDeadline(stallTimeout); ok || lw.thread.Runs[0].Status != RunStatusWaiting {
		t.Fatalf("a stall deadline for a run waiting for a limit (%s)", lw.thread.Runs[0].Status)
	}
}

// A provider waiting for an answer is not silent: no stall is due while
// its request waits, and once it is answered the provider has the whole
// timeout from the answer. An answer on its way that the provider does
// not take up leaves it silent again.
func TestWaitingForAnAnswerIsNotStalling(t *testing.T) {
	w := asking(t)
	before, _, _ := w.thread.StallDeadline(stallTimeout)
	w.now = t0.Add(time.Minute)
	w.opened("q1", sdk.RequestPermission)
	if _, _, ok := w.thread.StallDeadline(stallTimeout); ok || w.thread.Runs[0].Status != RunStatusWaiting {
		t.Fatalf("a stall deadline while the provider waits for an answer (%s)", w.thread.Runs[0].Status)
	}
	w.now = t0.Add(2 * time.Hour)
	if d := w.must(stallCmd(before)); len(d.Events) != 0 {
		t.Fatalf("a stall while the provider waits for an answer: %s", types(d))
	}
	q := w.thread.Requests[0]
	w.must(Command{ID: "a", ThreadID: "thr", Payload: RespondToRequest{RequestID: q.ID, Decision: DecisionAccept}})
	cmd, at, ok := w.thread.StallDeadline(stallTimeout)
	if !ok || !at.Equal(t0.Add(2*time.Hour+stallTimeout)) {
		t.Fatalf("deadline after the answer: %v (%v); want 30m after it", at, ok)
	}
	w.now = at
	if got := types(w.must(stallCmd(cmd))); got != "run.stalled" {
		t.Fatalf("silent after the answer: %s", got)
	}
}

// A run that fails for a stall does not end the thread's unattended loop,
// as any other failure does: the loop asks for its check, which says
// whether the work goes on.
func TestLoopGoesOnAfterAStall(t *testing.T) {
	w := newWorld(t)
	w.setPolicy(ContinuationPolicy{Until: "make check", MaxRuns: 3})
	w.send("fix it")
	w.open("s1")
	w.turnOn("s1", "u1")
	cmd, at, _ := w.thread.StallDeadline(stallTimeout)
	w.now = at
	w.must(stallCmd(cmd))
	d := w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventRuntimeExited, Status: sdk.ExitClosed})
	if got := types(d); !strings.HasSuffix(got, "run.ended loop.check_requested") {
		t.Fatalf("the stalled run's end: %s", got)
	}
	if l := w.thread.Loop; l.Status != LoopActive || !l.CheckPending {
		t.Fatalf("loop after a stall: %+v", l)
	}
}

// A request nobody answers in time is answered by the timeout: an
// approval declined, a question or a request of a kind Baton does not
// know cancelled; the oldest first, each from when it was opened.
func TestUnansweredRequestsExpire(t *testing.T) {
	const timeout = 5 * time.Minute
	w := asking(t)
	if _, _, ok := w.thread.RequestDeadline(timeout); ok {
		t.Fatal("a request deadline with no request")
	}
	w.now = t0.Add(time.Minute)
	w.opened("q1", sdk.RequestCommandApproval)
	w.now = t0.Add(2 * time.Minute)
	w.opened("q2", sdk.RequestUserInput)
	w.opened("q3", sdk.RequestGeneric)
	if _, _, ok := w.thread.RequestDeadline(0); ok {
		t.Fatal("a request deadline with no timeout")
	}
	q1, q2, q3 := w.thread.Requests[0], w.thread.Requests[1], w.thread.Requests[2]
	type due struct {
		Cmd ExpireRequest
		At  time.Time
	}
	next := func() due {
		cmd, at, ok := w.thread.RequestDeadline(timeout)
		if !ok {
			return due{}
		}
		return due{cmd, at}
	}
	if diff := cmp.Diff(due{ExpireRequest{RequestID: q1.ID}, t0.Add(6 * time.Minute)}, next()); diff != "" {
		t.Fatalf("first deadline (-want +got):\n%s", diff)
	}
	w.now = t0.Add(6 * time.Minute)
	n := len(w.effects)
	if got := types(w.must(expireCmd(ExpireRequest{RequestID: q1.ID}))); got != "request.answered" {
		t.Fatalf("expire the approval: %s", got)
	}
	if diff := cmp.Diff(due{ExpireRequest{RequestID: q2.ID}, t0.Add(7 * time.Minute)}, next()); diff != "" {
		t.Fatalf("second deadline (-want +got):\n%s", diff)
	}
	w.now = t0.Add(7 * time.Minute)
	w.must(expireCmd(ExpireRequest{RequestID: q2.ID}))
	w.must(expireCmd(ExpireRequest{RequestID: q3.ID}))
	if got := next(); got != (due{}) {
		t.Fatalf("a deadline once every request was answered: %+v", got)
	}
	resp := func(ref string, v RequestDecision) Effect {
		return Respond{EffectHead: EffectHead{ThreadID: "thr"}, RunID: w.thread.Runs[0].ID, SessionID: "s1", RequestRef: ref, Decision: v}
	}
	if diff := cmp.Diff([]Effect{resp("q1", DecisionDecline), resp("q2", DecisionCancel), resp("q3", DecisionCancel)}, w.effects[n:]); diff != "" {
		t.Fatalf("answers (-want +got):\n%s", diff)
	}
	for _, q := range w.thread.Requests {
		if q.AnsweredBy != AnsweredByTimeout || q.Status != RequestStatusPending {
			t.Fatalf("request %s: answered by %q, %s", q.ProviderRef, q.AnsweredBy, q.Status)
		}
	}
	// Answered already (or resolved, or gone): nothing to do.
	if d := w.must(expireCmd(ExpireRequest{RequestID: q1.ID})); len(d.Events) != 0 {
		t.Fatalf("expire an answered request: %s", types(d))
	}
	if d := w.must(expireCmd(ExpireRequest{RequestID: "req_nope"})); len(d.Events) != 0 {
		t.Fatalf("expire an unknown request: %s", types(d))
	}
	// The provider takes the decline; the run goes on, its requests done.
	w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventRequestResolved, RequestRef: "q1", Status: sdk.DecisionDecline})
	w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventRequestResolved, RequestRef: "q2", Status: sdk.DecisionCancel})
	w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventRequestResolved, RequestRef: "q3", Status: sdk.DecisionCancel})
	var st []RequestStatus
	for _, q := range w.thread.Requests {
		st = append(st, q.Status)
	}
	if diff := cmp.Diff([]RequestStatus{RequestStatusResolved, RequestStatusCancelled, RequestStatusCancelled}, st); diff != "" || w.thread.Runs[0].Status != RunStatusRunning {
		t.Fatalf("requests (-want +got):\n%s\nrun %s", diff, w.thread.Runs[0].Status)
	}
}

// The timeout's answer that does not reach the provider is sent again, by
// the timeout, a few times, as a policy's is; then the request is a
// client's. A client's answer that did not reach it gives the timeout
// another go.
func TestTheTimeoutsAnswerIsRetried(t *testing.T) {
	const timeout = time.Minute
	w := asking(t)
	w.opened("q1", sdk.RequestPermission)
	id := w.thread.Requests[0].ID
	w.must(expireCmd(ExpireRequest{RequestID: id}))
	failed := func() Decision {
		return w.must(Command{ID: "rf", ThreadID: "thr", Payload: RespondFailed{RequestID: id, Reason: "refused"}})
	}
	for i := 1; i < policyAnswerTries; i++ {
		if got := types(failed()); got != "request.answer.failed request.answered" {
			t.Fatalf("failure %d: %s", i, got)
		}
		if q := w.thread.Requests[0]; q.AnsweredBy != AnsweredByTimeout || q.Decision != DecisionDecline {
			t.Fatalf("failure %d: answered by %q with %q", i, q.AnsweredBy, q.Decision)
		}
	}
	if got := types(failed()); got != "request.answer.failed" {
		t.Fatalf("last failure: %s", got)
	}
	if _, _, ok := w.thread.RequestDeadline(timeout); ok {
		t.Fatal("a deadline once the timeout's tries are spent: the request is a client's")
	}
	if d := w.must(expireCmd(ExpireRequest{RequestID: id, Failures: policyAnswerTries})); len(d.Events) != 0 {
		t.Fatalf("expire once the tries are spent: %s", types(d))
	}

	c := asking(t)
	c.opened("q1", sdk.RequestPermission)
	id = c.thread.Requests[0].ID
	c.must(Command{ID: "a", ThreadID: "thr", Payload: RespondToRequest{RequestID: id, Decision: DecisionAccept}})
	if _, _, ok := c.thread.RequestDeadline(timeout); ok {
		t.Fatal("a deadline for a request a client answered")
	}
	c.must(Command{ID: "rf", ThreadID: "thr", Payload: RespondFailed{RequestID: id, Reason: "refused"}})
	cmd, at, ok := c.thread.RequestDeadline(timeout)
	if want := (ExpireRequest{RequestID: id, Failures: 1}); !ok || cmd != want || !at.Equal(t0.Add(timeout)) {
		t.Fatalf("deadline after a client's answer failed: %+v at %v (%v)", cmd, at, ok)
	}
}
