// Package replay is the replay peer: it stands in for a provider process and
// plays a transcript over a byte stream. It sends inbound entries in order,
// waits at each expect_outbound for the client's next frame and compares it,
// and ends as the transcript says. It knows nothing of turns or approvals.
package replay

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/baton-run/baton/sdk/ndjson"
	"github.com/baton-run/baton/sdk/transcript"
)

// Exit codes of a peer process, so a test can tell why a peer ended.
const (
	ExitOK           = 0
	ExitRuntimeError = 1 // the transcript's runtime_exit said error
	ExitBadUsage     = 2 // bad flags or a bad transcript
	ExitMismatch     = 3 // an outbound frame differed from its expectation
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
	// waits at all.
	Speed float64
	In    io.Reader // frames from the client
	Out   io.Writer // frames to the client
	// StateFile, when set, keeps the cursor between processes: a peer that
	// ends at a runtime_exit entry saves the entry after it, and the next
	// peer started with the same file continues there. That is how a
	// provider that is restarted (a resumed session, a process per turn)
	// is replayed from one transcript.
	StateFile string
	// Invocation, when not nil, is the arguments the client started the
	// provider with (the peer's own arguments after "--"). They are the
	// process's first outbound frame, {"argv": [...]}, checked like any
	// other: a plugin that appends its own flags to the provider command is
	// checked on them.
	Invocation []string
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

type state struct {
	Cursor int `json:"cursor"`
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

func saveState(file string, cursor int) error {
	b, _ := json.Marshal(state{Cursor: cursor})
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
}

// Run plays the transcript until it ends, the client closes the stream, or
// ctx is done.
func Run(ctx context.Context, cfg Config) error {
	t := cfg.Transcript
	m := transcript.NewMatcher(cfg.Workspace)
	// Frames the transcript emits back to back are written together: the
	// buffer is flushed before anything that waits (an afterMs, the
	// client's next frame, the end).
	bw := bufio.NewWriter(cfg.Out)
	out := ndjson.NewWriter(bw)

	// One reader owns In; frames queue until an expectation takes them.
	// The invocation, if any, is the first of them.
	frames := make(chan line, 1024)
	if cfg.Invocation != nil {
		frames <- line{b: transcript.InvocationFrame(cfg.Invocation)}
	}
	go func() {
		r := ndjson.NewReader(cfg.In)
		for {
			b, err := r.Next()
			if err != nil {
				if err != io.EOF {
					frames <- line{err: err}
				}
				close(frames)
				return
			}
			frames <- line{b: b}
		}
	}()
	next := func() (line, bool, error) {
		select {
		case l, ok := <-frames:
			return l, ok, nil
		case <-ctx.Done():
			return line{}, false, ctx.Err()
		}
	}

	start, err := cfg.start()
	if err != nil {
		return err
	}
	for i := start; i < len(t.Entries); i++ {
		e := t.Entries[i]
		switch e.Type {
		case transcript.TypeEmitInbound:
			if !cfg.wait(ctx, e) {
				return ctx.Err()
			}
			frame, err := m.Rewrite(e.Frame)
			if err != nil {
				return &Error{ExitBadUsage, fmt.Sprintf("%s: %v", e.Name(i), err)}
			}
			if err := out.Write(frame); err != nil {
				return &Error{ExitIO, fmt.Sprintf("%s: write to client: %v", e.Name(i), err)}
			}
			if i+1 < len(t.Entries) && t.Entries[i+1].Type == transcript.TypeEmitInbound && !cfg.waits(t.Entries[i+1]) {
				continue // the next frame goes at once: with this one
			}
			if err := bw.Flush(); err != nil {
				return &Error{ExitIO, fmt.Sprintf("%s: write to client: %v", e.Name(i), err)}
			}
		case transcript.TypeExpectOutbound:
			l, ok, err := next()
			if err != nil {
				return err
			}
			if !ok {
				return &Error{ExitLeftover, fmt.Sprintf("the client closed the stream with %d entries unused; the first unused is %s, expecting %s",
					len(t.Entries)-i, e.Name(i), e.Frame)}
			}
			if l.err != nil {
				return &Error{ExitIO, fmt.Sprintf("%s: read from client: %v", e.Name(i), l.err)}
			}
			if err := m.Match(e.Frame, l.b); err != nil {
				return &Error{ExitMismatch, fmt.Sprintf("mismatch at %s: %v", e.Name(i), err)}
			}
		case transcript.TypeWorkspace:
			if err := apply(cfg.Workspace, e); err != nil {
				return &Error{ExitIO, fmt.Sprintf("%s: %v", e.Name(i), err)}
			}
		case transcript.TypeRuntimeExit:
			switch e.ExitWait() {
			case transcript.WaitStdinClose:
				if err := drain(next, i, t); err != nil {
					return err
				}
			case transcript.WaitSignal:
				// The provider runs until it is stopped (Main's ctx ends
				// at SIGTERM or SIGINT); what it reads meanwhile does not
				// matter.
				<-ctx.Done()
			}
			if err := cfg.save(i + 1); err != nil {
				return err
			}
			return exitResult(e, i)
		}
	}
	if err := drain(next, len(t.Entries)-1, t); err != nil {
		return err
	}
	return cfg.save(len(t.Entries))
}

// start is the entry a playback starts at: the first, or with a state file
// the one after the runtime_exit the last peer ended at.
func (cfg Config) start() (int, error) {
	if cfg.StateFile == "" {
		return 0, nil
	}
	start, err := loadState(cfg.StateFile)
	if err != nil {
		return 0, &Error{ExitBadUsage, err.Error()}
	}
	if n := len(cfg.Transcript.Entries); start >= n {
		return 0, &Error{ExitUnexpected, fmt.Sprintf("the transcript is used up: state file %s is at entry %d of %d",
			cfg.StateFile, start+1, n)}
	}
	return start, nil
}

// save keeps the cursor in the state file, if there is one.
func (cfg Config) save(cursor int) error {
	if cfg.StateFile == "" {
		return nil
	}
	if err := saveState(cfg.StateFile, cursor); err != nil {
		return &Error{ExitIO, fmt.Sprintf("save state: %v", err)}
	}
	return nil
}

// waits says whether emit_inbound entry e is played after a wait.
func (cfg Config) waits(e transcript.Entry) bool { return cfg.Speed > 0 && e.AfterMs > 0 }

// wait waits the time before emit_inbound entry e, its afterMs scaled by
// cfg.Speed (none at speed 0). It says false when ctx ended first.
func (cfg Config) wait(ctx context.Context, e transcript.Entry) bool {
	if !cfg.waits(e) {
		return true
	}
	t := time.NewTimer(time.Duration(float64(e.AfterMs) * float64(time.Millisecond) / cfg.Speed))
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// drain waits for the client to close the stream; any frame is unexpected.
func drain(next func() (line, bool, error), last int, t *transcript.Transcript) error {
	l, ok, err := next()
	if err != nil {
		return err
	}
	if !ok {
		return nil
	}
	if l.err != nil {
		return &Error{ExitIO, fmt.Sprintf("read from client: %v", l.err)}
	}
	after := "the start"
	if last >= 0 {
		after = t.Entries[last].Name(last)
	}
	return &Error{ExitUnexpected, fmt.Sprintf("unexpected frame after the transcript's last expectation (%s): %s", after, l.b)}
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

// exitResult is how the peer ends at runtime_exit entry i: as the entry's
// status says.
func exitResult(e transcript.Entry, i int) error {
	switch e.Status {
	case transcript.ExitError:
		return &Error{ExitRuntimeError, fmt.Sprintf("runtime exit (error) at %s: %v", e.Name(i), e.Error)}
	case transcript.ExitCancelled:
		return &Error{ExitCancelled, fmt.Sprintf("runtime exit (cancelled) at %s", e.Name(i))}
	}
	return nil
}
