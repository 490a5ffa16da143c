package eventlogtest

import (
	"fmt"
	"testing"

	"github.com/baton-run/baton/host/internal/eventlog"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// On a shared log the writes that decide something are the log's, not a
// host's: what one host appends (events, receipt, effects, notifications)
// the other reads, and what the other then settles (an effect performed,
// a notification tried, delivered) the first sees settled. A log with one
// writer has nothing to share: the test is skipped.
func testSharedDecisions(t *testing.T, h Harness) {
	if h.Peer == nil {
		t.Skip("the log has one writer")
	}
	a := h.Open(t)
	b := h.Peer(t, a)
	value := func(seq uint64) []byte { return fmt.Appendf(nil, "v@%d", seq) }
	evs := events("s", 1, 2)
	recs, ids := mustAppend(t, a, eventlog.Batch{Events: evs, CommandID: "c1",
		Receipt:    func(last uint64) []byte { return receiptOf("c1", last) },
		Effects:    []eventlog.Effect{{ThreadID: "s", Data: []byte("e")}},
		Deliveries: []eventlog.Delivery{{Target: "http://x", Event: 1, Value: value}}})
	if diff := cmp.Diff(records(1, evs...), recs); diff != "" {
		t.Fatalf("appended records (-want +got):\n%s", diff)
	}
	catchUp(t, h, 2, a, b)

	got, err := b.ThreadAfter("s", 0, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(recs, got); diff != "" {
		t.Errorf("the other host's read of the thread (-appended +read):\n%s", diff)
	}
	if has, err := b.HasThreadEvent("s", 2); !has || err != nil {
		t.Errorf("the other host: HasThreadEvent(s, 2) = %v, %v", has, err)
	}
	r, found, err := b.Receipt("c1")
	if err != nil || !found {
		t.Fatalf("the other host's receipt of c1: found %v, %v", found, err)
	}
	if diff := cmp.Diff(string(receiptOf("c1", 2)), string(r)); diff != "" {
		t.Errorf("the other host's receipt of c1 (-built +read):\n%s", diff)
	}
	effect := []eventlog.StoredEffect{{ID: ids[0], ThreadID: "s", Data: []byte("e")}}
	if diff := cmp.Diff(map[string][]eventlog.StoredEffect{"s": effect}, outboxByThread(t, b)); diff != "" {
		t.Errorf("the other host's outbox (-want +got):\n%s", diff)
	}
	notification := eventlog.StoredDelivery{DeliveryRef: eventlog.DeliveryRef{Target: "http://x", Seq: 2}, Value: []byte("v@2")}
	ds, err := b.Deliveries("")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]eventlog.StoredDelivery{notification}, ds); diff != "" {
		t.Errorf("the other host's notifications (-want +got):\n%s", diff)
	}

	// The other host settles them; the first sees them settled.
	if err := b.EffectDone(eventlog.EffectRef{ThreadID: "s", ID: ids[0]}); err != nil {
		t.Fatal(err)
	}
	notification.Value = []byte("tried")
	if err := b.UpdateDelivery(notification); err != nil {
		t.Fatal(err)
	}
	barrier(t, h, b, 3, a)
	if diff := cmp.Diff(map[string][]eventlog.StoredEffect{}, outboxByThread(t, a)); diff != "" {
		t.Errorf("the first host's outbox after the other performed the effect (-want +got):\n%s", diff)
	}
	ds, err = a.Deliveries("http://x")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]eventlog.StoredDelivery{notification}, ds); diff != "" {
		t.Errorf("the first host's notifications after the other tried one (-want +got):\n%s", diff)
	}
	if err := b.DeliveryDone([]eventlog.DeliveryRef{notification.DeliveryRef},
		eventlog.TargetState{Target: "http://x", Value: []byte("1 delivered")}); err != nil {
		t.Fatal(err)
	}
	barrier(t, h, b, 4, a)
	ds, err = a.Deliveries("")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]eventlog.StoredDelivery(nil), ds, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("the first host's notifications after the other delivered it (-want +got):\n%s", diff)
	}
	states, err := a.TargetStates()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]eventlog.TargetState{{Target: "http://x", Value: []byte("1 delivered")}}, states); diff != "" {
		t.Errorf("the first host's target states after the other delivered (-want +got):\n%s", diff)
	}
}

// barrier appends an event (sequence seq) on one host and waits until the
// others have read it: the writes that one host made before it, which a
// shared log orders among every host's, are then theirs to read too.
func barrier(t *testing.T, h Harness, on eventlog.Log, seq uint64, others ...eventlog.Log) {
	t.Helper()
	appendEvents(t, on, seq, event("barrier", int(seq)))
	catchUp(t, h, seq, append(others, on)...)
}
