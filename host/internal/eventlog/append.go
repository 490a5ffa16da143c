package eventlog

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

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

// Batch is what one commit writes, atomically: its events, the effects
// they call for, the outbox entries it settles, its receipt, and the state
// of its thread after it.
type Batch struct {
	Events  []Pending
	Effects []Effect
	// Done are outbox entries this batch removes.
	Done      []EffectRef
	CommandID string
	// Receipt builds the receipt once sequences are known: it is given
	// the batch's last sequence.
	Receipt func(last uint64) []byte

	// ThreadID names the thread whose state follows: Head (written when
	// not nil; given the batch's last sequence), Live (Keep, Set or Clear
	// the thread's live marker) and Snapshot (written when not nil; its
	// watermark is the batch's last sequence).
	ThreadID string
	Head     func(last uint64) []byte
	Live     LiveChange
	Snapshot *Snapshot
	// Archive are the parts the batch's events made leave the thread's
	// projection (see archive.go).
	Archive []ArchivePart

	// Deliveries are the notifications the batch's events call for;
	// DeliveryUpdates rewrite stored ones, DeliveriesDone remove them,
	// TargetStates write what their targets were delivered (delivery.go).
	Deliveries      []Delivery
	DeliveryUpdates []StoredDelivery
	DeliveriesDone  []DeliveryRef
	TargetStates    []TargetState

	// Meta are store metadata values written in the batch (a replica's
	// watermark beside the events it applied: see the jetstreamlog
	// package), so that they are never out of step with them.
	Meta map[string][]byte

	// OnCommit, when set, is called once the batch is durable and before
	// any reader can see its events, with the batch's last sequence. It
	// runs on the sequencer: it must be quick and must not call the store.
	OnCommit func(last uint64)
}

// LiveChange says what a batch does to its thread's live marker.
type LiveChange int

// Live marker changes.
const (
	LiveKeep LiveChange = iota
	LiveSet
	LiveClear
)

// appendReq is one Append waiting for the sequencer.
type appendReq struct {
	b     Batch
	tails [][]byte // each event's record encoded without its sequence
	recs  []Record
	ids   []string
	err   error
	done  chan struct{}
	// taken is set by the first of: the sequencer, which runs its commit
	// hook once the write is durable; and its Append, which gives up on a
	// store whose Pebble gave up. A hook never runs for an append that
	// has returned.
	taken atomic.Bool
}

// Append commits a batch with one synced write (shared with the batches of
// other writers waiting at the same time) and returns the stored records
// and the ids of the new outbox entries. Effects need at least one event
// in the batch: an effect id names the event that caused it.
func (s *Store) Append(in Batch) ([]Record, []string, error) {
	if len(in.Effects) > 0 && len(in.Events) == 0 {
		return nil, nil, errors.New("append: effects without an event")
	}
	if in.Snapshot != nil && len(in.Events) == 0 {
		return nil, nil, errors.New("append: a snapshot without an event to mark it")
	}
	for _, d := range in.Done {
		if _, _, err := parseEffectID(d.ID); err != nil {
			return nil, nil, fmt.Errorf("append: %w", err)
		}
	}
	if err := checkDeliveries(in); err != nil {
		return nil, nil, fmt.Errorf("append: %w", err)
	}
	req := &appendReq{b: in, tails: make([][]byte, len(in.Events)), done: make(chan struct{})}
	for i, e := range in.Events {
		tail, err := encodeTail(e)
		if err != nil {
			return nil, nil, fmt.Errorf("append event %s: %w", e.Type, err)
		}
		req.tails[i] = tail
	}
	s.qmu.Lock()
	if s.stopped {
		s.qmu.Unlock()
		return nil, nil, ErrClosed
	}
	s.queue = append(s.queue, req)
	s.qmu.Unlock()
	s.signal()
	select {
	case <-req.done:
	case <-s.fails.gaveUp:
		// Pebble gave up: the sequencer may be stopped inside it for
		// good. Unless it has this append in hand already (its hook
		// running), the append fails here.
		if req.taken.CompareAndSwap(false, true) {
			return nil, nil, s.Failure()
		}
		<-req.done
	}
	return req.recs, req.ids, req.err
}

func (s *Store) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// maxGroup bounds how many appends share one write.
const maxGroup = 512

// sequence is the sequencer: it takes every append waiting, assigns their
// sequences in arrival order, commits them in one synced batch, runs their
// commit hooks, publishes the new last sequence, and answers them.
func (s *Store) sequence() {
	defer close(s.done)
	for {
		<-s.wake
		for {
			s.qmu.Lock()
			group := s.queue
			if len(group) > maxGroup {
				group = group[:maxGroup]
			}
			s.queue = s.queue[len(group):]
			stopped := s.stopped
			s.qmu.Unlock()
			if len(group) == 0 {
				if stopped {
					return
				}
				break
			}
			s.commit(group)
		}
	}
}

// commit writes a group in one synced batch. Its errors cannot happen with
// Pebble v2 as this store uses it: Set and Delete on a batch from NewBatch
// (not indexed) always succeed, and Commit returns an error only for
// options the store does not set (read-only, no WAL, range keys), while a
// write that fails in the commit pipeline is Pebble giving up (its Fatalf,
// which fails the store: fail.go). They are checked so that a Pebble that
// does return one fails the group and, for Commit, fails the store rather
// than leave it half-written; TestFailedStoreWritesNothing checks the
// failed state.
func (s *Store) commit(group []*appendReq) {
	err := s.writable()
	seq := s.next
	if err == nil {
		b := s.db.NewBatch()
		for _, r := range group {
			if err = s.build(b, r, &seq); err != nil {
				break
			}
		}
		if err == nil {
			if err = b.Commit(s.writeOpts); err != nil {
				err = fmt.Errorf("commit events: %w", err)
				s.fails.set(err, false)
			}
		}
		b.Close()
	}
	if err != nil {
		// Nothing of the group was written: its sequences are given again.
		for _, r := range group {
			r.recs, r.ids, r.err = nil, nil, err
			close(r.done)
		}
		return
	}
	for _, r := range group {
		if !r.taken.CompareAndSwap(false, true) {
			continue // its Append returned: the store failed for good (it is durable all the same)
		}
		if r.b.OnCommit != nil && len(r.recs) > 0 {
			r.b.OnCommit(r.recs[len(r.recs)-1].Sequence)
		}
	}
	s.next = seq
	// Durable now: the seal may say so (see seal.go). A seal that cannot
	// be written fails no commit; the next Open reports it.
	if err := s.sealw.write(seq); err != nil {
		s.log.Warn("the event store's seal could not be written", "error", err)
	}
	s.mu.Lock()
	if seq != s.last && !s.closed { // closed: by a Close that did not wait, Pebble having given up
		s.last = seq
		close(s.changed)
		s.changed = make(chan struct{})
	}
	s.mu.Unlock()
	for _, r := range group {
		close(r.done)
	}
}

// build adds an append to the batch, advancing *seq past its events. Its
// Set and Delete errors cannot happen (see commit).
func (s *Store) build(b *pebble.Batch, r *appendReq, seq *uint64) error {
	in := r.b
	r.recs = make([]Record, len(in.Events))
	for i, e := range in.Events {
		*seq++
		r.recs[i] = Record{Sequence: *seq, ThreadID: e.ThreadID, Type: e.Type, At: e.At.UTC(), Data: e.Data}
		if err := b.Set(eventKey(*seq), recordValue(*seq, r.tails[i]), nil); err != nil {
			return err
		}
		if err := b.Set(threadKey(e.ThreadID, *seq), indexValue(e.Type, r.recs[i].At, e.Data), nil); err != nil {
			return err
		}
	}
	last := *seq
	r.ids = make([]string, len(in.Effects))
	for i, e := range in.Effects {
		if err := b.Set(outboxKey(e.ThreadID, last, uint32(i)), e.Data, nil); err != nil {
			return err
		}
		r.ids[i] = effectID(last, uint32(i))
	}
	for _, d := range in.Done {
		es, ei, _ := parseEffectID(d.ID) // checked by Append
		if err := b.Delete(outboxKey(d.ThreadID, es, ei), nil); err != nil {
			return err
		}
	}
	for name, v := range in.Meta {
		if err := b.Set(metaKey(name), v, nil); err != nil {
			return err
		}
	}
	if in.CommandID != "" {
		if err := b.Set(receiptKey(in.CommandID), in.Receipt(last), nil); err != nil {
			return err
		}
	}
	if err := buildDeliveries(b, in, r.recs); err != nil {
		return err
	}
	return s.buildThreadState(b, in, last)
}

// encodeTail is an event's record in JSON without its sequence: the
// sequencer puts that in front (recordValue), so that the encoding is
// done by the writer, not the sequencer. It is written by hand, as
// encoding/json writes Record, because it is on every event's path: the
// data is JSON already (Append's callers encode it), and is checked and
// compacted here in one pass.
func encodeTail(e Pending) ([]byte, error) {
	if y := e.At.UTC().Year(); y < 0 || y > 9999 {
		return nil, fmt.Errorf("time %v is outside the years 0 to 9999 that RFC 3339 can write", e.At)
	}
	thread, _ := json.Marshal(e.ThreadID) // a string always encodes
	typ, _ := json.Marshal(e.Type)
	buf := bytes.NewBuffer(make([]byte, 0, len(thread)+len(typ)+len(e.Data)+64))
	buf.WriteString(`{"threadId":`)
	buf.Write(thread)
	buf.WriteString(`,"type":`)
	buf.Write(typ)
	buf.WriteString(`,"at":"`)
	buf.Write(e.At.UTC().AppendFormat(nil, time.RFC3339Nano))
	buf.WriteString(`","data":`)
	if err := json.Compact(buf, e.Data); err != nil {
		return nil, fmt.Errorf("data is not JSON: %w", err)
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

// recordValue is {"sequence":N, followed by the tail after its '{'.
func recordValue(seq uint64, tail []byte) []byte {
	v := make([]byte, 0, len(tail)+32)
	v = append(v, `{"sequence":`...)
	v = strconv.AppendUint(v, seq, 10)
	v = append(v, ',')
	return append(v, tail[1:]...)
}
