package sessions

import (
	"maps"
	"slices"
	"strings"

	"github.com/baton-run/baton/sdk"
)

// Items is a normalizer's open items: the items its provider started and
// has not completed, by thread and item ref (the provider's id for the
// item, which is unique within a thread). It is what the host's contract
// asks of every item, kept in one place:
//
//   - an item is started once (item_started), however often the provider
//     names it before it completes (Start);
//   - every event about an item names its thread, turn, ref and kind as
//     they were when it started (Item.Event, Item.Delta);
//   - the text streamed into it so far is kept (Item.Streamed): a provider
//     that sends the whole text again when the item completes adds only
//     what was not streamed, as a last Delta (the host's item text is its
//     deltas; item_completed's Text is not added to it);
//   - an item still open when its turn ends is completed then, before the
//     turn's terminal event (CloseTurn): no item outlives its turn.
//
// The events the methods return name no raw frame (RawFrame 0): set it to
// the index of the provider frame the event came from (lineproc's Next
// returns it) before emitting; the conformance suite fails an item_started
// or content_delta without one (plugintest.RawFrameKinds).
//
// X is what a plugin keeps about an item besides. Items is a map so that
// a plugin can count and range over it; it changes through its methods.
// Its zero value (nil) is empty and ready: Start makes the map.
type Items[X any] map[string]*Item[X]

// Item is an open item.
type Item[X any] struct {
	Thread, Turn, Ref string
	Kind              sdk.ItemKind
	Title             string
	// Streamed is the text sent as content deltas (see Delta).
	Streamed strings.Builder
	// Data is what the plugin keeps about the item besides.
	Data X
}

func itemKey(thread, ref string) string { return thread + "\x00" + ref }

// Get is the open item ref of thread (nil when none is).
func (s Items[X]) Get(thread, ref string) *Item[X] { return s[itemKey(thread, ref)] }

// Find is an open item ref of any thread (nil when none is), for a
// provider that names an item without its thread. Of two threads that
// have one, it is the first thread's in order.
func (s Items[X]) Find(ref string) *Item[X] {
	for _, k := range slices.Sorted(maps.Keys(s)) {
		if it := s[k]; it.Ref == ref {
			return it
		}
	}
	return nil
}

// Start opens item ref of thread, in turn, unless it is open: then it
// returns the open one and started false. An item a provider names
// without its turn has turn "" (see CloseTurn).
func (s *Items[X]) Start(thread, turn, ref string, kind sdk.ItemKind, title string) (it *Item[X], started bool) {
	if it := s.Get(thread, ref); it != nil {
		return it, false
	}
	if *s == nil {
		*s = Items[X]{}
	}
	it = &Item[X]{Thread: thread, Turn: turn, Ref: ref, Kind: kind, Title: title}
	(*s)[itemKey(thread, ref)] = it
	return it, true
}

// Forget closes it without an event (the plugin makes its own).
func (s Items[X]) Forget(it *Item[X]) { delete(s, itemKey(it.Thread, it.Ref)) }

// Complete closes it and returns its item_completed event with status and
// its title (no Text: stream what is left with Delta first).
func (s Items[X]) Complete(it *Item[X], status sdk.ItemStatus) sdk.RuntimeEvent {
	s.Forget(it)
	ev := it.Event(sdk.EventItemCompleted)
	ev.Title, ev.Status = it.Title, status
	return ev
}

// CloseTurn completes the items of thread's turn still open, in the order
// of their refs, with status and text (why they were still open), and
// returns their item_completed events: the turn is ending, and its
// terminal event comes after them. An item whose turn the provider did not
// name belongs to the first of its thread's turns to end.
func (s Items[X]) CloseTurn(thread, turn string, status sdk.ItemStatus, text string) []sdk.RuntimeEvent {
	var out []sdk.RuntimeEvent
	for _, k := range slices.Sorted(maps.Keys(s)) {
		it := s[k]
		if it.Thread != thread || (it.Turn != turn && it.Turn != "") {
			continue
		}
		it.Turn = turn
		ev := s.Complete(it, status)
		ev.Text = text
		out = append(out, ev)
	}
	return out
}

// Event is an event of kind about it: its thread, turn, ref and kind.
func (it *Item[X]) Event(kind sdk.EventKind) sdk.RuntimeEvent {
	return sdk.RuntimeEvent{Kind: kind, ThreadRef: it.Thread, TurnRef: it.Turn, ItemRef: it.Ref, ItemKind: it.Kind}
}

// Started is its item_started event: in progress, with its title.
func (it *Item[X]) Started() sdk.RuntimeEvent {
	ev := it.Event(sdk.EventItemStarted)
	ev.Title, ev.Status = it.Title, sdk.ItemInProgress
	return ev
}

// Delta streams text into it: the text is added to Streamed, and the
// content_delta event returned.
func (it *Item[X]) Delta(text string) sdk.RuntimeEvent {
	it.Streamed.WriteString(text)
	ev := it.Event(sdk.EventContentDelta)
	ev.Text = text
	return ev
}
