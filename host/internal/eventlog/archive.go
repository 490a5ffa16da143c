package eventlog

import (
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// The parts that left a thread's projection. A thread's projection keeps
// what is live and its newest runs; what leaves it (an old run and what
// was its) is a part, numbered by the thread, filed under a run ordinal.
// A commit writes the parts its events made leave in its batch, so they
// are there exactly when the events are; a host that rebuilds a thread
// from its events writes the same parts again (PutArchive). The store
// does not read them: they are the projection's, as snapshots are, and a
// reader asks for them by ordinal.

// ArchivePart is one part as the store keeps it.
type ArchivePart struct {
	Ordinal uint32
	Part    uint32
	Data    []byte
}

// buildArchive adds a thread's parts to the batch. Its Set errors cannot
// happen (see commit).
func buildArchive(b *pebble.Batch, threadID string, parts []ArchivePart) error {
	for _, a := range parts {
		if err := b.Set(archiveKey(threadID, a.Ordinal, a.Part), a.Data, nil); err != nil {
			return err
		}
	}
	return nil
}

// PutArchive writes a thread's parts without events: those a rebuild of
// the thread from its events made leave, which its commits wrote before
// (the same again), or which a log written before parts were kept never
// had. Not synced: a part lost to a crash is written again by the next
// rebuild.
func (s *Store) PutArchive(threadID string, parts []ArchivePart) error {
	if err := s.writable(); err != nil {
		return err
	}
	return s.read(func() error {
		b := s.db.NewBatch()
		defer b.Close()
		// buildArchive's Set cannot fail (see commit).
		if err := buildArchive(b, threadID, parts); err != nil {
			return err
		}
		return b.Commit(pebble.NoSync)
	})
}

// Archive returns a thread's parts filed under ordinals from..to, in
// order (by ordinal, then part), but those numbered from below on: parts
// that left after the projection a reader holds.
func (s *Store) Archive(threadID string, from, to, below uint32) (out []ArchivePart, err error) {
	err = s.read(func() error {
		out = nil // a read may be run again (see read)
		it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: archiveKey(threadID, from, 0),
			UpperBound: upperBound(archiveKey(threadID, to, ^uint32(0)))})
		if err != nil { // unreachable: Pebble v2 NewIter always returns a nil error
			return err
		}
		defer it.Close()
		for ok := it.First(); ok; ok = it.Next() {
			a, keep, err := archivePart(it, below)
			if err != nil {
				return err
			}
			if keep {
				out = append(out, a)
			}
		}
		return it.Error()
	})
	if err != nil {
		return nil, fmt.Errorf("parts of thread %s: %w", threadID, err)
	}
	return out, nil
}

// ArchiveBefore returns up to limit of a thread's parts that come before
// the part (ordinal, part) in the order Archive reads, newest first (but
// those numbered from below on): a reader that walks back from a thread's
// newest part asks again from the last it was given.
func (s *Store) ArchiveBefore(threadID string, ordinal, part, below uint32, limit int) (out []ArchivePart, err error) {
	err = s.read(func() error {
		out = nil // a read may be run again (see read)
		it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: archivePrefix(threadID), UpperBound: archiveKey(threadID, ordinal, part)})
		if err != nil { // unreachable: Pebble v2 NewIter always returns a nil error
			return err
		}
		defer it.Close()
		for ok := it.Last(); ok && len(out) < limit; ok = it.Prev() {
			a, keep, err := archivePart(it, below)
			if err != nil {
				return err
			}
			if keep {
				out = append(out, a)
			}
		}
		return it.Error()
	})
	if err != nil {
		return nil, fmt.Errorf("parts of thread %s: %w", threadID, err)
	}
	return out, nil
}

// archivePart is the part at the iterator, and whether it is numbered
// below below.
func archivePart(it *pebble.Iterator, below uint32) (ArchivePart, bool, error) {
	o, p, err := parseArchiveKey(it.Key())
	if err != nil {
		return ArchivePart{}, false, err
	}
	if p >= below {
		return ArchivePart{}, false, nil
	}
	return ArchivePart{Ordinal: o, Part: p, Data: append([]byte(nil), it.Value()...)}, true, nil
}
