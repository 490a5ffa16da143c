package orchestrator

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"

	"github.com/baton-run/baton/host/internal/domain"
	"github.com/baton-run/baton/sdk"
)

// Ingesting a session's events: each batch is one commit, its events
// decided in order against the same scratch thread.

// maxIngestBatch bounds how many provider events share one write.
const maxIngestBatch = 256

// ingestBatch decides a session's events, in order, and says whether
// they are settled: committed, or refused (which no retry changes). A
// failure to store them is retried until they commit (retry): a lost
// terminal event would leave its run running for as long as the host runs.
// They are not settled only when the host stops first (it closes, or its
// store failed): then the pump acknowledges nothing more to the plugin,
// and the next host reconciles the session.
func (h *Host) ingestBatch(s *liveSession, evs []sdk.RuntimeEvent) bool {
	s.touch(h.cfg.Clock.Now())
	id := domain.ProviderEventsID(s.id, evs[0].Sequence, evs[len(evs)-1].Sequence)
	return h.settleIngest(s, len(evs), func() error { return h.ingestEvents(s.threadID, s.id, id, evs) })
}

// settleIngest retries the commit of n of a session's events (or of its
// end, which the host saw) as ingestBatch says, and says whether they are
// settled.
func (h *Host) settleIngest(s *liveSession, n int, commit func() error) (settled bool) {
	err := h.retry("ingest provider events", commit, "thread", s.threadID, "session", s.id)
	switch {
	case err == nil:
		return true
	case stopped(err):
		return false
	}
	h.log.Error("ingest provider events: refused; they are dropped", "thread", s.threadID, "session", s.id, "events", n, "error", err)
	return true
}

// providerEventsType is the receipt type of a batch of provider events.
const providerEventsType = "provider.events"

// batchHash is a batch's content for its receipt: its thread, its session,
// and each event's sequence and kind. A plugin numbers a session's events
// once (a stream resumed after sequence N sends the same events again), so
// these name the events; hashing their whole content would cost a second
// encoding of every delta.
func batchHash(threadID, sessionID string, evs []sdk.RuntimeEvent) string {
	h := sha256.New()
	b := make([]byte, 0, 64)
	b = append(append(append(b, threadID...), 0), sessionID...)
	h.Write(b)
	for _, ev := range evs {
		b = binary.BigEndian.AppendUint64(b[:0], ev.Sequence)
		h.Write(append(append(b, ev.Kind...), 0))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// ingestEvents commits a session's provider events as one command: each is
// decided against the thread as the ones before it left it, and all of
// them, their effects and one receipt are committed in one synced batch.
func (h *Host) ingestEvents(threadID, sessionID, cmdID string, evs []sdk.RuntimeEvent) error {
	if len(evs) == 1 {
		_, err := h.Dispatch(context.Background(), domain.Command{ID: cmdID, ThreadID: threadID,
			Payload: domain.IngestProviderEvent{SessionID: sessionID, Event: evs[0]}})
		return err
	}
	hash := batchHash(threadID, sessionID, evs)
	_, err := h.commit(commitReq{threadID: threadID, cmdID: cmdID, typ: providerEventsType, hash: hash,
		decide: func(t *domain.Thread, env domain.Env) (events []domain.Payload, effects []domain.Effect, err error) {
			for _, ev := range evs {
				d, err := domain.Decide(t, domain.Command{ID: cmdID, ThreadID: threadID,
					Payload: domain.IngestProviderEvent{SessionID: sessionID, Event: ev}}, env)
				if err != nil {
					return nil, nil, err
				}
				events = append(events, d.Events...)
				effects = append(effects, d.Effects...)
			}
			return events, effects, nil
		}})
	return err
}
