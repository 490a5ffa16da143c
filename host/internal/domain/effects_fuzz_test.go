package domain

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// The outbox's stored effects are read back by DecodeEffect, whatever a
// damaged or a newer host's store holds: it refuses what it cannot read
// with an error, and what it reads is stored again as the same effect.
func FuzzDecodeEffect(f *testing.F) {
	b, err := os.ReadFile("testdata/compat/effects-3842d10.json")
	if err != nil {
		f.Fatal(err)
	}
	var stored []json.RawMessage
	if err := json.Unmarshal(b, &stored); err != nil {
		f.Fatal(err)
	}
	for _, s := range stored {
		f.Add([]byte(s))
	}
	f.Add([]byte(`{"type":"open_session","threadId":"thr","id":"9.0","runId":"run_2","attemptId":"att_3","sessionId":"ses_1","provider":"acp","command":{"argv":["agent"]},"resume":"pt"}`))
	f.Add([]byte(`{"type":"retire_session","threadId":"thr","id":"9.1","sessionId":"ses_1"}`))
	f.Add([]byte(`{"type":"start_turn","threadId":"thr","id":"9.2","runId":"run_2","attemptId":"att_3","text":"one","sessionId":"ses_1","reused":true}`))
	f.Add([]byte(`{"type":"open_portal","threadId":"thr","id":"9.0"}`))
	f.Add([]byte(`{"type":"start_turn","threadId":7}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := DecodeEffect(b)
		if err != nil {
			if e != nil {
				t.Fatalf("an error (%v) and an effect %#v", err, e)
			}
			return
		}
		again, err := json.Marshal(e)
		if err != nil {
			t.Fatalf("%#v cannot be stored again: %v", e, err)
		}
		back, err := DecodeEffect(again)
		if err != nil {
			t.Fatalf("%s, stored again as %s, reads as: %v", b, again, err)
		}
		if d := cmp.Diff(e, back, cmpopts.EquateEmpty(), cmp.AllowUnexported(unknownEffect{})); d != "" {
			t.Fatalf("%s stored again (-read +again):\n%s", b, d)
		}
		Pending(e)
		Replay(e)
	})
}
