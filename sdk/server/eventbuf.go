package server

import (
	"fmt"
	"sync"

	"github.com/baton-run/baton/sdk"
)

// maxBufferedEvents bounds how many events a session keeps: at most this
// many not yet read by the host (an adapter that emits more waits, so its
// provider waits on its pipe: the host's pace is the stream's), and of
// those read, the newest, for a host that reconnects its stream. Only a
// host that reconnects after this many more were read loses any, and it is
// told so.
const maxBufferedEvents = 1 << 16

// chunkEvents is how many events one chunk of a buffer holds.
const chunkEvents = 256

// eventBuffer is one session's event stream: it numbers events from 1 and
// keeps the recent ones so that a reader can resume after any sequence.
// The kept events are in chunks of chunkEvents, from chunks[0][head]: an
// event is written once where it stays, and dropping old ones lets whole
// chunks go, so no event is ever moved (a slice that grew and was
// compacted moved each about three times, a third of a plugin's time
// when a turn streamed fast).
type eventBuffer struct {
	sessionID string

	mu      sync.Mutex
	chunks  [][]sdk.RuntimeEvent // all full but the last; kept event i is at head+i
	head    int
	first   uint64
	next    uint64
	changed chan struct{} // closed and replaced on a change, once a reader has it
	watched bool          // a reader has changed
	read    uint64        // the last sequence a reader was given
	room    sync.Cond     // signalled when events are read, or the stream ends or closes
	closing bool          // the session is closing: emits no longer wait
	waiting int           // emits waiting for room
	ended   bool
	diags   diagnostics // held back, to be summarized (see diagnosticBurst)
}

func newEventBuffer(sessionID string) *eventBuffer {
	b := &eventBuffer{sessionID: sessionID, first: 1, next: 1, changed: make(chan struct{})}
	b.room.L = &b.mu
	return b
}

// Emit implements sdk.Emitter. Events after the session ended are dropped: the
// runtime-exited event is always the last. A flood of diagnostics is
// summarized (see diagnosticBurst): the summaries come before the turn's
// or the session's end.
func (b *eventBuffer) Emit(ev sdk.RuntimeEvent) {
	b.mu.Lock()
	defer b.mu.Unlock()
	// Backpressure: a host that reads slower than the provider writes
	// makes the adapter wait here, not the buffer drop what it has not
	// read (which ended the session's stream).
	for !b.ended && !b.closing && b.next-1-b.read >= maxBufferedEvents {
		b.waiting++
		b.room.Wait()
		b.waiting--
	}
	if b.ended {
		return
	}
	switch ev.Kind {
	case sdk.EventDiagnostic:
		if !b.diags.take(ev) {
			return
		}
	case sdk.EventTurnTerminal, sdk.EventRuntimeExited:
		for _, s := range b.diags.flush() {
			b.push(s)
		}
	}
	b.push(ev)
}

// push appends an event to the stream; b.mu is held.
func (b *eventBuffer) push(ev sdk.RuntimeEvent) {
	ev.SessionID = b.sessionID
	ev.Sequence = b.next
	b.next++
	if n := len(b.chunks); n == 0 || len(b.chunks[n-1]) == chunkEvents {
		b.chunks = append(b.chunks, make([]sdk.RuntimeEvent, 0, chunkEvents))
	}
	last := &b.chunks[len(b.chunks)-1]
	*last = append(*last, ev)
	if over := b.kept() - maxBufferedEvents; over > 0 {
		// The oldest that were read go; unread ones only once the session
		// is closing (Emit waits for the host otherwise).
		if !b.closing {
			over = min(over, int(min(b.read+1, b.next)-b.first))
		}
		b.drop(over)
	}
	if ev.Kind == sdk.EventRuntimeExited {
		b.ended = true
	}
	b.notify()
}

// notify tells the readers waiting that the stream changed: it closes the
// channel they have and makes the next (none while no reader took it: a
// fast stream would make one an event); b.mu is held.
func (b *eventBuffer) notify() {
	if b.watched {
		close(b.changed)
		b.changed, b.watched = make(chan struct{}), false
	}
}

// drop forgets the k oldest events; b.mu is held.
func (b *eventBuffer) drop(k int) {
	b.first += uint64(k)
	for k > 0 {
		c := b.chunks[0]
		if n := len(c) - b.head; k < n || len(b.chunks) == 1 && len(c) < chunkEvents {
			// Part of the first chunk, or all that is written of the last
			// one, which pushes go on filling.
			clear(c[b.head : b.head+k]) // their payloads can be collected
			b.head += k
			return
		}
		k -= len(c) - b.head
		b.chunks[0] = nil // the chunk can be collected
		b.chunks, b.head = b.chunks[1:], 0
	}
}

// ack drops the events up to seq: a reader that asks for events after seq
// has them, and will not ask for them again.
func (b *eventBuffer) ack(seq uint64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if seq < b.first {
		return
	}
	b.drop(min(int(seq-b.first+1), b.kept()))
}

// end marks the stream finished without a further event (but the
// summaries of diagnostics held back).
func (b *eventBuffer) end() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.ended {
		for _, s := range b.diags.flush() {
			b.push(s)
		}
		b.ended = true
		b.notify()
		b.room.Broadcast()
	}
}

// after returns the events after seq, whether the stream has ended with
// them, and a channel closed at the next change.
func (b *eventBuffer) after(seq uint64) ([]sdk.RuntimeEvent, bool, <-chan struct{}, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if seq+1 < b.first {
		return nil, false, nil, fmt.Errorf("events %d to %d of session %s are no longer buffered (they were dropped or already read): %w",
			seq+1, b.first-1, b.sessionID, sdk.ErrInvalid)
	}
	var out []sdk.RuntimeEvent
	if seq+1 < b.next {
		out = make([]sdk.RuntimeEvent, 0, b.next-seq-1)
		for i := b.head + int(seq+1-b.first); i < b.head+b.kept(); {
			c := b.chunks[i/chunkEvents]
			out = append(out, c[i%chunkEvents:]...)
			i += len(c) - i%chunkEvents
		}
	}
	if len(out) > 0 && out[len(out)-1].Sequence > b.read {
		b.read = out[len(out)-1].Sequence
		b.room.Broadcast()
	}
	b.watched = true
	return out, b.ended, b.changed, nil
}

// close marks the session closing: an adapter waiting to emit goes on (its
// close may wait for the goroutine that emits), and events past the bound
// are dropped as before the host read them.
func (b *eventBuffer) close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closing = true
	b.room.Broadcast()
}

// kept is how many events the buffer holds: those from first to next-1;
// b.mu is held.
func (b *eventBuffer) kept() int { return int(b.next - b.first) }
