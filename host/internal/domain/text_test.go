package domain

import (
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"pgregory.net/rapid"
)

// Property: copies of a Text behave as independent strings, whatever
// order they are copied and appended in (they share a buffer underneath).
func TestTextCopiesAreIndependent(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		texts := []Text{{}}
		model := []string{""}
		for range rapid.IntRange(1, 60).Draw(rt, "ops") {
			i := rapid.IntRange(0, len(texts)-1).Draw(rt, "copy")
			if rapid.IntRange(0, 3).Draw(rt, "op") == 0 {
				texts = append(texts, texts[i])
				model = append(model, model[i])
				continue
			}
			s := rapid.StringMatching(`[a-zé]{0,40}`).Draw(rt, "s")
			texts[i].Append(s)
			model[i] += s
			for j := range texts {
				if got := texts[j].String(); got != model[j] || texts[j].Len() != len(model[j]) || texts[j].IsZero() != (model[j] == "") {
					rt.Fatalf("copy %d is %q, want %q", j, got, model[j])
				}
			}
		}
	})
}

// A text of many deltas grows in place: appending never copies what is
// already there once the buffer has room.
func TestTextGrowsInPlace(t *testing.T) {
	var tx Text
	allocs := testing.AllocsPerRun(1, func() {
		tx = Text{}
		for range 100000 {
			tx.Append("token ")
		}
	})
	if tx.Len() != 600000 || !strings.HasPrefix(tx.String(), "token token") {
		t.Fatalf("text of %d bytes", tx.Len())
	}
	// Doubling from 64 bytes to 1.2 MB takes 15 buffers (and their
	// headers): far fewer than one per append.
	if allocs > 40 {
		t.Fatalf("%v allocations for 100,000 appends", allocs)
	}
}

// A reader of one copy and a writer appending to another share the buffer
// without a race (run with -race).
func TestTextReadWhileAppending(t *testing.T) {
	published := NewText("hello")
	scratch := published
	var wg sync.WaitGroup
	wg.Go(func() {
		for range 1000 {
			if published.String() != "hello" {
				t.Error("the published copy changed")
				return
			}
		}
	})
	for range 1000 {
		scratch.Append("!")
	}
	wg.Wait()
	if scratch.Len() != 1005 {
		t.Fatalf("scratch is %d bytes", scratch.Len())
	}
}

func TestTextJSON(t *testing.T) {
	var m struct {
		A Text `json:"a"`
		B Text `json:"b,omitzero"`
	}
	if err := json.Unmarshal([]byte(`{"a":"x\u00e9"}`), &m); err != nil || m.A.String() != "xé" {
		t.Fatalf("%q %v", m.A.String(), err)
	}
	if b, _ := json.Marshal(m); string(b) != `{"a":"xé"}` {
		t.Fatalf("%s", b)
	}
	if err := json.Unmarshal([]byte(`{"a":1}`), &m); err == nil {
		t.Fatal("a number decoded as text")
	}
	if !m.A.Equal(NewText("xé")) || m.A.Equal(NewText("x")) {
		t.Fatal("Equal")
	}
}
