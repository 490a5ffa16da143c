package orchestrator

import (
	"github.com/baton-run/baton/host/internal/domain"
)

// Pages of a thread: what a reader asks for when it wants more than the
// projection holds (the runs that left it), or less (a run too large to
// read in one answer). A page is read from one published projection and
// the parts that had left it, so it is consistent with that projection's
// sequence whatever commits meanwhile.

// Page sizes.
const (
	// DefaultPageRuns and MaxPageRuns bound the runs of a page that asks
	// for a range of them.
	DefaultPageRuns = 100
	MaxPageRuns     = 1000
	// DefaultPageMessages and MaxPageMessages bound its messages.
	DefaultPageMessages = 2000
	MaxPageMessages     = 10000
	// PageMessageBytes bounds the text of a page's messages (at least one
	// message is given, whatever its length): with the rest of a page it
	// stays well under what a client reads in one answer (gRPC's 256 MiB
	// for baton's clients).
	PageMessageBytes = 32 << 20
)

// PageQuery is what part of a thread a reader asks for. The zero value
// asks for the projection as the host holds it: its live runs and the
// newest ended ones, with Earlier saying what left.
type PageQuery struct {
	// FromRun and ToRun are the runs, by ordinal, inclusive (ToRun 0:
	// through the newest), at most MaxRuns of them (0: DefaultPageRuns).
	FromRun, ToRun, MaxRuns int
	// MessagesAfter skips that many of the page's messages (in the order
	// the page holds them); MaxMessages bounds those given (0:
	// DefaultPageMessages when runs are asked for, else all).
	MessagesAfter, MaxMessages int
}

// Page says what a page holds of its thread and what it leaves out.
type Page struct {
	// FirstRun and LastRun are the runs it holds (0: none); Runs is how
	// many the thread has.
	FirstRun, LastRun, Runs int
	// Messages is how many messages the page's runs have; MessagesAfter
	// how many of them come before those it holds; NextMessagesAfter
	// where the next page of them starts (0: none left).
	Messages, MessagesAfter, NextMessagesAfter int
	// Summary is the thread's (not the page's).
	Summary domain.ThreadSummary
}

// Complete says whether the page holds the whole thread.
func (p Page) Complete() bool {
	return (p.Runs == 0 || p.FirstRun <= 1 && p.LastRun == p.Runs) && p.MessagesAfter == 0 && p.NextMessagesAfter == 0
}

// ThreadPage reads part of a thread (see PageQuery).
func (h *Host) ThreadPage(id string, q PageQuery) (domain.Thread, Page, error) {
	t, err := h.view(id)
	if err != nil {
		return domain.Thread{}, Page{}, err
	}
	pg := Page{Runs: t.RunCount(), Summary: t.Summary()}
	var th domain.Thread
	if q.FromRun == 0 && q.ToRun == 0 {
		th = t.Clone()
		if n := len(t.Runs); n > 0 {
			pg.FirstRun, pg.LastRun = t.Runs[0].Ordinal, t.Runs[n-1].Ordinal
		}
	} else {
		from, to := max(q.FromRun, 1), q.ToRun
		if to == 0 || to > pg.Runs {
			to = pg.Runs
		}
		runs := q.MaxRuns
		if runs <= 0 {
			runs = DefaultPageRuns
		}
		to = min(to, from+min(runs, MaxPageRuns)-1)
		parts, err := h.parts(id, t, from, to)
		if err != nil {
			return domain.Thread{}, Page{}, err
		}
		th = t.Page(from, to, parts)
		if to >= from {
			pg.FirstRun, pg.LastRun = from, to
		}
		if q.MaxMessages == 0 {
			q.MaxMessages = DefaultPageMessages
		}
	}
	th.Messages, pg.Messages, pg.MessagesAfter, pg.NextMessagesAfter = window(th.Messages, q.MessagesAfter, q.MaxMessages,
		q.FromRun == 0 && q.ToRun == 0)
	return th, pg, nil
}

// window is the messages a page gives: after skips, then up to max (0:
// all) within PageMessageBytes of text. newest says that, with nothing
// skipped, a page that cannot give all gives the newest (the projection
// as the host holds it: what a reader following the thread wants).
func window(msgs []domain.Message, after, max int, newest bool) (out []domain.Message, total, first, next int) {
	total = len(msgs)
	max = min(max, MaxPageMessages)
	if max <= 0 {
		max = total
	}
	after = min(after, total)
	if newest && after == 0 {
		// From the newest back, as many as fit.
		i, size := total, 0
		for i > 0 && total-i < max && (i == total || size+msgs[i-1].Text.Len() <= PageMessageBytes) {
			i--
			size += msgs[i].Text.Len()
		}
		return msgs[i:], total, i, 0
	}
	j, size := after, 0
	for j < total && j-after < max && (j == after || size+msgs[j].Text.Len() <= PageMessageBytes) {
		size += msgs[j].Text.Len()
		j++
	}
	if j < total {
		next = j
	}
	return msgs[after:j], total, after, next
}
