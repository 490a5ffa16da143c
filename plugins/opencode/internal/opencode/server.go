package opencode

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/baton-run/baton/sdk"
	"github.com/baton-run/baton/sdk/clock"
	"github.com/baton-run/baton/sdk/lineproc"
	"github.com/baton-run/baton/sdk/providerproc"
	"github.com/baton-run/baton/sdk/sessions"
)

// startTimeout bounds opencode's start: printing its address, the event
// stream, and creating (or finding) the session. A cold start takes a few
// seconds (1.18.33 loads its provider plugins first).
const startTimeout = 60 * time.Second

// streamAfterExit bounds the wait for the event stream's end once the
// server exited.
const streamAfterExit = 5 * time.Second

// session is one opencode server and its root session.
type session struct {
	model  string
	log    hclog.Logger
	clock  clock.Clock
	life   *sessions.Lifecycle
	emit   sdk.Emitter // the session's life: nothing after runtime_exited
	proc   *lineproc.Process
	base   string // the server's URL
	client *http.Client
	ctx    context.Context // ends when opencode exits

	lastResp  atomic.Uint64 // raw-frame index of the latest response
	streaming atomic.Bool   // the event stream's reader was started

	pending sessions.Requests[*pendingRequest]

	mu     sync.Mutex
	norm   *normalizer   // its root is the session's own opencode session
	events chan struct{} // closed when the event stream's reader ends
	// endStream ends the event stream's request: not ctx, which ends as
	// opencode exits, when what it sent last may still be on its way
	// (watch reads the stream to its end first, or streamAfterExit).
	endStream context.CancelFunc
}

// listening finds the server's address in a stdout line: on 127.0.0.1,
// where the plugin asked it to listen (and the only network target).
var listening = regexp.MustCompile(`http://127\.0\.0\.1:[0-9]+`)

// ResumeSession implements sdk.Resumer: OpenSession continues
// req.ResumeThreadRef when it is set.
func (a *Adapter) ResumeSession(ctx context.Context, req sdk.OpenSessionRequest, emit sdk.Emitter) (sdk.OpenSessionResponse, error) {
	return a.OpenSession(ctx, req, emit)
}

// OpenSession implements sdk.Adapter: start the server, open its event
// stream, and create (or find) the session.
func (a *Adapter) OpenSession(ctx context.Context, req sdk.OpenSessionRequest, emit sdk.Emitter) (sdk.OpenSessionResponse, error) {
	if !filepath.IsAbs(req.Cwd) {
		return sdk.OpenSessionResponse{}, sdk.Errorf(sdk.ErrInvalid, "open session: cwd %q is not absolute", req.Cwd)
	}
	if len(req.Command.Argv) == 0 {
		return sdk.OpenSessionResponse{}, sdk.Errorf(sdk.ErrInvalid, "open session: no provider command")
	}
	perm, err := permissionPolicy(req.RuntimePolicy)
	if err != nil {
		return sdk.OpenSessionResponse{}, fmt.Errorf("open session: %w", err)
	}
	if err := sdk.CheckMCPServers("opencode", mcpTransports, req.MCPServers); err != nil {
		return sdk.OpenSessionResponse{}, sdk.Errorf(sdk.ErrInvalid, "open session: %v", err)
	}
	cfgEnv, err := configEnv(req.Command.Env, perm, req.MCPServers)
	if err != nil {
		return sdk.OpenSessionResponse{}, fmt.Errorf("open session: %w", err)
	}
	// opencode takes --port 0 as its default port, not as any free port.
	port, err := providerproc.FreePort()
	if err != nil {
		return sdk.OpenSessionResponse{}, fmt.Errorf("open session: %w", err)
	}
	cmd := sdk.ProviderCommand{
		Argv: append(slices.Clone(req.Command.Argv), "serve", "--hostname", "127.0.0.1", "--port", strconv.Itoa(port)),
		Env:  append(slices.Clone(req.Command.Env), cfgEnv),
	}
	cwd := filepath.Clean(req.Cwd)
	life := sessions.NewLifecycle(emit)
	s := &session{model: req.Model, log: a.log.With("session", req.SessionID), clock: a.clock, life: life, emit: life, ctx: life.Context(),
		client: &http.Client{Transport: &http.Transport{Proxy: nil, DisableCompression: true}}, norm: newNormalizer("", cwd),
		events: make(chan struct{})}
	s.norm.clock = a.clock
	for _, m := range req.MCPServers {
		s.norm.mcpServers = append(s.norm.mcpServers, m.Name)
	}
	// The stream's reader is started once the stream is open; until then
	// nothing reads it.
	// The MCP servers' secrets are in opencode's environment only: the
	// raw-frame log (what opencode prints, and the requests and answers
	// http.go appends to it) shows *** in their place.
	proc, err := lineproc.Start(lineproc.Config{Name: "opencode", Command: cmd, Dir: cwd, RawFrameLog: req.RawFrameLog,
		Redact: sdk.MCPSecrets(req.MCPServers), Log: s.log, Stdin: true, Clock: s.clock, OnLineTooLong: lineproc.TooLongDiagnostic(s.emit)})
	if err != nil {
		return sdk.OpenSessionResponse{}, err // it names the command; the host says it opened a session
	}
	s.proc = proc
	addr := make(chan string, 1)
	stdoutDone := make(chan struct{})
	go s.readStdout(addr, stdoutDone)
	go s.watch(stdoutDone)

	resp, err := s.start(ctx, req, addr, stdoutDone)
	if err != nil {
		if ue := (*url.Error)(nil); errors.As(err, &ue) {
			// No answer, from a server on its way out: its exit says why.
			// (One that answers, even what it should not, lives on.)
			err = s.proc.Failed(err, "while the session opened")
		}
		_ = s.close(context.Background())
		return sdk.OpenSessionResponse{}, err
	}
	a.sessions.Add(req.SessionID, s, life.Done())
	return resp, nil
}

// readStdout reads opencode's stdout to its end; the first address it
// prints is the server's.
func (s *session) readStdout(addr chan<- string, done chan<- struct{}) {
	defer close(done)
	found := false
	for {
		// (An over-long line is a diagnostic, and skipped: OnLineTooLong.)
		line, _, err := s.proc.Next()
		if err != nil {
			return
		}
		if u := listening.Find(line); u != nil && !found && bytes.Contains(line, []byte("listening")) {
			found = true
			// What it printed before is a banner: an exit report quotes
			// what it prints from now on.
			s.proc.WasFrame()
			addr <- string(u)
			continue
		}
		s.proc.NotFrame(line) // its stdout is a log: JSON there is no frame either

	}
}

func (s *session) start(ctx context.Context, req sdk.OpenSessionRequest, addr <-chan string, stdoutDone <-chan struct{}) (sdk.OpenSessionResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	select {
	case s.base = <-addr:
	case <-s.proc.Done():
		<-stdoutDone // what it printed is read (at most lineproc.DrainTimeout later)
		return sdk.OpenSessionResponse{}, sdk.Kindf(sdk.ErrProviderExited, "%s", s.proc.ExitReport("before it said where it listens"))
	case <-ctx.Done():
		return sdk.OpenSessionResponse{}, fmt.Errorf("opencode said nowhere where it listens: %w", ctx.Err())
	}
	var h health
	if _, err := s.call(ctx, http.MethodGet, "/global/health", nil, &h); err != nil {
		return sdk.OpenSessionResponse{}, err
	}
	if !h.Healthy {
		return sdk.OpenSessionResponse{}, errors.New("opencode says it is not healthy")
	}
	if err := s.openEvents(ctx); err != nil {
		return sdk.OpenSessionResponse{}, err
	}
	var info sessionInfo
	resumed := false
	if req.ResumeThreadRef != "" {
		status, err := s.call(ctx, http.MethodGet, "/session/"+url.PathEscape(req.ResumeThreadRef), nil, &info)
		switch {
		case err == nil:
			resumed = true
		case status == http.StatusNotFound:
			// Another data directory, or a deleted session: a fresh one,
			// and the host is told so.
			s.log.Info("opencode has no such session; starting a new one", "session", req.ResumeThreadRef)
			s.emit.Emit(sdk.RuntimeEvent{Kind: sdk.EventDiagnostic, RawFrame: s.lastResp.Load(),
				Title: "opencode could not resume session " + req.ResumeThreadRef,
				Text:  err.Error()})
		default:
			return sdk.OpenSessionResponse{}, err
		}
	}
	if !resumed {
		if _, err := s.call(ctx, http.MethodPost, "/session", map[string]any{}, &info); err != nil {
			return sdk.OpenSessionResponse{}, err
		}
	}
	if info.ID == "" {
		return sdk.OpenSessionResponse{}, errors.New("opencode returned a session without an id")
	}
	s.mu.Lock()
	s.norm.setRoot(info.ID)
	s.mu.Unlock()
	detail, _ := json.Marshal(map[string]string{"opencodeVersion": h.Version, "title": info.Title})
	s.emit.Emit(sdk.RuntimeEvent{Kind: sdk.EventThreadStarted, RawFrame: s.lastResp.Load(), ThreadRef: info.ID, Title: info.Title,
		Detail: detail})
	return sdk.OpenSessionResponse{ProviderSessionRef: info.ID, ProviderThreadRef: info.ID, ProviderPid: s.proc.Pid(),
		Resumed: resumed}, nil
}

// watch waits for opencode to exit and reports it: the event stream is
// read to its end, requests still pending are cancelled (opencode can no
// longer be answered), turns still running fail, and runtime_exited comes
// last.
func (s *session) watch(stdoutDone <-chan struct{}) {
	<-s.proc.Done()
	// At most lineproc.DrainTimeout later, even when a process opencode
	// started (a language server, a command left in the background)
	// keeps its stdout open.
	<-stdoutDone
	s.life.Exit(errors.New("opencode exited"), func(closed bool) ([]sdk.RuntimeEvent, sdk.RuntimeEvent) {
		if s.streaming.Load() {
			// The stream ends with the server: what it sent before it
			// exited is read first.
			t := s.clock.NewTimer(streamAfterExit)
			select {
			case <-s.events:
			case <-t.C():
			}
			t.Stop()
		}
		s.mu.Lock()
		if s.endStream != nil {
			s.endStream()
		}
		s.mu.Unlock()
		var evs []sdk.RuntimeEvent
		for _, q := range s.pending.TakeAll() {
			evs = append(evs, sdk.RuntimeEvent{Kind: sdk.EventRequestResolved, ThreadRef: q.thread, TurnRef: q.turn,
				RequestRef: q.ref, RequestKind: q.kind, Status: sdk.DecisionCancel})
		}
		report := "opencode exited"
		if !closed {
			report = s.proc.ExitReport("during the turn")
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		// A closed session's server ended by our SIGTERM (close): lineproc
		// takes that as the way it was stopped.
		return append(evs, s.norm.exited(report)...), s.proc.ExitEvent(s.norm.root, closed)
	})
}

// close ends the session: opencode does not exit when its stdin closes, so
// it gets SIGTERM at once; lineproc stops what is left. The session's
// context ends with the exit, not before: the event stream, under it,
// brings what opencode says while it stops.
func (s *session) close(ctx context.Context) error {
	return s.life.Close(ctx, nil, func() {
		_ = s.proc.Signal(syscall.SIGTERM)
		_ = s.proc.Close(context.WithoutCancel(ctx)) // a forced close stays forced
	})
}
