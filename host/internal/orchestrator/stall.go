package orchestrator

import (
	"time"

	"github.com/baton-run/baton/host/internal/domain"
)

// Silence: the host's half of the stall and request timeouts
// (Config.TurnStallTimeout, Config.RequestTimeout). The domain derives
// each deadline from the projection (domain.Thread.StallDeadline, from
// the thread's last event; domain.Thread.RequestDeadline, from its oldest
// request still waiting for an answer); the host keeps a timer for each
// (deadline.go) and sends StallTurn or ExpireRequest when it passes. A
// stalled turn's provider process is ended by the same end_session effect
// as an interrupt's forced stop (forceClose).

// DefaultTurnStallTimeout is baton's turn stall timeout unless told
// otherwise (Config's zero is never): far longer than a provider works
// without a word (it reports its thinking, its tool calls and their
// output as they go), short enough that a run stuck that way ends within
// the hour.
const DefaultTurnStallTimeout = time.Hour

// syncStall arms the thread's timer for its active run's stall deadline
// (or stops it when none is due). Every commit that records anything of
// the thread moves it.
func (h *Host) syncStall(threadID string, t *domain.Thread) {
	p, at, due := t.StallDeadline(h.cfg.TurnStallTimeout)
	h.arm(&h.stalls, "end a stalled turn", threadID, domain.Observed(threadID, p), at, due,
		"thread", threadID, "run", p.RunID)
}

// syncRequest arms the thread's timer for its oldest unanswered request's
// deadline (or stops it when none is due).
func (h *Host) syncRequest(threadID string, t *domain.Thread) {
	p, at, due := t.RequestDeadline(h.cfg.RequestTimeout)
	h.arm(&h.expiries, "answer a request left unanswered", threadID, domain.Observed(threadID, p), at, due,
		"thread", threadID, "request", p.RequestID)
}
