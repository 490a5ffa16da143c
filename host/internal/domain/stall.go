package domain

import (
	"fmt"
	"time"
)

// Silence: a provider alive but silent mid-turn, and a request nobody
// answers. The host keeps two timeouts (its turn stall timeout and its
// request timeout, 0 for never); the deadlines they give are functions of
// the projection, which knows when the thread last heard anything (every
// event's time, UpdatedAt) and when each request was opened. The host
// keeps a timer for each and sends StallTurn or ExpireRequest when it
// passes; the decisions below check that it still applies.
//
// A provider waiting for an answer is not silent: while one of its
// session's requests waits, no stall is due. An answer, whoever gives it,
// is an event, so the provider's time to speak again starts from it.

// FailureStalled is the failure code of a run whose provider went silent
// mid-turn, so that the host ended its process.
const FailureStalled = "turn_stalled"

// StallDeadline is when the host ends the provider process of the
// thread's active run if nothing of the thread is recorded meanwhile,
// given the host's stall timeout, and the command that does it; ok is
// false when none is due: no timeout, no run whose turn a provider has,
// a provider waiting for an answer, an interrupt with a deadline of its
// own, or a process being ended already.
func (t *Thread) StallDeadline(timeout time.Duration) (cmd StallTurn, at time.Time, ok bool) {
	r := t.ActiveRun()
	if timeout <= 0 || r == nil || !r.live() || r.Stop.Forced != "" || !r.Stop.Deadline.IsZero() {
		return StallTurn{}, time.Time{}, false
	}
	a := r.attempt(r.ActiveAttempt)
	if a == nil || a.SessionID == "" || t.awaitsAnswer(a.SessionID) {
		// Not sent to a provider yet (the start's own call has a
		// deadline), or the provider waits for us.
		return StallTurn{}, time.Time{}, false
	}
	return StallTurn{RunID: r.ID, AttemptID: a.ID, Since: t.UpdatedAt, Timeout: timeout}, t.UpdatedAt.Add(timeout), true
}

// decideStallTurn ends the provider process of a run whose provider has
// been silent for the stall timeout: the run fails when the session's end
// comes (runtimeExited, or the turn's end the closing plugin reports).
func decideStallTurn(t *Thread, p StallTurn, d *Decision) {
	cur, _, due := t.StallDeadline(p.Timeout)
	if !due || cur.RunID != p.RunID || cur.AttemptID != p.AttemptID || !cur.Since.Equal(p.Since) {
		return // it ended, was replaced, was heard from, or waits for an answer
	}
	sessionID := t.run(p.RunID).attempt(p.AttemptID).SessionID
	reason := fmt.Sprintf("the provider sent nothing for %s mid-turn (the host's turn stall timeout), so the host ended its process", p.Timeout)
	d.emit(TurnStalled{RunID: p.RunID, AttemptID: p.AttemptID, SessionID: sessionID, Since: p.Since, Reason: reason})
	d.effect(EndSession{EffectHead: EffectHead{ThreadID: t.ID}, RunID: p.RunID, AttemptID: p.AttemptID, SessionID: sessionID})
}

// forcedEnd is how a run whose provider process the host ended ends:
// failed when its provider went silent, else interrupted (it did not stop
// when asked).
func (r *Run) forcedEnd() (RunStatus, *Failure) {
	if r.Stop.Stalled {
		return RunStatusFailed, &Failure{Code: FailureStalled, Message: r.Stop.Forced}
	}
	return RunStatusInterrupted, forcedFailure(r.Stop.Forced)
}

// awaitsAnswer says whether a request of the session waits for an answer
// the provider can still receive.
func (t *Thread) awaitsAnswer(sessionID string) bool {
	for i := len(t.Requests) - 1; i >= 0; i-- {
		if q := &t.Requests[i]; q.SessionID == sessionID && q.waiting() {
			return true
		}
	}
	return false
}

// waiting says whether a request waits for an answer: pending, none on
// its way, and its provider still there to take one.
func (q *RuntimeRequest) waiting() bool {
	return q.Status == RequestStatusPending && q.AnsweredBy == "" && q.Delivery == DeliveryLive
}

// expirable says whether the request timeout may answer a request: it
// waits, and the answers sent so far have not used up the tries a policy
// gets (then it is a client's to answer).
func (q *RuntimeRequest) expirable() bool {
	return q.waiting() && q.AnswerFailures < policyAnswerTries
}

// RequestDeadline is when the host answers the thread's oldest request
// still waiting for an answer, given the host's request timeout, and the
// command that does it; ok is false when none is due (no timeout, or no
// request waits).
func (t *Thread) RequestDeadline(timeout time.Duration) (cmd ExpireRequest, at time.Time, ok bool) {
	if timeout <= 0 {
		return ExpireRequest{}, time.Time{}, false
	}
	for i := range t.Requests { // in the order they were opened: the first is due first
		if q := &t.Requests[i]; q.expirable() {
			return ExpireRequest{RequestID: q.ID, Failures: q.AnswerFailures}, q.OpenedAt.Add(timeout), true
		}
	}
	return ExpireRequest{}, time.Time{}, false
}

// decideExpireRequest answers a request nobody answered in time, by the
// timeout: an approval is declined, anything else (a question, a request
// of a kind Baton does not know) cancelled, since no answer to it can be
// made up. The provider is told as it would be by a client; the request
// resolves when it says it got the answer.
func decideExpireRequest(t *Thread, p ExpireRequest, d *Decision) {
	q := t.request(p.RequestID)
	if q == nil || !q.expirable() {
		return // answered, resolved or gone meanwhile
	}
	decision := DecisionCancel
	if approval(q.Kind) {
		decision = DecisionDecline
	}
	e := q.respondEffect(t.ID, decision, nil)
	d.emit(RequestAnswered{RequestID: q.ID, Decision: decision, By: AnsweredByTimeout})
	d.effect(e)
}
