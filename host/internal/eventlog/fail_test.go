package eventlog

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
)

// failingLog is a file system on which every write of a write-ahead log
// (a write, a sync) fails while fail is set, as on a full or failing
// disk.
func failingLog(base vfs.FS, fail *atomic.Bool) vfs.FS {
	return errorfs.Wrap(base, errorfs.InjectorFunc(func(op errorfs.Op) error {
		if fail.Load() && strings.HasSuffix(op.Path, ".log") && op.Kind.ReadOrWrite() == errorfs.OpIsWrite {
			return errors.New("no space left on device (injected)")
		}
		return nil
	}))
}

// parkFatal makes Fatal park its goroutine for good and send its line on
// the returned channel, for the test: Pebble does not expect Fatal to
// return, and the process it would end is the test's.
func parkFatal(t *testing.T) <-chan string {
	lines := make(chan string, 8)
	saved := Fatal
	t.Cleanup(func() { Fatal = saved })
	Fatal = func(msg string) {
		lines <- msg
		select {}
	}
	return lines
}

// A write of the log that fails is Pebble giving up (its Fatalf). The
// store fails first, so that its owner can stop on its own while Fatal
// waits: Failed is closed and Failure says what Pebble gave up on; the
// appends in flight, whose commit will never end (the sequencer is stopped
// inside Pebble for good), return the failure; no commit hook runs and
// nothing is published; Close returns at once, closing nothing; readers
// then get ErrClosed. Fatal gets one line.
func TestPebbleGivesUp(t *testing.T) {
	lines := parkFatal(t)
	var fail atomic.Bool
	s, err := OpenWith("/store", Options{FS: failingLog(vfs.NewMem(), &fail)})
	if err != nil {
		t.Fatal(err)
	}
	appendN(t, s, "a", 2, "c1")
	fail.Store(true)
	var hooked atomic.Int32
	errs := make(chan error, 3)
	for i := range 3 {
		go func() {
			_, _, err := s.Append(Batch{Events: []Pending{event("a", 10+i)}, CommandID: fmt.Sprintf("c%d", 2+i),
				ThreadID: "a", Head: head("H"), Receipt: func(uint64) []byte { return []byte("r") },
				OnCommit: func(uint64) { hooked.Add(1) }})
			errs <- err
		}()
	}
	const cause = "pebble: fatal commit error: no space left on device (injected)"
	for range 3 {
		select {
		case err := <-errs:
			if !errors.Is(err, ErrGaveUp) || err.Error() != cause {
				t.Errorf("append as Pebble gives up: %v, want %q", err, cause)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("an append waits on the commit Pebble gave up")
		}
	}
	select {
	case <-s.Failed():
	default:
		t.Fatal("Failed is open after Pebble gave up")
	}
	if err := s.Failure(); !errors.Is(err, ErrGaveUp) || err.Error() != cause {
		t.Errorf("Failure() = %v, want %q", err, cause)
	}
	if line := <-lines; line != "the event store /store failed and this process cannot go on: "+cause {
		t.Errorf("Fatal got %q", line)
	}
	if n := hooked.Load(); n != 0 {
		t.Errorf("%d commit hooks ran for appends that failed", n)
	}
	if last, _ := s.Last(); last != 2 {
		t.Errorf("last published %d, want the 2 before the failure", last)
	}
	_, _, err = s.Append(Batch{Events: []Pending{event("a", 20)}})
	if !errors.Is(err, ErrGaveUp) {
		t.Errorf("an append after the failure: %v, want the failure", err)
	}
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Errorf("Close of a store Pebble gave up on: %v, want nil", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Close waits on the sequencer Pebble stopped")
	}
	if _, err := s.After(0, 0); !errors.Is(err, ErrClosed) {
		t.Errorf("a read after Close: %v, want ErrClosed", err)
	}
	if _, _, err := s.Append(Batch{Events: []Pending{event("a", 21)}}); !errors.Is(err, ErrClosed) {
		t.Errorf("an append after Close: %v, want ErrClosed", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("a second Close: %v", err)
	}
}
