package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/google/go-cmp/cmp"

	"github.com/baton-run/baton/host/internal/eventlog"
)

// The store's integrity as the CLI shows it: damaged files are one clear
// line and exit 1, never a panic; committed events never vanish quietly;
// baton doctor says what is damaged and rebuilds from what is intact.

var (
	pristineOnce sync.Once
	pristineDir  string
	pristineErr  string
)

// pristine is a data dir of real replayed multi-turn sessions on four
// threads, made once: tables (each open flushes the log it replays), a
// write-ahead log holding the last session's events (nothing opened the
// store after it), and projection snapshots. Tests copy it; none opens it.
func pristine(t *testing.T) string {
	t.Helper()
	pristineOnce.Do(func() {
		dir, err := os.MkdirTemp("", "baton-pristine-")
		if err != nil {
			pristineErr = err.Error()
			return
		}
		pristineDir = filepath.Join(dir, "data")
		msgs := lines(t, "acp/multi_turn.messages")
		for range 4 {
			args := append([]string{"run", "--data", pristineDir, "--cwd", dir, "--provider", "acp",
				"--provider-command", peerCommand(t, "acp/multi_turn.ndjson")}, msgs...)
			if out, stderr, code := baton(t, args...); code != 0 {
				pristineErr = "populate: exit " + strconv.Itoa(code) + "\n" + out + stderr
				return
			}
		}
	})
	if pristineErr != "" {
		t.Fatal(pristineErr)
	}
	return pristineDir
}

// copyDir copies a data dir (files and directories; no links).
func copyDir(t *testing.T, from, to string) {
	t.Helper()
	err := filepath.WalkDir(from, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, p)
		dst := filepath.Join(to, rel)
		if d.IsDir() {
			return os.MkdirAll(dst, 0o700)
		}
		if !d.Type().IsRegular() {
			return nil // the service's socket
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(dst, b, 0o600)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// storeEvents reads a data dir's events read-only (nil and the error when
// the store does not open or read).
func storeEvents(t *testing.T, data string) ([]eventlog.Record, error) {
	t.Helper()
	s, err := eventlog.OpenWith(filepath.Join(data, "events"), eventlog.Options{ReadOnly: true})
	if err != nil {
		return nil, err
	}
	defer s.Close()
	if err := s.Damage(); err != nil {
		return nil, err
	}
	return s.After(0, 0)
}

// storeFile is the newest file of a kind in a data dir's store ("" when
// none): kind is a suffix (".sst", ".log") or a prefix ("MANIFEST-").
func storeFile(t *testing.T, data, kind string) string {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(data, "events"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		if n := e.Name(); strings.HasSuffix(n, kind) || strings.HasPrefix(n, kind) {
			names = append(names, n)
		}
	}
	if len(names) == 0 {
		return ""
	}
	slices.Sort(names)
	return filepath.Join(data, "events", names[len(names)-1])
}

// aThread is a thread of the pristine data dir, from its events.
func aThread(t *testing.T, recs []eventlog.Record) string {
	t.Helper()
	if len(recs) == 0 {
		t.Fatal("no events")
	}
	return recs[len(recs)-1].ThreadID
}

var panicked = regexp.MustCompile(`panic|goroutine \d`)

// refusal checks a failed command: exit 1, one line on stderr that says
// the store is damaged or names a store file, never a panic.
func refusal(t *testing.T, what, stderr string, code int) {
	t.Helper()
	if panicked.MatchString(stderr) {
		t.Fatalf("%s panicked:\n%s", what, stderr)
	}
	ls := strings.Split(strings.TrimRight(stderr, "\n"), "\n")
	if code != 1 || len(ls) != 1 || !strings.HasPrefix(ls[0], "baton: ") ||
		!(strings.Contains(ls[0], "damaged") || strings.Contains(ls[0], "/events/")) {
		t.Fatalf("%s: exit %d, stderr:\n%s\nwant exit 1 and one line saying what is damaged", what, code, stderr)
	}
}

// A damaged table (bytes overwritten inside an .sst) is one line naming
// the file and what to do, exit 1, for every verb that reads it; never a
// panic. (Before: Pebble's Fatalf panicked, exit 2 and a stack trace.)
func TestDamagedTableIsOneClearError(t *testing.T) {
	src := pristine(t)
	want, err := storeEvents(t, src)
	if err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(t.TempDir(), "data")
	copyDir(t, src, data)
	sst := storeFile(t, data, ".sst")
	b, err := os.ReadFile(sst)
	if err != nil {
		t.Fatal(err)
	}
	// Every block of the table: its index and footer are at its end.
	for i := 0; i+21 < len(b); i += 512 {
		copy(b[i:], "XXXXXXXXXXXXXXXXXXXXX")
	}
	if err := os.WriteFile(sst, b, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"threads"}, {"show", aThread(t, want)},
		{"run", "--thread", aThread(t, want), "more"}} {
		_, stderr, code := baton(t, append(args, "--data", data)...)
		refusal(t, args[0], stderr, code)
		if !strings.Contains(stderr, sst+": ") || !strings.Contains(stderr, "run `baton doctor`") {
			t.Errorf("%s: %s; want it to name %s and baton doctor", args[0], stderr, sst)
		}
	}
}

// The newest write-ahead log cut in half, or with bytes overwritten in its
// middle: the store's events would end early. The next baton refuses, one
// line naming the log, and writes nothing (the copy stays byte for byte
// as damaged); doctor names the damaged log. (Before: Pebble stopped reading quietly and the run went on.)
func TestDamagedWALIsLoud(t *testing.T) {
	src := pristine(t)
	want, err := storeEvents(t, src)
	if err != nil {
		t.Fatal(err)
	}
	for _, damage := range []string{"cut in half", "8 bytes overwritten"} {
		t.Run(damage, func(t *testing.T) {
			data := filepath.Join(t.TempDir(), "data")
			copyDir(t, src, data)
			wal := storeFile(t, data, ".log")
			b, err := os.ReadFile(wal)
			if err != nil {
				t.Fatal(err)
			}
			if damage == "cut in half" {
				b = b[:len(b)/2]
			} else {
				copy(b[len(b)/2:], "XXXXXXXX")
			}
			if err := os.WriteFile(wal, b, 0o600); err != nil {
				t.Fatal(err)
			}
			before := snapshotFiles(t, data)
			_, stderr, code := baton(t, "run", "--data", data, "--thread", aThread(t, want), "more")
			refusal(t, "run", stderr, code)
			if !strings.Contains(stderr, wal+": ") {
				t.Errorf("run: %s; want it to name %s", stderr, wal)
			}
			if diff := cmp.Diff(before, snapshotFiles(t, data)); diff != "" {
				t.Errorf("the refused open changed the store (-before +after):\n%s", diff)
			}
			// What the log held past the damage cannot be read: doctor
			// names the log (the threads of the lost events are unknown).
			out, stderr, code := baton(t, "doctor", "--data", data)
			if code != 1 || !strings.Contains(out, wal+": the write-ahead log is damaged") {
				t.Errorf("doctor: exit %d\n%s%s\nwant exit 1, naming %s", code, out, stderr, wal)
			}
		})
	}
}

// snapshotFiles are a data dir's store's files and their bytes.
func snapshotFiles(t *testing.T, data string) map[string]string {
	t.Helper()
	return dirFiles(t, filepath.Join(data, "events"))
}

// dirFiles are a directory's files and their bytes.
func dirFiles(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = string(b)
	}
	return out
}

// The corruption sweep: each store file kind, each damage. Every outcome
// is a clean open with every committed event there, or a refusal in one
// line naming the damage; never a panic, never a quiet loss. Doctor agrees:
// healthy only where the store opens whole.
func TestCorruptionSweep(t *testing.T) {
	src := pristine(t)
	want, err := storeEvents(t, src)
	if err != nil {
		t.Fatal(err)
	}
	thread := aThread(t, want)
	sn := snapshotThreads(t, src)
	if len(sn) == 0 {
		t.Fatal("the pristine store has no snapshot records")
	}
	kinds := []struct{ name, file string }{
		{"sst", ".sst"}, {"wal", ".log"}, {"manifest", "MANIFEST-"}, {"options", "OPTIONS-"}, {"seal", eventlog.SealName},
	}
	damages := []struct {
		name string
		file func(b []byte) []byte // nil: delete the file
		key  func(v []byte) []byte // the same on a snapshot record (nil: delete it)
	}{
		{"truncate", func(b []byte) []byte { return b[:len(b)/2] }, func(v []byte) []byte { return v[:len(v)/2] }},
		{"overwrite", func(b []byte) []byte { copy(b[len(b)/2:], "XXXXXXXXXXXXXXXX"); return b },
			func(v []byte) []byte { copy(v[len(v)/2:], "XXXXXXXXXXXXXXXX"); return v }},
		{"delete", nil, nil},
	}
	for _, k := range append(kinds, struct{ name, file string }{"snapshot", ""}) {
		for _, d := range damages {
			t.Run(k.name+"/"+d.name, func(t *testing.T) {
				data := filepath.Join(t.TempDir(), "data")
				copyDir(t, src, data)
				if k.name == "snapshot" {
					damageSnapshots(t, data, sn, d.key)
				} else {
					f := storeFile(t, data, k.file)
					if f == "" {
						t.Fatalf("the pristine store has no %s file", k.name)
					}
					if d.file == nil {
						if err := os.Remove(f); err != nil {
							t.Fatal(err)
						}
					} else {
						b, err := os.ReadFile(f)
						if err != nil {
							t.Fatal(err)
						}
						if err := os.WriteFile(f, d.file(b), 0o600); err != nil {
							t.Fatal(err)
						}
					}
				}
				dout, dstderr, dcode := baton(t, "doctor", "--data", data)
				if panicked.MatchString(dstderr) || (dcode != 0 && dcode != 1) {
					t.Fatalf("doctor: exit %d\n%s%s", dcode, dout, dstderr)
				}
				_, stderr, code := baton(t, "threads", "--data", data)
				if code != 0 {
					refusal(t, "threads", stderr, code)
					if dcode != 1 {
						t.Errorf("threads refused, doctor said healthy:\n%s", dout)
					}
					return
				}
				if panicked.MatchString(stderr) {
					t.Fatalf("threads: %s", stderr)
				}
				_, stderr, code = baton(t, "show", "--data", data, thread)
				if code != 0 {
					refusal(t, "show", stderr, code)
					return
				}
				got, err := storeEvents(t, data)
				if err != nil {
					t.Fatalf("threads and show opened the store, which then does not read: %v", err)
				}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("the store opened without committed events (-want +got):\n%s", diff)
				}
			})
		}
	}
}

// snapshotThreads are the threads with a snapshot record in a data dir.
func snapshotThreads(t *testing.T, data string) []string {
	t.Helper()
	db, err := pebble.Open(filepath.Join(data, "events"), &pebble.Options{FormatMajorVersion: eventlog.FormatVersion, ReadOnly: true, Logger: quietPebble{}})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	it, _ := db.NewIter(&pebble.IterOptions{LowerBound: []byte("p"), UpperBound: []byte("q")})
	defer it.Close()
	var out []string
	for ok := it.First(); ok; ok = it.Next() {
		out = append(out, string(it.Key()[1:]))
	}
	return out
}

// damageSnapshots rewrites the snapshot records of threads with damage
// (nil: deletes them), as a damaged value would read.
func damageSnapshots(t *testing.T, data string, threads []string, damage func([]byte) []byte) {
	t.Helper()
	db, err := pebble.Open(filepath.Join(data, "events"), &pebble.Options{FormatMajorVersion: eventlog.FormatVersion, Logger: quietPebble{}})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, th := range threads {
		k := append([]byte("p"), th...)
		if damage == nil {
			err = db.Delete(k, pebble.Sync)
		} else {
			v, closer, gerr := db.Get(k)
			if gerr != nil {
				t.Fatal(gerr)
			}
			nv := damage(append([]byte(nil), v...))
			closer.Close()
			err = db.Set(k, nv, pebble.Sync)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// doctor: a healthy store is exit 0; a damaged one is exit 1 with the
// damaged file and the threads it touches; --rebuild puts a store of what
// is intact in place, keeps the damaged one aside byte for byte, and the
// rebuilt store verifies healthy and opens; a store in use is checked
// read-only, saying whose it is, and its rebuild refused.
func TestDoctor(t *testing.T) {
	src := pristine(t)
	want, err := storeEvents(t, src)
	if err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(t.TempDir(), "data")
	copyDir(t, src, data)
	out, stderr, code := baton(t, "doctor", "--data", data)
	if code != 0 || !strings.Contains(out, "is healthy: "+strconv.Itoa(len(want))+" events") {
		t.Fatalf("doctor of a healthy store: exit %d\n%s%s", code, out, stderr)
	}
	s, err := eventlog.Open(filepath.Join(data, "events"), nil)
	if err != nil {
		t.Fatal(err)
	}
	holder := "baton: another Baton process (pid " + strconv.Itoa(os.Getpid()) + ") holds the data dir " + data
	inUse, stderr, code := baton(t, "doctor", "--data", data)
	if want := holder + "; its event store is checked read-only, as it stands now\n"; code != 0 || inUse != out || stderr != want {
		t.Errorf("doctor of a store in use: exit %d\n%s%s\nwant exit 0\n%s%s", code, inUse, stderr, out, want)
	}
	_, stderr, code = baton(t, "doctor", "--rebuild", "--data", data)
	s.Close()
	if want := holder + "; stop it, then run doctor again\n"; code != 1 || stderr != want {
		t.Errorf("doctor --rebuild of a store in use: exit %d\n%s", code, stderr)
	}

	// The table's data blocks are damaged; its index is not.
	sst := storeFile(t, data, ".sst")
	b, _ := os.ReadFile(sst)
	copy(b[len(b)/8:], "XXXXXXXXXXXXXXXXXXXXX")
	os.WriteFile(sst, b, 0o600)
	damaged := snapshotFiles(t, data)
	out, stderr, code = baton(t, "doctor", "--data", data)
	if code != 1 || !strings.Contains(out, sst+": ") || !strings.Contains(out, "threads it touches:") {
		t.Fatalf("doctor of a damaged table: exit %d\n%s%s", code, out, stderr)
	}
	out, stderr, code = baton(t, "doctor", "--rebuild", "--data", data)
	if code != 0 || !strings.Contains(out, "the damaged store is ") {
		t.Fatalf("doctor --rebuild: exit %d\n%s%s", code, out, stderr)
	}
	aside, _ := filepath.Glob(filepath.Join(data, "events.damaged-*"))
	if len(aside) != 1 {
		t.Fatalf("damaged stores kept aside: %v", aside)
	}
	kept := dirFiles(t, aside[0])
	if diff := cmp.Diff(damaged, kept); diff != "" {
		t.Errorf("the damaged store kept aside changed (-damaged +kept):\n%s", diff)
	}
	got, err := storeEvents(t, data)
	if err != nil {
		t.Fatal(err)
	}
	lost := map[uint64]bool{}
	for _, l := range regexp.MustCompile(`lost \d+ events \(([0-9, -]+)\)`).FindStringSubmatch(out)[1:] {
		for _, r := range strings.Split(l, ", ") {
			lo, hi, _ := strings.Cut(r, "-")
			a, _ := strconv.ParseUint(lo, 10, 64)
			z := a
			if hi != "" {
				z, _ = strconv.ParseUint(hi, 10, 64)
			}
			for q := a; q <= z; q++ {
				lost[q] = true
			}
		}
	}
	var intact []eventlog.Record
	for _, r := range want {
		if !lost[r.Sequence] {
			intact = append(intact, r)
		}
	}
	if diff := cmp.Diff(intact, got); diff != "" || len(lost) == 0 {
		t.Errorf("rebuilt events (-intact +got), %d lost:\n%s", len(lost), diff)
	}
	out, stderr, code = baton(t, "doctor", "--data", data)
	if code != 0 || !strings.Contains(out, "is healthy") || !strings.Contains(out, "events lost in an earlier rebuild") {
		t.Errorf("doctor after the rebuild: exit %d\n%s%s", code, out, stderr)
	}
	if _, stderr, code := baton(t, "threads", "--data", data); code != 0 {
		t.Errorf("threads after the rebuild: exit %d\n%s", code, stderr)
	}
}

// quietPebble keeps the Pebble a test opens directly from logging on the
// test's stderr.
type quietPebble struct{}

func (quietPebble) Infof(string, ...any)           {}
func (quietPebble) Errorf(string, ...any)          {}
func (quietPebble) Fatalf(format string, a ...any) { panic(fmt.Sprintf(format, a...)) }
