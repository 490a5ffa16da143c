// Package eventlog is Baton's append-only event log in Pebble. Each command
// commits its events and its receipt in one synced batch; every event gets a
// global sequence, strictly increasing with no gaps. Readers read after a
// sequence and wait for more.
package eventlog

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/hashicorp/go-hclog"
)

// FormatVersion is the Pebble on-disk format, pinned: format upgrades are
// one-way, so a library upgrade must not move it silently.
const FormatVersion = pebble.FormatValueSeparation

// Record is a stored event.
type Record struct {
	Sequence uint64          `json:"sequence"`
	ThreadID string          `json:"threadId"`
	Type     string          `json:"type"`
	At       time.Time       `json:"at"`
	Data     json.RawMessage `json:"data"`
}

// Receipt is a stored command receipt; the store keeps it opaque.
type Receipt struct {
	CommandID string
	Data      []byte
}

// Store is the log. It is safe for concurrent use; appends are serialized.
type Store struct {
	db *pebble.DB

	// life guards db against Close: readers hold it shared, Close
	// exclusively, so no read runs on a closed db.
	life sync.RWMutex

	mu      sync.Mutex // serializes appends; guards last, changed, closed
	last    uint64
	changed chan struct{}
	closed  bool
}

// read runs f unless the store is closed.
func (s *Store) read(f func() error) error {
	s.life.RLock()
	defer s.life.RUnlock()
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return ErrClosed
	}
	return f()
}

// Open opens (or creates) the log in dir.
func Open(dir string, log hclog.Logger) (*Store, error) {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	db, err := pebble.Open(dir, &pebble.Options{
		FormatMajorVersion: FormatVersion,
		CacheSize:          16 << 20,
		MemTableSize:       8 << 20,
		MaxOpenFiles:       256,
		Logger:             pebbleLogger{log.Named("pebble")},
	})
	if err != nil {
		return nil, fmt.Errorf("open event log %s: %w", dir, err)
	}
	s := &Store{db: db, changed: make(chan struct{})}
	last, err := s.lastSequence()
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("open event log %s: %w", dir, err)
	}
	s.last = last
	return s, nil
}

func (s *Store) lastSequence() (uint64, error) {
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixEvent}, UpperBound: []byte{prefixEvent + 1}})
	if err != nil {
		return 0, err
	}
	defer it.Close()
	if !it.Last() {
		return 0, it.Error()
	}
	return parseEventKey(it.Key())
}

// Close closes the store; waiting readers are woken.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	close(s.changed)
	s.mu.Unlock()
	s.life.Lock()
	defer s.life.Unlock()
	return s.db.Close()
}

// ErrClosed is returned after Close.
var ErrClosed = errors.New("event log closed")

// Pending is an event to append; the store assigns its sequence.
type Pending struct {
	ThreadID string
	Type     string
	At       time.Time
	Data     json.RawMessage
}

// Effect is an outbox entry to write with a batch's events.
type Effect struct {
	ThreadID string
	Data     []byte
}

// StoredEffect is a pending outbox entry.
type StoredEffect struct {
	ID       string
	ThreadID string
	Data     []byte
}

// EffectRef names an outbox entry.
type EffectRef struct {
	ThreadID string
	ID       string
}

// Batch is what one command commits, atomically: its events, the effects
// they call for, the outbox entries it settles, and its receipt.
type Batch struct {
	Events  []Pending
	Effects []Effect
	// Done are outbox entries this batch removes.
	Done      []EffectRef
	CommandID string
	// Receipt builds the receipt once sequences are known: it is given
	// the batch's last sequence.
	Receipt func(last uint64) ([]byte, error)
}

// Append commits a batch with one synced write and returns the stored
// records and the ids of the new outbox entries. Effects need at least
// one event in the batch: an effect id names the event that caused it.
func (s *Store) Append(in Batch) ([]Record, []string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, nil, ErrClosed
	}
	if len(in.Effects) > 0 && len(in.Events) == 0 {
		return nil, nil, errors.New("append: effects without an event")
	}
	b := s.db.NewBatch()
	defer b.Close()
	recs := make([]Record, len(in.Events))
	seq := s.last
	for i, e := range in.Events {
		seq++
		recs[i] = Record{Sequence: seq, ThreadID: e.ThreadID, Type: e.Type, At: e.At.UTC(), Data: e.Data}
		v, err := json.Marshal(recs[i])
		if err != nil {
			return nil, nil, fmt.Errorf("append event %s: %w", e.Type, err)
		}
		if err := b.Set(eventKey(seq), v, nil); err != nil {
			return nil, nil, err
		}
		if err := b.Set(threadKey(e.ThreadID, seq), nil, nil); err != nil {
			return nil, nil, err
		}
	}
	ids := make([]string, len(in.Effects))
	for i, e := range in.Effects {
		if err := b.Set(outboxKey(e.ThreadID, seq, uint32(i)), e.Data, nil); err != nil {
			return nil, nil, err
		}
		ids[i] = effectID(seq, uint32(i))
	}
	for _, d := range in.Done {
		es, ei, err := parseEffectID(d.ID)
		if err != nil {
			return nil, nil, fmt.Errorf("append: %w", err)
		}
		if err := b.Delete(outboxKey(d.ThreadID, es, ei), nil); err != nil {
			return nil, nil, err
		}
	}
	if in.CommandID != "" {
		v, err := in.Receipt(seq)
		if err != nil {
			return nil, nil, fmt.Errorf("append receipt %s: %w", in.CommandID, err)
		}
		if err := b.Set(receiptKey(in.CommandID), v, nil); err != nil {
			return nil, nil, err
		}
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return nil, nil, fmt.Errorf("commit events: %w", err)
	}
	if seq != s.last {
		s.last = seq
		close(s.changed)
		s.changed = make(chan struct{})
	}
	return recs, ids, nil
}

// EffectDone removes a performed effect from the outbox (synced: an entry
// left behind would be reported as not performed by the next host).
func (s *Store) EffectDone(ref EffectRef) error {
	seq, i, err := parseEffectID(ref.ID)
	if err != nil {
		return err
	}
	return s.read(func() error {
		if err := s.db.Delete(outboxKey(ref.ThreadID, seq, i), pebble.Sync); err != nil {
			return fmt.Errorf("remove effect %s of thread %s: %w", ref.ID, ref.ThreadID, err)
		}
		return nil
	})
}

// Outbox returns every pending effect, by thread and in decided order.
func (s *Store) Outbox() (out []StoredEffect, err error) {
	err = s.read(func() error {
		it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixOutbox}, UpperBound: []byte{prefixOutbox + 1}})
		if err != nil {
			return err
		}
		defer it.Close()
		for ok := it.First(); ok; ok = it.Next() {
			thread, id, err := parseOutboxKey(it.Key())
			if err != nil {
				return err
			}
			out = append(out, StoredEffect{ID: id, ThreadID: thread, Data: append([]byte(nil), it.Value()...)})
		}
		return it.Error()
	})
	return out, err
}

// Last is the last committed sequence and a channel closed at the next
// commit (or at Close).
func (s *Store) Last() (uint64, <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last, s.changed
}

// Receipt returns a stored receipt.
func (s *Store) Receipt(commandID string) (b []byte, found bool, err error) {
	err = s.read(func() error {
		v, closer, err := s.db.Get(receiptKey(commandID))
		if errors.Is(err, pebble.ErrNotFound) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read receipt %s: %w", commandID, err)
		}
		defer closer.Close()
		b, found = append([]byte(nil), v...), true
		return nil
	})
	return b, found, err
}

// After returns up to limit events with a sequence greater than after, in
// order (limit <= 0: all).
func (s *Store) After(after uint64, limit int) (out []Record, err error) {
	err = s.read(func() error {
		out, err = s.after(after, limit)
		return err
	})
	return out, err
}

func (s *Store) after(after uint64, limit int) ([]Record, error) {
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: eventKey(after + 1), UpperBound: []byte{prefixEvent + 1}})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	var out []Record
	for ok := it.First(); ok; ok = it.Next() {
		r, err := decodeRecord(it.Key(), it.Value())
		if err != nil {
			return nil, err
		}
		out = append(out, r)
		if limit > 0 && len(out) == limit {
			break
		}
	}
	return out, it.Error()
}

// ThreadAfter returns a thread's events after a sequence, in order.
func (s *Store) ThreadAfter(threadID string, after uint64) (out []Record, err error) {
	err = s.read(func() error {
		out, err = s.threadAfter(threadID, after)
		return err
	})
	return out, err
}

func (s *Store) threadAfter(threadID string, after uint64) ([]Record, error) {
	p := threadPrefix(threadID)
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: threadKey(threadID, after+1), UpperBound: upperBound(p)})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	var out []Record
	for ok := it.First(); ok; ok = it.Next() {
		seq, err := parseThreadKey(it.Key())
		if err != nil {
			return nil, err
		}
		v, closer, err := s.db.Get(eventKey(seq))
		if err != nil {
			return nil, fmt.Errorf("thread %s index names event %d: %w", threadID, seq, err)
		}
		r, err := decodeRecord(eventKey(seq), v)
		closer.Close()
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, it.Error()
}

func decodeRecord(k, v []byte) (Record, error) {
	seq, err := parseEventKey(k)
	if err != nil {
		return Record{}, err
	}
	var r Record
	if err := json.Unmarshal(v, &r); err != nil {
		return Record{}, fmt.Errorf("event %d is corrupt: %w", seq, err)
	}
	if r.Sequence != seq {
		return Record{}, fmt.Errorf("event %d is stored under sequence %d", r.Sequence, seq)
	}
	return r, nil
}

type pebbleLogger struct{ l hclog.Logger }

func (p pebbleLogger) Infof(format string, args ...any)  { p.l.Debug(fmt.Sprintf(format, args...)) }
func (p pebbleLogger) Errorf(format string, args ...any) { p.l.Error(fmt.Sprintf(format, args...)) }
func (p pebbleLogger) Fatalf(format string, args ...any) {
	p.l.Error(fmt.Sprintf(format, args...))
	panic(fmt.Sprintf(format, args...))
}
