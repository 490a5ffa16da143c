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

// startTurn sends a run's attempt to the session the domain chose for it:
// one plugin call. A session that had ended meanwhile (its provider
// exited after the last run) is waited for until its end is recorded,
// and the error says so: the domain starts the turn again in a new
// session (domain.RestartTurn).
func (h *Host) startTurn(e domain.StartTurn) error {
	s, err := h.liveSessionFor(e.ThreadID, e.SessionID)
	if err != nil {
		return err
	}
	s.touch(h.cfg.Clock.Now())
	// Read once the session is open: a resume that failed replaced the
	// handoff the turn carries. (The published view, read only: a turn's
	// cost does not grow with the thread's history.)
	t, err := h.view(e.ThreadID)
	if err != nil {
		return err
	}
	text := t.TurnText(e.RunID, e.AttemptID, e.Text)
	err = h.callPlugin(h.ctx, s.plugin, "StartTurn", h.cfg.PluginCallTimeout, func(ctx context.Context) error {
		_, err := s.plugin.StartTurn(ctx, sdk.StartTurnRequest{SessionID: s.id, Input: sdk.TurnInput{Text: text}, ClientTurnID: e.AttemptID})
		return err
	})
	if err == nil {
		return nil
	}
	if errors.Is(err, sdk.ErrPluginUnavailable) {
		// The plugin crashed, or was killed: once its session's end is
		// recorded, its process is gone, and its stderr says why.
		if werr := h.awaitEnd(s); werr != nil {
			h.log.Warn("the end of a session whose plugin went away", "session", s.id, "error", werr)
		}
		return pluginGoneError(s.plugin, err)
	}
	if errors.Is(err, sdk.ErrUnknownSession) || errors.Is(err, sdk.ErrProviderExited) {
		// The session ended under us: its end is recorded before the
		// outcome, so that the turn's next session follows it.
		if werr := h.awaitEnd(s); werr != nil {
			return fmt.Errorf("%w (%w)", providerErr(s.plugin.Name, err), werr)
		}
	}
	return providerErr(s.plugin.Name, err)
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
	// provider, model and command are what it runs, with the MCP
	// servers mcp.
	provider, model string
	command         domain.ProviderCommand
	mcp             []domain.MCPServerRef
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

// retireSession closes a session the domain retired, and waits for its
// last events.
func (h *Host) retireSession(e domain.RetireSession) {
	h.smu.Lock()
	s, ok := h.sessions[e.ThreadID]
	h.smu.Unlock()
	if ok && s.id == e.SessionID && !s.ended() {
		s.close(h.cfg.Clock, h.log)
	}
}

// openSession opens the session the domain chose, resuming the
// conversation it names where the plugin can resume one, and starts
// ingesting its events: what the plugin said of it is the result.
func (h *Host) openSession(e domain.OpenSession) (domain.RecordSessionOpened, error) {
	var opened domain.RecordSessionOpened
	h.smu.Lock()
	closing := h.closing
	h.smu.Unlock()
	if closing {
		return opened, ErrClosed
	}
	t, err := h.view(e.ThreadID) // read only
	if err != nil {
		return opened, err
	}
	if gone := worktreeGone(t); gone != "" {
		return opened, errors.New(gone)
	}
	if err := checkCwd(t.Cwd); err != nil {
		return opened, fmt.Errorf("the thread's working directory %w; restore it to go on with this thread, or start a new thread", err)
	}
	p, err := h.plugins.Get(h.ctx, e.Provider)
	if err != nil {
		return opened, err
	}
	servers, refs, err := h.mcpServers(e, p.Description)
	if err != nil {
		return opened, err
	}
	id := e.SessionID
	req := sdk.OpenSessionRequest{SessionID: id, Cwd: t.Cwd, Model: e.Model, RawFrameLog: h.frames.path(id),
		Command:         domain.CommandToSDK(e.Command),
		ResumeThreadRef: e.ResumeRef(p.Description.Capabilities.Resume), MCPServers: servers}
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
		return opened, err // says which plugin, and why it is gone
	}
	if err != nil {
		return opened, providerErr(e.Provider, err) // the plugin says what failed
	}
	s := &liveSession{id: id, threadID: e.ThreadID, provider: e.Provider, model: e.Model, command: e.Command, mcp: e.MCP,
		plugin: p, done: make(chan struct{})}
	s.ctx, s.cancel = context.WithCancel(h.ctx)
	s.touch(h.cfg.Clock.Now())
	h.smu.Lock()
	if h.closing {
		// Close began while this session opened: it has not seen it.
		h.smu.Unlock()
		s.cancel()
		h.closeUnused(p, id)
		return opened, ErrClosed
	}
	h.sessions[e.ThreadID] = s
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
	return domain.RecordSessionOpened{ProviderRef: resp.ProviderSessionRef, ThreadRef: resp.ProviderThreadRef,
		PluginPid: p.Pid(), ProviderPid: resp.ProviderPid, Resumed: resp.Resumed && req.ResumeThreadRef != "", MCP: refs}, nil
}

// closeUnused closes a session that opened but will not be used (its
// opening could not be recorded, or the host began to close), within
// sessionCloseTimeout, whatever the host's state.
func (h *Host) closeUnused(p *pluginhost.Plugin, sessionID string) {
	_ = h.callPlugin(context.Background(), p, "CloseSession", sessionCloseTimeout, func(ctx context.Context) error {
		return p.CloseSession(ctx, sessionID)
	})
}
