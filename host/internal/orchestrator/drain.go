package orchestrator

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/baton-run/baton/host/internal/domain"
)

// What Close ends first (the drain), and the reaper of idle sessions.

// DrainTimeout bounds how long Close waits, on the host's clock, for the
// runs whose providers it asked to stop to end by themselves.
const DrainTimeout = 10 * time.Second

// drainLogMargin is how long past DrainTimeout the drain of a host on a
// log that Config.OpenLog opened (`baton serve --store nats://...`) may
// take before its watchdog gives up on the log (watchDrain): the drain
// writes once more per run still active after its wait, and the margin
// covers those writes through a JetStream leader election (4 to 9 s).
const drainLogMargin = 10 * time.Second

// ShutDownReason is the reason a run the host ended as it shut down gives
// (its provider did not end it in time).
const ShutDownReason = "host shut down"

// drain ends the host's active runs before Close closes their sessions:
// each run whose turn a provider has is asked to stop (an interrupt), and
// its own terminal ends it, checkpoint and all, if it comes within
// DrainTimeout; every run still active then (its provider did not answer,
// or its turn never reached one) is ended by the host with ShutDownReason.
// No queued run starts meanwhile (domain.Env.ShuttingDown): the next host
// starts them. No run is left running.
func (h *Host) drain() { h.drainRuns(true) }

// drainRuns is drain; without ask, no provider is asked to stop or waited
// for: every active run ends at once with ShutDownReason (Halt).
func (h *Host) drainRuns(ask bool) {
	h.draining.Store(true)
	w := h.watchDrain()
	defer w.stop()
	live, err := h.ownLive()
	if err != nil {
		h.log.Error("drain: list live threads", "error", err)
		return
	}
	var asked []string
	for _, id := range live {
		if !ask {
			break
		}
		t, err := h.view(id)
		if err != nil {
			continue
		}
		stop, wait := t.Drain(func(sessionID string) bool { return h.sessionLive(id, sessionID) })
		if h.ctx.Err() != nil || !wait {
			continue // ended below
		}
		if stop != nil {
			if _, err := h.Dispatch(h.ctx, domain.Observed(id, *stop)); err != nil {
				h.log.Warn("drain: ask a run to stop", "thread", id, "run", stop.RunID, "error", err)
			}
		}
		asked = append(asked, id)
	}
	if len(asked) > 0 {
		h.awaitRunsEnded(asked, w.gaveUp)
	}
	var left []string
	for _, id := range live {
		t, err := h.view(id)
		if err != nil || !t.InFlight() {
			continue
		}
		var run string
		if r := t.ActiveRun(); r != nil {
			run = r.ID
		}
		if _, err := h.Dispatch(h.ctx, domain.Observed(id, domain.ShutDown{Reason: ShutDownReason, After: t.Sequence})); err != nil {
			if w.fired() {
				err = w.cause
			}
			h.log.Error("drain: could not record the end of a run; it stays active in the log until the next host's recovery ends it",
				"thread", id, "run", run, "error", err)
			left = append(left, fmt.Sprintf("run %s of thread %s", run, id))
		}
	}
	if len(left) > 0 && w.fired() {
		h.drainErr = fmt.Errorf("drain: could not record the end of %s, left active for the next host's recovery to end: %w",
			strings.Join(left, ", "), w.cause)
	}
}

// drainWatch is the watchdog of a drain on a log that Config.OpenLog
// opened. Such a log's writes may wait for ever: jetstreamlog's Append
// waits while its servers cannot be reached, and has no context to end
// it. So, DrainTimeout plus drainLogMargin after the drain began on the
// host's clock, a drain not done yet gives up on the log: it closes it,
// which is bounded (jetstreamlog waits at most its CloseTimeout for the
// servers to take what is queued, so nothing they take is lost) and fails
// every write still waiting and every later one with eventlog.ErrClosed.
// The drain then goes on at once: each run whose end it cannot record is
// named in the log and stays active, for the next host's recovery to end
// it as after a killed host. The Pebble store's writes wait for nothing
// but its disk: its drain has no watchdog.
type drainWatch struct {
	gaveUp chan struct{} // closed when the watchdog gave up on the log; nil: no watchdog
	cause  error         // why the drain's writes failed once it gave up
	done   chan struct{} // closed by stop
	wg     sync.WaitGroup
}

// watchDrain starts the drain's watchdog, if its log needs one; stop
// ends it.
func (h *Host) watchDrain() *drainWatch {
	w := &drainWatch{}
	if h.cfg.OpenLog == nil {
		return w
	}
	bound := DrainTimeout + drainLogMargin
	w.gaveUp, w.done = make(chan struct{}), make(chan struct{})
	w.cause = fmt.Errorf("the event log did not take the drain's writes within %v (a shared log whose servers cannot be reached), so the host closed it", bound)
	timer := h.cfg.Clock.NewTimer(bound)
	w.wg.Go(func() {
		defer timer.Stop()
		select {
		case <-w.done:
			return
		case <-timer.C():
		}
		h.log.Error("drain: the event log did not take the drain's writes in time; closing it, so that the host stops", "after", bound)
		close(w.gaveUp) // first: the drain waits no more for runs to end
		if err := h.store.Close(); err != nil {
			h.log.Warn("drain: close the event log", "error", err)
		}
	})
	return w
}

// fired says whether the watchdog gave up on the log.
func (w *drainWatch) fired() bool {
	select {
	case <-w.gaveUp:
		return true
	default:
		return false
	}
}

// stop ends the watchdog, waiting for a close it began.
func (w *drainWatch) stop() {
	if w.done == nil {
		return
	}
	close(w.done)
	w.wg.Wait()
}

// awaitRunsEnded waits until none of the threads has an active run, or
// DrainTimeout on the host's clock has passed, or gaveUp is closed (the
// drain's watchdog gave up on the log: no end can be recorded).
func (h *Host) awaitRunsEnded(threads []string, gaveUp <-chan struct{}) {
	timer := h.cfg.Clock.NewTimer(DrainTimeout)
	defer timer.Stop()
	for _, id := range threads {
		e := h.cache.acquire(id) // held while waited on: not evicted
		for {
			t, changed := e.current()
			if t == nil || !t.InFlight() {
				break
			}
			select {
			case <-changed:
				continue
			case <-timer.C():
				h.log.Warn("drain: runs did not end in time; the host ends them", "after", DrainTimeout)
			case <-gaveUp:
			}
			h.cache.release(e)
			return
		}
		h.cache.release(e)
	}
}

// reapWhenIdle closes a session once nothing has used it for IdleTimeout
// on the host's clock. It is the session's one timer, and ends with the
// session or when Close begins; a session used meanwhile is looked at
// again IdleTimeout after its last use.
func (h *Host) reapWhenIdle(s *liveSession) {
	wait := h.cfg.IdleTimeout
	for {
		timer := h.cfg.Clock.NewTimer(wait)
		select {
		case <-s.done:
			timer.Stop()
			return
		case <-h.stopping.Done():
			timer.Stop()
			return
		case <-timer.C():
		}
		if idle := h.cfg.Clock.Now().Sub(s.lastUsed()); idle < h.cfg.IdleTimeout {
			wait = h.cfg.IdleTimeout - idle
			continue
		}
		if h.reap(s) {
			return
		}
		wait = h.cfg.IdleTimeout
	}
}

// reap closes an idle session: its end is decided (domain.CloseIdleSession,
// which refuses a session in use) and recorded, then its plugin session
// closed, which stops the provider process. It says whether the session is
// done with (closed, or no longer the thread's).
func (h *Host) reap(s *liveSession) bool {
	if h.draining.Load() {
		return true // Close closes it
	}
	t, err := h.view(s.threadID)
	if err != nil || t.InUse() {
		return false
	}
	// Out of the map first: a turn that starts from now on opens a new
	// session. One that took this session before is seen by the decision
	// (its run is active), and the session is put back.
	h.smu.Lock()
	if h.closing || h.sessions[s.threadID] != s {
		h.smu.Unlock()
		return true
	}
	delete(h.sessions, s.threadID)
	h.smu.Unlock()
	_, err = h.Dispatch(h.ctx, domain.Observed(s.threadID, domain.CloseIdleSession{SessionID: s.id}))
	if err != nil {
		h.smu.Lock()
		if _, taken := h.sessions[s.threadID]; !taken && !h.closing {
			h.sessions[s.threadID] = s
			h.smu.Unlock()
			h.log.Debug("idle session in use after all; kept", "session", s.id, "error", err)
			return false
		}
		h.smu.Unlock()
	}
	h.log.Debug("closing idle session", "thread", s.threadID, "session", s.id)
	s.close(h.cfg.Clock, h.log)
	return true
}
