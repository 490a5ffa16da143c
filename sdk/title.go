package sdk

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

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

// Clip bounds s to n bytes without cutting a character: its first n bytes
// (keepEnd false) or its last n (keepEnd true), with "…" where the text was
// cut. A string of at most n bytes is s. What a plugin puts in a failure's
// message or a diagnostic's text (the end of a provider's stderr, the
// start of an odd line) is bounded so.
func Clip(s string, n int, keepEnd bool) string {
	if len(s) <= n {
		return s
	}
	// A character has at most utf8.UTFMax-1 bytes after its first: text
	// that is not UTF-8 (bytes a provider printed) is cut within as many.
	if keepEnd {
		i := len(s) - n
		for k := 1; k < utf8.UTFMax && i < len(s) && !utf8.RuneStart(s[i]); k++ {
			i++
		}
		return "…" + s[i:]
	}
	for k := 1; k < utf8.UTFMax && n > 0 && !utf8.RuneStart(s[n]); k++ {
		n--
	}
	return s[:n] + "…"
}

// Printable is s with what is not printable text escaped as Go escapes it
// in a string ("\x1b", "\xff", "\n"), the rest as it is: text a provider
// wrote (its stderr, an error's body) put in a message stays valid UTF-8
// (a gRPC string must be) and on one line, and shows what it was.
func Printable(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case unicode.IsPrint(r) || r == ' ':
			b.WriteString(s[i : i+n])
		default:
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
		}
		i += n
	}
	return b.String()
}
