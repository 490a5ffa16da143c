package domain

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"time"
)

// Env is what Decide may use from the world: the time of the command, an
// id allocator (seeded in tests), and what the thread's provider can do.
type Env struct {
	Now   time.Time
	NewID func(prefix string) string
	Caps  Capabilities
}

// Effect is work for the host to do after a command's events are stored.
// It is stored in the outbox in the same batch as those events.
type Effect struct {
	// ID is the effect's outbox key, given by the store.
	ID        string `json:"id,omitempty"`
	Type      string `json:"type"`
	ThreadID  string `json:"threadId"`
	RunID     string `json:"runId,omitempty"`
	AttemptID string `json:"attemptId,omitempty"`
	MessageID string `json:"messageId,omitempty"`
	Text      string `json:"text,omitempty"`
	// SessionID is the provider session an effect is bound to; empty for
	// start_turn, which uses (or opens) the thread's session.
	SessionID  string            `json:"sessionId,omitempty"`
	TurnRef    string            `json:"turnRef,omitempty"`
	RequestRef string            `json:"requestRef,omitempty"`
	Decision   string            `json:"decision,omitempty"`
	Answers    map[string]string `json:"answers,omitempty"`
	// Checkpoints: the checkpoint to capture or restore, its ref, the
	// checkpoint to summarize against, and the commit to restore.
	CheckpointID string `json:"checkpointId,omitempty"`
	Ref          string `json:"ref,omitempty"`
	BaseID       string `json:"baseId,omitempty"`
	Commit       string `json:"commit,omitempty"`
	// Rollback: the provider conversation, how many of its turns to drop
	// (TurnRef is the oldest of them), and the refs of stale checkpoints.
	RollbackID string   `json:"rollbackId,omitempty"`
	ThreadRef  string   `json:"threadRef,omitempty"`
	Turns      int      `json:"turns,omitempty"`
	Refs       []string `json:"refs,omitempty"`
	// Replayed marks an effect a host that restarted performs again (not
	// stored); Hold, a rollback stage that follows one: when the rollback
	// is done, queued runs wait for the thread's next message.
	Replayed bool `json:"-"`
	Hold     bool `json:"hold,omitempty"`
}

// Effect types.
const (
	// EffectStartTurn sends a run's input to the provider (opening a
	// session first when the thread has none).
	EffectStartTurn = "start_turn"
	// EffectRespond answers a provider's request through its session.
	EffectRespond = "respond"
	// EffectSteer adds a message to the provider's active turn.
	EffectSteer = "steer"
	// EffectInterrupt asks the provider to stop a turn.
	EffectInterrupt = "interrupt"
)

// Decision is what Decide returns.
type Decision struct {
	Events  []Payload
	Effects []Effect

	queued  []queuedRun // runs this decision queued, in order
	started bool        // this decision started a queued run
	hold    bool        // start no queued run (recovery: no one asked for work)
}

type queuedRun struct{ id, input string }

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
		case "", ApproveDecline, ApproveAccept, ApproveAsk:
		default:
			return d, fmt.Errorf("%w: approval policy must be %q, %q or %q, got %q", ErrInvalid,
				ApproveDecline, ApproveAccept, ApproveAsk, p.ApprovalPolicy)
		}
		d.emit(ThreadCreated(p))
	case DispatchMessage:
		if p.Text == "" {
			return d, fmt.Errorf("%w: message.dispatch needs text", ErrInvalid)
		}
		if err := decideDispatch(t, p, env, &d); err != nil {
			return d, err
		}
	case InterruptRun:
		if err := decideInterrupt(t, p, env, &d); err != nil {
			return d, err
		}
	case RespondToRequest:
		if err := decideRespond(t, p, &d); err != nil {
			return d, err
		}
	case RollbackToCheckpoint:
		if err := decideRollback(t, p, env, &d); err != nil {
			return d, err
		}
	case RecordCheckpoint:
		if err := decideRecordCheckpoint(t, p, env, &d); err != nil {
			return d, err
		}
	case RecordFilesRestored:
		if err := decideFilesRestored(t, p, &d); err != nil {
			return d, err
		}
	case RecordProviderReconciled:
		if err := decideProviderReconciled(t, p, env, &d); err != nil {
			return d, err
		}
	case SteerFailed:
		m := t.message(p.MessageID)
		if m == nil {
			return d, fmt.Errorf("%w: message %q", ErrNotFound, p.MessageID)
		}
		d.emit(DiagnosticRecorded{RunID: p.RunID, Title: "the provider did not take a steering message; it was queued as a new run",
			Text: p.Reason})
		queueRun(t, m.ID, m.Text, env, &d)
	case RecordTurnDispatched:
		r, a := t.attemptByID(p.AttemptID)
		if a == nil {
			return d, fmt.Errorf("%w: attempt %q", ErrNotFound, p.AttemptID)
		}
		if !r.live() || r.ActiveAttempt != a.ID || a.SessionID != "" {
			return d, nil // stale, or its turn has already started
		}
		if s := t.session(p.SessionID); s == nil || s.Status != SessionStatusOpen {
			endRun(t, r, RunStatusFailed, "", &Failure{Code: "provider_exited",
				Message: "the provider exited before the turn started"}, env, &d)
			return d, nil
		}
		d.emit(AttemptDispatched{RunID: r.ID, AttemptID: a.ID, SessionID: p.SessionID})
	case RespondFailed:
		q := t.request(p.RequestID)
		if q == nil {
			return d, fmt.Errorf("%w: request %q", ErrNotFound, p.RequestID)
		}
		if q.Status == RequestStatusPending && q.AnsweredBy != "" {
			d.emit(RequestAnswerFailed{RequestID: q.ID, Reason: p.Reason})
			// A policy answers again, a few times: a client that answered
			// is asked again instead.
			if q.AnsweredBy == "policy" && q.AnswerFailures+1 < policyAnswerTries {
				d.emit(RequestAnswered{RequestID: q.ID, Decision: q.Decision, By: "policy"})
				d.effect(Effect{Type: EffectRespond, ThreadID: t.ID, RunID: q.RunID, SessionID: q.SessionID,
					RequestRef: q.ProviderRef, Decision: q.Decision})
			}
		}
	case MarkRequestUnreachable:
		q := t.request(p.RequestID)
		if q == nil {
			return d, fmt.Errorf("%w: request %q", ErrNotFound, p.RequestID)
		}
		if q.Status == RequestStatusPending {
			d.emit(RequestResolved{RequestID: q.ID, Status: RequestStatusExpired, Delivery: DeliveryNotResumable})
		}
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
		if !r.live() {
			return d, nil // already ended, ending, or never started: nothing to do
		}
		f := p.Failure
		endRun(t, r, RunStatusFailed, "", &f, env, &d)
	case Recover:
		// Recovery starts no work: runs it leaves queued start with the
		// thread's next message.
		d.hold = true
		for _, e := range p.Effects {
			d.emit(EffectCancelled{EffectID: e.ID, Type: e.Type, RunID: e.RunID, Reason: p.Reason})
			if m := t.message(e.MessageID); m != nil && e.Type == EffectSteer {
				if r := t.run(e.RunID); r != nil {
					requeue(t, r, []SteeringMessage{{MessageID: m.ID, Text: m.Text}},
						"the host restarted before it was known to have reached the provider", env, &d)
				}
			}
		}
		for _, s := range t.ProviderSessions {
			if s.Status == SessionStatusOpen {
				endSession(t, s.ID, p.Reason, env, &d)
			}
		}
		// A run whose turn had ended ends as it would have; one in flight
		// fails. Both end now (their checkpoints are captured after), so
		// that nothing starts from recovery.
		if r := t.activeRun(); r != nil {
			out := r.Ending
			if out == nil {
				out = endRun(t, r, RunStatusFailed, "", &Failure{Code: "host_restarted", Message: p.Reason}, env, &d)
			}
			finishRun(t, r, *out, env, &d)
		}
	default:
		return d, fmt.Errorf("%w: unknown command type %q", ErrInvalid, cmd.Payload.CommandType())
	}
	return d, nil
}

func decideDispatch(t *Thread, p DispatchMessage, env Env, d *Decision) error {
	if n := len(t.Rollbacks); n > 0 && t.Rollbacks[n-1].Status == RollbackStatusFailed {
		rb := t.Rollbacks[n-1]
		return fmt.Errorf("%w: rollback %s failed while restoring files (%s), so the files may be half-restored; no run starts until checkpoint.rollback succeeds",
			ErrConflict, rb.ID, rb.Failure.Message)
	}
	active := t.activeRun()
	mode := p.Mode
	if mode == "" {
		mode = autoMode(t, active, env.Caps)
	}
	msgID := p.MessageID
	if msgID == "" {
		msgID = env.NewID("msg")
	}
	if t.message(msgID) != nil {
		return fmt.Errorf("%w: message %q already exists", ErrConflict, msgID)
	}
	switch mode {
	case ModeStartImmediately:
		if active != nil || t.hasQueued() || t.rollbackHolds() {
			return fmt.Errorf("%w: a run is active or queued, or a rollback is in progress; send with mode %s, %s or %s", ErrConflict,
				ModeQueueAfterActive, ModeSteerActive, ModeRestartActive)
		}
		queueRun(t, msgID, p.Text, env, d)
	case ModeQueueAfterActive:
		queueRun(t, msgID, p.Text, env, d)
		if active == nil && !t.rollbackHolds() {
			startNextQueued(t, env, d) // runs a recovery left queued go first
		}
	case ModeSteerActive, ModeRestartActive:
		if active == nil {
			return fmt.Errorf("%w: %s needs an active run, and thread %s has none", ErrConflict, mode, t.ID)
		}
		if p.TargetRunID != "" && p.TargetRunID != active.ID {
			return fmt.Errorf("%w: run %s is not the active run (%s is)", ErrConflict, p.TargetRunID, active.ID)
		}
		if active.InterruptRequested || active.Ending != nil {
			return fmt.Errorf("%w: run %d is being interrupted or is ending; send with mode %s", ErrConflict, active.Ordinal, ModeQueueAfterActive)
		}
		turn := t.rootTurn(active)
		if mode == ModeSteerActive {
			if !env.Caps.NativeSteering {
				return fmt.Errorf("%w: %s cannot steer a running turn; send with mode %s or %s", ErrUnsupported,
					t.Provider, ModeRestartActive, ModeQueueAfterActive)
			}
			if turn == nil || len(active.PendingRestart) > 0 {
				return fmt.Errorf("%w: run %d has no provider turn to steer yet; send with mode %s or %s", ErrConflict,
					active.Ordinal, ModeRestartActive, ModeQueueAfterActive)
			}
		}
		d.emit(MessageAdded{MessageID: msgID, RunID: active.ID, Role: RoleUser, Text: p.Text, Status: StatusCompleted})
		a := active.attempt(active.ActiveAttempt)
		if mode == ModeSteerActive {
			d.emit(RunSteered{RunID: active.ID, AttemptID: a.ID, MessageID: msgID})
			d.effect(Effect{Type: EffectSteer, ThreadID: t.ID, RunID: active.ID, AttemptID: a.ID, MessageID: msgID,
				SessionID: a.SessionID, TurnRef: turn.ProviderRef, Text: p.Text})
			return nil
		}
		first := len(active.PendingRestart) == 0
		d.emit(RestartRequested{RunID: active.ID, AttemptID: a.ID, MessageID: msgID, Text: p.Text})
		if first {
			d.effect(interruptEffect(t, active, turn))
		}
	default:
		return fmt.Errorf("%w: unknown dispatch mode %q (want %s, %s, %s or %s)", ErrInvalid, mode,
			ModeStartImmediately, ModeQueueAfterActive, ModeSteerActive, ModeRestartActive)
	}
	return nil
}

// autoMode is the dispatch policy when the client does not choose: an
// idle thread starts a run; a message for a run whose provider turn has
// started steers it natively or by restart; anything else queues.
func autoMode(t *Thread, active *Run, caps Capabilities) string {
	if active == nil {
		return ModeQueueAfterActive // starts at once unless runs are queued
	}
	if t.rootTurn(active) == nil || active.InterruptRequested || active.Ending != nil || len(active.PendingRestart) > 0 {
		if len(active.PendingRestart) > 0 && !active.InterruptRequested {
			return ModeRestartActive // joins the replacement attempt already coming
		}
		return ModeQueueAfterActive
	}
	if caps.NativeSteering {
		return ModeSteerActive
	}
	return ModeRestartActive
}

// queueRun adds a run for a message (already added, or added here) and
// starts it when nothing is ahead of it.
func queueRun(t *Thread, msgID, text string, env Env, d *Decision) {
	runID := env.NewID("run")
	if t.message(msgID) == nil {
		d.emit(MessageAdded{MessageID: msgID, RunID: runID, Role: RoleUser, Text: text, Status: StatusCompleted})
	}
	d.emit(RunQueued{RunID: runID, Ordinal: len(t.Runs) + len(d.queued) + 1, MessageID: msgID, Input: text})
	d.queued = append(d.queued, queuedRun{runID, text})
	if t.activeRun() == nil && !t.hasQueued() && !d.started && !d.hold && !t.rollbackHolds() {
		startRun(t, runID, text, AttemptInitial, env, d)
	}
}

// requeue makes steering messages that never reached the provider runs of
// their own, saying so: a user's message is never dropped.
func requeue(t *Thread, r *Run, msgs []SteeringMessage, why string, env Env, d *Decision) {
	for _, m := range msgs {
		d.emit(DiagnosticRecorded{RunID: r.ID, Title: "a message for run " + strconv.Itoa(r.Ordinal) + " was queued as a run of its own",
			Text: why})
		queueRun(t, m.MessageID, m.Text, env, d)
	}
}

// interruptEffect asks the provider to stop the run's active attempt.
func interruptEffect(t *Thread, r *Run, turn *ProviderTurn) Effect {
	a := r.attempt(r.ActiveAttempt)
	e := Effect{Type: EffectInterrupt, ThreadID: t.ID, RunID: r.ID, AttemptID: a.ID, SessionID: a.SessionID}
	if turn != nil {
		e.TurnRef = turn.ProviderRef
	}
	return e
}

func decideInterrupt(t *Thread, p InterruptRun, env Env, d *Decision) error {
	r := t.run(p.RunID)
	if r == nil {
		return fmt.Errorf("%w: run %q", ErrNotFound, p.RunID)
	}
	switch {
	case r.Status == RunStatusQueued:
		d.emit(RunEnded{RunID: r.ID, Status: RunStatusCancelled, StopReason: "cancelled before it started"})
	case Terminal(r.Status):
		return fmt.Errorf("%w: run %d has already ended (%s)", ErrConflict, r.Ordinal, r.Status)
	case r.InterruptRequested || r.Ending != nil:
		// Asked before, or the turn is over: nothing to send.
	default:
		d.emit(InterruptRequested{RunID: r.ID, AttemptID: r.ActiveAttempt})
		d.effect(interruptEffect(t, r, t.rootTurn(r)))
	}
	return nil
}

func decideRespond(t *Thread, p RespondToRequest, d *Decision) error {
	q := t.request(p.RequestID)
	if q == nil {
		return fmt.Errorf("%w: request %q", ErrNotFound, p.RequestID)
	}
	switch p.Decision {
	case "accept", "accept_for_session", "decline", DecisionCancel:
		if p.Decision != "decline" && p.Decision != DecisionCancel && q.Kind == RequestUserInput {
			return fmt.Errorf("%w: a question is answered with decision \"answer\" (or declined), not %q", ErrInvalid, p.Decision)
		}
	case "answer":
		if len(p.Answers) == 0 {
			return fmt.Errorf("%w: decision \"answer\" needs answers", ErrInvalid)
		}
		if q.Kind != RequestUserInput && q.Kind != RequestGeneric {
			return fmt.Errorf("%w: a %s request takes accept, accept_for_session, decline or cancel, not answers", ErrInvalid, q.Kind)
		}
	default:
		return fmt.Errorf("%w: decision must be accept, accept_for_session, decline, cancel or answer, got %q", ErrInvalid, p.Decision)
	}
	if q.Delivery == DeliveryNotResumable {
		return fmt.Errorf("%w: request %s cannot be answered: its provider process is gone", ErrNotResumable, q.ID)
	}
	if q.Status != RequestStatusPending || q.AnsweredBy != "" {
		return fmt.Errorf("%w: request %s is already %s", ErrConflict, q.ID, cmp.Or(q.AnsweredBy+" answered", q.Status))
	}
	d.emit(RequestAnswered{RequestID: q.ID, Decision: p.Decision, Answers: p.Answers, By: "client"})
	d.effect(Effect{Type: EffectRespond, ThreadID: t.ID, RunID: q.RunID, SessionID: q.SessionID, RequestRef: q.ProviderRef,
		Decision: p.Decision, Answers: p.Answers})
	return nil
}

// startRun starts an attempt at a run: for a queued run its first, for an
// active one a replacement. Its root node is made, and the effect that
// sends the input to the provider.
func startRun(t *Thread, runID, input, reason string, env Env, d *Decision) {
	attemptID, rootID := env.NewID("att"), env.NewID("node")
	if reason == AttemptInitial {
		if !t.hasRootCheckpoint() {
			// The baseline: the worktree before this run, captured before its
			// turn is sent (effects run in order). It is the checkpoint of
			// the run before, when a thread from before checkpoints has one.
			var prev *Run
			for i := range t.Runs {
				if r := &t.Runs[i]; r.ID != runID && Terminal(r.Status) && r.Status != RunStatusCancelled {
					prev = r
				}
			}
			requestCheckpoint(t, prev, "", env, d)
		}
		d.emit(RunStarted{RunID: runID})
		d.started = true
		if h := t.readyHandoff(); h != nil {
			// A fresh provider conversation after a rollback: the first run
			// carries what came before. The handoff is used up when the
			// provider takes the turn.
			input = h.Text + "\n\n" + input
		}
	}
	d.emit(
		AttemptStarted{RunID: runID, AttemptID: attemptID, Reason: reason, RootNode: rootID},
		NodeStarted{RunID: runID, NodeID: rootID, AttemptID: attemptID, Kind: NodeRootTurn},
	)
	d.effect(Effect{Type: EffectStartTurn, ThreadID: t.ID, RunID: runID, AttemptID: attemptID, Text: input})
}

// startNextQueued starts the oldest queued run, if any: one queued before
// this decision, else one this decision queued.
func startNextQueued(t *Thread, env Env, d *Decision) {
	if d.started || d.hold {
		return
	}
	for _, r := range t.Runs {
		if r.Status == RunStatusQueued {
			startRun(t, r.ID, r.Input, AttemptInitial, env, d)
			return
		}
	}
	if len(d.queued) > 0 {
		startRun(t, d.queued[0].id, d.queued[0].input, AttemptInitial, env, d)
	}
}

// replaced says whether an event is of a turn bound to an attempt of the
// run that is no longer its active one.
func (t *Thread) replaced(r *Run, pt *ProviderTurn) bool {
	return pt != nil && pt.RunID == r.ID && pt.AttemptID != r.ActiveAttempt
}

// bindThread returns the app id of a provider thread, binding it first
// when it is new.
func (t *Thread) bindThread(pthr *ProviderThread, sessionID, ref string, env Env, d *Decision) string {
	if pthr != nil {
		return pthr.ID
	}
	id := env.NewID("pthr")
	d.emit(ProviderThreadBound{ProviderThreadID: id, SessionID: sessionID, ProviderRef: ref})
	return id
}

// attemptByID finds an attempt and its run.
func (t *Thread) attemptByID(id string) (*Run, *Attempt) {
	for i := range t.Runs {
		if a := t.Runs[i].attempt(id); a != nil {
			return &t.Runs[i], a
		}
	}
	return nil, nil
}

// rootTurn is the provider turn bound to the root node of the run's
// active attempt, if it has started.
func (t *Thread) rootTurn(r *Run) *ProviderTurn {
	a := r.attempt(r.ActiveAttempt) // an active run always has one
	for i := range t.ProviderTurns {
		if pt := &t.ProviderTurns[i]; pt.AttemptID == a.ID && pt.NodeID == a.RootNode {
			return pt
		}
	}
	return nil
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
	for i := len(t.ProviderTurns) - 1; i >= 0; i-- { // the newest are wanted most
		if t.ProviderTurns[i].ProviderRef == ref {
			return &t.ProviderTurns[i]
		}
	}
	return nil
}

func (r *Run) nodeByRef(ref string) *Node {
	for i := len(r.Nodes) - 1; i >= 0; i-- { // the newest are wanted most
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
// turn (pt), or else the active run.
func (t *Thread) runFor(pt *ProviderTurn) *Run {
	if pt != nil {
		return t.run(pt.RunID)
	}
	return t.activeRun()
}

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
	case EvThreadStarted:
		if ev.ThreadRef != "" && t.providerThreadByRef(ev.ThreadRef) == nil {
			var parent string
			if pt := t.providerThreadByRef(ev.ParentThreadRef); pt != nil {
				parent = pt.ID
			}
			d.emit(ProviderThreadBound{ProviderThreadID: env.NewID("pthr"), SessionID: p.SessionID, ProviderRef: ev.ThreadRef, ParentID: parent})
		}
	case EvTurnStarted:
		if ev.TurnRef == "" || pt != nil {
			return // already bound: reprocessing allocates nothing
		}
		pthr := t.providerThreadByRef(ev.ThreadRef)
		if ev.ClientTurnID != "" && (pthr == nil || pthr.ParentID == "") {
			// The provider names the attempt the turn is for. A turn for an
			// attempt the host no longer wants (replaced, or its run
			// ended) is bound to it, so that its events are known and
			// ignored, and the provider is asked to stop it.
			r, a := t.attemptByID(ev.ClientTurnID)
			if a == nil {
				d.emit(DiagnosticRecorded{Title: "provider turn started for an unknown attempt", Text: ev.ClientTurnID})
				return
			}
			if !r.live() || r.ActiveAttempt != a.ID {
				pthrID := t.bindThread(pthr, p.SessionID, ev.ThreadRef, env, d)
				d.emit(ProviderTurnBound{ProviderTurnID: env.NewID("pturn"), ProviderThreadID: pthrID, SessionID: p.SessionID,
					ProviderRef: ev.TurnRef, RunID: r.ID, AttemptID: a.ID, NodeID: a.RootNode})
				d.effect(Effect{Type: EffectInterrupt, ThreadID: t.ID, RunID: r.ID, AttemptID: a.ID, SessionID: p.SessionID, TurnRef: ev.TurnRef})
				return
			}
		}
		r := t.activeRun()
		if r == nil || r.ActiveAttempt == "" || r.Ending != nil {
			d.emit(DiagnosticRecorded{Title: "provider turn started with no active run", Text: ev.TurnRef})
			return
		}
		pthrID := t.bindThread(pthr, p.SessionID, ev.ThreadRef, env, d)
		a := r.attempt(r.ActiveAttempt)
		node := a.RootNode
		if pthr != nil && pthr.ParentID != "" {
			// A turn on a child (subagent) thread: it gets a node of its own
			// under the node of its parent thread's turn, and its end never
			// ends the run.
			node = env.NewID("node")
			d.emit(NodeStarted{RunID: r.ID, NodeID: node, ParentID: t.parentTurnNode(r, a, pthr.ParentID), AttemptID: a.ID,
				Kind: NodeSubagent, ProviderRef: ev.TurnRef, Title: ev.Title})
		}
		d.emit(ProviderTurnBound{ProviderTurnID: env.NewID("pturn"), ProviderThreadID: pthrID, SessionID: p.SessionID,
			ProviderRef: ev.TurnRef, RunID: r.ID, AttemptID: a.ID, NodeID: node})
		if h := t.readyHandoff(); h != nil && node == a.RootNode && a.Reason == AttemptInitial {
			d.emit(HandoffConsumed{HandoffID: h.ID, RunID: r.ID})
		}
	case EvItemStarted, EvItemUpdated, EvItemCompleted, EvContentDelta:
		decideItem(t, ev, pt, env, d)
	case EvPlanUpdated:
		r := t.runFor(pt)
		if r == nil || r.settled() || t.replaced(r, pt) {
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
		// A request of a replaced attempt is kept (it can be answered) but
		// does not hold the run.
		if r := t.runFor(pt); r != nil && !t.replaced(r, pt) {
			runID = r.ID
			if n := r.nodeByRef(ev.ItemRef); n != nil {
				nodeID = n.ID
			}
		}
		reqID := env.NewID("req")
		d.emit(RequestOpened{RequestID: reqID, RunID: runID, NodeID: nodeID, SessionID: p.SessionID,
			ProviderRef: ev.RequestRef, Kind: ev.RequestKind, Title: ev.Title, Options: ev.Options})
		// The thread's policy answers at once where it can; the request
		// resolves when the provider says it got the answer.
		if decision := policyDecision(t.ApprovalPolicy, ev.RequestKind); decision != "" {
			d.emit(RequestAnswered{RequestID: reqID, Decision: decision, By: "policy"})
			d.effect(Effect{Type: EffectRespond, ThreadID: t.ID, RunID: runID, SessionID: p.SessionID,
				RequestRef: ev.RequestRef, Decision: decision})
		}
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
		// A run's usage is its root turn's: a subagent's own totals are
		// not the run's.
		if pt != nil {
			if r := t.run(pt.RunID); r == nil || r.attempt(pt.AttemptID).RootNode != pt.NodeID {
				return
			}
		}
		if r := t.runFor(pt); r != nil && ev.Usage != nil && !r.settled() && !t.replaced(r, pt) {
			d.emit(UsageReported{RunID: r.ID, Usage: *ev.Usage})
		}
	case EvTurnTerminal:
		if pt == nil {
			d.emit(DiagnosticRecorded{Title: "terminal event for an unknown provider turn", Text: ev.TurnRef})
			return
		}
		r := t.run(pt.RunID)
		if r == nil || r.ActiveAttempt != pt.AttemptID || r.settled() {
			return
		}
		// Only the root turn of the run's active attempt ends the run; a
		// child's terminal ends its own node and never the run.
		if a := r.attempt(pt.AttemptID); pt.NodeID != a.RootNode {
			if n := t.node(r.ID, pt.NodeID); n != nil && n.Status == StatusInProgress {
				d.emit(NodeCompleted{RunID: r.ID, NodeID: n.ID, Status: nodeStatus(ev.Status)})
				// A subagent's checkpoint, in a scope of its own under the
				// run's: it does not advance the app run count.
				requestCheckpoint(t, r, n.ID, env, d)
			}
			return
		}
		if len(r.PendingRestart) > 0 && !r.InterruptRequested {
			// Steering by restart: the attempt that was asked to stop has
			// stopped; a replacement carries the steering messages.
			closeAttempt(t, r, runStatus(ev.Status), d)
			d.emit(AttemptEnded{RunID: r.ID, AttemptID: r.ActiveAttempt, Status: runStatus(ev.Status)})
			var input string
			for i, m := range r.PendingRestart {
				if i > 0 {
					input += "\n\n"
				}
				input += m.Text
			}
			startRun(t, r.ID, input, AttemptSteeringRestart, env, d)
			return
		}
		status := runStatus(ev.Status)
		endRun(t, r, status, ev.Title, ev.Failure, env, d)
	case EvRuntimeExited:
		reason := ev.Status
		if ev.Failure != nil {
			reason = ev.Failure.Message
		}
		endSession(t, p.SessionID, reason, env, d)
		if r := t.activeRun(); r != nil && r.Ending == nil {
			// Only an attempt this session took ends with it; one not yet
			// sent anywhere will open a new session.
			if a := r.attempt(r.ActiveAttempt); a.SessionID == p.SessionID {
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
		if r := t.runFor(pt); r != nil {
			runID = r.ID
		}
		d.emit(DiagnosticRecorded{RunID: runID, Title: ev.Title, Text: ev.Text})
	case EvRateLimit:
		// Kept when it changes: providers repeat it after every reply.
		if l := ev.RateLimit; l != nil && l.Scope != "" && !slices.ContainsFunc(t.RateLimits, l.equal) {
			d.emit(RateLimitReported{RateLimit: *l})
		}
	}
	// session_state is kept in the raw-frame log only.
}

func (l RateLimit) equal(m RateLimit) bool {
	return l.Scope == m.Scope && l.UsedPercent == m.UsedPercent && l.ResetsAt.Equal(m.ResetsAt)
}

// decideItem maps item lifecycle and content events to nodes, turn items
// and assistant messages. An item is bound by its provider ref within the
// run: the same frame processed twice finds the node it made before.
func decideItem(t *Thread, ev ProviderEvent, pt *ProviderTurn, env Env, d *Decision) {
	r := t.runFor(pt)
	if r == nil || r.settled() || r.ActiveAttempt == "" || ev.ItemRef == "" {
		return
	}
	if t.replaced(r, pt) {
		return // a late event of an attempt that was replaced
	}
	a := r.attempt(r.ActiveAttempt)
	n := r.nodeByRef(ev.ItemRef)
	var nodeID string
	if n == nil {
		kind := ev.ItemKind
		if kind == "" {
			kind = "tool_call"
		}
		parent := a.RootNode
		if pt != nil {
			parent = pt.NodeID // a subagent's items nest under its node
		}
		nodeID = env.NewID("node")
		d.emit(NodeStarted{RunID: r.ID, NodeID: nodeID, ParentID: parent, AttemptID: a.ID, Kind: kind,
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

// closeAttempt is the completion barrier of the run's active attempt: open
// messages are flushed, open items closed, pending requests expired, and
// the root node ends with rootStatus.
func closeAttempt(t *Thread, r *Run, rootStatus string, d *Decision) {
	closing := StatusCompleted
	if rootStatus != StatusCompleted {
		closing = StatusCancelled
	}
	a := r.attempt(r.ActiveAttempt)
	for _, m := range t.Messages {
		if m.RunID == r.ID && m.Status == StatusInProgress {
			d.emit(MessageCompleted{MessageID: m.ID})
		}
	}
	for _, n := range r.Nodes {
		if n.Status == StatusInProgress && n.AttemptID == a.ID && n.ID != a.RootNode {
			d.emit(NodeCompleted{RunID: r.ID, NodeID: n.ID, Status: closing})
		}
	}
	for _, q := range t.Requests {
		if q.RunID == r.ID && q.Status == RequestStatusPending {
			d.emit(RequestResolved{RequestID: q.ID, Status: RequestStatusExpired})
		}
	}
	d.emit(NodeCompleted{RunID: r.ID, NodeID: a.RootNode, Status: rootStatus})
}

// endRun ends an active run's work: its attempt's completion barrier,
// then its checkpoint is asked for. The run ends (finishRun) when the
// checkpoint is recorded: whatever it was, its files are kept.
func endRun(t *Thread, r *Run, status, stopReason string, f *Failure, env Env, d *Decision) *RunOutcome {
	rootStatus := StatusCompleted
	if status != RunStatusCompleted {
		rootStatus = status
	}
	closeAttempt(t, r, rootStatus, d)
	out := RunOutcome{AttemptID: r.ActiveAttempt, Status: status, StopReason: stopReason, Failure: f}
	d.emit(RunCompleting{RunID: r.ID, RunOutcome: out})
	requestCheckpoint(t, r, "", env, d)
	return &out
}

// finishRun ends a run, and starts the next queued one.
func finishRun(t *Thread, r *Run, out RunOutcome, env Env, d *Decision) {
	d.emit(RunEnded{RunID: r.ID, AttemptID: out.AttemptID, Status: out.Status, StopReason: out.StopReason, Failure: out.Failure})
	requeue(t, r, r.PendingRestart, "the run ended ("+out.Status+") before its turn could restart with it", env, d)
	// The next queued run starts. (t does not have the events above yet:
	// r is still active in it.)
	startNextQueued(t, env, d)
}

// runStatus maps a provider turn status to a run status.
func runStatus(turnStatus string) string {
	switch turnStatus {
	case "interrupted":
		return RunStatusInterrupted
	case "failed":
		return RunStatusFailed
	}
	return RunStatusCompleted
}

// policyAnswerTries is how many times a policy's answer is sent before the
// request is left to a client.
const policyAnswerTries = 3

// policyDecision is how a thread's approval policy answers a request of
// a kind: "" leaves it to a client.
func policyDecision(policy, kind string) string {
	if policy == ApproveAsk {
		return ""
	}
	switch kind {
	case RequestPermission, RequestCommandApproval, RequestFileChangeApproval, RequestPermissions:
		return policy
	case RequestUserInput:
		return ApproveDecline // a policy cannot invent answers
	}
	return "" // generic and unknown kinds are never answered by policy
}

// parentTurnNode is the node of the in-progress turn of a subagent's
// parent provider thread in this attempt, else the attempt's root.
func (t *Thread) parentTurnNode(r *Run, a *Attempt, parentThreadID string) string {
	for _, pt := range t.ProviderTurns {
		if pt.ProviderThreadID == parentThreadID && pt.RunID == r.ID && pt.AttemptID == a.ID && pt.Status == StatusInProgress {
			return pt.NodeID
		}
	}
	return a.RootNode
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
