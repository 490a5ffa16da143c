// Package eventlog is Baton's append-only event log in Pebble. Each commit
// writes its events, its receipt, its outbox changes and its thread's head,
// live marker and snapshot in one synced batch; every event gets a global
// sequence, strictly increasing with no gaps. Commits from many writers at
// once share one synced write (group commit). Readers read after a
// sequence and wait for more, and never see a sequence before everything
// below it is durable.
//
// A store that fails (fail.go) writes nothing more, and says so once, on
// Failed: its owner stops, and the next open recovers.
//
// The code is split by job: this file holds the Store and its Close;
// open.go opening (Pebble's options, the format pinned, the seal checked);
// append.go the sequencer and its commits; read.go reads of events and
// receipts; outbox.go the effects waiting to be performed; threadstate.go
// a thread's head, live marker and snapshot; meta.go the store's own
// metadata; keys.go the key layout every one of them uses.
package eventlog

import (
	"context"
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

// Store is the log. It is safe for concurrent use. Appends go through one
// sequencer goroutine, which assigns sequences in the order appends arrive
// and commits all that are waiting with one synced write.
type Store struct {
	// fatalMu makes Fatal run once for the store: Pebble's goroutines may
	// meet the same failure at once (damage.go). It is the store's, not
	// the process's, so that a test's parked Fatal holds only its store.
	fatalMu sync.Mutex

	db       *pebble.DB
	lock     *pebble.Lock // the directory's, held from before the first open to Close
	log      hclog.Logger
	dir      string
	readOnly bool
	opts     *pebble.Options // what it was opened with
	gen      int             // how often a read-only store was reopened (read)
	seal     SealState       // what the seal said at Open
	sealw    *sealWriter     // nil: read-only, or not synced (Options.NoSync)
	// writeOpts is how commits are written: synced, but with
	// Options.NoSync.
	writeOpts *pebble.WriteOptions
	noSeal    bool   // Options.NoSync: no seal is read or written
	onClose   func() // after Close (Verify's scratch copy)

	dmu         sync.Mutex // guards damage, corruptFile
	damage      *DamageError
	corruptFile string // the last file Pebble reported damaged

	fails failure // why the store failed, if it has (fail.go)

	// life guards db against Close: readers hold it shared, Close
	// exclusively, so no read runs on a closed db.
	life sync.RWMutex

	qmu     sync.Mutex // guards queue, stopping
	queue   []*appendReq
	stopped bool          // no more appends are taken
	wake    chan struct{} // one token: the queue is not empty, or the store stops
	done    chan struct{} // closed when the sequencer has stopped

	mu      sync.Mutex // guards last, changed, closed
	last    uint64     // the last sequence published: durable, its commit hooks run
	changed chan struct{}
	closed  bool
	next    uint64
}

// Close commits what is queued, stops the sequencer and closes the store;
// waiting readers are woken. The memtable is not flushed: the next Open
// replays the write-ahead log (a few MB at most), where a flush at every
// close would leave a table behind each short-lived process and, in a
// store of one level, a compaction for the close to wait for (measured:
// a one-turn baton run on a data dir of 100,000 events took 2.5x as long
// with it, 1.16x without).
//
// A store whose Pebble gave up (fail.go) is not closed: Pebble's state is
// left as it is (its goroutines, the sequencer among them, may be stopped
// for good inside it), readers are woken with ErrClosed, and Close returns
// at once. The process that has it is ending; the next open recovers.
func (s *Store) Close() error {
	s.qmu.Lock()
	again := s.stopped
	s.stopped = true
	s.qmu.Unlock()
	s.signal()
	select {
	case <-s.done:
	case <-s.fails.gaveUp:
	}
	s.mu.Lock()
	if !s.closed {
		s.closed = true
		close(s.changed)
	}
	s.mu.Unlock()
	if again || s.fails.fatal() {
		return nil
	}
	s.life.Lock()
	defer s.life.Unlock()
	var err error
	if s.sealw != nil {
		err = s.sealw.close(s.next)
	}
	if cerr := s.db.Close(); err == nil {
		err = cerr
	}
	if s.lock != nil {
		if cerr := s.lock.Close(); err == nil {
			err = cerr
		}
	}
	if s.onClose != nil {
		s.onClose()
	}
	return err
}

// ErrClosed is returned after Close.
var ErrClosed = errors.New("event log closed")

// Compact compacts the whole store, as Pebble would over time: for
// maintenance, and to measure a settled store.
func (s *Store) Compact(ctx context.Context) error {
	return s.read(func() error { return s.db.Compact(ctx, []byte{0}, []byte{0xff}, true) })
}

// ErrReadOnly is returned by writes to a store opened read-only.
var ErrReadOnly = errors.New("event log opened read-only")

// writable says whether the store takes writes: not read-only, and not
// failed (fail.go; a damaged store is not written to until it is
// repaired).
func (s *Store) writable() error {
	if s.readOnly {
		return ErrReadOnly
	}
	if err := s.Failure(); err != nil {
		if errors.Is(err, ErrDamaged) {
			return fmt.Errorf("nothing more is written to a damaged store: %w", err)
		}
		return fmt.Errorf("nothing more is written to a store that failed: %w", err)
	}
	return nil
}
