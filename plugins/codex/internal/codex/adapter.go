package codex

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/sourcegraph/jsonrpc2"

	"github.com/baton-run/baton/sdk"
	"github.com/baton-run/baton/sdk/jsonrpcproc"
	"github.com/baton-run/baton/sdk/sessions"
)

// Version is the plugin's version (sent to codex as clientInfo.version).
const Version = "0.1.0"

// handshakeTimeout bounds initialize and thread/start (or thread/resume).
// codex answers in well under a second; a hung one must still not hang the
// host.
const handshakeTimeout = 60 * time.Second

// callTimeout bounds turn/start, turn/steer and turn/interrupt, which codex
// answers at once (the turn itself goes on in notifications).
const callTimeout = 30 * time.Second

// sandbox is the sandbox every thread runs in: codex may write inside the
// workspace; everything beyond that it asks for.
const sandbox = "workspace-write"

// approvalPolicy maps the host's runtime policy to codex's approvalPolicy.
// The default asks the host about every command and edit ("untrusted"), and
// the host answers by its own approval policy; codex's own values are
// passed through for hosts that want codex to decide.
func approvalPolicy(runtimePolicy string) (string, error) {
	switch runtimePolicy {
	case "":
		return "untrusted", nil
	case "untrusted", "on-request", "never":
		return runtimePolicy, nil
	}
	return "", sdk.Errorf(sdk.ErrInvalid, "runtime policy %q: want empty (ask the host about everything), untrusted, on-request or never", runtimePolicy)
}

// Adapter drives `codex app-server`. It implements sdk.Adapter,
// sdk.Steerer (turn/steer) and sdk.Rollbacker (thread/revert, or
// thread/rollback on codex before paginated history).
type Adapter struct {
	log hclog.Logger

	sessions sessions.Table[*session]
}

// New returns an adapter that logs to log.
func New(log hclog.Logger) *Adapter {
	return &Adapter{log: log}
}

// Describe implements sdk.Adapter.
func (a *Adapter) Describe() sdk.Description {
	return sdk.Description{
		Name:          "codex",
		Version:       Version,
		WireProtocol:  WireProtocol,
		Capabilities:  sdk.Capabilities{NativeSteering: true, Interrupt: true, Approvals: true, Subagents: true, NativeRollback: true, Resume: true},
		MCPTransports: mcpTransports,
		Notes: map[string]string{
			sdk.NoteSteering:  "`turn/steer`",
			sdk.NoteInterrupt: "`turn/interrupt`",
			sdk.NoteApprovals: "command, file change, permissions and questions; any other server request kept as generic",
			sdk.NoteSubagents: "child threads as nested nodes",
			sdk.NoteRollback:  "`thread/turns/list` + `thread/revert`",
			sdk.NoteResume:    "`thread/resume`",
		},
	}
}

func (a *Adapter) session(id string) (*session, error) { return a.sessions.Get(id) }

// session is one codex process and its root thread.
type session struct {
	id   string
	cwd  string
	log  hclog.Logger
	life *sessions.Lifecycle
	emit sdk.Emitter // the session's life: nothing after runtime_exited
	c    *jsonrpcproc.Conn
	ctx  context.Context // ends when the session closes or codex exits

	lastResp atomic.Uint64 // raw-frame index of the latest response

	pending sessions.Requests[*pendingRequest]

	mu     sync.Mutex
	thread string // the root thread
	norm   *normalizer
}

// pendingRequest is a server request waiting for the host's answer.
type pendingRequest struct {
	*serverRequest
	id jsonrpc2.ID
}

// ResumeSession implements sdk.Resumer: OpenSession continues
// req.ResumeThreadRef when it is set.
func (a *Adapter) ResumeSession(ctx context.Context, req sdk.OpenSessionRequest, emit sdk.Emitter) (sdk.OpenSessionResponse, error) {
	return a.OpenSession(ctx, req, emit)
}

// OpenSession implements sdk.Adapter: start codex, initialize, and start
// (or resume) a thread.
func (a *Adapter) OpenSession(ctx context.Context, req sdk.OpenSessionRequest, emit sdk.Emitter) (sdk.OpenSessionResponse, error) {
	if !filepath.IsAbs(req.Cwd) {
		return sdk.OpenSessionResponse{}, sdk.Errorf(sdk.ErrInvalid, "open session: cwd %q is not absolute", req.Cwd)
	}
	policy, err := approvalPolicy(req.RuntimePolicy)
	if err != nil {
		return sdk.OpenSessionResponse{}, fmt.Errorf("open session: %w", err)
	}
	if err := sdk.CheckMCPServers("codex", mcpTransports, req.MCPServers); err != nil {
		return sdk.OpenSessionResponse{}, sdk.Errorf(sdk.ErrInvalid, "open session: %v", err)
	}
	cwd := filepath.Clean(req.Cwd)
	life := sessions.NewLifecycle(emit)
	s := &session{id: req.SessionID, cwd: cwd, log: a.log.With("session", req.SessionID), life: life, emit: life,
		ctx: life.Context(), norm: newNormalizer("", cwd)}
	c, err := jsonrpcproc.Start(s.ctx, jsonrpcproc.Config{Name: "codex", Command: req.Command, Dir: cwd,
		RawFrameLog: req.RawFrameLog, Redact: sdk.MCPSecrets(req.MCPServers), Log: s.log, Handler: handler{s}, OnRecv: s.onRecv,
		OnMalformed: jsonrpcproc.MalformedDiagnostic(s.emit)})
	if err != nil {
		return sdk.OpenSessionResponse{}, err // it names the command; the host says it opened a session
	}
	s.c = c
	go s.watch()

	resp, err := s.handshake(ctx, req, policy)
	if err != nil {
		// An answer it cannot use, from a codex on its way out: its exit
		// says why.
		err = s.c.Failed(err, "while the session opened")
		_ = s.close(context.Background(), fmt.Errorf("handshake failed: %w", err))
		return sdk.OpenSessionResponse{}, err // the call names the method
	}
	a.sessions.Add(req.SessionID, s, life.Done())
	return resp, nil
}

func (s *session) handshake(ctx context.Context, req sdk.OpenSessionRequest, policy string) (sdk.OpenSessionResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, handshakeTimeout)
	defer cancel()
	var init initializeResult
	if err := s.c.Call(ctx, "initialize", initializeParams{
		ClientInfo:   clientInfo{Name: "baton", Title: "Baton", Version: Version},
		Capabilities: initializeCapabilities{ExperimentalAPI: true},
	}, &init); err != nil {
		return sdk.OpenSessionResponse{}, err
	}
	if err := s.c.Notify(ctx, "initialized", nil); err != nil {
		return sdk.OpenSessionResponse{}, err
	}
	var res threadResult
	resumed := false
	if req.ResumeThreadRef != "" {
		err := s.c.Call(ctx, "thread/resume", threadResumeParams{ThreadID: req.ResumeThreadRef, Cwd: s.cwd,
			ApprovalPolicy: policy, Sandbox: sandbox, ExcludeTurns: true, Config: mcpConfig(req.MCPServers)}, &res)
		var rpcErr *jsonrpc2.Error
		switch {
		case err == nil:
			resumed = true
		case errors.As(err, &rpcErr):
			// codex no longer has the thread (another CODEX_HOME, a deleted
			// rollout): a fresh thread, and the host is told so.
			s.log.Info("codex could not resume the thread; starting a new one", "thread", req.ResumeThreadRef, "error", err)
			s.emit.Emit(sdk.RuntimeEvent{Kind: sdk.EventDiagnostic, RawFrame: s.lastResp.Load(),
				Title: "codex could not resume thread " + req.ResumeThreadRef, Text: rpcErr.Message})
		default:
			return sdk.OpenSessionResponse{}, err
		}
	}
	if !resumed {
		if err := s.c.Call(ctx, "thread/start", threadStartParams{Cwd: s.cwd, ApprovalPolicy: policy, Sandbox: sandbox,
			Model: req.Model, Config: mcpConfig(req.MCPServers)}, &res); err != nil {
			return sdk.OpenSessionResponse{}, err
		}
	}
	if res.Thread.ID == "" {
		return sdk.OpenSessionResponse{}, errors.New("codex returned a thread without an id")
	}
	s.mu.Lock()
	s.thread = res.Thread.ID
	s.norm.setRoot(res.Thread.ID)
	if res.Thread.Model == "" {
		res.Thread.Model = res.Model
	}
	s.norm.rememberThread(res.Thread)
	s.mu.Unlock()
	detail, _ := json.Marshal(map[string]string{"model": res.Thread.Model, "cliVersion": res.Thread.CliVersion,
		"userAgent": init.UserAgent})
	s.emit.Emit(sdk.RuntimeEvent{Kind: sdk.EventThreadStarted, RawFrame: s.lastResp.Load(), ThreadRef: res.Thread.ID, Detail: detail})
	return sdk.OpenSessionResponse{ProviderSessionRef: res.Thread.ID, ProviderThreadRef: res.Thread.ID,
		ProviderPid: s.c.Proc.Pid(), Resumed: resumed}, nil
}

// onRecv runs on the read loop for every message; it remembers the raw
// frame of the latest response, for events about it.
func (s *session) onRecv(_ *jsonrpc2.Request, resp *jsonrpc2.Response) {
	if resp != nil {
		s.lastResp.Store(s.c.Frame())
	}
}

// watch waits for codex to exit and reports it: requests still pending
// are cancelled (codex can no longer be answered), turns still running
// fail, and runtime_exited comes last.
func (s *session) watch() {
	s.c.Wait() // every frame codex wrote is handled first
	s.life.Exit(errors.New("codex exited"), func(closed bool) ([]sdk.RuntimeEvent, sdk.RuntimeEvent) {
		var evs []sdk.RuntimeEvent
		for _, q := range s.pending.TakeAll() {
			evs = append(evs, sdk.RuntimeEvent{Kind: sdk.EventRequestResolved, ThreadRef: q.thread, TurnRef: q.turn,
				RequestRef: q.ref, Status: sdk.DecisionCancel})
		}
		report := "codex exited"
		if !closed {
			report = s.c.ExitReport("during the turn")
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		return append(evs, s.norm.exited(report)...), s.c.ExitEvent(s.thread, closed)
	})
}

// gone is the error for what cannot be done in a session that has ended:
// codex's exit, once it has exited (the session's end follows it).
func (s *session) gone(what string) error {
	select {
	case <-s.c.Proc.Done():
		return fmt.Errorf("%s: %w", what, s.c.Exit(""))
	default:
		return sdk.Errorf(sdk.ErrProviderExited, "%s: the session was closed", what)
	}
}

// close ends the session: codex's stdin closes (it exits on its own within
// tens of milliseconds), then providerproc stops what is left.
func (s *session) close(ctx context.Context, cause error) error {
	return s.life.Close(ctx, cause, func() { _ = s.c.Proc.Close(context.WithoutCancel(ctx)) }) // a forced close stays forced
}

// StartTurn implements sdk.Adapter: turn/start on the session's thread. The
// turn's id comes back at once; turn/started and the rest follow as
// notifications.
func (a *Adapter) StartTurn(ctx context.Context, req sdk.StartTurnRequest) (sdk.StartTurnResponse, error) {
	s, err := a.session(req.SessionID)
	if err != nil {
		return sdk.StartTurnResponse{}, err
	}
	if s.ctx.Err() != nil {
		return sdk.StartTurnResponse{}, s.gone("start turn")
	}
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	s.mu.Lock()
	s.norm.expectTurn(req.ClientTurnID)
	s.mu.Unlock()
	var res turnResult
	if err := s.c.Call(ctx, "turn/start", turnStartParams{ThreadID: s.thread,
		Input: []userInput{{Type: "text", Text: req.Input.Text}}}, &res); err != nil {
		s.mu.Lock()
		s.norm.expectTurn("") // a late turn/started for it must not take the next turn's id
		s.mu.Unlock()
		return sdk.StartTurnResponse{}, fmt.Errorf("start turn: %w", err)
	}
	if res.Turn.ID == "" {
		return sdk.StartTurnResponse{}, errors.New("start turn: codex returned a turn without an id")
	}
	s.mu.Lock()
	s.norm.turnStarted(s.thread, res.Turn.ID)
	s.mu.Unlock()
	return sdk.StartTurnResponse{TurnRef: res.Turn.ID}, nil
}

// targetTurn is the turn a steer or an interrupt is about: the one named,
// else the root thread's turn in progress ("" when none).
func (s *session) targetTurn(ref string) string {
	if ref != "" {
		return ref
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.norm.activeTurn(s.thread)
}

// SteerTurn implements sdk.Steerer: turn/steer adds the input to the
// running turn. codex refusing it (no active turn, another turn active) is
// an error the host shows.
func (a *Adapter) SteerTurn(ctx context.Context, req sdk.SteerTurnRequest) error {
	s, err := a.session(req.SessionID)
	if err != nil {
		return err
	}
	turn := s.targetTurn(req.TurnRef)
	if turn == "" {
		return sdk.Errorf(sdk.ErrBusy, "steer: no turn is running on thread %s", s.thread)
	}
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	err = s.c.Call(ctx, "turn/steer", turnSteerParams{ThreadID: s.thread,
		Input: []userInput{{Type: "text", Text: req.Input.Text}}, ExpectedTurnID: turn}, nil)
	var rpcErr *jsonrpc2.Error
	if errors.As(err, &rpcErr) {
		return sdk.Errorf(sdk.ErrBusy, "steer turn %s: codex refused it: %s", turn, rpcErr.Message)
	}
	if err != nil {
		return fmt.Errorf("steer turn %s: %w", turn, err)
	}
	return nil
}

// InterruptTurn implements sdk.Adapter: turn/interrupt. The turn ends when
// codex says so (turn/completed, status interrupted).
func (a *Adapter) InterruptTurn(ctx context.Context, req sdk.InterruptTurnRequest) error {
	s, err := a.session(req.SessionID)
	if err != nil {
		return err
	}
	turn := s.targetTurn(req.TurnRef)
	if turn == "" {
		return nil // nothing to stop; the acknowledgement is still true
	}
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	if err := s.c.Call(ctx, "turn/interrupt", turnInterruptParams{ThreadID: s.thread, TurnID: turn}, nil); err != nil {
		return fmt.Errorf("interrupt turn %s: %w", turn, err)
	}
	return nil
}

// RespondToRequest implements sdk.Adapter.
func (a *Adapter) RespondToRequest(ctx context.Context, req sdk.RespondToRequestRequest) error {
	s, err := a.sessions.ForRequest(req.SessionID, req.RequestRef)
	if err != nil {
		return err
	}
	q, err := s.pending.Get(req.RequestRef)
	if err != nil {
		return err
	}
	result, rerr, err := reply(q.serverRequest, req.Decision, req.Answers)
	if err != nil {
		return err
	}
	if _, ok := s.pending.Take(req.RequestRef); !ok {
		// Withdrawn by codex meanwhile (and resolved so).
		return sdk.Errorf(sdk.ErrUnknownRequest, "request %q", req.RequestRef)
	}
	// The resolution is emitted before the reply: the reply lets codex go
	// on, and what it does next (even ending the turn) must come after.
	s.emit.Emit(sdk.RuntimeEvent{Kind: sdk.EventRequestResolved, ThreadRef: q.thread, TurnRef: q.turn,
		RequestRef: req.RequestRef, RequestKind: q.kind, Status: req.Decision})
	if rerr != nil {
		err = s.c.RPC.ReplyWithError(s.ctx, q.id, &jsonrpc2.Error{Code: rerr.Code, Message: rerr.Message})
	} else {
		err = s.c.RPC.Reply(s.ctx, q.id, result)
	}
	if err != nil {
		return sdk.Errorf(sdk.ErrNotResumable, "answer request %s: codex is gone (%v)", req.RequestRef, err)
	}
	return nil
}

// CloseSession implements sdk.Adapter.
func (a *Adapter) CloseSession(ctx context.Context, sessionID string) error {
	s, err := a.session(sessionID)
	if err != nil {
		return err
	}
	return s.close(ctx, errors.New("session closed"))
}

// handler applies codex's notifications and opens its requests, on the
// read loop, so that events keep the frames' order.
type handler struct{ s *session }

func (h handler) Handle(_ context.Context, _ *jsonrpc2.Conn, r *jsonrpc2.Request) {
	s := h.s
	raw := s.c.Frame()
	var params json.RawMessage
	if r.Params != nil {
		params = *r.Params
	}
	var evs []sdk.RuntimeEvent
	s.mu.Lock()
	switch {
	case r.Notif && r.Method == "serverRequest/resolved":
		evs = s.resolvedByCodex(params)
	case r.Notif:
		evs = s.norm.notification(r.Method, params)
	default:
		// Registered here, on the read loop, so that a frame that follows
		// it (an interrupt's resolution) finds it pending.
		ref := requestRef(r.ID)
		var q *serverRequest
		q, evs = s.norm.openRequest(ref, r.Method, params)
		s.pending.Open(ref, &pendingRequest{serverRequest: q, id: r.ID})
	}
	s.mu.Unlock()
	for _, ev := range evs {
		ev.RawFrame = raw
		s.emit.Emit(ev)
	}
}

// requestRef names a server request by its JSON-RPC id (unique per codex
// connection, so per session).
func requestRef(id jsonrpc2.ID) string { return "req-" + id.String() }

// resolvedByCodex handles serverRequest/resolved. A request the host
// answered was resolved when the answer went out; one codex withdrew on
// its own (its turn was interrupted) is resolved here as cancelled.
// Called with s.mu held.
func (s *session) resolvedByCodex(params json.RawMessage) []sdk.RuntimeEvent {
	var p requestResolvedNotification
	if err := decodeParams("serverRequest/resolved", params, &p); err != nil {
		return []sdk.RuntimeEvent{{Kind: sdk.EventDiagnostic, Title: "malformed frame", Text: err.Error()}}
	}
	var id jsonrpc2.ID
	var n int64
	var str string
	switch {
	case json.Unmarshal(p.RequestID, &n) == nil:
		id = jsonrpc2.ID{Num: uint64(n)}
	case json.Unmarshal(p.RequestID, &str) == nil:
		id = jsonrpc2.ID{Str: str, IsString: true}
	default:
		return nil
	}
	ref := requestRef(id)
	q, ok := s.pending.Take(ref)
	if !ok {
		return nil
	}
	return []sdk.RuntimeEvent{{Kind: sdk.EventRequestResolved, ThreadRef: q.thread, TurnRef: q.turn, RequestRef: ref,
		RequestKind: q.kind, Status: sdk.DecisionCancel, Text: "codex withdrew the request"}}
}

var (
	_ sdk.Steerer    = (*Adapter)(nil)
	_ sdk.Rollbacker = (*Adapter)(nil)
)
