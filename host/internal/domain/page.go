package domain

import (
	"cmp"
	"math"
	"slices"
)

// Pages of a thread. A reader that wants more than the projection holds
// (the runs that left it) reads the thread a page at a time: a range of
// run ordinals, its runs and what is theirs, from the parts the host
// stored and from the projection. The pages from run 1 to the newest,
// put end to end, hold every entry of the thread once.

// Page is the thread's runs from..to (ordinals, inclusive) and what is
// theirs, each run's together and in run order, given the parts the host
// read of them: those filed under
// from..to (and 0 too, when from is 1), numbered below Earlier.Parts.
// What of the thread's own the projection holds (sessions, conversations,
// rollbacks, handoffs, requests and diagnostics of no run it holds) is in
// the page that reaches the newest run; the baseline checkpoint in the
// page from run 1. Its header (provider, bindings, loop, sequence, ...) is
// the thread's; Earlier is nil.
func (t *Thread) Page(from, to int, parts []Archived) Thread {
	p := t.Scratch() // the header; every collection is set below
	p.Earlier = nil
	past := t.Gather(parts)
	in := func(o int) bool { return o >= from && o <= to }
	held, page := map[string]bool{}, map[string]bool{}
	for _, r := range t.Runs {
		held[r.ID] = true
		if in(r.Ordinal) {
			page[r.ID] = true
		}
	}
	end := to >= t.RunCount()
	// mine says whether an entry of the projection's, of run runID, is
	// the page's: its run's, or the thread's own in the last page.
	mine := func(runID string) bool { return page[runID] || end && !held[runID] }
	p.Runs = slices.Concat(past.Runs, pick(t.Runs, func(r *Run) bool { return in(r.Ordinal) }))
	p.Messages = slices.Concat(past.Messages, pick(t.Messages, func(m *Message) bool { return mine(m.RunID) }))
	p.TurnItems = slices.Concat(past.TurnItems, pick(t.TurnItems, func(it *TurnItem) bool { return mine(it.RunID) }))
	p.ProviderTurns = slices.Concat(past.ProviderTurns, pick(t.ProviderTurns, func(pt *ProviderTurn) bool { return mine(pt.RunID) }))
	p.Requests = slices.Concat(past.Requests, pick(t.Requests, func(q *RuntimeRequest) bool { return mine(q.RunID) }))
	p.Diagnostics = slices.Concat(past.Diagnostics, pick(t.Diagnostics, func(g *Diagnostic) bool { return mine(g.RunID) }))
	p.Handoffs = slices.Concat(past.Handoffs, pick(t.Handoffs, func(h *ContextHandoff) bool { return mine(h.RunID) }))
	p.ProviderSessions = slices.Concat(past.ProviderSessions, pick(t.ProviderSessions, func(*ProviderSession) bool { return end }))
	p.ProviderThreads = slices.Concat(past.ProviderThreads, pick(t.ProviderThreads, func(*ProviderThread) bool { return end }))
	p.Rollbacks = slices.Concat(past.Rollbacks, pick(t.Rollbacks, func(*Rollback) bool { return end }))
	// Checkpoints by the run they are of (the baseline's is 0): one that
	// left and is held again (a rollback brought it back) is the one held.
	ours := func(o int) bool { return in(o) || o == 0 && from <= 1 }
	mem := pick(t.Checkpoints, func(c *Checkpoint) bool { return ours(c.RunOrdinal) })
	p.Checkpoints = slices.Concat(pick(past.Checkpoints, func(c *Checkpoint) bool {
		return !slices.ContainsFunc(mem, func(k Checkpoint) bool { return k.ID == c.ID })
	}), mem)
	p.CheckpointScopes = slices.Concat(past.CheckpointScopes, pick(t.CheckpointScopes, func(sc *CheckpointScope) bool {
		if sc.Kind == ScopeRootRun {
			return ours(sc.Ordinal)
		}
		return page[sc.RunID]
	}))
	// A run's entries together, runs in order (the thread's own last):
	// where a page ends does not change what its entries are next to.
	ord := make(map[string]int, len(p.Runs))
	for _, r := range p.Runs {
		ord[r.ID] = r.Ordinal
	}
	byRun := func(runID string) int {
		if o, ok := ord[runID]; ok {
			return o
		}
		return math.MaxInt
	}
	slices.SortStableFunc(p.Messages, func(a, b Message) int { return cmp.Compare(byRun(a.RunID), byRun(b.RunID)) })
	slices.SortStableFunc(p.TurnItems, func(a, b TurnItem) int { return cmp.Compare(byRun(a.RunID), byRun(b.RunID)) })
	slices.SortStableFunc(p.ProviderTurns, func(a, b ProviderTurn) int { return cmp.Compare(byRun(a.RunID), byRun(b.RunID)) })
	slices.SortStableFunc(p.Requests, func(a, b RuntimeRequest) int { return cmp.Compare(byRun(a.RunID), byRun(b.RunID)) })
	slices.SortStableFunc(p.Diagnostics, func(a, b Diagnostic) int { return cmp.Compare(byRun(a.RunID), byRun(b.RunID)) })
	return p
}

// Gather is parts as a page holds them: each with the rollbacks that
// completed after it left applied (Earlier.Overlay), all as one, a
// run's in ordinal order.
func (t *Thread) Gather(parts []Archived) Archived {
	g := make([]Archived, len(parts))
	for i, a := range parts {
		if t.Earlier != nil {
			t.Earlier.Overlay(&a)
		}
		g[i] = a
	}
	if len(g) == 0 {
		return Archived{}
	}
	a := merged(g)
	slices.SortStableFunc(a.Runs, func(x, y Run) int { return x.Ordinal - y.Ordinal })
	return a
}

// pick is the entries of s that keep says to keep, in a slice of their
// own.
func pick[E any](s []E, keep func(*E) bool) []E {
	var out []E
	for i := range s {
		if keep(&s[i]) {
			out = append(out, s[i])
		}
	}
	return out
}

// AddPage puts a page after the pages before it: its entries after
// theirs, its header (the thread's as the page was read) in place of
// theirs. A reader that adds a thread's pages from run 1 to the newest
// holds the whole thread, each run's entries together.
func (t *Thread) AddPage(p Thread) {
	all := *t
	*t = p
	t.Earlier = nil
	t.Runs = append(all.Runs, p.Runs...)
	t.Messages = append(all.Messages, p.Messages...)
	t.TurnItems = append(all.TurnItems, p.TurnItems...)
	t.ProviderSessions = append(all.ProviderSessions, p.ProviderSessions...)
	t.ProviderThreads = append(all.ProviderThreads, p.ProviderThreads...)
	t.ProviderTurns = append(all.ProviderTurns, p.ProviderTurns...)
	t.Requests = append(all.Requests, p.Requests...)
	t.Diagnostics = append(all.Diagnostics, p.Diagnostics...)
	t.CheckpointScopes = append(all.CheckpointScopes, p.CheckpointScopes...)
	t.Checkpoints = append(all.Checkpoints, p.Checkpoints...)
	t.Rollbacks = append(all.Rollbacks, p.Rollbacks...)
	t.Handoffs = append(all.Handoffs, p.Handoffs...)
}
