package server

import (
	"fmt"
	"sync"

	"github.com/baton-run/baton/sdk"
)

// maxBufferedEvents bounds how many events a session keeps for a host that
// reconnects its stream. A host reads continuously, so only a host that was
// away for this many events loses any, and it is told so.
const maxBufferedEvents = 1 << 16

// eventBuffer is one session's event stream: it numbers events from 1 and
// keeps the recent ones so that a reader can resume after any sequence.
// Dropping old events costs O(1) amortized: the kept ones are
// events[head:], and the slice is compacted only when most of it is
// dropped, so a session of any length costs linear time, not quadratic.
type eventBuffer struct {
	sessionID string

	mu      sync.Mutex
	events  []sdk.RuntimeEvent // events[head+i].Sequence == first+i
	head    int
	first   uint64
	next    uint64
	changed chan struct{} // closed and replaced on every change
	ended   bool
	diags   diagnostics // held back, to be summarized (see diagnosticBurst)
}

func newEventBuffer(sessionID string) *eventBuffer {
	return &eventBuffer{sessionID: sessionID, first: 1, next: 1, changed: make(chan struct{})}
}

// Emit implements sdk.Emitter. Events after the session ended are dropped: the
// runtime-exited event is always the last. A flood of diagnostics is
// summarized (see diagnosticBurst): the summaries come before the turn's
// or the session's end.
func (b *eventBuffer) Emit(ev sdk.RuntimeEvent) {
	b.mu.Lock()
	defer b.mu.Unlock()
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
	b.events = append(b.events, ev)
	if n := len(b.events) - b.head; n > maxBufferedEvents {
		b.drop(n - maxBufferedEvents)
	}
	if ev.Kind == sdk.EventRuntimeExited {
		b.ended = true
	}
	close(b.changed)
	b.changed = make(chan struct{})
}

// drop forgets the k oldest events; b.mu is held.
func (b *eventBuffer) drop(k int) {
	clear(b.events[b.head : b.head+k]) // their payloads can be collected
	b.head += k
	b.first += uint64(k)
	if b.head >= len(b.events)/2 {
		n := copy(b.events, b.events[b.head:])
		clear(b.events[n:])
		b.events, b.head = b.events[:n], 0
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
	b.drop(min(int(seq-b.first+1), len(b.events)-b.head))
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
		close(b.changed)
		b.changed = make(chan struct{})
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
		out = append(out, b.events[b.head+int(seq+1-b.first):]...)
	}
	return out, b.ended, b.changed, nil
}
