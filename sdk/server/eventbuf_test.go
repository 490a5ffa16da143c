package server

import (
	"errors"
	"fmt"
	"testing"

	"pgregory.net/rapid"

	"github.com/baton-run/baton/sdk"
)

func TestEventBufferResumesAfterAnySequence(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		b := newEventBuffer("s")
		n := rapid.IntRange(0, 50).Draw(t, "n")
		for i := 0; i < n; i++ {
			b.Emit(sdk.RuntimeEvent{Kind: sdk.EventContentDelta})
		}
		after := rapid.Uint64Range(0, uint64(n)).Draw(t, "after")
		evs, ended, _, err := b.after(after)
		if err != nil || ended {
			t.Fatalf("after(%d): %v ended=%v", after, err, ended)
		}
		if len(evs) != n-int(after) {
			t.Fatalf("after(%d) of %d: %d events", after, n, len(evs))
		}
		for i, ev := range evs {
			if ev.Sequence != after+uint64(i)+1 || ev.SessionID != "s" {
				t.Fatalf("event %d: %+v", i, ev)
			}
		}
	})
}

func TestEventBufferEndsAtRuntimeExit(t *testing.T) {
	b := newEventBuffer("s")
	b.Emit(sdk.RuntimeEvent{Kind: sdk.EventRuntimeExited})
	b.Emit(sdk.RuntimeEvent{Kind: sdk.EventContentDelta}) // after the exit: dropped
	evs, ended, _, _ := b.after(0)
	if len(evs) != 1 || !ended {
		t.Fatalf("events %d ended %v; want the exit only, and ended", len(evs), ended)
	}
}

func TestEventBufferBound(t *testing.T) {
	b := newEventBuffer("s")
	for i := 0; i < maxBufferedEvents+10; i++ {
		b.Emit(sdk.RuntimeEvent{})
	}
	if _, _, _, err := b.after(5); !errors.Is(err, sdk.ErrInvalid) {
		t.Errorf("reading dropped events: %v, want an error", err)
	}
	evs, _, _, err := b.after(10)
	if err != nil || len(evs) != maxBufferedEvents {
		t.Errorf("after(10): %d events, %v", len(evs), err)
	}
}

func TestEventBufferAckDropsWhatWasRead(t *testing.T) {
	b := newEventBuffer("s")
	for i := 0; i < 10; i++ {
		b.Emit(sdk.RuntimeEvent{})
	}
	b.ack(4)
	b.ack(2) // older acks change nothing
	evs, _, _, err := b.after(4)
	if err != nil || len(evs) != 6 || evs[0].Sequence != 5 {
		t.Fatalf("after(4) = %d events from %d, %v", len(evs), evs[0].Sequence, err)
	}
	if _, _, _, err := b.after(3); !errors.Is(err, sdk.ErrInvalid) {
		t.Errorf("reading acknowledged events: %v, want an error", err)
	}
	b.ack(100)
	if evs, _, _, _ := b.after(10); len(evs) != 0 {
		t.Errorf("after acking everything: %d events", len(evs))
	}
}

// Property: emits, acks and reads in any order keep the buffer a window of
// the stream: after(seq) returns exactly the events after seq while they
// are kept, in order.
func TestEventBufferWindowProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		b := newEventBuffer("s")
		var acked uint64
		for range rapid.IntRange(1, 200).Draw(t, "ops") {
			switch rapid.IntRange(0, 3).Draw(t, "op") {
			case 0, 1:
				for range rapid.IntRange(1, 40).Draw(t, "n") {
					b.Emit(sdk.RuntimeEvent{Kind: sdk.EventContentDelta})
				}
			case 2:
				seq := rapid.Uint64Range(0, b.next-1).Draw(t, "ack")
				b.ack(seq)
				acked = max(acked, seq)
			}
			after := rapid.Uint64Range(acked, b.next-1).Draw(t, "after")
			evs, _, _, err := b.after(after)
			if err != nil {
				t.Fatalf("after(%d) with %d acked: %v", after, acked, err)
			}
			if uint64(len(evs)) != b.next-1-after {
				t.Fatalf("after(%d): %d events of %d", after, len(evs), b.next-1)
			}
			for i, ev := range evs {
				if ev.Sequence != after+uint64(i)+1 {
					t.Fatalf("after(%d)[%d] = %d", after, i, ev.Sequence)
				}
			}
		}
	})
}

// A stream longer than the bound costs linear time: BenchmarkEventBuffer at
// 100,000 events per op is about ten times its cost at 10,000.
func BenchmarkEventBuffer(b *testing.B) {
	for _, n := range []int{10000, 100000} {
		b.Run(fmt.Sprintf("events=%d", n), func(b *testing.B) {
			for b.Loop() {
				buf := newEventBuffer("s")
				for range n {
					buf.Emit(sdk.RuntimeEvent{Kind: sdk.EventContentDelta, Text: "token "})
				}
			}
		})
	}
}
