package sessions

import (
	"maps"
	"slices"
	"sync"

	"github.com/baton-run/baton/sdk"
)

// Requests is a session's open requests: those its provider opened
// (request_opened) and that are not resolved yet, by request ref, with
// what the plugin keeps to answer each (Q). A request is resolved once:
// by the host's answer (Take), by the provider withdrawing it (Take), or
// at the provider's exit, when every request still open is resolved
// cancelled (TakeAll, in ref order, before runtime_exited). Safe for
// concurrent use; its zero value is empty and ready.
type Requests[Q any] struct {
	mu sync.Mutex
	m  map[string]Q
}

// Open records request ref as open. Record it where the provider's frames
// are read, so that a frame after it (a withdrawal) finds it.
func (r *Requests[Q]) Open(ref string, q Q) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil {
		r.m = map[string]Q{}
	}
	r.m[ref] = q
}

// Get is open request ref, or sdk.ErrUnknownRequest naming it (never
// opened, or resolved already).
func (r *Requests[Q]) Get(ref string) (Q, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	q, ok := r.m[ref]
	if !ok {
		return q, sdk.Errorf(sdk.ErrUnknownRequest, "request %q", ref)
	}
	return q, nil
}

// Take resolves request ref: it is no longer open. ok is false when it
// was not open (resolved already by someone else: nothing to emit).
func (r *Requests[Q]) Take(ref string) (q Q, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	q, ok = r.m[ref]
	delete(r.m, ref)
	return q, ok
}

// TakeAll resolves every open request and returns them in ref order: the
// provider exited, and each is to be resolved cancelled.
func (r *Requests[Q]) TakeAll() []Q {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Q
	for _, ref := range slices.Sorted(maps.Keys(r.m)) {
		out = append(out, r.m[ref])
	}
	clear(r.m)
	return out
}
