// Package lineproc runs a provider process that speaks NDJSON on its stdio
// without JSON-RPC (Claude Code's stream-json, Cursor's print mode): the
// process in a group of its own, every line both ways and its stderr in the
// raw-frame log, and an exit report that quotes what it printed instead of
// a frame and the end of its stderr (bounded, escaped). A
// plugin reads lines with Next and writes them with Write; the protocol is
// its own. jsonrpcproc puts JSON-RPC on top of it.
package lineproc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"golang.org/x/sys/unix"

	"github.com/baton-run/baton/sdk"
	"github.com/baton-run/baton/sdk/clock"
	"github.com/baton-run/baton/sdk/framelog"
	"github.com/baton-run/baton/sdk/ndjson"
	"github.com/baton-run/baton/sdk/providerproc"
)

// Config says what to start.
type Config struct {
	// Name is how reports name the provider ("claude", "the agent").
	Name string
	// Protocol names what the provider should print on stdout
	// ("JSON-RPC", "stream-json"): an exit report says that a line it
	// printed instead is not that. Empty says nothing of the kind.
	Protocol string
	Command  sdk.ProviderCommand
	Dir      string
	// RawFrameLog is the raw-frame log's path; empty keeps none.
	RawFrameLog string
	// Redact are secrets kept out of the raw-frame log Start opens
	// (framelog.Log.Redact): an MCP server's env values and headers
	// (sdk.MCPSecrets).
	Redact []string
	// Frames, when set, is the raw-frame log to use instead of opening
	// RawFrameLog: a session whose provider is started once per turn keeps
	// one log, with one numbering, across its processes. ExitEvent leaves
	// it open; its owner closes it.
	Frames *framelog.Log
	Log    hclog.Logger
	// Stdin keeps the provider's stdin open for Write. Without it stdin is
	// closed at once: a provider that reads its input to the end before it
	// starts (one process per turn) starts right away.
	Stdin bool
	// OnLineTooLong, when set, is told of each stdout line longer than
	// ndjson.DefaultMaxLine (a *ndjson.LineTooLongError: its length and
	// first bytes); Next skips the line and reads on. Without it Next
	// returns that error. Either way an exit report quotes it.
	OnLineTooLong func(err error)
	// Clock times DrainTimeout and the grace periods of Close (nil: the
	// system clock).
	Clock clock.Clock
}

// Process is a running provider process.
type Process struct {
	Cmd    *providerproc.Process
	Frames *framelog.Log

	name      string
	protocol  string
	clock     clock.Clock
	r         *ndjson.Reader
	tooLong   func(error)
	ownFrames bool          // Frames was opened here, and ExitEvent closes it
	readEnd   chan struct{} // closed when Next reached the end of stdout
	readOnce  sync.Once

	wmu sync.Mutex
	w   *ndjson.Writer

	mu          sync.Mutex
	stderrTail  []string // its last stderrTailLines lines that are not blank
	stderrLines int      // how many lines that are not blank it wrote to stderr
	// other is the first stdout line since the last frame that is not one
	// (an error a CLI prints where it would print frames, a line too long
	// to read), with how many more came after it: an exit report quotes
	// it, beside the end of stderr.
	other     *sdk.NotFrame
	haveOther atomic.Bool // other is set: the next frame clears it
	// framed says the line Next returned last looked like a frame while
	// other was set: it clears other unless NotFrame says it was none.
	framed bool
	// noted says Next has counted the line it returned last as not a
	// frame, so that NotFrame does not count it twice (the reader's own).
	noted bool
}

// stderrTailLines is how many of the provider's last stderr lines an exit
// report quotes (at most sdk.ExitStderrBytes of them), and stderrLogLines
// how many of its first it logs (at debug level): a provider that floods
// its stderr must not flood the plugin's log, which the host shows on the
// user's terminal. The raw-frame log keeps every line.
const (
	stderrTailLines = 5
	stderrLogLines  = 20
)

// DrainTimeout bounds how long stdout is read once the process exited:
// something it started (a grandchild) may keep the pipe open for much
// longer, and what the provider itself wrote has been read by then.
const DrainTimeout = 2 * time.Second

// Start starts the process. It is not bound to a context: it lives until
// Close or until it exits. Next reaches the end of its stdout at most
// DrainTimeout after it exits, whatever keeps the pipe open.
func Start(cfg Config) (*Process, error) {
	frames, own := cfg.Frames, false
	if frames == nil {
		var err error
		if frames, err = framelog.Open(cfg.RawFrameLog, 0); err != nil {
			return nil, err
		}
		frames.Redact(cfg.Redact...)
		own = true
	}
	if cfg.Log == nil {
		cfg.Log = hclog.NewNullLogger()
	}
	p := &Process{Frames: frames, name: cfg.Name, protocol: cfg.Protocol, clock: clock.Or(cfg.Clock), tooLong: cfg.OnLineTooLong, ownFrames: own, readEnd: make(chan struct{})}
	cmd, err := providerproc.Start(providerproc.Command{Argv: cfg.Command.Argv, Env: cfg.Command.Env, Dir: cfg.Dir,
		Clock: p.clock, Stderr: func(line []byte) {
			frames.Append(framelog.Stderr, line)
			line = frames.Redacted(line) // what is quoted of it: a log line, an exit report
			switch n := p.keepStderr(line); {
			case n <= stderrLogLines:
				cfg.Log.Debug("provider stderr", "line", string(line))
			case n == stderrLogLines+1:
				cfg.Log.Debug("provider stderr: more lines are not logged (the raw-frame log keeps them, an exit report quotes the last)",
					"logged", stderrLogLines)
			}
		}})
	if err != nil {
		if own {
			frames.Close()
		}
		return nil, err
	}
	p.Cmd = cmd
	p.r = ndjson.NewReader(cmd.Stdout)
	p.w = ndjson.NewWriter(cmd.Stdin)
	if !cfg.Stdin {
		_ = cmd.Stdin.Close()
	}
	go p.drain()
	return p, nil
}

// drain closes stdout DrainTimeout after the process exited, unless Next
// reached its end first: that ends a read a grandchild would hold.
func (p *Process) drain() {
	<-p.Cmd.Done()
	select {
	case <-p.readEnd:
		return
	default:
	}
	t := p.clock.NewTimer(DrainTimeout)
	defer t.Stop()
	select {
	case <-p.readEnd:
	case <-t.C():
		_ = p.Cmd.Stdout.Close()
	}
}

// Wait waits for the process to exit, once its stdout has ended (Next
// returned an error). A process that closed its stdout and lives on can
// no longer be heard: DrainTimeout after, its group is stopped.
func (p *Process) Wait() {
	t := p.clock.NewTimer(DrainTimeout)
	defer t.Stop()
	select {
	case <-p.Cmd.Done():
		return
	case <-t.C():
	}
	_ = p.Cmd.Signal(syscall.SIGTERM)
	_ = p.Cmd.Close(context.Background()) // SIGKILL if SIGTERM is not enough
}

// keepStderr keeps a stderr line in the tail, unless it is blank, and
// returns how many lines that are not blank the provider has written (0
// for a blank one: it is not logged either).
func (p *Process) keepStderr(line []byte) int {
	if len(bytes.TrimSpace(line)) == 0 {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stderrLines++
	p.stderrTail = append(p.stderrTail, string(line))
	if len(p.stderrTail) > stderrTailLines {
		p.stderrTail = p.stderrTail[1:]
	}
	return p.stderrLines
}

// Next reads the provider's next stdout line and returns it with its index
// in the raw-frame log. It returns io.EOF at the end of the stream. One
// goroutine reads.
func (p *Process) Next() ([]byte, uint64, error) {
	b, err := p.r.Next()
	for tooLong := (*ndjson.LineTooLongError)(nil); errors.As(err, &tooLong); {
		p.noteOther(&sdk.NotFrame{Head: tooLong.Head, Len: tooLong.Len, Limit: tooLong.Limit})
		if p.tooLong == nil {
			break
		}
		p.tooLong(err)
		b, err = p.r.Next()
	}
	if err != nil {
		if !errors.Is(err, ndjson.ErrLineTooLong) {
			p.readOnce.Do(func() { close(p.readEnd) })
		}
		return nil, 0, err
	}
	p.noted = false
	if p.haveOther.Load() {
		p.mu.Lock()
		if p.framed { // the line before was a frame
			p.other, p.framed = nil, false
			p.haveOther.Store(false)
		}
		p.framed = looksLikeFrame(b) && p.other != nil
		p.mu.Unlock()
	}
	if !looksLikeFrame(b) {
		p.NotFrame(b)
		p.noted = true
	}
	return b, p.Frames.Append(framelog.In, b), nil
}

// looksLikeFrame says whether a line may be a frame: every protocol
// lineproc carries has a JSON object on each line. (Whether it is one is
// the protocol's to say: see NotFrame.)
func looksLikeFrame(line []byte) bool {
	t := bytes.TrimSpace(line)
	return len(t) > 0 && t[0] == '{' && t[len(t)-1] == '}'
}

// NotFrame tells the process that line, which Next returned, is not a
// frame of its protocol (a JSON object that is not a message of it): the
// exit report quotes the first such line since the last frame, as it
// quotes a line that is not JSON, and counts the others. It keeps a
// bounded part of line. A line Next took for no frame already is not
// counted again.
func (p *Process) NotFrame(line []byte) {
	if p.noted {
		return
	}
	p.noteOther(&sdk.NotFrame{Head: bytes.Clone(line[:min(len(line), ndjson.HeadBytes)]), Len: int64(len(line))})
}

// WasFrame tells the process that the line Next returned last, though it
// is not JSON, is what the provider's protocol has it print (opencode's
// "listening on" line): the lines before it that were not frames were a
// banner, not why it exits.
func (p *Process) WasFrame() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.other, p.framed = nil, false
	p.haveOther.Store(false)
}

// Write sends one line to the provider's stdin (safe for concurrent use).
// A provider that went away is sdk.ErrProviderExited.
func (p *Process) Write(line []byte) error {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	p.Frames.Append(framelog.Out, line)
	if err := p.w.Write(line); err != nil {
		return sdk.Errorf(sdk.ErrProviderExited, "write to %s: %v", p.name, err)
	}
	return nil
}

// CloseStdin closes the provider's stdin (the end of its input).
func (p *Process) CloseStdin() error {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	return p.Cmd.Stdin.Close()
}

// Signal sends sig to the provider's whole process group at once.
func (p *Process) Signal(sig syscall.Signal) error { return p.Cmd.Signal(sig) }

// Close ends the process group: stdin closed, SIGTERM after a grace
// period, SIGKILL after another.
func (p *Process) Close(ctx context.Context) error { return p.Cmd.Close(ctx) }

// Done is closed when the process has exited.
func (p *Process) Done() <-chan struct{} { return p.Cmd.Done() }

// Pid is the provider's process id.
func (p *Process) Pid() int { return p.Cmd.Pid() }

// Err is the process's exit error (nil for exit status 0), once Done.
func (p *Process) Err() error { return p.Cmd.Err() }

// ExitEvent is the runtime_exited event for the provider's exit (once it
// exited and its stdout was read to the end): closed says the session was
// closed by the host; an exit with an error carries the exit report, but
// for a closed session an exit by SIGTERM, the way it was stopped (Close
// sends it; so does a plugin whose provider does not exit when its stdin
// closes), is not an error. It closes the raw-frame log it opened (not
// Config.Frames): the exit is a session's last event.
func (p *Process) ExitEvent(threadRef string, closed bool) sdk.RuntimeEvent {
	ev := sdk.RuntimeEvent{Kind: sdk.EventRuntimeExited, ThreadRef: threadRef, Status: sdk.ExitExited}
	if closed {
		ev.Status = sdk.ExitClosed
	}
	if err := p.Err(); err != nil && !(closed && terminated(err)) {
		if !closed {
			ev.Status = sdk.ExitFailed
		}
		ev.Failure = &sdk.Failure{Code: "provider_exited", Message: p.ExitReport("")}
	}
	if p.ownFrames {
		p.Frames.Close()
	}
	return ev
}

// terminated says whether a process's exit error is its death by SIGTERM.
func terminated(err error) bool {
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return false
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGTERM
}

// noteOther keeps the first stdout line since the last frame that is not
// a frame, and counts the others.
func (p *Process) noteOther(o *sdk.NotFrame) {
	o.Head = p.Frames.Redacted(o.Head) // an exit report quotes it
	p.mu.Lock()
	defer p.mu.Unlock()
	p.framed = false // the line was none
	if p.other == nil {
		p.other = o
		p.haveOther.Store(true)
		return
	}
	p.other.More++
}

// ExitReport says in one sentence how the provider exited, then when (if
// given: "before answering initialize"), then why, as far as it said: the
// first line it printed on stdout since its last frame that was not one
// (quoted, its start, with its length when cut), and the end of its
// stderr. "the agent exited with status 1 before answering initialize:
// Error: no API key"; "the agent exited with status 1 before answering
// initialize: it printed "Welcome", not JSON-RPC; its stderr ends: Error:
// no API key". It is Exit(when)'s text. Call it once the process exited.
func (p *Process) ExitReport(when string) string { return p.Exit(when).Error() }

// Exit is the provider's exit as an error (sdk.ProviderExit, of kind
// sdk.ErrProviderExited): how it exited, when (if given), and what it said
// (see ExitReport). Call it once the process exited.
func (p *Process) Exit(when string) *sdk.ProviderExit {
	e := &sdk.ProviderExit{Provider: p.name, Protocol: p.protocol, When: when}
	e.Status, e.Signal = exitStatus(p.Cmd.Err())
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.other != nil && !p.framed {
		o := *p.other
		e.NotFrame = &o
	}
	e.Stderr = slices.Clone(p.stderrTail)
	e.StderrLines = p.stderrLines
	return e
}

// Failed is the error for a step that failed with err while the provider
// ran, though not because it exited (an answer the plugin cannot use, a
// refusal, a timeout), when the provider may be on its way out: its stdin
// is closed, and if it then exits within providerproc.GracePeriod with a
// failure (a status other than 0, or a signal), err was a symptom and the
// error is its exit (Exit(when), once its stdout is read to the end). An
// agent that answers initialize with an empty result and dies reads "the
// agent exited with status 3 while the session opened: <its stderr>", not
// "the agent speaks ACP version 0". Otherwise Failed returns err, and the
// provider is its owner's to stop; an err that is already an exit is
// returned as it is. One goroutine must be reading the provider's stdout
// (Next).
func (p *Process) Failed(err error, when string) error {
	var exit *sdk.ProviderExit
	if errors.As(err, &exit) {
		return err
	}
	_ = p.CloseStdin()
	t := p.clock.NewTimer(providerproc.GracePeriod)
	defer t.Stop()
	select {
	case <-p.Done():
	case <-t.C():
		return err // it lives on: its answer was the failure
	}
	if p.Err() == nil {
		return err // it ended as asked, at the end of its input
	}
	// What it printed last is read by DrainTimeout after its exit, even
	// if something it started keeps stdout open.
	d := p.clock.NewTimer(DrainTimeout + time.Second)
	defer d.Stop()
	select {
	case <-p.readEnd:
	case <-d.C():
	}
	return p.Exit(when)
}

// exitStatus is how a process exited, from its exit error: its status, or
// the name of the signal that killed it.
func exitStatus(err error) (int, string) {
	var ee *exec.ExitError
	switch {
	case err == nil, errors.Is(err, exec.ErrWaitDelay):
		// (ErrWaitDelay: it exited 0, and something it started kept its
		// stderr open.)
		return 0, ""
	case errors.As(err, &ee):
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 0, unix.SignalName(ws.Signal())
		}
		return ee.ExitCode(), ""
	}
	// Not reached while providerproc's stderr writer never fails: Wait
	// returns no other error for a process it started.
	return -1, ""
}

// StderrTail is the last few lines the provider wrote to stderr.
func (p *Process) StderrTail() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.stderrTail, "\n")
}

// TooLongDiagnostic is a Config.OnLineTooLong that reports each over-long
// line as a malformed-frame diagnostic (with no raw frame: the line is not
// in the log).
func TooLongDiagnostic(emit sdk.Emitter) func(error) {
	return func(err error) {
		emit.Emit(sdk.RuntimeEvent{Kind: sdk.EventDiagnostic, Title: "malformed frame", Text: err.Error()})
	}
}

// String names the process for logs.
func (p *Process) String() string { return fmt.Sprintf("%s (pid %d)", p.name, p.Pid()) }
