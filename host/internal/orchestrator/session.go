package orchestrator

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/baton-run/baton/host/internal/domain"
	"github.com/baton-run/baton/host/internal/pluginhost"
	"github.com/baton-run/baton/sdk"
	"github.com/baton-run/baton/sdk/clock"
)

// Provider sessions: a thread's open session with its plugin, opened when
// a turn needs one (resuming the provider's own conversation where it
// can), and the pump that ingests its events.

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

// sessionLive says whether a session's plugin and stream are still there.
func (h *Host) sessionLive(threadID, sessionID string) bool {
	s, err := h.liveSessionFor(threadID, sessionID)
	if err != nil {
		return false
	}
	select {
	case <-s.plugin.Exited():
		return false
	default:
		return true
	}
}

func (h *Host) startTurn(e domain.StartTurn) (sessionID string, err error) {
	for try := 0; ; try++ {
		s, err := h.session(e.ThreadID, e.Provider, e.Model)
		if err != nil {
			return "", err
		}
		// Read once the session is open: a resume that failed replaced the
		// handoff the turn carries. (The published view, read only: a
		// turn's cost does not grow with the thread's history.)
		t, err := h.view(e.ThreadID)
		if err != nil {
			return "", err
		}
		text := t.TurnText(e.RunID, e.AttemptID, e.Text)
		err = h.callPlugin(h.ctx, s.plugin, "StartTurn", h.cfg.PluginCallTimeout, func(ctx context.Context) error {
			_, err := s.plugin.StartTurn(ctx, sdk.StartTurnRequest{SessionID: s.id, Input: sdk.TurnInput{Text: text}, ClientTurnID: e.AttemptID})
			return err
		})
		if err == nil {
			return s.id, nil
		}
		if errors.Is(err, sdk.ErrPluginUnavailable) {
			// The plugin crashed, or was killed: once its session's end is
			// recorded, its process is gone, and its stderr says why.
			if werr := h.awaitEnd(s); werr != nil {
				h.log.Warn("the end of a session whose plugin went away", "session", s.id, "error", werr)
			}
			return "", pluginGoneError(s.plugin, err)
		}
		gone := errors.Is(err, sdk.ErrUnknownSession) || errors.Is(err, sdk.ErrProviderExited)
		if !gone || try > 0 {
			return "", providerErr(s.plugin.Name, err)
		}
		// The session ended under us (its provider exited after the last
		// run). Once its end is recorded, a new session takes the turn.
		if werr := h.awaitEnd(s); werr != nil {
			return "", fmt.Errorf("%w (%w)", providerErr(s.plugin.Name, err), werr)
		}
	}
}

// providerErr is a plugin's error, which says what failed, said of its
// provider: "acp: the agent exited …", but "claude exited …" as it is.
func providerErr(provider string, err error) error {
	if strings.HasPrefix(err.Error(), provider+" ") {
		return err
	}
	return fmt.Errorf("%s: %w", provider, err)
}

// liveSession is an open provider session and the goroutine that ingests
// its events.
type liveSession struct {
	id       string
	threadID string
	// provider, model and command are what it runs.
	provider, model string
	command         domain.ProviderCommand
	plugin          *pluginhost.Plugin
	done            chan struct{} // closed when its event stream has ended
	// ctx ends with done: the calls into the session that are still in
	// flight then (an interrupt a hung plugin never answered, when the
	// session was ended by force) are given up, so that what waits behind
	// them in the thread's effects goes on.
	ctx    context.Context
	cancel context.CancelFunc
	used   atomic.Int64 // when it was last used, on the host's clock (Unix ns)
}

// touch says the session is used now: its idle time starts again.
func (s *liveSession) touch(now time.Time) { s.used.Store(now.UnixNano()) }

// lastUsed is when the session was last used.
func (s *liveSession) lastUsed() time.Time { return time.Unix(0, s.used.Load()) }

func (s *liveSession) ended() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// sessionCloseTimeout bounds how long Close waits for a session's last
// events, and how long a turn waits for the end of a session whose provider
// exited.
const sessionCloseTimeout = 15 * time.Second

// errSessionEndTimeout says a session's end did not come in time.
var errSessionEndTimeout = errors.New("the session did not end in time")

// awaitEnd waits, on the host's clock, until the session's end is recorded;
// it gives up after sessionCloseTimeout, or when Close begins.
func (h *Host) awaitEnd(s *liveSession) error {
	t := h.cfg.Clock.NewTimer(sessionCloseTimeout)
	defer t.Stop()
	select {
	case <-s.done:
		return nil
	case <-t.C():
		return errSessionEndTimeout
	case <-h.stopping.Done():
		return ErrClosed
	}
}

// close ends the session and waits for its last events, for at most
// sessionCloseTimeout on clk.
func (s *liveSession) close(clk clock.Clock, log hclog.Logger) {
	ctx, cancel := clock.WithTimeout(context.Background(), clk, sessionCloseTimeout, errSessionEndTimeout)
	defer cancel()
	err := s.plugin.CloseSession(ctx, s.id)
	if err != nil && errors.Is(context.Cause(ctx), errSessionEndTimeout) {
		// The plugin did not answer: it is killed, which ends the session
		// (its pump records why). Not waited for here: a plugin that does
		// not shut down when asked takes a kill grace to go, and the
		// host's Close waits for it when it stops the plugins.
		log.Error("plugin did not answer; killing it", "plugin", s.plugin.Name, "call", "CloseSession", "timeout", sessionCloseTimeout)
		go killPlugin(s.plugin, "CloseSession", sessionCloseTimeout) // ends once the plugin is gone
	} else if err != nil && !errors.Is(err, sdk.ErrUnknownSession) {
		log.Debug("close session", "session", s.id, "error", err)
	}
	select {
	case <-s.done:
	case <-ctx.Done():
		log.Warn("session did not end in time", "session", s.id)
	}
}

// session returns the session that takes a turn on provider and model (""
// provider: the thread's own), as the domain chooses it
// (domain.Thread.ChooseSession): the thread's open session, or a new one,
// the open one retired first, resuming the conversation the domain names
// where the plugin can resume one.
func (h *Host) session(threadID, provider, model string) (*liveSession, error) {
	h.smu.Lock()
	closing := h.closing
	h.smu.Unlock()
	if closing {
		return nil, ErrClosed
	}
	t, err := h.view(threadID) // read only
	if err != nil {
		return nil, err
	}
	h.smu.Lock()
	s, ok := h.sessions[threadID]
	h.smu.Unlock()
	var live *domain.LiveSession
	if ok && !s.ended() {
		live = &domain.LiveSession{ID: s.id, Provider: s.provider, Model: s.model, Command: s.command}
	}
	choice := t.ChooseSession(live, provider, model)
	if choice.Reuse {
		s.touch(h.cfg.Clock.Now())
		return s, nil
	}
	if choice.Retire != "" {
		if _, err := h.Dispatch(h.ctx, domain.Observed(threadID,
			domain.RetireSession{SessionID: s.id, Reason: choice.Retire})); err != nil {
			return nil, err
		}
		s.close(h.cfg.Clock, h.log)
	}
	provider, model = choice.Provider, choice.Model
	if err := checkCwd(t.Cwd); err != nil {
		return nil, fmt.Errorf("the thread's working directory %w; restore it to go on with this thread, or start a new thread", err)
	}
	p, err := h.plugins.Get(h.ctx, provider)
	if err != nil {
		return nil, err
	}
	req := sdk.OpenSessionRequest{SessionID: h.cfg.IDs.NewID("ses"), Cwd: t.Cwd, Model: model,
		Command:         domain.CommandToSDK(choice.Command),
		ResumeThreadRef: choice.ResumeRef(p.Description.Capabilities.Resume)}
	req.RawFrameLog = h.frames.path(req.SessionID)
	id := req.SessionID
	h.frames.open(id) // until the session's stream ends (pump), or it did not open
	pumped := false
	defer func() {
		if !pumped {
			h.frames.done(id)
		}
	}()
	var resp sdk.OpenSessionResponse
	err = h.callPlugin(h.ctx, p, "OpenSession", 2*h.cfg.PluginCallTimeout, func(ctx context.Context) error {
		resp, err = p.OpenSession(ctx, req)
		return err
	})
	if errors.Is(err, errPluginKilled) {
		return nil, err // says which plugin, and why it is gone
	}
	if err != nil {
		return nil, providerErr(provider, err) // the plugin says what failed
	}
	s = &liveSession{id: id, threadID: threadID, provider: provider, model: model, command: choice.Command, plugin: p,
		done: make(chan struct{})}
	s.ctx, s.cancel = context.WithCancel(h.ctx)
	s.touch(h.cfg.Clock.Now())
	if _, err := h.Dispatch(h.ctx, domain.Observed(threadID, domain.RecordSessionOpened{
		SessionID: id, Provider: provider, Model: model, ProviderRef: resp.ProviderSessionRef, ThreadRef: resp.ProviderThreadRef,
		PluginPid: p.Pid(), ProviderPid: resp.ProviderPid, ResumeRequested: choice.Resume,
		Resumed: resp.Resumed && req.ResumeThreadRef != ""})); err != nil {
		s.cancel()
		h.closeUnused(p, id)
		return nil, err
	}
	h.smu.Lock()
	if h.closing {
		// Close began while this session opened: it has not seen it.
		h.smu.Unlock()
		s.cancel()
		h.closeUnused(p, id)
		return nil, ErrClosed
	}
	h.sessions[threadID] = s
	h.smu.Unlock()
	pumped = true
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		defer h.frames.done(id)
		h.pump(s)
	}()
	if h.cfg.IdleTimeout > 0 {
		h.wg.Go(func() { h.reapWhenIdle(s) })
	}
	return s, nil
}

// closeUnused closes a session that opened but will not be used (its
// opening could not be recorded, or the host began to close), within
// sessionCloseTimeout, whatever the host's state.
func (h *Host) closeUnused(p *pluginhost.Plugin, sessionID string) {
	_ = h.callPlugin(context.Background(), p, "CloseSession", sessionCloseTimeout, func(ctx context.Context) error {
		return p.CloseSession(ctx, sessionID)
	})
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
