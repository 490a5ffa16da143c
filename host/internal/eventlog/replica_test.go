package eventlog

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// A batch's metadata is written with its events: a replica's watermark is
// never out of step with what it applied.
func TestBatchMetaIsWrittenWithItsEvents(t *testing.T) {
	s, err := Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	appendN(t, s, "a", 1, "")
	if _, _, err := s.Append(Batch{Meta: map[string][]byte{"watermark": []byte("7"), "other": []byte("x")}}); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, name := range []string{"watermark", "other"} {
		v, found, err := s.Meta(name)
		if err != nil || !found {
			t.Fatalf("meta %s: found %v, %v", name, found, err)
		}
		got[name] = string(v)
	}
	if d := cmp.Diff(map[string]string{"watermark": "7", "other": "x"}, got); d != "" {
		t.Fatalf("meta after the batch (-want +got):\n%s", d)
	}
	if last, _ := s.Last(); last != 1 {
		t.Fatalf("a batch of metadata alone moved the last sequence to %d", last)
	}
}

// A store opened NoSync keeps no seal (one written after an unsynced
// commit could name events a crash lost) and keeps what it committed
// across a close and an open.
func TestNoSyncStoreKeepsNoSeal(t *testing.T) {
	dir := t.TempDir()
	s, err := OpenWith(dir, Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	want := appendN(t, s, "a", 3, "c1")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, SealName)); !os.IsNotExist(err) {
		t.Fatalf("a NoSync store wrote a seal: %v", err)
	}
	s, err = OpenWith(dir, Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, err := s.After(0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("events after reopening (-want +got):\n%s", d)
	}
}
