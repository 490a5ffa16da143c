package orchestrator

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/baton-run/baton/host/internal/eventlog"
)

// A host opened read-only (Config.ReadOnly) reads a data dir it cannot
// hold: one on a read-only file system, or one another process holds (a
// `baton run`, or a service that does not answer). Its event log is opened
// read-only (eventlog.Options.ReadOnly: no lock taken, nothing written),
// and it does nothing a holder does: no pid file, no recovery, no index,
// no raw-frame pruning, no waits armed, no drain. It commits nothing: a
// command is ErrReadOnly. It shows the log as it was when it opened; the
// holder's later commits are not followed.

// ErrReadOnly is a command given to a host opened read-only.
var ErrReadOnly = fmt.Errorf("this host only reads the data dir: %w", eventlog.ErrReadOnly)

// openReadOnly is Open for Config.ReadOnly (cfg's defaults are set).
func openReadOnly(cfg Config) (*Host, error) {
	store, err := eventlog.OpenWith(filepath.Join(cfg.DataDir, "events"), eventlog.Options{Logger: cfg.Logger, ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("open host read-only: %w", err)
	}
	if err := checkLayout(store); err != nil {
		store.Close()
		return nil, fmt.Errorf("open host read-only: %w", err)
	}
	h := newHost(cfg, store)
	return h, nil
}

// checkLayout refuses a store whose thread index is not written: a log an
// older Baton wrote is indexed the first time a host holds it (index),
// which a read-only host cannot do.
func checkLayout(store eventlog.Log) error {
	done, err := indexed(store)
	if err != nil || done {
		return err
	}
	if last, _ := store.Last(); last > 0 {
		return errors.New("an older Baton wrote the event log, whose threads are indexed the first time a baton holds the data dir; it cannot be read before")
	}
	return nil
}

// closeReader is Close for a host opened read-only: it has no sessions or
// workers, only plugins a listing may have started, and its store.
func (h *Host) closeReader() error {
	h.cancel()
	h.plugins.Close()
	h.wg.Wait()
	h.closed.Store(true)
	h.cache.wakeAll()
	var err error
	return errors.Join(err, h.store.Close())
}
