package main

import (
	"fmt"

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
func (p *printer) stands(at *batonv1.Thread, t domain.Thread) {
	p.seed(t)
	if p.json {
		p.final(at, t, nil)
		return
	}
	active := t.ActiveRun()
	switch {
	case active != nil:
		p.line("▶ run %d %s: %s", active.Ordinal, active.Status, oneLine(active.Input, 100))
		p.openItems(t, *active)
		if l := t.Loop; l != nil && l.Wait != nil && l.Wait.RunID == active.ID {
			p.line("  ⏳ %s", p.waitLine(*l.Wait))
		}
	case len(t.Runs) == 0:
		p.line("■ no run yet")
	default:
		if last := lastStarted(t); last != nil {
			p.line("■ no run is active; the last, run %d, %s", last.Ordinal, last.Status)
		} else {
			p.line("■ no run is active")
		}
	}
	for _, q := range t.Requests {
		if q.Status == domain.RequestStatusPending {
			p.pending(q)
		}
	}
	for _, r := range t.Runs {
		if r.Status == domain.RunStatusQueued {
			p.line("▶ run %d queued: %s", r.Ordinal, oneLine(r.Input, 100))
		}
	}
}

// seed gives p what it would have learnt from the events before t's
// sequence: the items still open (with their text so far), and what each
// checkpoint is of.
func (p *printer) seed(t domain.Thread) {
	text := map[string]string{}
	for _, it := range t.TurnItems {
		text[it.NodeID] = it.Text.String()
	}
	for _, r := range t.Runs {
		for _, n := range r.Nodes {
			if n.Status == domain.StatusInProgress {
				p.items[n.ID] = &item{kind: n.Kind, title: n.Title, text: text[n.ID]}
			}
		}
	}
	kinds := map[string]domain.ScopeKind{}
	for _, sc := range t.CheckpointScopes {
		kinds[sc.ID] = sc.Kind
	}
	for _, cp := range t.Checkpoints {
		switch {
		case kinds[cp.ScopeID] == domain.ScopeSubagent:
			p.cps[cp.ID] = fmt.Sprintf("a subagent of run %d", cp.RunOrdinal)
		case cp.RunOrdinal == 0:
			p.cps[cp.ID] = "the baseline"
		default:
			p.cps[cp.ID] = fmt.Sprintf("run %d", cp.RunOrdinal)
		}
	}
}

// openItems lists a run's items still in progress, as the stream says
// them when they start, with what they have said so far.
func (p *printer) openItems(t domain.Thread, r domain.Run) {
	messages := map[string]string{}
	for _, m := range t.Messages {
		if m.RunID == r.ID && m.NodeID != "" {
			messages[m.NodeID] = m.Text.String()
		}
	}
	for _, n := range r.Nodes {
		if n.Status != domain.StatusInProgress || n.Kind == domain.NodeRootTurn {
			continue
		}
		var so string
		if it := p.items[n.ID]; it != nil {
			so = it.text
		}
		if n.Kind == domain.NodeAssistantMessage {
			so = messages[n.ID]
		}
		what := words(string(n.Kind))
		if n.Title != "" {
			what += " " + n.Title
		}
		if so != "" {
			what += ": " + oneLine(so, 100)
		}
		p.line("  · %s (in progress)", what)
	}
}

// pending shows a pending request and how to answer it.
func (p *printer) pending(q domain.RuntimeRequest) {
	p.line("  ? %s request %s: %s", words(string(q.Kind)), q.ID, oneLine(q.Title, 100))
	switch {
	case q.Delivery == domain.DeliveryNotResumable:
		p.line("    its provider is gone: it can no longer be answered")
	case q.Kind == domain.RequestUserInput:
		p.line("    answer it: baton approve %s --answer 'TEXT', or baton decline %s", q.ID, q.ID)
	default:
		p.line("    answer it: baton approve %s, or baton decline %s", q.ID, q.ID)
	}
}

// lastStarted is the thread's newest run that has started, if any.
func lastStarted(t domain.Thread) *domain.Run {
	for i := len(t.Runs) - 1; i >= 0; i-- {
		if t.Runs[i].StartedAt != nil {
			return &t.Runs[i]
		}
	}
	return nil
}
