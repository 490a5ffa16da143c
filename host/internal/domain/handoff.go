package domain

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Context handoffs: what a provider's conversation is told of runs it has
// not seen. composeHandoff is a pure function of the thread and the spec:
// the same log gives the same text, byte for byte.

// HandoffVersion is the version of the handoff text's format; a change to
// what composeHandoff writes bumps it.
const HandoffVersion = 1

// DefaultHandoffMaxBytes bounds a handoff's text when the thread sets no
// bound of its own.
const DefaultHandoffMaxBytes = 64 << 10

// MinHandoffMaxBytes is the smallest bound a thread may set: room for the
// header, the thread's state and a line per run.
const MinHandoffMaxBytes = 4 << 10

// handoffSpec is what a handoff is for.
type handoffSpec struct {
	Strategy HandoffStrategy
	// To is the provider whose conversation gets it.
	To string
	// Runs are the ordinals it covers, ascending; each is a run of the
	// thread that ended (not rolled back or cancelled).
	Runs []int
	// MaxBytes bounds the text (0: DefaultHandoffMaxBytes).
	MaxBytes int
	// RollbackTo, when set, says the files were rolled back to after that
	// run; Fallback why a conversation that had seen the thread is
	// replaced by a fresh one.
	RollbackTo int
	Fallback   string
	// RollbackID is the rollback it is made for (not part of the text).
	RollbackID string
}

// composeHandoff makes the handoff for spec: its text and what it covers.
// The caller sets HandoffID.
func composeHandoff(t *Thread, spec handoffSpec) HandoffCreated {
	max := spec.MaxBytes
	if max <= 0 {
		max = DefaultHandoffMaxBytes
	}
	h := HandoffCreated{Strategy: spec.Strategy, Version: HandoffVersion, ToProvider: spec.To, Fallback: spec.Fallback,
		RollbackID: spec.RollbackID}
	var b strings.Builder
	switch {
	case spec.RollbackTo > 0:
		fmt.Fprintf(&b, "[Baton: the files of this project were rolled back to how they were after run %d, and this conversation starts afresh. What was said and done up to then follows.]\n", spec.RollbackTo)
	case spec.Strategy == HandoffDeltaSinceLastSeen:
		b.WriteString("[Baton: this thread went on with another agent since you last saw it. What was said and done since follows.]\n")
	default:
		b.WriteString("[Baton: this thread was started with another agent. What was said and done so far follows.]\n")
	}
	for _, ord := range spec.Runs {
		r := t.runByOrdinal(ord)
		if r == nil {
			continue
		}
		hr := HandoffRun{Ordinal: r.Ordinal, RunID: r.ID, Provider: r.Provider}
		fmt.Fprintf(&b, "\n## Run %d (%s)\n", r.Ordinal, r.Status)
		for _, m := range t.Messages {
			if m.RunID != r.ID || m.Text.Len() == 0 {
				continue
			}
			hr.MessageIDs = append(hr.MessageIDs, m.ID)
			role := "User"
			if m.Role == RoleAssistant {
				role = "Assistant"
			}
			fmt.Fprintf(&b, "%s: %s\n", role, cut(m.Text.String(), 4000))
		}
		if c := t.checkpoint(r.CheckpointID); c != nil && len(c.Files) > 0 {
			b.WriteString("Files changed:")
			for _, f := range c.Files {
				fmt.Fprintf(&b, " %s (%s)", f.Path, f.Kind)
			}
			b.WriteString("\n")
		}
		if h.FromRun == 0 {
			h.FromRun = r.Ordinal
		}
		h.ToRun = r.Ordinal
		h.FromProvider = r.Provider
		h.Runs = append(h.Runs, hr)
	}
	b.WriteString("\n[End of the earlier conversation.]")
	s := b.String()
	if len(s) > max {
		head, _, _ := strings.Cut(s, "\n")
		tail := s[len(s)-max+len(head)+40:]
		for !utf8.ValidString(tail) {
			tail = tail[1:]
		}
		s = head + "\n[... earlier runs cut ...]" + tail
		h.Truncated, h.Cut = true, "the oldest runs' text was cut"
	}
	h.Text, h.Bytes = s, len(s)
	return h
}

// cut shortens s to at most n bytes on a character boundary, marking the cut.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + " [...]"
}
