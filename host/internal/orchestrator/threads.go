package orchestrator

import (
	"container/list"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/go-hclog"

	"github.com/baton-run/baton/host/internal/domain"
	"github.com/baton-run/baton/host/internal/eventlog"
)

// Thread projections in memory. A thread's entry holds its writer lock and
// its published projection: an immutable domain.Thread that readers load
// without a lock, and that a commit replaces (never changes) once its
// events are durable. An entry is made when a thread is first touched and
// loaded from the thread's snapshot and the events after it; entries no
// one holds leave when the cache is over its bound, least recently used
// first, except threads in flight.

// threadEntry is one thread in memory.
type threadEntry struct {
	id string

	// mu is the thread's writer: it is held while a commit decides,
	// appends and publishes, and while the projection is loaded.
	mu sync.Mutex
	// proj is the published projection, nil until loaded. A published
	// projection is never changed.
	proj atomic.Pointer[domain.Thread]

	// Writer state (guarded by mu): the bytes of events since the
	// thread's last snapshot, and that snapshot's size.
	sinceSnapshot int
	snapshotSize  int

	nmu     sync.Mutex    // guards changed
	changed chan struct{} // closed and replaced at each publication

	// Guarded by the cache's mutex.
	refs int
	elem *list.Element
}

// publish makes p the thread's projection and wakes its followers. It is
// called with the writer lock held, from the event log's commit hook.
func (e *threadEntry) publish(p *domain.Thread) {
	e.proj.Store(p)
	e.nmu.Lock()
	close(e.changed)
	e.changed = make(chan struct{})
	e.nmu.Unlock()
}

// current is the published projection (nil: not loaded) and a channel
// closed at the next publication.
func (e *threadEntry) current() (*domain.Thread, <-chan struct{}) {
	e.nmu.Lock()
	defer e.nmu.Unlock()
	return e.proj.Load(), e.changed
}

// threadCache is the set of thread entries, bounded.
type threadCache struct {
	mu      sync.Mutex
	max     int
	entries map[string]*threadEntry
	lru     list.List // of *threadEntry, most recently used first
}

func (c *threadCache) init(max int) {
	c.max, c.entries = max, map[string]*threadEntry{}
}

// acquire returns a thread's entry, made if needed, held until release.
func (c *threadCache) acquire(id string) *threadEntry {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[id]
	if !ok {
		e = &threadEntry{id: id, changed: make(chan struct{})}
		e.elem = c.lru.PushFront(e)
		c.entries[id] = e
	} else {
		c.lru.MoveToFront(e.elem)
	}
	e.refs++
	return e
}

// release lets an entry go; the least recently used entries no one holds
// leave while the cache is over its bound. A thread in flight (a run or a
// session) stays: it will be touched again soon.
func (c *threadCache) release(e *threadEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e.refs--
	over := len(c.entries) - c.max
	for el := c.lru.Back(); el != nil && over > 0; {
		prev := el.Prev()
		if o := el.Value.(*threadEntry); o.refs == 0 {
			if p := o.proj.Load(); p == nil || !p.Live() {
				c.lru.Remove(el)
				delete(c.entries, o.id)
				over--
			}
		}
		el = prev
	}
}

// published is the sequence a thread's cached projection shows (0: none
// cached), read without holding the entry.
func (c *threadCache) published(id string) uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.entries[id]; e != nil {
		if p := e.proj.Load(); p != nil {
			return p.Sequence
		}
	}
	return 0
}

// follow runs fn on a thread's entry, with its writer lock held, if the
// thread is cached; a thread that is not is left to load when read.
func (c *threadCache) follow(id string, fn func(*threadEntry) error) error {
	c.mu.Lock()
	e := c.entries[id]
	if e != nil {
		e.refs++
	}
	c.mu.Unlock()
	if e == nil {
		return nil
	}
	defer c.release(e)
	e.mu.Lock()
	defer e.mu.Unlock()
	return fn(e)
}

// wakeAll wakes every thread's followers (the host is closing).
func (c *threadCache) wakeAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range c.entries {
		e.nmu.Lock()
		close(e.changed)
		e.changed = make(chan struct{})
		e.nmu.Unlock()
	}
}

// view returns a thread's published projection, loading it if needed. The
// caller must not change it.
func (h *Host) view(id string) (*domain.Thread, error) {
	e := h.cache.acquire(id)
	defer h.cache.release(e)
	t, err := h.loaded(e)
	if err != nil {
		return nil, err
	}
	if !t.Exists() {
		return nil, fmt.Errorf("%w: thread %q", domain.ErrNotFound, id)
	}
	return t, nil
}

// loaded returns an entry's projection, loading it first if needed (with
// the writer lock, so that no commit runs meanwhile).
func (h *Host) loaded(e *threadEntry) (*domain.Thread, error) {
	if t := e.proj.Load(); t != nil {
		return t, nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return h.loadLocked(e)
}

// loadLocked loads an entry's projection if it is not loaded; e.mu is held.
func (h *Host) loadLocked(e *threadEntry) (*domain.Thread, error) {
	if t := e.proj.Load(); t != nil {
		return t, nil
	}
	t, snapSize, err := h.loadThread(e.id)
	if err != nil {
		return nil, err
	}
	e.snapshotSize = snapSize
	e.sinceSnapshot = 0
	if snapSize == 0 && t.Exists() {
		e.sinceSnapshot = h.cfg.SnapshotBytes // no snapshot to trust: write one at the next commit
	}
	e.publish(t)
	return t, nil
}

// projectionSchema is the version of a snapshot's body: the domain.Thread
// JSON form. A change to the projection that an older snapshot would not
// hold (a new field derived from events) moves it, and older snapshots are
// rebuilt from events. 3: runs leave the projection (Earlier). 4: the
// thread's title. 5: the usage ledger, and whose rate limits.
const projectionSchema = 5

// loadThread builds a thread's projection from its snapshot and the events
// after it, or from all its events when it has no snapshot it can trust.
// A thread with no events is the zero Thread. It also returns the
// snapshot's size (0: none used).
func (h *Host) loadThread(id string) (*domain.Thread, int, error) {
	parts := partsWrite
	if h.cfg.ReadOnly {
		parts = partsKeep
	}
	return loadThread(h.store, h.log, id, parts)
}

// loadParts is what a load does with the parts the events it applies make
// leave the projection.
type loadParts int

const (
	// partsWrite writes them (again: a rebuild leaves the parts its
	// events' commits wrote; a log from before parts were kept, for the
	// first time): a host that writes.
	partsWrite loadParts = iota
	// partsKeep keeps them in the projection (nothing leaves it): a host
	// that only reads, whose page reads find only the parts stored.
	partsKeep
	// partsDrop drops them, leaving the projection a host that writes
	// would load (ReadThread): the commits of its events stored them.
	partsDrop
)

// loadThread is Host.loadThread on a store, saying on log why a snapshot
// was not used; parts says what becomes of the parts that leave the
// projection as it loads.
func loadThread(store eventlog.Log, log hclog.Logger, id string, parts loadParts) (*domain.Thread, int, error) {
	t, after, size, err := trustedSnapshot(store, log, id)
	if err != nil {
		return nil, 0, fmt.Errorf("load thread %s: %w", id, err)
	}
	if parts == partsKeep {
		t.KeepAll()
	}
	for {
		recs, err := store.ThreadAfter(id, after, 0, 4096)
		if err != nil {
			return nil, 0, fmt.Errorf("load thread %s: %w", id, err)
		}
		if len(recs) == 0 {
			return t, size, nil
		}
		for _, r := range recs {
			if err := apply(t, r); err != nil {
				return nil, 0, fmt.Errorf("load thread %s: %w", id, err)
			}
		}
		switch parts {
		case partsWrite:
			if err := putParts(store, id, t); err != nil {
				return nil, 0, fmt.Errorf("load thread %s: %w", id, err)
			}
		case partsDrop:
			t.TakeArchived()
		}
		after = recs[len(recs)-1].Sequence
	}
}

// putParts writes the parts that left t since the last call.
func putParts(store eventlog.Log, id string, t *domain.Thread) error {
	parts, err := encodeParts(t.TakeArchived())
	if err != nil || len(parts) == 0 {
		return err
	}
	return store.PutArchive(id, parts)
}

// trustedSnapshot is a thread's snapshot, checked: the envelope's checksum,
// the schema, the body, the thread it names, and that its watermark is one
// of the thread's events. A snapshot that fails any check is not used: the
// thread is rebuilt from its events, and the log says why. A store whose
// files are damaged is the error: its events cannot be trusted either.
func trustedSnapshot(store eventlog.Log, log hclog.Logger, id string) (*domain.Thread, uint64, int, error) {
	sn, found, err := store.ThreadSnapshot(id)
	if !found && err == nil {
		return &domain.Thread{}, 0, 0, nil
	}
	if err == nil && sn.Schema != projectionSchema {
		err = fmt.Errorf("schema %d, this host writes %d", sn.Schema, projectionSchema)
	}
	t := &domain.Thread{}
	if err == nil {
		if err = json.Unmarshal(sn.Body, t); err == nil && t.ID != id {
			err = fmt.Errorf("it holds thread %q", t.ID)
		}
	}
	if err == nil {
		var ok bool
		if ok, err = store.HasThreadEvent(id, sn.Seq); err == nil && !ok {
			err = fmt.Errorf("its watermark %d is not one of the thread's events", sn.Seq)
		}
	}
	if errors.Is(err, eventlog.ErrDamaged) {
		return nil, 0, 0, err
	}
	if err != nil {
		log.Warn("a thread's snapshot cannot be trusted; rebuilding the thread from its events", "thread", id, "error", err)
		return &domain.Thread{}, 0, 0, nil
	}
	t.Sequence = sn.Seq
	return t, sn.Seq, len(sn.Body), nil
}

// apply decodes a stored event and applies it to a thread.
func apply(t *domain.Thread, r eventlog.Record) error {
	p, err := domain.DecodePayload(r.Type, r.Data)
	if err != nil {
		return fmt.Errorf("event %d: %w", r.Sequence, err)
	}
	if _, create := p.(domain.ThreadCreated); !create && !t.Exists() {
		return fmt.Errorf("event %d (%s) is for thread %s, which was never created", r.Sequence, r.Type, r.ThreadID)
	}
	domain.Evolve(t, domain.Event{Sequence: r.Sequence, ThreadID: r.ThreadID, At: r.At, Payload: p})
	return nil
}

// encodeHead is a thread's head: its summary s, with its usage ledger
// and rate limits beside it (usage.go).
func encodeHead(s domain.ThreadSummary, t *domain.Thread) []byte {
	b, _ := json.Marshal(head{ThreadSummary: s, Ledger: t.Ledger, RateLimits: t.RateLimits}) // a head always encodes
	return b
}

func decodeHead(b []byte) (domain.ThreadSummary, error) {
	var s domain.ThreadSummary
	if err := json.Unmarshal(b, &s); err != nil {
		return s, err
	}
	if s.ID == "" {
		return s, errors.New("no thread id")
	}
	return s, nil
}
