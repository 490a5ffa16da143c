// Package replay is the replay peer: it stands in for a provider process and
// plays a transcript over a byte stream. It sends inbound entries in order,
// waits at each expect_outbound for the client's next frame and compares it,
// and ends as the transcript says. It knows nothing of turns or approvals.
//
// A client frame is checked against its expectation and against its time:
// one that arrives before the emit_inbound entries the transcript has before
// its expectation were due is a mismatch too ("sent too early"). The peer
// plays the emit_inbound entries after an expectation, up to the first that
// waits (afterMs), as the provider's instant answer to the frame it took:
// a frame that arrives after that one is taken is not early for them. So a
// frame is early when it arrived before the client's previous frame was
// taken, where the transcript has the provider answer in between (a client
// that sends two frames without waiting for the answer to the first), or
// during an afterMs wait, before the entry waited for. A frame the
// provider does not answer (transcript.Answered: a JSON-RPC notification
// or response) has nothing the client could wait for, so a frame right
// behind it is not early. The peer stamps each frame with its phase (how
// many answered expectations it has taken and waits it has ended) when it
// arrives, and looks at the stamps when it starts a run of emit_inbound
// entries.
package replay

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/baton-run/baton/sdk/clock"
	"github.com/baton-run/baton/sdk/ndjson"
	"github.com/baton-run/baton/sdk/transcript"
)

// Exit codes of a peer process, so a test can tell why a peer ended.
const (
	ExitOK           = 0
	ExitRuntimeError = 1 // the transcript's runtime_exit said error
	ExitBadUsage     = 2 // bad flags or a bad transcript
	ExitMismatch     = 3 // an outbound frame differed from its expectation, or came too early
	ExitLeftover     = 4 // the client went away with entries unused
	ExitUnexpected   = 5 // a frame arrived after the transcript ended
	ExitIO           = 6 // reading or writing the stream failed
	ExitCancelled    = 130
)

// Config is one playback.
type Config struct {
	Transcript *transcript.Transcript
	// Workspace is the directory "<workspace>" stands for and where
	// workspace entries are applied.
	Workspace string
	// Speed scales afterMs waits: 1 is real time, 2 twice as fast, 0 no
	// waits at all (see Delay).
	Speed float64
	// Clock paces the afterMs waits (nil: clock.System).
	Clock clock.Clock
	In    io.Reader // frames from the client
	Out   io.Writer // frames to the client; closed (if an io.Closer) by a runtime_exit with closeStdout
	Err   io.Writer // the process's stderr: a runtime_exit's stderr text (nil: discarded)
	// Trace, when set, gets a line for each step the peer takes that a
	// client cannot see: an entry consumed, the client's stdin closing
	// while the peer waits. Tests read it to know where the peer is.
	Trace io.Writer
	// StateFile, when set, keeps the cursor between processes: the peer
	// saves the index of the next entry each time it consumes one, so a
	// peer that ends at a runtime_exit entry leaves the entry after it, and
	// one that ends at a mismatch or a crash leaves the entry it was at. The
	// next peer started with the same file continues there. That is how a
	// provider that is restarted (a resumed session, a process per turn)
	// is replayed from one transcript.
	StateFile string
	// Invocation, when not nil, is the arguments the client started the
	// provider with (the peer's own arguments after "--"). They are the
	// process's first outbound frame, {"argv": [...]}, checked like any
	// other: a plugin that appends its own flags to the provider command is
	// checked on them.
	Invocation []string
	// Killed ends a runtime_exit that waits for a kill (wait "kill"),
	// which nothing else ends: not its stdin closing, not ctx. Nil: never;
	// the peer process ends only when SIGKILL kills it.
	Killed <-chan struct{}
}

// PeerArgs are the arguments a peer command for t ends with, after
// --transcript and the other flags: --listen for an HTTP transcript (the
// peer is a server, as the provider is), and "--" when t checks the
// arguments the client appends (transcript.Invoked).
func PeerArgs(t *transcript.Transcript) []string {
	var args []string
	if t.IsHTTP() {
		args = append(args, "--listen", "127.0.0.1:0")
	}
	if t.Invoked() {
		args = append(args, "--")
	}
	return args
}

// CheckSpeed says whether speed can scale afterMs waits: a finite number,
// not negative.
func CheckSpeed(speed float64) error {
	if math.IsNaN(speed) || math.IsInf(speed, 0) || speed < 0 {
		return fmt.Errorf("speed %v: want a finite number, 0 or more", speed)
	}
	return nil
}

// Delay is the wait before an emit_inbound entry of afterMs played at
// speed (CheckSpeed): afterMs/speed milliseconds, none at speed 0 or for
// afterMs 0 or less, and at most the longest time.Duration.
func Delay(afterMs int, speed float64) time.Duration {
	if afterMs <= 0 || speed <= 0 || math.IsNaN(speed) {
		return 0
	}
	d := float64(afterMs) * float64(time.Millisecond) / speed
	if d >= math.MaxInt64 { // also +Inf: a float that does not fit
		return math.MaxInt64
	}
	return time.Duration(d)
}

type state struct {
	Cursor int `json:"cursor"`
	// Next names the entry at the cursor, for a reader.
	Next string `json:"next,omitempty"`
}

func loadState(file string) (int, error) {
	b, err := os.ReadFile(file)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	var st state
	if err := json.Unmarshal(b, &st); err != nil {
		return 0, fmt.Errorf("state file %s: %w", file, err)
	}
	return st.Cursor, nil
}

func saveState(file string, st state) error {
	b, _ := json.Marshal(st) // a state always encodes
	tmp := file + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, file)
}

// Error is why a playback failed, with the exit code a peer process uses.
type Error struct {
	Code int
	Msg  string
	// Signal, when set, is the signal the process dies by instead of
	// exiting with Code (a runtime_exit entry's signal).
	Signal string
	// Quiet says the transcript said what the process writes on stderr:
	// Main adds nothing of its own.
	Quiet bool
}

func (e *Error) Error() string { return e.Msg }

// ExitCode maps a Run result to a process exit code.
func ExitCode(err error) int {
	if err == nil {
		return ExitOK
	}
	var pe *Error
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ExitIO
}

type line struct {
	b   []byte
	err error
	// phase is the peer's phase when the frame arrived.
	phase int64
}

// peer is the state of one stdio playback.
type peer struct {
	cfg    Config
	m      *transcript.Matcher
	bw     *bufio.Writer
	out    *ndjson.Writer
	frames chan line // from the one reader of cfg.In; closed at its end
	// held is a frame taken from frames to look at its stamp, first in
	// line for the next expectation.
	held *line
	// phase counts the answered expectations taken and the waits ended:
	// the peer's instants, which the reader stamps frames with.
	phase atomic.Int64
	// invocation is the frame the process's arguments make, taken by the
	// first expectation; it does not arrive, so it is never early.
	invocation []byte
	// buffered says frames are written to bw and not yet flushed.
	buffered bool
}

// Run plays the transcript until it ends, the client closes the stream, or
// ctx is done.
func Run(ctx context.Context, cfg Config) error {
	p := &peer{cfg: cfg, m: transcript.NewMatcher(cfg.Workspace)}
	// Frames the transcript emits back to back are written together: the
	// buffer is flushed before anything that waits (an afterMs, the
	// client's next frame, the end) and before a workspace change.
	p.bw = bufio.NewWriter(cfg.Out)
	p.out = ndjson.NewWriter(p.bw)
	if cfg.Invocation != nil {
		p.invocation = transcript.InvocationFrame(cfg.Invocation)
	}
	// One reader owns In; frames queue until an expectation takes them.
	// It ends when In does (the client closing the stream, or the process
	// ending).
	p.frames = make(chan line, 1024)
	go func() {
		r := ndjson.NewReader(cfg.In)
		for {
			b, err := r.Next()
			if err != nil {
				if err != io.EOF {
					p.frames <- line{err: err, phase: p.phase.Load()}
				}
				close(p.frames)
				return
			}
			p.frames <- line{b: b, phase: p.phase.Load()}
		}
	}()

	t := cfg.Transcript
	start, err := cfg.start()
	if err != nil {
		return err
	}
	for i := start; i < len(t.Entries); i++ {
		e := t.Entries[i]
		switch e.Type {
		case transcript.TypeEmitInbound:
			if err := p.emit(ctx, i, e); err != nil {
				return err
			}
		case transcript.TypeExpectOutbound:
			if err := p.flush(i); err != nil {
				return err
			}
			if err := p.expect(ctx, i, e); err != nil {
				return err
			}
			if err := cfg.save(i + 1); err != nil {
				return err
			}
		case transcript.TypeWorkspace:
			if err := p.flush(i); err != nil {
				return err
			}
			if err := apply(cfg.Workspace, e); err != nil {
				return &Error{Code: ExitIO, Msg: fmt.Sprintf("%s: %v", e.Name(i), err)}
			}
			if err := cfg.save(i + 1); err != nil {
				return err
			}
		case transcript.TypeRuntimeExit:
			if err := p.flush(i); err != nil {
				return err
			}
			return p.exit(ctx, i, e)
		}
	}
	if err := p.flush(len(t.Entries)); err != nil {
		return err
	}
	// Every entry saved the cursor past itself as it was played.
	return p.drain(ctx, len(t.Entries)-1)
}

// emit plays emit_inbound entry i. The first of a run of entries sent
// together waits its afterMs, and a client frame that is there by then
// came too early.
func (p *peer) emit(ctx context.Context, i int, e transcript.Entry) error {
	if !p.buffered {
		if err := p.pace(ctx, i, e); err != nil {
			return err
		}
	}
	frame := []byte(e.Raw)
	if e.Raw == "" {
		var err error
		if frame, err = p.m.Rewrite(e.Frame); err != nil {
			return &Error{Code: ExitBadUsage, Msg: fmt.Sprintf("%s: %v", e.Name(i), err)}
		}
	}
	for k := 1; k <= e.Copies(); k++ {
		if err := p.out.Write(e.Copy(frame, k)); err != nil {
			return &Error{Code: ExitIO, Msg: fmt.Sprintf("%s: write to client: %v", e.Name(i), err)}
		}
	}
	p.buffered = true
	entries := p.cfg.Transcript.Entries
	if i+1 < len(entries) && entries[i+1].Type == transcript.TypeEmitInbound && Delay(entries[i+1].AfterMs, p.cfg.Speed) == 0 {
		return nil // the next frame goes at once: with this one
	}
	return p.flush(i + 1)
}

// flush saves the cursor past the frames written so far and sends them
// (in that order: what the client has seen is behind the cursor); next is
// the entry the playback is at.
func (p *peer) flush(next int) error {
	if !p.buffered {
		return nil
	}
	if err := p.cfg.save(next); err != nil {
		return err
	}
	if err := p.bw.Flush(); err != nil {
		return &Error{Code: ExitIO, Msg: fmt.Sprintf("write to client: %v", err)}
	}
	p.buffered = false
	return nil
}

// pace waits the time before emit_inbound entry i, the first of a run
// played together. A client frame that arrives meanwhile came too early,
// as did one that arrived before the peer's current phase.
func (p *peer) pace(ctx context.Context, i int, e transcript.Entry) error {
	if d := Delay(e.AfterMs, p.cfg.Speed); d > 0 {
		if p.held != nil {
			return p.early(i, *p.held)
		}
		tm := clock.Or(p.cfg.Clock).NewTimer(d)
		defer tm.Stop()
		frames := p.frames
	wait:
		for {
			select {
			case <-tm.C():
				break wait
			case l, ok := <-frames:
				if !ok {
					frames = nil // the client closed the stream: the wait goes on
					p.cfg.tracef("%s: stdin closed during its wait", e.Name(i))
					continue
				}
				return p.early(i, l)
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		p.phase.Add(1)
	}
	if p.held == nil {
		select {
		case l, ok := <-p.frames:
			if ok {
				p.held = &l
			}
		default:
		}
	}
	if p.held != nil && p.held.err == nil && p.held.phase < p.phase.Load() {
		return p.early(i, *p.held)
	}
	return nil
}

// early is the error for a client frame (or read error) that arrived
// before emit_inbound entry i was sent.
func (p *peer) early(i int, l line) error {
	if l.err != nil {
		return &Error{Code: ExitIO, Msg: fmt.Sprintf("read from client: %v", l.err)}
	}
	t := p.cfg.Transcript
	e := t.Entries[i]
	k := nextExpectation(t, i)
	if k < 0 {
		return &Error{Code: ExitUnexpected, Msg: fmt.Sprintf("unexpected frame before %s was sent, when the transcript expects none before its end or its next runtime_exit: %s",
			e.Name(i), l.b)}
	}
	return &Error{Code: ExitMismatch, Msg: fmt.Sprintf("mismatch at %s: sent too early: the frame arrived before %s was sent, which the transcript has before it\n  expected: %s\n  actual:   %s",
		t.Entries[k].Name(k), e.Name(i), t.Entries[k].Frame, l.b)}
}

// nextExpectation is the first expect_outbound entry after i that the
// same process plays (before a runtime_exit), or -1.
func nextExpectation(t *transcript.Transcript, i int) int {
	for k := i + 1; k < len(t.Entries); k++ {
		switch t.Entries[k].Type {
		case transcript.TypeExpectOutbound:
			return k
		case transcript.TypeRuntimeExit:
			return -1
		}
	}
	return -1
}

// next is the client's next frame: the invocation first, if there is one;
// ok is false when the client closed the stream.
func (p *peer) next(ctx context.Context) (line, bool, error) {
	if p.invocation != nil {
		l := line{b: p.invocation}
		p.invocation = nil
		return l, true, nil
	}
	if p.held != nil {
		l := *p.held
		p.held = nil
		return l, true, nil
	}
	select {
	case l, ok := <-p.frames:
		return l, ok, nil
	case <-ctx.Done():
		return line{}, false, ctx.Err()
	}
}

// expect takes the client's next frame against expect_outbound entry i.
func (p *peer) expect(ctx context.Context, i int, e transcript.Entry) error {
	t := p.cfg.Transcript
	l, ok, err := p.next(ctx)
	if err != nil {
		return err
	}
	if !ok {
		return &Error{Code: ExitLeftover, Msg: fmt.Sprintf("the client closed the stream with %d entries unused; the first unused is %s, expecting %s",
			len(t.Entries)-i, e.Name(i), e.Frame)}
	}
	if l.err != nil {
		return &Error{Code: ExitIO, Msg: fmt.Sprintf("%s: read from client: %v", e.Name(i), l.err)}
	}
	if err := p.m.Match(e.Frame, l.b); err != nil {
		return &Error{Code: ExitMismatch, Msg: fmt.Sprintf("mismatch at %s: %v", e.Name(i), err)}
	}
	if transcript.Answered(l.b) {
		p.phase.Add(1)
	}
	p.cfg.tracef("%s: matched", e.Name(i))
	return nil
}

// exit ends the process at runtime_exit entry i, as the entry says.
func (p *peer) exit(ctx context.Context, i int, e transcript.Entry) error {
	if e.Partial != "" {
		if _, err := p.bw.WriteString(e.Partial); err != nil {
			return &Error{Code: ExitIO, Msg: fmt.Sprintf("%s: write to client: %v", e.Name(i), err)}
		}
		if err := p.bw.Flush(); err != nil {
			return &Error{Code: ExitIO, Msg: fmt.Sprintf("%s: write to client: %v", e.Name(i), err)}
		}
	}
	if err := p.cfg.ending(i, e); err != nil {
		return err
	}
	switch e.ExitWait() {
	case transcript.WaitStdinClose:
		if err := p.drain(ctx, i); err != nil {
			return err
		}
		p.cfg.tracef("%s: stdin closed", e.Name(i))
	case transcript.WaitSignal:
		// The provider runs until it is stopped (Main's ctx ends at
		// SIGTERM or SIGINT); what it reads meanwhile does not matter.
		frames := p.frames
		for frames != nil {
			select {
			case _, ok := <-frames:
				if !ok {
					frames = nil
					p.cfg.tracef("%s: stdin closed, waiting for a signal", e.Name(i))
				}
			case <-ctx.Done():
				frames = nil
			}
		}
		<-ctx.Done()
		p.cfg.tracef("%s: stopped by a signal", e.Name(i))
	case transcript.WaitKill:
		// The provider will not stop: what it reads, its stdin closing and
		// SIGTERM (Main's ctx) change nothing; only SIGKILL ends it.
		// Its end is SIGKILL, so the cursor is saved past it first: a
		// provider started again goes on after it.
		if err := p.cfg.save(i + 1); err != nil {
			return err
		}
		p.cfg.waitKilled(i, e, p.frames, ctx.Done())
	}
	if err := p.cfg.save(i + 1); err != nil {
		return err
	}
	return exitResult(e, i)
}

// waitKilled is a runtime_exit's wait for a kill (wait "kill"): frames
// are read and dropped, and neither their end (the client closed stdin)
// nor signalled (Main's ctx: SIGTERM or SIGINT) ends it; each is traced.
// It returns when cfg.Killed is closed (never in a peer process: SIGKILL
// ends it).
func (cfg Config) waitKilled(i int, e transcript.Entry, frames <-chan line, signalled <-chan struct{}) {
	cfg.tracef("%s: waiting to be killed", e.Name(i))
	for {
		select {
		case _, ok := <-frames:
			if !ok {
				frames = nil
				cfg.tracef("%s: stdin closed, still waiting to be killed", e.Name(i))
			} else {
				cfg.tracef("%s: a frame dropped, still waiting to be killed", e.Name(i))
			}
		case <-signalled:
			signalled = nil
			cfg.tracef("%s: signalled, still waiting to be killed", e.Name(i))
		case <-cfg.Killed:
			return
		}
	}
}

// ending does what a runtime_exit entry's process does before its wait,
// after its partial frame: its stderr text, then stdout closed.
func (cfg Config) ending(i int, e transcript.Entry) error {
	if e.Stderr != "" && cfg.Err != nil {
		w := bufio.NewWriter(cfg.Err) // a flood (Repeat) in few writes
		for k := 1; k <= e.Copies(); k++ {
			if _, err := w.Write(e.Copy([]byte(e.Stderr), k)); err != nil {
				return &Error{Code: ExitIO, Msg: fmt.Sprintf("%s: write stderr: %v", e.Name(i), err)}
			}
		}
		if err := w.Flush(); err != nil {
			return &Error{Code: ExitIO, Msg: fmt.Sprintf("%s: write stderr: %v", e.Name(i), err)}
		}
	}
	if e.CloseStdout {
		c, ok := cfg.Out.(io.Closer)
		if !ok {
			return &Error{Code: ExitBadUsage, Msg: fmt.Sprintf("%s: closeStdout, but the peer's output cannot be closed", e.Name(i))}
		}
		if err := c.Close(); err != nil {
			return &Error{Code: ExitIO, Msg: fmt.Sprintf("%s: close stdout: %v", e.Name(i), err)}
		}
		cfg.tracef("%s: stdout closed", e.Name(i))
	}
	return nil
}

// start is the entry a playback starts at: the first, or with a state file
// the one its cursor names.
func (cfg Config) start() (int, error) {
	if cfg.StateFile == "" {
		return 0, nil
	}
	start, err := loadState(cfg.StateFile)
	if err != nil {
		return 0, &Error{Code: ExitBadUsage, Msg: err.Error()}
	}
	es := cfg.Transcript.Entries
	if start > 0 && start < len(es) && es[start].Type == transcript.TypeRuntimeExit {
		// The last process was stopped at its end, before it could save
		// the cursor past it (killed while it waited for its stdin to
		// close, say): this process is the next one.
		cfg.tracef("%s: where the last process ended; starting after it", es[start].Name(start))
		start++
	}
	if n := len(es); start >= n {
		return 0, &Error{Code: ExitUnexpected, Msg: fmt.Sprintf("the transcript is used up: state file %s is at entry %d of %d",
			cfg.StateFile, start+1, n)}
	}
	return start, nil
}

// save keeps the cursor in the state file, if there is one.
func (cfg Config) save(cursor int) error {
	if cfg.StateFile == "" {
		return nil
	}
	st := state{Cursor: cursor}
	if es := cfg.Transcript.Entries; cursor < len(es) {
		st.Next = es[cursor].Name(cursor)
	}
	if err := saveState(cfg.StateFile, st); err != nil {
		return &Error{Code: ExitIO, Msg: fmt.Sprintf("save state: %v", err)}
	}
	return nil
}

// tracef writes a line on the trace, if there is one.
func (cfg Config) tracef(format string, args ...any) {
	if cfg.Trace != nil {
		fmt.Fprintf(cfg.Trace, format+"\n", args...)
	}
}

// drain waits for the client to close the stream; any frame is unexpected.
func (p *peer) drain(ctx context.Context, last int) error {
	l, ok, err := p.next(ctx)
	if err != nil {
		return err
	}
	if !ok {
		return nil
	}
	if l.err != nil {
		return &Error{Code: ExitIO, Msg: fmt.Sprintf("read from client: %v", l.err)}
	}
	return unexpected(p.cfg.Transcript, last, "frame", l.b)
}

// unexpected is the error for a frame (or request) after the last
// expectation, entry last.
func unexpected(t *transcript.Transcript, last int, what string, frame []byte) *Error {
	after := "the start"
	if last >= 0 {
		after = t.Entries[last].Name(last)
	}
	return &Error{Code: ExitUnexpected, Msg: fmt.Sprintf("unexpected %s after the transcript's last expectation (%s): %s", what, after, frame)}
}

// apply makes a workspace entry's change in dir.
func apply(dir string, e transcript.Entry) error {
	if dir == "" {
		return errors.New("workspace entry but no workspace directory")
	}
	p := filepath.Join(dir, filepath.FromSlash(e.Path))
	switch e.Op {
	case transcript.OpWrite:
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return fmt.Errorf("write %s: %w", e.Path, err)
		}
		return os.WriteFile(p, []byte(*e.Content), 0o644)
	case transcript.OpDelete:
		return os.RemoveAll(p)
	case transcript.OpRename:
		to := filepath.Join(dir, filepath.FromSlash(e.To))
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			return fmt.Errorf("rename %s: %w", e.Path, err)
		}
		return os.Rename(p, to)
	}
	return fmt.Errorf("unknown workspace op %q", e.Op)
}

// exitResult is how the peer ends at runtime_exit entry i: with the
// entry's exit code, or its signal. The peer adds a note of its own on
// stderr unless the entry gives the process's stderr, or a signal.
func exitResult(e transcript.Entry, i int) error {
	code := e.ExitCode()
	if code == 0 && e.Signal == "" {
		return nil
	}
	msg := fmt.Sprintf("runtime exit (%s) at %s", e.Status, e.Name(i))
	switch {
	case e.Signal != "":
		msg += ": killed by " + e.Signal
	case e.Error != nil:
		msg += fmt.Sprintf(": %v", e.Error)
	}
	return &Error{Code: code, Msg: msg, Signal: e.Signal, Quiet: e.Stderr != "" || e.Signal != ""}
}
