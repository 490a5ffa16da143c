package orchestrator

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/baton-run/baton/host/internal/domain"
	"github.com/baton-run/baton/host/internal/eventlog"
	"github.com/baton-run/baton/host/internal/pluginhost"
	"github.com/baton-run/baton/sdk"
)

// worker performs one thread's effects in order, one at a time. It is
// started with an effect and ends when its queue is empty (or the host
// closes), so that idle threads cost nothing.
type worker struct {
	threadID string
	mu       sync.Mutex
	queue    []domain.Effect
}

// workerFor returns the thread's worker; h.mu is held.
func (h *Host) workerFor(threadID string) *worker {
	w, ok := h.workers[threadID]
	if !ok {
		w = &worker{threadID: threadID}
		h.workers[threadID] = w
		h.wg.Add(1)
		go func() {
			defer h.wg.Done()
			w.run(h)
		}()
	}
	return w
}

func (w *worker) push(e domain.Effect) {
	w.mu.Lock()
	w.queue = append(w.queue, e)
	w.mu.Unlock()
}

func (w *worker) run(h *Host) {
	for {
		w.mu.Lock()
		var e domain.Effect
		ok := len(w.queue) > 0
		if ok {
			e, w.queue = w.queue[0], w.queue[1:]
		}
		w.mu.Unlock()
		if ok {
			h.settle(e)
			continue
		}
		if w.retire(h) {
			return
		}
	}
}

// retire removes a worker whose queue is empty from the host. Effects are
// pushed with h.mu held, so none can arrive between the check and the
// removal; the next one starts a new worker.
func (w *worker) retire(h *Host) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.queue) > 0 {
		return false
	}
	if h.workers[w.threadID] == w {
		delete(h.workers, w.threadID)
	}
	return true
}

// settle performs an effect and removes it from the outbox: with the
// command that records its outcome, in one batch, when it has one. An
// effect cut short by the host closing stays in the outbox for the next
// host to cancel; so does one whose outcome could not be recorded.
func (h *Host) settle(e domain.Effect) {
	cmd, settled := h.perform(e)
	if !settled {
		return
	}
	ref := eventlog.EffectRef{ThreadID: e.ThreadID, ID: e.ID}
	if cmd != nil {
		// Retried: an outcome not recorded would leave a run ending, or a
		// rollback in progress, until the host restarts.
		if err := h.retry("record the outcome of an action", func() error {
			_, err := h.dispatch(h.ctx, *cmd, []eventlog.EffectRef{ref})
			return err
		}, "type", e.Type, "thread", e.ThreadID); err != nil {
			h.log.Error("record the outcome of an action; it stays in the outbox for the next host", "type", e.Type, "thread", e.ThreadID, "error", err)
			return
		}
	}
	// Also after a command: one sent before (a duplicate) did not remove it.
	if err := h.store.EffectDone(ref); err != nil && h.ctx.Err() == nil {
		h.log.Error("remove performed effect from the outbox", "thread", e.ThreadID, "effect", e.ID, "error", err)
	}
}

// perform does one effect and returns the command that records what came
// of it (nil: nothing to record) and whether it is settled (false: the
// host is closing). A failure becomes a command, so it is decided and
// recorded like everything else.
func (h *Host) perform(e domain.Effect) (*domain.Command, bool) {
	if h.ctx.Err() != nil {
		return nil, false // closing: left in the outbox
	}
	// The host's own work: a nil command means it was cut short by the
	// host closing, and the next host performs it again.
	if own := map[string]func(domain.Effect) *domain.Command{domain.EffectCapture: h.capture,
		domain.EffectRestoreFiles: h.restoreFiles, domain.EffectReconcileThread: h.reconcileThread}[e.Type]; own != nil {
		cmd := own(e)
		return cmd, cmd != nil
	}
	if (e.Type == domain.EffectStartTurn || e.Type == domain.EffectSteer) && !h.attemptActive(e) {
		// Decided for an attempt that has since been replaced or whose run
		// ended: sending it now would start work nobody follows.
		h.log.Debug("provider action for an attempt no longer active; skipped", "type", e.Type, "run", e.RunID, "attempt", e.AttemptID)
		if e.Type == domain.EffectSteer {
			return &domain.Command{ID: "steerfail:" + e.ID, ThreadID: e.ThreadID, Payload: domain.SteerFailed{RunID: e.RunID,
				MessageID: e.MessageID, Reason: "its turn had ended before the message could be sent"}}, true
		}
		return nil, true
	}
	var err error
	var sessionID string
	switch e.Type {
	case domain.EffectStartTurn:
		sessionID, err = h.startTurn(e)
	case domain.EffectRespond:
		err = h.respond(e)
	case domain.EffectSteer:
		err = h.steer(e)
	case domain.EffectInterrupt:
		err = h.interrupt(e)
	default:
		h.log.Error("unknown effect", "type", e.Type, "thread", e.ThreadID)
		return nil, true
	}
	if err == nil {
		if e.Type == domain.EffectStartTurn {
			return &domain.Command{ID: "dispatched:" + e.AttemptID, ThreadID: e.ThreadID, Payload: domain.RecordTurnDispatched{
				RunID: e.RunID, AttemptID: e.AttemptID, SessionID: sessionID}}, true
		}
		return nil, true
	}
	if h.ctx.Err() != nil || errors.Is(err, ErrClosed) {
		return nil, false // shutting down: the next host's recovery decides
	}
	h.log.Warn("provider action failed", "type", e.Type, "thread", e.ThreadID, "run", e.RunID, "error", err)
	switch e.Type {
	case domain.EffectStartTurn:
		return &domain.Command{ID: "fail:" + e.RunID + ":" + e.AttemptID, ThreadID: e.ThreadID,
			Payload: domain.FailRun{RunID: e.RunID, Failure: domain.Failure{Code: "start_failed", Message: err.Error()}}}, true
	case domain.EffectSteer:
		return &domain.Command{ID: "steerfail:" + e.ID, ThreadID: e.ThreadID,
			Payload: domain.SteerFailed{RunID: e.RunID, MessageID: e.MessageID, Reason: err.Error()}}, true
	case domain.EffectRespond:
		q := h.requestByRef(e.ThreadID, e.SessionID, e.RequestRef)
		if q == "" {
			return nil, true
		}
		if gone(err) {
			return unreachableCmd(e.ThreadID, q), true
		}
		// The answer did not get through (refused, timed out): the request
		// can be answered again.
		return &domain.Command{ID: "respondfail:" + e.ID, ThreadID: e.ThreadID,
			Payload: domain.RespondFailed{RequestID: q, Reason: err.Error()}}, true
	}
	// An interrupt that did not reach a live provider: if the process is
	// gone, its exit ends the run.
	return nil, true
}

// unreachableCmd marks a request whose provider process is gone. Both
// paths that find it (a client's answer, a failed delivery) send the same
// command, so the second is a duplicate, not a conflict.
func unreachableCmd(threadID, requestID string) *domain.Command {
	return &domain.Command{ID: "unreachable:" + requestID, ThreadID: threadID,
		Payload: domain.MarkRequestUnreachable{RequestID: requestID, Reason: "its provider process is gone"}}
}

// attemptActive says whether an effect's attempt is still its run's active
// one.
func (h *Host) attemptActive(e domain.Effect) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if t, ok := h.threads[e.ThreadID]; ok {
		for _, r := range t.Runs {
			if r.ID == e.RunID {
				return domain.Active(r.Status) && r.ActiveAttempt == e.AttemptID
			}
		}
	}
	return false
}

// gone says whether an error means the provider session cannot be reached.
func gone(err error) bool {
	return errors.Is(err, sdk.ErrNotResumable) || errors.Is(err, sdk.ErrUnknownSession) ||
		errors.Is(err, sdk.ErrProviderExited) || errors.Is(err, sdk.ErrPluginUnavailable)
}

// requestByRef finds a request's app id.
func (h *Host) requestByRef(threadID, sessionID, ref string) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	if t, ok := h.threads[threadID]; ok {
		for _, q := range t.Requests {
			if q.SessionID == sessionID && q.ProviderRef == ref {
				return q.ID
			}
		}
	}
	return ""
}

// liveSessionFor returns the thread's live session; sessionID, when set,
// must be it.
func (h *Host) liveSessionFor(threadID, sessionID string) (*liveSession, error) {
	h.smu.Lock()
	s, ok := h.sessions[threadID]
	h.smu.Unlock()
	if !ok || (sessionID != "" && s.id != sessionID) || s.ended() {
		return nil, fmt.Errorf("session %s is gone: %w", cmp.Or(sessionID, "of thread "+threadID), sdk.ErrNotResumable)
	}
	return s, nil
}

// withSession calls the plugin of the live session an effect is bound to
// (the thread's current one when the effect names none), bounded in time.
func (h *Host) withSession(e domain.Effect, call func(context.Context, *liveSession) error) error {
	s, err := h.liveSessionFor(e.ThreadID, e.SessionID)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(h.ctx, 30*time.Second)
	defer cancel()
	return call(ctx, s)
}

// respond delivers an answer to the provider through the live session
// that asked.
func (h *Host) respond(e domain.Effect) error {
	return h.withSession(e, func(ctx context.Context, s *liveSession) error {
		return s.plugin.RespondToRequest(ctx, sdk.RespondToRequestRequest{SessionID: s.id, RequestRef: e.RequestRef,
			Decision: sdk.Decision(e.Decision), Answers: e.Answers})
	})
}

// steer adds a message to the provider's active turn.
func (h *Host) steer(e domain.Effect) error {
	return h.withSession(e, func(ctx context.Context, s *liveSession) error {
		return s.plugin.SteerTurn(ctx, sdk.SteerTurnRequest{SessionID: s.id, TurnRef: e.TurnRef, Input: sdk.TurnInput{Text: e.Text}})
	})
}

// interrupt asks the provider to stop a turn. Its return is an
// acknowledgement only: the run ends on the provider's terminal event.
// An interrupt decided before the turn started names no session: the
// start went first (effects run in order), so the thread's session now is
// the one.
func (h *Host) interrupt(e domain.Effect) error {
	return h.withSession(e, func(ctx context.Context, s *liveSession) error {
		return s.plugin.InterruptTurn(ctx, sdk.InterruptTurnRequest{SessionID: s.id, TurnRef: e.TurnRef})
	})
}

func (h *Host) startTurn(e domain.Effect) (sessionID string, err error) {
	for try := 0; ; try++ {
		s, err := h.session(e.ThreadID)
		if err != nil {
			return "", err
		}
		ctx, cancel := context.WithTimeout(h.ctx, time.Minute)
		_, err = s.plugin.StartTurn(ctx, sdk.StartTurnRequest{SessionID: s.id, Input: sdk.TurnInput{Text: e.Text}, ClientTurnID: e.AttemptID})
		cancel()
		if err == nil {
			return s.id, nil
		}
		gone := errors.Is(err, sdk.ErrUnknownSession) || errors.Is(err, sdk.ErrProviderExited)
		if !gone || try > 0 {
			return "", fmt.Errorf("start turn with %s: %w", s.plugin.Name, err)
		}
		// The session ended under us (its provider exited after the last
		// run). Once its end is recorded, a new session takes the turn.
		select {
		case <-s.done:
		case <-time.After(sessionCloseTimeout):
			return "", fmt.Errorf("start turn with %s: %w", s.plugin.Name, err)
		}
	}
}

// liveSession is an open provider session and the goroutine that ingests
// its events.
type liveSession struct {
	id       string
	threadID string
	plugin   *pluginhost.Plugin
	done     chan struct{} // closed when its event stream has ended
}

func (s *liveSession) ended() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// sessionCloseTimeout bounds how long Close waits for a session's last
// events.
const sessionCloseTimeout = 15 * time.Second

func (s *liveSession) close(log hclog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), sessionCloseTimeout)
	defer cancel()
	if err := s.plugin.CloseSession(ctx, s.id); err != nil && !errors.Is(err, sdk.ErrUnknownSession) {
		log.Debug("close session", "session", s.id, "error", err)
	}
	select {
	case <-s.done:
	case <-ctx.Done():
		log.Warn("session did not end in time", "session", s.id)
	}
}

// session returns the thread's open session, opening one if needed. A new
// session resumes the thread's provider conversation when the plugin can.
func (h *Host) session(threadID string) (*liveSession, error) {
	h.smu.Lock()
	if h.closing {
		h.smu.Unlock()
		return nil, ErrClosed
	}
	if s, ok := h.sessions[threadID]; ok && !s.ended() {
		h.smu.Unlock()
		return s, nil
	}
	h.smu.Unlock()

	t, err := h.Thread(threadID)
	if err != nil {
		return nil, err
	}
	p, err := h.plugins.Get(h.ctx, t.Provider)
	if err != nil {
		return nil, err
	}
	var resume string
	if p.Description.Capabilities.Resume {
		for _, pt := range t.ProviderThreads {
			if pt.ParentID == "" {
				resume = pt.ProviderRef // the latest root conversation…
				if pt.Detached {
					resume = "" // …unless a rollback left it: then a fresh one
				}
			}
		}
	}
	id := h.cfg.IDs.NewID("ses")
	ctx, cancel := context.WithTimeout(h.ctx, 2*time.Minute)
	defer cancel()
	resp, err := p.OpenSession(ctx, sdk.OpenSessionRequest{SessionID: id, Cwd: t.Cwd, Model: t.Model,
		Command:         sdk.ProviderCommand{Argv: t.ProviderCommand.Argv, Env: t.ProviderCommand.Env},
		ResumeThreadRef: resume, RawFrameLog: filepath.Join(h.cfg.DataDir, "rawframes", id+".ndjson")})
	if err != nil {
		return nil, fmt.Errorf("open %s session: %w", t.Provider, err)
	}
	s := &liveSession{id: id, threadID: threadID, plugin: p, done: make(chan struct{})}
	if _, err := h.Dispatch(h.ctx, domain.Command{ID: "open:" + id, ThreadID: threadID, Payload: domain.RecordSessionOpened{
		SessionID: id, ProviderRef: resp.ProviderSessionRef, ThreadRef: resp.ProviderThreadRef,
		PluginPid: p.Pid(), ProviderPid: resp.ProviderPid, ResumeRequested: resume, Resumed: resp.Resumed}}); err != nil {
		_ = p.CloseSession(context.Background(), id)
		return nil, err
	}
	h.smu.Lock()
	if h.closing {
		// Close began while this session opened: it has not seen it.
		h.smu.Unlock()
		_ = p.CloseSession(context.Background(), id)
		return nil, ErrClosed
	}
	h.sessions[threadID] = s
	h.smu.Unlock()
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		h.pump(s)
	}()
	return s, nil
}

// pump ingests a session's events until its stream ends. A stream that
// breaks while the plugin lives is reopened after the last event ingested
// (the plugin buffers them); if the plugin is gone, the session ends with
// that reason.
func (h *Host) pump(s *liveSession) {
	defer close(s.done)
	// The stream is read with a context of its own: at Close the host
	// still wants the session's last events (its runtime exit). Close
	// kills the plugins last, which ends any stream still open.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var last uint64
	for attempt := 0; ; attempt++ {
		// A reader goroutine fills evc; the loop below ingests what has
		// arrived in batches, one synced write each: when events come
		// faster than the disk syncs (content deltas), they share writes;
		// one at a time, each goes alone, with no wait added.
		evc := make(chan sdk.RuntimeEvent, 64)
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
			h.ingestBatch(s, batch)
			last = batch[len(batch)-1].Sequence
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
		select {
		case <-s.plugin.Exited():
		case <-time.After(time.Duration(attempt+1) * 100 * time.Millisecond):
			if attempt < 5 && !errors.Is(streamErr, sdk.ErrUnknownSession) {
				h.log.Warn("session event stream broke; reopening", "session", s.id, "after", last, "error", streamErr)
				continue
			}
		}
		h.ingest(s, domain.ProviderEvent{Kind: domain.EvRuntimeExited, Status: "failed",
			Failure: &domain.Failure{Code: "plugin_exited", Message: fmt.Sprintf("the %s plugin went away: %v", s.plugin.Name, streamErr)}},
			"pexit:"+s.id)
		return
	}
}

// maxIngestBatch bounds how many provider events share one write.
const maxIngestBatch = 256

// ingestBatch decides a session's events, in order. Storage errors are
// retried: a lost terminal event would leave its run running.
func (h *Host) ingestBatch(s *liveSession, evs []sdk.RuntimeEvent) {
	pevs := make([]domain.ProviderEvent, len(evs))
	for i, ev := range evs {
		pevs[i] = toDomain(ev)
	}
	id := fmt.Sprintf("pev:%s:%d", s.id, evs[0].Sequence)
	if len(evs) > 1 {
		id += fmt.Sprintf("-%d", evs[len(evs)-1].Sequence)
	}
	h.ingestRetrying(s, id, pevs)
}

// ingest decides one provider event the host made itself.
func (h *Host) ingest(s *liveSession, ev domain.ProviderEvent, cmdID string) {
	h.ingestRetrying(s, cmdID, []domain.ProviderEvent{ev})
}

func (h *Host) ingestRetrying(s *liveSession, cmdID string, evs []domain.ProviderEvent) {
	err := h.retry("ingest provider events", func() error { return h.ingestEvents(s.threadID, s.id, cmdID, evs) },
		"thread", s.threadID, "session", s.id)
	if err != nil && !errors.Is(err, ErrClosed) {
		h.log.Error("ingest provider events failed; they are lost", "thread", s.threadID, "session", s.id, "events", len(evs), "error", err)
	}
}

// retry calls f until it succeeds, up to 5 times with a growing pause, and
// returns its last error. An error that trying again cannot mend (the host
// closed, the command refused) ends it at once.
func (h *Host) retry(what string, f func() error, args ...any) error {
	for try := 1; ; try++ {
		err := f()
		if err == nil || try == 5 || errors.Is(err, ErrClosed) || errors.Is(err, domain.ErrInvalid) || errors.Is(err, domain.ErrNotFound) {
			return err
		}
		h.log.Warn(what+"; retrying", append(args, "error", err)...)
		time.Sleep(time.Duration(try) * 50 * time.Millisecond)
	}
}

func toDomain(ev sdk.RuntimeEvent) domain.ProviderEvent {
	pe := domain.ProviderEvent{Sequence: ev.Sequence, Kind: string(ev.Kind), ClientTurnID: ev.ClientTurnID, RawFrame: ev.RawFrame, ThreadRef: ev.ThreadRef,
		ParentThreadRef: ev.ParentThreadRef, TurnRef: ev.TurnRef, ItemRef: ev.ItemRef, ItemKind: string(ev.ItemKind),
		Title: ev.Title, Text: ev.Text, Status: ev.Status, RequestRef: ev.RequestRef, RequestKind: ev.RequestKind,
		ThreadUsable: ev.ThreadUsable, Detail: ev.Detail}
	for _, o := range ev.Options {
		pe.Options = append(pe.Options, domain.RequestOption{ID: o.ID, Label: o.Label, Kind: o.Kind})
	}
	if u := ev.Usage; u != nil {
		pe.Usage = &domain.Usage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, CachedInputTokens: u.CachedInputTokens,
			ReasoningTokens: u.ReasoningTokens, TotalTokens: u.TotalTokens}
	}
	if f := ev.Failure; f != nil {
		pe.Failure = &domain.Failure{Code: f.Code, Message: f.Message}
	}
	if l := ev.RateLimit; l != nil {
		pe.RateLimit = &domain.RateLimit{Scope: l.Scope, UsedPercent: l.UsedPercent, ResetsAt: l.ResetsAt}
	}
	return pe
}
