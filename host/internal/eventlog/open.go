package eventlog

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/cockroachdb/errors/oserror"
	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/hashicorp/go-hclog"
)

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
	// NoSync commits without syncing, and keeps no seal: for a store that
	// is a replica of a log kept elsewhere (the jetstreamlog package's),
	// which catches up from its own watermark after a crash. A seal
	// written after an unsynced commit could name events a crash then
	// lost, so such a store has none.
	NoSync bool
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
	s := &Store{log: log, dir: dir, readOnly: o.ReadOnly, changed: make(chan struct{}), wake: make(chan struct{}, 1), done: make(chan struct{}),
		writeOpts: pebble.Sync, noSeal: o.NoSync}
	if o.NoSync {
		s.writeOpts = pebble.NoSync
	}
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
	if !s.noSeal {
		s.seal = readSeal(opts.FS, dir)
	}
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
	if err == nil && !opts.ReadOnly && !s.noSeal {
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
