package jetstreamlog

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/baton-run/baton/host/internal/eventlog"
	"github.com/baton-run/baton/host/internal/natstest"
	"github.com/google/go-cmp/cmp"
)

// host opens a log for a host named name with its replica in dir.
func host(t testing.TB, c *natstest.Cluster, name, dir string) *Log {
	t.Helper()
	l, err := Open(t.Context(), Options{URLs: []string{c.URLs()}, Host: name, Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func event(thread string, i int) eventlog.Pending {
	return eventlog.Pending{ThreadID: thread, Type: "x.happened", At: time.Unix(1700000000, int64(i)).UTC(),
		Data: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))}
}

func appendOne(t testing.TB, l *Log, thread string, i int) []eventlog.Record {
	t.Helper()
	recs, _, err := l.Append(eventlog.Batch{Events: []eventlog.Pending{event(thread, i)}})
	if err != nil {
		t.Fatalf("append %s %d: %v", thread, i, err)
	}
	return recs
}

// waitLast waits until a host's replica has applied event n.
func waitLast(t testing.TB, l *Log, n uint64) {
	t.Helper()
	for {
		last, moved := l.Last()
		if last >= n {
			return
		}
		select {
		case <-moved:
		case <-l.Failed():
			t.Fatalf("the log failed waiting for event %d: %v", n, l.Failure())
		case <-t.Context().Done():
			t.Fatalf("the replica stopped at %d waiting for %d", last, n)
		}
	}
}

func all(t testing.TB, l *Log) []eventlog.Record {
	t.Helper()
	recs, err := l.After(0, 0)
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

// checkLog checks that recs are 1..n with each thread's events in the
// order of their i.
func checkLog(t testing.TB, recs []eventlog.Record, threads []string, perThread int) {
	t.Helper()
	next := map[string]int{}
	for i, r := range recs {
		if r.Sequence != uint64(i+1) {
			t.Fatalf("event %d has sequence %d: the log has a gap", i+1, r.Sequence)
		}
		var d struct{ I int }
		if err := json.Unmarshal(r.Data, &d); err != nil {
			t.Fatal(err)
		}
		if d.I != next[r.ThreadID] {
			t.Fatalf("thread %s event %d is its writer's %d, want %d", r.ThreadID, r.Sequence, d.I, next[r.ThreadID])
		}
		next[r.ThreadID]++
	}
	want := map[string]int{}
	for _, th := range threads {
		want[th] = perThread
	}
	if d := cmp.Diff(want, next); d != "" {
		t.Fatalf("events per thread (-want +got):\n%s", d)
	}
}

// Two hosts, each with several writers, share one gapless log: both
// replicas end with the same records, each thread's in its writer's order.
func TestTwoHostsShareOneGaplessLog(t *testing.T) {
	c := natstest.Single(t)
	hosts := []*Log{host(t, c, "a", t.TempDir()), host(t, c, "b", t.TempDir())}
	const writers, perThread = 4, 25
	var threads []string
	var wg sync.WaitGroup
	for h, l := range hosts {
		for w := range writers {
			thread := fmt.Sprintf("%c%d", 'a'+h, w)
			threads = append(threads, thread)
			wg.Go(func() {
				for i := range perThread {
					if _, _, err := l.Append(eventlog.Batch{Events: []eventlog.Pending{event(thread, i)}}); err != nil {
						t.Errorf("host %s: append %s %d: %v", l.host, thread, i, err)
						return
					}
				}
			})
		}
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	n := uint64(len(threads) * perThread)
	waitLast(t, hosts[0], n)
	waitLast(t, hosts[1], n)
	a, b := all(t, hosts[0]), all(t, hosts[1])
	checkLog(t, a, threads, perThread)
	if d := cmp.Diff(a, b); d != "" {
		t.Fatalf("host b's replica differs from host a's (-a +b):\n%s", d)
	}
}

// A command's receipt is read from either host's replica, after both
// reopen, and from a replica rebuilt from the stream: the replica keeps
// it, not the stream's deduplication (whose ids are per attempt).
func TestReceiptsAreTheReplicas(t *testing.T) {
	c := natstest.Single(t)
	dirA, dirB := t.TempDir(), t.TempDir()
	a, b := host(t, c, "a", dirA), host(t, c, "b", dirB)
	receipt := func(last uint64) []byte { return fmt.Appendf(nil, `{"last":%d}`, last) }
	appendOne(t, a, "t1", 0)
	if _, _, err := a.Append(eventlog.Batch{Events: []eventlog.Pending{event("t1", 1)}, CommandID: "cmd-1", Receipt: receipt}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.Append(eventlog.Batch{Events: []eventlog.Pending{event("t2", 0)}, CommandID: "cmd-2", Receipt: receipt}); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"cmd-1": `{"last":2}`, "cmd-2": `{"last":3}`}
	receipts := func(l *Log) map[string]string {
		t.Helper()
		waitLast(t, l, 3)
		got := map[string]string{}
		for cmd := range want {
			r, found, err := l.Receipt(cmd)
			if err != nil {
				t.Fatal(err)
			}
			if found {
				got[cmd] = string(r)
			}
		}
		return got
	}
	for _, l := range []*Log{a, b} {
		if d := cmp.Diff(want, receipts(l)); d != "" {
			t.Fatalf("receipts on host %s (-want +got):\n%s", l.host, d)
		}
	}
	before := all(t, a)
	a.Close()
	b.Close()
	if err := os.RemoveAll(dirB); err != nil {
		t.Fatal(err)
	}
	a, b = host(t, c, "a", dirA), host(t, c, "b", dirB)
	for _, l := range []*Log{a, b} {
		if d := cmp.Diff(want, receipts(l)); d != "" {
			t.Fatalf("receipts on host %s after reopening (-want +got):\n%s", l.host, d)
		}
		if d := cmp.Diff(before, all(t, l)); d != "" {
			t.Fatalf("host %s's events after reopening (-before +after):\n%s", l.host, d)
		}
	}
}

// Host b writes thread T while host a has a write for T predicted before
// it: a's write fails with ErrFenced and nothing of it is in the log.
func TestAnotherHostsWriteFencesAStalePrediction(t *testing.T) {
	c := natstest.Single(t)
	a, b := host(t, c, "a", t.TempDir()), host(t, c, "b", t.TempDir())
	appendOne(t, a, "T", 0)
	waitLast(t, b, 1)

	predicted, release := make(chan struct{}), make(chan struct{})
	var once, released sync.Once
	a.w.beforePublish = func([]*request) {
		once.Do(func() {
			close(predicted)
			// A test that fails before it releases the write must not
			// hold the writer, and so a's Close in its cleanup, for ever.
			select {
			case <-release:
			case <-t.Context().Done():
			}
		})
	}
	free := func() { released.Do(func() { close(release) }) }
	t.Cleanup(free) // before the logs close (cleanups run last first): a's writer is not left waiting here
	errc := make(chan error, 1)
	go func() {
		_, _, err := a.Append(eventlog.Batch{ThreadID: "T", Events: []eventlog.Pending{event("T", 100)}})
		errc <- err
	}()
	<-predicted
	appendOne(t, b, "T", 1)
	free()
	err := <-errc
	if !errors.Is(err, ErrFenced) || err.Error() != "fenced: thread T was written by host b since this host decided; its lease moved" {
		t.Fatalf("a's stale write to T: got %v, want ErrFenced naming host b", err)
	}
	appendOne(t, a, "U", 0) // a's replica has caught up with b's write and what follows
	var got []string
	for _, r := range all(t, a) {
		got = append(got, fmt.Sprintf("%d %s %s", r.Sequence, r.ThreadID, r.Data))
	}
	want := []string{`1 T {"i":0}`, `2 T {"i":1}`, `3 U {"i":0}`}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("the log after a fenced write (-want +got):\n%s", d)
	}
}

// A write's snapshot is in its host's replica and, for a host that never
// wrote the thread, in the bucket.
func TestSnapshotsAreShared(t *testing.T) {
	c := natstest.Single(t)
	a, b := host(t, c, "a", t.TempDir()), host(t, c, "b", t.TempDir())
	appendOne(t, a, "T", 0)
	if _, _, err := a.Append(eventlog.Batch{ThreadID: "T", Events: []eventlog.Pending{event("T", 1)},
		Snapshot: &eventlog.Snapshot{Schema: 3, Body: []byte("projection")}}); err != nil {
		t.Fatal(err)
	}
	want := eventlog.Snapshot{Schema: 3, Seq: 2, Body: []byte("projection")}
	for _, l := range []*Log{a, b} {
		sn, found, err := l.ThreadSnapshot("T")
		if err != nil || !found {
			t.Fatalf("host %s: snapshot found %v, %v", l.host, found, err)
		}
		if d := cmp.Diff(want, sn); d != "" {
			t.Fatalf("host %s's snapshot of T (-want +got):\n%s", l.host, d)
		}
	}
	if _, found, _ := a.store.ThreadSnapshot("T"); !found {
		t.Fatal("host a's replica has no snapshot of the write it made")
	}
	if _, found, _ := b.store.ThreadSnapshot("T"); found {
		t.Fatal("host b's replica has a snapshot it never wrote: the bucket was not what was read")
	}
}

// A write's commit hook runs once its message is applied, with its last
// sequence, before a reader of its host can see its events.
func TestCommitHookRunsBeforeReadersSee(t *testing.T) {
	c := natstest.Single(t)
	a := host(t, c, "a", t.TempDir())
	appendOne(t, a, "T", 0)
	type hook struct{ Last, Visible uint64 }
	var got []hook
	_, _, err := a.Append(eventlog.Batch{Events: []eventlog.Pending{event("T", 1), event("T", 2)},
		OnCommit: func(last uint64) {
			visible, _ := a.Last()
			got = append(got, hook{last, visible})
		}})
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]hook{{Last: 3, Visible: 1}}, got); d != "" {
		t.Fatalf("commit hooks (-want +got):\n%s", d)
	}
}

// A replica's position (what its writer predicts after) is never behind
// what its readers can read: a host that has seen another's write
// predicts after it. Host a writes; every time b's log moves, b's
// position already counts what b's readers see.
func TestAReplicasPositionIsNeverBehindItsReaders(t *testing.T) {
	c := natstest.Single(t)
	a, b := host(t, c, "a", t.TempDir()), host(t, c, "b", t.TempDir())
	const n = 200
	behind := make(chan string, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			last, moved := b.Last()
			if events, _ := b.a.position(); events < last {
				select {
				case behind <- fmt.Sprintf("b's readers see event %d, its position is at %d", last, events):
				default:
				}
			}
			if last >= n {
				return
			}
			select {
			case <-moved:
			case <-t.Context().Done():
				return
			}
		}
	}()
	for i := range n {
		appendOne(t, a, fmt.Sprintf("T%d", i%7), i)
	}
	<-done
	select {
	case msg := <-behind:
		t.Fatal(msg)
	default:
	}
}
