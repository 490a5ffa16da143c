package eventlog

import (
	"reflect"
	"testing"
	"time"
)

// The store's own encodings are read back from disk, where a damaged file
// can put anything: a snapshot envelope and a thread index entry must be
// refused with an error, never a panic, and what they accept must read
// back the same once written again.
func FuzzStoredValues(f *testing.F) {
	f.Add(encodeSnapshot(Snapshot{Schema: 1, Seq: 7, Body: []byte(`{"id":"t"}`)}))
	f.Add(indexValue("message.delta", time.Unix(1, 2), []byte(`{"text":"hi"}`)))
	f.Add([]byte{1, 200, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		if sn, err := decodeSnapshot(b); err == nil {
			if string(encodeSnapshot(sn)) != string(b) {
				t.Fatalf("snapshot %x decoded as %+v, which encodes otherwise", b, sn)
			}
		}
		if len(b) == 0 {
			return // the store never reads an empty index value this way
		}
		if r, err := parseIndexValue("t", 3, b); err == nil {
			again, err := parseIndexValue("t", 3, indexValue(r.Type, r.At, r.Data))
			if err != nil || !reflect.DeepEqual(again, r) || r.Sequence != 3 || r.ThreadID != "t" {
				t.Fatalf("index value %x read as %+v, which reads back as %+v, %v", b, r, again, err)
			}
		}
	})
}
