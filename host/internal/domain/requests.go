package domain

import (
	"cmp"
	"fmt"

	"github.com/baton-run/baton/sdk"
)

// Runtime requests: a provider's approvals and questions, answered by the
// thread's policy or a client.

func decideRespond(t *Thread, p RespondToRequest, d *Decision) error {
	q, err := t.requestOr(p.RequestID)
	if err != nil {
		return err
	}
	switch p.Decision {
	case DecisionAccept, DecisionAcceptForSession, DecisionDecline, DecisionCancel:
		if p.Decision != DecisionDecline && p.Decision != DecisionCancel && q.Kind == RequestUserInput {
			return fmt.Errorf("%w: a question is answered with decision %q (or declined), not %q", ErrInvalid, DecisionAnswer, p.Decision)
		}
	case DecisionAnswer:
		if len(p.Answers) == 0 {
			return fmt.Errorf("%w: decision %q needs answers", ErrInvalid, DecisionAnswer)
		}
		if q.Kind != RequestUserInput && q.Kind != RequestGeneric {
			return fmt.Errorf("%w: a %s request takes accept, accept_for_session, decline or cancel, not answers", ErrInvalid, q.Kind)
		}
	default:
		return fmt.Errorf("%w: decision must be accept, accept_for_session, decline, cancel or answer, got %q", ErrInvalid, p.Decision)
	}
	if q.Delivery == DeliveryNotResumable {
		return NotResumable(q.ID)
	}
	if q.Status != RequestStatusPending || q.AnsweredBy != "" {
		return fmt.Errorf("%w: request %s is already %s", ErrConflict, q.ID, cmp.Or(string(q.AnsweredBy)+" answered", string(q.Status)))
	}
	e := q.respondEffect(t.ID, p.Decision, p.Answers)
	d.emit(RequestAnswered{RequestID: q.ID, Decision: p.Decision, Answers: p.Answers, By: AnsweredByClient})
	d.effect(e)
	return nil
}

func decideRespondFailed(t *Thread, p RespondFailed, d *Decision) error {
	q, err := t.requestOr(p.RequestID)
	if err != nil {
		return err
	}
	if q.Status != RequestStatusPending || q.AnsweredBy == "" {
		return nil
	}
	// A policy (or the timeout) answers again, a few times: a client that
	// answered is asked again instead.
	by := q.AnsweredBy
	again := by != AnsweredByClient && q.AnswerFailures+1 < policyAnswerTries
	retry := q.respondEffect(t.ID, q.Decision, nil)
	id := q.ID
	d.emit(RequestAnswerFailed{RequestID: id, Reason: p.Reason})
	if again {
		d.emit(RequestAnswered{RequestID: id, Decision: retry.Decision, By: by})
		d.effect(retry)
	}
	return nil
}

func decideUnreachable(t *Thread, p MarkRequestUnreachable, d *Decision) error {
	q, err := t.requestOr(p.RequestID)
	if err != nil {
		return err
	}
	if q.Status == RequestStatusPending {
		d.emit(RequestResolved{RequestID: q.ID, Status: RequestStatusExpired, Delivery: DeliveryNotResumable})
	}
	return nil
}

// requestOr is a request, or an error that says it is not the thread's.
func (t *Thread) requestOr(id string) (*RuntimeRequest, error) {
	if q := t.request(id); q != nil {
		return q, nil
	}
	return nil, fmt.Errorf("%w: request %q", ErrNotFound, id)
}

// NotResumable is the error of an answer to request id whose provider
// process is gone: sdk.ErrNotResumable, its text naming the request's
// delivery as a projection shows it (not_resumable).
func NotResumable(id string) error {
	return sdk.Kindf(sdk.ErrNotResumable, "%s: request %s cannot be answered: its provider process is gone", DeliveryNotResumable, id)
}

// respondEffect delivers an answer to the request through its session.
func (q *RuntimeRequest) respondEffect(threadID string, v RequestDecision, answers map[string]string) Respond {
	return Respond{EffectHead: EffectHead{ThreadID: threadID}, RunID: q.RunID, SessionID: q.SessionID, RequestRef: q.ProviderRef,
		Decision: v, Answers: answers}
}

// policyAnswerTries is how many times a policy's answer is sent before the
// request is left to a client.
const policyAnswerTries = 3

// policyDecisions are the answers of the policies that answer approvals.
var policyDecisions = map[ApprovalPolicy]RequestDecision{ApproveAccept: DecisionAccept, ApproveDecline: DecisionDecline}

// policyDecision is how a thread's approval policy answers a request of
// a kind: "" leaves it to a client.
func policyDecision(policy ApprovalPolicy, kind RequestKind) RequestDecision {
	switch {
	case policy == ApproveAsk:
		return ""
	case approval(kind):
		return policyDecisions[policy]
	case kind == RequestUserInput:
		return DecisionDecline // a policy cannot invent answers
	}
	return "" // generic and unknown kinds are never answered by policy
}

// approval says whether a request of a kind asks to approve something
// (which a yes or a no answers), not for an answer.
func approval(kind RequestKind) bool {
	switch kind {
	case RequestPermission, RequestCommandApproval, RequestFileChangeApproval, RequestPermissions:
		return true
	}
	return false
}
