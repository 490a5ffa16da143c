package orchestrator

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/baton-run/baton/host/internal/domain"
	"github.com/baton-run/baton/host/internal/eventlog"
)

// providerEvents is the content of a batch of provider events, for its
// receipt's hash.
type providerEvents struct {
	SessionID string                 `json:"sessionId"`
	Events    []domain.ProviderEvent `json:"events"`
}

func (providerEvents) CommandType() string { return "provider.events" }

// ingestEvents decides a session's provider events as one command: each is
// decided against the thread as the ones before it left it, and all of
// them, their effects and one receipt are committed in one synced batch.
// The projection is evolved as it goes (the writer holds h.mu, so the
// sequences the store will assign are known); if the commit fails, the
// thread's projection is rebuilt from the log.
func (h *Host) ingestEvents(threadID, sessionID, cmdID string, evs []domain.ProviderEvent) error {
	if len(evs) == 1 {
		_, err := h.Dispatch(context.Background(), domain.Command{ID: cmdID, ThreadID: threadID,
			Payload: domain.IngestProviderEvent{SessionID: sessionID, Event: evs[0]}})
		return err
	}
	hash := domain.Hash(domain.Command{ID: cmdID, ThreadID: threadID, Payload: providerEvents{SessionID: sessionID, Events: evs}})
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return ErrClosed
	}
	if b, ok, err := h.store.Receipt(cmdID); err != nil {
		return err
	} else if ok {
		var rc domain.Receipt
		if err := json.Unmarshal(b, &rc); err != nil || rc.PayloadHash != hash {
			return fmt.Errorf("%w: events %s were stored with other content", domain.ErrConflict, cmdID)
		}
		return nil // a duplicate
	}
	t, ok := h.threads[threadID]
	if !ok {
		return fmt.Errorf("%w: thread %q", domain.ErrNotFound, threadID)
	}
	now := h.cfg.Now()
	at := now.UTC() // as the store keeps it, so a rebuilt projection is the same
	env := domain.Env{Now: now, NewID: h.cfg.IDs.NewID, Caps: h.capabilities(threadID)}
	last, _ := h.store.Last()
	batch := eventlog.Batch{CommandID: cmdID}
	var effects []domain.Effect
	fail := func(err error) error {
		h.reload(threadID)
		return err
	}
	for _, ev := range evs {
		dec, err := domain.Decide(t, domain.Command{ID: cmdID, ThreadID: threadID,
			Payload: domain.IngestProviderEvent{SessionID: sessionID, Event: ev}}, env)
		if err != nil {
			return fail(err)
		}
		for _, p := range dec.Events {
			data, err := json.Marshal(p)
			if err != nil {
				return fail(fmt.Errorf("encode %s: %w", p.EventType(), err))
			}
			seq := last + uint64(len(batch.Events)) + 1
			batch.Events = append(batch.Events, eventlog.Pending{ThreadID: threadID, Type: p.EventType(), At: now, Data: data})
			domain.Evolve(t, domain.Event{Sequence: seq, ThreadID: threadID, At: at, Payload: p})
		}
		for _, e := range dec.Effects {
			data, _ := json.Marshal(e) // an Effect always encodes
			batch.Effects = append(batch.Effects, eventlog.Effect{ThreadID: e.ThreadID, Data: data})
		}
		effects = append(effects, dec.Effects...)
	}
	rc := domain.Receipt{CommandID: cmdID, Type: providerEvents{}.CommandType(), ThreadID: threadID, PayloadHash: hash, At: at}
	batch.Receipt = func(last uint64) ([]byte, error) {
		rc.Sequence = last
		return json.Marshal(rc)
	}
	recs, ids, err := h.store.Append(batch)
	if err != nil {
		return fail(err)
	}
	if n := len(recs); n > 0 && recs[n-1].Sequence != last+uint64(n) {
		// Cannot happen while h.mu is held by the only writer; if it did,
		// the projection would name wrong sequences.
		h.log.Error("event sequences differ from the ones foreseen; rebuilding the projection", "thread", threadID)
		h.reload(threadID)
	}
	if h.ctx.Err() == nil {
		for i, e := range effects {
			e.ID = ids[i]
			h.workerFor(e.ThreadID).push(e)
		}
	}
	return nil
}

// reload rebuilds a thread's projection from the log; h.mu is held.
func (h *Host) reload(threadID string) {
	recs, err := h.store.ThreadAfter(threadID, 0)
	if err != nil {
		h.log.Error("rebuild a thread's projection; it may show events the log does not have until the host restarts",
			"thread", threadID, "error", err)
		return
	}
	t := &domain.Thread{}
	for _, r := range recs {
		p, err := domain.DecodePayload(r.Type, r.Data)
		if err != nil {
			h.log.Error("rebuild a thread's projection", "thread", threadID, "error", err)
			return
		}
		domain.Evolve(t, domain.Event{Sequence: r.Sequence, ThreadID: r.ThreadID, At: r.At, Payload: p})
	}
	h.threads[threadID] = t
}
