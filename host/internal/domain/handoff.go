package domain

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Context handoffs: what a fresh provider conversation is told of the
// thread so far.

// handoff limits: what a fresh conversation is told of the earlier one.
const (
	handoffMessageMax = 4000
	handoffMax        = 32000
)

// handoffText is the context a fresh provider conversation gets after a
// rollback to run upTo: what was asked and answered in the runs that
// remain, and the files each changed.
func handoffText(t *Thread, upTo int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "[Baton: the files of this project were rolled back to how they were after run %d, and this conversation starts afresh. What was said and done up to then follows.]\n", upTo)
	for _, r := range t.Runs {
		if r.Ordinal > upTo || r.Status == RunStatusRolledBack || r.Status == RunStatusCancelled || !r.Status.Terminal() {
			continue
		}
		fmt.Fprintf(&b, "\n## Run %d (%s)\n", r.Ordinal, r.Status)
		for _, m := range t.Messages {
			if m.RunID != r.ID || m.Text.Len() == 0 {
				continue
			}
			text := cut(m.Text.String(), handoffMessageMax)
			role := "User"
			if m.Role == RoleAssistant {
				role = "Assistant"
			}
			fmt.Fprintf(&b, "%s: %s\n", role, text)
		}
		if c := t.checkpoint(r.CheckpointID); c != nil && len(c.Files) > 0 {
			b.WriteString("Files changed:")
			for _, f := range c.Files {
				fmt.Fprintf(&b, " %s (%s)", f.Path, f.Kind)
			}
			b.WriteString("\n")
		}
	}
	b.WriteString("\n[End of the earlier conversation.]")
	s := b.String()
	if len(s) > handoffMax {
		// The newest runs matter most: the oldest are cut.
		head, _, _ := strings.Cut(s, "\n")
		tail := s[len(s)-handoffMax:]
		for !utf8.ValidString(tail) {
			tail = tail[1:]
		}
		s = head + "\n[... earlier runs cut ...]" + tail
	}
	return s
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
