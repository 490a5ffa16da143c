package eventlog

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"pgregory.net/rapid"
)

func appendN(t testing.TB, s *Store, thread string, n int, cmd string) []Record {
	t.Helper()
	ev := make([]Pending, n)
	for i := range ev {
		ev[i] = Pending{ThreadID: thread, Type: "x.happened", At: time.Unix(1, 0), Data: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))}
	}
	recs, _, err := s.Append(Batch{Events: ev, CommandID: cmd,
		Receipt: func(last uint64) []byte { return []byte(fmt.Sprintf(`{"last":%d}`, last)) }})
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

// Property: across random appends to random threads and reopenings, global
// sequences are dense and strictly increasing, each thread's index returns
// exactly its events in order, and receipts name the last sequence.
func TestLogProperty(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		dir := t.TempDir()
		s, err := Open(dir, nil)
		if err != nil {
			rt.Fatal(err)
		}
		defer func() { s.Close() }()
		byThread := map[string][]uint64{}
		var total uint64
		steps := rapid.IntRange(1, 12).Draw(rt, "steps")
		for i := 0; i < steps; i++ {
			if rapid.IntRange(0, 5).Draw(rt, "reopen") == 0 {
				s.Close()
				if s, err = Open(dir, nil); err != nil {
					rt.Fatal(err)
				}
			}
			thread := rapid.SampledFrom([]string{"a", "b", "a\u00ffb", "c"}).Draw(rt, "thread")
			n := rapid.IntRange(0, 5).Draw(rt, "n")
			cmd := fmt.Sprintf("cmd-%d", i)
			recs := appendN(t, s, thread, n, cmd)
			for _, r := range recs {
				total++
				if r.Sequence != total {
					rt.Fatalf("sequence %d, want %d", r.Sequence, total)
				}
				byThread[thread] = append(byThread[thread], r.Sequence)
			}
			rc, ok, err := s.Receipt(cmd)
			if err != nil || !ok || string(rc) != fmt.Sprintf(`{"last":%d}`, total) {
				rt.Fatalf("receipt %s = %s %v %v", cmd, rc, ok, err)
			}
		}
		if last, _ := s.Last(); last != total {
			rt.Fatalf("Last = %d, want %d", last, total)
		}
		all, err := s.After(0, 0)
		if err != nil || uint64(len(all)) != total {
			rt.Fatalf("After(0) = %d events, %v", len(all), err)
		}
		for th, want := range byThread {
			got, err := s.ThreadAfter(th, 0, 0, 0)
			if err != nil || len(got) != len(want) {
				rt.Fatalf("thread %q: %d events, want %d (%v)", th, len(got), len(want), err)
			}
			for i, r := range got {
				if r.Sequence != want[i] || r.ThreadID != th {
					rt.Fatalf("thread %q event %d = %d/%q", th, i, r.Sequence, r.ThreadID)
				}
				// The index's copy of an event is the log's.
				if g := all[r.Sequence-1]; !reflect.DeepEqual(r, g) {
					rt.Fatalf("thread %q event %d: index %+v, log %+v", th, i, r, g)
				}
			}
			if len(want) > 1 {
				later, _ := s.ThreadAfter(th, want[0], 0, 0)
				if len(later) != len(want)-1 {
					rt.Fatalf("ThreadAfter(%d) = %d events", want[0], len(later))
				}
			}
		}
	})
}

func TestAfterLimitAndWake(t *testing.T) {
	s, err := Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	appendN(t, s, "t", 10, "c1")
	recs, _ := s.After(3, 4)
	if len(recs) != 4 || recs[0].Sequence != 4 || recs[3].Sequence != 7 {
		t.Fatalf("After(3, 4) = %+v", recs)
	}
	_, changed := s.Last()
	select {
	case <-changed:
		t.Fatal("woken before a commit")
	default:
	}
	appendN(t, s, "t", 1, "")
	select {
	case <-changed:
	default:
		t.Fatal("not woken by a commit")
	}
	if _, ok, _ := s.Receipt("missing"); ok {
		t.Error("found a receipt never written")
	}
	s.Close()
	if _, _, err := s.Append(Batch{CommandID: "x"}); err != ErrClosed {
		t.Errorf("append after close: %v", err)
	}
}

func TestKeys(t *testing.T) {
	if _, err := parseEventKey([]byte("x")); err == nil {
		t.Error("bad event key accepted")
	}
	if _, err := parseThreadKey([]byte("t")); err == nil {
		t.Error("bad thread key accepted")
	}
	if upperBound([]byte{0xff, 0xff}) != nil {
		t.Error("all-0xff prefix has no upper bound")
	}
	if string(upperBound([]byte{'a', 0xff})) != "b" {
		t.Error("upper bound of a\\xff")
	}
}

// BenchmarkRebuildRead measures reading 10,000 events back, as a host does
// at start.
func BenchmarkRebuildRead(b *testing.B) {
	s, err := Open(b.TempDir(), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	for i := 0; i < 100; i++ {
		appendN(b, s, "thread", 100, fmt.Sprintf("c%d", i))
	}
	for b.Loop() {
		var after uint64
		for {
			recs, err := s.After(after, 4096)
			if err != nil {
				b.Fatal(err)
			}
			if len(recs) == 0 {
				break
			}
			after = recs[len(recs)-1].Sequence
		}
	}
}

// The outbox: effects are written with their events, read back in decided
// order per thread across a reopen, and removed one by one or by a batch.
func TestOutbox(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	ev := func(thread string) []Pending {
		return []Pending{{ThreadID: thread, Type: "x.happened", At: time.Unix(1, 0), Data: json.RawMessage(`{}`)}}
	}
	if _, _, err := s.Append(Batch{Effects: []Effect{{ThreadID: "a", Data: []byte("1")}}}); err == nil {
		t.Fatal("effects without an event were accepted")
	}
	_, ids1, err := s.Append(Batch{Events: ev("a"), Effects: []Effect{{ThreadID: "a", Data: []byte("a1")}, {ThreadID: "a", Data: []byte("a2")}}})
	if err != nil || len(ids1) != 2 || ids1[0] != "1.0" || ids1[1] != "1.1" {
		t.Fatalf("ids %v %v", ids1, err)
	}
	_, ids2, _ := s.Append(Batch{Events: ev("b"), Effects: []Effect{{ThreadID: "b", Data: []byte("b1")}}})
	_, ids3, _ := s.Append(Batch{Events: append(ev("a"), ev("a")...), Effects: []Effect{{ThreadID: "a", Data: []byte("a3")}}})
	s.Close()
	if s, err = Open(dir, nil); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got := func() string {
		out, err := s.Outbox()
		if err != nil {
			t.Fatal(err)
		}
		var b []string
		for _, e := range out {
			b = append(b, e.ThreadID+":"+e.ID+"="+string(e.Data))
		}
		return fmt.Sprint(b)
	}
	if g := got(); g != "[a:1.0=a1 a:1.1=a2 a:4.0=a3 b:2.0=b1]" {
		t.Fatalf("outbox %s (ids %v %v)", g, ids2, ids3)
	}
	if err := s.EffectDone(EffectRef{ThreadID: "a", ID: "1.0"}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Append(Batch{Events: ev("a"), Done: []EffectRef{{ThreadID: "a", ID: "4.0"}, {ThreadID: "b", ID: "2.0"}}}); err != nil {
		t.Fatal(err)
	}
	if g := got(); g != "[a:1.1=a2]" {
		t.Fatalf("after removals: %s", g)
	}
	for _, bad := range []string{"", "1", "1.x", "01.0", "-1.0"} {
		if err := s.EffectDone(EffectRef{ThreadID: "a", ID: bad}); err == nil {
			t.Errorf("bad id %q accepted", bad)
		}
		if _, _, err := s.Append(Batch{Events: ev("a"), Done: []EffectRef{{ThreadID: "a", ID: bad}}}); err == nil {
			t.Errorf("bad done id %q accepted", bad)
		}
	}
	if _, _, err := parseOutboxKey([]byte("o")); err == nil {
		t.Error("bad outbox key accepted")
	}
}

// Appends from many writers at once share synced writes, and still: the
// sequences are dense, each writer's events are in its order, every
// commit hook runs before a reader can see its events, and a reader never
// sees a sequence whose predecessors it cannot read.
func TestConcurrentAppends(t *testing.T) {
	s, err := Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const writers, commits = 8, 50
	var hooked sync.Map // sequence -> true, set by the commit hooks
	stop := make(chan struct{})
	readerErr := make(chan error, 1)
	go func() {
		// A reader following the log: whatever it reads is complete and
		// had its hook run.
		var after uint64
		for {
			last, changed := s.Last()
			recs, err := s.After(after, 0)
			if err != nil {
				readerErr <- err
				return
			}
			for _, r := range recs {
				if r.Sequence != after+1 {
					readerErr <- fmt.Errorf("read %d after %d", r.Sequence, after)
					return
				}
				after = r.Sequence
			}
			if last > 0 {
				if _, ok := hooked.Load(last); !ok {
					readerErr <- fmt.Errorf("sequence %d published before its hook ran", last)
					return
				}
			}
			select {
			case <-changed:
			case <-stop:
				readerErr <- nil
				return
			}
		}
	}()
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			th := fmt.Sprintf("w%d", w)
			for i := range commits {
				ev := []Pending{{ThreadID: th, Type: "x", At: time.Unix(1, 0), Data: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))},
					{ThreadID: th, Type: "y", At: time.Unix(1, 0), Data: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))}}
				_, _, err := s.Append(Batch{Events: ev, ThreadID: th, OnCommit: func(last uint64) {
					hooked.Store(last-1, true)
					hooked.Store(last, true)
				}})
				if err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	if err := <-readerErr; err != nil {
		t.Fatal(err)
	}
	if last, _ := s.Last(); last != writers*commits*2 {
		t.Fatalf("last %d, want %d", last, writers*commits*2)
	}
	for w := range writers {
		th := fmt.Sprintf("w%d", w)
		recs, err := s.ThreadAfter(th, 0, 0, 0)
		if err != nil || len(recs) != commits*2 {
			t.Fatalf("%s: %d events, %v", th, len(recs), err)
		}
		for i, r := range recs {
			if want := fmt.Sprintf(`{"i":%d}`, i/2); string(r.Data) != want || (i > 0 && r.Sequence <= recs[i-1].Sequence) {
				t.Fatalf("%s event %d: %s at %d", th, i, r.Data, r.Sequence)
			}
		}
	}
}

func head(s string) func(uint64) []byte {
	return func(last uint64) []byte { return []byte(fmt.Sprintf("%s@%d", s, last)) }
}

// A thread's state (head, live marker, snapshot) is written with its
// events; a snapshot's watermark is the batch's last event; a damaged
// snapshot is an error, never a value.
func TestThreadState(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	ev := func(th string) []Pending {
		return []Pending{{ThreadID: th, Type: "x", At: time.Unix(1, 0), Data: json.RawMessage(`{}`)}}
	}
	if _, _, err := s.Append(Batch{ThreadID: "a", Snapshot: &Snapshot{Body: []byte("x")}}); err == nil {
		t.Fatal("a snapshot with no event was accepted")
	}
	s.Append(Batch{Events: ev("a"), ThreadID: "a", Head: head("A1"), Live: LiveSet})
	s.Append(Batch{Events: ev("b"), ThreadID: "b", Head: head("B1"), Live: LiveSet})
	s.Append(Batch{Events: append(ev("a"), ev("a")...), ThreadID: "a", Head: head("A2"), Live: LiveClear,
		Snapshot: &Snapshot{Schema: 7, Body: []byte(`{"x":1}`)}})
	s.Append(Batch{Events: ev("c"), ThreadID: "c", Head: head("C1")})
	s.Close()
	if s, err = Open(dir, nil); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	sn, ok, err := s.ThreadSnapshot("a")
	if err != nil || !ok || sn.Seq != 4 || sn.Schema != 7 || string(sn.Body) != `{"x":1}` {
		t.Fatalf("snapshot %+v %v %v", sn, ok, err)
	}
	if _, ok, err := s.ThreadSnapshot("b"); ok || err != nil {
		t.Fatalf("b has no snapshot: %v %v", ok, err)
	}
	live, _ := s.LiveThreads()
	if fmt.Sprint(live) != "[b]" {
		t.Fatalf("live %v", live)
	}
	heads, _ := s.Heads("", 0)
	page, _ := s.Heads("a", 1)
	if len(heads) != 3 || string(heads[0].Data) != "A2@4" || heads[2].ThreadID != "c" || len(page) != 1 || page[0].ThreadID != "b" {
		t.Fatalf("heads %+v, page after a %+v", heads, page)
	}
	if h, ok, _ := s.Head("c"); !ok || string(h) != "C1@5" {
		t.Fatalf("head c %q", h)
	}
	if ok, _ := s.HasThreadEvent("a", 4); !ok {
		t.Fatal("event 4 is a's")
	}
	if ok, _ := s.HasThreadEvent("b", 4); ok {
		t.Fatal("event 4 is not b's")
	}
	recs, _ := s.ThreadAfter("a", 1, 3, 0)
	if len(recs) != 1 || recs[0].Sequence != 3 {
		t.Fatalf("a after 1 up to 3: %+v", recs)
	}
	if recs, _ := s.ThreadAfter("a", 0, 0, 2); len(recs) != 2 || recs[1].Sequence != 3 {
		t.Fatalf("a limit 2: %+v", recs)
	}
	// Damage: a flipped body byte, a short value, an unknown envelope.
	good, _, _ := s.get(threadStateKey(prefixSnapshot, "a"))
	for name, bad := range map[string][]byte{
		"flipped": append(append([]byte(nil), good[:len(good)-1]...), good[len(good)-1]^1),
		"short":   good[:5],
		"format":  append([]byte{9}, good[1:]...),
	} {
		s.db.Set(threadStateKey(prefixSnapshot, "a"), bad, pebble.Sync)
		if _, _, err := s.ThreadSnapshot("a"); !errors.Is(err, ErrCorruptSnapshot) {
			t.Errorf("%s snapshot: %v", name, err)
		}
	}
	if err := s.PutThreadState("z", []byte("Z"), true, &Snapshot{Seq: 4, Body: []byte("{}")}); err != nil {
		t.Fatal(err)
	}
	if sn, ok, _ := s.ThreadSnapshot("z"); !ok || sn.Seq != 4 {
		t.Fatalf("put snapshot %+v", sn)
	}
	if live, _ := s.LiveThreads(); fmt.Sprint(live) != "[b z]" {
		t.Fatalf("live %v", live)
	}
	if err := s.SetMeta("layout", []byte("2")); err != nil {
		t.Fatal(err)
	}
	if v, ok, _ := s.Meta("layout"); !ok || string(v) != "2" {
		t.Fatalf("meta %q", v)
	}
}

// A thread index written by a Baton from before the index held events
// (empty values) is read through the global log; a damaged index entry is
// an error that names it.
func TestThreadIndexFormats(t *testing.T) {
	s, err := Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	recs := appendN(t, s, "a", 3, "c")
	s.db.Set(threadKey("a", 2), nil, pebble.Sync) // as an older Baton wrote it
	got, err := s.ThreadAfter("a", 0, 0, 0)
	if err != nil || !reflect.DeepEqual(got, recs) {
		t.Fatalf("mixed index: %+v %v, want %+v", got, err, recs)
	}
	s.db.Set(threadKey("a", 2), []byte{9, 1}, pebble.Sync)
	if _, err := s.ThreadAfter("a", 0, 0, 0); err == nil || !strings.Contains(err.Error(), "index entry of event 2 is corrupt") {
		t.Fatalf("damaged index entry: %v", err)
	}
	for _, bad := range [][]byte{{1, 200}, {1, 1, 'x'}, {1, 1, 'x', 2}} {
		if _, err := parseIndexValue("a", 2, bad); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
	s.db.Set(threadKey("a", 9), nil, pebble.Sync) // names an event the log does not have
	if _, err := s.ThreadAfter("a", 2, 9, 0); err == nil || !strings.Contains(err.Error(), "not in the log") {
		t.Fatalf("dangling index entry: %v", err)
	}
	s.db.Set(threadKey("b", 1), nil, pebble.Sync) // names another thread's event
	if _, err := s.ThreadAfter("b", 0, 3, 0); err == nil || !strings.Contains(err.Error(), "thread a's") {
		t.Fatalf("index entry of another thread: %v", err)
	}
}

// A record the log writes by hand reads back as encoding/json would have
// written it: the same fields, the same bytes.
func TestRecordEncodingProperty(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		e := Pending{
			ThreadID: rapid.String().Draw(rt, "thread"),
			Type:     rapid.StringMatching(`[a-z.<>&]{1,20}`).Draw(rt, "type"),
			At:       time.Unix(rapid.Int64Range(0, 253402300799).Draw(rt, "s"), rapid.Int64Range(0, 999999999).Draw(rt, "ns")),
		}
		data, _ := json.Marshal(map[string]any{"text": rapid.String().Draw(rt, "text"), "n": rapid.Int().Draw(rt, "n")})
		if rapid.Bool().Draw(rt, "spaced") {
			data = append(append([]byte(" "), data...), '\n')
		}
		e.Data = data
		seq := rapid.Uint64Range(1, 1<<50).Draw(rt, "seq")
		tail, err := encodeTail(e)
		if err != nil {
			rt.Fatal(err)
		}
		got := recordValue(seq, tail)
		var compact bytes.Buffer
		json.Compact(&compact, data)
		want, _ := json.Marshal(Record{Sequence: seq, ThreadID: e.ThreadID, Type: e.Type, At: e.At.UTC(), Data: compact.Bytes()})
		if string(got) != string(want) {
			rt.Fatalf("record\n%s\nwant\n%s", got, want)
		}
	})
	if _, err := encodeTail(Pending{Data: []byte("{")}); err == nil {
		t.Fatal("data that is not JSON was accepted")
	}
	if _, err := encodeTail(Pending{At: time.Unix(253402300800, 0), Data: []byte("{}")}); err == nil {
		t.Fatal("a time RFC 3339 cannot write was accepted")
	}
}
