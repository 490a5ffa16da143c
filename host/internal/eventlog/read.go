package eventlog

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// read runs f unless the store is closed. A store opened read-only may be
// in use by another process, whose compactions remove the files this
// store's view was opened on: a read that needed a file since removed is
// run again on the store as it is now (reopened), up to goneRetries times,
// before the missing file counts as damage. f must begin afresh each time.
func (s *Store) read(f func() error) error {
	for try := 0; ; try++ {
		gen, err := s.readOnce(f)
		if s.readOnly && try < goneRetries && removed(err) && s.reopen(gen) == nil {
			continue
		}
		return s.damaged(err)
	}
}

// goneRetries bounds how often a read-only store reopens for one read
// because a file it needed was removed. Measured with four writers in one
// store committing 2.6 MB/s (compacting all the time), a reader opening
// it read-only and reading every event over and over: without reopening,
// one open in 190 failed on a removed table; with it, none of 378 did.
const goneRetries = 4

// readOnce runs f once, on the db of generation gen.
func (s *Store) readOnce(f func() error) (gen int, err error) {
	s.life.RLock()
	defer s.life.RUnlock()
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return s.gen, ErrClosed
	}
	return s.gen, f()
}

// reopen opens a read-only store again, as it is now, unless another read
// has done so since generation gen.
func (s *Store) reopen(gen int) error {
	s.life.Lock()
	defer s.life.Unlock()
	if s.gen != gen {
		return nil
	}
	old := s.db
	s.db = nil
	if err := s.openDB(s.dir, s.opts); err != nil {
		s.db = old
		return err
	}
	old.Close()
	s.gen++
	s.dmu.Lock()
	s.damage, s.corruptFile = nil, "" // what the old view met, if anything: the new one says its own
	s.dmu.Unlock()
	s.log.Debug("reopened the read-only event store: a file it read was removed by the process that writes it", "dir", s.dir)
	return nil
}

// scan calls f for every key with a prefix, in order.
func (s *Store) scan(prefix []byte, f func(k, v []byte) error) error {
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: prefix, UpperBound: upperBound(prefix)})
	if err != nil { // unreachable: Pebble v2 NewIter always returns a nil error
		return err
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		if err := f(it.Key(), it.Value()); err != nil {
			return err
		}
	}
	return it.Error()
}

// Last is the last published sequence and a channel closed at the next
// publication (or at Close).
func (s *Store) Last() (uint64, <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last, s.changed
}

// Receipt returns a stored receipt.
func (s *Store) Receipt(commandID string) (b []byte, found bool, err error) {
	err = s.read(func() error {
		b, found, err = s.get(receiptKey(commandID))
		if err != nil {
			return fmt.Errorf("read receipt %s: %w", commandID, err)
		}
		return nil
	})
	return b, found, err
}

func (s *Store) get(k []byte) ([]byte, bool, error) {
	v, closer, err := s.db.Get(k)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	defer closer.Close()
	return append([]byte(nil), v...), true, nil
}

// After returns up to limit published events with a sequence greater than
// after, in order (limit <= 0: all).
func (s *Store) After(after uint64, limit int) (out []Record, err error) {
	last, _ := s.Last()
	if after >= last {
		return nil, nil
	}
	err = s.read(func() error {
		out, err = s.after(after, last, limit)
		return err
	})
	return out, err
}

func (s *Store) after(after, last uint64, limit int) ([]Record, error) {
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: eventKey(after + 1), UpperBound: eventKey(last + 1)})
	if err != nil { // unreachable: Pebble v2 NewIter always returns a nil error
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

// ThreadAfter returns up to limit of a thread's events with a sequence
// greater than after and at most upTo, in order (limit <= 0: all). It reads
// the thread's index, not the global log. With upTo 0 it reads up to the
// last published sequence; a caller that passes upTo knows the thread's
// events up to it are committed (its projection shows them).
func (s *Store) ThreadAfter(threadID string, after, upTo uint64, limit int) (out []Record, err error) {
	if upTo == 0 {
		upTo, _ = s.Last()
	}
	if after >= upTo {
		return nil, nil
	}
	err = s.read(func() error {
		out, err = s.threadAfter(threadID, after, upTo, limit)
		return err
	})
	return out, err
}

func (s *Store) threadAfter(threadID string, after, upTo uint64, limit int) ([]Record, error) {
	idx, err := s.db.NewIter(&pebble.IterOptions{LowerBound: threadKey(threadID, after+1), UpperBound: threadKey(threadID, upTo+1)})
	if err != nil { // unreachable: Pebble v2 NewIter always returns a nil error
		return nil, err
	}
	defer idx.Close()
	var evs *pebble.Iterator // the global log, for index entries that hold no event
	defer func() {
		if evs != nil {
			evs.Close()
		}
	}()
	var out []Record
	for ok := idx.First(); ok; ok = idx.Next() {
		seq, err := parseThreadKey(idx.Key())
		if err != nil {
			return nil, err
		}
		var r Record
		if v := idx.Value(); len(v) > 0 {
			r, err = parseIndexValue(threadID, seq, v)
		} else {
			if evs == nil {
				// NewIter's error is unreachable, as above.
				if evs, err = s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixEvent}, UpperBound: []byte{prefixEvent + 1}}); err != nil {
					return nil, err
				}
			}
			r, err = s.globalEvent(evs, threadID, seq)
		}
		if err != nil {
			return nil, err
		}
		out = append(out, r)
		if limit > 0 && len(out) == limit {
			break
		}
	}
	return out, idx.Error()
}

// globalEvent reads an event the thread index names from the global log.
func (s *Store) globalEvent(evs *pebble.Iterator, threadID string, seq uint64) (Record, error) {
	k := eventKey(seq)
	if !evs.SeekGE(k) || string(evs.Key()) != string(k) {
		if err := evs.Error(); err != nil {
			return Record{}, err
		}
		return Record{}, fmt.Errorf("thread %s index names event %d, which is not in the log", threadID, seq)
	}
	r, err := decodeRecord(k, evs.Value())
	if err != nil {
		return Record{}, err
	}
	if r.ThreadID != threadID {
		return Record{}, fmt.Errorf("thread %s index names event %d, which is thread %s's", threadID, seq, r.ThreadID)
	}
	return r, nil
}

// HasThreadEvent says whether event seq is the thread's.
func (s *Store) HasThreadEvent(threadID string, seq uint64) (found bool, err error) {
	err = s.read(func() error {
		_, found, err = s.get(threadKey(threadID, seq))
		return err
	})
	return found, err
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
