package orchestrator

import (
	"context"
	"fmt"
	"iter"

	"github.com/baton-run/baton/host/internal/eventlog"
)

// What readers follow. Both streams yield events in sequence order with no
// gap and no duplicate, and only events whose thread projection already
// shows them: a reader that sees an event and then reads the thread finds
// the event applied.

// streamPage is how many events a stream reads at a time.
const streamPage = 1024

// Events yields every committed event after a sequence, of every thread, in
// order, then waits for more until ctx ends or the host closes. It reads the
// global log up to the last published sequence, below which everything is
// durable and applied.
func (h *Host) Events(ctx context.Context, after uint64) iter.Seq2[eventlog.Record, error] {
	return func(yield func(eventlog.Record, error) bool) {
		h.follow(ctx, after, yield, func(after uint64) ([]eventlog.Record, <-chan struct{}, error) {
			_, changed := h.store.Last()
			recs, err := h.store.After(after, streamPage)
			return recs, changed, err
		})
	}
}

// ThreadStream yields one thread's events after a sequence, in order, then
// waits for more until ctx ends or the host closes: a client that took
// Snapshot(id) at sequence N reads ThreadStream(ctx, id, N) and sees every
// later event of the thread exactly once. It reads the thread's index, not
// the global log, up to the thread's published projection.
func (h *Host) ThreadStream(ctx context.Context, threadID string, after uint64) iter.Seq2[eventlog.Record, error] {
	return func(yield func(eventlog.Record, error) bool) {
		e := h.cache.acquire(threadID) // held while followed: not evicted
		defer h.cache.release(e)
		if _, err := h.loaded(e); err != nil {
			yield(eventlog.Record{}, err)
			return
		}
		h.follow(ctx, after, yield, func(after uint64) ([]eventlog.Record, <-chan struct{}, error) {
			t, changed := e.current()
			if t.Sequence <= after {
				return nil, changed, nil
			}
			recs, err := h.store.ThreadAfter(threadID, after, t.Sequence, streamPage)
			if err == nil && len(recs) == 0 { // only a store whose thread index lost events
				err = fmt.Errorf("thread %s: its index has no event after %d, but its projection is at %d", threadID, after, t.Sequence)
			}
			return recs, changed, err
		})
	}
}

// follow yields what read returns after a sequence, a page at a time and
// in order; when read has nothing new, it waits on the channel read gave
// with it, until ctx ends or the host closes.
func (h *Host) follow(ctx context.Context, after uint64, yield func(eventlog.Record, error) bool,
	read func(after uint64) ([]eventlog.Record, <-chan struct{}, error)) {
	for {
		if h.ctx.Err() != nil || h.closed.Load() {
			return
		}
		recs, changed, err := read(after)
		if err != nil {
			yield(eventlog.Record{}, err)
			return
		}
		for _, r := range recs {
			if !yield(r, nil) {
				return
			}
			after = r.Sequence
		}
		if len(recs) > 0 {
			continue
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return
		case <-h.ctx.Done():
			return
		}
	}
}
