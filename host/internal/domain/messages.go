package domain

import (
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Messages and steering: a user message becomes a run of its own, joins
// the active run's turn (native steering), or replaces the active attempt
// (steering by restart); and interrupting a run.

// MaxMessageBytes bounds a user message's text. 16 MiB holds a long
// pasted log or a large file whole, and keeps what one message costs
// bounded: it is stored in an event and a projection, and sent to the
// provider in one frame. The CLI, the API and Decide refuse a longer
// message, naming this limit, before anything is written; the service's
// gRPC bounds leave room for it.
const MaxMessageBytes = 16 << 20

// MaxMessageSize is MaxMessageBytes in words, for messages.
var MaxMessageSize = fmt.Sprintf("%d MiB", MaxMessageBytes>>20)

// CheckText says what is wrong with a message's text, as a phrase that
// follows the message's name ("is empty or only white space"), or "" when
// nothing is: a message says something, is UTF-8 text, and fits in
// MaxMessageBytes.
func CheckText(text string) string {
	if len(text) > MaxMessageBytes {
		return TooLong(int64(len(text)))
	}
	if strings.TrimSpace(text) == "" {
		return "is empty or only white space"
	}
	if !utf8.ValidString(text) {
		at := 0
		for at < len(text) {
			r, n := utf8.DecodeRuneInString(text[at:])
			if r == utf8.RuneError && n == 1 {
				break
			}
			at += n
		}
		return fmt.Sprintf("is not UTF-8 text (at byte %d)", at)
	}
	return ""
}

// TooLong is CheckText's phrase for a message of n bytes, over
// MaxMessageBytes.
func TooLong(n int64) string {
	return fmt.Sprintf("is %d bytes; the limit is %s", n, MaxMessageSize)
}

func decideDispatch(t *Thread, p DispatchMessage, env Env, d *Decision) error {
	if problem := CheckText(p.Text); problem != "" {
		return fmt.Errorf("%w: text: the message %s", ErrInvalid, problem)
	}
	if n := len(t.Rollbacks); n > 0 && t.Rollbacks[n-1].Status == RollbackStatusFailed {
		rb := t.Rollbacks[n-1]
		return fmt.Errorf("%w: rollback %s failed while restoring files (%s), so the files may be half-restored; no run starts until checkpoint.rollback succeeds",
			ErrConflict, rb.ID, rb.Failure.Message)
	}
	if why := t.worktreeRefusal(); why != "" {
		return fmt.Errorf("%w: %s; it takes no more messages", ErrConflict, why)
	}
	if err := p.MCP.check(env); err != nil {
		return err
	}
	active := t.ActiveRun()
	mode := p.Mode
	if mode == "" {
		mode = autoMode(t, active, env.Caps)
	}
	msgID := p.MessageID
	if msgID == "" {
		msgID = env.NewID("msg")
	}
	if t.message(msgID) != nil {
		return fmt.Errorf("%w: message %q %w", ErrConflict, msgID, ErrExists)
	}
	switch mode {
	case ModeStartImmediately:
		if active != nil || t.hasQueued() || t.rollbackHolds() || t.worktreeHolds() {
			return fmt.Errorf("%w: a run is active or queued, or a rollback is in progress; send with mode %s, %s or %s", ErrConflict,
				ModeQueueAfterActive, ModeSteerActive, ModeRestartActive)
		}
		queueRun(t, msgID, p.Text, p.MCP, env, d)
		startNextQueued(t, env, d)
	case ModeQueueAfterActive:
		mine := queueRun(t, msgID, p.Text, p.MCP, env, d)
		resumeQueued(t, mine, env, d) // runs a host that stopped left queued go first, said so
	case ModeSteerActive, ModeRestartActive:
		return steer(t, active, mode, msgID, p, env, d)
	default:
		return fmt.Errorf("%w: unknown dispatch mode %q (want %s, %s, %s or %s)", ErrInvalid, mode,
			ModeStartImmediately, ModeQueueAfterActive, ModeSteerActive, ModeRestartActive)
	}
	return nil
}

// steer adds a message to the active run: to its provider turn (native
// steering), or to the replacement attempt that will carry it once the
// active one has stopped (steering by restart).
func steer(t *Thread, active *Run, mode DispatchMode, msgID string, p DispatchMessage, env Env, d *Decision) error {
	if active == nil {
		return fmt.Errorf("%w: %s needs an active run, and thread %s has none", ErrConflict, mode, t.ID)
	}
	if p.TargetRunID != "" && p.TargetRunID != active.ID {
		return fmt.Errorf("%w: run %s is not the active run (%s is)", ErrConflict, p.TargetRunID, active.ID)
	}
	if active.InterruptRequested || active.Ending != nil || active.WaitID != "" {
		return fmt.Errorf("%w: run %d is being interrupted, is ending or is waiting for a limit; send with mode %s", ErrConflict,
			active.Ordinal, ModeQueueAfterActive)
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
	runID, a := active.ID, *active.attempt(active.ActiveAttempt)
	first := len(active.PendingRestart) == 0
	var interrupt Interrupt
	if mode == ModeRestartActive && first {
		interrupt = interruptEffect(t, active, turn)
	}
	d.emit(MessageAdded{MessageID: msgID, RunID: runID, Role: RoleUser, Text: p.Text, Status: StatusCompleted})
	if mode == ModeSteerActive {
		d.emit(RunSteered{RunID: runID, AttemptID: a.ID, MessageID: msgID})
		d.effect(Steer{EffectHead: EffectHead{ThreadID: t.ID}, RunID: runID, AttemptID: a.ID, MessageID: msgID,
			SessionID: a.SessionID, TurnRef: turn.ProviderRef, Text: p.Text})
		return nil
	}
	d.emit(RestartRequested{RunID: runID, AttemptID: a.ID, MessageID: msgID, Text: p.Text})
	if first {
		d.effect(interrupt)
	}
	return nil
}

// autoMode is the dispatch policy when the client does not choose: an
// idle thread starts a run; a message for a run whose provider turn has
// started steers it natively or by restart; anything else queues.
func autoMode(t *Thread, active *Run, caps Capabilities) DispatchMode {
	if active == nil || active.WaitID != "" {
		return ModeQueueAfterActive // starts at once unless runs are queued; after a waiting run
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

// queueRun adds a run for a message (already added, or added here). It
// does not start it: the caller starts the next queued run when it may.
func queueRun(t *Thread, msgID, text string, mcp *MCPChoice, env Env, d *Decision) (runID string) {
	runID = env.NewID("run")
	if t.message(msgID) == nil {
		d.emit(MessageAdded{MessageID: msgID, RunID: runID, Role: RoleUser, Text: text, Status: StatusCompleted})
	}
	d.emit(RunQueued{RunID: runID, Ordinal: t.RunCount() + 1, MessageID: msgID, Input: text, MCP: mcp})
	return runID
}

// requeue makes steering messages that never reached the provider runs of
// their own, saying so: a user's message is never dropped.
func requeue(t *Thread, ordinal int, runID string, msgs []SteeringMessage, why string, env Env, d *Decision) {
	for _, m := range msgs {
		d.emit(DiagnosticRecorded{RunID: runID, Title: "a message for run " + strconv.Itoa(ordinal) + " was queued as a run of its own",
			Text: why})
		queueRun(t, m.MessageID, m.Text, t.runMCP(runID), env, d)
	}
}

func decideSteerFailed(t *Thread, p SteerFailed, env Env, d *Decision) error {
	m := t.message(p.MessageID)
	if m == nil {
		return fmt.Errorf("%w: message %q", ErrNotFound, p.MessageID)
	}
	id, text := m.ID, m.Text.String()
	d.emit(DiagnosticRecorded{RunID: p.RunID, Title: "the provider did not take a steering message; it was queued as a new run",
		Text: p.Reason})
	queueRun(t, id, text, t.runMCP(p.RunID), env, d)
	startNextQueued(t, env, d)
	return nil
}

// interruptEffect asks the provider to stop the run's active attempt.
func interruptEffect(t *Thread, r *Run, turn *ProviderTurn) Interrupt {
	a := r.attempt(r.ActiveAttempt)
	e := Interrupt{EffectHead: EffectHead{ThreadID: t.ID}, RunID: r.ID, AttemptID: a.ID, SessionID: a.SessionID}
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
		cancelQueued(r.ID, "", d)
	case r.Status.Terminal():
		return fmt.Errorf("%w: run %d has already ended (%s)", ErrConflict, r.Ordinal, r.Status)
	case r.WaitID != "":
		// Waiting for a limit: no turn to stop; the wait is cancelled.
		cancelWait(t, r, "the wait was cancelled", env, d)
	case r.Ending != nil || r.Stop.Forced != "":
		// The turn is over, or its provider's process is being ended:
		// nothing more to do.
	case p.Force:
		if !r.InterruptRequested {
			d.emit(InterruptRequested{RunID: r.ID, AttemptID: r.ActiveAttempt})
		}
		forceStop(t, t.run(p.RunID), "stopped by force: the host ended the provider's process when asked to", env, d)
	case r.InterruptRequested:
		// Asked before: the grace runs from the first asking.
	default:
		e := interruptEffect(t, r, t.rootTurn(r))
		d.emit(InterruptRequested{RunID: r.ID, AttemptID: r.ActiveAttempt, Grace: env.interruptGrace()})
		d.effect(e)
	}
	return nil
}

// decideForceStop ends the provider process of an interrupted attempt
// whose grace has passed with its turn still going.
func decideForceStop(t *Thread, p ForceStop, env Env, d *Decision) {
	r := t.run(p.RunID)
	if r == nil || !r.live() || r.ActiveAttempt != p.AttemptID || r.Stop.Deadline.IsZero() || r.Stop.Forced != "" {
		return // it ended, was replaced, or is being ended already
	}
	forceStop(t, r, fmt.Sprintf("the provider did not stop within %s of the interrupt, so the host ended its process", r.Stop.Grace), env, d)
}

// forceStop ends the provider process of r's active attempt: the run ends
// interrupted, with reason, when its session's end comes. An attempt no
// session has taken yet has no process to end: the run ends at once (a
// turn its start opens later is one the host no longer wants, and is
// interrupted as it starts).
func forceStop(t *Thread, r *Run, reason string, env Env, d *Decision) {
	a := r.attempt(r.ActiveAttempt)
	if a.SessionID == "" {
		runID := r.ID
		d.emit(StopForced{RunID: runID, AttemptID: a.ID, Reason: reason})
		endRun(t, runID, RunStatusInterrupted, "", forcedFailure(reason), env, d)
		return
	}
	d.emit(StopForced{RunID: r.ID, AttemptID: a.ID, SessionID: a.SessionID, Reason: reason})
	d.effect(EndSession{EffectHead: EffectHead{ThreadID: t.ID}, RunID: r.ID, AttemptID: a.ID, SessionID: a.SessionID})
}

// FailureForced is the failure code of a run whose provider's process the
// host ended because it did not stop when asked.
const FailureForced = "interrupt_forced"

func forcedFailure(reason string) *Failure {
	return &Failure{Code: FailureForced, Message: reason}
}

// StopDeadline is when the host ends the provider process of the thread's
// interrupted run if its turn has not ended, and the command that does it;
// ok is false when none is due (no run interrupted with a deadline, or its
// process is being ended already). The host keeps a timer for it.
func (t *Thread) StopDeadline() (cmd ForceStop, at time.Time, ok bool) {
	r := t.ActiveRun()
	if r == nil || !r.live() || r.Stop.Deadline.IsZero() || r.Stop.Forced != "" {
		return ForceStop{}, time.Time{}, false
	}
	return ForceStop{RunID: r.ID, AttemptID: r.ActiveAttempt}, r.Stop.Deadline, true
}
