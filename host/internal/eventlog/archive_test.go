package eventlog

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"
)

// A thread's parts are written with the events that made them leave, or
// by themselves (a rebuild), and read back by ordinal, forwards or newest
// first from a cursor, without those numbered past what the reader's
// projection holds; another thread's are not among them.
func TestArchiveParts(t *testing.T) {
	s, err := Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	part := func(o, p uint32) ArchivePart {
		return ArchivePart{Ordinal: o, Part: p, Data: []byte(fmt.Sprintf(`{"o":%d,"p":%d}`, o, p))}
	}
	names := func(ps []ArchivePart) string {
		out := ""
		for _, a := range ps {
			out += fmt.Sprintf("%d.%d ", a.Ordinal, a.Part)
			if string(a.Data) != string(part(a.Ordinal, a.Part).Data) {
				t.Fatalf("part %d.%d holds %s", a.Ordinal, a.Part, a.Data)
			}
		}
		return out
	}
	ev := []Pending{{ThreadID: "t", Type: "x.happened", At: time.Unix(1, 0), Data: json.RawMessage(`{}`)}}
	if _, _, err := s.Append(Batch{Events: ev, ThreadID: "t", Archive: []ArchivePart{part(1, 0), part(2, 1), part(0, 2)}}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Append(Batch{Events: []Pending{{ThreadID: "u", Type: "x.happened", At: time.Unix(1, 0), Data: json.RawMessage(`{}`)}},
		ThreadID: "u", Archive: []ArchivePart{part(1, 0)}}); err != nil {
		t.Fatal(err)
	}
	if err := s.PutArchive("t", []ArchivePart{part(1, 3), part(3, 4), part(2, 1)}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		from, to, below uint32
		want            string
	}{
		{0, 10, 10, "0.2 1.0 1.3 2.1 3.4 "},
		{1, 2, 10, "1.0 1.3 2.1 "},
		{1, 3, 3, "1.0 2.1 "}, // parts 3 and on left after the reader's projection
		{4, 9, 10, ""},
	} {
		got, err := s.Archive("t", tc.from, tc.to, tc.below)
		if err != nil || names(got) != tc.want {
			t.Errorf("Archive(%d, %d, below %d) = %q, %v; want %q", tc.from, tc.to, tc.below, names(got), err, tc.want)
		}
	}
	var back []ArchivePart
	o, p := uint32(1<<32-1), uint32(0)
	for {
		got, err := s.ArchiveBefore("t", o, p, 4, 2)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) == 0 {
			break
		}
		back = append(back, got...)
		o, p = got[len(got)-1].Ordinal, got[len(got)-1].Part
	}
	if got := names(back); got != "2.1 1.3 1.0 0.2 " {
		t.Errorf("newest first, below 4: %q", got)
	}
	if _, _, err := parseArchiveKey([]byte("a")); err == nil {
		t.Error("bad archive key accepted")
	}
}

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
