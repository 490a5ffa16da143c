package sdk

import (
	"fmt"
	"strconv"
	"strings"
)

// ProviderExit is a provider process's end told in one sentence, the same
// whatever the plugin: which provider, how it ended (its exit status, or
// the signal that killed it), when (if said), and why as far as it said:
// the first line it printed since its last frame that was not one, and the
// end of its stderr, each bounded and escaped, with how many lines there
// were when there were more than it quotes.
//
//	codex exited with status 1 during the turn: it printed "Welcome", not JSON-RPC; its stderr ends: Error: no API key
//	the agent was killed by SIGKILL before answering initialize
//	claude exited with status 1 during the turn: it printed "x 1", not stream-json, and 9999 more lines that were not frames; its stderr ends: e 9999; e 10000 (the last 2 of 10000 lines)
//
// It is an error of kind ErrProviderExited, and its text is the sentence
// alone. lineproc and jsonrpcproc make one for the processes they run
// (their Exit methods); a plugin that runs its provider otherwise fills
// one in itself.
type ProviderExit struct {
	// Provider names the provider ("codex", "the agent").
	Provider string
	// Protocol names what the provider prints frames in ("JSON-RPC",
	// "stream-json"): the sentence says a line it printed instead was not
	// that. Empty says nothing of the kind.
	Protocol string
	// When, if set, says when it ended ("before answering initialize",
	// "during the turn").
	When string
	// Status is its exit status, unless Signal is set.
	Status int
	// Signal, when set, is the signal that killed it ("SIGKILL").
	Signal string
	// NotFrame is the first line it printed since its last frame that was
	// not a frame (nil: none).
	NotFrame *NotFrame
	// Stderr is the end of its stderr, a line each, oldest first: the
	// sentence quotes them all (their last ExitStderrBytes).
	Stderr []string
	// StderrLines is how many lines it wrote to stderr in all: the
	// sentence says how many it quotes of how many, when that is more than
	// len(Stderr).
	StderrLines int
}

// NotFrame is a line a provider printed where its protocol has frames that
// was not one: text a CLI printed instead (an error, a banner), or a line
// too long to read.
type NotFrame struct {
	// Head is the line's start: the sentence quotes at most
	// ExitQuotedBytes of it.
	Head []byte
	// Len is the line's length in bytes.
	Len int64
	// Limit, when not 0, is the longest line the provider's reader takes:
	// the line was longer, and skipped unread.
	Limit int
	// More is how many lines after it were not frames either (with no
	// frame in between).
	More int
}

// ExitQuotedBytes is how much a ProviderExit quotes of a line that was not
// a frame (its start, with its length when cut), and ExitStderrBytes how
// much of the end of its stderr: a provider that dies writing a long
// trace, or a 10 MB line, must not put it all in a run's failure.
const (
	ExitQuotedBytes = 200
	ExitStderrBytes = 512
)

func (e *ProviderExit) Error() string {
	msg := e.Provider + " " + e.how()
	if e.When != "" {
		msg += " " + e.When
	}
	printed := e.printed()
	stderr, quoted := e.stderr()
	counted := ""
	if total := max(e.StderrLines, quoted); total > quoted {
		counted = fmt.Sprintf(" (the last %d of %d lines", quoted, total)
	}
	switch {
	case printed != "" && stderr != "":
		msg += ": " + printed + "; its stderr ends: " + stderr
		if counted != "" {
			msg += counted + ")"
		}
	case printed != "":
		msg += ": " + printed
	case stderr != "":
		msg += ": " + stderr
		if counted != "" {
			msg += counted + " of its stderr)"
		}
	}
	return msg
}

// Unwrap makes a ProviderExit of kind ErrProviderExited.
func (e *ProviderExit) Unwrap() error { return ErrProviderExited }

// how says how the process ended.
func (e *ProviderExit) how() string {
	if e.Signal != "" {
		return "was killed by " + e.Signal
	}
	return fmt.Sprintf("exited with status %d", e.Status)
}

// printed says what the provider printed instead of a frame: the line
// quoted (its start, with its length when cut), and how many more there
// were.
func (e *ProviderExit) printed() string {
	o := e.NotFrame
	if o == nil {
		return ""
	}
	// (A head is cut only past ExitQuotedBytes: Clip says it was cut.)
	q := strconv.Quote(Clip(string(o.Head), ExitQuotedBytes, false))
	var s string
	switch {
	case o.Limit > 0:
		s = fmt.Sprintf("it printed a line over the limit of %d bytes: %s (%d bytes in all)", o.Limit, q, o.Len)
	case o.Len > ExitQuotedBytes:
		s = fmt.Sprintf("it printed %s (%d bytes in all)", q, o.Len)
	default:
		s = "it printed " + q
	}
	if e.Protocol != "" && o.Limit == 0 {
		s += ", not " + e.Protocol
	}
	switch {
	case o.More == 1:
		s += ", and 1 more line that was not a frame"
	case o.More > 1:
		s += fmt.Sprintf(", and %d more lines that were not frames", o.More)
	}
	return s
}

// stderr is the end of the provider's stderr on one line (its lines that
// are not blank, bounded, with what is not text escaped: a failure's
// message is valid UTF-8, and one line), and how many lines it quotes.
func (e *ProviderExit) stderr() (string, int) {
	lines := make([]string, 0, len(e.Stderr))
	for _, l := range e.Stderr {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	if len(lines) == 0 {
		return "", 0
	}
	return Printable(Clip(strings.Join(lines, "; "), ExitStderrBytes, true)), len(lines)
}
