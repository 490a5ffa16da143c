package domain

import (
	"slices"
)

// The thread's past. A projection keeps what is live (the runs that have
// not ended, pending requests, open sessions, the ready handoff, the last
// rollback) and the newest KeepRuns ended runs. Older ended runs leave it,
// oldest first, with everything that was theirs: they become Archived
// parts, which the host stores beside the log in the batch of the event
// that made them leave, and reads back a page at a time. Earlier says what
// left. So a thread's memory, its snapshot and the cost of applying an
// event follow what is live, not the thread's history.
//
// Evolve decides what leaves, from the events alone (at RunEnded,
// RollbackCompleted and HandoffCreated, never while a rollback is in
// progress): a thread rebuilt from its log leaves the same parts, numbered
// the same. A part, once left, is never changed: a rollback that reaches
// back among the runs that left is recorded in Earlier, and a part that
// left before it reads with it applied (Overlay).
//
// What leaves with run N, in N's part: the run, its messages, turn items,
// provider turns, checkpoint scopes and checkpoints, its requests that are
// not pending, its diagnostics and the handoff it took. The newest ready
// root checkpoint is the next capture's base: it stays until a newer one
// is ready, then leaves in a part of its run's ordinal. What of the
// thread's own leaves when runs do, in the part of the newest run that has
// left: ended sessions that no kept run, request or binding names;
// conversations left behind (and their subagents'), once no kept turn is
// on them; requests of no run that are not pending; rollbacks but the
// last. And whenever they are past their bounds, runs leaving or not (in
// the part of the newest run that has left, 0 while none has): the
// thread's own diagnostics but the newest keepDiagnostics, handoffs never
// taken that cover only runs that left, and handoffs not ready but the
// newest keepHandoffs. The baseline checkpoint never leaves.

// KeepRuns is how many ended runs a projection keeps beside those that
// have not ended: enough for what a person reads of a thread's recent
// work, and for a handoff or a rollback to the recent runs without
// reading the store.
const KeepRuns = 8

// keepDiagnostics is how many of the thread's own diagnostics (of no run)
// a projection keeps; keepHandoffs how many handoffs that are not ready
// (each up to its bound of text).
const (
	keepDiagnostics = 16
	keepHandoffs    = 8
)

// Earlier is what a thread's projection says of the runs that have left
// it (see the top of this file).
type Earlier struct {
	// Runs is how many runs have left: runs 1 to Runs, all ended.
	Runs int `json:"runs"`
	// Messages is how many of the thread's messages left with them.
	Messages int `json:"messages,omitempty"`
	// Parts is how many parts have left, numbered from 0 in the order
	// they left.
	Parts int `json:"parts"`
	// RootScopes is how many runs' checkpoint scopes left (a thread from
	// before checkpoints has none, and captures a baseline first).
	RootScopes int `json:"rootScopes,omitempty"`
	// Rollbacks are the rollbacks that reached back among the runs that
	// had left, in the order they completed.
	Rollbacks []EarlierRollback `json:"rollbacks,omitempty"`
}

// EarlierRollback is a rollback that reached back among the runs that had
// left: the parts that had left by then read with it applied.
type EarlierRollback struct {
	// Target is the ordinal of the run it went back to.
	Target int `json:"target"`
	// Parts is how many parts had left when it completed.
	Parts int `json:"parts"`
}

// Archived is one part of a thread that left its projection: a run and
// what was its, or what of the thread's own left with it, or both.
type Archived struct {
	// Ordinal is the run it is filed under; Part its number.
	Ordinal int `json:"ordinal"`
	Part    int `json:"part"`

	Runs             []Run             `json:"runs,omitempty"`
	Messages         []Message         `json:"messages,omitempty"`
	TurnItems        []TurnItem        `json:"turnItems,omitempty"`
	ProviderSessions []ProviderSession `json:"providerSessions,omitempty"`
	ProviderThreads  []ProviderThread  `json:"providerThreads,omitempty"`
	ProviderTurns    []ProviderTurn    `json:"providerTurns,omitempty"`
	Requests         []RuntimeRequest  `json:"requests,omitempty"`
	Diagnostics      []Diagnostic      `json:"diagnostics,omitempty"`
	CheckpointScopes []CheckpointScope `json:"checkpointScopes,omitempty"`
	Checkpoints      []Checkpoint      `json:"checkpoints,omitempty"`
	Rollbacks        []Rollback        `json:"rollbacks,omitempty"`
	Handoffs         []ContextHandoff  `json:"handoffs,omitempty"`
}

// Overlay applies to a part the rollbacks that completed after it left:
// what RollbackCompleted does to the runs, checkpoints and handoffs a
// projection holds.
func (e *Earlier) Overlay(a *Archived) {
	for _, rb := range e.Rollbacks {
		if a.Part >= rb.Parts {
			continue
		}
		for i := range a.Runs {
			if r := &a.Runs[i]; r.Ordinal > rb.Target && r.Status != RunStatusCancelled {
				r.Status = RunStatusRolledBack
			}
		}
		for i := range a.Checkpoints {
			if c := &a.Checkpoints[i]; c.RunOrdinal > rb.Target {
				c.Status = CheckpointStale
			}
		}
		for i := range a.Handoffs {
			if h := &a.Handoffs[i]; h.ToRun > rb.Target {
				h.Status = HandoffStatusSuperseded
			}
		}
	}
}

// RunCount is how many runs the thread has: those that left it and those
// it holds.
func (t *Thread) RunCount() int { return t.earlierRuns() + len(t.Runs) }

// earlierRuns is how many runs have left the projection.
func (t *Thread) earlierRuns() int {
	if t.Earlier == nil {
		return 0
	}
	return t.Earlier.Runs
}

// KeepAll makes the thread keep everything: nothing leaves it. For a
// reader that loads a thread and cannot store what would leave (a store
// opened read-only).
func (t *Thread) KeepAll() { t.keepAll = true }

// TakeArchived returns the parts that left the thread since it was made
// (a scratch) or since the last call, and forgets them.
func (t *Thread) TakeArchived() []Archived {
	a := t.archived
	t.archived = nil
	return a
}

// earlierW is the thread's Earlier, to change: a copy of its own (a
// scratch shares it with the thread it was copied from).
func (t *Thread) earlierW() *Earlier {
	var e Earlier
	if t.Earlier != nil {
		e = *t.Earlier
	}
	e.Rollbacks = slices.Clip(e.Rollbacks)
	t.Earlier = &e
	return t.Earlier
}

// compact moves what has left the projection to parts (see the top of
// this file).
func (t *Thread) compact() {
	if t.keepAll || t.RollingBack() {
		return
	}
	ended := 0
	for i := range t.Runs {
		if t.Runs[i].Status.Terminal() {
			ended++
		}
	}
	n := 0
	for n < len(t.Runs) && t.Runs[n].Status.Terminal() && ended-n > KeepRuns {
		n++
	}
	leaving := make(map[string]int, n) // run id -> ordinal
	for _, r := range t.Runs[:n] {
		leaving[r.ID] = r.Ordinal
	}
	kept := make(map[string]bool, len(t.Runs)-n)
	for _, r := range t.Runs[n:] {
		kept[r.ID] = true
	}
	horizon := t.earlierRuns() + n
	c := compaction{parts: map[int]*Archived{}}
	// fileOf is the ordinal an entry of a run (runID) is filed under, and
	// whether it leaves: an entry of a kept run stays, one of a leaving
	// run leaves with it, and the thread's own (or one of a run that left
	// before) leaves when runs do.
	fileOf := func(runID string) (int, bool) {
		if kept[runID] {
			return 0, false
		}
		if o, ok := leaving[runID]; ok {
			return o, true
		}
		return horizon, n > 0
	}

	if n > 0 {
		t.write(partRuns) // the runs kept share their attempts and nodes (see own)
		for _, r := range t.Runs[:n] {
			c.at(r.Ordinal).Runs = append(c.at(r.Ordinal).Runs, r)
		}
		t.Runs = slices.Clone(t.Runs[n:])
	}

	messages := 0
	t.Messages = collect(&c, t, partMessages, t.Messages, func(m *Message) (int, bool) { return fileOf(m.RunID) },
		func(a *Archived, m Message) { a.Messages = append(a.Messages, m); messages++ })
	t.TurnItems = collect(&c, t, partTurnItems, t.TurnItems, func(it *TurnItem) (int, bool) { return fileOf(it.RunID) },
		func(a *Archived, it TurnItem) { a.TurnItems = append(a.TurnItems, it) })
	turnsLeft := map[string]bool{}
	t.ProviderTurns = collect(&c, t, partProviderTurns, t.ProviderTurns, func(pt *ProviderTurn) (int, bool) { return fileOf(pt.RunID) },
		func(a *Archived, pt ProviderTurn) {
			a.ProviderTurns = append(a.ProviderTurns, pt)
			turnsLeft[pt.ProviderThreadID] = true
		})
	t.Requests = collect(&c, t, partRequests, t.Requests, func(q *RuntimeRequest) (int, bool) {
		if q.Status == RequestStatusPending {
			return 0, false
		}
		return fileOf(q.RunID)
	}, func(a *Archived, q RuntimeRequest) { a.Requests = append(a.Requests, q) })

	// The thread's own diagnostics beyond the newest keepDiagnostics leave
	// too.
	own := 0
	for i := range t.Diagnostics {
		if _, ok := leaving[t.Diagnostics[i].RunID]; !ok && !kept[t.Diagnostics[i].RunID] {
			own++
		}
	}
	t.Diagnostics = collect(&c, t, partDiagnostics, t.Diagnostics, func(g *Diagnostic) (int, bool) {
		if o, ofRun := leaving[g.RunID]; ofRun || kept[g.RunID] {
			return o, ofRun
		}
		own--
		return horizon, own >= keepDiagnostics
	}, func(a *Archived, g Diagnostic) { a.Diagnostics = append(a.Diagnostics, g) })

	// Checkpoints: the baseline and the next capture's base stay.
	base := ""
	if b := t.lastReadyRoot(); b != nil {
		base = b.ID
	}
	baseScope := ""
	rootScopes := 0
	t.Checkpoints = collect(&c, t, partCheckpoints, t.Checkpoints, func(k *Checkpoint) (int, bool) {
		if k.RunID == "" || k.ID == base {
			if k.ID == base {
				baseScope = k.ScopeID
			}
			return 0, false
		}
		if _, leaves := fileOf(k.RunID); !leaves {
			return 0, false
		}
		return k.RunOrdinal, true
	}, func(a *Archived, k Checkpoint) { a.Checkpoints = append(a.Checkpoints, k) })
	t.CheckpointScopes = collect(&c, t, partScopes, t.CheckpointScopes, func(sc *CheckpointScope) (int, bool) {
		if sc.RunID == "" || sc.ID == baseScope {
			return 0, false
		}
		o, leaves := fileOf(sc.RunID)
		if leaves && sc.Kind == ScopeRootRun {
			rootScopes++
			o = sc.Ordinal
		}
		return o, leaves
	}, func(a *Archived, sc CheckpointScope) { a.CheckpointScopes = append(a.CheckpointScopes, sc) })

	// The thread's own: what no kept entry names.
	named := map[string]bool{}
	for _, b := range t.ProviderBindings {
		named[b.SessionID], named[b.ProviderThreadID] = true, true
	}
	for _, r := range t.Runs {
		for _, a := range r.Attempts {
			named[a.SessionID] = true
		}
	}
	for _, q := range t.Requests {
		named[q.SessionID] = true
	}
	for _, pt := range t.ProviderTurns {
		named[pt.ProviderThreadID] = true
	}
	t.ProviderSessions = collect(&c, t, partSessions, t.ProviderSessions, func(s *ProviderSession) (int, bool) {
		return horizon, n > 0 && s.Status != SessionStatusOpen && !named[s.ID]
	}, func(a *Archived, s ProviderSession) { a.ProviderSessions = append(a.ProviderSessions, s) })
	// A subagent's conversation may be given work again by a later turn
	// of its parent: it leaves with its parent, once that is left behind.
	detached := map[string]bool{}
	for _, pt := range t.ProviderThreads {
		if pt.Detached && !named[pt.ID] {
			detached[pt.ID] = true
		}
	}
	t.ProviderThreads = collect(&c, t, partProviderThreads, t.ProviderThreads, func(pt *ProviderThread) (int, bool) {
		return horizon, n > 0 && !named[pt.ID] && (detached[pt.ID] || detached[pt.ParentID])
	}, func(a *Archived, pt ProviderThread) { a.ProviderThreads = append(a.ProviderThreads, pt) })
	newer := 0 // handoffs not ready, then those after the one looked at
	for i := range t.Handoffs {
		if t.Handoffs[i].Status != HandoffReady {
			newer++
		}
	}
	t.Handoffs = collect(&c, t, partHandoffs, t.Handoffs, func(h *ContextHandoff) (int, bool) {
		if h.Status == HandoffReady {
			return 0, false
		}
		newer--
		if h.RunID != "" {
			o, leaves := fileOf(h.RunID)
			return o, leaves || newer >= keepHandoffs
		}
		return horizon, h.ToRun <= horizon || newer >= keepHandoffs
	}, func(a *Archived, h ContextHandoff) { a.Handoffs = append(a.Handoffs, h) })
	if k := len(t.Rollbacks) - 1; k > 0 && n > 0 {
		a := c.at(horizon)
		a.Rollbacks = append(a.Rollbacks, t.Rollbacks[:k]...)
		t.Rollbacks, t.shared = slices.Clone(t.Rollbacks[k:]), t.shared&^partRollbacks
	}

	if len(c.parts) == 0 {
		return
	}
	e := t.earlierW()
	e.Runs, e.Messages, e.RootScopes = horizon, e.Messages+messages, e.RootScopes+rootScopes
	ords := make([]int, 0, len(c.parts))
	for o := range c.parts {
		ords = append(ords, o)
	}
	slices.Sort(ords)
	for _, o := range ords {
		a := c.parts[o]
		a.Ordinal, a.Part = o, e.Parts
		e.Parts++
		t.archived = append(t.archived, *a)
	}
	if n > 0 {
		t.write(partBindings)
		for i := range t.ProviderBindings {
			b := &t.ProviderBindings[i]
			k := 0
			for k < len(b.Runs) && b.Runs[k] <= horizon {
				k++
			}
			if k > 0 {
				b.Runs, b.RunsBefore = slices.Clone(b.Runs[k:]), b.RunsBefore+k
			}
		}
	}
}

// compaction is the parts one compact makes, by the ordinal they are filed
// under.
type compaction struct {
	parts map[int]*Archived
}

// at is the part filed under ordinal o, made if need be.
func (c *compaction) at(o int) *Archived {
	a, ok := c.parts[o]
	if !ok {
		a = &Archived{}
		c.parts[o] = a
	}
	return a
}

// collect removes from s the entries that leave (file says where each is
// filed, and whether it leaves), adding each to its part with add; it
// returns what stays.
func collect[E any](c *compaction, t *Thread, p part, s []E, file func(*E) (int, bool), add func(*Archived, E)) []E {
	var stays []E
	for i := range s {
		o, leaves := file(&s[i])
		if !leaves {
			if stays != nil {
				stays = append(stays, s[i])
			}
			continue
		}
		if stays == nil {
			stays = append(make([]E, 0, len(s)-1), s[:i]...)
		}
		add(c.at(o), s[i])
	}
	if stays == nil {
		return s // nothing left: the collection is as it was, shared or not
	}
	t.shared &^= p // a slice of its own
	return stays
}
