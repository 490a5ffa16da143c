package orchestrator

import (
	"fmt"

	"github.com/hashicorp/go-hclog"

	"github.com/baton-run/baton/host/internal/domain"
	"github.com/baton-run/baton/host/internal/eventlog"
)

// Reads of a store without a host: what a reader that opened the store
// read-only (baton's shell completion) sees of the threads, the same as a
// host would show, with nothing written and nothing reconciled (runs a
// killed host left in flight read as it left them).

// ReadThreads lists a store's threads in id order, from the thread index,
// as Host.Threads does.
func ReadThreads(store eventlog.Log) ([]domain.ThreadSummary, error) {
	return threads(store, "", 0)
}

// ReadThread is a thread's projection as a host would load it: from its
// snapshot, when it can be trusted, and the events after it; what left it
// is in its parts, stored by the commits that left it (read them with
// Store.Archive).
func ReadThread(store eventlog.Log, id string) (domain.Thread, error) {
	t, _, err := loadThread(store, hclog.NewNullLogger(), id, partsDrop)
	if err != nil {
		return domain.Thread{}, err
	}
	if !t.Exists() {
		return domain.Thread{}, fmt.Errorf("%w: thread %q", domain.ErrNotFound, id)
	}
	return *t, nil
}

// threads lists threads in id order after a thread id, up to limit (0:
// all), from the thread index.
func threads(store eventlog.Log, after string, limit int) ([]domain.ThreadSummary, error) {
	heads, err := store.Heads(after, limit)
	if err != nil {
		return nil, fmt.Errorf("list threads: %w", err)
	}
	out := make([]domain.ThreadSummary, 0, len(heads))
	for _, hd := range heads {
		s, err := decodeHead(hd.Data)
		if err != nil {
			return nil, fmt.Errorf("list threads: head of %s: %w", hd.ThreadID, err)
		}
		out = append(out, s)
	}
	return out, nil
}
