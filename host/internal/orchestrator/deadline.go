package orchestrator

import (
	"context"
	"sync"
	"time"

	"github.com/baton-run/baton/host/internal/domain"
)

// Deadlines the domain derives from a thread's projection and the host
// keeps the time of: an interrupt's grace (stop.go), a silent turn's and
// an unanswered request's (stall.go). For each kind the host keeps one
// timer per thread on its clock, armed after each commit that changes
// the thread (syncDeadlines), and sends the command the domain gave with
// the deadline when it passes; the domain decides whether it still
// applies. None is re-armed at a start: a restart ends every run that was
// in flight, and the requests of its sessions with it.

// deadline is a thread's armed timer of one kind.
type deadline struct {
	id   string // the command's: the same deadline, the same command
	at   time.Time
	stop context.CancelFunc
}

// deadlines are the threads' armed timers of one kind.
type deadlines struct {
	mu sync.Mutex
	m  map[string]*deadline
}

// syncDeadlines arms (or stops) the thread's timers for the deadlines t
// now has.
func (h *Host) syncDeadlines(threadID string, t *domain.Thread) {
	h.syncStop(threadID, t)
	h.syncStall(threadID, t)
	h.syncRequest(threadID, t)
}

// arm arms the thread's timer of kind ds to dispatch cmd at at, or stops
// it when none is due, unless it is armed for that command already. what
// the command does and args (the thread, what it is about) are for the
// log.
func (h *Host) arm(ds *deadlines, what, threadID string, cmd domain.Command, at time.Time, due bool, args ...any) {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	cur := ds.m[threadID]
	if cur != nil && due && cur.id == cmd.ID && cur.at.Equal(at) {
		return
	}
	if cur != nil {
		cur.stop()
		delete(ds.m, threadID)
	}
	if !due || h.stopping.Err() != nil {
		return // none, or the host is stopping: its drain ends the runs
	}
	if ds.m == nil {
		ds.m = map[string]*deadline{}
	}
	ctx, cancel := context.WithCancel(h.stopping)
	d := &deadline{id: cmd.ID, at: at, stop: cancel}
	ds.m[threadID] = d
	h.wg.Go(func() {
		defer cancel()
		// Fired or stopped: forgotten, unless another is armed (the
		// command's commit may arm the next; one that changed nothing
		// leaves none to stop).
		defer func() {
			ds.mu.Lock()
			if ds.m[threadID] == d {
				delete(ds.m, threadID)
			}
			ds.mu.Unlock()
		}()
		h.dispatchAt(ctx, at, what, cmd, args...)
	})
}
