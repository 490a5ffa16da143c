package orchestrator

import (
	"path/filepath"
	"sync"
	"time"

	"github.com/baton-run/baton/host/internal/rawframes"
	"github.com/baton-run/baton/sdk/clock"
)

// Raw-frame logs: the host tells each session's plugin where to keep its
// raw provider frames (DATA/rawframes/SESSION.ndjson; none when
// Config.RawFrames.Off) and bounds them (rawframes.Policy). It prunes at
// Open, as a session opens and as one ends (its logs become deletable),
// and when the next kept log comes of age, on the host's clock: no pass
// polls. A session's logs are kept while its plugin may write them, from
// before OpenSession until its event stream ends.

// framePruner runs the retention passes.
type framePruner struct {
	dir    string
	policy rawframes.Policy
	clk    clock.Clock

	mu    sync.Mutex
	inUse map[string]bool // session ids whose logs may be written
	kick  chan struct{}   // a pass is wanted (buffered 1)
}

func newFramePruner(dataDir string, p rawframes.Policy, clk clock.Clock) *framePruner {
	return &framePruner{dir: filepath.Join(dataDir, "rawframes"), policy: p, clk: clk,
		inUse: map[string]bool{}, kick: make(chan struct{}, 1)}
}

// path is the log a new session's plugin is told to keep ("" when off).
func (f *framePruner) path(sessionID string) string {
	if f.policy.Off {
		return ""
	}
	return filepath.Join(f.dir, sessionID+".ndjson")
}

// open marks a session's logs in use, before its plugin is asked to open
// it, and asks for a pass (the new session's logs count from now on).
func (f *framePruner) open(sessionID string) {
	f.mu.Lock()
	f.inUse[sessionID] = true
	f.mu.Unlock()
	f.wake()
}

// done marks a session's logs deletable and asks for a pass.
func (f *framePruner) done(sessionID string) {
	f.mu.Lock()
	delete(f.inUse, sessionID)
	f.mu.Unlock()
	f.wake()
}

func (f *framePruner) wake() {
	select {
	case f.kick <- struct{}{}:
	default:
	}
}

func (f *framePruner) used(sessionID string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.inUse[sessionID]
}

// prunePass prunes once and returns when the next kept log comes of age.
func (h *Host) prunePass() time.Time {
	f := h.frames
	r, err := rawframes.Prune(f.dir, f.clk.Now(), f.policy, f.used)
	if err != nil {
		h.log.Warn("raw-frame logs: some could not be pruned; delete them by hand if they should go", "dir", f.dir, "error", err)
	}
	if len(r.Deleted) > 0 {
		maxBytes, maxAge := f.policy.Limits()
		h.log.Info("deleted raw-frame logs past retention", "files", len(r.Deleted), "bytes", r.Bytes,
			"max_bytes", rawframes.FormatSize(cmpNone(maxBytes)), "max_age", rawframes.FormatAge(cmpNone(maxAge)))
	}
	return r.Next
}

// cmpNone is a limit with 0 (off) as -1, as the formats write none.
func cmpNone[T int64 | time.Duration](v T) T {
	if v == 0 {
		return -1
	}
	return v
}

// pruneFrames runs passes until the host stops: when a session opens or
// ends, and when the next kept log comes of age (next, first).
func (h *Host) pruneFrames(next time.Time) {
	f := h.frames
	for {
		var due <-chan time.Time
		var timer clock.Timer
		if !next.IsZero() {
			timer = f.clk.NewTimer(max(next.Sub(f.clk.Now()), 0))
			due = timer.C()
		}
		select {
		case <-h.stopping.Done():
			if timer != nil {
				timer.Stop()
			}
			return
		case <-f.kick:
		case <-due:
		}
		if timer != nil {
			timer.Stop()
		}
		next = h.prunePass()
	}
}
