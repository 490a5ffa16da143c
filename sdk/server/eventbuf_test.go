package server

import (
	"errors"
	"fmt"
	"runtime"
	"testing"

	"github.com/google/go-cmp/cmp"
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

// A host that reads slower than the adapter emits holds the adapter back:
// once maxBufferedEvents are unread, Emit waits until the host reads, and
// no event the host has not read is dropped. Of the events read, the
// newest maxBufferedEvents are kept for a stream that resumes; older ones
// are refused, saying so.
func TestEventBufferBound(t *testing.T) {
	b := newEventBuffer("s")
	for range maxBufferedEvents {
		b.Emit(sdk.RuntimeEvent{})
	}
	done := make(chan struct{})
	go func() { // owned here: the reads below let it end
		defer close(done)
		for range 10 {
			b.Emit(sdk.RuntimeEvent{})
		}
	}()
	untilAnEmitWaits(t, b, done) // the eleventh
	if evs, _, _, err := b.after(0); err != nil || len(evs) != maxBufferedEvents || evs[len(evs)-1].Sequence != maxBufferedEvents {
		t.Fatalf("after(0) with the emitter held back: %d events, %v", len(evs), err)
	}
	<-done
	evs, _, _, err := b.after(maxBufferedEvents)
	if err != nil || len(evs) != 10 || evs[0].Sequence != maxBufferedEvents+1 {
		t.Fatalf("the ten that waited: %d events, %v", len(evs), err)
	}
	if _, _, _, err := b.after(5); !errors.Is(err, sdk.ErrInvalid) {
		t.Errorf("reading dropped events: %v, want an error", err)
	}
	if evs, _, _, err := b.after(10); err != nil || len(evs) != maxBufferedEvents {
		t.Errorf("after(10): %d events, %v", len(evs), err)
	}
}

// untilAnEmitWaits returns once an Emit on b waits for room; it fails the
// test if the emitting goroutine ends (closes done) without waiting.
func untilAnEmitWaits(t *testing.T, b *eventBuffer, done <-chan struct{}) {
	t.Helper()
	for {
		b.mu.Lock()
		w := b.waiting
		b.mu.Unlock()
		if w > 0 {
			return
		}
		select {
		case <-done:
			t.Fatalf("every event was emitted, none read beyond the bound, and no emit waited")
		default:
			runtime.Gosched()
		}
	}
}

// A session that closes lets an emitter held back go on (the adapter's
// close may wait for it), and an ended stream takes no more.
func TestEventBufferCloseReleasesTheEmitter(t *testing.T) {
	b := newEventBuffer("s")
	for range maxBufferedEvents {
		b.Emit(sdk.RuntimeEvent{})
	}
	done := make(chan struct{})
	go func() { // owned here: close lets it end
		defer close(done)
		b.Emit(sdk.RuntimeEvent{Kind: sdk.EventContentDelta})
	}()
	untilAnEmitWaits(t, b, done)
	b.close()
	<-done
	if evs, _, _, err := b.after(1); err != nil || len(evs) != maxBufferedEvents || evs[len(evs)-1].Kind != sdk.EventContentDelta {
		t.Fatalf("after the close: %d events, %v", len(evs), err)
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
// 100,000 events per op is about ten times its cost at 10,000. The events
// are read and acknowledged 512 at a time, as a host does (unread, Emit
// would wait for the host at the bound).
func BenchmarkEventBuffer(b *testing.B) {
	for _, n := range []int{10000, 100000} {
		b.Run(fmt.Sprintf("events=%d", n), func(b *testing.B) {
			for b.Loop() {
				buf := newEventBuffer("s")
				var read uint64
				for i := range n {
					buf.Emit(sdk.RuntimeEvent{Kind: sdk.EventContentDelta, Text: "token "})
					if i%512 == 511 {
						evs, _, _, err := buf.after(read)
						if err != nil {
							b.Fatal(err)
						}
						read = evs[len(evs)-1].Sequence
						buf.ack(read)
					}
				}
			}
		})
	}
}

// A flood of diagnostics is summarized: the first diagnosticBurst of a
// title go as they are, then, before the turn's end, one diagnostic says
// how many more there were with the last few; the count starts again
// after it, and the session's end summarizes what is left. Other titles
// and other events are not held.
func TestDiagnosticFloodIsSummarized(t *testing.T) {
	b := newEventBuffer("s")
	malformed := func(i int) sdk.RuntimeEvent {
		return sdk.RuntimeEvent{Kind: sdk.EventDiagnostic, Title: "malformed frame", Text: fmt.Sprintf("not JSON: \"garbage %d\"", i),
			TurnRef: "t1", RawFrame: uint64(100 + i)}
	}
	for i := 1; i <= 10000; i++ {
		b.Emit(malformed(i))
		if i == 7 {
			b.Emit(sdk.RuntimeEvent{Kind: sdk.EventDiagnostic, Title: "unhandled agent method x"})
			b.Emit(sdk.RuntimeEvent{Kind: sdk.EventContentDelta, Text: "hi"})
		}
	}
	b.Emit(sdk.RuntimeEvent{Kind: sdk.EventTurnTerminal, TurnRef: "t1"})
	for i := 1; i <= 6; i++ {
		b.Emit(malformed(i))
	}
	b.Emit(sdk.RuntimeEvent{Kind: sdk.EventRuntimeExited})
	evs, ended, _, err := b.after(0)
	if err != nil || !ended {
		t.Fatalf("after(0): ended %v, %v", ended, err)
	}
	var got []string
	for i, ev := range evs {
		if ev.Sequence != uint64(i+1) {
			t.Errorf("event %d has sequence %d", i+1, ev.Sequence)
		}
		got = append(got, fmt.Sprintf("%s|%s|%s|%s|%d", ev.Kind, ev.Title, ev.Text, ev.TurnRef, ev.RawFrame))
	}
	want := []string{
		`diagnostic|malformed frame|not JSON: "garbage 1"|t1|101`,
		`diagnostic|malformed frame|not JSON: "garbage 2"|t1|102`,
		`diagnostic|malformed frame|not JSON: "garbage 3"|t1|103`,
		`diagnostic|malformed frame|not JSON: "garbage 4"|t1|104`,
		`diagnostic|malformed frame|not JSON: "garbage 5"|t1|105`,
		`diagnostic|unhandled agent method x|||0`,
		`content_delta||hi||0`,
		`diagnostic|malformed frame|9995 more like this, not reported one by one (10000 in all); the last 3: ` +
			`not JSON: "garbage 9998"; not JSON: "garbage 9999"; not JSON: "garbage 10000"|t1|10100`,
		`turn_terminal|||t1|0`,
		`diagnostic|malformed frame|not JSON: "garbage 1"|t1|101`,
		`diagnostic|malformed frame|not JSON: "garbage 2"|t1|102`,
		`diagnostic|malformed frame|not JSON: "garbage 3"|t1|103`,
		`diagnostic|malformed frame|not JSON: "garbage 4"|t1|104`,
		`diagnostic|malformed frame|not JSON: "garbage 5"|t1|105`,
		`diagnostic|malformed frame|1 more like this, not reported one by one (6 in all); the last: not JSON: "garbage 6"|t1|106`,
		`runtime_exited||||0`,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

// A stream that ends without a runtime exit still summarizes what it held.
func TestDiagnosticSummaryAtTheEnd(t *testing.T) {
	b := newEventBuffer("s")
	for range diagnosticBurst + 2 {
		b.Emit(sdk.RuntimeEvent{Kind: sdk.EventDiagnostic, Title: "malformed event", Text: "x"})
	}
	b.end()
	evs, ended, _, _ := b.after(0)
	last := evs[len(evs)-1]
	if !ended || len(evs) != diagnosticBurst+1 || last.Text != "2 more like this, not reported one by one (7 in all); the last 2: x; x" {
		t.Fatalf("ended %v, %d events, the last %+v; want the burst and a summary of 2", ended, len(evs), last)
	}
}
