// Package eventlogtest is the conformance suite of eventlog.Log: every
// behaviour a host relies on, run against any implementation. An
// implementation's test file builds a Harness (how to open its log, reopen
// it, and, for a shared log, open another writer on it) and calls Run.
//
// An implementation's test file wires it so (the jetstreamlog package's
// Peer opens another host's client on the stream l is on, which its
// harness remembers when it opens l):
//
//	func TestConformance(t *testing.T) {
//		eventlogtest.Run(t, eventlogtest.Harness{
//			Open:   func(t *testing.T) eventlog.Log { /* a fresh log, closed at t.Cleanup */ },
//			Reopen: func(t *testing.T, old eventlog.Log) eventlog.Log { /* old.Close(), then open it again */ },
//			Peer:   func(t *testing.T, l eventlog.Log) eventlog.Log { /* another writer on l's log */ },
//		})
//	}
//
// The suite asserts whole values (records, outbox entries, heads) rather
// than counts, so that an implementation that returns the right number of
// the wrong things fails. It waits on the log's own signals (Last's
// channel) and never on a guessed time; the only timers are bounds after
// which a wait that should have ended is reported as a failure.
//
// The code is split by job: this file holds the Harness, Run and the
// helpers every test uses; sequence.go the global sequence, thread reads,
// subscriptions, commit hooks and restarts; state.go what a batch writes
// besides its events (receipts, outbox, thread state, parts,
// notifications, metadata); refusals.go bad input and a closed log;
// linearize.go the linearizability check of appends and receipts;
// shared.go what hosts sharing a log see of each other's decisions.
package eventlogtest

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/baton-run/baton/host/internal/eventlog"
	"github.com/google/go-cmp/cmp"
)

// Harness says how the suite gets the logs it tests.
type Harness struct {
	// Open returns a fresh, empty log. The harness closes it when the
	// test ends (t.Cleanup); the suite may close it before, so a second
	// Close must be harmless.
	Open func(t *testing.T) eventlog.Log
	// Reopen closes old and opens the same log again, as a host that
	// restarts does; the harness closes the new one when the test ends.
	// Old may be closed already.
	Reopen func(t *testing.T, old eventlog.Log) eventlog.Log
	// Peer opens another writer on the same log, as a second host would.
	// Nil when the implementation has one writer (the Pebble store).
	Peer func(t *testing.T, l eventlog.Log) eventlog.Log
	// WaitCaughtUp, when set, returns once every log has read all that
	// was committed to the log they share. The suite waits on each log's
	// Last as well; this is for state a peer learns by other means.
	WaitCaughtUp func(t *testing.T, logs ...eventlog.Log)
	// Faults, when set, breaks and mends what the log runs on (stops and
	// starts a server, say) while the linearizability check's workload
	// runs: it is called once, on a goroutine of its own, and returns soon
	// after stop is closed, with what it broke mended. It may fail the
	// test with t.Errorf (t.Fatalf ends only its goroutine). Nil: no
	// faults.
	Faults func(t *testing.T, stop <-chan struct{})
}

// Run runs the suite, one subtest per behaviour, each on a fresh log.
func Run(t *testing.T, h Harness) {
	if h.Open == nil || h.Reopen == nil {
		t.Fatal("eventlogtest: the harness needs Open and Reopen")
	}
	for _, c := range []struct {
		name string
		run  func(*testing.T, Harness)
	}{
		{"ConcurrentAppendsAreGapless", testConcurrentAppends},
		{"ThreadReads", testThreadReads},
		{"Subscription", testSubscription},
		{"OnCommit", testOnCommit},
		{"Restart", testRestart},
		{"Receipts", testReceipts},
		{"Outbox", testOutbox},
		{"ThreadState", testThreadState},
		{"Archive", testArchive},
		{"Deliveries", testDeliveries},
		{"Meta", testMeta},
		{"BadInput", testBadInput},
		{"Closed", testClosed},
		{"Linearizable", testLinearizable},
		{"SharedDecisions", testSharedDecisions},
	} {
		t.Run(c.name, func(t *testing.T) { c.run(t, h) })
	}
}

// writers returns the log and, for a shared log, n-1 peers on it: the
// writers of a test that runs on every host.
func writers(t *testing.T, h Harness, l eventlog.Log, n int) []eventlog.Log {
	logs := []eventlog.Log{l}
	if h.Peer != nil {
		for len(logs) < n {
			logs = append(logs, h.Peer(t, l))
		}
	}
	return logs
}

// waitBound is how long a wait that should end soon may take before the
// suite reports it: a bound on a failure, not a guess at a success.
const waitBound = 30 * time.Second

// waitFor returns once the log's Last is at least seq.
func waitFor(t *testing.T, l eventlog.Log, seq uint64) {
	t.Helper()
	timeout := time.NewTimer(waitBound)
	defer timeout.Stop()
	for {
		last, changed := l.Last()
		if last >= seq {
			return
		}
		select {
		case <-changed:
			if _, again := l.Last(); again == changed {
				t.Fatalf("the log closed at sequence %d while a reader waited for %d", last, seq)
			}
		case <-timeout.C:
			t.Fatalf("the log's last sequence is %d after %v, want %d", last, waitBound, seq)
		}
	}
}

// catchUp returns once every log can read up to seq.
func catchUp(t *testing.T, h Harness, seq uint64, logs ...eventlog.Log) {
	t.Helper()
	if h.WaitCaughtUp != nil {
		h.WaitCaughtUp(t, logs...)
	}
	for _, l := range logs {
		waitFor(t, l, seq)
	}
}

// event is the i-th event of a thread; its data is compact JSON, as the
// log stores it, so that a record read back is the record appended.
func event(thread string, i int) eventlog.Pending {
	return eventlog.Pending{ThreadID: thread, Type: "x.happened", At: time.Unix(int64(i), 0).UTC(),
		Data: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))}
}

// events are n events of a thread, numbered from i.
func events(thread string, i, n int) []eventlog.Pending {
	out := make([]eventlog.Pending, n)
	for k := range out {
		out[k] = event(thread, i+k)
	}
	return out
}

// records are the events as the log keeps them from sequence first on.
func records(first uint64, evs ...eventlog.Pending) []eventlog.Record {
	out := make([]eventlog.Record, len(evs))
	for i, e := range evs {
		out[i] = eventlog.Record{Sequence: first + uint64(i), ThreadID: e.ThreadID, Type: e.Type, At: e.At.UTC(), Data: e.Data}
	}
	return out
}

// mustAppend appends a batch and fails the test on an error.
func mustAppend(t *testing.T, l eventlog.Log, b eventlog.Batch) ([]eventlog.Record, []string) {
	t.Helper()
	recs, ids, err := l.Append(b)
	if err != nil {
		t.Fatalf("append: %v", err)
	}
	return recs, ids
}

// appendEvents appends events as one batch and checks that the log
// returns them as records with consecutive sequences from first.
func appendEvents(t *testing.T, l eventlog.Log, first uint64, evs ...eventlog.Pending) []eventlog.Record {
	t.Helper()
	recs, _ := mustAppend(t, l, eventlog.Batch{Events: evs})
	if diff := cmp.Diff(records(first, evs...), recs); diff != "" {
		t.Fatalf("appended records (-want +got):\n%s", diff)
	}
	return recs
}

// readAll is every event the log has.
func readAll(t *testing.T, l eventlog.Log) []eventlog.Record {
	t.Helper()
	recs, err := l.After(0, 0)
	if err != nil {
		t.Fatalf("read the log: %v", err)
	}
	return recs
}
