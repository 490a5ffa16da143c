package orchestrator

import (
	"context"
	"sync"
	"time"

	"github.com/baton-run/baton/host/internal/domain"
)

// Stops: the host's half of "stop means stop". The domain records an
// interrupt's deadline (domain.Thread.StopDeadline); the host keeps one
// timer per thread on its clock, armed after each commit that changes it,
// and sends ForceStop when it passes; the domain decides whether anything
// is left to stop, and if so the end_session effect ends the provider's
// process through its plugin (forceClose). Deadlines are not re-armed at
// a start: a restart ends every run that was in flight.

// stopTimer is a thread's armed deadline.
type stopTimer struct {
	cmd  domain.ForceStop
	at   time.Time
	stop context.CancelFunc
}

// stops are the threads' armed deadlines.
type stops struct {
	mu sync.Mutex
	m  map[string]*stopTimer
}

// syncStop arms the thread's timer for its interrupted run's deadline (or
// stops it when there is none), unless it is armed for that one already.
func (h *Host) syncStop(threadID string, t *domain.Thread) {
	cmd, at, due := t.StopDeadline()
	h.stops.mu.Lock()
	defer h.stops.mu.Unlock()
	cur := h.stops.m[threadID]
	if cur != nil && due && cur.cmd == cmd && cur.at.Equal(at) {
		return
	}
	if cur != nil {
		cur.stop()
		delete(h.stops.m, threadID)
	}
	if !due || h.stopping.Err() != nil {
		return // none, or the host is stopping: its drain ends the runs
	}
	if h.stops.m == nil {
		h.stops.m = map[string]*stopTimer{}
	}
	ctx, cancel := context.WithCancel(h.stopping)
	h.stops.m[threadID] = &stopTimer{cmd: cmd, at: at, stop: cancel}
	// Stopped when the run ends, or the host stops.
	c := domain.Command{ID: "force:" + cmd.AttemptID, ThreadID: threadID, Payload: cmd}
	h.wg.Go(func() {
		defer cancel()
		h.dispatchAt(ctx, at, "force a run to stop", c, "thread", threadID, "run", cmd.RunID)
	})
}

// forceClose ends the session of a run that did not stop when asked: the
// plugin ends the provider's process group (SIGTERM, then SIGKILL after its
// grace) and reports the session's end, which ends the run. A plugin that
// does not answer in time is killed, which ends the session too. A session
// already gone has nothing left to end.
func (h *Host) forceClose(e domain.Effect) error {
	s, err := h.liveSessionFor(e.ThreadID, e.SessionID)
	if err != nil {
		return nil // its end is recorded, or on its way: it ends the run
	}
	h.log.Warn("the provider did not stop when asked; ending its process", "thread", e.ThreadID, "run", e.RunID, "session", s.id)
	return h.callPlugin(h.ctx, s.plugin, "CloseSession", sessionCloseTimeout, func(ctx context.Context) error {
		return s.plugin.ForceCloseSession(ctx, s.id)
	})
}
