package orchestrator

import (
	"context"
	"fmt"
	"iter"
	"sync"

	"github.com/baton-run/baton/host/internal/domain"
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
			last, changed := h.shown()
			recs, err := h.store.After(after, streamPage)
			for len(recs) > 0 && recs[len(recs)-1].Sequence > last { // another host's, not yet applied
				recs = recs[:len(recs)-1]
			}
			return recs, changed, err
		})
	}
}

// ThreadStream yields one thread's events after a sequence, in order, then
// waits for more until ctx ends or the host closes: a client that took
// Snapshot(id) at sequence N reads ThreadStream(ctx, id, N) and sees every
// later event of the thread exactly once. It reads the thread's index, not
// the global log.
//
// A stream holds a sequence, not the thread's projection: the projection
// is loaded once, to refuse a thread that cannot be read, and then left to
// the cache, which may evict it (MaxThreads holds however many streams
// follow). What a stream holds is a page of events and its thread's
// signal (signals), whatever the thread's size.
func (h *Host) ThreadStream(ctx context.Context, threadID string, after uint64) iter.Seq2[eventlog.Record, error] {
	return func(yield func(eventlog.Record, error) bool) {
		sig := h.signals.join(threadID, h.cache.published)
		defer h.signals.leave(threadID)
		e := h.cache.acquire(threadID)
		_, err := h.loaded(e)
		h.cache.release(e)
		if err != nil {
			yield(eventlog.Record{}, err)
			return
		}
		h.follow(ctx, after, yield, func(after uint64) ([]eventlog.Record, <-chan struct{}, error) {
			published, changed := h.signals.current(sig)
			// Every event up to the log's last published sequence is
			// applied too; the signal's may be ahead of it (a projection
			// is published before the log's sequence).
			last, _ := h.shown()
			upTo := max(published, last)
			if upTo <= after {
				return nil, changed, nil
			}
			recs, err := h.store.ThreadAfter(threadID, after, upTo, streamPage)
			if err == nil && len(recs) == 0 && published > after { // only a store whose thread index lost events
				err = fmt.Errorf("thread %s: its index has no event after %d, but its projection is at %d", threadID, after, published)
			}
			return recs, changed, err
		})
	}
}

// shown is the log's last sequence readers may see, and a channel closed
// when it moves: the log's own on a host alone on its log; on a shared
// log, the last this host has applied to what it shows (followLog), which
// its replica may be ahead of (another host's commit is in the replica
// before it is in this host's projections).
func (h *Host) shown() (uint64, <-chan struct{}) {
	if h.shared() {
		return h.followed.current()
	}
	return h.store.Last()
}

// ThreadSequence is the sequence of a thread's last committed event, from
// its head in the thread index (nothing of the thread is loaded):
// ThreadStream yields it once it is published. A thread that does not
// exist is domain.ErrNotFound.
func (h *Host) ThreadSequence(threadID string) (uint64, error) {
	b, found, err := h.store.Head(threadID)
	if err != nil {
		return 0, fmt.Errorf("thread %s: %w", threadID, err)
	}
	if !found {
		return 0, fmt.Errorf("%w: thread %q", domain.ErrNotFound, threadID)
	}
	s, err := decodeHead(b)
	if err != nil {
		return 0, fmt.Errorf("thread %s: its head: %w", threadID, err)
	}
	return s.Sequence, nil
}

// signals wake the streams of each thread followed when it publishes,
// with the sequence it published: one entry per thread a stream follows,
// gone when the last of them ends.
type signals struct {
	mu sync.Mutex
	m  map[string]*signal
}

// signal is one followed thread's. Guarded by signals.mu.
type signal struct {
	refs      int
	published uint64        // the last sequence the thread published
	changed   chan struct{} // closed and replaced at each publication
}

// join makes threadID followed, its signal made if needed; leave ends it.
// A new signal starts at what the thread's cached projection shows
// (published): a commit whose projection is published but whose sequence
// the log has not yet published (see streams) would otherwise wake no one.
func (s *signals) join(threadID string, published func(string) uint64) *signal {
	s.mu.Lock()
	defer s.mu.Unlock()
	sig := s.m[threadID]
	if sig == nil {
		if s.m == nil {
			s.m = map[string]*signal{}
		}
		sig = &signal{changed: make(chan struct{})}
		s.m[threadID] = sig
		// With s.mu held: a publication after this read finds the signal.
		sig.published = published(threadID)
	}
	sig.refs++
	return sig
}

// leave ends one stream's follow of threadID.
func (s *signals) leave(threadID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sig := s.m[threadID]; sig != nil {
		if sig.refs--; sig.refs == 0 {
			delete(s.m, threadID)
		}
	}
}

// current is what a signal says now: the last sequence published, and a
// channel closed at the next publication.
func (s *signals) current(sig *signal) (uint64, <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return sig.published, sig.changed
}

// publish tells a followed thread's streams that it published seq. It is
// called from the commit hook, with the thread's writer lock held.
func (s *signals) publish(threadID string, seq uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sig := s.m[threadID]; sig != nil {
		sig.published = seq
		close(sig.changed)
		sig.changed = make(chan struct{})
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
		case <-h.failed:
			// Its store failed: nothing more is published, and a
			// thread's head may name a batch that never was (a
			// service's drain reads up to it).
			return
		}
	}
}
