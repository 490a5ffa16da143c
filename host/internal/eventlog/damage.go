package eventlog

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	crdberrors "github.com/cockroachdb/errors"
	"github.com/cockroachdb/errors/oserror"
	"github.com/cockroachdb/pebble/v2"
	"github.com/hashicorp/go-hclog"
)

// Damage: what the store does when its files are not what was written.
// A damaged file is never a panic: a read that meets one returns a
// *DamageError naming the file, and the store remembers the damage (a
// store known to be damaged takes no more appends). Pebble's own fatal
// errors (a write of its log or manifest failed, a table whose size is not
// what the manifest says, an invariant broken) end the process through
// Fatal, with one line.

// ErrDamaged is what every *DamageError is (errors.Is).
var ErrDamaged = errors.New("the event store is damaged")

// DamageError says that the store's files are damaged: File (a path, when
// known) and what is wrong with it.
type DamageError struct {
	File string
	Err  error
	// removed: the file is missing, which in a store opened read-only
	// while another process writes it may be that process's doing (see
	// Store.read).
	removed bool
}

// removed says whether err is a file of the store that is not there.
func removed(err error) bool {
	if d, ok := errors.AsType[*DamageError](err); ok {
		return d.removed
	}
	return oserror.IsNotExist(err)
}

func (e *DamageError) Error() string {
	if e.File == "" {
		return fmt.Sprintf("%s: %v", ErrDamaged, e.Err)
	}
	return fmt.Sprintf("%s: %s: %v", ErrDamaged, e.File, e.Err)
}

// Is makes every DamageError ErrDamaged.
func (e *DamageError) Is(target error) bool { return target == ErrDamaged }

func (e *DamageError) Unwrap() error { return e.Err }

// Fatal ends the process when Pebble meets an error it cannot go on from
// (its Fatalf). Pebble does not expect Fatalf to return (some of its
// callers go on with state it has given up on), so Fatal must not return:
// a command sets its own to say it its way; the default prints msg on
// stderr and exits with status 1. msg is one line.
var Fatal = func(msg string) {
	fmt.Fprintln(os.Stderr, msg)
	os.Exit(1)
}

// pebbleLogger sends Pebble's log lines to the store's logger: its
// informational lines at debug level, its errors at error level.
type pebbleLogger struct {
	l   hclog.Logger
	dir string
	s   *Store // failed before Fatal is called (nil: none)
}

func (p pebbleLogger) Infof(format string, args ...any)  { p.l.Debug(fmt.Sprintf(format, args...)) }
func (p pebbleLogger) Errorf(format string, args ...any) { p.l.Error(fmt.Sprintf(format, args...)) }

// Fatalf logs the whole message, fails the store (Pebble gave up: fail.go)
// and ends the process through Fatal with its first line (some carry a
// stack trace). The store fails first, so that its owner can stop on its
// own (a service refuses commands and stops its providers) while Fatal
// waits for it.
func (p pebbleLogger) Fatalf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	p.l.Error(msg)
	first, _, _ := strings.Cut(msg, "\n")
	if p.s != nil {
		p.s.fails.set(&gaveUpError{msg: first}, true)
		p.s.fatalMu.Lock() // held for good: Fatal does not return
	}
	Fatal(fmt.Sprintf("the event store %s failed and this process cannot go on: %s", p.dir, first))
}

// listener is the store's Pebble event listener: a corruption met by a
// read or in the background is recorded on the store (the read itself
// returns the error, made a *DamageError by damaged), never fatal.
func (s *Store) listener() *pebble.EventListener {
	return &pebble.EventListener{
		DataCorruption: func(info pebble.DataCorruptionInfo) {
			s.log.Debug("on-disk corruption", "file", info.Path, "error", info.Details)
			s.dmu.Lock()
			s.corruptFile = info.Path
			s.dmu.Unlock()
			s.noteDamage(&DamageError{File: info.Path, Err: firstLine(info.Details)})
		},
		BackgroundError: func(err error) {
			if pebble.IsCorruptionError(err) {
				s.noteDamage(s.damageOf(err))
			}
			s.log.Debug("background error", "error", err)
		},
	}
}

// noteDamage records the first damage the store has met, which fails it
// (fail.go).
func (s *Store) noteDamage(d *DamageError) {
	s.dmu.Lock()
	if s.damage == nil {
		s.damage = d
	}
	first := s.damage
	s.dmu.Unlock()
	s.fails.set(first, false)
}

// Damage is the first damage the store has met since it opened (nil:
// none).
func (s *Store) Damage() error {
	s.dmu.Lock()
	defer s.dmu.Unlock()
	if s.damage == nil {
		return nil
	}
	return s.damage
}

// damaged makes a corruption error from Pebble a *DamageError naming its
// file; other errors pass unchanged.
func (s *Store) damaged(err error) error {
	if err == nil || errors.Is(err, ErrDamaged) || !pebble.IsCorruptionError(err) {
		return err
	}
	d := s.damageOf(err)
	s.noteDamage(d)
	return d
}

// damageOf is a Pebble corruption error as a *DamageError: the file from
// Pebble's hint ("path: ..."), what is wrong from its message.
func (s *Store) damageOf(err error) *DamageError {
	d := &DamageError{Err: firstLine(err), removed: oserror.IsNotExist(err)}
	for _, h := range crdberrors.GetAllHints(err) {
		if p, ok := strings.CutPrefix(h, "path: "); ok {
			d.File = p
			return d
		}
	}
	// Pebble reports a damaged file to the listener before the read
	// returns (the same goroutine); the error itself may not carry it.
	s.dmu.Lock()
	d.File = s.corruptFile
	s.dmu.Unlock()
	if m := fileNum.FindStringSubmatch(d.Err.Error()); d.File == "" && m != nil {
		d.File = filepath.Join(s.dir, m[1]+map[string]string{"sstable": ".sst", "blob": ".blob"}[m[2]])
	}
	if d.File == "" {
		// A write-ahead log that cannot be replayed: Pebble names it in
		// the error's details.
		for _, det := range crdberrors.GetAllDetails(err) {
			var n uint64
			if _, serr := fmt.Sscanf(det, "replaying wal %d,", &n); serr == nil {
				d.File = filepath.Join(s.dir, fmt.Sprintf("%06d.log", n))
			}
		}
	}
	return d
}

// fileNum finds the file Pebble names in some errors: "file 000016 (type
// sstable)".
var fileNum = regexp.MustCompile(`file (\d+) \(type (\w+)\)`)

// firstLine is an error's first line (Pebble's carry details below it).
func firstLine(err error) error {
	msg := err.Error()
	if first, _, cut := strings.Cut(msg, "\n"); cut {
		return errors.New(first)
	}
	return err
}
