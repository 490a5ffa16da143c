package main

import (
	batonv1 "github.com/baton-run/baton/host/api/baton/v1"
	"github.com/baton-run/baton/host/internal/domain"
)

// Where a thread stands, for a client that attaches to it mid-way (baton
// watch): what the events it will follow cannot say, since they began
// before it came.

// stands prints where t stands: its active run (ordinal, status and what
// it was asked), the run's open items, its armed wait, every pending
// request with the commands that answer it, and the runs queued behind it;
// with no run active, the last run's end. In JSON it is the projection,
// one line ({"kind":"thread",...}). It seeds p with what it showed, so
// that the later events of an item that began before print as they would
// have (an item's completion names it).
func (p *printer) stands(t *batonv1.Thread) {
	p.seed(t)
	if p.json {
		p.final(t, nil)
		return
	}
	active := activeRun(t)
	switch {
	case active != nil:
		p.line("▶ run %d %s: %s", active.GetOrdinal(), active.GetStatus(), oneLine(active.GetInput(), 100))
		p.openItems(t, active)
		if w := t.GetLoop().GetWait(); w != nil && w.GetRunId() == active.GetId() {
			p.line("  ⏳ %s", p.waitLine(w))
		}
	case len(t.GetRuns()) == 0:
		p.line("■ no run yet")
	default:
		if last := lastStarted(t); last != nil {
			p.line("■ no run is active; the last, run %d, %s", last.GetOrdinal(), last.GetStatus())
		} else {
			p.line("■ no run is active")
		}
	}
	for _, q := range t.GetRequests() {
		if domain.RequestStatus(q.GetStatus()) == domain.RequestStatusPending {
			p.pending(q)
		}
	}
	for _, r := range t.GetRuns() {
		if statusOf(r) == domain.RunStatusQueued {
			p.line("▶ run %d queued: %s", r.GetOrdinal(), oneLine(r.GetInput(), 100))
		}
	}
}

// seed gives p what it would have learnt from the events before t's
// sequence: the items still open (with their text so far), and what each
// checkpoint is of.
func (p *printer) seed(t *batonv1.Thread) {
	text := map[string]string{}
	for _, it := range t.GetTurnItems() {
		text[it.GetNodeId()] = it.GetText()
	}
	for _, r := range t.GetRuns() {
		for _, n := range r.GetNodes() {
			if domain.ItemStatus(n.GetStatus()) == domain.StatusInProgress {
				p.items[n.GetId()] = &item{kind: domain.NodeKind(n.GetKind()), title: n.GetTitle(), text: text[n.GetId()]}
			}
		}
	}
	kinds := map[string]domain.ScopeKind{}
	for _, sc := range t.GetCheckpointScopes() {
		kinds[sc.GetId()] = domain.ScopeKind(sc.GetKind())
	}
	for _, cp := range t.GetCheckpoints() {
		p.cps[cp.GetId()] = checkpointOf(kinds[cp.GetScopeId()], int(cp.GetRunOrdinal()))
	}
}

// openItems lists a run's items still in progress, as the stream says
// them when they start, with what they have said so far.
func (p *printer) openItems(t *batonv1.Thread, r *batonv1.Run) {
	messages := map[string]string{}
	for _, m := range t.GetMessages() {
		if m.GetRunId() == r.GetId() && m.GetNodeId() != "" {
			messages[m.GetNodeId()] = m.GetText()
		}
	}
	for _, n := range r.GetNodes() {
		kind := domain.NodeKind(n.GetKind())
		if domain.ItemStatus(n.GetStatus()) != domain.StatusInProgress || kind == domain.NodeRootTurn {
			continue
		}
		var so string
		if it := p.items[n.GetId()]; it != nil {
			so = it.text
		}
		if kind == domain.NodeAssistantMessage {
			so = messages[n.GetId()]
		}
		what := words(n.GetKind())
		if n.GetTitle() != "" {
			what += " " + n.GetTitle()
		}
		if so != "" {
			what += ": " + oneLine(so, 100)
		}
		p.line("  · %s (in progress)", what)
	}
}

// pending shows a pending request and how to answer it.
func (p *printer) pending(q *batonv1.RuntimeRequest) {
	p.line("  ? %s request %s: %s", words(q.GetKind()), q.GetId(), oneLine(q.GetTitle(), 100))
	switch {
	case domain.Delivery(q.GetDelivery()) == domain.DeliveryNotResumable:
		p.line("    its provider is gone: it can no longer be answered")
	case domain.RequestKind(q.GetKind()) == domain.RequestUserInput:
		p.line("    answer it: baton approve %s --answer 'TEXT', or baton decline %s", q.GetId(), q.GetId())
	default:
		p.line("    answer it: baton approve %s, or baton decline %s", q.GetId(), q.GetId())
	}
}
