package plugintest

import (
	"strings"
	"testing"

	"github.com/baton-run/baton/sdk"
)

// What a test asks of the events a session yielded (a match is a
// predicate on one event):
//
//	term := plugintest.Find(t, evs, func(ev sdk.RuntimeEvent) bool {
//		return ev.Kind == sdk.EventTurnTerminal && ev.ThreadRef == child
//	})

// Filter is the events that match, in order.
func Filter(evs []sdk.RuntimeEvent, match func(sdk.RuntimeEvent) bool) []sdk.RuntimeEvent {
	var out []sdk.RuntimeEvent
	for _, ev := range evs {
		if match(ev) {
			out = append(out, ev)
		}
	}
	return out
}

// Count is how many events match.
func Count(evs []sdk.RuntimeEvent, match func(sdk.RuntimeEvent) bool) int {
	n := 0
	for _, ev := range evs {
		if match(ev) {
			n++
		}
	}
	return n
}

// Index is the position of the first event that matches, or -1.
func Index(evs []sdk.RuntimeEvent, match func(sdk.RuntimeEvent) bool) int {
	for i, ev := range evs {
		if match(ev) {
			return i
		}
	}
	return -1
}

// Find is the first event that matches; the test fails (listing the
// events' kinds) when none does.
func Find(t testing.TB, evs []sdk.RuntimeEvent, match func(sdk.RuntimeEvent) bool) sdk.RuntimeEvent {
	t.Helper()
	i := Index(evs, match)
	if i < 0 {
		t.Fatalf("no such event in %s", Kinds(evs))
	}
	return evs[i]
}

// ItemText joins the streamed text (content deltas) of the items of a kind
// on a thread; thread "" takes every thread's.
func ItemText(evs []sdk.RuntimeEvent, thread string, kind sdk.ItemKind) string {
	var b strings.Builder
	for _, ev := range evs {
		if ev.Kind == sdk.EventContentDelta && ev.ItemKind == kind && (thread == "" || ev.ThreadRef == thread) {
			b.WriteString(ev.Text)
		}
	}
	return b.String()
}

// CheckItemsClosed fails the test unless every item started in evs is
// completed in evs, once, after it started: what a turn's events must
// hold by its terminal.
func CheckItemsClosed(t testing.TB, evs []sdk.RuntimeEvent) {
	t.Helper()
	open := map[string]bool{}
	for _, ev := range evs {
		switch ev.Kind {
		case sdk.EventItemStarted:
			if open[ev.ItemRef] {
				t.Errorf("item %s started twice", ev.ItemRef)
			}
			open[ev.ItemRef] = true
		case sdk.EventItemCompleted:
			if !open[ev.ItemRef] {
				t.Errorf("item %s completed but not open", ev.ItemRef)
			}
			delete(open, ev.ItemRef)
		}
	}
	for ref := range open {
		t.Errorf("item %s never completed", ref)
	}
}

// CheckRawFrames fails the test for every event that names no raw frame
// (sdk.RuntimeEvent.RawFrame), but those of the exempt kinds: the events a
// plugin makes of its own accord rather than from a provider frame.
func CheckRawFrames(t testing.TB, evs []sdk.RuntimeEvent, exempt ...sdk.EventKind) {
	t.Helper()
	for _, ev := range evs {
		if ev.RawFrame != 0 {
			continue
		}
		free := false
		for _, k := range exempt {
			free = free || ev.Kind == k
		}
		if !free {
			t.Errorf("event %s (%s) names no raw frame", ev.Kind, ev.ItemRef)
		}
	}
}
