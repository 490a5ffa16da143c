package jetstreamlog

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/baton-run/baton/host/internal/eventlog"
	"github.com/baton-run/baton/host/internal/natstest"
	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go/jetstream"
)

// openWith opens a log for host name with its replica in dir and its
// Close bounded by closeTimeout.
func openWith(t *testing.T, c *natstest.Cluster, name, dir string, closeTimeout time.Duration) *Log {
	t.Helper()
	l, err := Open(t.Context(), Options{URLs: []string{c.URLs()}, Host: name, Dir: dir, CloseTimeout: closeTimeout})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// appendWaiting starts an Append of event i of thread on l while its
// servers are stopped, and returns once the writer has met an outcome it
// could not know (the servers did not answer), with the channel that gets
// the Append's error.
func appendWaiting(t *testing.T, l *Log, thread string, i int) <-chan error {
	t.Helper()
	retrying := make(chan struct{})
	var once sync.Once
	l.w.unknown = func() { once.Do(func() { close(retrying) }) }
	errc := make(chan error, 1)
	go func() {
		_, _, err := l.Append(eventlog.Batch{Events: []eventlog.Pending{event(thread, i)}})
		errc <- err
	}()
	select {
	case <-retrying:
	case err := <-errc:
		t.Fatalf("an append while the servers are stopped returned %v; want it to wait", err)
	}
	return errc
}

// clientGoroutines are the ids and stacks of the goroutines of this
// package's code and of the NATS client, but the tests' own.
func clientGoroutines() map[string]string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	id := regexp.MustCompile(`^goroutine (\d+) `)
	got := map[string]string{}
	for _, g := range bytes.Split(buf, []byte("\n\n")) {
		s := string(g)
		if strings.Contains(s, "testing.tRunner") || strings.Contains(s, "testing.(*T)") {
			continue
		}
		if !strings.Contains(s, "host/internal/jetstreamlog.") && !strings.Contains(s, "github.com/nats-io/nats.go") {
			continue
		}
		if m := id.FindStringSubmatch(s); m != nil {
			got[m[1]] = s
		}
	}
	return got
}

// awaitNoNewGoroutines waits until no goroutine of this package's code or
// the NATS client is left but those in before. Goroutines that Close
// stopped may take a moment to be gone from the scheduler's list (a
// closed connection's reader and flusher end as they notice it); the
// bound is for a goroutine that never ends.
func awaitNoNewGoroutines(t *testing.T, before map[string]string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var left []string
		for id, s := range clientGoroutines() {
			if _, ok := before[id]; !ok {
				left = append(left, s)
			}
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			slices.Sort(left)
			t.Fatalf("%d goroutines outlived the log's Close:\n\n%s", len(left), strings.Join(left, "\n\n"))
		}
		runtime.Gosched()
		<-time.After(10 * time.Millisecond) // a poll of the condition, not a guess: the bound above decides
	}
}

// Servers that are gone do not hold Close for ever: after CloseTimeout
// it gives up, the waiting Append and Receipt get an error wrapping
// eventlog.ErrClosed that says the log closed before the servers took
// the write, and no goroutine of the log or its connection is left.
func TestCloseGivesUpOnWritesTheServersDoNotTake(t *testing.T) {
	c := natstest.Single(t)
	before := clientGoroutines()
	l := openWith(t, c, "a", t.TempDir(), time.Second)
	appendOne(t, l, "T", 0)
	c.Stop(0)
	errc := appendWaiting(t, l, "T", 1)
	receiptc := make(chan error, 1)
	go func() {
		_, _, err := l.Receipt("not-written")
		receiptc <- err
	}()

	closed := make(chan error, 1)
	go func() { closed <- l.Close() }()
	if err := <-closed; err != nil {
		t.Fatalf("Close: %v", err)
	}
	err := <-errc
	if !errors.Is(err, eventlog.ErrClosed) || err.Error() != errUnsent.Error() {
		t.Fatalf("the append Close gave up on returned %v; want %v", err, errUnsent)
	}
	if err := <-receiptc; !errors.Is(err, eventlog.ErrClosed) {
		t.Fatalf("a receipt missed while the servers were gone returned %v; want ErrClosed", err)
	}
	awaitNoNewGoroutines(t, before)
}

// Servers back before CloseTimeout: Close waits for them and commits the
// queued write, which is in the stream (a replica rebuilt from it has
// it).
func TestCloseCommitsWhenTheServersComeBack(t *testing.T) {
	c := natstest.Single(t)
	l := openWith(t, c, "a", t.TempDir(), time.Hour)
	appendOne(t, l, "T", 0)
	c.Stop(0)
	errc := appendWaiting(t, l, "T", 1)

	closed := make(chan error, 1)
	go func() { closed <- l.Close() }()
	for { // Close has begun: it takes no more writes
		l.w.mu.Lock()
		stopped := l.w.stopped
		l.w.mu.Unlock()
		if stopped {
			break
		}
		runtime.Gosched()
	}
	c.Start(0)
	if err := <-closed; err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := <-errc; err != nil {
		t.Fatalf("the append queued as Close began, the servers back: %v", err)
	}

	rebuilt := openWith(t, c, "b", t.TempDir(), time.Second)
	waitLast(t, rebuilt, 2)
	var got []string
	for _, r := range all(t, rebuilt) {
		got = append(got, fmt.Sprintf("%d %s %s", r.Sequence, r.ThreadID, r.Data))
	}
	want := []string{`1 T {"i":0}`, `2 T {"i":1}`}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("the stream after Close committed the queued write (-want +got):\n%s", d)
	}
}

// stopMissesNext is the fold's stream iterator with a Stop that does not
// end the Next under way, as nats.go's does not when Stop lands while
// Next is making its consumer again: Next then subscribes to the new
// consumer after Stop has run, and waits on it for ever.
type stopMissesNext struct{ jetstream.MessagesContext }

func (stopMissesNext) Stop() {}

// Close ends the fold without relying on its iterator's Stop: a fold
// waiting in a Next that Stop does not reach still ends, and Close
// returns.
func TestCloseEndsTheFoldWhenStopMissesItsNext(t *testing.T) {
	c := natstest.Single(t)
	var iter jetstream.MessagesContext
	l, err := Open(t.Context(), Options{URLs: []string{c.URLs()}, Host: "a", Dir: t.TempDir(),
		wrapIter: func(it jetstream.MessagesContext) jetstream.MessagesContext {
			iter = it
			return stopMissesNext{it}
		}})
	if err != nil {
		t.Fatal(err)
	}
	appendOne(t, l, "T", 0) // the fold applied it and waits for the next message
	closed := make(chan error, 1)
	go func() { closed <- l.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatalf("close: %v", err)
		}
	case <-time.After(30 * time.Second): // the bound is for a Close that never returns
		iter.Stop() // lets Close end, so that the test does
		<-closed
		t.Fatal("Close still waited for the fold after 30s: it relies on the iterator's Stop to end a Next")
	}
}

// gaveUp is an ordered consumer's iterator that gave up making its
// consumer again (resetAttempts): its Next says it is closed.
type gaveUp struct{ jetstream.MessagesContext }

func (gaveUp) Next(...jetstream.NextOpt) (jetstream.Msg, error) {
	return nil, jetstream.ErrMsgIteratorClosed
}

// A stream iterator that gives up does not stop the fold: it makes a new
// consumer from its watermark and applies on.
func TestTheFoldMakesANewConsumerWhenItsIteratorGivesUp(t *testing.T) {
	c := natstest.Single(t)
	var made int
	l, err := Open(t.Context(), Options{URLs: []string{c.URLs()}, Host: "a", Dir: t.TempDir(),
		wrapIter: func(it jetstream.MessagesContext) jetstream.MessagesContext {
			made++ // the fold's goroutine, or Open's before it starts
			if made == 1 {
				it.Stop()
				return gaveUp{it}
			}
			return it
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	appendOne(t, l, "T", 0)
	appendOne(t, l, "T", 1)
	var got []string
	for _, r := range all(t, l) {
		got = append(got, fmt.Sprintf("%d %s %s", r.Sequence, r.ThreadID, r.Data))
	}
	if d := cmp.Diff([]string{`1 T {"i":0}`, `2 T {"i":1}`}, got); d != "" {
		t.Errorf("the log after the fold's iterator gave up (-want +got):\n%s", d)
	}
	if made != 2 {
		t.Errorf("the fold made %d iterators, want 2: one that gave up, then a new one", made)
	}
}
