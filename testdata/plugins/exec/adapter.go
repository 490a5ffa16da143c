package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/hashicorp/go-hclog"

	"github.com/baton-run/baton/sdk"
	"github.com/baton-run/baton/sdk/clock"
	"github.com/baton-run/baton/sdk/framelog"
	"github.com/baton-run/baton/sdk/providerproc"
	"github.com/baton-run/baton/sdk/sessions"
)

// Version is the plugin's version; WireProtocol names what it speaks to
// its provider: a prompt in, plain text out.
const (
	Version      = "1.0.0"
	WireProtocol = "exec/1"
)

// Settings a session's provider command carries in its Env, or else the
// plugin's own environment (`baton run` gives a command no Env: set them
// where baton runs). Command.Env is passed on to the command too, which
// does no harm.
const (
	// EnvPrompt says how the prompt reaches the command: "arg" (the
	// default: the last argument, or in place of an argument that is
	// exactly PromptPlaceholder) or "stdin" (written to its stdin, which
	// then closes).
	EnvPrompt = "BATON_EXEC_PROMPT"
	// EnvStateDir is where a session's earlier turns are kept for resume
	// (default: $XDG_STATE_HOME/baton-plugin-exec, or
	// ~/.local/state/baton-plugin-exec).
	EnvStateDir = "BATON_EXEC_STATE_DIR"
	// EnvModel is set in the command's environment to the session's
	// model, when the host names one.
	EnvModel = "BATON_EXEC_MODEL"
	// PromptPlaceholder is an argument the prompt replaces.
	PromptPlaceholder = "{prompt}"
)

// Bounds.
const (
	// maxHandoff bounds the earlier turns put before a prompt: the oldest
	// go first.
	maxHandoff = 64 << 10
	// maxDiagnostics is how many stderr lines a turn reports as
	// diagnostics (all are in the raw-frame log); maxDiagLine bounds each.
	maxDiagnostics = 20
	maxDiagLine    = 1 << 10
	// stderrTail is how many stderr lines a failed turn quotes; maxWhy how
	// many bytes of them (their end).
	stderrTail = 5
	maxWhy     = 512
	// drainTimeout bounds how long stdout is read after the process
	// exited (a grandchild may hold it open), and how long the process
	// may live on after it closed its stdout.
	drainTimeout = 2 * time.Second
)

// Adapter runs one process per turn. It implements sdk.Adapter,
// sdk.Interrupter and sdk.Resumer.
type Adapter struct {
	log      hclog.Logger
	clock    clock.Clock
	sessions sessions.Table[*session]
}

// Option configures an Adapter.
type Option func(*Adapter)

// WithClock sets the clock of the adapter's timeouts (default: the system
// clock).
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
	return sdk.Description{Name: "exec", Version: Version, WireProtocol: WireProtocol,
		Capabilities: sdk.Capabilities{Interrupt: true, Resume: true},
		Notes: map[string]string{
			sdk.NoteSteering:  "a command takes one prompt per process; the host interrupts and starts again",
			sdk.NoteInterrupt: "SIGTERM to the turn's process group (SIGKILL after a grace period)",
			sdk.NoteApprovals: "a plain command has no approval channel",
			sdk.NoteSubagents: "a plain command reports no child threads",
			sdk.NoteRollback:  "the plugin keeps the turns, not the command; the host starts a fresh thread with a handoff",
			sdk.NoteResume:    "the thread's earlier turns, kept in a state file, go before the next prompt as a plain-text handoff",
			sdk.NoteSnapshot:  "no provider-side thread to read",
		}}
}

// exchange is one completed turn: what was asked and the answer.
type exchange struct {
	Prompt string `json:"prompt"`
	Answer string `json:"answer"`
}

// state is a thread's state file.
type state struct {
	Thread string     `json:"thread"`
	Turns  []exchange `json:"turns"`
}

// session is one thread, continued by one process per turn.
type session struct {
	id, cwd, thread string
	argv, env       []string
	stdin           bool
	stateFile       string // "" keeps no state
	log             hclog.Logger
	clock           clock.Clock
	life            *sessions.Lifecycle // closed, and runtime_exited last
	emit            sdk.Emitter         // life: nothing after runtime_exited
	frames          *framelog.Log

	mu        sync.Mutex
	history   []exchange
	announced bool // thread_started emitted
	turns     int
	cur       *turn // the latest turn; nil before the first
}

// turn is one turn and its process.
type turn struct {
	ref, client, prompt string
	proc                *providerproc.Process
	exited              chan struct{} // closed once its terminal is emitted

	// Guarded by the session's mu.
	item        string // the answer's item ref ("" until output comes)
	answer      strings.Builder
	ended       bool
	interrupted bool
	closing     bool
	diags       int
	tail        []string
	badLine     bool // the stdout line being read is not text
	malformed   int  // lines that were not text
	lastFrame   uint64
}

// threadRef matches the thread refs the plugin makes.
var threadRef = regexp.MustCompile(`^exec-[0-9a-f]{16}$`)

func newThreadRef() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // never fails
	return "exec-" + hex.EncodeToString(b[:])
}

// OpenSession implements sdk.Adapter. No process starts until a turn does.
func (a *Adapter) OpenSession(ctx context.Context, req sdk.OpenSessionRequest, emit sdk.Emitter) (sdk.OpenSessionResponse, error) {
	s, err := a.newSession(req, emit, newThreadRef())
	if err != nil {
		return sdk.OpenSessionResponse{}, err
	}
	a.sessions.Add(req.SessionID, s, s.life.Done())
	return sdk.OpenSessionResponse{ProviderSessionRef: s.thread, ProviderThreadRef: s.thread}, nil
}

// ResumeSession implements sdk.Resumer. A process per turn has no
// conversation of its own to resume: the thread's completed turns, kept in
// its state file, go before the next prompt. A thread whose file is not
// there (another machine, a state dir gone) is not resumed: a fresh thread
// starts and the response says so.
func (a *Adapter) ResumeSession(ctx context.Context, req sdk.OpenSessionRequest, emit sdk.Emitter) (sdk.OpenSessionResponse, error) {
	ref := req.ResumeThreadRef
	if !threadRef.MatchString(ref) {
		ref = ""
	}
	s, err := a.newSession(req, emit, cmpOr(ref, newThreadRef()))
	if err != nil {
		return sdk.OpenSessionResponse{}, err
	}
	resumed := false
	if ref != "" && s.stateFile != "" {
		st, err := loadState(s.stateFile)
		switch {
		case err == nil && st.Thread == ref:
			s.history, s.announced, resumed = st.Turns, true, true
		case errors.Is(err, os.ErrNotExist):
		default:
			s.log.Warn("resume: state file unreadable; starting a fresh thread", "file", s.stateFile, "error", err)
		}
	}
	if !resumed && s.thread == ref {
		// Nothing to resume: not the thread asked for either.
		s.thread = newThreadRef()
		s.stateFile = stateFile(filepath.Dir(s.stateFile), s.thread)
	}
	a.sessions.Add(req.SessionID, s, s.life.Done())
	return sdk.OpenSessionResponse{ProviderSessionRef: s.thread, ProviderThreadRef: s.thread, Resumed: resumed}, nil
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func (a *Adapter) newSession(req sdk.OpenSessionRequest, emit sdk.Emitter, thread string) (*session, error) {
	if !filepath.IsAbs(req.Cwd) {
		return nil, sdk.Errorf(sdk.ErrInvalid, "open session: cwd %q is not absolute", req.Cwd)
	}
	if len(req.Command.Argv) == 0 || req.Command.Argv[0] == "" {
		return nil, sdk.Errorf(sdk.ErrInvalid, "open session: no command: give the agent's command line (the prompt is appended)")
	}
	if req.RuntimePolicy != "" {
		return nil, sdk.Errorf(sdk.ErrInvalid, "open session: runtime policy %q: exec has none (the command's own settings decide what it may do)", req.RuntimePolicy)
	}
	stdin := false
	switch v := cmpOr(setting(req.Command.Env, EnvPrompt), os.Getenv(EnvPrompt)); v {
	case "", "arg":
	case "stdin":
		stdin = true
	default:
		return nil, sdk.Errorf(sdk.ErrInvalid, "open session: %s=%q: want arg (the default) or stdin", EnvPrompt, v)
	}
	env := slices.Clone(req.Command.Env)
	if req.Model != "" {
		env = append(env, EnvModel+"="+req.Model)
	}
	frames, err := framelog.Open(req.RawFrameLog, 0)
	if err != nil {
		return nil, fmt.Errorf("open session: %w", err)
	}
	life := sessions.NewLifecycle(emit)
	s := &session{id: req.SessionID, cwd: filepath.Clean(req.Cwd), thread: thread, argv: slices.Clone(req.Command.Argv),
		env: env, stdin: stdin, log: a.log.With("session", req.SessionID), clock: a.clock, life: life, emit: life, frames: frames}
	if dir := stateDir(req.Command.Env); dir != "" {
		s.stateFile = stateFile(dir, thread)
	}
	return s, nil
}

// setting is the value of key in env (KEY=VALUE entries, the last wins).
func setting(env []string, key string) string {
	v := ""
	for _, kv := range env {
		if k, val, ok := strings.Cut(kv, "="); ok && k == key {
			v = val
		}
	}
	return v
}

// stateDir is where threads' state files go ("" when there is nowhere).
func stateDir(env []string) string {
	if d := cmpOr(setting(env, EnvStateDir), os.Getenv(EnvStateDir)); d != "" {
		return d
	}
	if d := os.Getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "baton-plugin-exec")
	}
	if home, err := os.UserHomeDir(); err == nil {
		return filepath.Join(home, ".local", "state", "baton-plugin-exec")
	}
	return ""
}

func stateFile(dir, thread string) string { return filepath.Join(dir, thread+".json") }

func loadState(file string) (state, error) {
	var st state
	b, err := os.ReadFile(file)
	if err != nil {
		return st, err
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return st, fmt.Errorf("state file %s: %w", file, err)
	}
	return st, nil
}

// save writes the thread's state file (whole, by rename).
func (s *session) save() error {
	if s.stateFile == "" {
		return nil
	}
	b, _ := json.Marshal(state{Thread: s.thread, Turns: s.history}) // always encodes
	if err := os.MkdirAll(filepath.Dir(s.stateFile), 0o700); err != nil {
		return fmt.Errorf("save thread state: %w", err)
	}
	tmp := s.stateFile + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("save thread state: %w", err)
	}
	if err := os.Rename(tmp, s.stateFile); err != nil {
		return fmt.Errorf("save thread state: %w", err)
	}
	return nil
}

// Handoff is the prompt a turn's process gets: the text alone on a
// thread's first turn; after that, the thread's earlier completed turns as
// a plain-text transcript, then the new message. The earlier turns are cut
// to maxHandoff bytes, the oldest left out first.
func Handoff(earlier []exchange, text string) string {
	if len(earlier) == 0 {
		return text
	}
	var turns []string
	size := 0
	for i := len(earlier) - 1; i >= 0; i-- {
		t := "User: " + earlier[i].Prompt + "\nAssistant: " + strings.TrimRight(earlier[i].Answer, "\n") + "\n"
		if size+len(t) > maxHandoff && len(turns) > 0 {
			break
		}
		turns = append(turns, t)
		size += len(t)
	}
	slices.Reverse(turns)
	var b strings.Builder
	b.WriteString("[Earlier turns of this conversation]\n")
	if left := len(earlier) - len(turns); left > 0 {
		fmt.Fprintf(&b, "(%d earlier turns left out)\n", left)
	}
	b.WriteString(strings.Join(turns, "\n"))
	b.WriteString("\n[New message]\n")
	b.WriteString(text)
	return b.String()
}

// Argv is the command line of a turn: the prompt in place of every
// argument that is PromptPlaceholder, or else after the last argument.
// With the prompt on stdin the command runs as it is.
func Argv(argv []string, prompt string, stdin bool) []string {
	out := slices.Clone(argv)
	if stdin {
		return out
	}
	placed := false
	for i, a := range out {
		if a == PromptPlaceholder {
			out[i], placed = prompt, true
		}
	}
	if !placed {
		out = append(out, prompt)
	}
	return out
}

// name is how reports name the command: its base name.
func (s *session) name() string { return filepath.Base(s.argv[0]) }

// StartTurn implements sdk.Adapter: a process for the turn.
func (a *Adapter) StartTurn(ctx context.Context, req sdk.StartTurnRequest) (sdk.StartTurnResponse, error) {
	s, err := a.sessions.Get(req.SessionID)
	if err != nil {
		return sdk.StartTurnResponse{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.life.Closed() {
		return sdk.StartTurnResponse{}, sdk.Errorf(sdk.ErrUnknownSession, "start turn: session %s is closed", s.id)
	}
	if s.cur != nil && !s.cur.ended {
		return sdk.StartTurnResponse{}, sdk.Errorf(sdk.ErrBusy, "start turn: turn %s is running", s.cur.ref)
	}
	s.turns++
	// The session's id is in the ref: a session that resumes the thread
	// numbers its turns from 1 again, and a ref an earlier session gave
	// would be taken for that turn (see the sdk's Refs).
	tp := &turn{ref: fmt.Sprintf("%s/%s/turn-%d", s.thread, s.id, s.turns), client: req.ClientTurnID, prompt: req.Input.Text,
		exited: make(chan struct{})}
	prompt := Handoff(s.history, req.Input.Text)
	argv := Argv(s.argv, prompt, s.stdin)
	inv := map[string]any{"argv": argv[1:]}
	if s.stdin {
		inv["stdin"] = prompt
	}
	invocation, _ := json.Marshal(inv) // always encodes
	raw := s.frames.Append(framelog.Out, invocation)
	proc, err := providerproc.Start(providerproc.Command{Argv: argv, Env: s.env, Dir: s.cwd, Clock: s.clock,
		Stderr: func(line []byte) { s.stderr(tp, line) }})
	if err != nil {
		return sdk.StartTurnResponse{}, sdk.Errorf(sdk.ErrInvalid, "start turn: %v", err)
	}
	tp.proc = proc
	if s.stdin {
		go func() { // ends when the prompt is written or the process is gone
			_, _ = io.WriteString(proc.Stdin, prompt)
			_ = proc.Stdin.Close()
		}()
	} else {
		_ = proc.Stdin.Close() // a command that reads stdin reads nothing
	}
	s.cur = tp
	if !s.announced {
		s.announced = true
		s.emit.Emit(sdk.RuntimeEvent{Kind: sdk.EventThreadStarted, ThreadRef: s.thread, RawFrame: raw})
	}
	detail, _ := json.Marshal(map[string]int{"pid": proc.Pid()})
	s.emit.Emit(sdk.RuntimeEvent{Kind: sdk.EventTurnStarted, ThreadRef: s.thread, TurnRef: tp.ref, ClientTurnID: tp.client,
		RawFrame: raw, Detail: detail})
	go s.run(tp)
	return sdk.StartTurnResponse{TurnRef: tp.ref}, nil
}

// stderr takes one stderr line of a turn's process: into the raw-frame
// log, the turn's tail, and (the first maxDiagnostics) a diagnostic.
func (s *session) stderr(tp *turn, line []byte) {
	idx := s.frames.Append(framelog.Stderr, line)
	text := strings.ToValidUTF8(string(line), "\uFFFD")
	s.mu.Lock()
	defer s.mu.Unlock()
	tp.tail = append(tp.tail, text)
	if len(tp.tail) > stderrTail {
		tp.tail = tp.tail[1:]
	}
	tp.diags++
	switch {
	case tp.diags <= maxDiagnostics:
		s.emit.Emit(sdk.RuntimeEvent{Kind: sdk.EventDiagnostic, ThreadRef: s.thread, TurnRef: tp.ref, RawFrame: idx,
			Title: s.name() + " stderr", Text: sdk.Clip(text, maxDiagLine, false)})
	case tp.diags == maxDiagnostics+1:
		s.emit.Emit(sdk.RuntimeEvent{Kind: sdk.EventDiagnostic, ThreadRef: s.thread, TurnRef: tp.ref,
			Title: s.name() + " stderr", Text: fmt.Sprintf("more than %d lines: the rest are in the raw-frame log only", maxDiagnostics)})
	}
}

// run streams a turn's stdout as its answer until the process exits, then
// ends the turn.
func (s *session) run(tp *turn) {
	defer close(tp.exited)
	readEnd := make(chan struct{})
	go func() { // ends at the end of stdout, or closes it drainTimeout after the exit
		<-tp.proc.Done()
		t := s.clock.NewTimer(drainTimeout)
		defer t.Stop()
		select {
		case <-readEnd:
		case <-t.C():
			_ = tp.proc.Stdout.Close()
		}
	}()
	buf := make([]byte, 32<<10)
	var pending []byte // the start of a character cut by a read
	for {
		n, err := tp.proc.Stdout.Read(buf)
		if n > 0 {
			pending = append(pending, buf[:n]...)
			k := complete(pending)
			s.output(tp, pending[:k])
			pending = append(pending[:0], pending[k:]...)
		}
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, os.ErrClosed) {
				s.log.Debug("stdout ended", "error", err)
			}
			break
		}
	}
	s.output(tp, pending)
	s.mu.Lock()
	s.lineEnded(tp) // a last line without a newline
	s.mu.Unlock()
	close(readEnd)
	// A process that closed its stdout and lives on can no longer answer.
	t := s.clock.NewTimer(drainTimeout)
	select {
	case <-tp.proc.Done():
	case <-t.C():
		_ = tp.proc.Signal(syscall.SIGTERM)
	}
	t.Stop()
	// Whatever the command left in its process group goes with it.
	_ = tp.proc.Close(context.Background())
	s.end(tp, tp.proc.Err())
}

// complete is how much of b ends at a whole character.
func complete(b []byte) int {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				return i
			}
			break
		}
	}
	return len(b)
}

// output emits a piece of the answer.
func (s *session) output(tp *turn, b []byte) {
	if len(b) == 0 {
		return
	}
	idx := s.frames.Append(framelog.In, b)
	text := strings.ReplaceAll(strings.ToValidUTF8(string(b), "\uFFFD"), "\x00", "\uFFFD")
	s.mu.Lock()
	defer s.mu.Unlock()
	tp.lastFrame = idx
	for rest := b; len(rest) > 0; {
		line, more, ended := bytes.Cut(rest, []byte("\n"))
		if !utf8.Valid(line) || bytes.IndexByte(line, 0) >= 0 {
			tp.badLine = true
		}
		if !ended {
			break
		}
		s.lineEnded(tp)
		rest = more
	}
	if tp.item == "" { // titled with the command's name: who answers
		tp.item = tp.ref + "/answer"
		s.emit.Emit(sdk.RuntimeEvent{Kind: sdk.EventItemStarted, ThreadRef: s.thread, TurnRef: tp.ref, ItemRef: tp.item,
			ItemKind: sdk.ItemAssistantMessage, Title: s.name(), Status: sdk.ItemInProgress, RawFrame: idx})
	}
	tp.answer.WriteString(text)
	s.emit.Emit(sdk.RuntimeEvent{Kind: sdk.EventContentDelta, ThreadRef: s.thread, TurnRef: tp.ref, ItemRef: tp.item,
		ItemKind: sdk.ItemAssistantMessage, Text: text, RawFrame: idx})
}

// lineEnded reports the stdout line that just ended if it was not text
// (bytes that are not UTF-8, or NUL): the malformed frames of a text
// stream, one diagnostic a line (the first maxDiagnostics of a turn),
// however the reads cut the stream. Called with s.mu held.
func (s *session) lineEnded(tp *turn) {
	if !tp.badLine {
		return
	}
	tp.badLine = false
	tp.malformed++
	if tp.malformed <= maxDiagnostics {
		s.emit.Emit(sdk.RuntimeEvent{Kind: sdk.EventDiagnostic, ThreadRef: s.thread, TurnRef: tp.ref, RawFrame: tp.lastFrame,
			Title: "malformed frame", Text: s.name() + " wrote a line on stdout that is not text (bytes that are not UTF-8, or NUL): they are shown as U+FFFD"})
	}
}

// end emits a turn's end once its process exited with err: completed on
// exit status 0, interrupted when the host stopped it, else failed with
// the end of its stderr.
func (s *session) end(tp *turn, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	term := sdk.RuntimeEvent{Kind: sdk.EventTurnTerminal, ThreadRef: s.thread, TurnRef: tp.ref, ThreadUsable: true}
	item := sdk.ItemDone
	switch {
	case tp.interrupted:
		item, term.Status = sdk.ItemDeclined, sdk.TurnInterrupted
		term.Text = "interrupted: the process was stopped"
		if tp.closing {
			term.Text = "the session was closed"
		}
	case err != nil && !errors.Is(err, exec.ErrWaitDelay):
		why := s.name() + " " + exitHow(err)
		if t := tailText(tp.tail); t != "" {
			why += ": " + t
		}
		item, term.Status, term.Text = sdk.ItemFailed, sdk.TurnFailed, why
		term.Failure = &sdk.Failure{Code: "exit_status", Message: why}
	default:
		term.Status = sdk.TurnCompleted
		s.history = append(s.history, exchange{Prompt: tp.prompt, Answer: tp.answer.String()})
		if err := s.save(); err != nil {
			s.log.Warn("the thread cannot be resumed", "error", err)
			s.emit.Emit(sdk.RuntimeEvent{Kind: sdk.EventDiagnostic, ThreadRef: s.thread, TurnRef: tp.ref,
				Title: "the thread cannot be resumed", Text: err.Error()})
		}
	}
	if tp.item != "" {
		s.emit.Emit(sdk.RuntimeEvent{Kind: sdk.EventItemCompleted, ThreadRef: s.thread, TurnRef: tp.ref, ItemRef: tp.item,
			ItemKind: sdk.ItemAssistantMessage, Status: item, Text: tp.answer.String()})
	}
	tp.ended = true
	s.emit.Emit(term)
}

// exitHow says how a process exited, from its exit error.
func exitHow(err error) string {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return "was killed by " + ws.Signal().String()
		}
		return fmt.Sprintf("exited with status %d", ee.ExitCode())
	}
	return "exited (" + err.Error() + ")"
}

// tailText is the end of a process's stderr on one line.
func tailText(tail []string) string {
	var lines []string
	for _, l := range tail {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	return sdk.Clip(strings.Join(lines, "; "), maxWhy, true)
}

// stop ends a turn's process group: SIGTERM at once, SIGKILL after the
// grace period if it is still there.
func (s *session) stop(tp *turn) {
	_ = tp.proc.Signal(syscall.SIGTERM)
	t := s.clock.NewTimer(providerproc.GracePeriod)
	go func() { // ends with the process, or SIGKILL ends it
		defer t.Stop()
		select {
		case <-tp.proc.Done():
		case <-t.C():
			_ = tp.proc.Signal(syscall.SIGKILL)
		}
	}()
}

// InterruptTurn implements sdk.Interrupter: the turn's process group gets
// SIGTERM; the turn ends interrupted once the process is gone.
func (a *Adapter) InterruptTurn(ctx context.Context, req sdk.InterruptTurnRequest) error {
	s, err := a.sessions.Get(req.SessionID)
	if err != nil {
		return err
	}
	s.mu.Lock()
	tp := s.cur
	running := tp != nil && !tp.ended && (req.TurnRef == "" || req.TurnRef == tp.ref)
	if running {
		tp.interrupted = true
	}
	s.mu.Unlock()
	if running {
		s.stop(tp)
	}
	return nil // nothing else to stop; the acknowledgement is still true
}

// CloseSession implements sdk.Adapter: a running turn is stopped (it ends
// interrupted), then runtime_exited comes, the session's last event. Between
// turns no process runs: the session's end is its close.
func (a *Adapter) CloseSession(ctx context.Context, sessionID string) error {
	s, err := a.sessions.Get(sessionID)
	if err != nil {
		return err
	}
	return s.life.Close(ctx, nil, s.close)
}

// close stops the running turn's process, if there is one, waits for the
// turn's end and reports the session's.
func (s *session) close() {
	s.mu.Lock()
	tp := s.cur
	running := tp != nil && !tp.ended
	if running {
		tp.interrupted, tp.closing = true, true
	}
	s.mu.Unlock()
	if running {
		s.stop(tp)
	}
	if tp != nil {
		<-tp.exited // SIGKILL ends a process that ignores SIGTERM
	}
	s.life.Exit(errors.New("session closed"), func(bool) ([]sdk.RuntimeEvent, sdk.RuntimeEvent) {
		s.frames.Close() // no frame comes after the exit
		return nil, sdk.RuntimeEvent{ThreadRef: s.thread, Status: sdk.ExitClosed}
	})
}
