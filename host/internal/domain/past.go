package domain

import (
	"cmp"
	"fmt"
	"iter"
	"slices"
	"strings"
)

// Decisions that need the past. Most decisions need only what a
// projection keeps (earlier.go); three reach back among the runs that have
// left it: a rollback to one of them (its checkpoint, and the runs,
// checkpoints and provider turns after it), the native rollback's account
// of what the kept conversation has seen, and a handoff that tells of them.
// Such a decision fails with a *NeedPast that says what it needs; the host
// gathers that from the parts it stored (GatherPast, a pure function of
// the parts it is given, newest first) into Env.Past and decides again on
// a fresh scratch. Nothing here reads a store.

// NeedPast is the error of a decision that needs what has left the
// projection. Its fields say what; a host that cannot gather it reports
// it as the decision's error.
type NeedPast struct {
	// From asks for the runs from this ordinal on that have left, with
	// their checkpoints, scopes and provider turns (0: none).
	From int
	// Checkpoint and Scope ask for the runs from the run of this
	// checkpoint, or checkpoint scope, on: a rollback's target that the
	// projection no longer holds.
	Checkpoint string
	Scope      string
	// KeptIn and KeptUpTo ask for the newest run up to KeptUpTo whose
	// root turn ran in one of the conversations KeptIn, not rolled back: what
	// a conversation a native rollback keeps has seen.
	KeptIn   []string
	KeptUpTo int
	// Told asks for the runs after ToldAfter that the thread tells of,
	// and what a handoff tells of the newest of them until their one-line
	// forms fill ToldBudget bytes (the older ones it would leave out).
	Told       bool
	ToldAfter  int
	ToldBudget int
}

func (n *NeedPast) Error() string {
	var what []string
	if n.From > 0 {
		what = append(what, fmt.Sprintf("runs from %d on", n.From))
	}
	if n.Checkpoint != "" {
		what = append(what, "checkpoint "+n.Checkpoint)
	}
	if n.Scope != "" {
		what = append(what, "checkpoint scope "+n.Scope)
	}
	if len(n.KeptIn) > 0 {
		what = append(what, fmt.Sprintf("what the kept conversation saw up to run %d", n.KeptUpTo))
	}
	if n.Told {
		what = append(what, fmt.Sprintf("the runs told after run %d", n.ToldAfter))
	}
	return "the decision needs what has left the thread's projection: " + strings.Join(what, ", ")
}

// Merge adds what m asks to n: a host that gathered for n and is asked
// for m gathers for both, so that the decision made again has all it
// needed.
func (n *NeedPast) Merge(m NeedPast) {
	if m.From > 0 && (n.From == 0 || m.From < n.From) {
		n.From = m.From
	}
	n.Checkpoint, n.Scope = cmp.Or(m.Checkpoint, n.Checkpoint), cmp.Or(m.Scope, n.Scope)
	if len(m.KeptIn) > 0 {
		n.KeptIn, n.KeptUpTo = m.KeptIn, m.KeptUpTo
	}
	if m.Told && (!n.Told || m.ToldAfter < n.ToldAfter) {
		n.Told, n.ToldAfter, n.ToldBudget = true, m.ToldAfter, m.ToldBudget
	}
}

// needPast records that the decision needs what n asks.
func (d *Decision) needPast(n NeedPast) {
	if d.need == nil {
		d.need = &NeedPast{}
	}
	d.need.Merge(n)
}

// Past is what a host gathered of the runs that left a thread's
// projection, for a decision that asked for it (see NeedPast).
type Past struct {
	need NeedPast
	// runs holds the runs from from on (to the newest that left), with
	// their checkpoints, scopes and provider turns, oldest first; found
	// says the checkpoint or scope asked for was among them.
	runs  Thread
	from  int
	found bool
	// kept is the run a native rollback's conversation has seen through.
	kept int
	// told are the runs after need.ToldAfter the thread tells of, oldest
	// first; digests what a handoff tells of the newest of them.
	told    []HandoffRun
	digests map[int]*handoffPart
	// rollbacks is how many of the thread's Earlier.Rollbacks the parts
	// were read with: one the decision completes after is not.
	rollbacks int
}

// holds says whether the past holds the runs from ordinal from on.
func (p *Past) holds(from int) bool { return p != nil && p.from <= from }

// looked says whether the past was gathered for a checkpoint (or scope)
// of this id: if it is not in it, the thread has none.
func (p *Past) looked(id string) bool {
	return p != nil && id != "" && (p.need.Checkpoint == id || p.need.Scope == id)
}

// knowsKept says whether the past holds what a native rollback's
// conversation saw up to upTo.
func (p *Past) knowsKept(upTo int) bool {
	return p != nil && len(p.need.KeptIn) > 0 && p.need.KeptUpTo == upTo
}

// knowsTold says whether the past holds the runs told after after.
func (p *Past) knowsTold(after int) bool {
	return p != nil && p.need.Told && p.need.ToldAfter <= after
}

// toldAfter are the ordinals of the runs after after that t tells of,
// among those that left: a rollback t completed since the past was
// gathered rolled back those after its target.
func (p *Past) toldAfter(t *Thread, after int) []int {
	upTo := t.earlierRuns()
	for _, rb := range t.Earlier.Rollbacks[p.rollbacks:] {
		upTo = min(upTo, rb.Target)
	}
	var out []int
	for _, r := range p.told {
		if r.Ordinal > after && r.Ordinal <= upTo {
			out = append(out, r.Ordinal)
		}
	}
	return out
}

// tells is what the past tells of a run that left: whether the thread
// tells of it, and what a handoff says of it (nil: it is older than the
// digests reach).
func (p *Past) tells(ord int) (HandoffRun, *handoffPart, bool) {
	if p != nil {
		for _, hr := range p.told {
			if hr.Ordinal == ord {
				return hr, p.digests[ord], true
			}
		}
	}
	return HandoffRun{}, nil, false
}

// withPast is the thread with the runs the past holds (and their
// checkpoints, scopes and provider turns) before its own, for reading
// only: what a rollback decides over. Without a past it is t.
func (t *Thread) withPast(p *Past) *Thread {
	if p == nil || len(p.runs.Runs)+len(p.runs.Checkpoints) == 0 {
		return t
	}
	v := *t
	v.Runs = slices.Concat(p.runs.Runs, t.Runs)
	v.Checkpoints = slices.Concat(p.runs.Checkpoints, t.Checkpoints)
	v.CheckpointScopes = slices.Concat(p.runs.CheckpointScopes, t.CheckpointScopes)
	v.ProviderTurns = slices.Concat(p.runs.ProviderTurns, t.ProviderTurns)
	v.Earlier = nil
	return &v
}

// GatherPast gathers what need asks from the parts that left the thread,
// given newest first (by ordinal, a run's parts together), each as it was
// stored: the rollbacks that completed after a part left are applied to
// it here. It reads no further than need asks.
func (t *Thread) GatherPast(need *NeedPast, parts iter.Seq2[Archived, error]) (*Past, error) {
	p := &Past{need: *need, from: t.earlierRuns() + 1}
	if t.Earlier != nil {
		p.rollbacks = len(t.Earlier.Rollbacks)
	}
	lookup := need.Checkpoint != "" || need.Scope != ""
	keep := len(need.KeptIn) > 0
	budget := need.ToldBudget
	var slim []Archived // newest first
	// take takes in a run's parts; false: nothing older is needed.
	take := func(o int, group []Archived) bool {
		a := merged(group)
		if need.Told && o > need.ToldAfter {
			if r := a.run(); r != nil && r.told() {
				hr := HandoffRun{Ordinal: r.Ordinal, RunID: r.ID, Provider: r.Provider, MessageIDs: toldMessages(a, r)}
				if budget > 0 {
					dg := digest(a, r)
					budget -= len(dg.text[levelStub])
					if p.digests == nil {
						p.digests = map[int]*handoffPart{}
					}
					p.digests[o] = dg
				}
				p.told = append(p.told, hr)
			}
		}
		if keep && o <= need.KeptUpTo {
			if k := a.keptIn(need.KeptIn, need.KeptUpTo); k > 0 {
				p.kept, keep = k, false
			}
		}
		if lookup || need.From > 0 && o >= need.From {
			slim = append(slim, a.slim())
			p.from = o
			if lookup && a.has(need.Checkpoint, need.Scope) {
				lookup, p.found = false, true
			}
		}
		return lookup || keep && o > 1 || need.From > 0 && o > need.From || need.Told && o > need.ToldAfter+1
	}
	var group []Archived
	for a, err := range parts {
		if err != nil {
			return nil, err
		}
		if t.Earlier != nil {
			t.Earlier.Overlay(&a)
		}
		if len(group) > 0 && a.Ordinal != group[0].Ordinal {
			if !take(group[0].Ordinal, group) {
				group = nil
				break
			}
			group = group[:0]
		}
		group = append(group, a)
	}
	if len(group) > 0 {
		take(group[0].Ordinal, group)
	}
	slices.Reverse(p.told)
	for i := len(slim) - 1; i >= 0; i-- {
		s := &slim[i]
		p.runs.Runs = append(p.runs.Runs, s.Runs...)
		p.runs.Checkpoints = append(p.runs.Checkpoints, s.Checkpoints...)
		p.runs.CheckpointScopes = append(p.runs.CheckpointScopes, s.CheckpointScopes...)
		p.runs.ProviderTurns = append(p.runs.ProviderTurns, s.ProviderTurns...)
	}
	return p, nil
}

// merged is parts as one: what each holds, in the order they left, a
// checkpoint that left twice (brought back by a rollback) as it left
// last.
func merged(group []Archived) Archived {
	if len(group) == 1 {
		return group[0]
	}
	g := slices.Clone(group)
	slices.SortFunc(g, func(a, b Archived) int { return a.Part - b.Part })
	out := Archived{Ordinal: g[0].Ordinal, Part: g[len(g)-1].Part}
	for _, a := range g {
		out.Runs = append(out.Runs, a.Runs...)
		out.Messages = append(out.Messages, a.Messages...)
		out.TurnItems = append(out.TurnItems, a.TurnItems...)
		out.ProviderSessions = append(out.ProviderSessions, a.ProviderSessions...)
		out.ProviderThreads = append(out.ProviderThreads, a.ProviderThreads...)
		out.ProviderTurns = append(out.ProviderTurns, a.ProviderTurns...)
		out.Requests = append(out.Requests, a.Requests...)
		out.Diagnostics = append(out.Diagnostics, a.Diagnostics...)
		out.CheckpointScopes = append(out.CheckpointScopes, a.CheckpointScopes...)
		out.Rollbacks = append(out.Rollbacks, a.Rollbacks...)
		out.Handoffs = append(out.Handoffs, a.Handoffs...)
		for _, c := range a.Checkpoints {
			if i := slices.IndexFunc(out.Checkpoints, func(k Checkpoint) bool { return k.ID == c.ID }); i >= 0 {
				out.Checkpoints[i] = c
				continue
			}
			out.Checkpoints = append(out.Checkpoints, c)
		}
	}
	return out
}

// run is the run a part holds, if any.
func (a *Archived) run() *Run {
	if len(a.Runs) == 0 {
		return nil
	}
	return &a.Runs[0]
}

// has says whether a part holds the checkpoint, or the scope.
func (a *Archived) has(checkpoint, scope string) bool {
	return slices.ContainsFunc(a.Checkpoints, func(c Checkpoint) bool { return c.ID == checkpoint && c.ID != "" }) ||
		slices.ContainsFunc(a.CheckpointScopes, func(sc CheckpointScope) bool { return sc.ID == scope && sc.ID != "" })
}

// keptIn is the part's run's ordinal if its root turn ran in one of the
// conversations, it is not rolled back and not after upTo; else 0.
func (a *Archived) keptIn(convs []string, upTo int) int {
	r := a.run()
	if r == nil || r.Status == RunStatusRolledBack || r.Ordinal > upTo {
		return 0
	}
	for _, pt := range a.ProviderTurns {
		if at := r.attempt(pt.AttemptID); at != nil && at.RootNode == pt.NodeID && slices.Contains(convs, pt.ProviderThreadID) {
			return r.Ordinal
		}
	}
	return 0
}

// slim is what a rollback decides over of a part: its runs without their
// nodes, checkpoints, scopes and provider turns.
func (a Archived) slim() Archived {
	s := Archived{Ordinal: a.Ordinal, Part: a.Part, Checkpoints: a.Checkpoints, CheckpointScopes: a.CheckpointScopes,
		ProviderTurns: a.ProviderTurns}
	for _, r := range a.Runs {
		r.Nodes = nil
		s.Runs = append(s.Runs, r)
	}
	return s
}

// toldMessages are the ids of a run's messages a handoff tells of: those that
// say something.
func toldMessages(a Archived, r *Run) []string {
	var ids []string
	for _, m := range a.Messages {
		if m.RunID == r.ID && m.Text.Len() > 0 {
			ids = append(ids, m.ID)
		}
	}
	return ids
}

// digestWholeMax bounds the text a handoff may tell of a run that left the
// projection at its fullest: a longer one is told at most cut short, so
// that what the host gathers for a handoff stays small.
const digestWholeMax = 8 << 10

// digest is what a handoff tells of a run that left: its text at each
// level, rendered as composeHandoff renders a run it holds.
func digest(a Archived, r *Run) *handoffPart {
	run := *r
	run.Nodes, run.Attempts, run.PendingRestart = nil, nil, nil
	p := &handoffPart{run: &run}
	var msgs []*Message
	for i := range a.Messages {
		if m := &a.Messages[i]; m.RunID == r.ID && m.Text.Len() > 0 {
			msgs = append(msgs, m)
		}
	}
	var items []*TurnItem
	for i := range a.TurnItems {
		if a.TurnItems[i].RunID == r.ID {
			items = append(items, &a.TurnItems[i])
		}
	}
	for _, c := range a.Checkpoints {
		if c.ID == r.CheckpointID {
			p.files = c.Files
		}
	}
	p.render(msgs, items)
	for p.floor < levelBrief && len(p.text[p.floor]) > digestWholeMax {
		p.floor++
	}
	for level := levelWhole; level < p.floor; level++ {
		p.text[level] = p.text[p.floor]
	}
	return p
}
