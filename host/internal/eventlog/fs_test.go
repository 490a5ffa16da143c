//go:build unix

package eventlog

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/google/go-cmp/cmp"
)

// The store's files are 0600 and its directories 0700 whatever the umask
// and the mode of the directory it is in, and a store an older Baton left
// with 0644 files and 0755 directories is made private when it is opened.
func TestStoreIsPrivate(t *testing.T) {
	old := syscall.Umask(0) // the most open umask: Pebble alone would make 0666 files
	t.Cleanup(func() { syscall.Umask(old) })
	parent := filepath.Join(t.TempDir(), "data")
	if err := os.Mkdir(parent, 0o755); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(parent, "events")
	use := func() {
		t.Helper()
		s, err := Open(dir, nil)
		if err != nil {
			t.Fatal(err)
		}
		appendN(t, s, "a", 10, "")
		if err := s.Compact(t.Context()); err != nil { // tables, a new manifest
			t.Fatal(err)
		}
		appendN(t, s, "a", 10, "")
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	use()
	use() // a reopened store replays its log into a table
	if open := openModes(t, dir); len(open) > 0 {
		t.Errorf("files and directories others may reach (path: mode):\n%s", cmp.Diff(map[string]string{}, open))
	}

	// A store written with the modes of an older Baton.
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if d.IsDir() {
			return os.Chmod(p, 0o755)
		}
		return os.Chmod(p, 0o644)
	})
	s, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if open := openModes(t, dir); len(open) > 0 {
		t.Errorf("after opening a store with 0644 files, still open (path: mode):\n%s", cmp.Diff(map[string]string{}, open))
	}
}

// openModes lists what under dir (dir too) is not 0600 (a file) or 0700
// (a directory).
func openModes(t *testing.T, dir string) map[string]string {
	t.Helper()
	open := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil {
			var fi fs.FileInfo
			if fi, err = d.Info(); err == nil {
				want := fs.FileMode(0o600)
				if d.IsDir() {
					want = 0o700
				}
				if fi.Mode().Perm() != want {
					open[p] = fi.Mode().Perm().String()
				}
				return nil
			}
		}
		// An open store deletes what it no longer needs (an OPTIONS file
		// a newer one replaced) in the background, between the listing and
		// the lstat: a file gone is reachable by nobody.
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return open
}

// Every way the store's file system makes or opens a file for writing
// leaves it 0600, whatever the umask; what fails fails as Pebble's own.
func TestPrivateFS(t *testing.T) {
	old := syscall.Umask(0)
	t.Cleanup(func() { syscall.Umask(old) })
	dir := t.TempDir()
	pfs := privateDefault
	if pfs.Unwrap() != vfs.Default {
		t.Errorf("Unwrap = %v, want vfs.Default", pfs.Unwrap())
	}
	p := func(name string) string { return filepath.Join(dir, name) }
	for _, open := range []func() (vfs.File, error){
		func() (vfs.File, error) { return pfs.Create(p("created"), vfs.WriteCategoryUnspecified) },
		func() (vfs.File, error) { return pfs.OpenReadWrite(p("opened"), vfs.WriteCategoryUnspecified) },
		func() (vfs.File, error) {
			if err := os.WriteFile(p("old"), nil, 0o644); err != nil {
				return nil, err
			}
			return pfs.ReuseForWrite(p("old"), p("reused"), vfs.WriteCategoryUnspecified)
		},
	} {
		f, err := open()
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	got := map[string]string{}
	for _, n := range []string{"created", "opened", "reused"} {
		fi, err := os.Stat(p(n))
		if err != nil {
			t.Fatal(err)
		}
		got[n] = fi.Mode().Perm().String()
	}
	if diff := cmp.Diff(map[string]string{"created": "-rw-------", "opened": "-rw-------", "reused": "-rw-------"}, got); diff != "" {
		t.Errorf("modes (-want +got):\n%s", diff)
	}
	if _, err := pfs.OpenReadWrite(p("missing/x"), vfs.WriteCategoryUnspecified); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("open in a missing directory: %v, want not found", err)
	}
	l, err := pfs.Lock(p("LOCK"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if _, err := pfs.Lock(p("LOCK")); err == nil {
		t.Error("a second lock of a held lock succeeded")
	}
}
