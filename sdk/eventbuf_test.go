package sdk

import (
	"errors"
	"testing"

	"pgregory.net/rapid"
)

func TestEventBufferResumesAfterAnySequence(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		b := newEventBuffer("s")
		n := rapid.IntRange(0, 50).Draw(t, "n")
		for i := 0; i < n; i++ {
			b.Emit(RuntimeEvent{Kind: EventContentDelta})
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
	b.Emit(RuntimeEvent{Kind: EventRuntimeExited})
	b.Emit(RuntimeEvent{Kind: EventContentDelta}) // after the exit: dropped
	evs, ended, _, _ := b.after(0)
	if len(evs) != 1 || !ended {
		t.Fatalf("events %d ended %v; want the exit only, and ended", len(evs), ended)
	}
}

func TestEventBufferBound(t *testing.T) {
	b := newEventBuffer("s")
	for i := 0; i < maxBufferedEvents+10; i++ {
		b.Emit(RuntimeEvent{})
	}
	if _, _, _, err := b.after(5); !errors.Is(err, ErrInvalid) {
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
		b.Emit(RuntimeEvent{})
	}
	b.ack(4)
	b.ack(2) // older acks change nothing
	evs, _, _, err := b.after(4)
	if err != nil || len(evs) != 6 || evs[0].Sequence != 5 {
		t.Fatalf("after(4) = %d events from %d, %v", len(evs), evs[0].Sequence, err)
	}
	if _, _, _, err := b.after(3); !errors.Is(err, ErrInvalid) {
		t.Errorf("reading acknowledged events: %v, want an error", err)
	}
	b.ack(100)
	if evs, _, _, _ := b.after(10); len(evs) != 0 {
		t.Errorf("after acking everything: %d events", len(evs))
	}
}
