package plugintest

import (
	"fmt"
	"slices"
	"testing"

	"github.com/baton-run/baton/sdk"
)

// recorder is a testing.TB that keeps what a check reports.
type recorder struct {
	testing.TB
	errs []string
}

func (r *recorder) Helper() {}

func (r *recorder) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

func TestItemText(t *testing.T) {
	evs := []sdk.RuntimeEvent{
		{Kind: sdk.EventContentDelta, ItemKind: sdk.ItemAssistantMessage, ThreadRef: "root", Text: "Hel"},
		{Kind: sdk.EventContentDelta, ItemKind: sdk.ItemReasoning, ThreadRef: "root", Text: "thinking"},
		{Kind: sdk.EventContentDelta, ItemKind: sdk.ItemAssistantMessage, ThreadRef: "child", Text: "Hi."},
		{Kind: sdk.EventItemCompleted, ItemKind: sdk.ItemAssistantMessage, ThreadRef: "root", Text: "Hello"},
		{Kind: sdk.EventContentDelta, ItemKind: sdk.ItemAssistantMessage, ThreadRef: "root", Text: "lo"},
	}
	for _, c := range []struct{ thread, want string }{{"root", "Hello"}, {"child", "Hi."}, {"", "HelHi.lo"}} {
		if got := ItemText(evs, c.thread, sdk.ItemAssistantMessage); got != c.want {
			t.Errorf("assistant text on %q = %q, want %q", c.thread, got, c.want)
		}
	}
	if n := Count(evs, func(ev sdk.RuntimeEvent) bool { return ev.ThreadRef == "root" }); n != 4 {
		t.Errorf("count = %d, want 4", n)
	}
	if i := Index(evs, func(ev sdk.RuntimeEvent) bool { return ev.Kind == sdk.EventItemCompleted }); i != 3 {
		t.Errorf("index = %d, want 3", i)
	}
}

func TestCheckItemsClosed(t *testing.T) {
	ev := func(kind sdk.EventKind, ref string) sdk.RuntimeEvent {
		return sdk.RuntimeEvent{Kind: kind, ItemRef: ref}
	}
	r := &recorder{TB: t}
	CheckItemsClosed(r, []sdk.RuntimeEvent{
		ev(sdk.EventItemStarted, "a"), ev(sdk.EventItemCompleted, "a"), // closed
		ev(sdk.EventItemStarted, "b"), ev(sdk.EventItemStarted, "b"), ev(sdk.EventItemCompleted, "b"),
		ev(sdk.EventItemCompleted, "c"),
		ev(sdk.EventItemStarted, "d"),
	})
	want := []string{"item b started twice", "item c completed but not open", "item d never completed"}
	if !slices.Equal(r.errs, want) {
		t.Errorf("reported %q, want %q", r.errs, want)
	}
}

func TestCheckRawFrames(t *testing.T) {
	r := &recorder{TB: t}
	CheckRawFrames(r, []sdk.RuntimeEvent{
		{Kind: sdk.EventTurnStarted},
		{Kind: sdk.EventContentDelta, RawFrame: 3},
		{Kind: sdk.EventUsage, ItemRef: "u"},
	}, sdk.EventTurnStarted)
	if want := []string{"event usage (u) names no raw frame"}; !slices.Equal(r.errs, want) {
		t.Errorf("reported %q, want %q", r.errs, want)
	}
}
