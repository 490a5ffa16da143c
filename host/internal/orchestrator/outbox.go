package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/baton-run/baton/host/internal/domain"
	"github.com/baton-run/baton/host/internal/eventlog"
	"github.com/baton-run/baton/sdk"
	"github.com/baton-run/baton/sdk/clock"
)

// The outbox: effects are committed with the events that call for them, and
// a worker per thread performs them in order, one at a time, removing each
// from the outbox when its outcome is recorded. The loop, as raft's Ready
// loop, in four steps:
//
//  1. a commit (commit.go) stores a decision's events with its effects;
//  2. push hands the effects to the thread's worker, in commit order;
//  3. perform asks the domain whether the effect is still wanted
//     (domain.Current), carries it out (do) and reports only what it saw
//     (domain.Result);
//  4. the domain turns that into the effect's one outcome command
//     (domain.Outcome), whose id derives from the effect, and settle
//     commits it with the outbox entry it settles: step 1 again.
//
// Nothing here chooses what happens next; a failure is an outcome too.

// worker performs one thread's effects. It is started with an effect and
// ends when its queue is empty (or the host closes), so that idle threads
// cost nothing.
type worker struct {
	threadID string
	queue    []domain.Effect // guarded by h.wmu
}

// push hands effects to the thread's worker, starting one if needed. A
// thread's commits push with its writer lock held, so its effects queue
// in commit order.
func (h *Host) push(threadID string, effects []domain.Effect) {
	if len(effects) == 0 {
		return
	}
	h.wmu.Lock()
	defer h.wmu.Unlock()
	if h.ctx.Err() != nil {
		return // closing: the effects wait in the outbox for the next host
	}
	effects = slices.DeleteFunc(slices.Clone(effects), func(e domain.Effect) bool {
		if _, end := e.(domain.EndSession); !end {
			return false
		}
		// At once, beside the queue: what it ends may be what holds the
		// queue (an interrupt the provider does not answer).
		h.wg.Go(func() { h.settle(e) })
		return true
	})
	if len(effects) == 0 {
		return
	}
	w, ok := h.workers[threadID]
	if !ok {
		w = &worker{threadID: threadID}
		h.workers[threadID] = w
		h.wg.Go(func() { w.run(h) })
	}
	w.queue = append(w.queue, effects...)
}

// run performs the queue; when it is empty, the worker retires. Pushes and
// the retirement take h.wmu, so no effect can arrive between the check and
// the removal: the next one starts a new worker.
func (w *worker) run(h *Host) {
	for {
		h.wmu.Lock()
		if len(w.queue) == 0 {
			delete(h.workers, w.threadID)
			h.wmu.Unlock()
			return
		}
		e := w.queue[0]
		w.queue = w.queue[1:]
		h.wmu.Unlock()
		if !h.settle(e) {
			// Cut short as the host closes: what follows it depends on it
			// (a turn on the session it opens), so it all stays in the
			// outbox, in order, for the next host.
			h.wmu.Lock()
			w.queue = nil
			h.wmu.Unlock()
		}
	}
}

// settle performs an effect and removes it from the outbox: with the
// command that records its outcome, in one batch, when it has one. An
// effect cut short by the host closing stays in the outbox for the next
// host to cancel; so does one whose outcome was refused. It says whether
// the thread's next effects may go on: not once the host stops.
func (h *Host) settle(e domain.Effect) bool {
	cmd, settled := h.perform(e)
	if !settled {
		return false
	}
	head := e.Head()
	ref := eventlog.EffectRef{ThreadID: head.ThreadID, ID: head.ID}
	if cmd != nil {
		// Retried until it is recorded: an outcome not recorded would
		// leave a run ending, or a rollback in progress, for as long as
		// the host runs. Its batch removes the entry (a duplicate's
		// commit removes it on its own).
		if err := h.retry("record the outcome of an action", func() error {
			_, err := h.dispatch(h.ctx, *cmd, []eventlog.EffectRef{ref})
			return err
		}, "type", e.EffectType(), "thread", head.ThreadID); err != nil {
			if stopped(err) {
				return false
			}
			h.log.Error("record the outcome of an action: refused; it stays in the outbox for the next host", "type", e.EffectType(), "thread", head.ThreadID, "error", err)
			return true // what follows goes on, as it would after a failure
		}
		return true
	}
	if err := h.store.EffectDone(ref); err != nil && h.ctx.Err() == nil {
		h.log.Error("remove performed effect from the outbox", "thread", head.ThreadID, "effect", head.ID, "error", err)
	}
	return true
}

// perform does one effect and returns the command that records what came
// of it (nil: nothing to record) and whether it is settled (false: the
// host is closing, or it was cut short by the host closing: it stays in
// the outbox, for the next host). The host only reports what it saw; the
// domain says whether the effect is still wanted (domain.Current) and
// what its outcome is (domain.Outcome), a failure included, so that it is
// decided and recorded like everything else.
func (h *Host) perform(e domain.Effect) (*domain.Command, bool) {
	if h.ctx.Err() != nil {
		return nil, false // closing: left in the outbox
	}
	threadID := e.Head().ThreadID
	t, _ := h.view(threadID) // nil: not found, and nor is what the effect was for
	if !domain.Current(t, e) {
		// Only a drain reaches this with a start (it ends runs whose start
		// is still queued); otherwise a run ends only after its start was
		// performed (its turn's terminal, the start's own failure) or at
		// recovery, before any worker runs, and an attempt is replaced
		// only after the provider ended the turn, by effects queued behind
		// this one.
		if h.draining.Load() {
			// The drain ended the run before its start was performed: the
			// start is left in the outbox, for the next host's recovery to
			// record as cancelled.
			return nil, false
		}
		h.log.Debug("provider action for an attempt no longer active; skipped", "type", e.EffectType(), "thread", threadID)
		return domain.Outcome(t, e, domain.Result{Skipped: true}), true
	}
	r, settled := h.do(e)
	if !settled {
		return nil, false
	}
	if r.Err != nil {
		t, _ = h.view(threadID) // as it is now: the request an answer was for
	}
	return domain.Outcome(t, e, r), true
}

// do carries an effect out and reports what it saw, and whether that is
// settled (false: cut short by the host closing).
func (h *Host) do(e domain.Effect) (domain.Result, bool) {
	var r domain.Result
	switch e := e.(type) {
	case domain.CaptureCheckpoint:
		return h.capture(e)
	case domain.RestoreFiles:
		return h.restoreFiles(e)
	case domain.ReconcileThread:
		return h.reconcileThread(e)
	case domain.RunCheck:
		return h.runCheck(e)
	case domain.CreateWorktree:
		return h.createWorktree(e)
	case domain.MergeBranch:
		return h.mergeBranch(e)
	case domain.RemoveWorktree:
		return h.removeWorktree(e)
	case domain.OpenSession:
		r.Opened, r.Err = h.openSession(e)
	case domain.RetireSession:
		h.retireSession(e)
	case domain.StartTurn:
		r.Err = h.startTurn(e)
	case domain.Steer:
		r.Err = h.steer(e)
	case domain.Respond:
		r.Err = h.respond(e)
	case domain.Interrupt:
		// One that did not reach a live provider: if the process is gone,
		// its exit ends the run.
		r.Err = h.interrupt(e)
	case domain.EndSession:
		r.Err = h.forceClose(e)
	default:
		// Unreachable: every effect type the domain decides has a case
		// here, and recovery performs again only the host's own
		// (domain.Replay) ones, so an unknown type read from the outbox is
		// cancelled, never performed. A type added without a case is
		// logged rather than dropped silently.
		h.log.Error("unknown effect", "type", e.EffectType(), "thread", e.Head().ThreadID)
		return r, true
	}
	if r.Err != nil {
		if h.ctx.Err() != nil || errors.Is(r.Err, ErrClosed) {
			return r, false // shutting down: the next host's recovery decides
		}
		h.log.Warn("provider action failed", "type", e.EffectType(), "thread", e.Head().ThreadID, "error", r.Err)
	}
	return r, true
}

// withSession calls the plugin of the live session an effect is bound to
// (the thread's current one when the effect names none), bounded in time.
func (h *Host) withSession(threadID, sessionID, what string, call func(context.Context, *liveSession) error) error {
	s, err := h.liveSessionFor(threadID, sessionID)
	if err != nil {
		return err
	}
	return h.callPlugin(s.ctx, s.plugin, what, h.cfg.PluginCallTimeout, func(ctx context.Context) error { return call(ctx, s) })
}

// respond delivers an answer to the provider through the live session
// that asked.
func (h *Host) respond(e domain.Respond) error {
	return h.withSession(e.ThreadID, e.SessionID, "RespondToRequest", func(ctx context.Context, s *liveSession) error {
		return s.plugin.RespondToRequest(ctx, sdk.RespondToRequestRequest{SessionID: s.id, RequestRef: e.RequestRef,
			Decision: domain.DecisionToSDK(e.Decision), Answers: e.Answers})
	})
}

// steer adds a message to the provider's active turn.
func (h *Host) steer(e domain.Steer) error {
	return h.withSession(e.ThreadID, e.SessionID, "SteerTurn", func(ctx context.Context, s *liveSession) error {
		return s.plugin.SteerTurn(ctx, sdk.SteerTurnRequest{SessionID: s.id, TurnRef: e.TurnRef, Input: sdk.TurnInput{Text: e.Text}})
	})
}

// interrupt asks the provider to stop a turn. Its return is an
// acknowledgement only: the run ends on the provider's terminal event.
// An interrupt decided before the turn started names no session: the
// start went first (effects run in order), so the thread's session now is
// the one.
func (h *Host) interrupt(e domain.Interrupt) error {
	return h.withSession(e.ThreadID, e.SessionID, "InterruptTurn", func(ctx context.Context, s *liveSession) error {
		return s.plugin.InterruptTurn(ctx, sdk.InterruptTurnRequest{SessionID: s.id, TurnRef: e.TurnRef})
	})
}

// Retries, of what the host records on its own: a provider's events, an
// action's outcome, a wait's fire, a forced stop. What one guards is lost
// for as long as the host runs if it gives up (a run left running, a wait
// that never fires), so it does not give up while the store is healthy.

// retryPause is the pause after a retry's first failure; each further
// failure doubles it, up to maxRetryPause.
const (
	retryPause    = 50 * time.Millisecond
	maxRetryPause = 5 * time.Second
)

// retry calls f until it succeeds or trying again cannot mend its error
// (stopped: the host closed or its store failed; or the command was
// refused), and returns its last error. Between tries it pauses on the
// host's clock, retryPause and then twice as long each time, up to
// maxRetryPause; Close beginning ends a pause, and the retry with an
// error that wraps ErrClosed and the one it was retrying. It logs the
// first failure and then the tries numbered by powers of two, so that an
// outage of hours says so a few dozen times, not thousands.
func (h *Host) retry(what string, f func() error, args ...any) error {
	pause := retryPause
	for try := 1; ; try++ {
		err := f()
		if err == nil || stopped(err) || refused(err) {
			return err
		}
		if try&(try-1) == 0 {
			h.log.Warn(what+"; retrying", append(args, "try", try, "pause", pause, "error", err)...)
		}
		if clock.Sleep(h.stopping, h.cfg.Clock, pause) != nil {
			return fmt.Errorf("%w while retrying after: %w", ErrClosed, err)
		}
		pause = min(2*pause, maxRetryPause)
	}
}

// dispatchAt sends cmd at the instant at on the host's clock, unless ctx
// ends first, and retries it until it commits (retry): a wait's fire, a
// thread's deadline (deadline.go). Given up on, neither would come again
// while the host runs.
func (h *Host) dispatchAt(ctx context.Context, at time.Time, what string, cmd domain.Command, args ...any) {
	if clock.SleepUntil(ctx, h.cfg.Clock, at) != nil {
		return
	}
	err := h.retry(what, func() error {
		_, err := h.dispatch(h.ctx, cmd, nil)
		return err
	}, args...)
	if err != nil && !stopped(err) {
		h.log.Error(what+": refused", append(args, "error", err)...)
	}
}

// stopped says whether an error is the host stopping: it closed, or its
// store failed (then it stops: storefail.go).
func stopped(err error) bool { return errors.Is(err, ErrClosed) || errors.Is(err, ErrStoreFailed) }

// refused says whether an error is a command's refusal, which no retry
// changes.
func refused(err error) bool {
	for _, r := range []error{domain.ErrInvalid, domain.ErrNotFound, domain.ErrConflict, domain.ErrUnsupported, sdk.ErrNotResumable} {
		if errors.Is(err, r) {
			return true
		}
	}
	return false
}
