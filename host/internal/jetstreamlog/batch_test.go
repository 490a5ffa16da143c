package jetstreamlog

import (
	"fmt"
	"testing"

	"github.com/baton-run/baton/host/internal/eventlog"
	"github.com/baton-run/baton/host/internal/natstest"
	"github.com/google/go-cmp/cmp"
)

// replicaView is everything a host reads of its replica.
type replicaView struct {
	Events       []eventlog.Record
	Outbox       []eventlog.StoredEffect
	Heads        []eventlog.Head
	Live         []string
	Archive      []eventlog.ArchivePart
	Deliveries   []eventlog.StoredDelivery
	TargetStates []eventlog.TargetState
	Receipt      string
}

func view(t *testing.T, l *Log) replicaView {
	t.Helper()
	var v replicaView
	var err error
	must := func(e error) {
		t.Helper()
		if e != nil && err == nil {
			err = e
		}
	}
	v.Events, err = l.After(0, 0)
	var e error
	v.Outbox, e = l.Outbox()
	must(e)
	v.Heads, e = l.Heads("", 0)
	must(e)
	v.Live, e = l.LiveThreads()
	must(e)
	v.Archive, e = l.Archive("T", 0, 10, 100)
	must(e)
	v.Deliveries, e = l.Deliveries("")
	must(e)
	v.TargetStates, e = l.TargetStates()
	must(e)
	r, _, e := l.Receipt("cmd")
	must(e)
	v.Receipt = string(r)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// Every part of a decided write reaches every host's replica: events,
// effects and their removal, receipt, head, live marker, archive parts,
// notifications, their updates and removal, and target states.
func TestEveryPartOfABatchReachesEveryReplica(t *testing.T) {
	c := natstest.Single(t)
	a, b := host(t, c, "a", t.TempDir()), host(t, c, "b", t.TempDir())
	_, ids, err := a.Append(eventlog.Batch{
		Events:    []eventlog.Pending{event("T", 0), event("T", 1)},
		Effects:   []eventlog.Effect{{ThreadID: "T", Data: []byte("e0")}, {ThreadID: "T", Data: []byte("e1")}},
		CommandID: "cmd", Receipt: func(last uint64) []byte { return fmt.Appendf(nil, `{"last":%d}`, last) },
		ThreadID: "T", Head: func(last uint64) []byte { return fmt.Appendf(nil, "head@%d", last) }, Live: eventlog.LiveSet,
		Archive:    []eventlog.ArchivePart{{Ordinal: 1, Part: 0, Data: []byte("part")}},
		Deliveries: []eventlog.Delivery{{Target: "http://127.0.0.1/hook", Event: 1, Value: func(seq uint64) []byte { return fmt.Appendf(nil, "about %d", seq) }}},
		TargetStates: []eventlog.TargetState{{Target: "http://127.0.0.1/hook", Value: []byte("state")},
			{Target: "http://127.0.0.1/gone", Value: []byte("old")}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{"2.0", "2.1"}, ids); d != "" {
		t.Fatalf("effect ids (-want +got):\n%s", d)
	}
	// Host b performs an effect and delivers, a's replica hears of it.
	if err := b.EffectDone(eventlog.EffectRef{ThreadID: "T", ID: ids[0]}); err != nil {
		t.Fatal(err)
	}
	if err := b.UpdateDelivery(eventlog.StoredDelivery{DeliveryRef: eventlog.DeliveryRef{Target: "http://127.0.0.1/hook", Seq: 2}, Value: []byte("tried once")}); err != nil {
		t.Fatal(err)
	}
	if err := b.DeliveryDone(nil, eventlog.TargetState{Target: "http://127.0.0.1/gone"}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.Append(eventlog.Batch{ThreadID: "T", Live: eventlog.LiveClear, Events: []eventlog.Pending{event("T", 2)}}); err != nil {
		t.Fatal(err)
	}
	waitLast(t, a, 3)
	want := replicaView{
		Outbox:       []eventlog.StoredEffect{{ID: "2.1", ThreadID: "T", Data: []byte("e1")}},
		Heads:        []eventlog.Head{{ThreadID: "T", Data: []byte("head@2")}},
		Archive:      []eventlog.ArchivePart{{Ordinal: 1, Part: 0, Data: []byte("part")}},
		Deliveries:   []eventlog.StoredDelivery{{DeliveryRef: eventlog.DeliveryRef{Target: "http://127.0.0.1/hook", Seq: 2}, Value: []byte("tried once")}},
		TargetStates: []eventlog.TargetState{{Target: "http://127.0.0.1/hook", Value: []byte("state")}},
		Receipt:      `{"last":2}`,
	}
	for _, l := range []*Log{a, b} {
		got := view(t, l)
		var events []string
		for _, r := range got.Events {
			events = append(events, fmt.Sprintf("%d %s %s", r.Sequence, r.ThreadID, r.Data))
		}
		if d := cmp.Diff([]string{`1 T {"i":0}`, `2 T {"i":1}`, `3 T {"i":2}`}, events); d != "" {
			t.Fatalf("host %s's events (-want +got):\n%s", l.host, d)
		}
		got.Events = nil
		if d := cmp.Diff(want, got); d != "" {
			t.Fatalf("host %s's replica (-want +got):\n%s", l.host, d)
		}
	}
}
