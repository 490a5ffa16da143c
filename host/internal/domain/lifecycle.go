package domain

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/baton-run/baton/sdk"
)

// The run lifecycle: a queued run starts when nothing is ahead of it; its
// provider turn's terminal event closes its attempt (the completion
// barrier) and asks for its checkpoint; the run ends when the checkpoint
// is recorded, and the next queued run starts. Recovery ends what a host
// that stopped left in flight; the host then starts what it left queued
// (StartQueued), saying so (QueuedRunsResumed). A queued run can be
// cancelled before it starts (CancelQueued). A host that shuts down ends
// its runs (ShutDown) and starts nothing more.

// startNextQueued starts the oldest queued run, unless a run is active or
// a rollback holds the thread.
func startNextQueued(t *Thread, env Env, d *Decision) {
	if r := nextQueued(t, env); r != nil {
		startAttempt(t, r.ID, r.Input, AttemptInitial, env, d)
	}
}

// nextQueued is the queued run to start now, if one may start: none while
// the host shuts down, a run is active, a rollback holds the thread, its
// worktree is being made or a loop's check is pending.
func nextQueued(t *Thread, env Env) *Run {
	if env.ShuttingDown || t.ActiveRun() != nil || t.rollbackHolds() || t.worktreeHolds() || (t.Loop != nil && t.Loop.CheckPending) {
		return nil
	}
	return t.oldestQueued()
}

// ResumeReason is why QueuedRunsResumed's runs are sent before any new
// message.
const ResumeReason = "they were queued when the host stopped"

// decideStartQueued starts the oldest queued run after a host's recovery
// (StartQueued), saying so.
func decideStartQueued(t *Thread, env Env, d *Decision) {
	resumeQueued(t, "", env, d)
}

// resumeQueued starts the oldest queued run when it may. When that run is
// not mine (the run the command queued itself; "" for none), the runs
// queued before it were left by a host that stopped (or held by a rollback
// it finished): QueuedRunsResumed names them first, so that a client
// continuing the thread can tell its user, and how to drop them.
func resumeQueued(t *Thread, mine string, env Env, d *Decision) {
	r := nextQueued(t, env)
	if r == nil {
		return
	}
	id, input := r.ID, r.Input
	if id != mine {
		var runs []QueuedRun
		for _, q := range t.Runs {
			if q.Status == RunStatusQueued && q.ID != mine {
				runs = append(runs, QueuedRun{RunID: q.ID, Ordinal: q.Ordinal, Input: sdk.Clip(q.Input, QueuedInputBytes, false)})
			}
		}
		d.emit(QueuedRunsResumed{Reason: ResumeReason, Runs: runs})
	}
	startAttempt(t, id, input, AttemptInitial, env, d)
}

// StopCancelledQueued is the stop reason of a queued run cancelled before
// it started, when the command gives none.
const StopCancelledQueued = "cancelled before it started"

// decideCancelQueued cancels the queued runs the command names, or every
// queued run. Nothing reached a provider for them: no effect is needed.
func decideCancelQueued(t *Thread, p CancelQueued, d *Decision) error {
	ids := p.RunIDs
	for _, id := range ids {
		r := t.run(id)
		if r == nil {
			return fmt.Errorf("%w: run %q", ErrNotFound, id)
		}
		if r.Status != RunStatusQueued {
			return fmt.Errorf("%w: run %d is %s, not queued: only a run that has not started can be cancelled (interrupt one that has)",
				ErrConflict, r.Ordinal, r.Status)
		}
	}
	if len(ids) == 0 {
		for _, r := range t.Runs {
			if r.Status == RunStatusQueued {
				ids = append(ids, r.ID)
			}
		}
	}
	for _, id := range ids {
		if t.run(id).Status == RunStatusQueued { // a run named twice is cancelled once
			cancelQueued(id, p.Reason, d)
		}
	}
	return nil
}

// cancelQueued ends a queued run, cancelled with the reason.
func cancelQueued(runID, reason string, d *Decision) {
	d.emit(RunEnded{RunID: runID, Status: RunStatusCancelled, StopReason: cmp.Or(reason, StopCancelledQueued)})
}

// startAttempt starts an attempt at a run: for a queued run its first, for
// an active one a replacement. Its root node is made, and the effect that
// sends the input to the provider.
func startAttempt(t *Thread, runID, input string, reason AttemptReason, env Env, d *Decision) {
	attemptID, rootID := env.NewID("att"), env.NewID("node")
	if reason == AttemptInitial {
		if !t.hasRootCheckpoint() {
			// The baseline: the worktree before this run, captured before its
			// turn is sent (effects run in order). It is the checkpoint of
			// the run before, when a thread from before checkpoints has one.
			prev := ""
			for _, r := range t.Runs {
				if r.ID != runID && r.Status.Terminal() && r.Status != RunStatusCancelled {
					prev = r.ID
				}
			}
			requestCheckpoint(t, prev, "", env, d)
		}
		d.emit(RunStarted{RunID: runID, Provider: t.Provider, Model: t.Model, Host: env.Host})
		// What the provider has not seen of the thread goes with the run's
		// first turn: the host puts the ready handoff before the input when
		// it sends the turn, and it is used up when the provider takes it.
		planHandoff(t, env, d, handoffSpec{})
	}
	// An attempt runs where its run does, unless a limit moved the run to
	// the thread's provider now: then it carries the handoff that provider
	// needs of the runs before.
	provider, model := t.run(runID).Provider, t.run(runID).Model
	if reason == AttemptUsageLimitContinuation && provider != t.Provider {
		provider, model = t.Provider, t.Model
		planHandoff(t, env, d, handoffSpec{To: provider})
	}
	d.emit(
		AttemptStarted{RunID: runID, AttemptID: attemptID, Reason: reason, RootNode: rootID, Provider: provider, Model: model},
		NodeStarted{RunID: runID, NodeID: rootID, AttemptID: attemptID, Kind: NodeRootTurn},
	)
	startTurn(t, runID, attemptID, input, provider, model, env.Live, env, d)
}

// closeAttempt is the completion barrier of the run's active attempt: open
// messages are flushed, open items closed, pending requests expired, and
// the root node ends with rootStatus.
func closeAttempt(t *Thread, runID string, rootStatus RunStatus, d *Decision) {
	closing := StatusCompleted
	if rootStatus != RunStatusCompleted {
		closing = StatusCancelled
	}
	r := t.run(runID)
	a := *r.attempt(r.ActiveAttempt)
	var events []Payload
	for _, m := range t.Messages {
		if m.RunID == runID && m.Status == StatusInProgress {
			events = append(events, MessageCompleted{MessageID: m.ID})
		}
	}
	for _, n := range r.Nodes {
		if n.Status == StatusInProgress && n.AttemptID == a.ID && n.ID != a.RootNode {
			events = append(events, NodeCompleted{RunID: runID, NodeID: n.ID, Status: closing})
		}
	}
	for _, q := range t.Requests {
		if q.RunID == runID && q.Status == RequestStatusPending {
			events = append(events, RequestResolved{RequestID: q.ID, Status: RequestStatusExpired})
		}
	}
	root := StatusCompleted
	if rootStatus != RunStatusCompleted {
		root = ItemStatus(rootStatus)
	}
	events = append(events, NodeCompleted{RunID: runID, NodeID: a.RootNode, Status: root})
	d.emit(events...)
}

// endRun ends an active run's work: its attempt's completion barrier,
// then its checkpoint is asked for. The run ends (finishRun) when the
// checkpoint is recorded: whatever it was, its files are kept.
func endRun(t *Thread, runID string, status RunStatus, stopReason string, f *Failure, env Env, d *Decision) RunOutcome {
	closeAttempt(t, runID, status, d)
	out := RunOutcome{AttemptID: t.run(runID).ActiveAttempt, Status: status, StopReason: stopReason, Failure: f}
	d.emit(RunCompleting{RunID: runID, RunOutcome: out})
	requestCheckpoint(t, runID, "", env, d)
	return out
}

// finishRun ends a run. Steering messages that were waiting for its
// attempt to restart become runs of their own; the caller starts the next
// queued run when it may.
func finishRun(t *Thread, runID string, out RunOutcome, env Env, d *Decision) {
	r := t.run(runID)
	ordinal, pending := r.Ordinal, slices.Clone(r.PendingRestart)
	d.emit(RunEnded{RunID: runID, AttemptID: out.AttemptID, Status: out.Status, StopReason: out.StopReason, Failure: out.Failure})
	requeue(t, ordinal, runID, pending, "the run ended ("+string(out.Status)+") before its turn could restart with it", env, d)
	loopAfterRun(t, runID, env, d)
}

// endSession ends a session; its pending requests can no longer be answered.
func endSession(t *Thread, sessionID, reason string, d *Decision) {
	var expired []Payload
	for _, q := range t.Requests {
		if q.SessionID == sessionID && q.Status == RequestStatusPending {
			expired = append(expired, RequestResolved{RequestID: q.ID, Status: RequestStatusExpired, Delivery: DeliveryNotResumable})
		}
	}
	d.emit(SessionEnded{SessionID: sessionID, Reason: reason})
	d.emit(expired...)
}

// decideRecover reconciles a thread after a host start. Recovery itself
// starts no work: the host sends StartQueued once the effects the last
// host left are queued again, so that they go first.
func decideRecover(t *Thread, p Recover, env Env, d *Decision) {
	for _, e := range p.Effects {
		d.emit(EffectCancelled{EffectID: e.ID, Type: e.Type, RunID: e.RunID, Reason: p.Reason})
		if m := t.message(e.MessageID); m != nil && e.Type == EffectSteer {
			if r := t.run(e.RunID); r != nil {
				msg := SteeringMessage{MessageID: m.ID, Text: m.Text.String()}
				requeue(t, r.Ordinal, r.ID, []SteeringMessage{msg},
					"the host restarted before it was known to have reached the provider", env, d)
			}
		}
	}
	var open []string
	for _, s := range t.ProviderSessions {
		if s.Status == SessionStatusOpen {
			open = append(open, s.ID)
		}
	}
	for _, id := range open {
		endSession(t, id, p.Reason, d)
	}
	// A run whose turn had ended ends as it would have; one in flight
	// fails. Both end now (their checkpoints are captured after), so that
	// nothing starts from recovery. A run waiting for a limit goes on
	// waiting: the new host arms its wait again.
	if r := t.ActiveRun(); r != nil && r.WaitID == "" {
		runID, out := r.ID, r.Ending
		if out == nil {
			code := "host_restarted"
			if p.HostLost {
				code = "host_lost"
			}
			o := endRun(t, runID, RunStatusFailed, "", &Failure{Code: code, Message: p.Reason}, env, d)
			out = &o
		}
		finishRun(t, runID, *out, env, d)
	}
}

// SessionEndIdle is the reason a session closed for being idle ends with.
const SessionEndIdle = "idle"

// decideCloseIdleSession ends a session nothing uses. A session in use is
// a conflict: the host keeps it open.
func decideCloseIdleSession(t *Thread, p CloseIdleSession, d *Decision) error {
	s := t.session(p.SessionID)
	if s == nil {
		return fmt.Errorf("%w: session %q", ErrNotFound, p.SessionID)
	}
	if s.Status != SessionStatusOpen {
		return nil // ended before
	}
	if t.InUse() {
		return fmt.Errorf("%w: session %s is in use (a run active or queued, a request pending or a rollback in progress)", ErrConflict, p.SessionID)
	}
	endSession(t, p.SessionID, SessionEndIdle, d)
	return nil
}

// decideShutDown ends the active run as the host shuts down, as recovery
// would: its checkpoint is captured after (by this host if it can, else
// by the next).
func decideShutDown(t *Thread, p ShutDown, env Env, d *Decision) {
	r := t.ActiveRun()
	if r == nil || r.WaitID != "" {
		return // none, or waiting: the next host arms the wait again
	}
	runID, out := r.ID, r.Ending
	if out == nil {
		o := endRun(t, runID, RunStatusInterrupted, p.Reason, &Failure{Code: "host_shut_down", Message: p.Reason}, env, d)
		out = &o
	}
	finishRun(t, runID, *out, env, d)
}
