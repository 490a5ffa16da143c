package eventlog

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/go-hclog"
)

// files are a directory's files and their bytes.
func files(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if e.IsDir() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = string(b)
	}
	return out
}

func newest(t *testing.T, dir, suffix string) string {
	t.Helper()
	m, _ := filepath.Glob(filepath.Join(dir, "*"+suffix))
	if len(m) == 0 {
		t.Fatalf("no %s file in %s", suffix, dir)
	}
	slices.Sort(m)
	return m[len(m)-1]
}

// The seal reads back what was written; anything else is damaged.
func TestSealEncoding(t *testing.T) {
	for _, seq := range []uint64{0, 1, 638, 1<<64 - 1} {
		if got, err := decodeSeal(encodeSeal(seq)); err != nil || got != seq {
			t.Errorf("decode(encode(%d)) = %d, %v", seq, got, err)
		}
	}
	good := encodeSeal(7)
	flip := bytes.Clone(good)
	flip[10] ^= 1
	other := bytes.Clone(good)
	copy(other, "NOTASEAL")
	for name, b := range map[string][]byte{"empty": nil, "short": good[:10], "long": append(bytes.Clone(good), 0),
		"flipped": flip, "magic": other} {
		if _, err := decodeSeal(b); !errors.Is(err, errSealDamaged) {
			t.Errorf("%s: %v, want damaged", name, err)
		}
	}
}

func FuzzSeal(f *testing.F) {
	f.Add(encodeSeal(0))
	f.Add(encodeSeal(638))
	f.Add([]byte("BTNSEAL1"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		seq, err := decodeSeal(b)
		if err != nil {
			return
		}
		if !bytes.Equal(encodeSeal(seq), b) {
			t.Fatalf("decoded %x as %d, which encodes differently", b, seq)
		}
	})
}

// A store whose log ends before its seal is refused, naming the newest
// write-ahead log, and nothing is written; read-only, it opens and says
// what the seal said; Verify lists the missing events.
func TestOpenRefusesLogEndingBeforeSeal(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir)
	appendN(t, s, "a", 3, "")
	s.Close()
	if st := readSeal(vfs.Default, dir); st.Sealed != 3 || st.Err != nil {
		t.Fatalf("seal after close = %+v, want 3", st)
	}
	if err := os.WriteFile(filepath.Join(dir, SealName), encodeSeal(5), 0o600); err != nil {
		t.Fatal(err)
	}
	before := files(t, dir)
	_, err := Open(dir, nil)
	var d *DamageError
	if !errors.As(err, &d) || !errors.Is(err, ErrDamaged) {
		t.Fatalf("open: %v, want a *DamageError", err)
	}
	wal := newest(t, dir, ".log")
	want := &DamageError{File: wal, Err: errors.New("the write-ahead log is damaged: the store ends at sequence 3 but 5 were committed (BATON-SEAL records them): events 4 to 5 are missing; nothing was written")}
	if d.File != want.File || d.Error() != want.Error() {
		t.Errorf("open: %v\nwant %v", d, want)
	}
	if diff := cmp.Diff(before, files(t, dir)); diff != "" {
		t.Errorf("the refused open changed the store (-before +after):\n%s", diff)
	}
	ro, err := OpenWith(dir, Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("read-only: %v", err)
	}
	if st := ro.Seal(); st.Sealed != 5 || !st.Found || st.Err != nil {
		t.Errorf("seal = %+v", st)
	}
	if _, _, err := ro.Append(Batch{Events: []Pending{event("a", 9)}}); !errors.Is(err, ErrReadOnly) {
		t.Errorf("append read-only: %v", err)
	}
	ro.Close()
	r, vs, err := Verify(dir)
	if err != nil {
		t.Fatal(err)
	}
	vs.Close()
	got := r.Problems
	wantP := []Problem{{File: wal, What: want.Err.Error(), Seqs: []uint64{4, 5}}}
	if diff := cmp.Diff(wantP, got); diff != "" {
		t.Errorf("problems (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(before, files(t, dir)); diff != "" {
		t.Errorf("read-only open and Verify changed the store (-before +after):\n%s", diff)
	}
}

// The newest log cut short: what it held past the cut is gone, and the
// seal says so.
func TestOpenRefusesCutLog(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir)
	for i := range 20 {
		appendN(t, s, "a", 1, "")
		_ = i
	}
	s.Close()
	wal := newest(t, dir, ".log")
	fi, err := os.Stat(wal)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(wal, fi.Size()/2); err != nil {
		t.Fatal(err)
	}
	_, err = Open(dir, nil)
	var d *DamageError
	if !errors.As(err, &d) || d.File != wal || !strings.Contains(err.Error(), "but 20 were committed") {
		t.Fatalf("open: %v, want a refusal naming %s", err, wal)
	}
}

// Bytes overwritten inside the newest log, records after them intact:
// Pebble's own check refuses, and the log is named.
func TestOpenRefusesOverwrittenLog(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir)
	for range 300 {
		appendN(t, s, "a", 10, "")
	}
	s.Close()
	wal := newest(t, dir, ".log")
	b, _ := os.ReadFile(wal)
	copy(b[len(b)/4:], "XXXXXXXX") // blocks of good records follow
	os.WriteFile(wal, b, 0o600)
	_, err := Open(dir, nil)
	var d *DamageError
	if !errors.As(err, &d) || d.File != wal {
		t.Fatalf("open: %v, want a *DamageError naming %s", err, wal)
	}
	r, vs, err := Verify(dir)
	if err != nil {
		t.Fatal(err)
	}
	if vs != nil {
		defer vs.Close()
	}
	if len(r.Problems) == 0 || r.Problems[0].File != wal || !strings.Contains(r.Problems[0].What, "the write-ahead log is damaged: at offset") {
		t.Errorf("problems: %+v", r.Problems)
	}
	// What precedes the damage is read from a cut copy, and salvaged.
	if vs == nil || r.Last != 3000 || r.Events == 0 || r.Events >= 3000 {
		t.Fatalf("report: last %d, %d events read; want the events before the damage", r.Last, r.Events)
	}
}

// A seal that is damaged or missing is a warning, not a refusal; a new
// one is written.
func TestSealDamagedOrMissing(t *testing.T) {
	for name, damage := range map[string]func(p string){
		"damaged": func(p string) { os.WriteFile(p, []byte("garbage"), 0o600) },
		"missing": func(p string) { os.Remove(p) },
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			s := openT(t, dir)
			appendN(t, s, "a", 2, "")
			s.Close()
			damage(filepath.Join(dir, SealName))
			var out bytes.Buffer
			s, err := Open(dir, hclog.New(&hclog.LoggerOptions{Output: &out, Level: hclog.Warn}))
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(out.String(), "could not check that no committed event is missing") {
				t.Errorf("log: %q, want a warning", out.String())
			}
			if st := readSeal(vfs.Default, dir); st.Sealed != 2 || st.Err != nil {
				t.Errorf("seal after open = %+v, want 2", st)
			}
			s.Close()
		})
	}
}

// A damaged table: the read that meets it returns a *DamageError naming
// the .sst; the store fails (Failed is closed, Failure is the damage) and
// takes no more appends; Verify reports it.
func TestDamagedTable(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir)
	appendN(t, s, "a", 200, "")
	if err := s.Compact(t.Context()); err != nil {
		t.Fatal(err)
	}
	s.Close()
	sst := newest(t, dir, ".sst")
	b, _ := os.ReadFile(sst)
	copy(b[len(b)/4:], "XXXXXXXXXXXXXXXXXXXXX")
	os.WriteFile(sst, b, 0o600)
	s = openT(t, dir)
	defer s.Close()
	_, err := s.After(0, 0)
	var d *DamageError
	if !errors.As(err, &d) || d.File != sst || !strings.Contains(d.Error(), "checksum mismatch") {
		t.Fatalf("read: %v, want a *DamageError naming %s", err, sst)
	}
	if err := s.Damage(); !errors.Is(err, ErrDamaged) {
		t.Errorf("Damage() = %v", err)
	}
	select {
	case <-s.Failed():
		if err := s.Failure(); err != s.Damage() {
			t.Errorf("Failure() = %v, want the damage, %v", err, s.Damage())
		}
	default:
		t.Error("the damaged store did not fail: Failed is open")
	}
	if _, _, err := s.Append(Batch{Events: []Pending{event("a", 1)}}); !errors.Is(err, ErrDamaged) {
		t.Errorf("append to a damaged store: %v", err)
	}
	s.Close()
	r, vs, err := Verify(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer vs.Close()
	if r.Healthy() {
		t.Fatal("Verify found a damaged table healthy")
	}
	var seqs []uint64
	for _, p := range r.Problems {
		if p.File != sst {
			t.Errorf("problem names %q, want %s: %s", p.File, sst, p.What)
		}
		seqs = append(seqs, p.Seqs...)
	}
	if len(seqs) == 0 {
		t.Error("no event named unreadable")
	}
	// Salvage keeps every event that reads.
	lost, err := vs.Salvage(filepath.Join(t.TempDir(), "new"), r.Last, func(Record) bool { return true })
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(seqs, lost); diff != "" {
		t.Errorf("lost (-unreadable +lost):\n%s", diff)
	}
}

// A store missing a table its manifest names is a *DamageError naming it.
func TestMissingTable(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir)
	appendN(t, s, "a", 20, "")
	s.Compact(t.Context())
	s.Close()
	sst := newest(t, dir, ".sst")
	os.Remove(sst)
	_, err := Open(dir, nil)
	var d *DamageError
	if !errors.As(err, &d) || d.File != sst {
		t.Fatalf("open: %v, want a *DamageError naming %s", err, sst)
	}
}

// Verify reads a healthy store as healthy, and Baton's own inconsistencies
// as problems; Salvage writes a store of what is intact, under the same
// sequences, that verifies healthy with its losses recorded, and whose
// next sequence follows the old store's last.
func TestVerifyAndSalvage(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir)
	ra := appendN(t, s, "a", 3, "c1")
	rb := appendN(t, s, "b", 2, "c2")
	if _, _, err := s.Append(Batch{Events: []Pending{event("a", 6)}, Effects: []Effect{{ThreadID: "a", Data: []byte("e")}},
		ThreadID: "a", Head: head("A"), Live: LiveSet, Snapshot: &Snapshot{Schema: 1, Body: []byte("{}")}}); err != nil {
		t.Fatal(err)
	}
	if err := s.PutThreadState("b", []byte("B"), false, &Snapshot{Schema: 1, Seq: 5, Body: []byte("{}")}); err != nil {
		t.Fatal(err)
	}
	s.SetMeta("layout", []byte("1"))
	s.SetMeta("other", []byte("x"))
	s.Close()
	r, vs, err := Verify(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !r.Healthy() || r.Events != 6 || r.Last != 6 || !cmp.Equal(r.Heads, map[string][]byte{"a": head("A")(6), "b": []byte("B")}) {
		t.Fatalf("healthy store: %+v", r)
	}
	vs.Close()

	// Damage Baton's own consistency with Pebble writes.
	db, err := pebble.Open(dir, &pebble.Options{FormatMajorVersion: FormatVersion})
	if err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(db.Delete(eventKey(2), pebble.Sync))                                                        // a gap
	must(db.Set(eventKey(3), []byte("{"), pebble.Sync))                                              // undecodable
	must(db.Delete(threadKey("b", 4), pebble.Sync))                                                  // not indexed
	must(db.Set(threadKey("c", 5), []byte{9}, pebble.Sync))                                          // index: another thread, bad value
	must(db.Set(threadKey("a", 9), nil, pebble.Sync))                                                // index past the end
	must(db.Set([]byte("tx"), nil, pebble.Sync))                                                     // bad index key
	must(db.Set(outboxKey("a", 2, 0), []byte("e"), pebble.Sync))                                     // outbox of a lost event
	must(db.Set([]byte("oz"), []byte("e"), pebble.Sync))                                             // bad outbox key
	must(db.Set(threadStateKey(prefixHead, "z"), []byte("Z"), pebble.Sync))                          // head without events
	must(db.Set(threadStateKey(prefixLive, "z"), nil, pebble.Sync))                                  // live without events
	must(db.Set(threadStateKey(prefixSnapshot, "z"), []byte("bad"), pebble.Sync))                    // corrupt snapshot
	must(db.Set(threadStateKey(prefixSnapshot, "a"), encodeSnapshot(Snapshot{Seq: 4}), pebble.Sync)) // another thread's event
	must(db.Delete(threadStateKey(prefixHead, "b"), pebble.Sync))                                    // events without a head
	must(db.Close())

	r, vs, err = Verify(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []Problem{
		{What: "thread c index entry of event 5 is corrupt: unknown format 9", Seqs: []uint64{5}, Threads: []string{"b"}},
		{What: "bad thread index key 7478"},
		{What: "event 3 is corrupt: unexpected end of JSON input", Seqs: []uint64{3}, Threads: []string{"a"}},
		{What: "the thread index gives event 5 to thread c; it is thread b's", Seqs: []uint64{5}, Threads: []string{"b", "c"}},
		{What: "1 events are not in the thread index", Seqs: []uint64{4}, Threads: []string{"b"}},
		{What: "1 events are missing from the log (2)", Seqs: []uint64{2}, Threads: []string{"a"}},
		{What: "the thread index names event 9 of thread a, past the last event 6", Seqs: []uint64{9}, Threads: []string{"a"}},
		{What: "outbox entry 2.0 of thread a names event 2, which is not the thread's", Threads: []string{"a"}},
		{What: `bad outbox key 6f7a`},
		{What: "thread z has a head but no events", Threads: []string{"z"}},
		{What: "thread z is marked live but has no events", Threads: []string{"z"}},
		{What: "the snapshot of thread a is as of event 4, which is not the thread's", Threads: []string{"a"}},
		{What: "the snapshot of thread z: corrupt snapshot: 3 bytes is shorter than its header (it is rebuilt from the thread's events when loaded)", Threads: []string{"z"}},
		{What: "thread b has events but no head", Threads: []string{"b"}},
	}
	if diff := cmp.Diff(want, r.Problems); diff != "" {
		t.Errorf("problems (-want +got):\n%s", diff)
	}

	dst := filepath.Join(t.TempDir(), "new")
	lost, err := vs.Salvage(dst, r.Last, func(rec Record) bool { return rec.ThreadID != "x" })
	if err != nil {
		t.Fatal(err)
	}
	vs.Close()
	if diff := cmp.Diff([]uint64{2, 3}, lost); diff != "" {
		t.Errorf("lost (-want +got):\n%s", diff)
	}
	ns := openT(t, dst)
	got, err := ns.After(0, 0)
	if err != nil {
		t.Fatal(err)
	}
	wantRecs := []Record{ra[0], rb[0], rb[1]}
	if diff := cmp.Diff(wantRecs, got[:3]); diff != "" || len(got) != 4 {
		t.Errorf("salvaged events (-want +got):\n%s\n%d events", diff, len(got))
	}
	if v, ok, _ := ns.Meta("other"); !ok || string(v) != "x" {
		t.Errorf("meta other = %q %v", v, ok)
	}
	if _, ok, _ := ns.Meta("layout"); ok {
		t.Error("the salvaged store kept the layout: it would not be indexed")
	}
	if outbox, _ := ns.Outbox(); len(outbox) != 1 || outbox[0].ID != "6.0" {
		t.Errorf("outbox %+v, want the effect of event 6 only", outbox)
	}
	recs := appendN(t, ns, "a", 1, "")
	if recs[0].Sequence != 7 {
		t.Errorf("next sequence %d, want 7 (after the damaged store's last)", recs[0].Sequence)
	}
	ns.Close()
	r, vs, err = Verify(dst)
	if err != nil {
		t.Fatal(err)
	}
	vs.Close()
	var lostJSON []uint64
	if len(r.Lost) > 0 {
		b, _ := json.Marshal(r.Lost)
		json.Unmarshal(b, &lostJSON)
	}
	if diff := cmp.Diff([]uint64{2, 3}, lostJSON); diff != "" {
		t.Errorf("recorded lost (-want +got):\n%s", diff)
	}
}

func TestRanges(t *testing.T) {
	for _, c := range []struct {
		in   []uint64
		want string
	}{{nil, ""}, {[]uint64{3}, "3"}, {[]uint64{1, 2, 3, 7, 9, 10}, "1-3, 7, 9-10"}} {
		if got := Ranges(c.in); got != c.want {
			t.Errorf("Ranges(%v) = %q, want %q", c.in, got, c.want)
		}
	}
}

// Verify of what is not a store is an error, not a report; a store in use
// is read as it stands (a read-only open takes no lock).
func TestVerifyErrors(t *testing.T) {
	if _, _, err := Verify(t.TempDir()); err == nil || !strings.Contains(err.Error(), "no event store") {
		t.Errorf("empty dir: %v", err)
	}
	dir := t.TempDir()
	s := openT(t, dir)
	defer s.Close()
	appendN(t, s, "a", 2, "c1")
	r, rs, err := Verify(dir)
	if err != nil {
		t.Fatalf("store in use: %v, want a report", err)
	}
	defer rs.Close()
	if !r.Healthy() || r.Events != 2 {
		t.Errorf("store in use: healthy %v, %d events; want healthy, 2 events: %+v", r.Healthy(), r.Events, r.Problems)
	}
}

// BenchmarkSealWrite is what each commit group adds: one write of the
// seal at offset 0, no sync.
func BenchmarkSealWrite(b *testing.B) {
	w, err := openSeal(privateDefault, b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer w.close(0)
	var seq uint64
	for b.Loop() {
		seq++
		if err := w.write(seq); err != nil {
			b.Fatal(err)
		}
	}
}
