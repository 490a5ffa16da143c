package eventlog

import (
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/google/go-cmp/cmp"
)

// dirState is every file of a directory: its mode, size and modification
// time, to tell that nothing was written.
func dirState(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		out[p] = fmt.Sprintf("%v %d %v", fi.Mode(), fi.Size(), fi.ModTime())
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// A store opened read-only takes no lock and writes nothing: it opens
// while another store holds the directory (what a process that holds the
// data dir does), reads every event, and leaves every file as it was; the
// holder goes on appending.
func TestReadOnlyOpenTakesNoLockAndWritesNothing(t *testing.T) {
	dir := t.TempDir()
	w, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	want := append(appendN(t, w, "a", 3, "c1"), appendN(t, w, "b", 2, "c2")...)
	before := dirState(t, dir)
	r, err := OpenWith(dir, Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("a read-only open of a store in use: %v", err)
	}
	got, err := r.After(0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the events read read-only (-written +read):\n%s", diff)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(before, dirState(t, dir)); diff != "" {
		t.Errorf("a read-only open changed the store's files (-before +after):\n%s", diff)
	}
	appendN(t, w, "a", 1, "c3") // the holder's lock and files are its own still
}

// removedOnce makes the next open of one file, once armed, fail as if the
// file had been removed: what a reader meets when the process that writes
// the store compacts away a table its view was opened on.
type removedOnce struct {
	name  string
	armed atomic.Bool
	hits  atomic.Int32
}

func (r *removedOnce) MaybeError(op errorfs.Op) error {
	if op.Kind != errorfs.OpOpen || filepath.Base(op.Path) != r.name || !r.armed.CompareAndSwap(true, false) {
		return nil
	}
	r.hits.Add(1)
	return &fs.PathError{Op: "open", Path: op.Path, Err: syscall.ENOENT}
}

func (r *removedOnce) String() string { return "removed once: " + r.name }

// A read-only store whose open, or a later read, meets a file removed
// under it opens the store again and reads what is there; the missing
// file is no damage.
func TestReadOnlyReadsAgainWhenAFileIsRemoved(t *testing.T) {
	dir := t.TempDir()
	// Two tables: the events and a head (flushed as each reopen replays
	// its log), then a table of a second head only, which neither the
	// open (the last event, the metadata) nor an event read touches.
	s, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	events := appendN(t, s, "a", 3, "c1")
	s.Close()
	for _, thread := range []string{"a", "b"} {
		if s, err = Open(dir, nil); err != nil {
			t.Fatal(err)
		}
		if err := s.PutThreadState(thread, []byte(`{"id":"`+thread+`"}`), false, nil); err != nil {
			t.Fatal(err)
		}
		s.Close()
	}
	s, err = Open(dir, nil) // flushes the last head
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	tables, _ := filepath.Glob(filepath.Join(dir, "*.sst"))
	slices.Sort(tables)
	if len(tables) < 2 {
		t.Fatalf("tables %v, want two at least", tables)
	}
	first, last := &removedOnce{name: filepath.Base(tables[0])}, &removedOnce{name: filepath.Base(tables[len(tables)-1])}
	defer func(fs vfs.FS) { readOnlyDefault = fs }(readOnlyDefault)
	readOnlyDefault = readOnlyFS{errorfs.Wrap(vfs.Default, errorfs.Any(first, last))}

	first.armed.Store(true) // the open's first read of the events' table
	r, err := OpenWith(dir, Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("open, a table removed under it once: %v", err)
	}
	defer r.Close()
	last.armed.Store(true) // the heads' read of the newest table
	heads, err := r.Heads("", 0)
	if err != nil {
		t.Fatalf("heads, a table removed under the read once: %v", err)
	}
	got, err := r.After(0, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := struct {
		Heads  []Head
		Events []Record
		Hits   []int32
		Damage error
	}{[]Head{{"a", []byte(`{"id":"a"}`)}, {"b", []byte(`{"id":"b"}`)}}, events, []int32{1, 1}, nil}
	if diff := cmp.Diff(want, struct {
		Heads  []Head
		Events []Record
		Hits   []int32
		Damage error
	}{heads, got, []int32{first.hits.Load(), last.hits.Load()}, r.Damage()}); diff != "" {
		t.Errorf("the store read again after its files were removed under it (-want +got):\n%s", diff)
	}
}
