package eventlog

import (
	"errors"
	"reflect"
	"testing"
)

// A store opened read-only writes no parts, and a closed one reads none.
func TestArchiveRefusals(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	r, err := OpenWith(dir, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := r.PutArchive("t", []ArchivePart{{Ordinal: 1}}); !errors.Is(err, ErrReadOnly) {
		t.Errorf("a read-only store wrote parts: %v", err)
	}
	if _, err := s.Archive("t", 0, 1, 1); !errors.Is(err, ErrClosed) {
		t.Errorf("a closed store read parts: %v", err)
	}
	if _, err := s.ArchiveBefore("t", 1, 0, 1, 1); !errors.Is(err, ErrClosed) {
		t.Errorf("a closed store read parts: %v", err)
	}
	if got, err := r.Archive("t", 0, 1, 1); err != nil || !reflect.DeepEqual(got, []ArchivePart(nil)) {
		t.Errorf("no parts: %v %v", got, err)
	}
}
