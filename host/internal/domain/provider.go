package domain

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/baton-run/baton/sdk"
)

// Provider events: what a provider session reports, bound to the app's
// entities by its refs. Reprocessing the same event finds the bindings it
// made before and allocates nothing new (invariant 1).

func decideProviderEvent(t *Thread, p IngestProviderEvent, env Env, d *Decision) {
	ev := p.Event
	s := t.session(p.SessionID)
	if s == nil || s.Status != SessionStatusOpen {
		return // a late event from a session that has ended: its effects are already recorded
	}
	var pt *ProviderTurn // the turn the event names, looked up once
	if ev.TurnRef != "" {
		pt = t.providerTurnByRef(ev.TurnRef)
	}
	switch ev.Kind {
	case sdk.EventThreadStarted:
		if ev.ThreadRef != "" && t.providerThreadByRef(ev.ThreadRef) == nil {
			var parent string
			if pt := t.providerThreadByRef(ev.ParentThreadRef); pt != nil {
				parent = pt.ID
			}
			d.emit(ProviderThreadBound{ProviderThreadID: env.NewID("pthr"), SessionID: p.SessionID, ProviderRef: ev.ThreadRef, ParentID: parent})
		}
	case sdk.EventTurnStarted:
		switch {
		case ev.TurnRef == "":
		case pt == nil:
			turnStarted(t, p.SessionID, ev, env, d)
		case ev.ClientTurnID != "" && ev.ClientTurnID != pt.AttemptID:
			turnRefReused(t, ev, pt, env, d)
		} // else the same turn again: reprocessing allocates nothing
	case sdk.EventItemStarted, sdk.EventItemUpdated, sdk.EventItemCompleted, sdk.EventContentDelta:
		decideItem(t, ev, pt, env, d)
	case sdk.EventPlanUpdated:
		planUpdated(t, ev, pt, env, d)
	case sdk.EventRequestOpened:
		requestOpened(t, p.SessionID, ev, pt, env, d)
	case sdk.EventRequestResolved:
		q := t.requestByRef(p.SessionID, ev.RequestRef)
		if q == nil || q.Status != RequestStatusPending {
			return
		}
		sd, _ := ev.Status.(sdk.Decision)
		decision := decisionFromSDK(sd)
		status := RequestStatusResolved
		if decision == DecisionCancel {
			status = RequestStatusCancelled
		}
		d.emit(RequestResolved{RequestID: q.ID, Status: status, Decision: decision})
	case sdk.EventUsage:
		// A run's usage is its root turn's: a subagent's own totals are
		// not the run's.
		if pt != nil {
			if r := t.run(pt.RunID); r == nil || r.attempt(pt.AttemptID).RootNode != pt.NodeID {
				return
			}
		}
		if r := t.runFor(pt); r != nil && ev.Usage != nil && !r.settled() && !t.replaced(r, pt) {
			d.emit(UsageReported{RunID: r.ID, AttemptID: r.ActiveAttempt, Usage: usageFromSDK(*ev.Usage),
				Models: modelUsageFromSDK(ev.ModelUsage)})
		}
	case sdk.EventTurnTerminal:
		turnTerminal(t, ev, pt, env, d)
	case sdk.EventRuntimeExited:
		runtimeExited(t, p.SessionID, ev, env, d)
	case sdk.EventDiagnostic:
		var runID string
		if r := t.runFor(pt); r != nil {
			runID = r.ID
		}
		d.emit(DiagnosticRecorded{RunID: runID, Title: ev.Title, Text: ev.Text})
	case sdk.EventRateLimit:
		// Kept when it changes: providers repeat it after every reply.
		if ev.RateLimit != nil && ev.RateLimit.Scope != "" {
			l := rateLimitFromSDK(*ev.RateLimit)
			l.Provider = cmp.Or(s.Provider, t.Provider)
			if !slices.ContainsFunc(t.RateLimits, func(m RateLimit) bool { return sameRateLimit(l, m) }) {
				d.emit(RateLimitReported{RateLimit: l})
			}
		}
	}
	// session_state is kept in the raw-frame log only.
}

// sameRateLimit says whether two reports of a limit say the same.
func sameRateLimit(l, m RateLimit) bool {
	return l.Provider == m.Provider && l.Scope == m.Scope && l.UsedPercent == m.UsedPercent && l.ResetsAt.Equal(m.ResetsAt)
}

// turnRefReused ends the run of a turn the provider started under a ref
// an earlier turn of the thread has (for another attempt, so not the same
// frame again): a plugin that numbers its turns afresh in each session of
// a resumed thread. Its events could not be told from the earlier turn's,
// so the run would never end; it fails, saying why.
func turnRefReused(t *Thread, ev sdk.RuntimeEvent, earlier *ProviderTurn, env Env, d *Decision) {
	r, a := t.attemptByID(ev.ClientTurnID)
	if a == nil || !r.live() || r.ActiveAttempt != a.ID {
		return // not a turn the host waits for
	}
	endRun(t, r.ID, RunStatusFailed, "", &Failure{Code: "turn_ref_reused", Message: fmt.Sprintf(
		"the provider started this run's turn as %s, the ref a turn of run %d already has: a plugin must give every turn of a provider thread its own ref, in every session",
		ev.TurnRef, t.run(earlier.RunID).Ordinal)}, env, d)
}

// turnStarted binds a provider turn to the attempt it is for: the one the
// provider names (its client turn id), else the active run's.
func turnStarted(t *Thread, sessionID string, ev sdk.RuntimeEvent, env Env, d *Decision) {
	pthr := t.providerThreadByRef(ev.ThreadRef)
	child := pthr != nil && pthr.ParentID != ""
	if ev.ClientTurnID != "" && !child {
		// The provider names the attempt the turn is for. A turn for an
		// attempt the host no longer wants (replaced, or its run ended) is
		// bound to it, so that its events are known and ignored, and the
		// provider is asked to stop it.
		r, a := t.attemptByID(ev.ClientTurnID)
		if a == nil {
			d.emit(DiagnosticRecorded{Title: "provider turn started for an unknown attempt", Text: ev.ClientTurnID})
			return
		}
		if !r.live() || r.ActiveAttempt != a.ID {
			runID, attemptID, root := r.ID, a.ID, a.RootNode
			pthrID := t.bindThread(pthr, sessionID, ev.ThreadRef, env, d)
			d.emit(ProviderTurnBound{ProviderTurnID: env.NewID("pturn"), ProviderThreadID: pthrID, SessionID: sessionID,
				ProviderRef: ev.TurnRef, RunID: runID, AttemptID: attemptID, NodeID: root})
			d.effect(Interrupt{EffectHead: EffectHead{ThreadID: t.ID}, RunID: runID, AttemptID: attemptID, SessionID: sessionID, TurnRef: ev.TurnRef})
			return
		}
	}
	r := t.ActiveRun()
	if r == nil || r.ActiveAttempt == "" || r.Ending != nil {
		d.emit(DiagnosticRecorded{Title: "provider turn started with no active run", Text: ev.TurnRef})
		return
	}
	runID, a := r.ID, *r.attempt(r.ActiveAttempt)
	parentNode := ""
	if child {
		parentNode = t.parentTurnNode(runID, a, pthr.ParentID)
	}
	pthrID := t.bindThread(pthr, sessionID, ev.ThreadRef, env, d)
	node := a.RootNode
	if child {
		// A turn on a child (subagent) thread: it gets a node of its own
		// under the node of its parent thread's turn, and its end never
		// ends the run.
		node = env.NewID("node")
		d.emit(NodeStarted{RunID: runID, NodeID: node, ParentID: parentNode, AttemptID: a.ID,
			Kind: NodeSubagent, ProviderRef: ev.TurnRef, Title: ev.Title})
	}
	d.emit(ProviderTurnBound{ProviderTurnID: env.NewID("pturn"), ProviderThreadID: pthrID, SessionID: sessionID,
		ProviderRef: ev.TurnRef, RunID: runID, AttemptID: a.ID, NodeID: node})
	if h := t.readyHandoff(); h != nil && node == a.RootNode && r.carriesHandoff(a.ID) &&
		(h.ToProvider == "" || h.ToProvider == t.session(sessionID).Provider) {
		d.emit(HandoffConsumed{HandoffID: h.ID, RunID: runID})
	}
}

func planUpdated(t *Thread, ev sdk.RuntimeEvent, pt *ProviderTurn, env Env, d *Decision) {
	r := t.runFor(pt)
	if r == nil || r.settled() || t.replaced(r, pt) {
		return
	}
	ref := cmp.Or(ev.ItemRef, "plan")
	if n := r.nodeByRef(ref); n != nil {
		d.emit(NodeUpdated{RunID: r.ID, NodeID: n.ID, Detail: ev.Detail})
		return
	}
	a := r.attempt(r.ActiveAttempt)
	d.emit(NodeStarted{RunID: r.ID, NodeID: env.NewID("node"), ParentID: a.RootNode, AttemptID: a.ID, Kind: NodePlan,
		ProviderRef: ref, Title: "Plan", Detail: ev.Detail})
}

func requestOpened(t *Thread, sessionID string, ev sdk.RuntimeEvent, pt *ProviderTurn, env Env, d *Decision) {
	if t.requestByRef(sessionID, ev.RequestRef) != nil {
		return
	}
	var runID, nodeID string
	// A request of a replaced attempt is kept (it can be answered) but
	// does not hold the run.
	if r := t.runFor(pt); r != nil && !t.replaced(r, pt) {
		runID = r.ID
		if n := r.nodeByRef(ev.ItemRef); n != nil {
			nodeID = n.ID
		}
	}
	reqID, kind := env.NewID("req"), requestKindFromSDK(ev.RequestKind)
	d.emit(RequestOpened{RequestID: reqID, RunID: runID, NodeID: nodeID, SessionID: sessionID,
		ProviderRef: ev.RequestRef, Kind: kind, Title: ev.Title, Options: optionsFromSDK(ev.Options)})
	// The thread's policy answers at once where it can; the request
	// resolves when the provider says it got the answer.
	if decision := policyDecision(t.ApprovalPolicy, kind); decision != "" {
		d.emit(RequestAnswered{RequestID: reqID, Decision: decision, By: AnsweredByPolicy})
		d.effect(t.request(reqID).respondEffect(t.ID, decision, nil))
	}
}

// turnTerminal ends a provider turn: a child's ends its node; the root
// turn of the active attempt ends the run (invariant 2), or, when the
// attempt was stopped for steering by restart, starts its replacement.
func turnTerminal(t *Thread, ev sdk.RuntimeEvent, pt *ProviderTurn, env Env, d *Decision) {
	if pt == nil {
		d.emit(DiagnosticRecorded{Title: "terminal event for an unknown provider turn", Text: ev.TurnRef})
		return
	}
	r := t.run(pt.RunID)
	if r == nil || r.ActiveAttempt != pt.AttemptID || r.settled() {
		return
	}
	status, _ := ev.Status.(sdk.TurnStatus)
	if a := r.attempt(pt.AttemptID); pt.NodeID != a.RootNode {
		if n := t.node(r.ID, pt.NodeID); n != nil && n.Status == StatusInProgress {
			runID, nodeID := r.ID, n.ID
			d.emit(NodeCompleted{RunID: runID, NodeID: nodeID, Status: itemStatus(status)})
			// A subagent's checkpoint, in a scope of its own under the
			// run's: it does not advance the app run count.
			requestCheckpoint(t, runID, nodeID, env, d)
		}
		return
	}
	if r.Stop.Forced != "" {
		// The host is ending the provider's process: the turn's end (the
		// plugin's, as the session closes) is the forced stop's.
		status, f := r.forcedEnd()
		endRun(t, r.ID, status, "", f, env, d)
		return
	}
	if ev.Limit != nil && status == sdk.TurnFailed && !r.InterruptRequested {
		// A provider limit: the run is blocked, and the thread's policy
		// says whether it waits, moves or ends.
		limitReached(t, r, limitFromSDK(*ev.Limit), env, d)
		return
	}
	if len(r.PendingRestart) > 0 && !r.InterruptRequested {
		// Steering by restart: the attempt that was asked to stop has
		// stopped; a replacement carries the steering messages.
		runID, attemptID, input := r.ID, r.ActiveAttempt, withSteering("", r.PendingRestart)
		closeAttempt(t, runID, runStatus(status), d)
		d.emit(AttemptEnded{RunID: runID, AttemptID: attemptID, Status: runStatus(status)})
		startAttempt(t, runID, input, AttemptSteeringRestart, env, d)
		return
	}
	endRun(t, r.ID, runStatus(status), ev.Title, failureFromSDK(ev.Failure), env, d)
}

// runtimeExited ends a session whose provider process is gone: its
// pending requests can no longer be answered, and a run whose turn it had
// fails, or, when the host ended the process, ends as the host said
// (interrupted, when the run did not stop when asked; failed, when its
// provider went silent).
func runtimeExited(t *Thread, sessionID string, ev sdk.RuntimeEvent, env Env, d *Decision) {
	reason := sdk.StatusWord(ev.Status)
	if ev.Failure != nil {
		reason = ev.Failure.Message
	}
	if s := t.session(sessionID); s != nil && s.Forced != "" {
		reason = "ended by the host: " + s.Forced
	}
	r := t.ActiveRun()
	forced := r != nil && r.Stop.Forced != "" && r.attempt(r.ActiveAttempt).SessionID == sessionID
	endSession(t, sessionID, reason, d)
	r = t.ActiveRun()
	if r == nil || !r.live() {
		return // none, ending, or waiting for a limit (a later attempt opens a session)
	}
	if forced {
		status, f := r.forcedEnd()
		endRun(t, r.ID, status, "", f, env, d)
		return
	}
	// Only an attempt this session took ends with it; one not yet sent
	// anywhere will open a new session.
	if a := r.attempt(r.ActiveAttempt); a.SessionID == sessionID {
		f := Failure{Code: "provider_exited", Message: "the provider process exited during the run"}
		if ev.Failure != nil {
			f.Message = ev.Failure.Message
			f.Code = cmp.Or(ev.Failure.Code, f.Code)
		}
		endRun(t, r.ID, RunStatusFailed, "", &f, env, d)
	}
}

// decideItem maps item lifecycle and content events to nodes, turn items
// and assistant messages. An item is bound by its provider ref within the
// run: the same frame processed twice finds the node it made before.
func decideItem(t *Thread, ev sdk.RuntimeEvent, pt *ProviderTurn, env Env, d *Decision) {
	r := t.runFor(pt)
	if r == nil || r.settled() || r.ActiveAttempt == "" || ev.ItemRef == "" {
		return
	}
	if t.replaced(r, pt) {
		return // a late event of an attempt that was replaced
	}
	runID := r.ID
	var n Node // a copy: emits below may move the run's nodes
	if found := r.nodeByRef(ev.ItemRef); found != nil {
		n = *found
	} else {
		a := r.attempt(r.ActiveAttempt)
		parent := a.RootNode
		if pt != nil {
			parent = pt.NodeID // a subagent's items nest under its node
		}
		n = Node{ID: env.NewID("node"), Kind: cmp.Or(NodeKind(ev.ItemKind), NodeToolCall), Status: StatusInProgress}
		d.emit(NodeStarted{RunID: runID, NodeID: n.ID, ParentID: parent, AttemptID: a.ID, Kind: n.Kind,
			ProviderRef: ev.ItemRef, Title: ev.Title, Detail: ev.Detail})
		if n.Kind == NodeAssistantMessage {
			d.emit(MessageAdded{MessageID: n.ID, RunID: runID, NodeID: n.ID, Role: RoleAssistant, Status: StatusInProgress})
		}
	}
	switch ev.Kind {
	case sdk.EventContentDelta:
		if ev.Text == "" {
			return
		}
		if n.Kind == NodeAssistantMessage {
			d.emit(MessageDelta{MessageID: n.ID, Text: ev.Text})
		} else {
			d.emit(NodeDelta{RunID: runID, NodeID: n.ID, Text: ev.Text})
		}
	case sdk.EventItemUpdated:
		if status := nodeStatus(ev.Status); status != "" || ev.Title != "" || len(ev.Detail) > 0 {
			d.emit(NodeUpdated{RunID: runID, NodeID: n.ID, Status: status, Title: ev.Title, Detail: ev.Detail})
		}
	case sdk.EventItemCompleted:
		if n.Status != StatusInProgress {
			return
		}
		if len(ev.Detail) > 0 || ev.Title != "" {
			d.emit(NodeUpdated{RunID: runID, NodeID: n.ID, Title: ev.Title, Detail: ev.Detail})
		}
		d.emit(NodeCompleted{RunID: runID, NodeID: n.ID, Status: cmp.Or(nodeStatus(ev.Status), StatusCompleted)})
		if n.Kind == NodeAssistantMessage {
			d.emit(MessageCompleted{MessageID: n.ID})
		}
	}
}
