package domain

import "slices"

// Copies of a thread. A commit decides on a scratch copy of the thread's
// projection, while the projection itself is read by others, and then
// publishes the scratch: so a scratch must never write into what it shares
// with the projection, and making one must not cost the thread's history.
//
// A scratch (Scratch) shares every collection with the thread it was made
// from, and copies a collection only when Evolve first writes to it: a
// content delta copies the thread's messages, not its runs, nodes or
// checkpoints. A run's own attempts, nodes and pending messages are copied
// when that run is first written. Texts are shared always: an append never
// changes what another copy holds (see Text).

// part is one of a thread's collections.
type part uint16

// The collections.
const (
	partRuns part = 1 << iota
	partMessages
	partTurnItems
	partSessions
	partProviderThreads
	partProviderTurns
	partRequests
	partDiagnostics
	partRateLimits
	partScopes
	partCheckpoints
	partRollbacks
	partHandoffs
	partBindings

	partAll = partBindings<<1 - 1
)

// Scratch is a copy of the thread to apply events to: the thread does not
// change with it. It costs a struct copy, whatever the thread's size.
func (t *Thread) Scratch() Thread {
	c := *t
	c.shared = partAll
	c.archived = nil
	return c
}

// Clone is a copy of the thread whose slices are its own, for a caller
// that may change it by hand (Scratch is for applying events).
func (t *Thread) Clone() Thread {
	c := t.Scratch()
	c.write(partAll)
	for i := range c.Runs {
		c.Runs[i].own()
	}
	if c.Earlier != nil {
		c.earlierW()
	}
	return c
}

// write makes the collections in ps the thread's own, copying those it
// shares, before Evolve writes to them.
func (t *Thread) write(ps part) {
	ps &= t.shared
	if ps == 0 {
		return
	}
	t.shared &^= ps
	for p := part(1); p <= partBindings; p <<= 1 {
		if ps&p == 0 {
			continue
		}
		switch p {
		case partRuns:
			t.Runs = slices.Clone(t.Runs)
			for i := range t.Runs {
				t.Runs[i].shared = true // its attempts, nodes and pending messages too
			}
		case partMessages:
			t.Messages = slices.Clone(t.Messages)
		case partTurnItems:
			t.TurnItems = slices.Clone(t.TurnItems)
		case partSessions:
			t.ProviderSessions = slices.Clone(t.ProviderSessions)
		case partProviderThreads:
			t.ProviderThreads = slices.Clone(t.ProviderThreads)
		case partProviderTurns:
			t.ProviderTurns = slices.Clone(t.ProviderTurns)
		case partRequests:
			t.Requests = slices.Clone(t.Requests)
		case partDiagnostics:
			t.Diagnostics = slices.Clone(t.Diagnostics)
		case partRateLimits:
			t.RateLimits = slices.Clone(t.RateLimits)
		case partScopes:
			t.CheckpointScopes = slices.Clone(t.CheckpointScopes)
		case partCheckpoints:
			t.Checkpoints = slices.Clone(t.Checkpoints)
		case partRollbacks:
			t.Rollbacks = slices.Clone(t.Rollbacks)
		case partHandoffs:
			t.Handoffs = slices.Clone(t.Handoffs)
		case partBindings:
			t.ProviderBindings = slices.Clone(t.ProviderBindings) // each one's Runs is only appended to, clipped
		}
	}
}

// own makes a run's attempts, nodes and pending messages its own.
func (r *Run) own() {
	if r.shared {
		r.Attempts = slices.Clone(r.Attempts)
		r.Nodes = slices.Clone(r.Nodes)
		r.PendingRestart = slices.Clone(r.PendingRestart)
		r.shared = false
	}
}

// runW is the run to write to, made the thread's own first.
func (t *Thread) runW(id string) *Run {
	if t.run(id) == nil {
		return nil
	}
	t.write(partRuns)
	r := t.run(id)
	r.own()
	return r
}

// nodeW is the node to write to.
func (t *Thread) nodeW(runID, id string) *Node {
	if t.node(runID, id) == nil {
		return nil
	}
	t.runW(runID)
	return t.node(runID, id)
}

// itemW is the turn item to write to.
func (t *Thread) itemW(id string) *TurnItem {
	if t.item(id) == nil {
		return nil
	}
	t.write(partTurnItems)
	return t.item(id)
}
