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
package eventlog

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/errors/oserror"
	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/vfs"
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
	db       *pebble.DB
	lock     *pebble.Lock // the directory's, held from before the first open to Close
	log      hclog.Logger
	dir      string
	readOnly bool
	opts     *pebble.Options // what it was opened with
	gen      int             // how often a read-only store was reopened (read)
	seal     SealState       // what the seal said at Open
	sealw    *sealWriter     // nil: read-only
	onClose  func()          // after Close (Verify's scratch copy)

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

// Options are a store's options.
type Options struct {
	// Logger (nil: none) gets the store's and Pebble's log lines.
	Logger hclog.Logger
	// ReadOnly opens the store for reading only, to inspect it: nothing is
	// written, not even the seal, and a store that ends before its seal
	// opens (Seal tells).
	ReadOnly bool
	// FS is the file system the store, its seal among its files, runs on
	// (nil: the operating system's, with Baton's modes: fs.go). Tests run
	// a store on one that fails (Pebble's errorfs) or that loses what was
	// not synced (vfs.NewCrashableMem); nothing else sets it.
	FS vfs.FS
}

// Open opens (or creates) the log in dir.
func Open(dir string, log hclog.Logger) (*Store, error) {
	return OpenWith(dir, Options{Logger: log})
}

// OpenWith opens the log in dir with options. A store whose files are
// damaged, or that ends before the last sequence its seal records (see
// seal.go), is refused with a *DamageError and left as it was.
func OpenWith(dir string, o Options) (*Store, error) {
	log := o.Logger
	if log == nil {
		log = hclog.NewNullLogger()
	}
	s := &Store{log: log, dir: dir, readOnly: o.ReadOnly, changed: make(chan struct{}), wake: make(chan struct{}, 1), done: make(chan struct{})}
	s.fails.init()
	fs := o.FS
	if fs == nil {
		fs = privateDefault // files 0600, directories 0700 (fs.go)
	}
	opts := &pebble.Options{
		FormatMajorVersion: FormatVersion,
		CacheSize:          16 << 20,
		MemTableSize:       8 << 20,
		MaxOpenFiles:       256,
		// Pebble's default (64 MB) keeps a store smaller than that in one
		// level, so that every flush's compaction rewrites all of it (a
		// host's start paid 80 ms for it in a store of 100,000 events).
		// A small base level keeps compactions small; an event log's write
		// rate is far below what the extra levels cost.
		LBaseMaxBytes: 4 << 20,
		Logger:        pebbleLogger{log.Named("pebble"), dir, s},
		EventListener: s.listener(),
		ReadOnly:      o.ReadOnly,
		FS:            fs,
	}
	if o.ReadOnly {
		opts.FS = readOnlyDefault // no lock, no write (fs.go)
		// Table stats guide compactions, which a reader never runs: it
		// opens a table only when a read needs it.
		opts.DisableTableStats = true
	}
	// Bloom filters on every level: each commit looks up its command's
	// receipt, which is almost never there, and a miss should not read an
	// index block of every table that might hold it.
	for i := range opts.Levels {
		opts.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
	}
	if err := s.open(dir, opts); err != nil {
		if s.lock != nil {
			s.lock.Close()
		}
		return nil, fmt.Errorf("open event log %s: %w", dir, err)
	}
	go s.sequence()
	return s, nil
}

// open opens Pebble and checks the store against its seal. A store with a
// seal is first opened read-only, to learn its last sequence before Pebble
// writes anything (a read-write open flushes what it recovered from its
// write-ahead log, and a damaged log would then be gone); the directory is
// locked across both opens.
func (s *Store) open(dir string, opts *pebble.Options) error {
	s.seal = readSeal(opts.FS, dir)
	if s.seal.Found && !opts.ReadOnly {
		lock, err := pebble.LockDirectory(dir, opts.FS)
		if err != nil {
			return err
		}
		s.lock = lock
		opts.Lock = lock
		if s.seal.Err == nil {
			ro := opts.Clone()
			ro.ReadOnly = true
			if err := s.openDB(dir, ro); err != nil {
				return err
			}
			last, err := s.lastSequence()
			s.db.Close()
			s.db = nil
			if err != nil {
				return err
			}
			if last < s.seal.Sealed {
				return sealBroken(dir, last, s.seal.Sealed)
			}
		}
	}
	s.opts = opts
	last, err := s.openLast(dir, opts)
	if s.db == nil {
		return err // Pebble did not open
	}
	if err != nil && opts.ReadOnly && errors.Is(err, ErrDamaged) {
		err = nil // to inspect: Verify reports it
	}
	if err == nil && !opts.ReadOnly && s.seal.Err == nil && last < s.seal.Sealed {
		err = sealBroken(dir, last, s.seal.Sealed) // unreachable: checked read-only above
	}
	if err == nil && !opts.ReadOnly {
		err = s.startSeal(opts.FS, dir, last)
	}
	if err != nil {
		s.db.Close()
		return err
	}
	s.last, s.next = last, last
	return nil
}

// openLast opens Pebble and reads the last sequence. Read-only, it tries
// again when a file was removed under it (see read). s.db is nil when
// Pebble did not open.
func (s *Store) openLast(dir string, opts *pebble.Options) (uint64, error) {
	for try := 0; ; try++ {
		err := s.openDB(dir, opts)
		var last uint64
		if err == nil {
			last, err = s.lastSequence()
		}
		if !opts.ReadOnly || try == goneRetries || !removed(err) {
			return last, err
		}
		if s.db != nil {
			s.db.Close()
			s.db = nil
		}
	}
}

// openDB opens Pebble, its corruption a *DamageError.
func (s *Store) openDB(dir string, opts *pebble.Options) error {
	db, err := pebble.Open(dir, opts)
	if err != nil {
		if oserror.IsNotExist(err) && s.seal.Found {
			// A store that was written (it has a seal) missing one of
			// the files its manifest names.
			return s.damageOf(err)
		}
		return s.damaged(err)
	}
	s.db = db
	return nil
}

// startSeal reports a seal that is missing (in a store with events) or
// damaged, and writes the store's last sequence to it.
func (s *Store) startSeal(fs vfs.FS, dir string, last uint64) error {
	switch {
	case s.seal.Err != nil:
		s.log.Warn("the event store's seal is damaged, so this open could not check that no committed event is missing; "+
			"run `baton doctor` to check the store; a new seal is written", "seal", s.seal.Path, "error", s.seal.Err)
	case !s.seal.Found && last > 0:
		s.log.Warn("the event store has no seal, so this open could not check that no committed event is missing; a new seal is written",
			"seal", s.seal.Path)
	}
	w, err := openSeal(fs, dir)
	if err != nil {
		return err
	}
	if err := w.write(last); err != nil {
		w.f.Close()
		return err
	}
	s.sealw = w
	return nil
}

// Seal is what the store's seal said when it opened.
func (s *Store) Seal() SealState { return s.seal }

// lastSequence is the last event's sequence, or the last a salvage gave
// (metaNext) when that is later: sequences are never given twice.
func (s *Store) lastSequence() (uint64, error) {
	last, err := s.lastEvent()
	if err != nil {
		return 0, err
	}
	v, found, err := s.get(metaKey(metaNext))
	if err != nil {
		return 0, s.damaged(err)
	}
	if found {
		n, perr := strconv.ParseUint(string(v), 10, 64)
		if perr != nil {
			return 0, &DamageError{Err: fmt.Errorf("the store's %q metadata is %q, not a sequence", metaNext, v)}
		}
		last = max(last, n)
	}
	return last, nil
}

func (s *Store) lastEvent() (uint64, error) {
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixEvent}, UpperBound: []byte{prefixEvent + 1}})
	if err != nil { // unreachable: Pebble v2 NewIter always returns a nil error
		return 0, err
	}
	defer it.Close()
	if !it.Last() {
		return 0, s.damaged(it.Error())
	}
	return parseEventKey(it.Key())
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
			if err = b.Commit(pebble.Sync); err != nil {
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
	if in.CommandID != "" {
		if err := b.Set(receiptKey(in.CommandID), in.Receipt(last), nil); err != nil {
			return err
		}
	}
	return s.buildThreadState(b, in, last)
}

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

// EffectDone removes a performed effect from the outbox (synced: an entry
// left behind would be reported as not performed by the next host). It is
// a commit of its own, through the sequencer (so it shares a synced write
// with others, and a store that failed refuses it as it does an append).
func (s *Store) EffectDone(ref EffectRef) error {
	if _, _, err := parseEffectID(ref.ID); err != nil {
		return err
	}
	if _, _, err := s.Append(Batch{Done: []EffectRef{ref}}); err != nil {
		return fmt.Errorf("remove effect %s of thread %s: %w", ref.ID, ref.ThreadID, err)
	}
	return nil
}

// Outbox returns every pending effect, by thread and in decided order.
func (s *Store) Outbox() (out []StoredEffect, err error) {
	err = s.read(func() error {
		out = nil // a read may be run again (see read)
		return s.scan([]byte{prefixOutbox}, func(k, v []byte) error {
			thread, id, err := parseOutboxKey(k)
			if err != nil {
				return err
			}
			out = append(out, StoredEffect{ID: id, ThreadID: thread, Data: append([]byte(nil), v...)})
			return nil
		})
	})
	return out, err
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

// Compact compacts the whole store, as Pebble would over time: for
// maintenance, and to measure a settled store.
func (s *Store) Compact(ctx context.Context) error {
	return s.read(func() error { return s.db.Compact(ctx, []byte{0}, []byte{0xff}, true) })
}

// Meta returns a metadata value.
func (s *Store) Meta(name string) (v []byte, found bool, err error) {
	err = s.read(func() error {
		v, found, err = s.get(metaKey(name))
		return err
	})
	return v, found, err
}

// SetMeta writes a metadata value, synced.
func (s *Store) SetMeta(name string, v []byte) error {
	return s.read(func() error { return s.db.Set(metaKey(name), v, pebble.Sync) })
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
