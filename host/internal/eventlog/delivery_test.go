package eventlog

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"
)

// Notifications: written in the batch of the event they are about, under
// that event's sequence, read back by target in event order across a
// reopen, rewritten and removed; a batch that names an event it lacks, or
// a target a key cannot hold, writes nothing.
func TestDeliveries(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	ev := func(n int) []Pending {
		out := make([]Pending, n)
		for i := range out {
			out[i] = Pending{ThreadID: "a", Type: "x.happened", At: time.Unix(1, 0), Data: json.RawMessage(`{}`)}
		}
		return out
	}
	value := func(what string) func(uint64) []byte {
		return func(seq uint64) []byte { return fmt.Appendf(nil, "%s@%d", what, seq) }
	}
	for _, bad := range []Batch{
		{Deliveries: []Delivery{{Target: "http://x", Event: 0, Value: value("v")}}},
		{Events: ev(1), Deliveries: []Delivery{{Target: "http://x", Event: 1, Value: value("v")}}},
		{Events: ev(1), Deliveries: []Delivery{{Target: "", Event: 0, Value: value("v")}}},
		{Events: ev(1), Deliveries: []Delivery{{Target: "http://x\x00", Event: 0, Value: value("v")}}},
		{DeliveryUpdates: []StoredDelivery{{DeliveryRef: DeliveryRef{Target: ""}}}},
	} {
		if _, _, err := s.Append(bad); err == nil {
			t.Errorf("batch %+v was accepted", bad)
		}
	}
	if last, _ := s.Last(); last != 0 {
		t.Fatalf("refused batches wrote events: last %d", last)
	}
	if _, _, err := s.Append(Batch{Events: ev(3), Deliveries: []Delivery{
		{Target: "http://b", Event: 2, Value: value("b")},
		{Target: "http://a", Event: 0, Value: value("a")},
		{Target: "http://a", Event: 2, Value: value("a")},
	}}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Append(Batch{Events: ev(1), Deliveries: []Delivery{{Target: "http://a", Event: 0, Value: value("a")}}}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if s, err = Open(dir, nil); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got := func(target string) string {
		out, err := s.Deliveries(target)
		if err != nil {
			t.Fatal(err)
		}
		var b []string
		for _, d := range out {
			b = append(b, fmt.Sprintf("%s:%d=%s", d.Target, d.Seq, d.Value))
		}
		return fmt.Sprint(b)
	}
	if g := got(""); g != "[http://a:1=a@1 http://a:3=a@3 http://a:4=a@4 http://b:3=b@3]" {
		t.Fatalf("every target's notifications: %s", g)
	}
	if g := got("http://a"); g != "[http://a:1=a@1 http://a:3=a@3 http://a:4=a@4]" {
		t.Fatalf("target a's notifications: %s", g)
	}
	if err := s.UpdateDelivery(StoredDelivery{DeliveryRef: DeliveryRef{Target: "http://a", Seq: 3}, Value: []byte("tried")}); err != nil {
		t.Fatal(err)
	}
	if err := s.DeliveryDone([]DeliveryRef{{Target: "http://a", Seq: 1}, {Target: "http://b", Seq: 3}},
		TargetState{Target: "http://a", Value: []byte("1 delivered")}, TargetState{Target: "http://b", Value: []byte("1 delivered")}); err != nil {
		t.Fatal(err)
	}
	if err := s.DeliveryDone(nil); err != nil {
		t.Fatal(err)
	}
	if err := s.DeliveryDone(nil, TargetState{Target: "http://b"}); err != nil {
		t.Fatal(err)
	}
	if states, err := s.TargetStates(); err != nil || fmt.Sprint(states) != "[{http://a [49 32 100 101 108 105 118 101 114 101 100]}]" {
		t.Fatalf("target states %v, %v", states, err)
	}
	if _, _, err := s.Append(Batch{TargetStates: []TargetState{{Target: ""}}}); err == nil {
		t.Error("a target state without a target was accepted")
	}
	if g := got(""); g != "[http://a:3=tried http://a:4=a@4]" {
		t.Fatalf("after an update and removals: %s", g)
	}
	if last, _ := s.Last(); last != 4 {
		t.Fatalf("updates and removals wrote events: last %d, want 4", last)
	}
	if _, err := parseDeliveryKey([]byte("n")); err == nil {
		t.Error("bad notification key accepted")
	}
}
