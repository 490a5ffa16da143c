package eventlogtest

import (
	"fmt"
	"testing"

	"github.com/baton-run/baton/host/internal/eventlog"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// receiptOf is the receipt a test's command builds.
func receiptOf(cmd string, last uint64) []byte {
	return fmt.Appendf(nil, `{"command":%q,"last":%d}`, cmd, last)
}

// A command's receipt is exactly the bytes its builder made from the
// batch's last sequence, for a batch with events and for one without;
// a command never appended has none; receipts survive a restart.
func testReceipts(t *testing.T, h Harness) {
	l := h.Open(t)
	built := map[string][]byte{}
	builder := func(cmd string) func(uint64) []byte {
		return func(last uint64) []byte {
			built[cmd] = receiptOf(cmd, last)
			return built[cmd]
		}
	}
	appendEvents(t, l, 1, event("a", 1))
	mustAppend(t, l, eventlog.Batch{Events: events("a", 2, 2), CommandID: "c1", Receipt: builder("c1")})
	if diff := cmp.Diff(string(receiptOf("c1", 3)), string(built["c1"])); diff != "" {
		t.Fatalf("receipt of the batch of events 2 and 3 was not built from its last sequence, 3 (-want +got):\n%s", diff)
	}
	// A command that decided no event still has its receipt.
	if recs, _ := mustAppend(t, l, eventlog.Batch{CommandID: "c2", Receipt: builder("c2")}); len(recs) != 0 {
		t.Fatalf("a batch without events appended %v", recs)
	}
	if last, _ := l.Last(); last != 3 {
		t.Fatalf("last %d after a batch without events, want 3", last)
	}
	check := func(when string) {
		t.Helper()
		for _, cmd := range []string{"c1", "c2"} {
			got, found, err := l.Receipt(cmd)
			if err != nil || !found {
				t.Fatalf("%s: receipt of %s: found %v, %v", when, cmd, found, err)
			}
			if diff := cmp.Diff(string(built[cmd]), string(got)); diff != "" {
				t.Errorf("%s: receipt of %s (-built +stored):\n%s", when, cmd, diff)
			}
		}
		if got, found, err := l.Receipt("never"); found || err != nil {
			t.Errorf("%s: receipt of a command never appended: %q, found %v, %v", when, got, found, err)
		}
	}
	check("before a restart")
	l = h.Reopen(t, l)
	check("after a restart")
}

// outboxByThread groups the outbox by thread: the log promises each
// thread's effects in decided order, not an order among threads.
func outboxByThread(t *testing.T, l eventlog.Log) map[string][]eventlog.StoredEffect {
	t.Helper()
	out, err := l.Outbox()
	if err != nil {
		t.Fatalf("read the outbox: %v", err)
	}
	by := map[string][]eventlog.StoredEffect{}
	for _, e := range out {
		by[e.ThreadID] = append(by[e.ThreadID], e)
	}
	return by
}

// Effects are written with their events, under ids naming the batch's
// last sequence and their place in it; the outbox lists each thread's in
// decided order, across a restart; EffectDone removes one (and again
// without harm), and a batch's Done removes the ones it names.
func testOutbox(t *testing.T, h Harness) {
	l := h.Open(t)
	effect := func(th, data string) eventlog.Effect { return eventlog.Effect{ThreadID: th, Data: []byte(data)} }
	stored := func(th, id, data string) eventlog.StoredEffect {
		return eventlog.StoredEffect{ID: id, ThreadID: th, Data: []byte(data)}
	}
	for _, c := range []struct {
		b    eventlog.Batch
		want []string
	}{
		{eventlog.Batch{Events: events("a", 1, 1), Effects: []eventlog.Effect{effect("a", "a1"), effect("a", "a2")}}, []string{"1.0", "1.1"}},
		{eventlog.Batch{Events: events("b", 2, 1), Effects: []eventlog.Effect{effect("b", "b1")}}, []string{"2.0"}},
		{eventlog.Batch{Events: events("a", 3, 2), Effects: []eventlog.Effect{effect("a", "a3")}}, []string{"4.0"}},
		{eventlog.Batch{Events: events("a", 5, 1)}, []string{}},
	} {
		_, ids := mustAppend(t, l, c.b)
		if diff := cmp.Diff(c.want, ids, cmpopts.EquateEmpty()); diff != "" {
			t.Fatalf("effect ids (-want +got):\n%s", diff)
		}
	}
	want := map[string][]eventlog.StoredEffect{
		"a": {stored("a", "1.0", "a1"), stored("a", "1.1", "a2"), stored("a", "4.0", "a3")},
		"b": {stored("b", "2.0", "b1")},
	}
	if diff := cmp.Diff(want, outboxByThread(t, l)); diff != "" {
		t.Fatalf("outbox (-want +got):\n%s", diff)
	}
	l = h.Reopen(t, l)
	if diff := cmp.Diff(want, outboxByThread(t, l)); diff != "" {
		t.Fatalf("outbox after a restart (-want +got):\n%s", diff)
	}
	if err := l.EffectDone(eventlog.EffectRef{ThreadID: "a", ID: "1.0"}); err != nil {
		t.Fatal(err)
	}
	want = map[string][]eventlog.StoredEffect{
		"a": {stored("a", "1.1", "a2"), stored("a", "4.0", "a3")},
		"b": {stored("b", "2.0", "b1")},
	}
	if diff := cmp.Diff(want, outboxByThread(t, l)); diff != "" {
		t.Fatalf("outbox after EffectDone(1.0) (-want +got):\n%s", diff)
	}
	mustAppend(t, l, eventlog.Batch{Events: events("a", 6, 1),
		Done: []eventlog.EffectRef{{ThreadID: "a", ID: "4.0"}, {ThreadID: "b", ID: "2.0"}}})
	want = map[string][]eventlog.StoredEffect{"a": {stored("a", "1.1", "a2")}}
	if diff := cmp.Diff(want, outboxByThread(t, l)); diff != "" {
		t.Fatalf("outbox after a batch that performed 4.0 and 2.0 (-want +got):\n%s", diff)
	}
	// A host that cannot tell whether its removal committed removes again.
	if err := l.EffectDone(eventlog.EffectRef{ThreadID: "a", ID: "1.0"}); err != nil {
		t.Fatalf("EffectDone of an effect removed before: %v", err)
	}
	l = h.Reopen(t, l)
	if diff := cmp.Diff(want, outboxByThread(t, l)); diff != "" {
		t.Fatalf("outbox after removals and a restart (-want +got):\n%s", diff)
	}
}

// head builds a thread head that names the sequence it was built at.
func head(s string) func(uint64) []byte {
	return func(last uint64) []byte { return fmt.Appendf(nil, "%s@%d", s, last) }
}

// A thread's head, live marker and snapshot are written with its events;
// a snapshot's watermark is its batch's last sequence; heads are listed
// in thread id order, a page at a time; PutThreadState writes them
// without events. All of it survives a restart.
func testThreadState(t *testing.T, h Harness) {
	l := h.Open(t)
	mustAppend(t, l, eventlog.Batch{Events: events("a", 1, 1), ThreadID: "a", Head: head("A1"), Live: eventlog.LiveSet})
	mustAppend(t, l, eventlog.Batch{Events: events("b", 2, 1), ThreadID: "b", Head: head("B1"), Live: eventlog.LiveSet})
	mustAppend(t, l, eventlog.Batch{Events: events("a", 3, 2), ThreadID: "a", Head: head("A2"), Live: eventlog.LiveClear,
		Snapshot: &eventlog.Snapshot{Schema: 7, Seq: 99, Body: []byte(`{"x":1}`)}}) // the log sets the watermark
	mustAppend(t, l, eventlog.Batch{Events: events("c", 5, 1), ThreadID: "c", Head: head("C1")})
	l = h.Reopen(t, l)

	snapshot := func(th string) *eventlog.Snapshot {
		t.Helper()
		sn, found, err := l.ThreadSnapshot(th)
		if err != nil {
			t.Fatalf("snapshot of %s: %v", th, err)
		}
		if !found {
			return nil
		}
		return &sn
	}
	if diff := cmp.Diff(&eventlog.Snapshot{Schema: 7, Seq: 4, Body: []byte(`{"x":1}`)}, snapshot("a")); diff != "" {
		t.Errorf("snapshot of a (-want +got):\n%s", diff)
	}
	if sn := snapshot("b"); sn != nil {
		t.Errorf("b was given no snapshot, has %+v", sn)
	}
	live := func(want ...string) {
		t.Helper()
		got, err := l.LiveThreads()
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("live threads (-want +got):\n%s", diff)
		}
	}
	live("b")
	hd := func(th, data string) eventlog.Head { return eventlog.Head{ThreadID: th, Data: []byte(data)} }
	for _, c := range []struct {
		after string
		limit int
		want  []eventlog.Head
	}{
		{"", 0, []eventlog.Head{hd("a", "A2@4"), hd("b", "B1@2"), hd("c", "C1@5")}},
		{"", 2, []eventlog.Head{hd("a", "A2@4"), hd("b", "B1@2")}},
		{"a", 1, []eventlog.Head{hd("b", "B1@2")}},
		{"b", 0, []eventlog.Head{hd("c", "C1@5")}},
		{"a\x01", 0, []eventlog.Head{hd("b", "B1@2"), hd("c", "C1@5")}},
		{"c", 0, nil},
	} {
		got, err := l.Heads(c.after, c.limit)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(c.want, got, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("Heads(after %q, limit %d) (-want +got):\n%s", c.after, c.limit, diff)
		}
	}
	headOf := func(th string) string {
		t.Helper()
		b, found, err := l.Head(th)
		if err != nil {
			t.Fatal(err)
		}
		if !found {
			return "(none)"
		}
		return string(b)
	}
	if got := headOf("c"); got != "C1@5" {
		t.Errorf("head of c %q, want C1@5", got)
	}
	if got := headOf("zz"); got != "(none)" {
		t.Errorf("head of a thread never written: %q", got)
	}

	if err := l.PutThreadState("z", []byte("Z"), true, &eventlog.Snapshot{Schema: 1, Seq: 4, Body: []byte("{}")}); err != nil {
		t.Fatal(err)
	}
	if err := l.PutThreadState("b", []byte("B2"), false, nil); err != nil {
		t.Fatal(err)
	}
	l = h.Reopen(t, l)
	if diff := cmp.Diff(&eventlog.Snapshot{Schema: 1, Seq: 4, Body: []byte("{}")}, snapshot("z")); diff != "" {
		t.Errorf("snapshot put for z (-want +got):\n%s", diff)
	}
	if sn := snapshot("b"); sn != nil {
		t.Errorf("b was put no snapshot, has %+v", sn)
	}
	live("z")
	if got := headOf("b") + " " + headOf("z"); got != "B2 Z" {
		t.Errorf("heads put for b and z: %q, want \"B2 Z\"", got)
	}
}

// A thread's parts are written with the events that made them leave, or
// by themselves (a rebuild), and read back by ordinal, forwards or newest
// first from a cursor, without those numbered past what the reader's
// projection holds; another thread's are not among them.
func testArchive(t *testing.T, h Harness) {
	l := h.Open(t)
	part := func(o, p uint32) eventlog.ArchivePart {
		return eventlog.ArchivePart{Ordinal: o, Part: p, Data: fmt.Appendf(nil, `{"o":%d,"p":%d}`, o, p)}
	}
	parts := func(op ...uint32) []eventlog.ArchivePart {
		var out []eventlog.ArchivePart
		for i := 0; i < len(op); i += 2 {
			out = append(out, part(op[i], op[i+1]))
		}
		return out
	}
	mustAppend(t, l, eventlog.Batch{Events: events("t", 1, 1), ThreadID: "t", Archive: parts(1, 0, 2, 1, 0, 2)})
	mustAppend(t, l, eventlog.Batch{Events: events("u", 2, 1), ThreadID: "u",
		Archive: []eventlog.ArchivePart{{Ordinal: 1, Part: 0, Data: []byte("u's")}}})
	if err := l.PutArchive("t", parts(1, 3, 3, 4, 2, 1)); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		from, to, below uint32
		want            []eventlog.ArchivePart
	}{
		{0, 10, 10, parts(0, 2, 1, 0, 1, 3, 2, 1, 3, 4)},
		{1, 2, 10, parts(1, 0, 1, 3, 2, 1)},
		{1, 3, 3, parts(1, 0, 2, 1)}, // parts 3 and on left after the reader's projection
		{4, 9, 10, nil},
	} {
		got, err := l.Archive("t", c.from, c.to, c.below)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(c.want, got, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("Archive(t, %d..%d, below %d) (-want +got):\n%s", c.from, c.to, c.below, diff)
		}
	}
	var back []eventlog.ArchivePart
	o, p := uint32(1<<32-1), uint32(0)
	for {
		got, err := l.ArchiveBefore("t", o, p, 4, 2)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) > 2 {
			t.Fatalf("ArchiveBefore with limit 2 returned %d parts", len(got))
		}
		if len(got) == 0 {
			break
		}
		back = append(back, got...)
		o, p = got[len(got)-1].Ordinal, got[len(got)-1].Part
	}
	if diff := cmp.Diff(parts(2, 1, 1, 3, 1, 0, 0, 2), back); diff != "" {
		t.Errorf("parts newest first, below 4, two at a time (-want +got):\n%s", diff)
	}
	got, err := l.Archive("u", 0, 10, 10)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]eventlog.ArchivePart{{Ordinal: 1, Part: 0, Data: []byte("u's")}}, got); diff != "" {
		t.Errorf("thread u's parts (-want +got):\n%s", diff)
	}
}

// Notifications are written in the batch of the event they are about,
// under that event's sequence, read back by target in event order across
// a restart, rewritten and removed (again without harm); targets' states
// are written and removed with the removals. None of it adds an event.
func testDeliveries(t *testing.T, h Harness) {
	l := h.Open(t)
	value := func(what string) func(uint64) []byte {
		return func(seq uint64) []byte { return fmt.Appendf(nil, "%s@%d", what, seq) }
	}
	mustAppend(t, l, eventlog.Batch{Events: events("a", 1, 3), Deliveries: []eventlog.Delivery{
		{Target: "http://b", Event: 2, Value: value("b")},
		{Target: "http://a", Event: 0, Value: value("a")},
		{Target: "http://a", Event: 2, Value: value("a")},
	}})
	mustAppend(t, l, eventlog.Batch{Events: events("a", 4, 1), Deliveries: []eventlog.Delivery{{Target: "http://a", Event: 0, Value: value("a")}}})
	l = h.Reopen(t, l)
	stored := func(target string, seq uint64, v string) eventlog.StoredDelivery {
		return eventlog.StoredDelivery{DeliveryRef: eventlog.DeliveryRef{Target: target, Seq: seq}, Value: []byte(v)}
	}
	check := func(target string, want ...eventlog.StoredDelivery) {
		t.Helper()
		got, err := l.Deliveries(target)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("notifications to %q (-want +got):\n%s", target, diff)
		}
	}
	check("", stored("http://a", 1, "a@1"), stored("http://a", 3, "a@3"), stored("http://a", 4, "a@4"), stored("http://b", 3, "b@3"))
	check("http://a", stored("http://a", 1, "a@1"), stored("http://a", 3, "a@3"), stored("http://a", 4, "a@4"))
	check("http://c")
	if err := l.UpdateDelivery(stored("http://a", 3, "tried")); err != nil {
		t.Fatal(err)
	}
	if err := l.DeliveryDone([]eventlog.DeliveryRef{{Target: "http://a", Seq: 1}, {Target: "http://b", Seq: 3}},
		eventlog.TargetState{Target: "http://a", Value: []byte("1 delivered")},
		eventlog.TargetState{Target: "http://b", Value: []byte("1 delivered")}); err != nil {
		t.Fatal(err)
	}
	// A host that cannot tell whether its removal committed removes again.
	if err := l.DeliveryDone([]eventlog.DeliveryRef{{Target: "http://a", Seq: 1}}); err != nil {
		t.Fatalf("DeliveryDone of a notification removed before: %v", err)
	}
	if err := l.DeliveryDone(nil); err != nil {
		t.Fatalf("DeliveryDone of nothing: %v", err)
	}
	if err := l.DeliveryDone(nil, eventlog.TargetState{Target: "http://b"}); err != nil {
		t.Fatal(err)
	}
	l = h.Reopen(t, l)
	check("", stored("http://a", 3, "tried"), stored("http://a", 4, "a@4"))
	states, err := l.TargetStates()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]eventlog.TargetState{{Target: "http://a", Value: []byte("1 delivered")}}, states); diff != "" {
		t.Errorf("target states (-want +got):\n%s", diff)
	}
	if last, _ := l.Last(); last != 4 {
		t.Errorf("last %d after notification updates and removals, want the 4 events", last)
	}
}

// Metadata is written, overwritten and read back across a restart.
func testMeta(t *testing.T, h Harness) {
	l := h.Open(t)
	meta := func(name string) string {
		t.Helper()
		v, found, err := l.Meta(name)
		if err != nil {
			t.Fatal(err)
		}
		if !found {
			return "(none)"
		}
		return string(v)
	}
	if got := meta("layout"); got != "(none)" {
		t.Fatalf("a fresh log's metadata: %q", got)
	}
	for _, v := range []string{"2", "3"} {
		if err := l.SetMeta("layout", []byte(v)); err != nil {
			t.Fatal(err)
		}
		if got := meta("layout"); got != v {
			t.Fatalf("metadata %q after setting %q", got, v)
		}
	}
	if err := l.SetMeta("other", []byte("x")); err != nil {
		t.Fatal(err)
	}
	l = h.Reopen(t, l)
	if got := meta("layout") + " " + meta("other") + " " + meta("none"); got != "3 x (none)" {
		t.Errorf("metadata after a restart: %q, want \"3 x (none)\"", got)
	}
}
