package eventlogtest

import (
	"cmp"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/baton-run/baton/host/internal/eventlog"
	gocmp "github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// Many goroutines (on every host, for a shared log) append batches of two
// events at once: the sequences are 1..N with no gap and no repeat, each
// batch's are consecutive, every log reads the same records, and each
// thread's events are in the order its writer appended them.
func testConcurrentAppends(t *testing.T, h Harness) {
	logs := writers(t, h, h.Open(t), 3)
	const goroutines, commits = 8, 20
	byWriter := make([][]eventlog.Record, goroutines)
	var wg sync.WaitGroup
	for w := range goroutines {
		l := logs[w%len(logs)]
		wg.Go(func() {
			th := fmt.Sprintf("w%d", w)
			for i := range commits {
				evs := events(th, 2*i, 2)
				recs, _, err := l.Append(eventlog.Batch{Events: evs, ThreadID: th})
				if err != nil {
					t.Errorf("writer %d, commit %d: %v", w, i, err)
					return
				}
				if len(recs) != 2 {
					t.Errorf("writer %d, commit %d: %d records for 2 events", w, i, len(recs))
					return
				}
				if diff := gocmp.Diff(records(recs[0].Sequence, evs...), recs); diff != "" {
					t.Errorf("writer %d, commit %d: records (-want +got):\n%s", w, i, diff)
					return
				}
				byWriter[w] = append(byWriter[w], recs...)
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	var all []eventlog.Record
	for _, recs := range byWriter {
		all = append(all, recs...)
	}
	slices.SortFunc(all, func(a, b eventlog.Record) int { return cmp.Compare(a.Sequence, b.Sequence) })
	seqs, want := make([]uint64, len(all)), make([]uint64, goroutines*commits*2)
	for i := range all {
		seqs[i] = all[i].Sequence
	}
	for i := range want {
		want[i] = uint64(i + 1)
	}
	if diff := gocmp.Diff(want, seqs); diff != "" {
		t.Fatalf("sequences of the appended events (-want +got):\n%s", diff)
	}
	catchUp(t, h, uint64(len(want)), logs...)
	for i, l := range logs {
		if last, _ := l.Last(); last != uint64(len(want)) {
			t.Errorf("log %d: last %d, want %d", i, last, len(want))
		}
		if diff := gocmp.Diff(all, readAll(t, l)); diff != "" {
			t.Errorf("log %d: events (-appended +read):\n%s", i, diff)
		}
		for w, recs := range byWriter {
			got, err := l.ThreadAfter(fmt.Sprintf("w%d", w), 0, 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			if diff := gocmp.Diff(recs, got); diff != "" {
				t.Errorf("log %d: thread w%d's events (-appended +read):\n%s", i, w, diff)
			}
		}
	}
}

// A thread's events are read in order, after a sequence, up to one, and
// up to a limit; the global log is read the same way; HasThreadEvent
// tells a thread's events from others'.
func testThreadReads(t *testing.T, h Harness) {
	l := h.Open(t)
	var all []eventlog.Record
	all = append(all, appendEvents(t, l, 1, event("a", 1), event("a", 2))...)
	all = append(all, appendEvents(t, l, 3, event("b", 3))...)
	all = append(all, appendEvents(t, l, 4, event("a", 4), event("b", 5), event("a", 6))...)
	all = append(all, appendEvents(t, l, 7, event("a", 7))...)
	at := func(seqs ...uint64) []eventlog.Record {
		var out []eventlog.Record
		for _, s := range seqs {
			out = append(out, all[s-1])
		}
		return out
	}
	for _, c := range []struct {
		thread             string
		after, upTo, limit int
		want               []eventlog.Record
	}{
		{"a", 0, 0, 0, at(1, 2, 4, 6, 7)},
		{"b", 0, 0, 0, at(3, 5)},
		{"a", 2, 0, 0, at(4, 6, 7)},
		{"a", 1, 6, 0, at(2, 4, 6)},
		{"a", 0, 0, 2, at(1, 2)},
		{"a", 2, 6, 1, at(4)},
		{"a", 3, 5, 0, at(4)},
		{"a", 7, 0, 0, nil},
		{"a", 9, 0, 0, nil},
		{"none", 0, 0, 0, nil},
	} {
		got, err := l.ThreadAfter(c.thread, uint64(c.after), uint64(c.upTo), c.limit)
		if err != nil {
			t.Fatalf("ThreadAfter(%s, %d, %d, %d): %v", c.thread, c.after, c.upTo, c.limit, err)
		}
		if diff := gocmp.Diff(c.want, got, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("ThreadAfter(%s, after %d, up to %d, limit %d) (-want +got):\n%s", c.thread, c.after, c.upTo, c.limit, diff)
		}
	}
	for _, c := range []struct {
		after, limit int
		want         []eventlog.Record
	}{
		{0, 0, all},
		{3, 4, at(4, 5, 6, 7)},
		{2, 2, at(3, 4)},
		{6, 0, at(7)},
		{7, 0, nil},
		{8, 0, nil},
	} {
		got, err := l.After(uint64(c.after), c.limit)
		if err != nil {
			t.Fatalf("After(%d, %d): %v", c.after, c.limit, err)
		}
		if diff := gocmp.Diff(c.want, got, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("After(%d, limit %d) (-want +got):\n%s", c.after, c.limit, diff)
		}
	}
	for _, c := range []struct {
		thread string
		seq    uint64
		want   bool
	}{
		{"a", 1, true}, {"a", 6, true}, {"a", 3, false}, {"b", 3, true}, {"b", 4, false},
		{"a", 99, false}, {"none", 1, false},
	} {
		got, err := l.HasThreadEvent(c.thread, c.seq)
		if err != nil {
			t.Fatalf("HasThreadEvent(%s, %d): %v", c.thread, c.seq, err)
		}
		if got != c.want {
			t.Errorf("HasThreadEvent(%s, %d) = %v, want %v", c.thread, c.seq, got, c.want)
		}
	}
}

// Last's channel is closed when a later append commits, and not before;
// a reader that starts from sequence k and follows the log (on another
// host, for a shared log) while appends run sees every later event once,
// in order.
func testSubscription(t *testing.T, h Harness) {
	l := h.Open(t)
	last, changed := l.Last()
	if last != 0 {
		t.Fatalf("a fresh log's last sequence is %d", last)
	}
	select {
	case <-changed:
		t.Fatal("Last's channel was closed before any append")
	default:
	}
	before := appendEvents(t, l, 1, events("a", 1, 5)...)
	waitClosed(t, changed, "Last's channel after an append")

	logs := writers(t, h, l, 3)
	reader := logs[len(logs)-1]
	const k, goroutines, commits = 3, 4, 10
	total := uint64(len(before) + goroutines*commits)
	read := make(chan []eventlog.Record, 1)
	go func() {
		// It reads in pages of 7, as a subscription that sends what it
		// has and waits for more.
		var got []eventlog.Record
		after := uint64(k)
		for after < total {
			_, changed := reader.Last()
			recs, err := reader.After(after, 7)
			if err != nil {
				t.Errorf("reader after %d: %v", after, err)
				break
			}
			got = append(got, recs...)
			if len(recs) > 0 {
				after = recs[len(recs)-1].Sequence
				continue
			}
			select {
			case <-changed:
			case <-time.After(waitBound):
				t.Errorf("reader after %d: nothing more in %v, want up to %d", after, waitBound, total)
				read <- got
				return
			}
		}
		read <- got
	}()
	var wg sync.WaitGroup
	for w := range goroutines {
		l := logs[w%len(logs)]
		wg.Go(func() {
			for i := range commits {
				if _, _, err := l.Append(eventlog.Batch{Events: []eventlog.Pending{event(fmt.Sprintf("w%d", w), i)}}); err != nil {
					t.Errorf("writer %d: %v", w, err)
					return
				}
			}
		})
	}
	wg.Wait()
	got := <-read
	catchUp(t, h, total, logs...)
	want, err := reader.After(k, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(want) != int(total-k) || want[0].Sequence != k+1 {
		t.Fatalf("the log after %d has %d events, want %d from %d", k, len(want), total-k, k+1)
	}
	if diff := gocmp.Diff(want, got); diff != "" {
		t.Errorf("events the following reader saw (-log +reader):\n%s", diff)
	}
}

// waitClosed fails the test unless ch is closed within waitBound.
func waitClosed(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(waitBound):
		t.Fatalf("%s is not closed after %v", what, waitBound)
	}
}

// OnCommit runs once per batch, with the batch's last sequence, before a
// reader of the log that appended it can read its events: a reader
// following the log while many goroutines append finds every event it
// reads already hooked.
func testOnCommit(t *testing.T, h Harness) {
	l := h.Open(t)
	// First one batch whose hook holds on until the test has looked: its
	// events are not readable yet.
	entered, release := make(chan uint64), make(chan struct{})
	appended := make(chan []eventlog.Record, 1)
	go func() {
		recs, _, err := l.Append(eventlog.Batch{Events: events("h", 1, 2), OnCommit: func(last uint64) {
			entered <- last
			<-release
		}})
		if err != nil {
			t.Errorf("append: %v", err)
		}
		appended <- recs
	}()
	select {
	case last := <-entered:
		if last != 2 {
			t.Errorf("the hook of a first batch of two events was given %d, want 2", last)
		}
	case recs := <-appended:
		t.Fatalf("an append returned %v without running its commit hook", recs)
	}
	if last, _ := l.Last(); last != 0 {
		t.Errorf("last %d while the first batch's hook runs, want 0", last)
	}
	if recs := readAll(t, l); len(recs) != 0 {
		t.Errorf("events readable while their batch's hook runs: %v", recs)
	}
	close(release)
	if recs := <-appended; len(recs) != 2 {
		t.Fatalf("the held batch appended %v", recs)
	}
	waitFor(t, l, 2)

	// Then many batches at once, and a reader following them.
	const goroutines, commits = 6, 15
	var mu sync.Mutex
	calls := map[uint64]int{}                   // the batches' last sequences, by the hooks
	hooked := map[uint64]bool{1: true, 2: true} // every event's sequence, by the hooks (the held batch's above)
	wantCalls := map[uint64]int{}               // the batches' last sequences, by Append
	stop := make(chan struct{})
	readerErr := make(chan error, 1)
	go func() {
		var after uint64
		for {
			_, changed := l.Last()
			recs, err := l.After(after, 0)
			if err != nil {
				readerErr <- err
				return
			}
			mu.Lock()
			for _, r := range recs {
				if !hooked[r.Sequence] {
					mu.Unlock()
					readerErr <- fmt.Errorf("event %d was readable before its batch's commit hook ran", r.Sequence)
					return
				}
				after = r.Sequence
			}
			mu.Unlock()
			select {
			case <-changed:
			case <-stop:
				readerErr <- nil
				return
			}
		}
	}()
	var wg sync.WaitGroup
	for w := range goroutines {
		wg.Go(func() {
			for i := range commits {
				n := 1 + (w+i)%3
				recs, _, err := l.Append(eventlog.Batch{Events: events(fmt.Sprintf("w%d", w), i, n), OnCommit: func(last uint64) {
					mu.Lock()
					defer mu.Unlock()
					calls[last]++
					for s := last - uint64(n) + 1; s <= last; s++ {
						hooked[s] = true
					}
				}})
				if err != nil {
					t.Errorf("writer %d: %v", w, err)
					return
				}
				mu.Lock()
				wantCalls[recs[len(recs)-1].Sequence]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(stop)
	if err := <-readerErr; err != nil {
		t.Fatal(err)
	}
	if diff := gocmp.Diff(wantCalls, calls); diff != "" {
		t.Errorf("commit hook calls by last sequence (-one per batch +got):\n%s", diff)
	}
}

// A log reopened (its host restarted) has every event it had, and goes on
// from the next sequence: no gap, none given twice.
func testRestart(t *testing.T, h Harness) {
	l := h.Open(t)
	want := appendEvents(t, l, 1, events("a", 1, 3)...)
	l = h.Reopen(t, l)
	if last, _ := l.Last(); last != 3 {
		t.Fatalf("last %d after a restart, want 3", last)
	}
	if diff := gocmp.Diff(want, readAll(t, l)); diff != "" {
		t.Fatalf("events after a restart (-before +after):\n%s", diff)
	}
	want = append(want, appendEvents(t, l, 4, event("b", 4), event("a", 5))...)
	l = h.Reopen(t, l)
	want = append(want, appendEvents(t, l, 6, event("a", 6))...)
	if diff := gocmp.Diff(want, readAll(t, l)); diff != "" {
		t.Errorf("events after a second restart (-want +got):\n%s", diff)
	}
	got, err := l.ThreadAfter("a", 0, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if diff := gocmp.Diff([]eventlog.Record{want[0], want[1], want[2], want[4], want[5]}, got); diff != "" {
		t.Errorf("thread a after restarts (-want +got):\n%s", diff)
	}
}
