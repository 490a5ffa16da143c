package eventlogtest

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/baton-run/baton/host/internal/eventlog"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// A batch the log cannot write fails with an error that names what was
// wrong, and writes nothing of itself: no event, receipt, head, live
// marker, effect or notification, and its commit hook does not run. The
// next batch gets sequence 1.
func testBadInput(t *testing.T, h Harness) {
	l := h.Open(t)
	notJSON := eventlog.Pending{ThreadID: "a", Type: "x.broken", At: time.Unix(1, 0), Data: json.RawMessage(`{"a":`)}
	deliver := func(target string, i int) []eventlog.Delivery {
		return []eventlog.Delivery{{Target: target, Event: i, Value: func(uint64) []byte { return []byte("v") }}}
	}
	for _, c := range []struct {
		name string
		b    eventlog.Batch
		want string
	}{
		{"effects without events", eventlog.Batch{Effects: []eventlog.Effect{{ThreadID: "a", Data: []byte("1")}}},
			"effects without an event"},
		{"a snapshot without events", eventlog.Batch{Snapshot: &eventlog.Snapshot{Body: []byte("x")}},
			"snapshot without an event"},
		{"a bad effect id", eventlog.Batch{Events: events("a", 1, 1), Done: []eventlog.EffectRef{{ThreadID: "a", ID: "1.x"}}},
			`bad effect id "1.x"`},
		{"data not JSON", eventlog.Batch{Events: []eventlog.Pending{event("a", 1), notJSON}},
			"event x.broken: data is not JSON"},
		{"a notification about an event the batch lacks", eventlog.Batch{Events: events("a", 1, 1), Deliveries: deliver("http://x", 1)},
			"names event 1 of a batch of 1"},
		{"a notification without events", eventlog.Batch{Deliveries: deliver("http://x", 0)},
			"names event 0 of a batch of 0"},
		{"a notification to no target", eventlog.Batch{Events: events("a", 1, 1), Deliveries: deliver("", 0)},
			`notification target "" is empty or holds a NUL byte`},
		{"a notification to a target with a NUL", eventlog.Batch{Events: events("a", 1, 1), Deliveries: deliver("http://x\x00", 0)},
			`notification target "http://x\x00" is empty or holds a NUL byte`},
		{"an update to no target", eventlog.Batch{Events: events("a", 1, 1),
			DeliveryUpdates: []eventlog.StoredDelivery{{DeliveryRef: eventlog.DeliveryRef{Seq: 1}}}},
			`notification target "" is empty`},
		{"a state of no target", eventlog.Batch{Events: events("a", 1, 1), TargetStates: []eventlog.TargetState{{Value: []byte("x")}}},
			`notification target "" is empty`},
	} {
		t.Run(strings.ReplaceAll(c.name, " ", "_"), func(t *testing.T) {
			b := c.b
			b.CommandID, b.Receipt = "bad", func(last uint64) []byte { return receiptOf("bad", last) }
			b.ThreadID, b.Head, b.Live = "a", head("H"), eventlog.LiveSet
			hooked := false
			if len(b.Events) > 0 {
				b.OnCommit = func(uint64) { hooked = true }
			}
			_, _, err := l.Append(b)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("append of %s: %v, want an error saying %q", c.name, err, c.want)
			}
			if hooked {
				t.Error("the commit hook ran for a refused batch")
			}
			checkNothingWritten(t, l)
		})
	}
	for _, id := range []string{"", "1", "1.x", "01.0", "-1.0", "1.0.0"} {
		want := fmt.Sprintf("bad effect id %q", id)
		if err := l.EffectDone(eventlog.EffectRef{ThreadID: "a", ID: id}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("EffectDone(%q): %v, want an error saying %s", id, err, want)
		}
		_, _, err := l.Append(eventlog.Batch{Events: events("a", 1, 1), Done: []eventlog.EffectRef{{ThreadID: "a", ID: id}}})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("append of a batch that performed effect %q: %v, want an error saying %s", id, err, want)
		}
	}
	checkNothingWritten(t, l)
	appendEvents(t, l, 1, event("a", 1))
}

// checkNothingWritten fails the test if the log holds anything a refused
// batch of the bad-input test could have written.
func checkNothingWritten(t *testing.T, l eventlog.Log) {
	t.Helper()
	if last, _ := l.Last(); last != 0 {
		t.Errorf("last %d after refused batches, want 0", last)
	}
	if recs := readAll(t, l); len(recs) != 0 {
		t.Errorf("refused batches wrote %v", recs)
	}
	if r, found, err := l.Receipt("bad"); found || err != nil {
		t.Errorf("a refused batch's receipt: %q, found %v, %v", r, found, err)
	}
	if hd, found, err := l.Head("a"); found || err != nil {
		t.Errorf("a refused batch's head: %q, found %v, %v", hd, found, err)
	}
	live, err := l.LiveThreads()
	if diff := cmp.Diff([]string(nil), live, cmpopts.EquateEmpty()); diff != "" || err != nil {
		t.Errorf("live threads after refused batches (%v) (-want +got):\n%s", err, diff)
	}
	out, err := l.Outbox()
	if len(out) != 0 || err != nil {
		t.Errorf("outbox after refused batches: %v, %v", out, err)
	}
	ds, err := l.Deliveries("")
	if len(ds) != 0 || err != nil {
		t.Errorf("notifications after refused batches: %v, %v", ds, err)
	}
	ts, err := l.TargetStates()
	if len(ts) != 0 || err != nil {
		t.Errorf("target states after refused batches: %v, %v", ts, err)
	}
}

// After Close a reader waiting for more is woken, and every call answers
// ErrClosed and writes nothing; a second Close is harmless; closing is not
// failing (Failed stays open); the log reopened has what it had before
// Close.
func testClosed(t *testing.T, h Harness) {
	l := h.Open(t)
	want := appendEvents(t, l, 1, events("a", 1, 3)...)
	mustAppend(t, l, eventlog.Batch{Events: events("a", 4, 1), CommandID: "c1",
		Receipt: func(last uint64) []byte { return receiptOf("c1", last) }})
	want = append(want, records(4, event("a", 4))...)
	checkNotFailed(t, l, "an open log")
	woken := make(chan error, 1)
	last, changed := l.Last()
	go func() {
		// A reader at the end of the log, waiting for more.
		<-changed
		_, err := l.After(last-1, 0)
		woken <- err
	}()
	if err := l.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	select {
	case err := <-woken:
		if !errors.Is(err, eventlog.ErrClosed) {
			t.Errorf("the woken reader's read: %v, want ErrClosed", err)
		}
	case <-time.After(waitBound):
		t.Fatalf("a reader waiting on Last was not woken by Close in %v", waitBound)
	}
	calls := map[string]func() error{
		"Append": func() error { _, _, err := l.Append(eventlog.Batch{Events: events("a", 9, 1)}); return err },
		"Append without events": func() error {
			_, _, err := l.Append(eventlog.Batch{CommandID: "c2", Receipt: func(uint64) []byte { return []byte("r") }})
			return err
		},
		"After":          func() error { _, err := l.After(0, 0); return err },
		"ThreadAfter":    func() error { _, err := l.ThreadAfter("a", 0, 0, 0); return err },
		"HasThreadEvent": func() error { _, err := l.HasThreadEvent("a", 1); return err },
		"Receipt":        func() error { _, _, err := l.Receipt("c1"); return err },
		"Outbox":         func() error { _, err := l.Outbox(); return err },
		"EffectDone":     func() error { return l.EffectDone(eventlog.EffectRef{ThreadID: "a", ID: "1.0"}) },
		"ThreadSnapshot": func() error { _, _, err := l.ThreadSnapshot("a"); return err },
		"Heads":          func() error { _, err := l.Heads("", 0); return err },
		"Head":           func() error { _, _, err := l.Head("a"); return err },
		"LiveThreads":    func() error { _, err := l.LiveThreads(); return err },
		"PutThreadState": func() error { return l.PutThreadState("a", []byte("h"), true, nil) },
		"PutArchive":     func() error { return l.PutArchive("a", []eventlog.ArchivePart{{Ordinal: 1, Data: []byte("p")}}) },
		"Archive":        func() error { _, err := l.Archive("a", 0, 1, 1); return err },
		"ArchiveBefore":  func() error { _, err := l.ArchiveBefore("a", 1, 0, 1, 1); return err },
		"Deliveries":     func() error { _, err := l.Deliveries(""); return err },
		"UpdateDelivery": func() error {
			return l.UpdateDelivery(eventlog.StoredDelivery{DeliveryRef: eventlog.DeliveryRef{Target: "http://x", Seq: 1}, Value: []byte("v")})
		},
		"DeliveryDone": func() error {
			return l.DeliveryDone([]eventlog.DeliveryRef{{Target: "http://x", Seq: 1}}, eventlog.TargetState{Target: "http://x", Value: []byte("v")})
		},
		"TargetStates": func() error { _, err := l.TargetStates(); return err },
		"Meta":         func() error { _, _, err := l.Meta("m"); return err },
		"SetMeta":      func() error { return l.SetMeta("m", []byte("v")) },
	}
	for name, call := range calls {
		if err := call(); !errors.Is(err, eventlog.ErrClosed) {
			t.Errorf("%s after Close: %v, want ErrClosed", name, err)
		}
	}
	if err := l.Close(); err != nil {
		t.Errorf("a second Close: %v", err)
	}
	checkNotFailed(t, l, "a log closed by its owner")
	l = h.Reopen(t, l)
	if diff := cmp.Diff(want, readAll(t, l)); diff != "" {
		t.Errorf("events after Close and reopening (-before Close +after):\n%s", diff)
	}
	if _, found, _ := l.Receipt("c2"); found {
		t.Error("an append after Close stored its receipt")
	}
	if _, found, _ := l.Meta("m"); found {
		t.Error("SetMeta after Close wrote a value")
	}
	if live, _ := l.LiveThreads(); len(live) != 0 {
		t.Errorf("PutThreadState after Close marked %v live", live)
	}
	if parts, _ := l.Archive("a", 0, 10, 10); len(parts) != 0 {
		t.Errorf("PutArchive after Close wrote %v", parts)
	}
	if states, _ := l.TargetStates(); len(states) != 0 {
		t.Errorf("DeliveryDone after Close wrote %v", states)
	}
}

// checkNotFailed fails the test if the log says it has failed.
func checkNotFailed(t *testing.T, l eventlog.Log, what string) {
	t.Helper()
	select {
	case <-l.Failed():
		t.Errorf("%s: Failed is closed (%v)", what, l.Failure())
	default:
	}
	if err := l.Failure(); err != nil {
		t.Errorf("%s: Failure() = %v, want nil", what, err)
	}
}
