package domain

import (
	"cmp"
	"fmt"
	"time"
)

// Env is what Decide may use from the world: the time of the command and
// an id allocator (seeded in tests).
type Env struct {
	Now   time.Time
	NewID func(prefix string) string
}

// Effect is work for the host to do after a command's events are stored.
type Effect struct {
	Type      string `json:"type"`
	ThreadID  string `json:"threadId"`
	RunID     string `json:"runId,omitempty"`
	AttemptID string `json:"attemptId,omitempty"`
	Text      string `json:"text,omitempty"`
	// For EffectRespond: the session and the provider's request ref.
	SessionID  string `json:"sessionId,omitempty"`
	RequestRef string `json:"requestRef,omitempty"`
	Decision   string `json:"decision,omitempty"`
}

// Effect types.
const (
	// EffectStartTurn sends a run's input to the provider (opening a
	// session first when the thread has none).
	EffectStartTurn = "start_turn"
	// EffectRespond answers a provider's request through its session.
	EffectRespond = "respond"
)

// Decision is what Decide returns.
type Decision struct {
	Events  []Payload
	Effects []Effect
}

func (d *Decision) emit(p ...Payload)  { d.Events = append(d.Events, p...) }
func (d *Decision) effect(e ...Effect) { d.Effects = append(d.Effects, e...) }

// Decide turns a command into events and effects against the current
// thread (nil when the thread does not exist yet). It changes nothing; the
// caller stores the events and applies them with Evolve.
func Decide(t *Thread, cmd Command, env Env) (Decision, error) {
	var d Decision
	if cmd.Payload == nil {
		return d, fmt.Errorf("%w: command %q has no payload", ErrInvalid, cmd.ID)
	}
	if _, create := cmd.Payload.(CreateThread); !create && t == nil {
		return d, fmt.Errorf("%w: thread %q", ErrNotFound, cmd.ThreadID)
	}
	switch p := cmd.Payload.(type) {
	case CreateThread:
		if t != nil {
			return d, fmt.Errorf("%w: thread %q already exists", ErrConflict, cmd.ThreadID)
		}
		if p.Provider == "" {
			return d, fmt.Errorf("%w: thread.create needs a provider", ErrInvalid)
		}
		if p.Cwd == "" || p.Cwd[0] != '/' {
			return d, fmt.Errorf("%w: thread.create needs an absolute cwd, got %q", ErrInvalid, p.Cwd)
		}
		switch p.ApprovalPolicy {
		case "", ApproveDecline, ApproveAccept:
		default:
			return d, fmt.Errorf("%w: approval policy must be %q or %q, got %q", ErrInvalid, ApproveDecline, ApproveAccept, p.ApprovalPolicy)
		}
		d.emit(ThreadCreated(p))
	case DispatchMessage:
		if p.Text == "" {
			return d, fmt.Errorf("%w: message.dispatch needs text", ErrInvalid)
		}
		decideDispatch(t, p, env, &d)
	case IngestProviderEvent:
		decideProviderEvent(t, p, env, &d)
	case RecordSessionOpened:
		d.emit(SessionOpened{SessionID: p.SessionID, ProviderRef: p.ProviderRef, PluginPid: p.PluginPid, ProviderPid: p.ProviderPid})
		if p.ResumeRequested != "" && !p.Resumed {
			d.emit(DiagnosticRecorded{Title: "the provider could not resume its conversation",
				Text: fmt.Sprintf("asked to resume provider thread %s; a fresh conversation started without the earlier context", p.ResumeRequested)})
		}
		if p.ThreadRef != "" && t.providerThreadByRef(p.ThreadRef) == nil {
			d.emit(ProviderThreadBound{ProviderThreadID: env.NewID("pthr"), SessionID: p.SessionID, ProviderRef: p.ThreadRef})
		}
	case FailRun:
		r := t.run(p.RunID)
		if r == nil {
			return d, fmt.Errorf("%w: run %q", ErrNotFound, p.RunID)
		}
		if Terminal(r.Status) {
			return d, nil // already ended: nothing to do
		}
		f := p.Failure
		endRun(t, r, RunStatusFailed, "", &f, env, &d)
	case Recover:
		for _, s := range t.ProviderSessions {
			if s.Status == SessionStatusOpen {
				endSession(t, s.ID, p.Reason, env, &d)
			}
		}
		for i := range t.Runs {
			if r := &t.Runs[i]; Active(r.Status) {
				endRun(t, r, RunStatusFailed, "", &Failure{Code: "host_restarted", Message: p.Reason}, env, &d)
				break // endRun starts the next queued run
			}
		}
		if t.activeRun() == nil && len(d.Events) == 0 {
			startNextQueued(t, env, &d)
		}
	default:
		return d, fmt.Errorf("%w: unknown command type %q", ErrInvalid, cmd.Payload.CommandType())
	}
	return d, nil
}

func decideDispatch(t *Thread, p DispatchMessage, env Env, d *Decision) {
	runID := env.NewID("run")
	msgID := p.MessageID
	if msgID == "" {
		msgID = env.NewID("msg")
	}
	d.emit(
		MessageAdded{MessageID: msgID, RunID: runID, Role: RoleUser, Text: p.Text, Status: StatusCompleted},
		RunQueued{RunID: runID, Ordinal: len(t.Runs) + 1, MessageID: msgID, Input: p.Text},
	)
	if t.activeRun() == nil && !t.hasQueued() {
		startRun(runID, p.Text, t.ID, env, d)
	}
}

// startRun starts a queued run: its first attempt, its root node, and the
// effect that sends its input to the provider.
func startRun(runID, input, threadID string, env Env, d *Decision) {
	attemptID, rootID := env.NewID("att"), env.NewID("node")
	d.emit(
		RunStarted{RunID: runID},
		AttemptStarted{RunID: runID, AttemptID: attemptID, Reason: AttemptInitial, RootNode: rootID},
		NodeStarted{RunID: runID, NodeID: rootID, AttemptID: attemptID, Kind: NodeRootTurn},
	)
	d.effect(Effect{Type: EffectStartTurn, ThreadID: threadID, RunID: runID, AttemptID: attemptID, Text: input})
}

// startNextQueued starts the oldest queued run, if any.
func startNextQueued(t *Thread, env Env, d *Decision) {
	for _, r := range t.Runs {
		if r.Status == RunStatusQueued {
			startRun(r.ID, r.Input, t.ID, env, d)
			return
		}
	}
}

func (t *Thread) activeRun() *Run {
	for i := range t.Runs {
		if Active(t.Runs[i].Status) {
			return &t.Runs[i]
		}
	}
	return nil
}

func (t *Thread) hasQueued() bool {
	for _, r := range t.Runs {
		if r.Status == RunStatusQueued {
			return true
		}
	}
	return false
}

func (t *Thread) providerThreadByRef(ref string) *ProviderThread {
	for i := range t.ProviderThreads {
		if t.ProviderThreads[i].ProviderRef == ref {
			return &t.ProviderThreads[i]
		}
	}
	return nil
}

func (t *Thread) providerTurnByRef(ref string) *ProviderTurn {
	for i := range t.ProviderTurns {
		if t.ProviderTurns[i].ProviderRef == ref {
			return &t.ProviderTurns[i]
		}
	}
	return nil
}

func (r *Run) nodeByRef(ref string) *Node {
	for i := range r.Nodes {
		if r.Nodes[i].ProviderRef == ref && r.Nodes[i].Kind != NodeRootTurn {
			return &r.Nodes[i]
		}
	}
	return nil
}

func (t *Thread) requestByRef(sessionID, ref string) *RuntimeRequest {
	for i := range t.Requests {
		if q := &t.Requests[i]; q.ProviderRef == ref && q.SessionID == sessionID {
			return q
		}
	}
	return nil
}

// runFor finds the run a provider event belongs to: the run bound to its
// turn, or else the active run.
func (t *Thread) runFor(ev ProviderEvent) *Run {
	if ev.TurnRef != "" {
		if pt := t.providerTurnByRef(ev.TurnRef); pt != nil {
			return t.run(pt.RunID)
		}
	}
	return t.activeRun()
}

func decideProviderEvent(t *Thread, p IngestProviderEvent, env Env, d *Decision) {
	ev := p.Event
	s := t.session(p.SessionID)
	if s == nil || s.Status != SessionStatusOpen {
		return // a late event from a session that has ended: its effects are already recorded
	}
	switch ev.Kind {
	case EvThreadStarted:
		if ev.ThreadRef != "" && t.providerThreadByRef(ev.ThreadRef) == nil {
			var parent string
			if pt := t.providerThreadByRef(ev.ParentThreadRef); pt != nil {
				parent = pt.ID
			}
			d.emit(ProviderThreadBound{ProviderThreadID: env.NewID("pthr"), SessionID: p.SessionID, ProviderRef: ev.ThreadRef, ParentID: parent})
		}
	case EvTurnStarted:
		if ev.TurnRef == "" || t.providerTurnByRef(ev.TurnRef) != nil {
			return // already bound: reprocessing allocates nothing
		}
		r := t.activeRun()
		if r == nil || r.ActiveAttempt == "" {
			d.emit(DiagnosticRecorded{Title: "provider turn started with no active run", Text: ev.TurnRef})
			return
		}
		pthr := t.providerThreadByRef(ev.ThreadRef)
		var pthrID string
		if pthr == nil {
			pthrID = env.NewID("pthr")
			d.emit(ProviderThreadBound{ProviderThreadID: pthrID, SessionID: p.SessionID, ProviderRef: ev.ThreadRef})
		} else {
			pthrID = pthr.ID
		}
		a := r.attempt(r.ActiveAttempt)
		node := a.RootNode
		if pthr != nil && pthr.ParentID != "" {
			// A turn on a child (subagent) thread: it gets a node of its own
			// under the root, and its end never ends the run.
			node = env.NewID("node")
			d.emit(NodeStarted{RunID: r.ID, NodeID: node, ParentID: a.RootNode, AttemptID: a.ID, Kind: NodeSubagent,
				ProviderRef: ev.TurnRef, Title: ev.Title})
		}
		d.emit(ProviderTurnBound{ProviderTurnID: env.NewID("pturn"), ProviderThreadID: pthrID, SessionID: p.SessionID,
			ProviderRef: ev.TurnRef, RunID: r.ID, AttemptID: a.ID, NodeID: node})
	case EvItemStarted, EvItemUpdated, EvItemCompleted, EvContentDelta:
		decideItem(t, ev, env, d)
	case EvPlanUpdated:
		r := t.runFor(ev)
		if r == nil || Terminal(r.Status) {
			return
		}
		ref := ev.ItemRef
		if ref == "" {
			ref = "plan"
		}
		if n := r.nodeByRef(ref); n != nil {
			d.emit(NodeUpdated{RunID: r.ID, NodeID: n.ID, Detail: ev.Detail})
			return
		}
		a := r.attempt(r.ActiveAttempt)
		d.emit(NodeStarted{RunID: r.ID, NodeID: env.NewID("node"), ParentID: a.RootNode, AttemptID: a.ID, Kind: "plan",
			ProviderRef: ref, Title: "Plan", Detail: ev.Detail})
	case EvRequestOpened:
		if t.requestByRef(p.SessionID, ev.RequestRef) != nil {
			return
		}
		var runID, nodeID string
		if r := t.runFor(ev); r != nil {
			runID = r.ID
			if n := r.nodeByRef(ev.ItemRef); n != nil {
				nodeID = n.ID
			}
		}
		d.emit(RequestOpened{RequestID: env.NewID("req"), RunID: runID, NodeID: nodeID, SessionID: p.SessionID,
			ProviderRef: ev.RequestRef, Kind: ev.RequestKind, Title: ev.Title, Options: ev.Options})
		// The thread's policy answers at once; the request resolves when
		// the provider says it got the answer.
		d.effect(Effect{Type: EffectRespond, ThreadID: t.ID, RunID: runID, SessionID: p.SessionID,
			RequestRef: ev.RequestRef, Decision: t.ApprovalPolicy})
	case EvRequestResolved:
		q := t.requestByRef(p.SessionID, ev.RequestRef)
		if q == nil || q.Status != RequestStatusPending {
			return
		}
		status := RequestStatusResolved
		if ev.Status == DecisionCancel {
			status = RequestStatusCancelled
		}
		d.emit(RequestResolved{RequestID: q.ID, Status: status, Decision: ev.Status})
	case EvUsage:
		if r := t.runFor(ev); r != nil && ev.Usage != nil && !Terminal(r.Status) {
			d.emit(UsageReported{RunID: r.ID, Usage: *ev.Usage})
		}
	case EvTurnTerminal:
		pt := t.providerTurnByRef(ev.TurnRef)
		if pt == nil {
			d.emit(DiagnosticRecorded{Title: "terminal event for an unknown provider turn", Text: ev.TurnRef})
			return
		}
		r := t.run(pt.RunID)
		if r == nil || r.ActiveAttempt != pt.AttemptID || Terminal(r.Status) {
			return
		}
		// Only the root turn of the run's active attempt ends the run; a
		// child's terminal ends its own node and never the run.
		if a := r.attempt(pt.AttemptID); pt.NodeID != a.RootNode {
			if n := t.node(r.ID, pt.NodeID); n != nil && n.Status == StatusInProgress {
				d.emit(NodeCompleted{RunID: r.ID, NodeID: n.ID, Status: nodeStatus(ev.Status)})
			}
			return
		}
		status := RunStatusCompleted
		switch ev.Status {
		case "interrupted":
			status = RunStatusInterrupted
		case "failed":
			status = RunStatusFailed
		}
		endRun(t, r, status, ev.Title, ev.Failure, env, d)
	case EvRuntimeExited:
		reason := ev.Status
		if ev.Failure != nil {
			reason = ev.Failure.Message
		}
		endSession(t, p.SessionID, reason, env, d)
		if r := t.activeRun(); r != nil {
			if a := r.attempt(r.ActiveAttempt); a != nil && (a.SessionID == p.SessionID || a.SessionID == "") {
				f := Failure{Code: "provider_exited", Message: "the provider process exited during the run"}
				if ev.Failure != nil {
					f.Message = ev.Failure.Message
					f.Code = cmp.Or(ev.Failure.Code, f.Code)
				}
				endRun(t, r, RunStatusFailed, "", &f, env, d)
			}
		}
	case EvDiagnostic:
		var runID string
		if r := t.runFor(ev); r != nil {
			runID = r.ID
		}
		d.emit(DiagnosticRecorded{RunID: runID, Title: ev.Title, Text: ev.Text})
	}
	// session_state and rate_limit are kept in the raw-frame log only.
}

// decideItem maps item lifecycle and content events to nodes, turn items
// and assistant messages. An item is bound by its provider ref within the
// run: the same frame processed twice finds the node it made before.
func decideItem(t *Thread, ev ProviderEvent, env Env, d *Decision) {
	r := t.runFor(ev)
	if r == nil || Terminal(r.Status) || r.ActiveAttempt == "" || ev.ItemRef == "" {
		return
	}
	a := r.attempt(r.ActiveAttempt)
	n := r.nodeByRef(ev.ItemRef)
	var nodeID string
	if n == nil {
		kind := ev.ItemKind
		if kind == "" {
			kind = "tool_call"
		}
		nodeID = env.NewID("node")
		d.emit(NodeStarted{RunID: r.ID, NodeID: nodeID, ParentID: a.RootNode, AttemptID: a.ID, Kind: kind,
			ProviderRef: ev.ItemRef, Title: ev.Title, Detail: ev.Detail})
		if kind == ItemAssistantMessage {
			d.emit(MessageAdded{MessageID: nodeID, RunID: r.ID, NodeID: nodeID, Role: RoleAssistant, Status: StatusInProgress})
		}
		n = &Node{ID: nodeID, Kind: kind, Status: StatusInProgress}
	} else {
		nodeID = n.ID
	}
	switch ev.Kind {
	case EvContentDelta:
		if ev.Text == "" {
			return
		}
		if n.Kind == ItemAssistantMessage {
			d.emit(MessageDelta{MessageID: nodeID, Text: ev.Text})
		} else {
			d.emit(NodeDelta{RunID: r.ID, NodeID: nodeID, Text: ev.Text})
		}
	case EvItemUpdated:
		if ev.Status != "" || ev.Title != "" || len(ev.Detail) > 0 {
			d.emit(NodeUpdated{RunID: r.ID, NodeID: nodeID, Status: ev.Status, Title: ev.Title, Detail: ev.Detail})
		}
	case EvItemCompleted:
		if n.Status != StatusInProgress {
			return
		}
		if len(ev.Detail) > 0 || ev.Title != "" {
			d.emit(NodeUpdated{RunID: r.ID, NodeID: nodeID, Title: ev.Title, Detail: ev.Detail})
		}
		status := ev.Status
		if status == "" {
			status = StatusCompleted
		}
		d.emit(NodeCompleted{RunID: r.ID, NodeID: nodeID, Status: status})
		if n.Kind == ItemAssistantMessage {
			d.emit(MessageCompleted{MessageID: nodeID})
		}
	}
}

// endRun is the completion barrier and the run's end: open messages are
// flushed, open items closed, pending requests expired, then the root node
// and the run end, and the next queued run starts.
func endRun(t *Thread, r *Run, status, stopReason string, f *Failure, env Env, d *Decision) {
	closing := StatusCompleted
	if status != RunStatusCompleted {
		closing = StatusCancelled
	}
	var root string
	if a := r.attempt(r.ActiveAttempt); a != nil {
		root = a.RootNode
	}
	for _, m := range t.Messages {
		if m.RunID == r.ID && m.Status == StatusInProgress {
			d.emit(MessageCompleted{MessageID: m.ID})
		}
	}
	for _, n := range r.Nodes {
		if n.Status == StatusInProgress && n.ID != root {
			d.emit(NodeCompleted{RunID: r.ID, NodeID: n.ID, Status: closing})
		}
	}
	for _, q := range t.Requests {
		if q.RunID == r.ID && q.Status == RequestStatusPending {
			d.emit(RequestResolved{RequestID: q.ID, Status: RequestStatusExpired})
		}
	}
	if root != "" {
		rootStatus := StatusCompleted
		if status != RunStatusCompleted {
			rootStatus = status
		}
		d.emit(NodeCompleted{RunID: r.ID, NodeID: root, Status: rootStatus})
	}
	d.emit(RunEnded{RunID: r.ID, AttemptID: r.ActiveAttempt, Status: status, StopReason: stopReason, Failure: f})
	// When the active run ends, the next queued run starts. (t does not
	// have the events above yet: r is still in its old status.)
	if Active(r.Status) {
		for _, q := range t.Runs {
			if q.Status == RunStatusQueued && q.ID != r.ID {
				startRun(q.ID, q.Input, t.ID, env, d)
				break
			}
		}
	}
}

// nodeStatus maps a provider turn status to a node status.
func nodeStatus(turnStatus string) string {
	switch turnStatus {
	case "failed":
		return StatusFailed
	case "interrupted":
		return StatusCancelled
	}
	return StatusCompleted
}

// endSession ends a session; its pending requests can no longer be answered.
func endSession(t *Thread, sessionID, reason string, env Env, d *Decision) {
	d.emit(SessionEnded{SessionID: sessionID, Reason: reason})
	for _, q := range t.Requests {
		if q.SessionID == sessionID && q.Status == RequestStatusPending {
			d.emit(RequestResolved{RequestID: q.ID, Status: RequestStatusExpired, Delivery: DeliveryNotResumable})
		}
	}
}
