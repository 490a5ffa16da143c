package domain

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"
)

// Deltas to one message or node back to back become one, in order; a
// delta to another message, another node, or any other event between them
// keeps them apart.
func TestCoalesce(t *testing.T) {
	in := []Payload{
		MessageDelta{MessageID: "m1", Text: "a"}, MessageDelta{MessageID: "m1", Text: "b"}, MessageDelta{MessageID: "m1", Text: "c"},
		MessageDelta{MessageID: "m2", Text: "d"}, MessageDelta{MessageID: "m1", Text: "e"},
		MessageCompleted{MessageID: "m1"}, MessageDelta{MessageID: "m2", Text: "f"},
		NodeDelta{RunID: "r", NodeID: "n1", Text: "g"}, NodeDelta{RunID: "r", NodeID: "n1", Text: "h"},
		NodeDelta{RunID: "r", NodeID: "n2", Text: "i"}, NodeDelta{RunID: "r2", NodeID: "n2", Text: "j"}, NodeDelta{RunID: "r2", NodeID: "n2", Text: "k"},
	}
	want := []Payload{
		MessageDelta{MessageID: "m1", Text: "abc"}, MessageDelta{MessageID: "m2", Text: "d"}, MessageDelta{MessageID: "m1", Text: "e"},
		MessageCompleted{MessageID: "m1"}, MessageDelta{MessageID: "m2", Text: "f"},
		NodeDelta{RunID: "r", NodeID: "n1", Text: "gh"}, NodeDelta{RunID: "r", NodeID: "n2", Text: "i"}, NodeDelta{RunID: "r2", NodeID: "n2", Text: "jk"},
	}
	before := append([]Payload(nil), in...)
	if d := cmp.Diff(want, Coalesce(in)); d != "" {
		t.Errorf("coalesced (-want +got):\n%s", d)
	}
	if d := cmp.Diff(before, in); d != "" {
		t.Errorf("the batch it was given changed (-before +after):\n%s", d)
	}
	if got := Coalesce(nil); len(got) != 0 {
		t.Errorf("nothing coalesced to %v", got)
	}
}

// Property: a thread's messages after a batch's events are the same as
// after the batch coalesced, which keeps every other event in its order
// and leaves no two deltas to one text side by side.
func TestCoalesceProperty(t *testing.T) {
	at := time.Date(2026, 12, 4, 13, 0, 0, 0, time.UTC)
	rapid.Check(t, func(rt *rapid.T) {
		var batch []Payload
		added := 2
		for range rapid.IntRange(0, 40).Draw(rt, "n") {
			switch rapid.IntRange(0, 5).Draw(rt, "kind") {
			case 0, 1, 2:
				batch = append(batch, MessageDelta{MessageID: fmt.Sprintf("m%d", rapid.IntRange(1, added).Draw(rt, "m")),
					Text: rapid.StringMatching(`[a-zé ]{0,3}`).Draw(rt, "text")})
			case 3:
				batch = append(batch, NodeDelta{RunID: "r", NodeID: fmt.Sprintf("n%d", rapid.IntRange(1, 2).Draw(rt, "node")),
					Text: rapid.StringMatching(`[a-z]{0,3}`).Draw(rt, "text")})
			case 4:
				added++
				batch = append(batch, MessageAdded{MessageID: fmt.Sprintf("m%d", added), RunID: "r", Role: RoleAssistant, Status: StatusInProgress})
			case 5:
				batch = append(batch, MessageCompleted{MessageID: fmt.Sprintf("m%d", rapid.IntRange(1, added).Draw(rt, "m"))})
			}
		}
		apply := func(events []Payload) []Message {
			var th Thread
			Evolve(&th, Event{Sequence: 1, ThreadID: "t", At: at, Payload: ThreadCreated{Provider: "acp", Cwd: "/w"}})
			for i, id := range []string{"m1", "m2"} {
				Evolve(&th, Event{Sequence: uint64(2 + i), ThreadID: "t", At: at, Payload: MessageAdded{MessageID: id, RunID: "r",
					Role: RoleAssistant, Status: StatusInProgress}})
			}
			for i, p := range events {
				Evolve(&th, Event{Sequence: uint64(4 + i), ThreadID: "t", At: at, Payload: p})
			}
			return th.Messages
		}
		out := Coalesce(batch)
		if d := cmp.Diff(apply(batch), apply(out), cmp.Comparer(func(a, b Text) bool { return a.String() == b.String() })); d != "" {
			rt.Fatalf("messages after the batch (-as sent +coalesced):\n%s", d)
		}
		others := func(events []Payload) (o []Payload, texts map[string]string) {
			texts = map[string]string{}
			for _, p := range events {
				switch d := p.(type) {
				case MessageDelta:
					texts["m:"+d.MessageID] += d.Text
				case NodeDelta:
					texts["n:"+d.RunID+"/"+d.NodeID] += d.Text
				default:
					o = append(o, p)
				}
			}
			return o, texts
		}
		wo, wt := others(batch)
		go_, gt := others(out)
		if d := cmp.Diff(wo, go_); d != "" {
			rt.Fatalf("other events (-as sent +coalesced):\n%s", d)
		}
		if d := cmp.Diff(wt, gt); d != "" {
			rt.Fatalf("texts (-as sent +coalesced):\n%s", d)
		}
		for i := 1; i < len(out); i++ {
			if sameDelta(out[i-1], out[i]) {
				rt.Fatalf("deltas %d and %d to one text are left apart: %v", i-1, i, out)
			}
		}
	})
}
