package orchestrator

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"time"

	"github.com/baton-run/baton/host/internal/domain"
	"github.com/baton-run/baton/sdk"
)

// Ingesting a session's events: the pump reads them from the plugin's
// stream as they come, and each batch is one commit (commit.go), its
// events decided in order against the same scratch thread.

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
// them (text deltas to one message side by side joined), their effects and
// one receipt are committed in one synced batch.
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
			// Chunks of one answer that came together are one event
			// (domain.Coalesce): a fast stream costs an event a write.
			return domain.Coalesce(events), effects, nil
		}})
	return err
}

// reconnectPause is the pause before an event stream that broke is
// reopened; each further break in a row adds as much again.
const reconnectPause = 100 * time.Millisecond

// ackEvery is how many events the host stores before it tells the plugin
// it may drop them: the plugin keeps at most about this many that the host
// already has.
const ackEvery = 512

// pump ingests a session's events until its stream ends. A stream that
// breaks while the plugin lives is reopened after the last event ingested
// (the plugin buffers them); if the plugin is gone, the session ends with
// that reason. A pause before reopening is on the host's clock; Close cuts
// it short: the stream is reopened at once, since the session's last events
// are still wanted, and if it breaks again the session is left for the next
// host to reconcile.
func (h *Host) pump(s *liveSession) {
	defer s.cancel()
	defer close(s.done)
	// The stream is read with a context of its own: at Close the host
	// still wants the session's last events (its runtime exit). Close
	// kills the plugins last, which ends any stream still open.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var last, acked uint64
	reopenedAtStop := false
	for attempt := 0; ; attempt++ {
		// A reader goroutine fills evc; the loop below ingests what has
		// arrived in batches, one synced write each: when events come
		// faster than the disk syncs (content deltas), they share writes;
		// one at a time, each goes alone, with no wait added.
		evc := make(chan sdk.RuntimeEvent, maxIngestBatch)
		errc := make(chan error, 1)
		sctx, scancel := context.WithCancel(ctx)
		go func() {
			defer close(evc)
			for ev, err := range s.plugin.Events(sctx, s.id, last) {
				if err != nil {
					errc <- err
					return
				}
				select {
				case evc <- ev:
				case <-sctx.Done():
					return
				}
			}
		}()
		exited := false
		for ev := range evc {
			batch := append(make([]sdk.RuntimeEvent, 0, 8), ev)
		more:
			for len(batch) < maxIngestBatch && batch[len(batch)-1].Kind != sdk.EventRuntimeExited {
				select {
				case ev, ok := <-evc:
					if !ok {
						break more
					}
					batch = append(batch, ev)
				default:
					break more
				}
			}
			attempt = 0
			if !h.ingestBatch(s, batch) {
				// The host stops before they could be stored: never
				// acknowledged, and not skipped by a stream reopened
				// after them; the next host reconciles the session.
				h.log.Warn("session events not stored as the host stops; left for the next host", "session", s.id,
					"after", last, "events", len(batch))
				scancel()
				for range evc { // the reader ends with its context
				}
				return
			}
			last = batch[len(batch)-1].Sequence
			if last-acked >= ackEvery {
				// Stored: the plugin need not keep them for a stream that
				// resumes (a failed acknowledgement only leaves them kept).
				if err := h.callPlugin(ctx, s.plugin, "AckEvents", h.cfg.PluginCallTimeout, func(ctx context.Context) error {
					return s.plugin.AckEvents(ctx, s.id, last)
				}); err == nil {
					acked = last
				}
			}
			if batch[len(batch)-1].Kind == sdk.EventRuntimeExited {
				exited = true
				break
			}
		}
		scancel()
		for range evc { // the reader ends with its context
		}
		if exited {
			return
		}
		var streamErr error
		select {
		case streamErr = <-errc:
		default:
		}
		if streamErr == nil {
			return // the plugin closed the stream: the session is over
		}
		unknown := errors.Is(streamErr, sdk.ErrUnknownSession)
		killed := s.plugin.KilledFor() != "" // by the host: it did not answer
		if reopenedAtStop && !unknown && !killed {
			h.log.Warn("session event stream broke while the host closes; left for the next host", "session", s.id, "after", last, "error", streamErr)
			return
		}
		wait := h.cfg.Clock.NewTimer(time.Duration(attempt+1) * reconnectPause)
		stopping, paused := h.stopping.Done(), wait.C()
		if killed {
			stopping, paused = nil, nil // no reopening: its process is gone soon (Kill ends it)
		}
		select {
		case <-s.plugin.Exited():
		case <-stopping:
			if !unknown {
				reopenedAtStop = true
				wait.Stop()
				continue
			}
		case <-paused:
			if attempt < 5 && !unknown {
				h.log.Warn("session event stream broke; reopening", "session", s.id, "after", last, "error", streamErr)
				continue
			}
		}
		wait.Stop()
		h.settleIngest(s, 1, func() error {
			_, err := h.Dispatch(context.Background(), domain.Observed(s.threadID,
				domain.ProviderExited{SessionID: s.id, Message: pluginGoneFailure(s.plugin, streamErr)}))
			return err
		})
		return
	}
}
