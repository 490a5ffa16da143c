package eventlog

import (
	"encoding/json"
	"fmt"
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
		Receipt: func(last uint64) ([]byte, error) { return []byte(fmt.Sprintf(`{"last":%d}`, last)), nil }})
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
			got, err := s.ThreadAfter(th, 0)
			if err != nil || len(got) != len(want) {
				rt.Fatalf("thread %q: %d events, want %d (%v)", th, len(got), len(want), err)
			}
			for i, r := range got {
				if r.Sequence != want[i] || r.ThreadID != th {
					rt.Fatalf("thread %q event %d = %d/%q", th, i, r.Sequence, r.ThreadID)
				}
			}
			if len(want) > 1 {
				later, _ := s.ThreadAfter(th, want[0])
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

// BenchmarkAppend measures one command's commit (events plus receipt, one
// synced batch) for commands of 1 and of 16 events; divide ns/op by the
// event count for the cost per event.
func BenchmarkAppend(b *testing.B) {
	for _, n := range []int{1, 16} {
		b.Run(fmt.Sprintf("events=%d", n), func(b *testing.B) {
			s, err := Open(b.TempDir(), nil)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			i := 0
			for b.Loop() {
				i++
				appendN(b, s, "thread", n, fmt.Sprintf("cmd-%d", i))
			}
		})
	}
}

// BenchmarkBaselinePebbleSync is the floor under BenchmarkAppend: one raw
// Pebble Set committed with Sync, no index, no receipt, same value size.
func BenchmarkBaselinePebbleSync(b *testing.B) {
	s, err := Open(b.TempDir(), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	v := []byte(`{"sequence":1,"threadId":"thread","type":"x.happened","at":"1970-01-01T00:00:01Z","data":{"i":0}}`)
	var seq uint64
	for b.Loop() {
		seq++
		if err := s.db.Set(eventKey(seq), v, pebble.Sync); err != nil {
			b.Fatal(err)
		}
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
