package opencode

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/baton-run/baton/sdk"
	"github.com/baton-run/baton/sdk/clock"
	"github.com/baton-run/baton/sdk/framelog"
	"github.com/baton-run/baton/sdk/lineproc"
	"github.com/baton-run/baton/sdk/providerproc"
	"github.com/baton-run/baton/sdk/sessions"
	"github.com/baton-run/baton/sdk/sse"
)

// Version is the plugin's version.
const Version = "0.1.0"

// startTimeout bounds opencode's start: printing its address, the event
// stream, and creating (or finding) the session. A cold start takes a few
// seconds (1.18.33 loads its provider plugins first).
const startTimeout = 60 * time.Second

// streamEndGrace is how long an event stream that ended waits for the
// server's exit before it takes the server for stuck and stops it.
const streamEndGrace = 2 * time.Second

// streamAfterExit bounds the wait for the event stream's end once the
// server exited.
const streamAfterExit = 5 * time.Second

// callTimeout bounds one request; opencode answers prompt_async, abort and
// permission replies at once (the turn goes on in events).
const callTimeout = 30 * time.Second

// permissionPolicy maps the host's runtime policy to opencode's permission
// config. The default asks the host before every command and every edit;
// "allow" lets opencode do both without asking.
func permissionPolicy(runtimePolicy string) (map[string]string, error) {
	switch runtimePolicy {
	case "", "ask":
		return map[string]string{"bash": "ask", "edit": "ask"}, nil
	case "allow":
		return map[string]string{"bash": "allow", "edit": "allow"}, nil
	}
	return nil, sdk.Errorf(sdk.ErrInvalid, "runtime policy %q: want empty or ask (ask the host before commands and edits), or allow", runtimePolicy)
}

// configEnv returns OPENCODE_CONFIG_CONTENT with the permission policy set:
// the value opencode would get otherwise (the command's env, else the
// plugin's own), if any, with "permission" replaced.
func configEnv(env []string, permission map[string]string) (string, error) {
	cfg := map[string]any{}
	for _, kv := range append(os.Environ(), env...) {
		if v, ok := strings.CutPrefix(kv, "OPENCODE_CONFIG_CONTENT="); ok && strings.TrimSpace(v) != "" {
			cfg = map[string]any{}
			if err := json.Unmarshal([]byte(v), &cfg); err != nil {
				return "", sdk.Errorf(sdk.ErrInvalid, "the provider command's OPENCODE_CONFIG_CONTENT is not a JSON object: %v", err)
			}
		}
	}
	cfg["permission"] = permission
	b, _ := json.Marshal(cfg)
	return "OPENCODE_CONFIG_CONTENT=" + string(b), nil
}

// Adapter drives `opencode serve`. opencode keeps its sessions under
// $XDG_DATA_HOME/opencode (and reads its config from $XDG_CONFIG_HOME): the
// plugin leaves those as the provider command's environment has them, so
// that a session can be resumed by a later server; a host isolates
// opencode's state by giving the command its own XDG directories (as the
// recordings do). It implements sdk.Adapter and
// sdk.Rollbacker (the session's native revert). It does not implement
// sdk.Steerer: a prompt sent while a turn runs is queued by opencode and
// answered after the turn's current answer, not taken into it (see
// .notes/opencode-probe.md), so the host restarts the turn instead.
type Adapter struct {
	log      hclog.Logger
	clock    clock.Clock
	sessions sessions.Table[*session]
}

// Option configures an Adapter.
type Option func(*Adapter)

// WithClock sets the clock the adapter's waits read: for the event stream
// after the server's exit, for the server after the stream ended, and
// lineproc's (default: the system clock).
func WithClock(c clock.Clock) Option { return func(a *Adapter) { a.clock = c } }

// New returns an adapter that logs to log.
func New(log hclog.Logger, opts ...Option) *Adapter {
	a := &Adapter{log: log}
	for _, o := range opts {
		o(a)
	}
	a.clock = clock.Or(a.clock)
	return a
}

// Describe implements sdk.Adapter.
func (a *Adapter) Describe() sdk.Description {
	return sdk.Description{
		Name:         "opencode",
		Version:      Version,
		WireProtocol: WireProtocol,
		Capabilities: sdk.Capabilities{Interrupt: true, Approvals: true, Subagents: true, NativeRollback: true, Resume: true},
		Notes: map[string]string{
			sdk.NoteSteering:  "a prompt sent while busy is only queued: answered after the current answer, which it cannot change",
			sdk.NoteInterrupt: "`POST /session/{id}/abort`",
			sdk.NoteApprovals: "`permission.asked` for commands and edits, answered with `POST /permission/{id}/reply`",
			sdk.NoteSubagents: "child sessions (`parentID`) as child threads",
			sdk.NoteRollback:  "`POST /session/{id}/revert` to before the turn's user message",
			sdk.NoteResume:    "the session id, on a restarted server with the same data directory",
		},
	}
}

func (a *Adapter) session(id string) (*session, error) { return a.sessions.Get(id) }

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

// pendingRequest is a permission request waiting for the host's answer.
type pendingRequest struct {
	ref, thread, turn, callID string
	kind                      sdk.RequestKind
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
	cfgEnv, err := configEnv(req.Command.Env, perm)
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
	// The stream's reader is started once the stream is open; until then
	// nothing reads it.
	proc, err := lineproc.Start(lineproc.Config{Name: "opencode", Command: cmd, Dir: cwd, RawFrameLog: req.RawFrameLog,
		Log: s.log, Stdin: true, Clock: s.clock, OnLineTooLong: lineproc.TooLongDiagnostic(s.emit)})
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

// openEvents opens the /event stream and waits for its first event
// (server.connected): from then on, every event of the server reaches the
// session, in order, on one reader.
func (s *session) openEvents(ctx context.Context) error {
	streamCtx, cancel := context.WithCancel(context.Background())
	s.mu.Lock()
	s.endStream = cancel
	s.mu.Unlock()
	req, err := http.NewRequestWithContext(streamCtx, http.MethodGet, s.base+"/event", nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "text/event-stream")
	s.proc.Frames.Append(framelog.Out, requestFrame(http.MethodGet, "/event", nil))
	resp, err := s.client.Do(req)
	if err != nil {
		return fmt.Errorf("GET /event: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		resp.Body.Close()
		return &httpError{method: http.MethodGet, path: "/event", status: resp.StatusCode, body: string(bytes.TrimSpace(b))}
	}
	first := make(chan struct{})
	s.streaming.Store(true)
	go s.readEvents(resp.Body, first)
	select {
	case <-first:
		return nil
	case <-s.events:
		return errors.New("the event stream ended before its first event")
	case <-ctx.Done():
		return fmt.Errorf("no event on the event stream: %w", ctx.Err())
	}
}

// readEvents reads the event stream until it ends, normalizing each event.
func (s *session) readEvents(body io.ReadCloser, first chan<- struct{}) {
	defer close(s.events)
	defer body.Close()
	d := sse.NewDecoder(body)
	once := sync.OnceFunc(func() { close(first) })
	for {
		ev, err := d.Next()
		if errors.Is(err, sse.ErrLineTooLong) {
			// Dropped whole; the events after it still come.
			s.emit.Emit(sdk.RuntimeEvent{Kind: sdk.EventDiagnostic, Title: "malformed event", Text: err.Error()})
			continue
		}
		if err != nil {
			s.streamEnded(err)
			return
		}
		frame := s.proc.Frames.Append(framelog.In, ev.Data)
		once()
		s.handle(ev.Data, frame)
	}
}

// streamEnded handles the end of the event stream. It ends with the server
// (or the session); a stream that ends while the server goes on would leave
// turns without their end, so the server is stopped, and its exit ends
// them as failed.
func (s *session) streamEnded(err error) {
	if s.ctx.Err() != nil {
		return
	}
	t := s.clock.NewTimer(streamEndGrace)
	defer t.Stop()
	select {
	case <-s.proc.Done(): // the server ended: watch reports it
		return
	case <-s.ctx.Done():
		return
	case <-t.C():
	}
	if s.life.Closed() {
		return
	}
	s.log.Warn("the event stream ended while opencode runs; stopping it", "error", err)
	s.emit.Emit(sdk.RuntimeEvent{Kind: sdk.EventDiagnostic, Title: "opencode's event stream ended while it runs; stopping it",
		Text: fmt.Sprint(err)})
	_ = s.proc.Signal(syscall.SIGTERM)
}

// handle normalizes one event and emits what it says.
func (s *session) handle(data []byte, frame uint64) {
	e, err := decodeEvent(data)
	if err != nil {
		s.emit.Emit(sdk.RuntimeEvent{Kind: sdk.EventDiagnostic, RawFrame: frame, Title: "malformed event", Text: err.Error()})
		return
	}
	var evs []sdk.RuntimeEvent
	s.mu.Lock()
	switch e.Type {
	case "permission.asked":
		var p permissionAsked
		if err := json.Unmarshal(e.Properties, &p); err != nil {
			evs = []sdk.RuntimeEvent{{Kind: sdk.EventDiagnostic, Title: "malformed event", Text: "permission.asked: " + err.Error()}}
			break
		}
		if ev, ok := s.norm.permissionAsked(p, e.Properties); ok {
			q := &pendingRequest{ref: p.ID, thread: ev.ThreadRef, turn: ev.TurnRef, kind: ev.RequestKind}
			if p.Tool != nil {
				q.callID = p.Tool.CallID
			}
			s.pending.Open(p.ID, q)
			evs = []sdk.RuntimeEvent{ev}
		}
	case "permission.replied":
		var p permissionReplied
		if json.Unmarshal(e.Properties, &p) == nil {
			if q, ok := s.pending.Take(p.RequestID); ok {
				// Answered without the host: opencode withdrew it (an
				// abort rejects what is pending).
				if p.Reply == "reject" {
					s.norm.rejectedCall(q.callID)
				}
				evs = []sdk.RuntimeEvent{{Kind: sdk.EventRequestResolved, ThreadRef: q.thread, TurnRef: q.turn, RequestRef: p.RequestID,
					RequestKind: q.kind, Status: sdk.DecisionCancel, Text: "opencode resolved the request itself (" + p.Reply + ")"}}
			}
		}
	default:
		evs = s.norm.event(e)
	}
	abort := s.norm.takeAbort()
	s.mu.Unlock()
	if abort != "" {
		go s.abortLate(abort)
	}
	for _, ev := range evs {
		ev.RawFrame = frame
		s.emit.Emit(ev)
	}
}

// abortLate aborts a session whose turn the client interrupted before it
// started. It runs on its own: the event stream goes on meanwhile.
func (s *session) abortLate(session string) {
	ctx, cancel := context.WithTimeout(s.ctx, callTimeout)
	defer cancel()
	if _, err := s.call(ctx, http.MethodPost, "/session/"+url.PathEscape(session)+"/abort", nil, nil); err != nil && s.ctx.Err() == nil {
		s.log.Warn("abort failed", "session", session, "error", err)
		s.emit.Emit(sdk.RuntimeEvent{Kind: sdk.EventDiagnostic, ThreadRef: session, Title: "opencode was not told to stop the interrupted turn",
			Text: err.Error()})
	}
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

// httpError is a response with a status that is not a success.
type httpError struct {
	method, path string
	status       int
	body         string
}

func (e *httpError) Error() string {
	if e.body == "" {
		return fmt.Sprintf("%s %s: status %d", e.method, e.path, e.status)
	}
	return fmt.Sprintf("%s %s: status %d: %s", e.method, e.path, e.status, sdk.Printable(sdk.Clip(e.body, maxBody, false)))
}

// maxBody is how much of a failure's body an error quotes (its start: an
// explanation, which may name what was sent): a server that answers with
// a page of HTML, or megabytes, must not put it all in a run's failure.
const maxBody = 1 << 10

// quoteBody quotes an answer that is not what was expected, for an error:
// its first 200 bytes, escaped, with its length when cut.
func quoteBody(b []byte) string {
	const n = 200
	q := strconv.Quote(sdk.Clip(string(b), n, false))
	if len(b) > n {
		q += fmt.Sprintf(" (%d bytes in all)", len(b))
	}
	return q
}

func requestFrame(method, path string, body []byte) []byte {
	f := map[string]any{"method": method, "path": path}
	if len(body) > 0 {
		f["body"] = json.RawMessage(body)
	}
	b, _ := json.Marshal(f)
	return b
}

// call sends one request and decodes a JSON answer into out (when not
// nil). Both go to the raw-frame log. It returns the status.
func (s *session) call(ctx context.Context, method, path string, in, out any) (int, error) {
	var body []byte
	if in != nil {
		var err error
		if body, err = json.Marshal(in); err != nil {
			return 0, err
		}
	}
	req, err := http.NewRequestWithContext(ctx, method, s.base+path, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	s.proc.Frames.Append(framelog.Out, requestFrame(method, path, body))
	resp, err := s.client.Do(req)
	if err != nil {
		return 0, fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	rb, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return resp.StatusCode, fmt.Errorf("%s %s: read the answer: %w", method, path, err)
	}
	rf, _ := json.Marshal(map[string]any{"status": resp.StatusCode, "body": string(rb)})
	s.lastResp.Store(s.proc.Frames.Append(framelog.In, rf))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return resp.StatusCode, &httpError{method: method, path: path, status: resp.StatusCode, body: strings.TrimSpace(string(rb))}
	}
	if out != nil && len(bytes.TrimSpace(rb)) > 0 {
		if err := json.Unmarshal(rb, out); err != nil {
			return resp.StatusCode, fmt.Errorf("%s %s: the answer is not what was expected (%w): %s", method, path, err, quoteBody(bytes.TrimSpace(rb)))
		}
	}
	return resp.StatusCode, nil
}

// modelOf maps the host's model ("provider/model") to opencode's; a model
// without a provider is left to opencode's configuration.
func modelOf(model string) *modelRef {
	p, m, ok := strings.Cut(model, "/")
	if !ok || p == "" || m == "" {
		return nil
	}
	return &modelRef{ProviderID: p, ModelID: m}
}

// StartTurn implements sdk.Adapter: prompt_async on the session. opencode
// answers at once; the turn's user message (whose id is the turn ref)
// starts it on the event stream.
func (a *Adapter) StartTurn(ctx context.Context, req sdk.StartTurnRequest) (sdk.StartTurnResponse, error) {
	s, err := a.session(req.SessionID)
	if err != nil {
		return sdk.StartTurnResponse{}, err
	}
	if s.ctx.Err() != nil {
		select {
		case <-s.proc.Done():
			return sdk.StartTurnResponse{}, fmt.Errorf("start turn: %w", s.proc.Exit(""))
		default:
			return sdk.StartTurnResponse{}, sdk.Errorf(sdk.ErrProviderExited, "start turn: the session was closed")
		}
	}
	s.mu.Lock()
	root, running := s.norm.root, s.norm.activeTurn(s.norm.root)
	if running != "" {
		s.mu.Unlock()
		return sdk.StartTurnResponse{}, sdk.Errorf(sdk.ErrBusy, "start turn: turn %s is running", running)
	}
	s.norm.expectTurn(req.ClientTurnID)
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	body := promptBody{Parts: []textPartInput{{Type: "text", Text: req.Input.Text}}, Model: modelOf(s.model)}
	if _, err := s.call(ctx, http.MethodPost, "/session/"+url.PathEscape(root)+"/prompt_async", body, nil); err != nil {
		s.mu.Lock()
		s.norm.unexpectTurn() // a late user message must not take the next turn's id
		s.mu.Unlock()
		return sdk.StartTurnResponse{}, fmt.Errorf("start turn: %w", err)
	}
	return sdk.StartTurnResponse{}, nil
}

// InterruptTurn implements sdk.Adapter: abort. The turn ends (interrupted)
// when the session goes idle.
func (a *Adapter) InterruptTurn(ctx context.Context, req sdk.InterruptTurnRequest) error {
	s, err := a.session(req.SessionID)
	if err != nil {
		return err
	}
	s.mu.Lock()
	root, turn := s.norm.root, s.norm.activeTurn(s.norm.root)
	if turn != "" && (req.TurnRef == "" || req.TurnRef == turn) {
		s.norm.abort(root)
	}
	if turn == "" && req.TurnRef == "" && s.norm.abortExpected() {
		// The prompt was accepted and its turn has not started: it is
		// aborted once it runs.
		s.mu.Unlock()
		return nil
	}
	s.mu.Unlock()
	if turn == "" || (req.TurnRef != "" && req.TurnRef != turn) {
		return nil // nothing to stop; the acknowledgement is still true
	}
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	if _, err := s.call(ctx, http.MethodPost, "/session/"+url.PathEscape(root)+"/abort", nil, nil); err != nil {
		return fmt.Errorf("interrupt turn %s: %w", turn, err)
	}
	return nil
}

// reply maps a decision to opencode's permission reply.
func reply(d sdk.Decision) (string, error) {
	switch d {
	case sdk.DecisionAccept:
		return "once", nil
	case sdk.DecisionAcceptForSession:
		return "always", nil
	case sdk.DecisionDecline, sdk.DecisionCancel:
		return "reject", nil
	}
	return "", sdk.Errorf(sdk.ErrInvalid, "decision %q: a permission takes accept, accept_for_session, decline or cancel", d)
}

// RespondToRequest implements sdk.Adapter.
func (a *Adapter) RespondToRequest(ctx context.Context, req sdk.RespondToRequestRequest) error {
	s, err := a.sessions.ForRequest(req.SessionID, req.RequestRef)
	if err != nil {
		return err
	}
	answer, err := reply(req.Decision)
	if err != nil {
		return err
	}
	s.mu.Lock()
	q, ok := s.pending.Take(req.RequestRef)
	if !ok {
		s.mu.Unlock()
		return sdk.Errorf(sdk.ErrUnknownRequest, "request %q", req.RequestRef)
	}
	if answer == "reject" {
		s.norm.rejectedCall(q.callID)
	}
	s.mu.Unlock()
	// The resolution is emitted before the reply: the reply lets opencode
	// go on, and what it does next must come after.
	s.emit.Emit(sdk.RuntimeEvent{Kind: sdk.EventRequestResolved, ThreadRef: q.thread, TurnRef: q.turn,
		RequestRef: req.RequestRef, RequestKind: q.kind, Status: req.Decision})
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	if _, err := s.call(ctx, http.MethodPost, "/permission/"+url.PathEscape(req.RequestRef)+"/reply", permissionReply{Reply: answer}, nil); err != nil {
		if s.ctx.Err() != nil {
			return sdk.Errorf(sdk.ErrNotResumable, "answer request %s: opencode is gone (%v)", req.RequestRef, err)
		}
		return fmt.Errorf("answer request %s: %w", req.RequestRef, err)
	}
	return nil
}

// CloseSession implements sdk.Adapter.
func (a *Adapter) CloseSession(ctx context.Context, sessionID string) error {
	s, err := a.session(sessionID)
	if err != nil {
		return err
	}
	return s.close(ctx)
}

var _ sdk.Rollbacker = (*Adapter)(nil)
