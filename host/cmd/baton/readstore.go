package main

import (
	"os"
	"path/filepath"

	"github.com/baton-run/baton/host/internal/eventlog"
)

// openStoreReadOnly opens the data dir's event store (DATA/events) to read
// it: nothing in the data dir is written or created (a data dir without a
// store is an error, not a new store), no host starts, and nothing left in
// flight is reconciled. A store another process holds is an error (its
// lock).
func openStoreReadOnly(data string) (*eventlog.Store, error) {
	dir := filepath.Join(data, "events")
	if _, err := os.Stat(dir); err != nil {
		return nil, err
	}
	return eventlog.OpenWith(dir, eventlog.Options{ReadOnly: true})
}
