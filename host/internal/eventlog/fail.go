package eventlog

import (
	"errors"
	"sync"
)

// Failure: a store that cannot be trusted to record what it is given
// stops taking writes, and says so once. It fails in one of three ways,
// and each ends the same:
//
//   - a commit returned an error (a batch Pebble refused: the store
//     cannot tell what of it is durable);
//   - a read met damage (damage.go): a store known to be damaged is not
//     written to until it is repaired;
//   - Pebble gave up (its Fatalf: a write of its log or manifest failed,
//     the disk is full). Pebble does not expect to go on from there, so
//     the store leaves it as it is: Append returns rather than wait on a
//     commit that will not end, and Close closes nothing (the process
//     that has it is ending, and the next open recovers).
//
// Failed is closed at the first of them and Failure says which. Reads go
// on as far as they can; every later append fails with the cause.

// failure is why a store failed (once set, never cleared: a store is
// reopened to be used again).
type failure struct {
	mu     sync.Mutex
	cause  error
	failed chan struct{} // closed when cause is set
	gaveUp chan struct{} // closed when Pebble gave up (a fatal failure)
}

func (f *failure) init() {
	f.failed = make(chan struct{})
	f.gaveUp = make(chan struct{})
}

// set records the first failure; fatal says Pebble gave up, which is
// recorded even after another failure (Close must not wait on it).
func (f *failure) set(cause error, fatal bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.cause == nil {
		f.cause = cause
		close(f.failed)
	}
	if fatal {
		select {
		case <-f.gaveUp:
		default:
			close(f.gaveUp)
		}
	}
}

func (f *failure) err() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.cause
}

func (f *failure) fatal() bool {
	select {
	case <-f.gaveUp:
		return true
	default:
		return false
	}
}

// Failed is closed when the store fails: nothing more is written to it.
func (s *Store) Failed() <-chan struct{} { return s.fails.failed }

// Failure is why the store failed (nil: it has not): the error of the
// commit that failed, the damage met (a *DamageError), or what Pebble
// gave up on (ErrGaveUp).
func (s *Store) Failure() error { return s.fails.err() }

// ErrGaveUp is what the failure of a store whose Pebble gave up is
// (errors.Is).
var ErrGaveUp = errors.New("pebble gave up")

// gaveUpError is Pebble's fatal error: its message, first line only.
type gaveUpError struct{ msg string }

func (e *gaveUpError) Error() string        { return e.msg }
func (e *gaveUpError) Is(target error) bool { return target == ErrGaveUp }
