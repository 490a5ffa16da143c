package sdk

import "strings"

// What an adapter shows of provider data in an event's Title: the same
// rules for every provider, so that a client shows them alike.

// titleRunes bounds a title made of free text (a prompt, a question, an
// error): a line a client shows whole in a list.
const titleRunes = 120

// Title makes a title of free text: its first non-blank line, cut to 120
// characters (the last one an ellipsis).
func Title(text string) string {
	s, _, _ := strings.Cut(strings.TrimSpace(text), "\n")
	if r := []rune(s); len(r) > titleRunes {
		return string(r[:titleRunes-1]) + "…"
	}
	return s
}
