package eventlog

import (
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// buildThreadState adds a thread's head, live marker, snapshot and parts to the
// batch. Its Set and Delete errors cannot happen (see commit).
func (s *Store) buildThreadState(b *pebble.Batch, in Batch, last uint64) error {
	if in.Head != nil {
		if err := b.Set(threadStateKey(prefixHead, in.ThreadID), in.Head(last), nil); err != nil {
			return err
		}
	}
	switch in.Live {
	case LiveSet:
		if err := b.Set(threadStateKey(prefixLive, in.ThreadID), nil, nil); err != nil {
			return err
		}
	case LiveClear:
		if err := b.Delete(threadStateKey(prefixLive, in.ThreadID), nil); err != nil {
			return err
		}
	}
	if in.Snapshot != nil {
		sn := *in.Snapshot
		sn.Seq = last
		if err := b.Set(threadStateKey(prefixSnapshot, in.ThreadID), encodeSnapshot(sn), nil); err != nil {
			return err
		}
	}
	return buildArchive(b, in.ThreadID, in.Archive)
}

// ThreadSnapshot returns a thread's snapshot. A snapshot that cannot be
// trusted is an error wrapping ErrCorruptSnapshot.
func (s *Store) ThreadSnapshot(threadID string) (sn Snapshot, found bool, err error) {
	err = s.read(func() error {
		var v []byte
		if v, found, err = s.get(threadStateKey(prefixSnapshot, threadID)); err != nil || !found {
			return err
		}
		sn, err = decodeSnapshot(v)
		return err
	})
	if err != nil {
		return Snapshot{}, false, fmt.Errorf("snapshot of thread %s: %w", threadID, err)
	}
	return sn, found, nil
}

// Head is a thread's head as a list shows it.
type Head struct {
	ThreadID string
	Data     []byte
}

// Heads returns up to limit thread heads after a thread id, in id order
// (limit <= 0: all).
func (s *Store) Heads(after string, limit int) (out []Head, err error) {
	err = s.read(func() error {
		out = nil // a read may be run again (see read)
		lower := threadStateKey(prefixHead, after)
		if after != "" {
			lower = append(lower, 0) // the smallest key after it
		}
		it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: []byte{prefixHead + 1}})
		if err != nil { // unreachable: Pebble v2 NewIter always returns a nil error
			return err
		}
		defer it.Close()
		for ok := it.First(); ok; ok = it.Next() {
			out = append(out, Head{ThreadID: string(it.Key()[1:]), Data: append([]byte(nil), it.Value()...)})
			if limit > 0 && len(out) == limit {
				break
			}
		}
		return it.Error()
	})
	return out, err
}

// Head returns one thread's head.
func (s *Store) Head(threadID string) (b []byte, found bool, err error) {
	err = s.read(func() error {
		b, found, err = s.get(threadStateKey(prefixHead, threadID))
		return err
	})
	return b, found, err
}

// LiveThreads returns the threads marked live, in id order.
func (s *Store) LiveThreads() (out []string, err error) {
	err = s.read(func() error {
		out = nil // a read may be run again (see read)
		return s.scan([]byte{prefixLive}, func(k, _ []byte) error {
			out = append(out, string(k[1:]))
			return nil
		})
	})
	return out, err
}

// PutThreadState writes a thread's head, live marker and snapshot (whose
// Seq must be one of the thread's events) without events: for indexing a
// log written before they were kept.
func (s *Store) PutThreadState(threadID string, head []byte, live bool, sn *Snapshot) error {
	return s.read(func() error {
		b := s.db.NewBatch()
		defer b.Close()
		in := Batch{ThreadID: threadID, Head: func(uint64) []byte { return head }, Live: LiveClear}
		if live {
			in.Live = LiveSet
		}
		// Neither the batch's Set nor buildThreadState can fail (see commit).
		if err := s.buildThreadState(b, in, 0); err != nil {
			return err
		}
		if sn != nil {
			if err := b.Set(threadStateKey(prefixSnapshot, threadID), encodeSnapshot(*sn), nil); err != nil {
				return err
			}
		}
		return b.Commit(pebble.Sync)
	})
}
