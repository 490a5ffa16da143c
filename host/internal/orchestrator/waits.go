package orchestrator

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/baton-run/baton/host/internal/domain"
	"github.com/baton-run/baton/sdk/clock"
)

// Waits and checks: the host's half of the continuation loop. The domain
// decides when a wait fires (Thread.NextWait); the host keeps one timer per
// thread on its clock, armed after every commit that changes the thread's
// next wait and on start for threads a restart left waiting, and sends
// FireWait when it passes. The command's id is the wait's, so a wait fires
// once however many hosts try. A loop's --until check runs as an effect.

// waitTimer is a thread's armed timer.
type waitTimer struct {
	id   string
	stop context.CancelFunc
}

// timers are the threads' wait timers, by thread id, and the threads
// whose waits this host arms (all, when the host is Unattended).
type timers struct {
	mu sync.Mutex
	m  map[string]*waitTimer
	// followed are the threads whose waits a host that is not Unattended
	// arms, each with how many clients follow it (Follow). A thread is
	// followed while a client follows it or it has unattended work
	// (domain.Thread.Unattended) that this host's own decision started
	// (0 clients); it leaves when neither holds, so the set is what is
	// going on, not every thread the host ever touched.
	followed map[string]int
}

// Follow makes the host arm the thread's waits, from its armed one now on,
// as a service does every thread's, until unfollow: a client that follows
// a thread's unattended work in a host embedded for it calls it, and
// unfollow when it stops following. The thread stays followed while its
// unattended work goes on, and leaves when that ends.
func (h *Host) Follow(threadID string) (unfollow func(), err error) {
	t, err := h.view(threadID)
	if err != nil {
		return nil, err
	}
	if h.cfg.Unattended {
		return func() {}, nil // every thread's waits are armed
	}
	h.timers.mu.Lock()
	if h.timers.followed == nil {
		h.timers.followed = map[string]int{}
	}
	h.timers.followed[threadID]++
	h.timers.mu.Unlock()
	h.syncWait(threadID, t.NextWait())
	var once sync.Once
	return func() { once.Do(func() { h.unfollow(threadID) }) }, nil
}

// unfollow ends one client's follow of a thread; the thread leaves the
// followed set unless another client follows it or it has unattended work.
// It holds the thread's writer lock, so that no commit arms a wait between
// the look at the thread and the thread leaving.
func (h *Host) unfollow(threadID string) {
	e := h.cache.acquire(threadID)
	defer h.cache.release(e)
	e.mu.Lock()
	defer e.mu.Unlock()
	t, err := h.loadLocked(e)
	h.timers.mu.Lock()
	defer h.timers.mu.Unlock()
	n, ok := h.timers.followed[threadID]
	if !ok {
		return
	}
	n = max(n-1, 0)
	if n > 0 || (err == nil && t.Unattended()) {
		h.timers.followed[threadID] = n
		return
	}
	delete(h.timers.followed, threadID)
}

// syncWaits keeps the thread's wait timer in step with a commit that took
// it from was to t with events: the host follows the thread when the
// decision armed a wait (it keeps the thread going), its timer is armed
// for its next wait, and a thread no client follows is dropped once its
// unattended work has ended. The thread's writer lock is held.
func (h *Host) syncWaits(threadID string, was, t *domain.Thread, events []domain.Payload) {
	if was.NextWait() != nil || t.NextWait() != nil {
		if armed(events) {
			h.followWaits(threadID)
		}
		h.syncWait(threadID, t.NextWait())
	}
	h.settleFollow(threadID, t)
}

// settleFollow drops a thread that no client follows from the followed
// set once its unattended work has ended (t is the thread as a commit
// left it; its writer lock is held).
func (h *Host) settleFollow(threadID string, t *domain.Thread) {
	h.timers.mu.Lock()
	defer h.timers.mu.Unlock()
	if n, ok := h.timers.followed[threadID]; ok && n == 0 && !t.Unattended() {
		delete(h.timers.followed, threadID)
	}
}

// follows says whether the host arms the thread's waits; h.timers.mu is
// held.
func (h *Host) follows(threadID string) bool {
	_, ok := h.timers.followed[threadID]
	return h.cfg.Unattended || ok
}

// syncWait arms the thread's timer for its next wait (or stops it when
// there is none), unless it is armed for that wait already, or the host
// does not arm the thread's waits.
func (h *Host) syncWait(threadID string, w *domain.Wait) {
	h.timers.mu.Lock()
	defer h.timers.mu.Unlock()
	if !h.follows(threadID) {
		return
	}
	cur := h.timers.m[threadID]
	if cur != nil && w != nil && cur.id == w.ID {
		return
	}
	if cur != nil {
		cur.stop()
		delete(h.timers.m, threadID)
	}
	if w == nil || h.stopping.Err() != nil {
		return // none, or the host is stopping: the next one arms it
	}
	if h.timers.m == nil {
		h.timers.m = map[string]*waitTimer{}
	}
	ctx, cancel := context.WithCancel(h.stopping)
	h.timers.m[threadID] = &waitTimer{id: w.ID, stop: cancel}
	id, at := w.ID, w.At
	// Stopped when another wait replaces it, or the host stops. Its fire
	// is retried until it commits: the timer stays armed for this wait
	// (syncWait keeps it), so a fire given up on would never come while
	// the host runs.
	cmd := domain.Observed(threadID, domain.FireWait{WaitID: id})
	h.wg.Go(func() {
		defer cancel()
		h.dispatchAt(ctx, at, "fire a wait", cmd, "thread", threadID, "wait", id)
	})
}

// armed says whether a decision armed a wait.
func armed(events []domain.Payload) bool {
	for _, p := range events {
		if _, ok := p.(domain.WaitArmed); ok {
			return true
		}
	}
	return false
}

// followWaits marks a thread as one whose waits the host arms, for the
// unattended work its decision started (an Unattended host arms every
// thread's). The thread's writer lock is held.
func (h *Host) followWaits(threadID string) {
	if h.cfg.Unattended {
		return
	}
	h.timers.mu.Lock()
	defer h.timers.mu.Unlock()
	if h.timers.followed == nil {
		h.timers.followed = map[string]int{}
	}
	if _, ok := h.timers.followed[threadID]; !ok {
		h.timers.followed[threadID] = 0
	}
}

// armWaits arms the timers of threads a restart left waiting (of an
// Unattended host; syncWait leaves the others).
func (h *Host) armWaits(threadIDs []string) {
	for _, id := range threadIDs {
		if t, err := h.view(id); err == nil {
			h.syncWait(id, t.NextWait())
		}
	}
}

// runCheck runs a loop's check in the thread's cwd, bounded by the
// effect's timeout on the host's clock, and returns what it found.
func (h *Host) runCheck(e domain.RunCheck) (domain.Result, bool) {
	var res domain.CheckResult
	t, err := h.view(e.ThreadID)
	if err == nil {
		if err = checkCwd(t.Cwd); err != nil {
			err = fmt.Errorf("the thread's working directory %w", err)
			res.ExitCode = -1
		}
	}
	if err != nil {
		res.Error = err.Error()
		return domain.Result{Checked: res}, true
	}
	ctx, cancel := clock.WithTimeout(h.stopping, h.cfg.Clock, cmp.Or(e.Timeout, domain.DefaultCheckTimeout), errCheckTimeout)
	defer cancel()
	var out tailBuffer
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", e.Command)
	cmd.Dir = t.Cwd
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	err = cmd.Run()
	res.Output, res.Truncated = out.String(), out.cut
	var exit *exec.ExitError
	switch {
	case h.stopping.Err() != nil:
		return domain.Result{}, false // the host stops: the next one runs the check again
	case errors.Is(context.Cause(ctx), errCheckTimeout):
		res.TimedOut, res.ExitCode = true, -1
	case errors.As(err, &exit):
		res.ExitCode = exit.ExitCode()
	case err != nil:
		res.Error, res.ExitCode = err.Error(), -1
	}
	return domain.Result{Checked: res}, true
}

var errCheckTimeout = errors.New("the check timed out")

// tailBuffer keeps the last domain.MaxCheckOutput bytes written to it:
// the tail of a check's output the log keeps.
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
	cut bool
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if over := len(b.buf) - domain.MaxCheckOutput; over > 0 {
		b.buf = append(b.buf[:0], b.buf[over:]...)
		b.cut = true
	}
	return len(p), nil
}

func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(bytes.ToValidUTF8(b.buf, []byte("\uFFFD")))
}
