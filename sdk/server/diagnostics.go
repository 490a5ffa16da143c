package server

import (
	"fmt"
	"slices"
	"strings"

	"github.com/baton-run/baton/sdk"
)

// A provider that prints thousands of malformed lines would make as many
// diagnostics, each an event in the host's log and a line on the user's
// terminal. So a session reports the first diagnosticBurst diagnostics of
// a title between two turn ends one by one, counts the rest, and before
// the next turn end (or the session's end) says in one diagnostic of that
// title how many more there were, with the last diagnosticTail of them.
// Every plugin's events pass here, a third party's too; the raw-frame log
// still has every frame.
const (
	diagnosticBurst = 5
	diagnosticTail  = 3
	// diagnosticQuoted bounds what a summary quotes of each diagnostic.
	diagnosticQuoted = 200
)

// diagnostics is a session's count of its diagnostics since the last turn
// end. Its owner (the event buffer) serializes its calls.
type diagnostics struct {
	seen map[string]int // diagnostics of each title since the last flush
	held []*heldDiagnostics
}

// heldDiagnostics are the diagnostics of one title not reported one by
// one.
type heldDiagnostics struct {
	title string
	n     int
	last  []sdk.RuntimeEvent // the last diagnosticTail of them
}

// take says whether a diagnostic is reported as it is; one that is not is
// counted for the summary.
func (d *diagnostics) take(ev sdk.RuntimeEvent) bool {
	if d.seen == nil {
		d.seen = map[string]int{}
	}
	d.seen[ev.Title]++
	if d.seen[ev.Title] <= diagnosticBurst {
		return true
	}
	i := slices.IndexFunc(d.held, func(h *heldDiagnostics) bool { return h.title == ev.Title })
	if i < 0 {
		i = len(d.held)
		d.held = append(d.held, &heldDiagnostics{title: ev.Title})
	}
	h := d.held[i]
	h.n++
	h.last = append(h.last, ev)
	if len(h.last) > diagnosticTail {
		h.last = h.last[1:]
	}
	return false
}

// flush returns a summary for each title with diagnostics held back, in
// the order they were first held, and starts counting again.
func (d *diagnostics) flush() []sdk.RuntimeEvent {
	var out []sdk.RuntimeEvent
	for _, h := range d.held {
		texts := make([]string, len(h.last))
		for i, ev := range h.last {
			texts[i] = sdk.Clip(ev.Text, diagnosticQuoted, false)
		}
		which := "the last"
		if len(texts) > 1 {
			which = fmt.Sprintf("the last %d", len(texts))
		}
		last := h.last[len(h.last)-1]
		out = append(out, sdk.RuntimeEvent{Kind: sdk.EventDiagnostic, Title: h.title, ThreadRef: last.ThreadRef, TurnRef: last.TurnRef,
			RawFrame: last.RawFrame, Text: fmt.Sprintf("%d more like this, not reported one by one (%d in all); %s: %s",
				h.n, h.n+diagnosticBurst, which, strings.Join(texts, "; "))})
	}
	d.seen, d.held = nil, nil
	return out
}
