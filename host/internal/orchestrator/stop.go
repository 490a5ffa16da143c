package orchestrator

import (
	"context"

	"github.com/baton-run/baton/host/internal/domain"
)

// Stops: the host's half of "stop means stop". The domain records an
// interrupt's deadline (domain.Thread.StopDeadline); the host keeps a
// timer for it (deadline.go) and sends ForceStop when it passes; the
// domain decides whether anything is left to stop, and if so the
// end_session effect ends the provider's process through its plugin
// (forceClose).

// syncStop arms the thread's timer for its interrupted run's deadline (or
// stops it when there is none).
func (h *Host) syncStop(threadID string, t *domain.Thread) {
	p, at, due := t.StopDeadline()
	h.arm(&h.stops, "force a run to stop", threadID, domain.Observed(threadID, p), at, due,
		"thread", threadID, "run", p.RunID)
}

// forceClose ends the session of a run the host stops by force (it did
// not stop when asked, or its provider went silent): the plugin ends the
// provider's process group (SIGTERM, then SIGKILL after its grace) and
// reports the session's end, which ends the run. A plugin that does not
// answer in time is killed, which ends the session too. A session already
// gone has nothing left to end.
func (h *Host) forceClose(e domain.EndSession) error {
	s, err := h.liveSessionFor(e.ThreadID, e.SessionID)
	if err != nil {
		return nil // its end is recorded, or on its way: it ends the run
	}
	why := ""
	if t, err := h.view(e.ThreadID); err == nil {
		for _, ps := range t.ProviderSessions {
			if ps.ID == s.id {
				why = ps.Forced
			}
		}
	}
	h.log.Warn("ending the provider's process", "thread", e.ThreadID, "run", e.RunID, "session", s.id, "why", why)
	return h.callPlugin(h.ctx, s.plugin, "CloseSession", sessionCloseTimeout, func(ctx context.Context) error {
		return s.plugin.ForceCloseSession(ctx, s.id)
	})
}
