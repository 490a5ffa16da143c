package cursor

import (
	"bytes"
	"testing"

	"github.com/baton-run/baton/sdk"
)

// FuzzDecodeEvent: any line decodes to an event with a type or to an
// error, never both, and the normalizer takes it without panicking.
func FuzzDecodeEvent(f *testing.F) {
	f.Add([]byte(initLine))
	f.Add([]byte(toolLine("completed", `,"result":{"success":{"content":"x"}}`)))
	f.Fuzz(func(t *testing.T, line []byte) {
		e, err := DecodeEvent(line)
		if (err == nil) == (e == nil) || (e != nil && e.Type == "") {
			t.Fatalf("DecodeEvent(%q) = %+v, %v", line, e, err)
		}
		n := newNormalizer("/w", "")
		n.begin("s/turn-1", "a1", 0)
		for _, ev := range n.line(line) {
			if ev.Kind == "" {
				t.Fatalf("an event without a kind from %q", line)
			}
		}
	})
}

// FuzzNormalize: whatever a process writes (lines split at newlines) and
// however it ends, a turn gets one turn_started before anything else of
// it and one terminal after everything else of it; every item that starts
// completes by then, and nothing streams into an item that is not open.
func FuzzNormalize(f *testing.F) {
	f.Add([]byte(initLine+"\n"+toolLine("started", "")+"\n"+`{"type":"result","subtype":"success"}`), false)
	f.Fuzz(func(t *testing.T, stream []byte, interrupted bool) {
		n := newNormalizer("/w", "")
		evs := n.begin("s/turn-1", "a1", 0)
		for _, l := range bytes.Split(stream, []byte("\n")) {
			evs = append(evs, n.line(l)...)
		}
		evs = append(evs, n.exited(interrupted, "gone")...)
		started, ended := -1, -1
		open := map[string]int{}
		for i, ev := range evs {
			if ev.TurnRef == "" {
				continue
			}
			if ev.TurnRef != "s/turn-1" {
				t.Fatalf("event %d of another turn: %+v", i, ev)
			}
			switch {
			case ev.Kind == sdk.EventTurnStarted:
				if started >= 0 {
					t.Fatalf("a second turn_started at %d", i)
				}
				started = i
			case started < 0:
				t.Fatalf("event %d (%s) before turn_started", i, ev.Kind)
			case ended >= 0:
				t.Fatalf("event %d (%s) after the terminal", i, ev.Kind)
			case ev.Kind == sdk.EventTurnTerminal:
				ended = i
			case ev.Kind == sdk.EventItemStarted:
				open[ev.ItemRef]++
			case ev.Kind == sdk.EventItemCompleted:
				if open[ev.ItemRef] == 0 {
					t.Fatalf("item %q completed at %d without being open", ev.ItemRef, i)
				}
				open[ev.ItemRef]--
			case ev.Kind == sdk.EventContentDelta:
				if open[ev.ItemRef] == 0 {
					t.Fatalf("a delta at %d into item %q, which is not open", i, ev.ItemRef)
				}
			}
		}
		if started < 0 || ended < 0 {
			t.Fatalf("turn_started at %d, terminal at %d", started, ended)
		}
		for ref, k := range open {
			if k != 0 {
				t.Fatalf("item %q still open at the terminal", ref)
			}
		}
	})
}
