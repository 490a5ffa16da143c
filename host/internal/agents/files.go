package agents

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/baton-run/baton/host/internal/filelock"
)

// DirName is the directory, in the data directory, that holds the
// registry's cache, the lockfile and one directory per installed agent.
const DirName = "agents"

func agentsDir(dataDir string) string { return filepath.Join(dataDir, DirName) }

// lockPoll is how often a wait for another install's lock looks again;
// installs take seconds, so a tenth of one is no cost.
const lockPoll = 100 * time.Millisecond

// lockFileName is the file whose flock keeps installs and removals of
// one data directory apart.
const lockFileName = ".lock"

// lockAgents takes the agents directory's lock, making the directory if
// need be, waiting for another holder until ctx ends. The returned func
// releases it.
func lockAgents(ctx context.Context, dir string) (unlock func(), err error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	name := filepath.Join(dir, lockFileName)
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	t := time.NewTicker(lockPoll)
	defer t.Stop()
	for {
		ok, err := filelock.TryLock(f)
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", name, err)
		}
		if ok {
			return func() { f.Close() }, nil // closing the file drops the flock
		}
		select {
		case <-t.C:
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("wait for another install to finish (%s): %w", name, context.Cause(ctx))
		}
	}
}
