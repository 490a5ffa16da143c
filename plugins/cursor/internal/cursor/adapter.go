package cursor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/baton-run/baton/sdk"
	"github.com/baton-run/baton/sdk/clock"
	"github.com/baton-run/baton/sdk/framelog"
	"github.com/baton-run/baton/sdk/lineproc"
	"github.com/baton-run/baton/sdk/providerproc"
	"github.com/baton-run/baton/sdk/sessions"
)

// Version is the plugin's version.
const Version = "0.1.0"

// Runtime policies. Print mode has no approval channel: without --force
// the CLI runs only what its own permission config allows and refuses the
// rest (the call completes "rejected", as under the host's default of
// declining); "force" passes --force, so every command runs unless the
// config denies it.
const (
	PolicyDefault = ""
	PolicyForce   = "force"
)

// lingerAfterResult is how long a process may live on after its result
// before its group gets SIGTERM: the turn is over, and the next turn's
// process must not wait on a CLI that hangs at exit.
const lingerAfterResult = 5 * time.Second

// Args are the arguments the plugin appends to the configured command for
// a turn: print mode, stream-json with partial output (text streams as it
// is written), the workspace trusted (a headless run cannot answer the
// trust prompt), the chat to resume, and the prompt as a positional
// argument after "--" (so a prompt that starts with "-" is not a flag).
func Args(cwd, model, resume string, force bool, prompt string) []string {
	a := []string{"-p", "--output-format", "stream-json", "--stream-partial-output", "--trust", "--workspace", cwd}
	if model != "" {
		a = append(a, "--model", model)
	}
	if resume != "" {
		a = append(a, "--resume", resume)
	}
	if force {
		a = append(a, "--force")
	}
	return append(a, "--", prompt)
}

// Adapter drives cursor-agent. It implements sdk.Adapter only: no native
// steering (the host restarts the attempt), no rollback (the host starts a
// fresh chat with a handoff), no approvals (print mode has no channel).
type Adapter struct {
	log      hclog.Logger
	clock    clock.Clock
	sessions sessions.Table[*session]
}

// Option configures an Adapter.
type Option func(*Adapter)

// WithClock sets the clock the adapter's timeouts read: how long a process
// may linger after its result, the grace before SIGKILL, the waits for a
// process to exit (default: the system clock).
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
	return sdk.Description{Name: "cursor", Version: Version, WireProtocol: WireProtocol,
		Capabilities: sdk.Capabilities{Interrupt: true, Resume: true},
		Notes: map[string]string{
			sdk.NoteSteering:  "print mode takes one prompt per process",
			sdk.NoteInterrupt: "SIGTERM to the turn's process group",
			sdk.NoteApprovals: "print mode has no approval channel; the CLI's own permissions decide, `--force` with runtime policy `force`",
			sdk.NoteSubagents: "no child turns: the `task` tool call is one subagent item of the root turn, its own steps are not streamed",
			sdk.NoteRollback:  "a chat cannot drop turns",
			sdk.NoteResume:    "`--resume CHAT_ID` on the next turn's process",
			sdk.NoteMCP:       mcpNote,
		}}
}

// mcpNote says why the plugin takes no MCP server (Description has no
// MCPTransports, so sdk.CheckMCPServers refuses every one, naming it).
// cursor-agent reads MCP servers only from .cursor/mcp.json in the
// workspace and ~/.cursor/mcp.json: no flag or variable names another
// file. Writing the host's servers into the workspace would put their
// secrets where the agent's edits, git and the host's checkpoints see them
// (and clash with a project's own file); writing into ~/.cursor would
// change every cursor run of the user, and a HOME of the plugin's own
// would lose the user's login.
const mcpNote = "none from the host: cursor-agent reads MCP servers only from .cursor/mcp.json in the workspace or ~/.cursor/mcp.json, " +
	"and writing the host's servers (and their secrets) into either would leave them where the agent, git and checkpoints see them; " +
	"servers in those files are the CLI's own"

// session is one chat, continued by one process per turn. Between turns
// no process runs.
type session struct {
	id     string
	cwd    string
	model  string
	force  bool
	cmd    sdk.ProviderCommand
	log    hclog.Logger
	clock  clock.Clock
	life   *sessions.Lifecycle
	emit   sdk.Emitter   // the session's life: nothing after runtime_exited
	frames *framelog.Log // the session's raw frames, every process's

	mu    sync.Mutex
	norm  *normalizer
	turns int
	cur   *turnProc // the latest process; nil before the first
}

// turnProc is one turn's process.
type turnProc struct {
	proc   *lineproc.Process
	clock  clock.Clock
	turn   string
	exited chan struct{} // closed once its end is reported

	mu          sync.Mutex
	interrupted bool // the host asked it to stop (or closed the session)
	closing     bool
}

// signal sends sig to the process's whole group at once.
func (tp *turnProc) signal(sig syscall.Signal) {
	_ = tp.proc.Signal(sig)
}

// stop ends the process group: SIGTERM at once, SIGKILL after the grace
// period.
func (tp *turnProc) stop() {
	tp.signal(syscall.SIGTERM)
	t := tp.clock.NewTimer(providerproc.GracePeriod)
	go func() { // ends with the process, or SIGKILL ends it
		defer t.Stop()
		select {
		case <-tp.proc.Done():
		case <-t.C():
			tp.signal(syscall.SIGKILL)
		}
	}()
}

// report says in one sentence how the process ended and why, as far as
// it said (what it printed that was not an event, the end of its stderr),
// as every plugin says a provider's death mid-turn.
func (tp *turnProc) report() string { return tp.proc.ExitReport("during the turn") }

// ResumeSession implements sdk.Resumer: OpenSession continues
// req.ResumeThreadRef when it is set.
func (a *Adapter) ResumeSession(ctx context.Context, req sdk.OpenSessionRequest, emit sdk.Emitter) (sdk.OpenSessionResponse, error) {
	return a.OpenSession(ctx, req, emit)
}

// OpenSession implements sdk.Adapter. No process starts until a turn does;
// a chat to resume is taken as resumed (its id goes with --resume on every
// turn; a process that names another chat is reported then).
func (a *Adapter) OpenSession(ctx context.Context, req sdk.OpenSessionRequest, emit sdk.Emitter) (sdk.OpenSessionResponse, error) {
	if !filepath.IsAbs(req.Cwd) {
		return sdk.OpenSessionResponse{}, sdk.Errorf(sdk.ErrInvalid, "open session: cwd %q is not absolute", req.Cwd)
	}
	if len(req.Command.Argv) == 0 {
		return sdk.OpenSessionResponse{}, sdk.Errorf(sdk.ErrInvalid, "open session: no provider command")
	}
	var force bool
	switch req.RuntimePolicy {
	case PolicyDefault:
	case PolicyForce:
		force = true
	default:
		return sdk.OpenSessionResponse{}, sdk.Errorf(sdk.ErrInvalid,
			"open session: runtime policy %q: want empty (the CLI's own permissions; what they do not allow is refused) or %q (--force)",
			req.RuntimePolicy, PolicyForce)
	}
	if err := sdk.CheckMCPServers("cursor", nil, req.MCPServers); err != nil {
		return sdk.OpenSessionResponse{}, sdk.Errorf(sdk.ErrInvalid, "open session: %v", err)
	}
	frames, err := framelog.Open(req.RawFrameLog, 0)
	if err != nil {
		return sdk.OpenSessionResponse{}, fmt.Errorf("open session: %w", err)
	}
	cwd := filepath.Clean(req.Cwd)
	life := sessions.NewLifecycle(emit)
	s := &session{id: req.SessionID, cwd: cwd, model: req.Model, force: force, cmd: req.Command,
		log: a.log.With("session", req.SessionID), clock: a.clock, life: life, emit: life, frames: frames,
		norm: newNormalizer(cwd, req.ResumeThreadRef)}
	a.sessions.Add(req.SessionID, s, life.Done())
	return sdk.OpenSessionResponse{ProviderSessionRef: req.ResumeThreadRef, ProviderThreadRef: req.ResumeThreadRef,
		Resumed: req.ResumeThreadRef != ""}, nil
}

// name is how reports name the CLI: the configured command's base name.
func (s *session) name() string { return filepath.Base(s.cmd.Argv[0]) }

// waitExitTimeout bounds how long a turn waits for the process of the turn
// before it (whose result came) to exit.
const waitExitTimeout = lingerAfterResult + providerproc.GracePeriod + time.Second

// StartTurn implements sdk.Adapter: a process for the turn, with the prompt
// and the chat to resume. Its turn ref is the session's and the turn's
// number (cursor has no turn ids).
func (a *Adapter) StartTurn(ctx context.Context, req sdk.StartTurnRequest) (sdk.StartTurnResponse, error) {
	s, err := a.sessions.Get(req.SessionID)
	if err != nil {
		return sdk.StartTurnResponse{}, err
	}
	s.mu.Lock()
	if s.life.Closed() {
		s.mu.Unlock()
		return sdk.StartTurnResponse{}, sdk.Errorf(sdk.ErrUnknownSession, "start turn: session %s is closed", s.id)
	}
	if prev := s.cur; prev != nil {
		if !s.norm.done() {
			s.mu.Unlock()
			return sdk.StartTurnResponse{}, sdk.Errorf(sdk.ErrBusy, "start turn: a turn is running")
		}
		// The turn before has its result; its process may still be
		// exiting, and the chat is not to be resumed under it.
		s.mu.Unlock()
		t := s.clock.NewTimer(waitExitTimeout)
		select {
		case <-prev.exited:
			t.Stop()
		case <-t.C():
			return sdk.StartTurnResponse{}, sdk.Errorf(sdk.ErrBusy, "start turn: the process of the turn before did not exit")
		case <-ctx.Done():
			t.Stop()
			return sdk.StartTurnResponse{}, ctx.Err()
		}
		s.mu.Lock()
		if s.life.Closed() || s.cur != prev {
			s.mu.Unlock()
			return sdk.StartTurnResponse{}, sdk.Errorf(sdk.ErrBusy, "start turn: the session changed while waiting")
		}
	}
	defer s.mu.Unlock()
	s.turns++
	turn := fmt.Sprintf("%s/turn-%d", s.id, s.turns)
	args := Args(s.cwd, s.model, s.norm.chat, s.force, req.Input.Text)
	argv := append(append([]string(nil), s.cmd.Argv...), args...)
	invocation, _ := json.Marshal(map[string][]string{"argv": args})
	raw := s.frames.Append(framelog.Out, invocation)
	// The prompt is an argument: stdin closes at once, or the CLI would
	// wait for it to end before it starts.
	proc, err := lineproc.Start(lineproc.Config{Name: s.name(), Protocol: "stream-json", Command: sdk.ProviderCommand{Argv: argv, Env: s.cmd.Env},
		Dir: s.cwd, Frames: s.frames, Log: s.log, Clock: s.clock, OnLineTooLong: lineproc.TooLongDiagnostic(s.emit)})
	if err != nil {
		return sdk.StartTurnResponse{}, err // it names the command; the host says it started a turn
	}
	tp := &turnProc{proc: proc, clock: s.clock, turn: turn, exited: make(chan struct{})}
	s.cur = tp
	for _, ev := range s.norm.begin(turn, req.ClientTurnID, proc.Pid()) {
		ev.RawFrame = raw
		s.emit.Emit(ev)
	}
	s.norm.notFrame = proc.NotFrame // (begin starts the turn's normalizer afresh)
	go s.run(tp)
	return sdk.StartTurnResponse{TurnRef: turn}, nil
}

// run reads a turn's process until it exits, then ends the turn if its
// result did not.
func (s *session) run(tp *turnProc) {
	defer close(tp.exited)
	// Next ends soon after the process does, even when a grandchild keeps
	// stdout open (lineproc.DrainTimeout).
	lingering := false
	for {
		line, idx, err := tp.proc.Next()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				s.log.Debug("stdout ended", "error", err)
			}
			break
		}
		s.mu.Lock()
		for _, ev := range s.norm.line(line) {
			ev.RawFrame = idx
			s.emit.Emit(ev)
		}
		ended := s.norm.done()
		s.mu.Unlock()
		if ended && !lingering {
			lingering = true
			t := s.clock.NewTimer(lingerAfterResult)
			go func() { // ends with the process, or stops it
				defer t.Stop()
				select {
				case <-tp.proc.Done():
				case <-t.C():
					s.log.Warn("cursor-agent lives on after its result; stopping it")
					tp.stop()
				}
			}()
		}
	}
	// Its stdout ended; one that lives on is stopped: nothing more can
	// come from it.
	tp.proc.Wait()
	// What the CLI left behind in its process group (a command it put in
	// the background) ends with it: the turn's process is the provider's
	// whole life, and nothing else would ever stop them.
	_ = tp.proc.Close(context.Background())
	tp.mu.Lock()
	interrupted, closing := tp.interrupted, tp.closing
	tp.mu.Unlock()
	why := tp.report()
	if closing {
		why = "the session was closed"
	} else if interrupted {
		why = "interrupted: the process was stopped"
	}
	s.mu.Lock()
	if s.cur == tp {
		for _, ev := range s.norm.exited(interrupted, why) {
			s.emit.Emit(ev)
		}
	}
	s.mu.Unlock()
}

// InterruptTurn implements sdk.Adapter: the turn's process group gets
// SIGTERM at once. The turn ends interrupted when the process is gone
// (unless its result came first).
func (a *Adapter) InterruptTurn(ctx context.Context, req sdk.InterruptTurnRequest) error {
	s, err := a.sessions.Get(req.SessionID)
	if err != nil {
		return err
	}
	s.mu.Lock()
	tp := s.cur
	running := tp != nil && !s.norm.done() && (req.TurnRef == "" || req.TurnRef == tp.turn)
	s.mu.Unlock()
	if !running {
		return nil // nothing to stop; the acknowledgement is still true
	}
	tp.mu.Lock()
	tp.interrupted = true
	tp.mu.Unlock()
	tp.stop()
	return nil
}

// CloseSession implements sdk.Adapter: a running process is stopped (its
// turn ends interrupted), then the session's runtime_exited comes. Between
// turns no process runs: the session's end is its close.
func (a *Adapter) CloseSession(ctx context.Context, sessionID string) error {
	s, err := a.sessions.Get(sessionID)
	if err != nil {
		return err
	}
	return s.life.Close(ctx, nil, s.stop)
}

// stop stops the turn's process, if one runs, and reports the session's
// end.
func (s *session) stop() {
	s.mu.Lock()
	tp := s.cur
	running := tp != nil && !s.norm.done()
	s.mu.Unlock()
	if tp != nil {
		if running {
			tp.mu.Lock()
			tp.interrupted, tp.closing = true, true
			tp.mu.Unlock()
			tp.stop()
		}
		t := s.clock.NewTimer(waitExitTimeout)
		select {
		case <-tp.exited:
		case <-t.C():
			tp.signal(syscall.SIGKILL)
			<-tp.exited
		}
		t.Stop()
	}
	s.life.Exit(errors.New("session closed"), func(bool) ([]sdk.RuntimeEvent, sdk.RuntimeEvent) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.frames.Close() // the exit is the session's last event: no frame comes after it
		return nil, sdk.RuntimeEvent{ThreadRef: s.norm.chat, Status: sdk.ExitClosed}
	})
}
