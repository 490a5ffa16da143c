package claude

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/baton-run/baton/sdk"
	"github.com/baton-run/baton/sdk/framelog"
	"github.com/baton-run/baton/sdk/lineproc"
	"github.com/baton-run/baton/sdk/sessions"
)

// Version is the plugin's version.
const Version = "0.1.0"

// handshakeTimeout bounds the initialize control request. The CLI answers
// in well under a second; a hung one must still not hang the host.
const handshakeTimeout = 60 * time.Second

// callTimeout bounds the interrupt control request, which the CLI answers
// at once (the turn itself ends with its result).
const callTimeout = 30 * time.Second

// baseArgs are what the plugin appends to the configured command: print
// mode with stream-json both ways, the permission prompts on the control
// channel, and the host's own messages echoed when the CLI takes them
// (how the plugin knows that a steer joined the turn).
var baseArgs = []string{"-p", "--input-format", "stream-json", "--output-format", "stream-json", "--verbose",
	"--permission-prompt-tool", "stdio", "--replay-user-messages"}

// permissionModes are the CLI's --permission-mode values a runtime policy
// may name. The default (empty) asks the host about everything the CLI
// would prompt for.
var permissionModes = []string{"acceptEdits", "auto", "bypassPermissions", "default", "dontAsk", "manual", "plan"}

// Adapter drives Claude Code (`claude -p` with stream-json). It implements
// sdk.Adapter, sdk.Steerer (a user message written while a turn runs) and
// sdk.Rollbacker (a resumed session cut short; see rollback.go).
type Adapter struct {
	log hclog.Logger
	ids *idSource

	sessions sessions.Table[*session]
}

// Option configures an Adapter.
type Option func(*Adapter)

// WithRandom sets where the adapter's ids (user message uuids, control
// request ids) draw their randomness: a seeded source makes them the same
// on every run (default: crypto/rand).
func WithRandom(r io.Reader) Option { return func(a *Adapter) { a.ids = &idSource{r: r} } }

// New returns an adapter that logs to log.
func New(log hclog.Logger, opts ...Option) *Adapter {
	a := &Adapter{log: log, ids: &idSource{r: rand.Reader}}
	for _, o := range opts {
		o(a)
	}
	return a
}

// Describe implements sdk.Adapter.
func (a *Adapter) Describe() sdk.Description {
	return sdk.Description{
		Name:          "claude",
		Version:       Version,
		WireProtocol:  WireProtocol,
		Capabilities:  sdk.Capabilities{NativeSteering: true, Interrupt: true, Approvals: true, Subagents: true, NativeRollback: true, Resume: true},
		MCPTransports: mcpTransports,
		Notes: map[string]string{
			sdk.NoteSteering:  "a user message written into the running turn",
			sdk.NoteInterrupt: "`interrupt` control request",
			sdk.NoteApprovals: "`can_use_tool` control requests: Bash as commands, Edit/Write/MultiEdit/NotebookEdit as file changes, other tools as permissions",
			sdk.NoteSubagents: "`Task` tool uses as child threads, by `parent_tool_use_id`",
			sdk.NoteRollback:  "`--resume-session-at` + `--fork-session`, for turns of the live session; older ones: fresh thread + handoff",
			sdk.NoteResume:    "`--resume SESSION`",
		},
	}
}

func (a *Adapter) session(id string) (*session, error) { return a.sessions.Get(id) }

// session is one Claude Code conversation and the CLI process serving it.
type session struct {
	req  sdk.OpenSessionRequest
	cwd  string
	log  hclog.Logger
	life *sessions.Lifecycle
	emit sdk.Emitter // the session's life: nothing after runtime_exited
	ids  *idSource

	// frames is the session's raw-frame log, one numbering across its CLI
	// processes (a resume that fell back, a rollback's restart).
	frames *framelog.Log
	// mcp is the host's MCP servers as every CLI process of the session
	// reads them (--mcp-config), removed when the session ends.
	mcp *mcpConfig

	pending sessions.Requests[*permissionRequest]

	mu      sync.Mutex
	proc    *process
	opening bool // OpenSession has not returned: a process that ends is its to handle
	norm    *normalizer
	calls   map[string]*pendingCall
	nextID  int
}

// process is one CLI process of a session.
type process struct {
	*lineproc.Process
	ended chan struct{} // closed when its stdout is read to the end and it exited
	// initialized says the CLI answered initialize. What it says before
	// that (a resume it cannot do ends with a result naming the session it
	// could not find) is not the conversation's. Read loop only.
	initialized bool
	// noConversation says that a result before initialize named the
	// session to resume as unknown ("No conversation found"). Read loop
	// only, then read once ended is closed.
	noConversation bool

	// The CLI answers each user message it takes with a "queued"
	// command_lifecycle, in order (capability msg_lifecycle_v1). sent
	// counts the user messages written, queued the answers; queuedCh is
	// closed and replaced at each answer. Under the session's lock.
	sent, queued int
	queuedCh     chan struct{}
	// noLifecycle says the CLI's init named its capabilities without
	// msg_lifecycle_v1: no answer will come.
	noLifecycle bool
}

// steerAckTimeout bounds the wait for the CLI to take a steer. A CLI that
// takes longer still gets it; the steer is just not known to be queued.
const steerAckTimeout = 5 * time.Second

// sending counts a user message about to be written and returns its place
// (the answer that acknowledges it). Under the session's lock.
func (p *process) sending() int {
	p.sent++
	return p.sent
}

// tookMessage notes a "queued" command_lifecycle. Under the session's lock.
func (p *process) tookMessage() {
	p.queued++
	if p.queuedCh != nil {
		close(p.queuedCh)
		p.queuedCh = nil
	}
}

// ResumeSession implements sdk.Resumer: OpenSession continues
// req.ResumeThreadRef when it is set.
func (a *Adapter) ResumeSession(ctx context.Context, req sdk.OpenSessionRequest, emit sdk.Emitter) (sdk.OpenSessionResponse, error) {
	return a.OpenSession(ctx, req, emit)
}

// OpenSession implements sdk.Adapter: start the CLI and initialize the
// control protocol. A fresh conversation's session id comes with the first
// turn (the CLI names it only after the first user message).
func (a *Adapter) OpenSession(ctx context.Context, req sdk.OpenSessionRequest, emit sdk.Emitter) (sdk.OpenSessionResponse, error) {
	if !filepath.IsAbs(req.Cwd) {
		return sdk.OpenSessionResponse{}, sdk.Errorf(sdk.ErrInvalid, "open session: cwd %q is not absolute", req.Cwd)
	}
	if req.RuntimePolicy != "" && !slices.Contains(permissionModes, req.RuntimePolicy) {
		return sdk.OpenSessionResponse{}, sdk.Errorf(sdk.ErrInvalid,
			"open session: runtime policy %q: want empty (ask the host about everything) or a permission mode (%s)",
			req.RuntimePolicy, strings.Join(permissionModes, ", "))
	}
	if err := sdk.CheckMCPServers("claude", mcpTransports, req.MCPServers); err != nil {
		return sdk.OpenSessionResponse{}, sdk.Errorf(sdk.ErrInvalid, "open session: %v", err)
	}
	cwd := filepath.Clean(req.Cwd)
	life := sessions.NewLifecycle(emit)
	s := &session{req: req, cwd: cwd, log: a.log.With("session", req.SessionID), ids: a.ids,
		life: life, emit: life, opening: true, norm: newNormalizer("", cwd), calls: map[string]*pendingCall{}}

	frames, err := framelog.Open(req.RawFrameLog, 0)
	if err != nil {
		return sdk.OpenSessionResponse{}, fmt.Errorf("open session: %w", err)
	}
	frames.Redact(sdk.MCPSecrets(req.MCPServers)...)
	s.frames = frames
	if s.mcp, err = writeMCPConfig(req.MCPServers, mcpStrict(req.Command.Env)); err != nil {
		frames.Close()
		return sdk.OpenSessionResponse{}, fmt.Errorf("open session: %w", err)
	}
	// failed undoes what the session opened so far.
	failed := func() {
		frames.Close()
		if err := s.mcp.remove(); err != nil {
			s.log.Warn("the session's MCP configuration is left behind", "error", err)
		}
	}
	resumed := false
	if req.ResumeThreadRef != "" {
		err := s.start(ctx, "--resume", req.ResumeThreadRef)
		switch {
		case err == nil:
			resumed = true
		case errors.Is(err, errNoConversation):
			// The CLI no longer has the conversation ("No conversation
			// found with session ID"): a fresh one, and the host is told.
			// (A CLI that failed otherwise is an error: a fresh
			// conversation would lose the context for nothing.)
			s.log.Info("claude could not resume the session; starting a new one", "thread", req.ResumeThreadRef, "error", err)
			s.emit.Emit(sdk.RuntimeEvent{Kind: sdk.EventDiagnostic, Title: "claude could not resume session " + req.ResumeThreadRef,
				Text: err.Error()})
		default:
			failed()
			return sdk.OpenSessionResponse{}, fmt.Errorf("resume conversation %s: %w", req.ResumeThreadRef, err)
		}
	}
	if !resumed {
		if err := s.start(ctx); err != nil {
			failed()
			return sdk.OpenSessionResponse{}, err // it says what failed; the host says it opened a session
		}
	}
	s.mu.Lock()
	if resumed {
		// The CLI's running totals (cost, usage by model) include the
		// conversation's turns before this session: the first result only
		// sets the base.
		s.norm.costs.known = false
		// The resumed conversation is the root, as if the CLI had named
		// it (unless its frames already did).
		for _, ev := range s.norm.learnRoot(req.ResumeThreadRef) {
			s.emit.Emit(ev)
		}
	}
	s.opening = false
	p := s.proc
	// (Read under the lock: the read loop names the root from the first
	// frame that carries the session id, which may come before a turn.)
	root := s.norm.root
	s.mu.Unlock()
	a.sessions.Add(req.SessionID, s, life.Done())
	select {
	case <-p.ended: // it ended while the session opened: report it now
		s.finish(p)
	default:
	}
	return sdk.OpenSessionResponse{ProviderSessionRef: root, ProviderThreadRef: root, ProviderPid: p.Pid(),
		Resumed: resumed}, nil
}

// errNoConversation is a CLI that exited before it answered initialize,
// having said first that it has no conversation to resume.
var errNoConversation = errors.New("claude has no such conversation")

// start starts a CLI process with the base arguments and extra, and
// initializes it. A process that fails to start or initialize is stopped.
func (s *session) start(ctx context.Context, extra ...string) error {
	argv := append(slices.Clone(s.req.Command.Argv), baseArgs...)
	if s.req.Model != "" {
		argv = append(argv, "--model", s.req.Model)
	}
	if s.req.RuntimePolicy != "" {
		argv = append(argv, "--permission-mode", s.req.RuntimePolicy)
	}
	argv = append(argv, s.mcp.args...)
	argv = append(argv, extra...)
	lp, err := lineproc.Start(lineproc.Config{Name: "claude", Protocol: "stream-json", Command: sdk.ProviderCommand{Argv: argv, Env: s.req.Command.Env},
		Dir: s.cwd, Frames: s.frames, Log: s.log, Stdin: true, OnLineTooLong: lineproc.TooLongDiagnostic(s.emit)})
	if err != nil {
		return err
	}
	p := &process{Process: lp, ended: make(chan struct{})}
	s.mu.Lock()
	if s.life.Closed() {
		// Closed while a rollback replaced the process: CloseSession
		// stopped the old one and waits for the session's end, which this
		// one must not outlive.
		s.mu.Unlock()
		_ = lp.Close(context.Background())
		return sdk.Errorf(sdk.ErrProviderExited, "the session was closed")
	}
	s.proc = p
	s.mu.Unlock()
	go s.read(p)

	ctx, cancel := context.WithTimeout(ctx, handshakeTimeout)
	defer cancel()
	if _, err := s.call(ctx, p, map[string]any{"subtype": "initialize", "hooks": nil, "forwardSubagentText": true}, nil); err != nil {
		exited := errors.Is(err, errProcessEnded) || errors.Is(err, sdk.ErrProviderExited) // ended, or gone before the write
		if !exited {
			// An answer it cannot use, from a CLI on its way out: its exit
			// says why.
			err = p.Failed(fmt.Errorf("initialize: %w", err), "while the session opened")
		}
		_ = p.Close(context.Background())
		<-p.ended
		if exited {
			exit := p.Exit("before answering initialize")
			if p.noConversation {
				return fmt.Errorf("%w: %w", errNoConversation, exit)
			}
			return exit
		}
		return err
	}
	return nil
}

// errProcessEnded is a control request whose process ended first.
var errProcessEnded = errors.New("claude exited")

// pendingCall is a control request of the plugin's waiting for its
// response.
type pendingCall struct {
	ch chan controlResponseBody
	// then, when set, runs on the read loop with the response (s.mu held),
	// before the frames after it: the events it returns keep their order.
	then func(controlResponseBody) []sdk.RuntimeEvent
}

// call sends a control request and waits for its response.
func (s *session) call(ctx context.Context, p *process, request any, then func(controlResponseBody) []sdk.RuntimeEvent) (json.RawMessage, error) {
	s.mu.Lock()
	s.nextID++
	id := fmt.Sprintf("req_%d_%s", s.nextID, s.ids.hex(4))
	ch := make(chan controlResponseBody, 1)
	s.calls[id] = &pendingCall{ch: ch, then: then}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.calls, id)
		s.mu.Unlock()
	}()
	b, _ := json.Marshal(outControlRequest{Type: typeControlRequest, RequestID: id, Request: request})
	if err := p.Write(b); err != nil {
		return nil, err
	}
	answered := func(r controlResponseBody) (json.RawMessage, error) {
		if r.Subtype == "error" {
			return nil, fmt.Errorf("claude refused the control request: %s", r.Error)
		}
		return r.Response, nil
	}
	select {
	case r := <-ch:
		return answered(r)
	case <-p.ended:
		// The reader hands the answer over before it closes ended, so an
		// answer that came just before the exit is here; select picks
		// among ready cases at random, so look again.
		select {
		case r := <-ch:
			return answered(r)
		default:
			return nil, errProcessEnded
		}
	case <-ctx.Done():
		return nil, fmt.Errorf("waiting for claude's control response: %w", context.Cause(ctx))
	}
}

// read handles a process's frames until its stdout ends.
func (s *session) read(p *process) {
	for {
		line, raw, err := p.Next()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				s.log.Warn("reading claude's output failed", "error", err)
			}
			break
		}
		s.handle(p, line, raw)
	}
	p.Wait() // one that closed its stdout and lives on is stopped
	close(p.ended)
	s.mu.Lock()
	current := p == s.proc && !s.opening
	s.mu.Unlock()
	if current {
		s.finish(p)
	}
}

// handle applies one frame, on the read loop, so that events keep the
// frames' order.
func (s *session) handle(p *process, line []byte, raw uint64) {
	f, err := decodeFrame(line)
	s.mu.Lock()
	defer s.mu.Unlock()
	emit := func(evs []sdk.RuntimeEvent) {
		for _, ev := range evs {
			ev.RawFrame = raw
			s.emit.Emit(ev)
		}
	}
	if err != nil {
		p.NotFrame(line) // for the exit report
		emit([]sdk.RuntimeEvent{malformed(err, line)})
		return
	}
	switch {
	case f.Type == typeCommandLife && f.State == "queued":
		p.tookMessage()
	case f.Type == typeSystem && f.Subtype == "init" && f.Capabilities != nil:
		p.noLifecycle = !slices.Contains(f.Capabilities, "msg_lifecycle_v1")
	}
	switch f.Type {
	case typeControlResponse:
		if f.Response == nil {
			emit([]sdk.RuntimeEvent{malformed(errors.New("control_response without a response"), line)})
			return
		}
		if c, ok := s.calls[f.Response.RequestID]; ok {
			// Answered once: a repeated response is ignored (the read loop
			// must never block on a caller that is gone).
			delete(s.calls, f.Response.RequestID)
			p.initialized = true // the first control request is initialize
			c.ch <- *f.Response
			if c.then != nil {
				emit(c.then(*f.Response))
			}
		}
	case typeControlRequest:
		emit(s.controlRequest(p, f))
	case typeControlCancel:
		ref := requestRef(f.RequestID)
		if q, ok := s.pending.Take(ref); ok {
			emit([]sdk.RuntimeEvent{q.resolved(sdk.DecisionCancel, "claude withdrew the request")})
		}
	default:
		if !p.initialized {
			text := resultErrors(f)
			if strings.Contains(text, "No conversation found") {
				p.noConversation = true
			}
			emit([]sdk.RuntimeEvent{{Kind: sdk.EventDiagnostic, Title: "claude sent " + f.Type + " before it was initialized",
				Text: text, Detail: f.raw}})
			return
		}
		emit(s.norm.frame(f))
	}
}

// resultErrors is the error text of a result frame ("" for other frames).
func resultErrors(f *frame) string {
	if f.Type != typeResult {
		return ""
	}
	var r resultFrame
	_ = json.Unmarshal(f.raw, &r)
	return strings.Join(r.Errors, "; ")
}

// controlRequest opens a can_use_tool request for the host; any other
// request from the CLI is answered with an error (this plugin registers no
// hooks and no SDK MCP servers). Called with s.mu held.
func (s *session) controlRequest(p *process, f *frame) []sdk.RuntimeEvent {
	var body controlRequestBody
	err := json.Unmarshal(f.Request, &body)
	if err == nil && f.RequestID == "" {
		err = errors.New("control_request without a request_id")
	}
	if err != nil {
		return []sdk.RuntimeEvent{malformed(fmt.Errorf("control_request: %v", err), f.raw)}
	}
	if body.Subtype != "can_use_tool" {
		s.answer(p, controlResponseBody{Subtype: "error", RequestID: f.RequestID,
			Error: fmt.Sprintf("baton does not handle %q control requests", body.Subtype)})
		return []sdk.RuntimeEvent{{Kind: sdk.EventDiagnostic, ThreadRef: s.norm.root, TurnRef: s.norm.activeTurn(),
			Title: "claude sent an unsupported control request " + body.Subtype + "; answered with an error", Detail: f.raw}}
	}
	q, evs := s.norm.openRequest(f.RequestID, body, f.raw)
	if q == nil {
		resp, _ := json.Marshal(permissionDeny{Behavior: "deny", Message: unboundMessage})
		s.answer(p, controlResponseBody{Subtype: "success", RequestID: f.RequestID, Response: resp})
		return evs
	}
	s.pending.Open(requestRef(f.RequestID), q)
	return evs
}

// answer writes a control_response (errors are the read loop's to see: the
// process is gone).
func (s *session) answer(p *process, body controlResponseBody) {
	b, _ := json.Marshal(outControlResponse{Type: typeControlResponse, Response: body})
	if err := p.Write(b); err != nil {
		s.log.Debug("answering claude failed", "error", err)
	}
}

// finish reports the end of the session's process: running turns fail,
// pending requests are cancelled, and runtime_exited comes last. The read
// loop and OpenSession (or a restart) may both see the end: the first
// reports it.
func (s *session) finish(p *process) {
	s.life.Exit(errProcessEnded, func(closed bool) ([]sdk.RuntimeEvent, sdk.RuntimeEvent) {
		report := "claude exited"
		if !closed {
			report = p.ExitReport("during the turn")
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		evs := s.norm.exited(report)
		for _, q := range s.pending.TakeAll() {
			evs = append(evs, q.resolved(sdk.DecisionCancel, ""))
		}
		exit := p.ExitEvent(s.norm.root, closed)
		s.frames.Close() // the exit is the session's last event: no frame comes after it
		if err := s.mcp.remove(); err != nil {
			s.log.Warn("the session's MCP configuration is left behind", "error", err)
		}
		return evs, exit
	})
}

// live is the session's process, or ErrProviderExited.
func (s *session) live(what string) (*process, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-s.proc.ended:
		return nil, fmt.Errorf("%s: %w", what, s.proc.Exit(""))
	default:
	}
	return s.proc, nil
}

// userMessage is a user line with a fresh uuid (the CLI drops a message
// whose uuid its session already has).
func (s *session) userMessage(text string) (string, []byte) {
	id := s.ids.uuid()
	b, _ := json.Marshal(outUserMessage{Type: typeUser, Message: userContent{Role: "user", Content: text}, SessionID: "", UUID: id})
	return id, b
}

// StartTurn implements sdk.Adapter: a user message. The turn's ref is the
// message's uuid (the prompt's id in the CLI's session).
func (a *Adapter) StartTurn(ctx context.Context, req sdk.StartTurnRequest) (sdk.StartTurnResponse, error) {
	s, err := a.session(req.SessionID)
	if err != nil {
		return sdk.StartTurnResponse{}, err
	}
	p, err := s.live("start turn")
	if err != nil {
		return sdk.StartTurnResponse{}, err
	}
	ref, line := s.userMessage(req.Input.Text)
	s.mu.Lock()
	if t := s.norm.activeTurn(); t != "" {
		s.mu.Unlock()
		return sdk.StartTurnResponse{}, sdk.Errorf(sdk.ErrBusy, "start turn: turn %s is still running", t)
	}
	for _, ev := range s.norm.startTurn(ref, req.ClientTurnID) {
		s.emit.Emit(ev)
	}
	p.sending()
	s.mu.Unlock()
	if err := p.Write(line); err != nil {
		s.mu.Lock()
		s.norm.cancelStart(ref)
		s.mu.Unlock()
		return sdk.StartTurnResponse{}, fmt.Errorf("start turn: %w", err)
	}
	return sdk.StartTurnResponse{TurnRef: ref}, nil
}

// SteerTurn implements sdk.Steerer: a user message written while the turn
// runs. The CLI queues it and feeds it to the model at the next tool
// boundary, or runs it right after the model's answer; either way it
// belongs to the host's turn, which ends with the result after it.
func (a *Adapter) SteerTurn(ctx context.Context, req sdk.SteerTurnRequest) error {
	s, err := a.session(req.SessionID)
	if err != nil {
		return err
	}
	p, err := s.live("steer")
	if err != nil {
		return err
	}
	_, line := s.userMessage(req.Input.Text)
	s.mu.Lock()
	active := s.norm.activeTurn()
	if active == "" || (req.TurnRef != "" && req.TurnRef != active) {
		s.mu.Unlock()
		return sdk.Errorf(sdk.ErrBusy, "steer: turn %q is not running (running: %q)", req.TurnRef, active)
	}
	s.norm.steer()
	place := p.sending()
	s.mu.Unlock()
	if err := p.Write(line); err != nil {
		return fmt.Errorf("steer turn %s: %w", active, err)
	}
	// Return once the CLI has queued it: an interrupt right after must
	// find it queued to cancel it, or the CLI runs it after the
	// interrupted turn, outside any of the host's turns.
	return s.awaitQueued(ctx, p, place)
}

// awaitQueued waits for the CLI's answer to the user message at place
// (see process.sent), the process's end, or steerAckTimeout.
func (s *session) awaitQueued(ctx context.Context, p *process, place int) error {
	timeout := time.NewTimer(steerAckTimeout)
	defer timeout.Stop()
	for {
		s.mu.Lock()
		if p.queued >= place || p.noLifecycle {
			s.mu.Unlock()
			return nil
		}
		if p.queuedCh == nil {
			p.queuedCh = make(chan struct{})
		}
		ch := p.queuedCh
		s.mu.Unlock()
		select {
		case <-ch:
		case <-p.ended:
			return nil // the exit is reported as the turn's end
		case <-timeout.C:
			s.log.Debug("claude has not queued the steer yet", "message", place)
			return nil
		case <-ctx.Done():
			return fmt.Errorf("steer: waiting for claude to queue it: %w", context.Cause(ctx))
		}
	}
}

// InterruptTurn implements sdk.Adapter: the interrupt control request,
// which also cancels the steers still queued. The turn ends with the
// result that follows (or with the acknowledgement, between CLI turns).
func (a *Adapter) InterruptTurn(ctx context.Context, req sdk.InterruptTurnRequest) error {
	s, err := a.session(req.SessionID)
	if err != nil {
		return err
	}
	p, err := s.live("interrupt")
	if err != nil {
		return err
	}
	s.mu.Lock()
	active := s.norm.activeTurn()
	s.norm.interrupting()
	s.mu.Unlock()
	if active == "" {
		return nil // nothing to stop; the acknowledgement is still true
	}
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	// The CLI acknowledges an interrupt that found it between its turns
	// (the host's turn waiting on a queued message or a background
	// subagent) and sends no result: the acknowledgement ends the turn.
	then := func(r controlResponseBody) []sdk.RuntimeEvent {
		if r.Subtype != "success" {
			return nil
		}
		var ack struct {
			StillQueued []json.RawMessage `json:"still_queued"`
		}
		_ = json.Unmarshal(r.Response, &ack) // an answer without the list: nothing queued
		return s.norm.interruptAcknowledged(active, len(ack.StillQueued))
	}
	// cancel_queued: the steers the CLI has not taken yet are cancelled
	// with the turn (each with a "cancelled" command_lifecycle). Without it
	// they survive the interrupt and run as CLI turns of their own after
	// the interrupted one's result, outside the host's turn.
	if _, err := s.call(ctx, p, map[string]any{"subtype": "interrupt", "cancel_queued": true}, then); err != nil {
		return fmt.Errorf("interrupt turn %s: %w", active, err)
	}
	return nil
}

// RespondToRequest implements sdk.Adapter.
func (a *Adapter) RespondToRequest(ctx context.Context, req sdk.RespondToRequestRequest) error {
	s, err := a.sessions.ForRequest(req.SessionID, req.RequestRef)
	if err != nil {
		return err
	}
	s.mu.Lock()
	q, err := s.pending.Get(req.RequestRef)
	if err != nil {
		s.mu.Unlock()
		return err
	}
	resp, err := reply(q, req.Decision, req.Answers)
	if err != nil {
		s.mu.Unlock()
		return err
	}
	s.pending.Take(req.RequestRef)
	if req.Decision == sdk.DecisionDecline || req.Decision == sdk.DecisionCancel {
		s.norm.decline(q.body.ToolUseID)
	}
	p := s.proc
	// The resolution is emitted before the answer: the answer lets the CLI
	// go on, and what it does next must come after.
	s.emit.Emit(q.resolved(req.Decision, ""))
	s.mu.Unlock()
	body, _ := json.Marshal(resp)
	b, _ := json.Marshal(outControlResponse{Type: typeControlResponse,
		Response: controlResponseBody{Subtype: "success", RequestID: q.id, Response: body}})
	if err := p.Write(b); err != nil {
		return sdk.Errorf(sdk.ErrNotResumable, "answer request %s: claude is gone (%v)", req.RequestRef, err)
	}
	return nil
}

// CloseSession implements sdk.Adapter: the CLI's stdin closes (it exits at
// once), then lineproc stops what is left.
func (a *Adapter) CloseSession(ctx context.Context, sessionID string) error {
	s, err := a.session(sessionID)
	if err != nil {
		return err
	}
	err = s.life.Close(ctx, nil, func() {
		s.mu.Lock()
		p := s.proc
		s.mu.Unlock()
		_ = p.Close(context.WithoutCancel(ctx)) // a forced close stays forced
	})
	if err != nil {
		return fmt.Errorf("close session %s: waiting for claude to exit: %w", sessionID, err)
	}
	return nil
}

// idSource is where the adapter's random ids come from: one reader,
// shared by its sessions.
type idSource struct {
	mu sync.Mutex
	r  io.Reader
}

func (s *idSource) read(b []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := io.ReadFull(s.r, b); err != nil {
		panic(fmt.Sprintf("claude: read random id bytes: %v", err)) // crypto/rand does not fail
	}
}

// hex is n random bytes in hex.
func (s *idSource) hex(n int) string {
	b := make([]byte, n)
	s.read(b)
	return hex.EncodeToString(b)
}

// uuid is a random (version 4) UUID.
func (s *idSource) uuid() string {
	var b [16]byte
	s.read(b[:])
	return uuidString(b, 4)
}

// uuidString is the UUID of b with its version and variant bits set
// (RFC 9562), in its usual form.
func uuidString(b [16]byte, version byte) string {
	b[6] = b[6]&0x0f | version<<4
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

var _ sdk.Steerer = (*Adapter)(nil)
