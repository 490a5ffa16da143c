package domain

import "strings"

// Coalesce joins each run of text deltas to one message (or one node) that
// a batch of events holds back to back into one delta with their text, in
// order; every other event stays where it was. A thread's projection is
// the same after the joined events as after the ones they replace (a delta
// appends its text), and so is what a subscriber reads of a message's
// text: deltas that arrive together are stored and sent as one, so that a
// turn that streams faster than the disk syncs costs an event per write,
// not one per chunk. The stored form is the one older code reads.
func Coalesce(events []Payload) []Payload {
	out := events[:0:0]
	for i := 0; i < len(events); {
		j := i + 1
		for j < len(events) && sameDelta(events[i], events[j]) {
			j++
		}
		if j-i == 1 {
			out = append(out, events[i])
			i = j
			continue
		}
		var b strings.Builder
		for _, e := range events[i:j] {
			switch d := e.(type) { // sameDelta took only these
			case MessageDelta:
				b.WriteString(d.Text)
			case NodeDelta:
				b.WriteString(d.Text)
			}
		}
		switch d := events[i].(type) {
		case MessageDelta:
			d.Text = b.String()
			out = append(out, d)
		case NodeDelta:
			d.Text = b.String()
			out = append(out, d)
		}
		i = j
	}
	return out
}

// sameDelta says whether b is a delta to the text a is a delta to.
func sameDelta(a, b Payload) bool {
	switch a := a.(type) {
	case MessageDelta:
		b, ok := b.(MessageDelta)
		return ok && a.MessageID == b.MessageID
	case NodeDelta:
		b, ok := b.(NodeDelta)
		return ok && a.RunID == b.RunID && a.NodeID == b.NodeID
	}
	return false
}
