package eventlog

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/go-hclog"
)

func openT(t *testing.T, dir string) *Store {
	t.Helper()
	s, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func event(thread string, i int) Pending {
	return Pending{ThreadID: thread, Type: "x.happened", At: time.Unix(int64(i), 0), Data: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))}
}

// Open fails, leaving the directory usable, when another Store has it
// open, when it is not a directory, and when the last key of the log is
// not an event key.
func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir)
	if other, err := Open(dir, nil); err == nil {
		other.Close()
		t.Fatal("a second Store opened a directory in use")
	} else if !strings.Contains(err.Error(), "open event log "+dir) {
		t.Errorf("second open: %v, want it to name the directory", err)
	}
	appendN(t, s, "a", 2, "")
	// A damaged key at the end of the log: Open cannot tell the last
	// sequence, so it must not guess one.
	bad := append(eventKey(2), 0)
	if err := s.db.Set(bad, []byte("{}"), pebble.Sync); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if s, err := Open(dir, nil); err == nil {
		s.Close()
		t.Fatal("a log whose last key is damaged opened")
	} else if !strings.Contains(err.Error(), fmt.Sprintf("bad event key %x", bad)) {
		t.Errorf("open with a damaged last key: %v", err)
	}
	// The failed Open let go of the directory: Pebble itself can open it
	// and drop the key, and then the log opens with its two events.
	db, err := pebble.Open(dir, &pebble.Options{FormatMajorVersion: FormatVersion})
	if err != nil {
		t.Fatalf("the failed Open left the directory locked: %v", err)
	}
	if err := db.Delete(bad, pebble.Sync); err != nil {
		t.Fatal(err)
	}
	db.Close()
	s = openT(t, dir)
	if last, _ := s.Last(); last != 2 {
		t.Errorf("last %d after repair, want 2", last)
	}
	s.Close()

	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if s, err := Open(file, nil); err == nil {
		s.Close()
		t.Fatal("a file opened as a log")
	}
}

// Compact moves everything to the last level and changes nothing a reader
// sees; a closed store refuses it.
func TestCompact(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir)
	for i := range 5 {
		appendN(t, s, fmt.Sprintf("t%d", i%2), 3, fmt.Sprintf("c%d", i))
	}
	before, err := s.After(0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Compact(t.Context()); err != nil {
		t.Fatal(err)
	}
	m := s.db.Metrics()
	var tables []int64
	for _, l := range m.Levels {
		tables = append(tables, l.TablesCount)
	}
	if last := tables[len(tables)-1]; last == 0 || tables[0] != 0 {
		t.Errorf("tables per level after Compact: %v, want none in L0 and the data in the last level", tables)
	}
	after, err := s.After(0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(before, after); diff != "" {
		t.Errorf("events after Compact (-before +after):\n%s", diff)
	}
	s.Close()
	s = openT(t, dir)
	defer s.Close()
	reopened, _ := s.After(0, 0)
	if diff := cmp.Diff(before, reopened); diff != "" {
		t.Errorf("events after Compact and reopen (-before +after):\n%s", diff)
	}
	s.Close()
	if err := s.Compact(t.Context()); !errors.Is(err, ErrClosed) {
		t.Errorf("Compact after Close: %v, want ErrClosed", err)
	}
}

// A store whose commit failed writes nothing more: Failed is closed and
// Failure names the cause, every append (and outbox removal) fails with
// it, no hook runs, no sequence is used, readers see what was there.
// Reopening clears it.
//
// No test reaches a failed commit through Pebble: Batch.Commit returns an
// error only for options this store does not use (read-only, no WAL, range
// keys), and a write that fails is Pebble giving up (TestPebbleGivesUp).
// The test puts the store in the state a failed commit leaves.
func TestFailedStoreWritesNothing(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir)
	want := appendN(t, s, "a", 2, "c1")
	select {
	case <-s.Failed():
		t.Fatal("Failed is closed before the store failed")
	default:
	}
	cause := errors.New("disk on fire")
	s.fails.set(cause, false)
	select {
	case <-s.Failed():
	default:
		t.Fatal("Failed is not closed once the store failed")
	}
	if err := s.Failure(); err != cause {
		t.Fatalf("Failure() = %v, want %v", err, cause)
	}
	hooked := false
	_, _, err := s.Append(Batch{Events: []Pending{event("a", 3)}, CommandID: "c2", ThreadID: "a", Head: head("H"), Live: LiveSet,
		Receipt: func(uint64) []byte { return []byte("r") }, OnCommit: func(uint64) { hooked = true }})
	if !errors.Is(err, cause) {
		t.Fatalf("append to a failed store: %v, want %v", err, cause)
	}
	if hooked {
		t.Error("the commit hook ran for an append that failed")
	}
	if last, _ := s.Last(); last != 2 {
		t.Errorf("last %d, want 2", last)
	}
	got, err := s.After(0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events of the failed store (-want +got):\n%s", diff)
	}
	if _, found, _ := s.Receipt("c2"); found {
		t.Error("receipt of the failed append stored")
	}
	if live, _ := s.LiveThreads(); live != nil {
		t.Errorf("live %v after the failed append", live)
	}
	if err := s.EffectDone(EffectRef{ThreadID: "a", ID: "1.0"}); !errors.Is(err, cause) {
		t.Errorf("EffectDone on a failed store: %v, want %v", err, cause)
	}
	s.Close()
	s = openT(t, dir)
	defer s.Close()
	if recs := appendN(t, s, "a", 1, "c2"); recs[0].Sequence != 3 {
		t.Errorf("after reopening, the next append got %d, want 3", recs[0].Sequence)
	}
}

// Damaged keys and values in the log are errors that name what is
// damaged, never records.
func TestDamagedLog(t *testing.T) {
	s := openT(t, t.TempDir())
	defer s.Close()
	appendN(t, s, "a", 3, "")
	set := func(k, v []byte) {
		t.Helper()
		if err := s.db.Set(k, v, pebble.Sync); err != nil {
			t.Fatal(err)
		}
	}
	good, _, _ := s.get(eventKey(2))
	cases := []struct {
		name   string
		damage func()
		read   func() error
		want   string
	}{
		{"record not JSON", func() { set(eventKey(2), []byte("{")) },
			func() error { _, err := s.After(0, 0); return err }, "event 2 is corrupt"},
		{"record under another sequence", func() { set(eventKey(2), recordValue(7, []byte(`{"threadId":"a"}`))) },
			func() error { _, err := s.After(1, 0); return err }, "event 7 is stored under sequence 2"},
		{"event key too long", func() { set(append(eventKey(1), 0), good) },
			func() error { _, err := s.After(0, 0); return err }, fmt.Sprintf("bad event key %x", append(eventKey(1), 0))},
		// An index entry in the old form (empty) sends the read to the
		// global log, whose record is damaged.
		{"index to a damaged record", func() { set(threadKey("a", 2), nil); set(eventKey(2), []byte("[")) },
			func() error { _, err := s.ThreadAfter("a", 0, 0, 0); return err }, "event 2 is corrupt"},
		{"thread index key", func() { set(append(threadKey("a", 3), bytes.Repeat([]byte{0xff}, 9)...), []byte{1}) },
			func() error { _, err := s.ThreadAfter("a", 2, 0, 0); return err }, "bad thread index key"},
		{"outbox key", func() { set([]byte("oa"), []byte("x")) },
			func() error { _, err := s.Outbox(); return err }, `bad outbox key 6f61`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.damage()
			if err := c.read(); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("read of a damaged log: %v, want an error saying %q", err, c.want)
			}
		})
	}
}

// Pebble's log lines go to the store's logger: informational ones at
// debug level, errors at error level; a fatal one at error level, whole,
// then its first line goes to Fatal, which must not return (Pebble cannot
// go on after it): here it ends the goroutine.
func TestPebbleLogger(t *testing.T) {
	var out bytes.Buffer
	l := pebbleLogger{l: hclog.New(&hclog.LoggerOptions{Output: &out, Level: hclog.Debug, DisableTime: true}), dir: "/d/events"}
	l.Infof("flushed %d", 1)
	l.Errorf("background error: %s", "disk")
	saved := Fatal
	defer func() { Fatal = saved }()
	var got string
	Fatal = func(msg string) {
		got = msg
		runtime.Goexit()
	}
	done := make(chan bool)
	go func() {
		defer close(done)
		l.Fatalf("fatal commit error: %s\nstack", "boom")
		t.Error("Fatalf returned")
	}()
	<-done
	if want := "the event store /d/events failed and this process cannot go on: fatal commit error: boom"; got != want {
		t.Errorf("Fatal got %q, want %q", got, want)
	}
	want := "[DEBUG] flushed 1\n[ERROR] background error: disk\n[ERROR] fatal commit error: boom\nstack\n"
	if diff := cmp.Diff(want, out.String()); diff != "" {
		t.Errorf("log (-want +got):\n%s", diff)
	}
}

// The default Fatal prints its line on stderr and exits with status 1: run
// in a child process of the test.
func TestDefaultFatalExits(t *testing.T) {
	if os.Getenv("EVENTLOG_FATAL_CHILD") == "1" {
		pebbleLogger{l: hclog.NewNullLogger(), dir: "/d/events"}.Fatalf("pebble: fatal commit error: %s", "boom")
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestDefaultFatalExits$")
	cmd.Env = append(os.Environ(), "EVENTLOG_FATAL_CHILD=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("child: %v, want exit status 1", err)
	}
	want := "the event store /d/events failed and this process cannot go on: pebble: fatal commit error: boom\n"
	if diff := cmp.Diff(want, stderr.String()); diff != "" {
		t.Errorf("stderr (-want +got):\n%s", diff)
	}
}

// At most maxGroup appends share one write: with more waiting, the
// sequencer commits them in arrival order in groups, each published
// before the next one's hooks run.
func TestGroupBound(t *testing.T) {
	s := openT(t, t.TempDir())
	defer s.Close()
	const n = maxGroup + 10
	errs := make(chan error, n+1)
	entered, release := make(chan struct{}), make(chan struct{})
	// The first append holds the sequencer in its hook while the others
	// queue up behind it.
	go func() {
		_, _, err := s.Append(Batch{Events: []Pending{event("a", 0)}, OnCommit: func(uint64) {
			close(entered)
			<-release
		}})
		errs <- err
	}()
	<-entered
	// published[seq] is the last published sequence when seq's hook ran
	// (hooks run on the sequencer; Last takes no lock it holds then).
	published := make([]uint64, n+2)
	for i := range n {
		go func() {
			_, _, err := s.Append(Batch{Events: []Pending{event("a", i+1)}, OnCommit: func(last uint64) {
				published[last], _ = s.Last()
			}})
			errs <- err
		}()
	}
	for {
		s.qmu.Lock()
		queued := len(s.queue)
		s.qmu.Unlock()
		if queued == n {
			break
		}
		runtime.Gosched()
	}
	close(release)
	for range n + 1 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	want := make([]uint64, n+2)
	for seq := 2; seq <= n+1; seq++ {
		want[seq] = 1 // the first group's hooks run before it is published
		if seq > maxGroup+1 {
			want[seq] = maxGroup + 1
		}
	}
	if diff := cmp.Diff(want, published); diff != "" {
		t.Errorf("last published sequence as each hook saw it (-want +got):\n%s", diff)
	}
	if last, _ := s.Last(); last != n+1 {
		t.Errorf("last %d, want %d", last, n+1)
	}
}

// A thread read that starts at or past its end reads nothing, without
// touching the store.
func TestThreadAfterPastEnd(t *testing.T) {
	s := openT(t, t.TempDir())
	appendN(t, s, "a", 3, "")
	s.Close()
	for _, after := range []uint64{3, 4} {
		if recs, err := s.ThreadAfter("a", after, 0, 0); recs != nil || err != nil {
			t.Errorf("ThreadAfter(a, %d) of a closed log of 3 events: %v, %v; want nothing and no error", after, recs, err)
		}
		if recs, err := s.After(after, 0); recs != nil || err != nil {
			t.Errorf("After(%d) of a closed log of 3 events: %v, %v; want nothing and no error", after, recs, err)
		}
	}
}
