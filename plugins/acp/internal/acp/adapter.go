package acp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/sourcegraph/jsonrpc2"

	"github.com/baton-run/baton/sdk"
	"github.com/baton-run/baton/sdk/clock"
	"github.com/baton-run/baton/sdk/jsonrpcproc"
	"github.com/baton-run/baton/sdk/sessions"
)

// Version is the plugin's version.
const Version = "0.1.0"

// handshakeTimeout bounds initialize and session/new. Agents that install
// themselves on first start can be slow; a hung one must still not hang
// the host.
const handshakeTimeout = 60 * time.Second

// Adapter drives ACP agents. It implements sdk.Adapter; ACP v1 has no
// steering or rollback, so it implements none of the optional interfaces.
type Adapter struct {
	log   hclog.Logger
	clock clock.Clock

	sessions sessions.Table[*session]
}

// Option configures an Adapter.
type Option func(*Adapter)

// WithClock sets the clock a limit's retry hint counts from (default: the
// system clock).
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
		Name:         "acp",
		Version:      Version,
		WireProtocol: fmt.Sprintf("acp/%d", ProtocolVersion),
		Capabilities: sdk.Capabilities{Interrupt: true, Approvals: true, Resume: true},
		// An http server only where the agent's initialize answer says
		// it takes one (mcpServers).
		MCPTransports: mcpTransports,
		Notes: map[string]string{
			sdk.NoteSteering:  "ACP v1 has no input into a running prompt turn",
			sdk.NoteInterrupt: "`session/cancel`",
			sdk.NoteApprovals: "`session/request_permission`",
			sdk.NoteSubagents: "ACP v1 has none",
			sdk.NoteRollback:  "ACP v1 cannot drop turns",
			sdk.NoteResume:    "`session/load`",
		},
	}
}

func (a *Adapter) session(id string) (*session, error) { return a.sessions.Get(id) }

// session is one agent process and its ACP session.
type session struct {
	id   string
	cwd  string
	log  hclog.Logger
	life *sessions.Lifecycle
	emit sdk.Emitter // the session's life: nothing after runtime_exited
	c    *jsonrpcproc.Conn
	ctx  context.Context // ends when the session closes or the agent exits

	// pending are the permission requests waiting for the host's answer,
	// each with the channel its goroutine (counted in permissions) waits
	// on.
	pending     sessions.Requests[chan permissionOutcome]
	permissions sync.WaitGroup

	mu         sync.Mutex
	acpSession string
	norm       *normalizer
	loading    bool
	turnDone   chan struct{} // closed when the running turn has ended
	promptSent chan struct{} // closed when the running turn's prompt is written
	respFrames map[string]uint64
	now        func() time.Time // the adapter's clock
	flavor     *flavor          // the agent's (nil: none), once initialized
}

// ResumeSession implements sdk.Resumer: OpenSession continues
// req.ResumeThreadRef when it is set.
func (a *Adapter) ResumeSession(ctx context.Context, req sdk.OpenSessionRequest, emit sdk.Emitter) (sdk.OpenSessionResponse, error) {
	return a.OpenSession(ctx, req, emit)
}

// OpenSession implements sdk.Adapter: start the agent, initialize, and open
// (or load) an ACP session.
func (a *Adapter) OpenSession(ctx context.Context, req sdk.OpenSessionRequest, emit sdk.Emitter) (sdk.OpenSessionResponse, error) {
	if !filepath.IsAbs(req.Cwd) {
		return sdk.OpenSessionResponse{}, sdk.Errorf(sdk.ErrInvalid, "open session: cwd %q is not absolute", req.Cwd)
	}
	if err := sdk.CheckMCPServers("acp", mcpTransports, req.MCPServers); err != nil {
		return sdk.OpenSessionResponse{}, sdk.Errorf(sdk.ErrInvalid, "open session: %v", err)
	}
	life := sessions.NewLifecycle(emit)
	secrets := sdk.MCPSecrets(req.MCPServers)
	s := &session{id: req.SessionID, cwd: filepath.Clean(req.Cwd), log: redactLogger(a.log.With("session", req.SessionID), secrets),
		life: life, emit: life,
		ctx: life.Context(), respFrames: map[string]uint64{}, now: a.clock.Now}
	c, err := jsonrpcproc.Start(s.ctx, jsonrpcproc.Config{Name: "the agent", Command: req.Command, Dir: s.cwd,
		RawFrameLog: req.RawFrameLog, Redact: secrets, Log: s.log, Handler: handler{s}, OnRecv: s.onRecv,
		OnMalformed: jsonrpcproc.MalformedDiagnostic(s.emit)})
	if err != nil {
		return sdk.OpenSessionResponse{}, err // it names the command; the host says it opened a session
	}
	s.c = c
	go s.watch()

	resp, err := s.handshake(ctx, req)
	if err != nil {
		// An answer it cannot use (an empty initialize result: "version
		// 0"), from an agent on its way out: its exit says why. A request
		// the agent cannot serve (an MCP server it does not take) is the
		// reason itself.
		if !errors.Is(err, sdk.ErrInvalid) {
			err = s.c.Failed(err, "while the session opened")
		}
		_ = s.close(context.Background(), fmt.Errorf("handshake failed: %w", err))
		return sdk.OpenSessionResponse{}, err
	}
	a.sessions.Add(req.SessionID, s, life.Done())
	return resp, nil
}

func (s *session) handshake(ctx context.Context, req sdk.OpenSessionRequest) (sdk.OpenSessionResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, handshakeTimeout)
	defer cancel()
	var init initializeResult
	err := s.c.Call(ctx, "initialize", initializeParams{
		ProtocolVersion:    ProtocolVersion,
		ClientCapabilities: clientCapabilities{FS: fsCapability{ReadTextFile: true, WriteTextFile: true}},
		ClientInfo:         clientInfo{Name: "baton", Version: Version},
	}, &init)
	if err != nil {
		return sdk.OpenSessionResponse{}, err // the call names the method
	}
	f := flavorOf(init.AgentInfo)
	s.mu.Lock()
	s.flavor = f
	s.mu.Unlock()
	if init.ProtocolVersion != ProtocolVersion {
		return sdk.OpenSessionResponse{}, fmt.Errorf("the agent speaks ACP version %d; this plugin speaks %d",
			init.ProtocolVersion, ProtocolVersion)
	}
	// The servers in ACP's form, or the agent's refusal of one, before
	// any session is opened: a server is never dropped.
	servers, err := mcpServers(agentName(init.AgentInfo), init.AgentCapabilities.MCPCapabilities.HTTP, req.MCPServers)
	if err != nil {
		return sdk.OpenSessionResponse{}, sdk.Errorf(sdk.ErrInvalid, "%v", err)
	}
	// A session the agent says needs authentication is asked for again
	// once authenticated, with the method the agent's flavor (or the
	// provider command's environment) takes.
	authed := false
	call := func(method string, params, result any) error {
		err := s.c.Call(ctx, method, params, result)
		if authed || !authRequired(err) {
			return err
		}
		id, aerr := chooseAuth(agentName(init.AgentInfo), f, init.AuthMethods, commandEnv(req.Command))
		if aerr != nil {
			return fmt.Errorf("%s: %w", method, aerr)
		}
		if err := s.c.Call(ctx, "authenticate", authenticateParams{MethodID: id}, nil); err != nil {
			return fmt.Errorf("%s needs authentication, and authenticate with %s failed: %w", method, id, err)
		}
		authed = true
		return s.c.Call(ctx, method, params, result)
	}
	var sessionID string
	var res newSessionResult
	resumed := false
	if req.ResumeThreadRef != "" && init.AgentCapabilities.LoadSession {
		s.mu.Lock()
		s.loading = true
		s.mu.Unlock()
		err = call("session/load", loadSessionParams{SessionID: req.ResumeThreadRef, Cwd: s.cwd, McpServers: servers}, &res)
		s.mu.Lock()
		s.loading = false
		s.mu.Unlock()
		var refused *jsonrpc2.Error
		switch {
		case err == nil:
			sessionID, resumed = req.ResumeThreadRef, true
		case errors.As(err, &refused) && !authRequired(err):
			// The agent answered that it cannot load the session (it is
			// gone): a fresh one, reported as not resumed, so the host tells
			// it the thread so far.
			s.log.Warn("the agent cannot load the session; starting a fresh one", "session", req.ResumeThreadRef, "error", err)
		default:
			return sdk.OpenSessionResponse{}, fmt.Errorf("resume session %s: %w", req.ResumeThreadRef, err)
		}
	}
	if !resumed {
		res = newSessionResult{}
		if err := call("session/new", newSessionParams{Cwd: s.cwd, McpServers: servers}, &res); err != nil {
			return sdk.OpenSessionResponse{}, err // the call names the method
		}
		if res.SessionID == "" {
			return sdk.OpenSessionResponse{}, errors.New("session/new: the agent returned no sessionId")
		}
		sessionID = res.SessionID
	}
	if req.Model != "" {
		if err := s.selectModel(ctx, sessionID, req.Model, res); err != nil {
			return sdk.OpenSessionResponse{}, err
		}
	}
	s.mu.Lock()
	s.acpSession = sessionID
	s.norm = newNormalizer(sessionID, s.id)
	s.norm.mcpServers = serverNames(req.MCPServers)
	s.norm.costKnown = !resumed // a loaded session's cost so far is not known
	s.norm.now = s.now
	s.mu.Unlock()
	s.emit.Emit(sdk.RuntimeEvent{Kind: sdk.EventThreadStarted, ThreadRef: sessionID, Detail: init.AgentInfo})
	return sdk.OpenSessionResponse{ProviderSessionRef: sessionID, ProviderThreadRef: sessionID, ProviderPid: s.c.Proc.Pid(),
		Resumed: resumed}, nil
}

// selectModel makes model the session's, the way the agent's answer offers
// a choice: its config option of category "model" (the protocol's way),
// else its model list (session/set_model). A model the agent does not
// offer is refused, naming those it does; an answer that offers no choice
// leaves the agent's own model, and says so.
func (s *session) selectModel(ctx context.Context, sessionID, model string, res newSessionResult) error {
	for _, o := range res.ConfigOptions {
		if o.Category != "model" || o.Type != "select" {
			continue
		}
		values := o.values()
		if !slices.Contains(values, model) {
			return sdk.Errorf(sdk.ErrInvalid, "model %q: the agent offers %s", model, strings.Join(values, ", "))
		}
		if string(o.CurrentValue) == strconv.Quote(model) {
			return nil
		}
		if err := s.c.Call(ctx, "session/set_config_option", setConfigOptionParams{SessionID: sessionID, ConfigID: o.ID, Value: model}, nil); err != nil {
			return fmt.Errorf("model %q: %w", model, err)
		}
		return nil
	}
	if m := res.Models; m != nil && len(m.AvailableModels) > 0 {
		var ids []string
		for _, a := range m.AvailableModels {
			ids = append(ids, a.ModelID)
		}
		if !slices.Contains(ids, model) {
			return sdk.Errorf(sdk.ErrInvalid, "model %q: the agent offers %s", model, strings.Join(ids, ", "))
		}
		if m.CurrentModelID == model {
			return nil
		}
		if err := s.c.Call(ctx, "session/set_model", setModelParams{SessionID: sessionID, ModelID: model}, nil); err != nil {
			return fmt.Errorf("model %q: %w", model, err)
		}
		return nil
	}
	detail, _ := json.Marshal(map[string]string{"model": model, "why": "the agent's answer offers no choice of model: it runs its own"})
	s.emit.Emit(sdk.RuntimeEvent{Kind: sdk.EventDiagnostic, Title: "model not chosen", Detail: detail})
	return nil
}

// authRequired says whether err is the agent's "authentication
// required" (ACP's -32000).
func authRequired(err error) bool {
	var e *jsonrpc2.Error
	return errors.As(err, &e) && e.Code == -32000
}

// commandEnv reads the agent's environment: the provider command's own
// entries, then the plugin's (which the agent inherits).
func commandEnv(c sdk.ProviderCommand) func(string) string {
	return func(key string) string {
		for _, kv := range slices.Backward(c.Env) {
			if k, v, ok := strings.Cut(kv, "="); ok && k == key {
				return v
			}
		}
		return os.Getenv(key)
	}
}

// onRecv runs on the read loop for every message; it remembers which raw
// frame answered each of our requests.
func (s *session) onRecv(_ *jsonrpc2.Request, resp *jsonrpc2.Response) {
	if resp != nil {
		s.mu.Lock()
		s.respFrames[resp.ID.String()] = s.c.Frame()
		s.mu.Unlock()
	}
}

// watch waits for the agent to exit and reports it: the running turn ends
// (its prompt call fails now that the conn is closed), the permission
// requests still pending are resolved cancelled, and runtime_exited comes
// last.
func (s *session) watch() {
	s.c.Wait() // every frame the agent wrote is handled first
	s.life.Exit(errors.New("agent exited"), func(closed bool) ([]sdk.RuntimeEvent, sdk.RuntimeEvent) {
		s.mu.Lock()
		turn := s.turnDone
		s.mu.Unlock()
		if turn != nil {
			<-turn
		}
		s.cancelPending()
		s.permissions.Wait() // each emits its resolution
		s.mu.Lock()
		defer s.mu.Unlock()
		return nil, s.c.ExitEvent(s.acpSession, closed)
	})
}

// gone is the error for what cannot be done in a session that has ended:
// the agent's exit, once it has exited (the session's end follows it).
func (s *session) gone(what string) error {
	select {
	case <-s.c.Proc.Done():
		return fmt.Errorf("%s: %w", what, s.c.Exit(""))
	default:
		return sdk.Errorf(sdk.ErrProviderExited, "%s: the session was closed", what)
	}
}

// close ends the session: the agent process group is stopped.
func (s *session) close(ctx context.Context, cause error) error {
	return s.life.Close(ctx, cause, func() { _ = s.c.Proc.Close(context.WithoutCancel(ctx)) }) // a forced close stays forced
}

// StartTurn implements sdk.Adapter: send session/prompt and return; the
// response becomes the turn's terminal event.
func (a *Adapter) StartTurn(ctx context.Context, req sdk.StartTurnRequest) (sdk.StartTurnResponse, error) {
	s, err := a.session(req.SessionID)
	if err != nil {
		return sdk.StartTurnResponse{}, err
	}
	s.mu.Lock()
	if s.turnDone != nil {
		s.mu.Unlock()
		return sdk.StartTurnResponse{}, sdk.Errorf(sdk.ErrBusy, "start turn: a turn is running; ACP agents take one prompt at a time")
	}
	if s.ctx.Err() != nil {
		s.mu.Unlock()
		return sdk.StartTurnResponse{}, s.gone("start turn")
	}
	turnRef, started := s.norm.startTurn()
	started.ClientTurnID = req.ClientTurnID
	done, sent := make(chan struct{}), make(chan struct{})
	s.turnDone, s.promptSent = done, sent
	s.emit.Emit(started)
	s.mu.Unlock()

	go func() {
		defer close(done)
		var res promptResult
		id, wait, err := s.c.DispatchID(s.ctx, "session/prompt", promptParams{SessionID: s.acpSession,
			Prompt: []contentBlock{{Type: "text", Text: req.Input.Text}}})
		close(sent) // an interrupt's cancel may follow it now
		if err == nil {
			err = wait(s.ctx, &res)
		}
		if exit := (*sdk.ProviderExit)(nil); errors.As(err, &exit) {
			exit.When = "during the turn" // as every plugin says a death mid-turn
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		usable := s.ctx.Err() == nil && !errors.Is(err, sdk.ErrProviderExited)
		select {
		case <-s.c.Proc.Done():
			usable = false
		default:
		}
		raw := s.respFrames[id.String()]
		delete(s.respFrames, id.String())
		for _, ev := range s.norm.endTurn(&res, err, usable) {
			ev.RawFrame = raw
			s.emit.Emit(ev)
		}
		s.turnDone = nil
	}()
	return sdk.StartTurnResponse{TurnRef: turnRef}, nil
}

// InterruptTurn implements sdk.Adapter: session/cancel, and every pending
// permission request is answered cancelled, as ACP requires. The turn ends
// when the agent answers the prompt (stopReason cancelled).
func (a *Adapter) InterruptTurn(ctx context.Context, req sdk.InterruptTurnRequest) error {
	s, err := a.session(req.SessionID)
	if err != nil {
		return err
	}
	s.mu.Lock()
	running, sent := s.turnDone != nil, s.promptSent
	s.mu.Unlock()
	if !running {
		return nil // nothing to stop; the acknowledgement is still true
	}
	// The cancel goes after the prompt it cancels: an agent given a
	// cancel first has nothing to cancel, and then runs the prompt.
	select {
	case <-sent:
	case <-ctx.Done():
		return fmt.Errorf("interrupt: %w", context.Cause(ctx))
	}
	if err := s.c.Notify(ctx, "session/cancel", cancelParams{SessionID: s.acpSession}); err != nil {
		return fmt.Errorf("interrupt: %w", err)
	}
	s.cancelPending()
	return nil
}

// RespondToRequest implements sdk.Adapter.
func (a *Adapter) RespondToRequest(ctx context.Context, req sdk.RespondToRequestRequest) error {
	s, err := a.sessions.ForRequest(req.SessionID, req.RequestRef)
	if err != nil {
		return err
	}
	ch, ok := s.pending.Take(req.RequestRef)
	if !ok {
		return sdk.Errorf(sdk.ErrUnknownRequest, "request %q", req.RequestRef)
	}
	ch <- permissionOutcome{Outcome: string(req.Decision)} // buffered: never blocks
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

// cancelPending answers every pending permission request "cancelled".
func (s *session) cancelPending() {
	for _, ch := range s.pending.TakeAll() {
		ch <- permissionOutcome{Outcome: string(sdk.DecisionCancel)} // buffered: never blocks
	}
}

// handler replies to the agent's requests with what session.handle
// returns, except those it answers later itself.
type handler struct{ s *session }

func (h handler) Handle(ctx context.Context, conn *jsonrpc2.Conn, r *jsonrpc2.Request) {
	result, err, later := h.s.handle(r)
	if r.Notif || later {
		return
	}
	var rerr error
	if err != nil {
		rerr = conn.ReplyWithError(ctx, r.ID, err)
	} else {
		rerr = conn.Reply(ctx, r.ID, result)
	}
	if rerr != nil && !errors.Is(rerr, jsonrpc2.ErrClosed) {
		h.s.log.Debug("reply failed", "method", r.Method, "error", rerr)
	}
}

// handle answers the agent's requests and applies its notifications. It runs
// on the read loop, so notifications are applied in order and before the
// response that follows them. A request that waits (a permission) must not
// block the loop: it is answered from its own goroutine.
func (s *session) handle(r *jsonrpc2.Request) (result any, err *jsonrpc2.Error, later bool) {
	raw := s.c.Frame()
	var params []byte
	if r.Params != nil {
		params = *r.Params
	}
	switch r.Method {
	case "session/update":
		s.applyUpdate(params, raw)
		return nil, nil, false
	case "session/request_permission":
		if r.Notif {
			break
		}
		// Registered here, on the read loop, so that an interrupt that
		// follows it in the stream finds it pending.
		ch := make(chan permissionOutcome, 1)
		s.pending.Open(permissionRef(r.ID), ch)
		s.permissions.Go(func() { s.permission(r.ID, ch, params, raw) })
		return nil, nil, true
	case "fs/read_text_file":
		result, err = s.readTextFile(params)
		return result, err, false
	case "fs/write_text_file":
		result, err = s.writeTextFile(params)
		return result, err, false
	}
	s.mu.Lock()
	f := s.flavor
	s.mu.Unlock()
	known := f != nil && slices.Contains(f.Ignores, r.Method)
	if r.Notif && (known || strings.HasPrefix(r.Method, "_")) {
		// An extension notification Baton does not read: ignored, as ACP
		// asks of a client (see flavor).
		s.log.Debug("agent extension notification ignored", "method", r.Method)
		return nil, nil, false
	}
	if !known {
		s.emit.Emit(sdk.RuntimeEvent{Kind: sdk.EventDiagnostic, RawFrame: raw, Title: "unhandled agent method " + r.Method})
	}
	return nil, &jsonrpc2.Error{Code: jsonrpc2.CodeMethodNotFound, Message: fmt.Sprintf("method %q is not supported by this client", r.Method)}, false
}

func (s *session) applyUpdate(params []byte, raw uint64) {
	_, u, err := decodeUpdate(params)
	if err != nil {
		s.emit.Emit(sdk.RuntimeEvent{Kind: sdk.EventDiagnostic, RawFrame: raw, Title: "malformed frame", Text: err.Error()})
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.loading || s.norm == nil {
		return // history replayed by session/load: the host has it already
	}
	for _, ev := range s.norm.update(u) {
		ev.RawFrame = raw
		s.emit.Emit(ev)
	}
}

// permission opens a request, waits for the host's answer (or a cancel),
// and replies to the agent.
func permissionRef(id jsonrpc2.ID) string { return "permission-" + id.String() }

func (s *session) permission(id jsonrpc2.ID, ch chan permissionOutcome, params []byte, raw uint64) {
	ref := permissionRef(id)
	var p permissionParams
	if err := json.Unmarshal(params, &p); err != nil || len(p.Options) == 0 {
		msg := "session/request_permission has no options"
		if err != nil {
			msg = "session/request_permission params: " + err.Error()
		}
		s.pending.Take(ref)
		_ = s.c.RPC.ReplyWithError(s.ctx, id, &jsonrpc2.Error{Code: jsonrpc2.CodeInvalidParams, Message: msg})
		s.emit.Emit(sdk.RuntimeEvent{Kind: sdk.EventDiagnostic, RawFrame: raw, Title: "malformed frame", Text: msg})
		return
	}
	var tool struct {
		ToolCallID string  `json:"toolCallId"`
		Title      *string `json:"title"`
	}
	_ = json.Unmarshal(p.ToolCall, &tool)
	opts := make([]sdk.RequestOption, 0, len(p.Options))
	for _, o := range p.Options {
		opts = append(opts, sdk.RequestOption{ID: o.OptionID, Label: o.Name, Kind: sdk.OptionKind(o.Kind)})
	}
	s.mu.Lock()
	turnRef, thread, title := "", s.acpSession, deref(tool.Title)
	if s.norm != nil {
		turnRef = s.norm.turnRef
		title, _, _ = s.norm.toolTitle(update{Kind: "tool_call", Title: tool.Title})
		s.startAskedTool(p.ToolCall, tool.ToolCallID, raw)
	}
	s.mu.Unlock()
	s.emit.Emit(sdk.RuntimeEvent{Kind: sdk.EventRequestOpened, RawFrame: raw, ThreadRef: thread, TurnRef: turnRef,
		RequestRef: ref, RequestKind: "permission", ItemRef: tool.ToolCallID, Title: title, Options: opts,
		Detail: p.ToolCall})

	var decision sdk.Decision
	select {
	case o := <-ch:
		decision = sdk.Decision(o.Outcome)
	case <-s.ctx.Done():
		decision = sdk.DecisionCancel
	}
	outcome := pickOption(p.Options, decision)
	// The resolution is emitted before the reply: the reply lets the agent
	// go on, and what it does next (even ending the turn) must come after.
	s.emit.Emit(sdk.RuntimeEvent{Kind: sdk.EventRequestResolved, ThreadRef: thread, TurnRef: turnRef,
		RequestRef: ref, Status: decision, Text: outcome.OptionID})
	if err := s.c.RPC.Reply(s.ctx, id, permissionResult{Outcome: outcome}); err != nil {
		s.log.Debug("reply to permission request failed", "request", ref, "error", err)
	}
}

// startAskedTool starts the item of a tool call that a permission request
// names before the agent announced it with a tool_call update (gemini-cli
// 0.61 asks first, then sends only the call's tool_call_update): the
// request's toolCall is the call, as an ACP client takes it. Called with
// s.mu held and s.norm set.
func (s *session) startAskedTool(toolCall json.RawMessage, id string, raw uint64) {
	if s.loading || s.norm.turnRef == "" || id == "" || s.norm.tools[id] {
		return
	}
	var u update
	if json.Unmarshal(toolCall, &u) != nil {
		return
	}
	u.Kind, u.ToolCallID = "tool_call", id
	if u.Status == nil {
		pending := "pending"
		u.Status = &pending
	}
	for _, ev := range s.norm.update(u) {
		ev.RawFrame = raw
		s.emit.Emit(ev)
	}
}

// pickOption chooses the agent's option for a decision by its kind, never
// by its id: ids differ from agent to agent.
func pickOption(opts []permissionOption, d sdk.Decision) permissionOutcome {
	var prefs []string
	switch d {
	case sdk.DecisionAccept:
		prefs = []string{"allow_once", "allow_always"}
	case sdk.DecisionAcceptForSession:
		prefs = []string{"allow_always", "allow_once"}
	case sdk.DecisionDecline:
		prefs = []string{"reject_once", "reject_always"}
	}
	for _, kind := range prefs {
		for _, o := range opts {
			if o.Kind == kind {
				return permissionOutcome{Outcome: "selected", OptionID: o.OptionID}
			}
		}
	}
	return permissionOutcome{Outcome: "cancelled"}
}

// relPath turns an absolute path inside the session's cwd into a path
// relative to it. Symlinks are the business of os.Root, through which every
// file is opened: a link that leads out of the cwd fails there.
func (s *session) relPath(path string) (string, error) {
	if !filepath.IsAbs(path) {
		return "", fmt.Errorf("path %q is not absolute", path)
	}
	rel, err := filepath.Rel(s.cwd, filepath.Clean(path))
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return "", fmt.Errorf("path %q is outside the session's working directory %s", path, s.cwd)
	}
	return rel, nil
}

// inCwd runs f on the session's cwd as an os.Root.
func (s *session) inCwd(method, path string, f func(root *os.Root, rel string) error) *jsonrpc2.Error {
	rel, err := s.relPath(path)
	if err != nil {
		return &jsonrpc2.Error{Code: jsonrpc2.CodeInvalidParams, Message: method + ": " + err.Error()}
	}
	root, err := os.OpenRoot(s.cwd)
	if err != nil {
		return &jsonrpc2.Error{Code: jsonrpc2.CodeInternalError, Message: method + ": " + err.Error()}
	}
	defer root.Close()
	if err := f(root, rel); err != nil {
		code := int64(jsonrpc2.CodeInternalError)
		if strings.Contains(err.Error(), "escapes from parent") || strings.Contains(err.Error(), "path escapes") {
			code = jsonrpc2.CodeInvalidParams
		}
		return &jsonrpc2.Error{Code: code, Message: method + ": " + err.Error()}
	}
	return nil
}

func (s *session) readTextFile(params []byte) (any, *jsonrpc2.Error) {
	var p readTextFileParams
	if err := json.Unmarshal(params, &p); err != nil {
		return nil, &jsonrpc2.Error{Code: jsonrpc2.CodeInvalidParams, Message: "fs/read_text_file params: " + err.Error()}
	}
	var content string
	jerr := s.inCwd("fs/read_text_file", p.Path, func(root *os.Root, rel string) error {
		b, err := root.ReadFile(rel)
		content = string(b)
		return err
	})
	if jerr != nil {
		return nil, jerr
	}
	if p.Line != nil || p.Limit != nil {
		lines := strings.SplitAfter(content, "\n")
		start := 0
		if p.Line != nil && *p.Line > 1 {
			start = min(*p.Line-1, len(lines))
		}
		end := len(lines)
		if p.Limit != nil && *p.Limit >= 0 {
			end = min(start+*p.Limit, len(lines))
		}
		content = strings.Join(lines[start:end], "")
	}
	return map[string]string{"content": content}, nil
}

func (s *session) writeTextFile(params []byte) (any, *jsonrpc2.Error) {
	var p writeTextFileParams
	if err := json.Unmarshal(params, &p); err != nil {
		return nil, &jsonrpc2.Error{Code: jsonrpc2.CodeInvalidParams, Message: "fs/write_text_file params: " + err.Error()}
	}
	jerr := s.inCwd("fs/write_text_file", p.Path, func(root *os.Root, rel string) error {
		if err := root.MkdirAll(filepath.Dir(rel), 0o755); err != nil {
			return err
		}
		return root.WriteFile(rel, []byte(p.Content), 0o644)
	})
	if jerr != nil {
		return nil, jerr
	}
	return nil, nil
}
