package plugintest

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-run/baton/sdk"
	"github.com/baton-run/baton/sdk/clock"
)

// fatals is a testing.TB whose Fatalf records the message and ends the
// goroutine, as testing's does.
type fatals struct {
	testing.TB
	msgs chan string
}

func (f *fatals) Helper() {}

func (f *fatals) Fatalf(format string, args ...any) {
	f.msgs <- fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// A wait for events gives up Timeout after it began, on Clock, naming
// what it waited for and what came meanwhile.
func TestUntilGivesUpAfterTimeout(t *testing.T) {
	f := clock.NewFake(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
	Clock = f
	t.Cleanup(func() { Clock = nil })
	s := &Session{events: make(chan sdk.RuntimeEvent), errc: make(chan error, 1)}
	r := &fatals{TB: t, msgs: make(chan string, 1)}
	returned := make(chan []sdk.RuntimeEvent, 1)
	go func() {
		returned <- s.Until(r, "the end", func(ev sdk.RuntimeEvent) bool { return ev.Kind == sdk.EventTurnTerminal })
	}()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute) // a guard: a broken wait fails, not hangs
	defer cancel()
	if err := f.WaitTimers(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]time.Duration{Timeout}, f.Pending()); diff != "" {
		t.Fatalf("pending (-want +got):\n%s", diff)
	}
	f.Advance(Timeout / 2)
	s.events <- sdk.RuntimeEvent{Kind: sdk.EventContentDelta, ItemKind: sdk.ItemAssistantMessage}
	f.Advance(Timeout/2 - time.Millisecond)
	select {
	case m := <-r.msgs:
		t.Fatalf("gave up before Timeout: %s", m)
	case evs := <-returned:
		t.Fatalf("returned %v", evs)
	default:
	}
	f.Advance(time.Millisecond)
	select {
	case m := <-r.msgs:
		if want := "waiting for the end: nothing after 30s (events so far: [content_delta(assistant_message)])"; m != want {
			t.Fatalf("gave up with %q, want %q", m, want)
		}
	case evs := <-returned:
		t.Fatalf("returned %v", evs)
	case <-ctx.Done():
		t.Fatal("did not give up at Timeout")
	}
}
