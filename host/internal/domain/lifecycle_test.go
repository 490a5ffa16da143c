package domain

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/baton-run/baton/sdk"
)

// running is a world with one run whose root turn u1 is running in s1.
func running(t *testing.T, caps Capabilities) *world {
	w := newWorld(t)
	w.caps = caps
	w.send("one")
	w.open("s1")
	w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventTurnStarted, ThreadRef: "pt", TurnRef: "u1"})
	return w
}

func (w *world) dispatch(p DispatchMessage) (Decision, error) {
	return w.decide(Command{ID: "m", ThreadID: "thr", Payload: p})
}

func lastEffect(w *world) Effect { return w.effects[len(w.effects)-1] }

func TestAutoModeSteersNatively(t *testing.T) {
	w := running(t, Capabilities{NativeSteering: true})
	d, err := w.dispatch(DispatchMessage{Text: "focus", MessageID: "m2"})
	if err != nil || types(d) != "message.added run.steered" {
		t.Fatalf("steer: %s %v", types(d), err)
	}
	e, ok := lastEffect(w).(Steer)
	if !ok || e.TurnRef != "u1" || e.SessionID != "s1" || e.Text != "focus" || e.MessageID != "m2" {
		t.Fatalf("steer effect: %+v", e)
	}
	if len(w.thread.Runs) != 1 || w.thread.Messages[1].RunID != w.thread.Runs[0].ID {
		t.Fatalf("steering made a run or lost the message: %+v", w.thread.Messages)
	}
	// The provider refused it (the turn had ended): the message becomes a run.
	d = w.must(Command{ID: "sf", ThreadID: "thr", Payload: SteerFailed{RunID: w.thread.Runs[0].ID, MessageID: "m2", Reason: "not steerable"}})
	if got := types(d); got != "diagnostic.recorded run.queued" {
		t.Fatalf("steer failed: %s", got)
	}
	if r := w.thread.Runs[1]; r.Status != RunStatusQueued || r.Ordinal != 2 || w.thread.Messages[1].RunID != r.ID {
		t.Fatalf("queued run: %+v", r)
	}
	if _, err := w.decide(Command{ID: "sf", ThreadID: "thr", Payload: SteerFailed{MessageID: "nope"}}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("steer failed for an unknown message: %v", err)
	}
	// A message id used before is refused.
	if _, err := w.dispatch(DispatchMessage{Text: "x", MessageID: "m2"}); !errors.Is(err, ErrConflict) {
		t.Fatalf("duplicate message id: %v", err)
	}
}

// Invariant 4: without native steering the active attempt is interrupted
// and a replacement attempt starts under the same run.
func TestAutoModeRestartsWithoutNativeSteering(t *testing.T) {
	w := running(t, Capabilities{})
	w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventItemStarted, TurnRef: "u1", ItemRef: "t1"})
	d, err := w.dispatch(DispatchMessage{Text: "no, the other file"})
	if err != nil || types(d) != "message.added run.restart.requested" {
		t.Fatalf("restart: %s %v", types(d), err)
	}
	if e, ok := lastEffect(w).(Interrupt); !ok || e.TurnRef != "u1" || e.SessionID != "s1" {
		t.Fatalf("interrupt effect: %+v", e)
	}
	n := len(w.effects)
	// A second message joins the same replacement: no second interrupt.
	if d, _ := w.dispatch(DispatchMessage{Text: "and be quick"}); types(d) != "message.added run.restart.requested" || len(w.effects) != n {
		t.Fatalf("second restart message: %s, %d effects", types(d), len(w.effects)-n)
	}
	d = w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventTurnTerminal, TurnRef: "u1", Status: sdk.TurnInterrupted})
	if got := types(d); got != "node.completed node.completed attempt.ended attempt.started node.started" {
		t.Fatalf("terminal of the replaced attempt: %s", got)
	}
	r := w.thread.Runs[0]
	if len(w.thread.Runs) != 1 || len(r.Attempts) != 2 || r.Status != RunStatusStarting || len(r.PendingRestart) != 0 {
		t.Fatalf("run after restart: %+v", r)
	}
	if a := r.Attempts[0]; a.Status != AttemptStatus(RunStatusInterrupted) || a.EndedAt == nil {
		t.Fatalf("first attempt: %+v", a)
	}
	if a := r.Attempts[1]; a.Reason != AttemptSteeringRestart || r.ActiveAttempt != a.ID {
		t.Fatalf("second attempt: %+v", a)
	}
	if e, ok := lastEffect(w).(StartTurn); !ok || e.Text != "no, the other file\n\nand be quick" || e.AttemptID != r.Attempts[1].ID {
		t.Fatalf("replacement start: %+v", e)
	}
	if w.thread.ProviderTurns[0].Status != ItemStatus(RunStatusInterrupted) {
		t.Fatalf("old provider turn: %+v", w.thread.ProviderTurns[0])
	}
	w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventTurnStarted, ThreadRef: "pt", TurnRef: "u2"})
	w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventTurnTerminal, TurnRef: "u2", Status: sdk.TurnCompleted})
	if r := w.thread.Runs[0]; r.Status != RunStatusCompleted || r.FinalAttempt != r.Attempts[1].ID {
		t.Fatalf("run: %+v", r)
	}
}

func TestDispatchModes(t *testing.T) {
	w := newWorld(t)
	if d, err := w.dispatch(DispatchMessage{Text: "zero"}); err != nil || !strings.Contains(types(d), "run.started") {
		t.Fatalf("auto on an idle thread: %s %v", types(d), err)
	}
	w.must(Command{ID: "i", ThreadID: "thr", Payload: InterruptRun{RunID: w.thread.Runs[0].ID}})
	w.open("s0")
	w.ev("s0", sdk.RuntimeEvent{Kind: sdk.EventTurnTerminal, TurnRef: "none", Status: sdk.TurnInterrupted}) // unknown turn
	w.must(Command{ID: "f", ThreadID: "thr", Payload: FailRun{RunID: w.thread.Runs[0].ID, Failure: Failure{Message: "x"}}})
	for _, p := range []DispatchMessage{
		{Text: "x", Mode: ModeSteerActive},
		{Text: "x", Mode: ModeRestartActive},
	} {
		if _, err := w.dispatch(p); !errors.Is(err, ErrConflict) {
			t.Errorf("%s on an idle thread: %v", p.Mode, err)
		}
	}
	if _, err := w.dispatch(DispatchMessage{Text: "x", Mode: "later"}); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "later") {
		t.Errorf("unknown mode: %v", err)
	}
	if d, err := w.dispatch(DispatchMessage{Text: "one", Mode: ModeStartImmediately}); err != nil || !strings.Contains(types(d), "run.started") {
		t.Fatalf("start immediately: %s %v", types(d), err)
	}
	if _, err := w.dispatch(DispatchMessage{Text: "x", Mode: ModeStartImmediately}); !errors.Is(err, ErrConflict) {
		t.Errorf("start immediately behind an active run: %v", err)
	}
	// Before the provider turn starts, the automatic choice queues, and
	// native steering has nothing to attach to.
	if d, _ := w.dispatch(DispatchMessage{Text: "two"}); types(d) != "message.added run.queued" {
		t.Errorf("auto while starting: %s", types(d))
	}
	w.caps.NativeSteering = true
	if _, err := w.dispatch(DispatchMessage{Text: "x", Mode: ModeSteerActive}); !errors.Is(err, ErrConflict) {
		t.Errorf("steer before the turn started: %v", err)
	}
	w.open("s1")
	w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventTurnStarted, ThreadRef: "pt", TurnRef: "u1"})
	if _, err := w.dispatch(DispatchMessage{Text: "x", Mode: ModeSteerActive, TargetRunID: "run_other"}); !errors.Is(err, ErrConflict) {
		t.Errorf("steer for a run that is not active: %v", err)
	}
	w.caps.NativeSteering = false
	if _, err := w.dispatch(DispatchMessage{Text: "x", Mode: ModeSteerActive}); !errors.Is(err, ErrUnsupported) {
		t.Errorf("steer without native steering: %v", err)
	}
	// Restart before the turn has started: the interrupt names no turn.
	w2 := newWorld(t)
	w2.send("one")
	if d, err := w2.dispatch(DispatchMessage{Text: "x", Mode: ModeRestartActive}); err != nil || types(d) != "message.added run.restart.requested" {
		t.Fatalf("restart while starting: %s %v", types(d), err)
	}
	if e, ok := lastEffect(w2).(Interrupt); !ok || e.TurnRef != "" {
		t.Fatalf("interrupt while starting: %+v", e)
	}
	// A restart already waiting takes later messages too.
	if d, _ := w2.dispatch(DispatchMessage{Text: "y"}); types(d) != "message.added run.restart.requested" {
		t.Errorf("auto with a restart pending: %s", types(d))
	}
	w2.caps.NativeSteering = true
	if _, err := w2.dispatch(DispatchMessage{Text: "x", Mode: ModeSteerActive}); !errors.Is(err, ErrConflict) {
		t.Errorf("steer with a restart pending: %v", err)
	}
}

// Invariant 3: an interrupt is an acknowledgement; the provider's terminal
// event ends the run.
func TestInterrupt(t *testing.T) {
	w := running(t, Capabilities{})
	w.send("queued")
	run := w.thread.Runs[0].ID
	interrupt := func(id string) (Decision, error) {
		return w.decide(Command{ID: "i", ThreadID: "thr", Payload: InterruptRun{RunID: id}})
	}
	d, err := interrupt(run)
	if err != nil || types(d) != "run.interrupt.requested" || w.thread.Runs[0].Status != RunStatusRunning {
		t.Fatalf("interrupt: %s %v %s", types(d), err, w.thread.Runs[0].Status)
	}
	if e, ok := lastEffect(w).(Interrupt); !ok || e.TurnRef != "u1" {
		t.Fatalf("interrupt effect: %+v", e)
	}
	n := len(w.effects)
	if d, err := interrupt(run); err != nil || len(d.Events) != 0 || len(w.effects) != n {
		t.Fatalf("second interrupt: %s %v", types(d), err)
	}
	// While the interrupt is pending, messages queue: no restart, no steer.
	if d, _ := w.dispatch(DispatchMessage{Text: "later"}); types(d) != "message.added run.queued" {
		t.Fatalf("auto while interrupting: %s", types(d))
	}
	if _, err := w.dispatch(DispatchMessage{Text: "x", Mode: ModeRestartActive}); !errors.Is(err, ErrConflict) {
		t.Fatalf("restart while interrupting: %v", err)
	}
	// A queued run is cancelled without the provider.
	queued := w.thread.Runs[2].ID
	if d, err := interrupt(queued); err != nil || types(d) != "run.ended" || w.thread.Runs[2].Status != RunStatusCancelled {
		t.Fatalf("interrupt a queued run: %s %v", types(d), err)
	}
	w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventTurnTerminal, TurnRef: "u1", Status: sdk.TurnInterrupted})
	if r := w.thread.Runs[0]; r.Status != RunStatusInterrupted {
		t.Fatalf("run: %s", r.Status)
	}
	if w.thread.Runs[1].Status != RunStatusStarting {
		t.Fatalf("the next queued run starts: %+v", w.thread.Runs[1])
	}
	if _, err := interrupt(run); !errors.Is(err, ErrConflict) {
		t.Fatalf("interrupt an ended run: %v", err)
	}
	if _, err := interrupt("nope"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("interrupt an unknown run: %v", err)
	}
}

// An interrupt wins over a pending restart: the run ends, and the message
// that was waiting for the restart becomes a run of its own.
func TestInterruptWinsOverRestart(t *testing.T) {
	w := running(t, Capabilities{})
	w.dispatch(DispatchMessage{Text: "steer", Mode: ModeRestartActive, MessageID: "m2"})
	w.must(Command{ID: "i", ThreadID: "thr", Payload: InterruptRun{RunID: w.thread.Runs[0].ID}})
	d := w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventTurnTerminal, TurnRef: "u1", Status: sdk.TurnInterrupted})
	if r := w.thread.Runs[0]; r.Status != RunStatusInterrupted || len(r.Attempts) != 1 {
		t.Fatalf("run: %+v", r)
	}
	if !strings.Contains(types(d), "run.ended diagnostic.recorded run.queued run.started") {
		t.Fatalf("terminal: %s", types(d))
	}
	if r := w.thread.Runs[1]; r.MessageID != "m2" || r.Status != RunStatusStarting || w.thread.message("m2").RunID != r.ID {
		t.Fatalf("the steering message's run: %+v", r)
	}
}

// A turn the provider says is for an attempt: bound to that attempt. One
// for an attempt the host replaced is bound and stopped; its late events
// change nothing.
func TestTurnsBindByClientTurnID(t *testing.T) {
	w := newWorld(t)
	w.send("one")
	w.open("s1")
	a1 := w.thread.Runs[0].ActiveAttempt
	w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventTurnStarted, ThreadRef: "pt", TurnRef: "u1", ClientTurnID: a1})
	if pt := w.thread.ProviderTurns[0]; pt.AttemptID != a1 || w.thread.Runs[0].Status != RunStatusRunning {
		t.Fatalf("bound: %+v", pt)
	}
	if d := w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventTurnStarted, ThreadRef: "pt", TurnRef: "u0", ClientTurnID: "att_nope"}); types(d) != "diagnostic.recorded" {
		t.Fatalf("unknown attempt: %s", types(d))
	}
	// Restart: the replaced attempt's turn ends, a new attempt starts.
	w.dispatch(DispatchMessage{Text: "again", Mode: ModeRestartActive})
	w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventTurnTerminal, TurnRef: "u1", Status: sdk.TurnInterrupted})
	n := len(w.effects)
	// A turn that arrives late for the replaced attempt is bound to it and
	// interrupted; the run is not touched.
	d := w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventTurnStarted, ThreadRef: "pt", TurnRef: "late", ClientTurnID: a1})
	if types(d) != "provider.turn.bound" || len(w.effects) != n+1 || lastEffect(w).EffectType() != EffectInterrupt || lastEffect(w).(Interrupt).TurnRef != "late" {
		t.Fatalf("late turn: %s %+v", types(d), w.effects[n:])
	}
	if r := w.thread.Runs[0]; r.Status != RunStatusStarting {
		t.Fatalf("the late turn changed the run: %s", r.Status)
	}
	if d := w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventItemStarted, TurnRef: "late", ItemRef: "x"}); len(d.Events) != 0 {
		t.Fatalf("an item of the replaced attempt: %s", types(d))
	}
	// Its dispatch record is stale too.
	if d := w.must(Command{ID: "td", ThreadID: "thr", Payload: RecordTurnDispatched{RunID: w.thread.Runs[0].ID, AttemptID: a1, SessionID: "s1"}}); len(d.Events) != 0 {
		t.Fatalf("stale dispatch: %s", types(d))
	}
}

func TestRespondToRequest(t *testing.T) {
	w := running(t, Capabilities{})
	w.edit(func(t *Thread) { t.ApprovalPolicy = ApproveAsk })
	w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventRequestOpened, TurnRef: "u1", RequestRef: "q1", RequestKind: sdk.RequestCommandApproval})
	q := w.thread.Requests[0]
	n := len(w.effects)
	if n != 3 || q.AnsweredBy != "" || w.thread.Runs[0].Status != RunStatusWaiting { // capture, open, start
		t.Fatalf("ask leaves the request to a client: %+v, %d effects", q, n)
	}
	respond := func(p RespondToRequest) (Decision, error) {
		return w.decide(Command{ID: "r", ThreadID: "thr", Payload: p})
	}
	for _, bad := range []RespondToRequest{
		{RequestID: q.ID, Decision: "maybe"},
		{RequestID: q.ID, Decision: "answer"},
	} {
		if _, err := respond(bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("%+v: %v", bad, err)
		}
	}
	if _, err := respond(RespondToRequest{RequestID: "nope", Decision: "accept"}); !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown request: %v", err)
	}
	d, err := respond(RespondToRequest{RequestID: q.ID, Decision: "accept_for_session"})
	if err != nil || types(d) != "request.answered" {
		t.Fatalf("respond: %s %v", types(d), err)
	}
	if e, ok := lastEffect(w).(Respond); !ok || e.Decision != "accept_for_session" || e.RequestRef != "q1" || e.SessionID != "s1" {
		t.Fatalf("respond effect: %+v", e)
	}
	if _, err := respond(RespondToRequest{RequestID: q.ID, Decision: "decline"}); !errors.Is(err, ErrConflict) {
		t.Errorf("answering twice: %v", err)
	}
	// Answers are for questions; a question is not accepted.
	if _, err := respond(RespondToRequest{RequestID: q.ID, Decision: "answer", Answers: map[string]string{"a": "b"}}); !errors.Is(err, ErrInvalid) {
		t.Errorf("answers to an approval: %v", err)
	}
	// The answer did not reach the provider: the request can be answered
	// again.
	w.must(Command{ID: "rf", ThreadID: "thr", Payload: RespondFailed{RequestID: q.ID, Reason: "timeout"}})
	if q := w.thread.Requests[0]; q.AnsweredBy != "" || q.Decision != "" {
		t.Fatalf("after a failed answer: %+v", q)
	}
	if d := w.must(Command{ID: "rf", ThreadID: "thr", Payload: RespondFailed{RequestID: q.ID}}); len(d.Events) != 0 {
		t.Fatalf("a failure for an unanswered request: %s", types(d))
	}
	if _, err := w.decide(Command{ID: "rf", ThreadID: "thr", Payload: RespondFailed{RequestID: "nope"}}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown request: %v", err)
	}
	if _, err := respond(RespondToRequest{RequestID: q.ID, Decision: "accept"}); err != nil {
		t.Fatalf("answering again: %v", err)
	}
	// A question answered with answers.
	w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventRequestOpened, TurnRef: "u1", RequestRef: "q2", RequestKind: sdk.RequestUserInput})
	q2 := w.thread.Requests[1]
	if _, err := respond(RespondToRequest{RequestID: q2.ID, Decision: "accept"}); !errors.Is(err, ErrInvalid) {
		t.Errorf("accepting a question: %v", err)
	}
	if _, err := respond(RespondToRequest{RequestID: q2.ID, Decision: "answer", Answers: map[string]string{"color": "blue"}}); err != nil {
		t.Fatal(err)
	}
	if q := w.thread.Requests[1]; q.Answers["color"] != "blue" || q.AnsweredBy != "client" {
		t.Fatalf("answered question: %+v", q)
	}
	// A request whose process is found gone is marked so, then refused.
	w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventRequestOpened, TurnRef: "u1", RequestRef: "q3", RequestKind: sdk.RequestGeneric})
	q3 := w.thread.Requests[2]
	d = w.must(Command{ID: "u", ThreadID: "thr", Payload: MarkRequestUnreachable{RequestID: q3.ID, Reason: "plugin gone"}})
	if types(d) != "request.resolved" || w.thread.Requests[2].Delivery != DeliveryNotResumable {
		t.Fatalf("unreachable: %s %+v", types(d), w.thread.Requests[2])
	}
	if d := w.must(Command{ID: "u", ThreadID: "thr", Payload: MarkRequestUnreachable{RequestID: q3.ID}}); len(d.Events) != 0 {
		t.Fatalf("marking twice: %s", types(d))
	}
	if _, err := w.decide(Command{ID: "u", ThreadID: "thr", Payload: MarkRequestUnreachable{RequestID: "nope"}}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown request: %v", err)
	}
	// The refusal is the sdk's ErrNotResumable (a plugin's answer to a
	// request of a session gone is the same error), in the words a client
	// has always read.
	_, err = respond(RespondToRequest{RequestID: q3.ID, Decision: "accept"})
	if want := "not_resumable: request " + q3.ID + " cannot be answered: its provider process is gone"; !errors.Is(err, sdk.ErrNotResumable) || err == nil || err.Error() != want {
		t.Fatalf("answering an unreachable request: %v; want sdk.ErrNotResumable, %q", err, want)
	}
}

func TestPolicyDecision(t *testing.T) {
	for _, tc := range []struct {
		policy ApprovalPolicy
		kind   RequestKind
		want   RequestDecision
	}{
		{ApproveAccept, RequestPermission, DecisionAccept},
		{ApproveDecline, RequestCommandApproval, DecisionDecline},
		{ApproveAccept, RequestFileChangeApproval, DecisionAccept},
		{ApproveAccept, RequestPermissions, DecisionAccept},
		{ApproveAccept, RequestUserInput, DecisionDecline},
		{ApproveAccept, RequestGeneric, ""},
		{ApproveAccept, "something/new", ""},
		{ApproveAsk, RequestPermission, ""},
	} {
		if got := policyDecision(tc.policy, tc.kind); got != tc.want {
			t.Errorf("%s %s: %q, want %q", tc.policy, tc.kind, got, tc.want)
		}
	}
}

func TestRecoverCancelsOutboxEffects(t *testing.T) {
	w := running(t, Capabilities{NativeSteering: true})
	w.dispatch(DispatchMessage{Text: "steer", MessageID: "m2"})
	run := w.thread.Runs[0].ID
	d := w.must(Command{ID: "r", ThreadID: "thr", Payload: Recover{Reason: "restart",
		Effects: []PendingEffect{{ID: "7.0", Type: EffectRespond, RunID: run}, {ID: "8.0", Type: EffectSteer, RunID: run, MessageID: "m2"}}}})
	if !strings.HasPrefix(types(d), "effect.cancelled effect.cancelled diagnostic.recorded run.queued provider.session.ended") {
		t.Fatalf("recover: %s", types(d))
	}
	if dg := w.thread.Diagnostics[0]; !strings.Contains(dg.Title, "respond") || dg.Text != "restart" {
		t.Fatalf("diagnostic: %+v", dg)
	}
	// The steering message that may not have reached the provider is a run
	// of its own, queued: recovery starts no work.
	if r := w.thread.Runs[1]; r.MessageID != "m2" || r.Status != RunStatusQueued {
		t.Fatalf("the steering message's run: %+v", r)
	}
	if len(w.thread.Runs[0].PendingRestart) != 0 {
		t.Fatalf("an ended run keeps pending messages: %+v", w.thread.Runs[0].PendingRestart)
	}
}

// A policy's answer that did not get through is sent again, a few times;
// then the request is left to a client.
func TestPolicyAnswersAgain(t *testing.T) {
	w := running(t, Capabilities{})
	w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventRequestOpened, TurnRef: "u1", RequestRef: "q1", RequestKind: sdk.RequestCommandApproval})
	q := w.thread.Requests[0]
	for i := 1; i < policyAnswerTries; i++ {
		d := w.must(Command{ID: "rf", ThreadID: "thr", Payload: RespondFailed{RequestID: q.ID, Reason: "timeout"}})
		if types(d) != "request.answer.failed request.answered" || lastEffect(w).EffectType() != EffectRespond || lastEffect(w).(Respond).Decision != DecisionDecline {
			t.Fatalf("failure %d: %s %+v", i, types(d), lastEffect(w))
		}
	}
	d := w.must(Command{ID: "rf", ThreadID: "thr", Payload: RespondFailed{RequestID: q.ID, Reason: "timeout"}})
	if types(d) != "request.answer.failed" {
		t.Fatalf("last failure: %s", types(d))
	}
	if q := w.thread.Requests[0]; q.AnsweredBy != "" || q.AnswerFailures != policyAnswerTries || q.Status != RequestStatusPending {
		t.Fatalf("request: %+v", q)
	}
}

// Late events of a replaced attempt: its request is kept but does not hold
// the run; its usage and plan are not the run's.
func TestLateEventsOfAReplacedAttempt(t *testing.T) {
	w := running(t, Capabilities{})
	w.dispatch(DispatchMessage{Text: "again", Mode: ModeRestartActive})
	w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventTurnTerminal, TurnRef: "u1", Status: sdk.TurnInterrupted})
	w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventTurnStarted, ThreadRef: "pt", TurnRef: "u2"})
	w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventRequestOpened, TurnRef: "u1", RequestRef: "late", RequestKind: sdk.RequestCommandApproval})
	if q := w.thread.Requests[0]; q.RunID != "" || w.thread.Runs[0].Status != RunStatusRunning {
		t.Fatalf("late request %+v, run %s", q, w.thread.Runs[0].Status)
	}
	for _, ev := range []sdk.RuntimeEvent{
		{Kind: sdk.EventUsage, TurnRef: "u1", Usage: &sdk.Usage{TotalTokens: 9}},
		{Kind: sdk.EventPlanUpdated, TurnRef: "u1"},
	} {
		if d := w.ev("s1", ev); len(d.Events) != 0 {
			t.Fatalf("%s of the replaced attempt: %s", ev.Kind, types(d))
		}
	}
}

// Subagents nest: a grandchild's turn goes under its parent's node, and
// its items under its own node.
func TestNestedSubagents(t *testing.T) {
	w := running(t, Capabilities{})
	w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventThreadStarted, ThreadRef: "c1", ParentThreadRef: "pt"})
	w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventThreadStarted, ThreadRef: "c2", ParentThreadRef: "c1"})
	w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventTurnStarted, ThreadRef: "c1", TurnRef: "t1"})
	w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventTurnStarted, ThreadRef: "c2", TurnRef: "t2"})
	w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventItemStarted, TurnRef: "t2", ItemRef: "i2", ItemKind: "command_execution"})
	r := w.thread.Runs[0]
	root := r.Attempts[0].RootNode
	byRef := map[string]Node{}
	for _, n := range r.Nodes {
		byRef[n.ProviderRef] = n
	}
	if byRef["t1"].ParentID != root || byRef["t2"].ParentID != byRef["t1"].ID || byRef["i2"].ParentID != byRef["t2"].ID {
		t.Fatalf("nodes: %+v", r.Nodes)
	}
	if len(w.thread.Runs) != 1 || r.Ordinal != 1 {
		t.Fatalf("subagents made runs: %+v", w.thread.Runs)
	}
	// A subagent's usage is not the run's.
	w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventUsage, TurnRef: "u1", Usage: &sdk.Usage{TotalTokens: 10}})
	w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventUsage, TurnRef: "t2", Usage: &sdk.Usage{TotalTokens: 99}})
	if u := w.thread.Runs[0].Usage; u == nil || u.TotalTokens != 10 {
		t.Fatalf("run usage: %+v", u)
	}
	// A turn whose parent thread has no turn in progress goes under the root.
	w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventTurnTerminal, TurnRef: "t2", Status: sdk.TurnCompleted})
	w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventThreadStarted, ThreadRef: "c3", ParentThreadRef: "c2"})
	w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventTurnStarted, ThreadRef: "c3", TurnRef: "t3"})
	r = w.thread.Runs[0]
	if n := r.Nodes[len(r.Nodes)-1]; n.ProviderRef != "t3" || n.ParentID != root {
		t.Fatalf("t3 node: %+v", n)
	}
}

// Rate limits: the latest per scope, recorded when they change.
func TestRateLimits(t *testing.T) {
	w := running(t, Capabilities{})
	reset := t0.Add(time.Hour)
	limit := func(scope string, used float64) sdk.RuntimeEvent {
		return sdk.RuntimeEvent{Kind: sdk.EventRateLimit, RateLimit: &sdk.RateLimit{Scope: scope, UsedPercent: used, ResetsAt: reset}}
	}
	for _, c := range []struct {
		ev   sdk.RuntimeEvent
		want string
	}{
		{limit("codex/primary", 10), "rate_limit.reported"},
		{limit("codex/primary", 10), ""},
		{limit("codex/secondary", 3), "rate_limit.reported"},
		{limit("codex/primary", 42), "rate_limit.reported"},
		{sdk.RuntimeEvent{Kind: sdk.EventRateLimit}, ""},
	} {
		if got := types(w.ev("s1", c.ev)); got != c.want {
			t.Errorf("%+v: %q, want %q", c.ev.RateLimit, got, c.want)
		}
	}
	if l := w.thread.RateLimits; len(l) != 2 || l[0].UsedPercent != 42 || !l[0].ResetsAt.Equal(reset) || l[1].Scope != "codex/secondary" {
		t.Fatalf("rate limits: %+v", l)
	}
}

// A clone is a snapshot: what happens to the thread afterwards does not
// show in it.
func TestClone(t *testing.T) {
	w := running(t, Capabilities{})
	w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventContentDelta, TurnRef: "u1", ItemRef: "a1", ItemKind: sdk.ItemAssistantMessage, Text: "Hel"})
	w.dispatch(DispatchMessage{Text: "again", Mode: ModeRestartActive})
	c := w.thread.Clone()
	before, _ := json.Marshal(c)
	w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventContentDelta, TurnRef: "u1", ItemRef: "a1", ItemKind: sdk.ItemAssistantMessage, Text: "lo"})
	w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventRateLimit, RateLimit: &sdk.RateLimit{Scope: "x", UsedPercent: 1}})
	w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventTurnTerminal, TurnRef: "u1", Status: sdk.TurnInterrupted})
	w.send("more")
	after, _ := json.Marshal(c)
	if string(before) != string(after) {
		t.Fatalf("the clone changed:\n%s\n%s", before, after)
	}
	now, _ := json.Marshal(w.thread)
	if string(now) == string(before) {
		t.Fatal("the thread did not change")
	}
}

// Runs a recovery left queued start when the host says so (StartQueued,
// sent after its recovery), one at a time, and not while it shuts down.
func TestStartQueuedAfterRecovery(t *testing.T) {
	w := newWorld(t)
	w.send("one")
	w.send("two")
	w.open("s1")
	w.must(Command{ID: "r", ThreadID: "thr", Payload: Recover{Reason: "restart"}})
	if r := w.thread.Runs[1]; r.Status != RunStatusQueued {
		t.Fatalf("recovery started a run: %+v", r)
	}
	w.shuttingDown = true
	if d := w.must(Command{ID: "s", ThreadID: "thr", Payload: StartQueued{}}); types(d) != "" {
		t.Fatalf("a queued run started while the host shuts down: %s", types(d))
	}
	w.shuttingDown = false
	if d := w.must(Command{ID: "s", ThreadID: "thr", Payload: StartQueued{}}); types(d) != "run.queue.resumed run.started attempt.started node.started" ||
		w.thread.Runs[1].Status != RunStatusStarting {
		t.Fatalf("start queued: %s; run %s", types(d), w.thread.Runs[1].Status)
	}
	if d := w.must(Command{ID: "s2", ThreadID: "thr", Payload: StartQueued{}}); types(d) != "" {
		t.Fatalf("start queued with a run active: %s", types(d))
	}
}

// The runs a restart left queued are named, oldest first, in the event
// that starts the first of them: their ordinals and the start of their
// input. Nothing is said when nothing starts.
func TestStartQueuedSaysWhichRunsGoOn(t *testing.T) {
	w := newWorld(t)
	long := strings.Repeat("é", QueuedInputBytes) // cut at a character
	w.send("one")
	w.send("fix the tests")
	w.send(long)
	w.open("s1")
	w.must(Command{ID: "r", ThreadID: "thr", Payload: Recover{Reason: "restart"}})
	d := w.must(Command{ID: "s", ThreadID: "thr", Payload: StartQueued{}})
	want := QueuedRunsResumed{Reason: ResumeReason, Runs: []QueuedRun{
		{RunID: w.thread.Runs[1].ID, Ordinal: 2, Input: "fix the tests"},
		{RunID: w.thread.Runs[2].ID, Ordinal: 3, Input: strings.Repeat("é", QueuedInputBytes/2) + "…"},
	}}
	if len(d.Events) == 0 || !reflect.DeepEqual(d.Events[0], want) {
		t.Fatalf("start queued: %+v\nwant first %+v", d.Events, want)
	}
	if got := []RunStatus{w.thread.Runs[1].Status, w.thread.Runs[2].Status}; !reflect.DeepEqual(got, []RunStatus{RunStatusStarting, RunStatusQueued}) {
		t.Fatalf("runs after: %v", got)
	}
}

// CancelQueued cancels every queued run, or those it names; a run that
// has started, or that does not exist, is refused before anything is
// cancelled; nothing goes to the provider.
func TestCancelQueued(t *testing.T) {
	w := running(t, Capabilities{})
	w.send("two")
	w.send("three")
	w.send("four")
	run := func(i int) string { return w.thread.Runs[i].ID }
	cancel := func(p CancelQueued) (Decision, error) {
		return w.decide(Command{ID: "x", ThreadID: "thr", Payload: p})
	}
	for _, tc := range []struct {
		p    CancelQueued
		want error
	}{
		{CancelQueued{RunIDs: []string{run(1), run(0)}}, ErrConflict},
		{CancelQueued{RunIDs: []string{"run_nope"}}, ErrNotFound},
	} {
		if _, err := cancel(tc.p); !errors.Is(err, tc.want) {
			t.Errorf("cancel %v: %v, want %v", tc.p.RunIDs, err, tc.want)
		}
	}
	if _, err := cancel(CancelQueued{RunIDs: []string{run(0)}}); err == nil || err.Error() !=
		"conflict: run 1 is running, not queued: only a run that has not started can be cancelled (interrupt one that has)" {
		t.Errorf("cancel the active run: %v", err)
	}
	effects := len(w.effects)
	d, err := cancel(CancelQueued{RunIDs: []string{run(2), run(2)}})
	if err != nil {
		t.Fatal(err)
	}
	if want := []Payload{RunEnded{RunID: run(2), Status: RunStatusCancelled, StopReason: StopCancelledQueued}}; !reflect.DeepEqual(d.Events, want) {
		t.Fatalf("cancel run 3: %+v, want %+v", d.Events, want)
	}
	d, err = cancel(CancelQueued{Reason: "dropped by hand"})
	if err != nil {
		t.Fatal(err)
	}
	want := []Payload{
		RunEnded{RunID: run(1), Status: RunStatusCancelled, StopReason: "dropped by hand"},
		RunEnded{RunID: run(3), Status: RunStatusCancelled, StopReason: "dropped by hand"},
	}
	if !reflect.DeepEqual(d.Events, want) {
		t.Fatalf("cancel every queued run: %+v, want %+v", d.Events, want)
	}
	if len(w.effects) != effects {
		t.Errorf("cancelling queued runs asked for effects: %+v", w.effects[effects:])
	}
	if d, err = cancel(CancelQueued{}); err != nil || len(d.Events) != 0 {
		t.Fatalf("cancel with none queued: %s, %v", types(d), err)
	}
	if got := w.thread.Runs[0].Status; got != RunStatusRunning {
		t.Errorf("the active run is %s", got)
	}
}

// An idle session is closed with the reason idle; one in use is not.
func TestCloseIdleSession(t *testing.T) {
	w := running(t, Capabilities{})
	closeCmd := Command{ID: "x", ThreadID: "thr", Payload: CloseIdleSession{SessionID: "s1"}}
	if _, err := w.decide(closeCmd); !errors.Is(err, ErrConflict) {
		t.Fatalf("closing a session with a run active: %v", err)
	}
	if _, err := w.decide(Command{ID: "x", ThreadID: "thr", Payload: CloseIdleSession{SessionID: "nope"}}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("closing an unknown session: %v", err)
	}
	w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventTurnTerminal, TurnRef: "u1", Status: sdk.TurnCompleted})
	if w.thread.ActiveRun() != nil {
		t.Fatal("the run is still active")
	}
	busy := map[string]func(*Thread){
		"a queued run": func(th *Thread) { th.Runs = append(th.Runs, Run{ID: "q", Status: RunStatusQueued}) },
		"a pending request": func(th *Thread) {
			th.Requests = append(th.Requests, RuntimeRequest{ID: "q", Status: RequestStatusPending})
		},
		"restoring files": func(th *Thread) {
			th.Rollbacks = append(th.Rollbacks, Rollback{ID: "b", Status: RollbackRestoringFiles})
		},
		"reconciling provider": func(th *Thread) { th.Rollbacks = append(th.Rollbacks, Rollback{ID: "b", Status: RollbackReconciling}) },
	}
	for what, f := range busy {
		c := w.thread.Clone()
		f(&c)
		scratch := c.Scratch()
		if _, err := Decide(&scratch, closeCmd, w.env()); !errors.Is(err, ErrConflict) {
			t.Errorf("closing a session with %s: %v", what, err)
		}
	}
	// A rollback that failed holds runs but is not in progress.
	w.edit(func(th *Thread) { th.Rollbacks = append(th.Rollbacks, Rollback{ID: "b", Status: RollbackStatusFailed}) })
	d := w.must(closeCmd)
	if want := []Payload{SessionEnded{SessionID: "s1", Reason: SessionEndIdle}}; !reflect.DeepEqual(d.Events, want) {
		t.Fatalf("close idle session: %+v, want %+v", d.Events, want)
	}
	if d := w.must(closeCmd); len(d.Events) != 0 {
		t.Fatalf("closing it again: %s", types(d))
	}
}

// A host that shuts down ends its active run with the reason: one in
// flight is interrupted, one whose turn had ended ends as it would have;
// nothing queued starts.
func TestShutDownEndsTheActiveRun(t *testing.T) {
	w := running(t, Capabilities{})
	w.send("two")
	w.shuttingDown = true
	d := w.must(Command{ID: "x", ThreadID: "thr", Payload: ShutDown{Reason: "host shut down"}})
	if got := types(d); got != "node.completed run.completing checkpoint.scope.opened checkpoint.requested run.ended checkpoint.recorded" {
		t.Fatalf("shut down: %s", got)
	}
	if r := w.thread.Runs[0]; r.Status != RunStatusInterrupted || r.StopReason != "host shut down" || r.Failure == nil || r.Failure.Code != "host_shut_down" {
		t.Fatalf("run after shut down: %+v", r)
	}
	if r := w.thread.Runs[1]; r.Status != RunStatusQueued {
		t.Fatalf("a run started while the host shuts down: %+v", r)
	}
	if d := w.must(Command{ID: "y", ThreadID: "thr", Payload: ShutDown{Reason: "host shut down"}}); len(d.Events) != 0 {
		t.Fatalf("shut down with no run active: %s", types(d))
	}

	w = running(t, Capabilities{})
	w.holdCaptures = true
	w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventTurnTerminal, TurnRef: "u1", Status: sdk.TurnCompleted})
	d = w.must(Command{ID: "x", ThreadID: "thr", Payload: ShutDown{Reason: "host shut down"}})
	if got := types(d); got != "run.ended" || w.thread.Runs[0].Status != RunStatusCompleted {
		t.Fatalf("shut down of an ending run: %s, %s", got, w.thread.Runs[0].Status)
	}
}
