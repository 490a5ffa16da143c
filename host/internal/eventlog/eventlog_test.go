package eventlog

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
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
	if _, _, err := parseOutboxKey([]byte("o")); err == nil {
		t.Error("bad outbox key accepted")
	}
	if _, err := parseDeliveryKey([]byte("n")); err == nil {
		t.Error("bad notification key accepted")
	}
	if _, _, err := parseArchiveKey([]byte("a")); err == nil {
		t.Error("bad archive key accepted")
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

func head(s string) func(uint64) []byte {
	return func(last uint64) []byte { return []byte(fmt.Sprintf("%s@%d", s, last)) }
}

// A damaged snapshot is an error wrapping ErrCorruptSnapshot, never a
// value: a flipped body byte, a value shorter than its header, an
// unknown envelope. (What a snapshot holds when it is not damaged is the
// conformance suite's: eventlogtest.)
func TestSnapshotDamage(t *testing.T) {
	s := openT(t, t.TempDir())
	defer s.Close()
	if _, _, err := s.Append(Batch{Events: []Pending{event("a", 1)}, ThreadID: "a",
		Snapshot: &Snapshot{Schema: 7, Body: []byte(`{"x":1}`)}}); err != nil {
		t.Fatal(err)
	}
	good, _, _ := s.get(threadStateKey(prefixSnapshot, "a"))
	if sn, found, err := s.ThreadSnapshot("a"); err != nil || !found || sn.Seq != 1 {
		t.Fatalf("the snapshot before damage: %+v, found %v, %v", sn, found, err)
	}
	for name, bad := range map[string][]byte{
		"flipped": append(append([]byte(nil), good[:len(good)-1]...), good[len(good)-1]^1),
		"short":   good[:5],
		"format":  append([]byte{9}, good[1:]...),
	} {
		if err := s.db.Set(threadStateKey(prefixSnapshot, "a"), bad, pebble.Sync); err != nil {
			t.Fatal(err)
		}
		if sn, found, err := s.ThreadSnapshot("a"); !errors.Is(err, ErrCorruptSnapshot) {
			t.Errorf("%s snapshot: %+v, found %v, %v; want ErrCorruptSnapshot", name, sn, found, err)
		}
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
