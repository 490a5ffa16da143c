package filelock

import (
	"os"
	"path/filepath"
	"testing"
)

// A second open file of the same path cannot take the lock while the
// first holds it, and can once the first is closed.
func TestTryLock(t *testing.T) {
	if !Supported {
		t.Skip("no file lock on this platform")
	}
	path := filepath.Join(t.TempDir(), "lock")
	open := func() *os.File {
		f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	a, b := open(), open()
	defer b.Close()
	if ok, err := TryLock(a); !ok || err != nil {
		t.Fatalf("first lock: %v, %v", ok, err)
	}
	if ok, err := TryLock(b); ok || err != nil {
		t.Fatalf("second lock while the first holds it: %v, %v", ok, err)
	}
	a.Close()
	if ok, err := TryLock(b); !ok || err != nil {
		t.Fatalf("second lock after the first closed: %v, %v", ok, err)
	}
	c := os.NewFile(^uintptr(0), "bad")
	if _, err := TryLock(c); err == nil {
		t.Error("a bad descriptor locked")
	}
}
