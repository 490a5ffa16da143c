// Package sessions is the machinery provider adapters share, so that each
// adapter holds only what is particular to its provider:
//
//   - Table, the adapter's open sessions by id;
//   - Lifecycle, a session from its provider's start to the report of its
//     exit: closed or not, and runtime_exited last, once;
//   - Requests, a session's requests waiting for the host's answer, all
//     resolved cancelled at the exit;
//   - Items, a normalizer's open items, each started once and completed
//     before its turn's end.
package sessions

import (
	"sync"

	"github.com/baton-run/baton/sdk"
)

// Table is an adapter's table of open sessions by id. A session is
// removed when the channel it was added with closes (its provider exited
// and its last events were emitted).
type Table[S any] struct {
	mu sync.Mutex
	m  map[string]S
}

// Get returns an open session, or sdk.ErrUnknownSession.
func (t *Table[S]) Get(id string) (S, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s, ok := t.m[id]
	if !ok {
		var zero S
		return zero, sdk.Errorf(sdk.ErrUnknownSession, "session %q", id)
	}
	return s, nil
}

// ForRequest returns the open session a request was opened in, for its
// answer. A session no longer open took its provider with it: the request
// can no longer be answered (sdk.ErrNotResumable, naming the request).
func (t *Table[S]) ForRequest(id, requestRef string) (S, error) {
	s, err := t.Get(id)
	if err != nil {
		return s, sdk.Errorf(sdk.ErrNotResumable, "request %s: its session is gone", requestRef)
	}
	return s, nil
}

// Add records a session until gone closes.
func (t *Table[S]) Add(id string, s S, gone <-chan struct{}) {
	t.mu.Lock()
	if t.m == nil {
		t.m = map[string]S{}
	}
	t.m[id] = s
	t.mu.Unlock()
	go func() {
		<-gone
		t.mu.Lock()
		delete(t.m, id)
		t.mu.Unlock()
	}()
}
