package checkpoint

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/baton-run/baton/host/internal/filelock"
	"github.com/baton-run/baton/sdk/clock"
)

// lockPoll is how often, on the Service's clock, it retries a file lock
// held by another process; a capture takes tens of milliseconds, so
// waiting is short.
const lockPoll = 10 * time.Millisecond

// lock takes the worktree's lock: first the in-process one for gitDir, then
// the flock on <gitdir>/baton/checkpoint.lock that keeps other processes
// out. Both waits end when ctx does. The returned func releases both.
func (s *Service) lock(ctx context.Context, r repo) (unlock func(), err error) {
	s.mu.Lock()
	sem := s.locks[r.gitDir]
	if sem == nil {
		sem = make(chan struct{}, 1)
		s.locks[r.gitDir] = sem
	}
	s.mu.Unlock()
	select {
	case sem <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("wait for lock: %w", context.Cause(ctx))
	}
	release := func() { <-sem }

	if err := os.MkdirAll(r.stateDir(), 0o777); err != nil {
		release()
		return nil, err
	}
	name := filepath.Join(r.stateDir(), "checkpoint.lock")
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o666)
	if err != nil {
		release()
		return nil, err
	}
	for {
		ok, err := filelock.TryLock(f)
		if err != nil {
			f.Close()
			release()
			return nil, fmt.Errorf("lock %s: %w", name, err)
		}
		if ok {
			break
		}
		if err := clock.Sleep(ctx, s.clock, lockPoll); err != nil {
			f.Close()
			release()
			return nil, fmt.Errorf("wait for lock %s: %w", name, err)
		}
	}
	return func() {
		f.Close() // closing the file drops the flock
		release()
	}, nil
}
