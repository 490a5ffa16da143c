package replay

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-run/baton/sdk/clock"
)

// brokenWriter is an end whose reader has gone: every write fails.
type brokenWriter struct{}

func (brokenWriter) Write([]byte) (int, error) { return 0, errors.New("broken pipe") }

// failingCloser is an output that takes writes and fails to close.
type failingCloser struct{ strings.Builder }

func (*failingCloser) Close() error { return errors.New("bad file descriptor") }

// writeLog keeps each Write apart.
type writeLog struct {
	mu     sync.Mutex
	writes []string
}

func (w *writeLog) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.writes = append(w.writes, string(b))
	return len(b), nil
}

// lineWriter is a trace a test reads a line at a time.
type lineWriter struct{ lines chan string }

func newLineWriter() lineWriter { return lineWriter{make(chan string, 64)} }

func (w lineWriter) Write(b []byte) (int, error) {
	w.lines <- strings.TrimSuffix(string(b), "\n")
	return len(b), nil
}

// all is every line written so far.
func (w lineWriter) all() []string {
	var got []string
	for {
		select {
		case l := <-w.lines:
			got = append(got, l)
		default:
			return got
		}
	}
}

// await reads lines until want; it fails the test if want does not come.
func (w lineWriter) await(t *testing.T, want string) {
	t.Helper()
	var seen []string
	for {
		select {
		case l := <-w.lines:
			if l == want {
				return
			}
			seen = append(seen, l)
		case <-time.After(30 * time.Second):
			t.Fatalf("no %q on the trace after 30s; it had %q", want, seen)
		}
	}
}

// result waits for a playback's result; a playback still running after 30
// seconds is stuck.
func result(t *testing.T, done <-chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(30 * time.Second):
		t.Fatal("the playback did not end")
	}
	return nil
}

// asError is err as the *Error a peer process exits with (nil if it is
// not one), for comparing whole.
func asError(err error) *Error {
	var pe *Error
	if errors.As(err, &pe) {
		return pe
	}
	return nil
}

// stdio is a playback on pipes: the test is the client.
type stdio struct {
	in   *io.PipeWriter
	out  *bufio.Reader
	done chan error
}

func startRun(t *testing.T, ctx context.Context, cfg Config) *stdio {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	cfg.In, cfg.Out = inR, outW
	s := &stdio{in: inW, out: bufio.NewReader(outR), done: make(chan error, 1)}
	go func() {
		err := Run(ctx, cfg)
		outW.Close()
		s.done <- err
	}()
	t.Cleanup(func() {
		inW.Close()
		outR.CloseWithError(errors.New("the test is over"))
	})
	return s
}

func (s *stdio) send(t *testing.T, frame string) {
	t.Helper()
	if _, err := io.WriteString(s.in, frame+"\n"); err != nil {
		t.Fatal(err)
	}
}

func (s *stdio) frame(t *testing.T, want string) {
	t.Helper()
	if l, err := s.out.ReadString('\n'); err != nil || l != want+"\n" {
		t.Fatalf("frame %q %v, want %s", l, err, want)
	}
}

// A process stopped at its runtime_exit before it saved the cursor past it
// (killed while it waited for its stdin to close) leaves the cursor there:
// the next process starts after it, with the next process's entries.
func TestStateAtAnExitStartsTheNextProcess(t *testing.T) {
	tr := decode(t,
		`{"type":"expect_outbound","label":"first","frame":{"id":1,"method":"a"}}`,
		`{"type":"runtime_exit","status":"error","wait":"stdin_close"}`,
		`{"type":"expect_outbound","label":"second","frame":{"id":1,"method":"b"}}`,
		`{"type":"emit_inbound","frame":{"id":1,"result":"b"}}`)
	state := filepath.Join(t.TempDir(), "cursor")
	if err := os.WriteFile(state, []byte(`{"cursor":1}`), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startRun(t, t.Context(), Config{Transcript: tr, StateFile: state})
	p.send(t, `{"id":1,"method":"b"}`)
	p.frame(t, `{"id":1,"result":"b"}`)
	p.in.Close()
	if err := result(t, p.done); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(state); err != nil || string(b) != `{"cursor":4}` {
		t.Errorf("state file %s %v, want the cursor past the end", b, err)
	}
}

// A transcript that ends without a runtime_exit is a process that ends
// when its client closes stdin, with the cursor past the last entry; a
// frame after the last entry is unexpected.
func TestTranscriptEndsWithoutRuntimeExit(t *testing.T) {
	tr := decode(t,
		`{"type":"expect_outbound","label":"a","frame":{"id":1,"method":"a"}}`,
		`{"type":"emit_inbound","frame":{"id":1,"result":"a"}}`)
	t.Run("client closes", func(t *testing.T) {
		state := filepath.Join(t.TempDir(), "cursor")
		p := startRun(t, t.Context(), Config{Transcript: tr, StateFile: state})
		p.send(t, `{"id":1,"method":"a"}`)
		p.frame(t, `{"id":1,"result":"a"}`)
		p.in.Close()
		if err := result(t, p.done); err != nil {
			t.Fatal(err)
		}
		if b, err := os.ReadFile(state); err != nil || string(b) != `{"cursor":2}` {
			t.Errorf("state file %s %v, want the cursor past the end", b, err)
		}
	})
	t.Run("frame after the end", func(t *testing.T) {
		p := startRun(t, t.Context(), Config{Transcript: tr})
		p.send(t, `{"id":1,"method":"a"}`)
		p.frame(t, `{"id":1,"result":"a"}`)
		p.send(t, `{"method":"late"}`)
		want := &Error{Code: ExitUnexpected, Msg: `unexpected frame after the transcript's last expectation (entry 2 (line 3, emit_inbound)): {"method":"late"}`}
		if diff := cmp.Diff(want, asError(result(t, p.done))); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
	})
}

// Frames the transcript emits back to back go out in one write; a
// workspace entry, which the client may look at, flushes them first.
func TestBackToBackFramesAreWrittenTogether(t *testing.T) {
	tr := decode(t,
		`{"type":"emit_inbound","frame":{"n":1}}`,
		`{"type":"emit_inbound","frame":{"n":2}}`,
		`{"type":"workspace","op":"write","path":"a.txt","content":"a"}`,
		`{"type":"emit_inbound","frame":{"n":3}}`,
		`{"type":"runtime_exit","status":"success","wait":"now"}`)
	var out writeLog
	if err := Run(t.Context(), Config{Transcript: tr, Workspace: t.TempDir(), In: strings.NewReader(""), Out: &out}); err != nil {
		t.Fatal(err)
	}
	want := []string{`{"n":1}` + "\n" + `{"n":2}` + "\n", `{"n":3}` + "\n"}
	if diff := cmp.Diff(want, out.writes); diff != "" {
		t.Errorf("writes (-want +got):\n%s", diff)
	}
}

// Writing to the client failing is an I/O error that says where, as is
// ending the process as a runtime_exit says when its stderr or stdout
// fails; an output the entry needs closed that cannot be is bad usage.
func TestOutputFailures(t *testing.T) {
	for name, tc := range map[string]struct {
		entries []string
		out     io.Writer
		err     io.Writer
		want    *Error
	}{
		"frame": {[]string{`{"type":"emit_inbound","frame":{"n":1}}`, `{"type":"runtime_exit","status":"success","wait":"now"}`},
			brokenWriter{}, nil, &Error{Code: ExitIO, Msg: "write to client: broken pipe"}},
		"partial frame": {[]string{`{"type":"runtime_exit","status":"error","partial":"{\"n\""}`},
			brokenWriter{}, nil, &Error{Code: ExitIO, Msg: "entry 1 (line 2, runtime_exit): write to client: broken pipe"}},
		"stderr": {[]string{`{"type":"runtime_exit","status":"error","stderr":"fatal\n"}`},
			io.Discard, brokenWriter{}, &Error{Code: ExitIO, Msg: "entry 1 (line 2, runtime_exit): write stderr: broken pipe"}},
		"stdout cannot be closed": {[]string{`{"type":"runtime_exit","status":"error","closeStdout":true,"wait":"stdin_close"}`},
			io.Discard, nil, &Error{Code: ExitBadUsage, Msg: "entry 1 (line 2, runtime_exit): closeStdout, but the peer's output cannot be closed"}},
		"closing stdout fails": {[]string{`{"type":"runtime_exit","status":"error","closeStdout":true,"wait":"stdin_close"}`},
			&failingCloser{}, nil, &Error{Code: ExitIO, Msg: "entry 1 (line 2, runtime_exit): close stdout: bad file descriptor"}},
	} {
		t.Run(name, func(t *testing.T) {
			err := Run(t.Context(), Config{Transcript: decode(t, tc.entries...), In: strings.NewReader(""), Out: tc.out, Err: tc.err})
			if diff := cmp.Diff(tc.want, asError(err)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// Reading from the client failing is an I/O error, wherever the peer is:
// at an expectation, waiting for stdin to close, or in an afterMs wait.
func TestInputFailure(t *testing.T) {
	for name, tc := range map[string]struct {
		entries []string
		want    string
	}{
		"at an expectation": {[]string{`{"type":"expect_outbound","label":"a","frame":{"method":"a"}}`},
			`entry 1 (line 2, expect_outbound "a"): read from client: connection reset`},
		"waiting for stdin to close": {[]string{`{"type":"runtime_exit","status":"success"}`},
			"read from client: connection reset"},
		"in a wait": {[]string{`{"type":"emit_inbound","frame":{"n":1},"afterMs":1000}`, `{"type":"expect_outbound","frame":{"method":"a"}}`},
			"read from client: connection reset"},
	} {
		t.Run(name, func(t *testing.T) {
			inR, inW := io.Pipe()
			inW.CloseWithError(errors.New("connection reset"))
			// The fake clock is never advanced: the wait lasts until
			// the read fails.
			err := Run(t.Context(), Config{Transcript: decode(t, tc.entries...), Speed: 1, Clock: clock.NewFake(time.Unix(0, 0)),
				In: inR, Out: io.Discard})
			if diff := cmp.Diff(&Error{Code: ExitIO, Msg: tc.want}, asError(err)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// A state file the peer cannot use is an error that names it: one that is
// not a state, or not a file, is bad usage; one past the transcript's end
// says it is used up; one that cannot be written is an I/O error, before
// the client sees the frame the cursor would have moved past.
func TestStateFileErrors(t *testing.T) {
	entries := []string{`{"type":"emit_inbound","frame":{"n":1}}`, `{"type":"runtime_exit","status":"success","wait":"now"}`}
	dir := t.TempDir()
	notJSON := filepath.Join(dir, "not-json")
	if err := os.WriteFile(notJSON, []byte("cursor=1"), 0o644); err != nil {
		t.Fatal(err)
	}
	var st state
	jsonErr := json.Unmarshal([]byte("cursor=1"), &st)
	usedUp := filepath.Join(dir, "used-up")
	if err := os.WriteFile(usedUp, []byte(`{"cursor":2}`), 0o644); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing", "cursor")
	for name, tc := range map[string]struct {
		file string
		want *Error
	}{
		"not a state": {notJSON, &Error{Code: ExitBadUsage, Msg: "state file " + notJSON + ": " + jsonErr.Error()}},
		"a directory": {dir, &Error{Code: ExitBadUsage, Msg: "read " + dir + ": is a directory"}},
		"used up":     {usedUp, &Error{Code: ExitUnexpected, Msg: "the transcript is used up: state file " + usedUp + " is at entry 3 of 2"}},
		"unwritable":  {missing, &Error{Code: ExitIO, Msg: "save state: open " + missing + ".tmp: no such file or directory"}},
	} {
		t.Run(name, func(t *testing.T) {
			var out strings.Builder
			err := Run(t.Context(), Config{Transcript: decode(t, entries...), StateFile: tc.file, In: strings.NewReader(""), Out: &out})
			if diff := cmp.Diff(tc.want, asError(err)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if out.Len() != 0 {
				t.Errorf("stdout %q: the client saw a frame the cursor is not past", out.String())
			}
		})
	}
}

// Workspace entries change the workspace (a delete takes a directory
// whole); one the peer cannot apply is an I/O error naming the entry.
func TestWorkspaceEntries(t *testing.T) {
	t.Run("delete", func(t *testing.T) {
		ws := t.TempDir()
		tr := decode(t,
			`{"type":"workspace","op":"write","path":"d/a.txt","content":"a"}`,
			`{"type":"workspace","op":"write","path":"b.txt","content":"b"}`,
			`{"type":"workspace","op":"delete","path":"d"}`,
			`{"type":"runtime_exit","status":"success","wait":"now"}`)
		if err := Run(t.Context(), Config{Transcript: tr, Workspace: ws, In: strings.NewReader(""), Out: io.Discard}); err != nil {
			t.Fatal(err)
		}
		var names []string
		ents, _ := os.ReadDir(ws)
		for _, e := range ents {
			names = append(names, e.Name())
		}
		if diff := cmp.Diff([]string{"b.txt"}, names); diff != "" {
			t.Errorf("the workspace (-want +got):\n%s", diff)
		}
	})
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "f"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		workspace, entry, want string
	}{
		"no workspace": {"", `{"type":"workspace","op":"delete","path":"a"}`,
			"entry 1 (line 2, workspace): workspace entry but no workspace directory"},
		"write under a file": {ws, `{"type":"workspace","op":"write","path":"f/a.txt","content":""}`,
			"entry 1 (line 2, workspace): write f/a.txt: mkdir " + ws + "/f: not a directory"},
		"rename under a file": {ws, `{"type":"workspace","op":"rename","path":"f","to":"f/g"}`,
			"entry 1 (line 2, workspace): rename f: mkdir " + ws + "/f: not a directory"},
	} {
		t.Run(name, func(t *testing.T) {
			err := Run(t.Context(), Config{Transcript: decode(t, tc.entry), Workspace: tc.workspace, In: strings.NewReader(""), Out: io.Discard})
			if diff := cmp.Diff(&Error{Code: ExitIO, Msg: tc.want}, asError(err)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// A runtime_exit that dies by a signal asks Main for the signal (die) and
// says nothing more on stderr.
func TestSignalExit(t *testing.T) {
	tr := decode(t, `{"type":"runtime_exit","status":"error","signal":"SIGKILL"}`)
	err := Run(t.Context(), Config{Transcript: tr, In: strings.NewReader(""), Out: io.Discard})
	want := &Error{Code: 1, Msg: "runtime exit (error) at entry 1 (line 2, runtime_exit): killed by SIGKILL", Signal: "SIGKILL", Quiet: true}
	if diff := cmp.Diff(want, asError(err)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// A runtime_exit waiting for a signal ends at the signal (ctx) even while
// the client's stdin is open.
func TestSignalWhileStdinIsOpen(t *testing.T) {
	tr := decode(t, `{"type":"runtime_exit","status":"cancelled","wait":"signal"}`)
	inR, inW := io.Pipe()
	defer inW.Close()
	trace := newLineWriter()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, Config{Transcript: tr, In: inR, Out: io.Discard, Trace: trace}) }()
	cancel()
	want := &Error{Code: ExitCancelled, Msg: "runtime exit (cancelled) at entry 1 (line 2, runtime_exit)"}
	if diff := cmp.Diff(want, asError(result(t, done))); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"entry 1 (line 2, runtime_exit): stopped by a signal"}, trace.all()); diff != "" {
		t.Errorf("trace (-want +got):\n%s", diff)
	}
}

// A peer stopped (ctx) while it waits for the client's frame or waits out
// an afterMs ends with the context's error.
func TestStoppedWhileWaiting(t *testing.T) {
	for name, entries := range map[string][]string{
		"for a frame": {`{"type":"expect_outbound","frame":{"method":"a"}}`},
		"an afterMs":  {`{"type":"emit_inbound","frame":{"n":1},"afterMs":1000}`},
	} {
		t.Run(name, func(t *testing.T) {
			inR, inW := io.Pipe()
			defer inW.Close()
			ctx, cancel := context.WithCancel(t.Context())
			cancel()
			done := make(chan error, 1)
			go func() {
				done <- Run(ctx, Config{Transcript: decode(t, entries...), Speed: 1, Clock: clock.NewFake(time.Unix(0, 0)), In: inR, Out: io.Discard})
			}()
			if err := result(t, done); !errors.Is(err, context.Canceled) {
				t.Fatalf("Run = %v, want the context's error", err)
			}
		})
	}
}

// The client closing stdin during an afterMs wait does not end the wait:
// the entry is sent when it is due, and not before (here the peer is
// stopped first).
func TestStdinClosedDuringAWait(t *testing.T) {
	tr := decode(t, `{"type":"emit_inbound","frame":{"n":1},"afterMs":1000}`)
	for name, tc := range map[string]struct {
		stop bool
		want string
	}{
		"sent when due":  {false, `{"n":1}` + "\n"},
		"not sent early": {true, ""},
	} {
		t.Run(name, func(t *testing.T) {
			clk := clock.NewFake(time.Unix(0, 0))
			trace := newLineWriter()
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			var out strings.Builder
			done := make(chan error, 1)
			go func() {
				done <- Run(ctx, Config{Transcript: tr, Speed: 1, Clock: clk, In: strings.NewReader(""), Out: &out, Trace: trace})
			}()
			trace.await(t, "entry 1 (line 2, emit_inbound): stdin closed during its wait")
			var want error
			if tc.stop {
				cancel()
				want = context.Canceled
			} else {
				clk.Advance(time.Second)
			}
			if err := result(t, done); err != want {
				t.Fatalf("Run = %v, want %v", err, want)
			}
			if out.String() != tc.want {
				t.Errorf("stdout %q, want %q", out.String(), tc.want)
			}
		})
	}
}

// A frame that arrives during an afterMs wait when the transcript expects
// none before its end or its next runtime_exit is unexpected.
func TestFrameDuringAWaitBeforeTheEnd(t *testing.T) {
	for name, entries := range map[string][]string{
		"before a runtime_exit": {`{"type":"emit_inbound","frame":{"n":1},"afterMs":1000}`, `{"type":"runtime_exit","status":"success"}`,
			`{"type":"expect_outbound","frame":{"method":"a"}}`},
		"before the end": {`{"type":"emit_inbound","frame":{"n":1},"afterMs":1000}`},
	} {
		t.Run(name, func(t *testing.T) {
			var out strings.Builder
			// The fake clock is never advanced: the frame comes first.
			err := Run(t.Context(), Config{Transcript: decode(t, entries...), Speed: 1, Clock: clock.NewFake(time.Unix(0, 0)),
				In: strings.NewReader(`{"method":"a"}` + "\n"), Out: &out})
			want := &Error{Code: ExitUnexpected, Msg: `unexpected frame before entry 1 (line 2, emit_inbound) was sent, when the transcript expects none before its end or its next runtime_exit: {"method":"a"}`}
			if diff := cmp.Diff(want, asError(err)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if out.Len() != 0 {
				t.Errorf("stdout %q", out.String())
			}
		})
	}
}

// A frame the peer took to look at while it sent entries due at once is
// early for an entry after them that waits an afterMs: the client sent it
// before that entry could have been seen.
func TestHeldFrameIsEarlyForALaterWait(t *testing.T) {
	tr := decode(t,
		`{"type":"expect_outbound","label":"a","frame":{"method":"a"}}`,
		`{"type":"emit_inbound","frame":{"n":1}}`,
		`{"type":"emit_inbound","label":"later","frame":{"n":2},"afterMs":1000}`,
		`{"type":"expect_outbound","label":"b","frame":{"method":"b"}}`,
		`{"type":"runtime_exit","status":"success","wait":"now"}`)
	state := filepath.Join(t.TempDir(), "cursor")
	if err := syscall.Mkfifo(state, 0o600); err != nil {
		t.Fatal(err)
	}
	inR, inW := io.Pipe()
	defer inW.Close()
	in := gatedReader{inR, make(chan struct{}, 8)}
	var out strings.Builder
	done := make(chan error, 1)
	go func() {
		// The peer opens its state file first, a FIFO: it waits there
		// until the test writes it. The fake clock is never advanced.
		done <- Run(t.Context(), Config{Transcript: tr, Speed: 1, Clock: clock.NewFake(time.Unix(0, 0)), In: in, Out: &out, StateFile: state})
	}()
	<-in.reads
	io.WriteString(inW, `{"method":"a"}`+"\n"+`{"method":"b"}`+"\n")
	<-in.reads // both are stamped and queued before the peer took either
	if err := os.WriteFile(state, []byte(`{"cursor":0}`), 0o600); err != nil {
		t.Fatal(err)
	}
	want := &Error{Code: ExitMismatch, Msg: `mismatch at entry 4 (line 5, expect_outbound "b"): sent too early: the frame arrived before entry 3 (line 4, emit_inbound "later") was sent, which the transcript has before it
  expected: {"method":"b"}
  actual:   {"method":"b"}`}
	if diff := cmp.Diff(want, asError(result(t, done))); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if out.String() != `{"n":1}`+"\n" {
		t.Errorf("stdout %q, want the entry due at once and not the later one", out.String())
	}
}

// Main's flags: an unknown flag and a trace file it cannot open are bad
// usage, said on stderr's first line; a trailing "--" gives an empty
// argument list, checked as the invocation frame.
func TestMainFlags(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "t.ndjson")
	if err := os.WriteFile(f, []byte(header+"\n"+`{"type":"expect_outbound","frame":{"argv":[]}}`+"\n"+`{"type":"runtime_exit","status":"success","wait":"now"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		args   []string
		code   int
		stderr string
	}{
		"unknown flag": {[]string{"--transcript", f, "--bogus"}, ExitBadUsage, "flag provided but not defined: -bogus"},
		"trace in a missing directory": {[]string{"--transcript", f, "--workspace", dir, "--trace", filepath.Join(dir, "no", "trace"), "--"}, ExitBadUsage,
			"replaypeer: --trace: open " + filepath.Join(dir, "no", "trace") + ": no such file or directory"},
		"empty invocation": {[]string{"--transcript", f, "--workspace", dir, "--"}, ExitOK, ""},
	} {
		t.Run(name, func(t *testing.T) {
			var stderr strings.Builder
			code := Main(tc.args, strings.NewReader(""), io.Discard, &stderr)
			// The first line says what is wrong (the flag package lists
			// the flags after it).
			first, _, _ := strings.Cut(stderr.String(), "\n")
			if code != tc.code || first != tc.stderr {
				t.Errorf("exit %d, stderr %q; want %d, first line %q", code, stderr.String(), tc.code, tc.stderr)
			}
		})
	}
}

// An emit_inbound entry's raw text goes out as it is, a line that is no
// frame, among the frames.
func TestRawTextIsSentAsItIs(t *testing.T) {
	tr := decode(t,
		`{"type":"emit_inbound","frame":{"n":1}}`,
		`{"type":"emit_inbound","label":"junk","raw":"not JSON {\""}`,
		`{"type":"emit_inbound","frame":{"n":2}}`,
		`{"type":"runtime_exit","status":"success","wait":"now"}`)
	var out writeLog
	if err := Run(t.Context(), Config{Transcript: tr, In: strings.NewReader(""), Out: &out}); err != nil {
		t.Fatal(err)
	}
	want := []string{`{"n":1}` + "\n" + `not JSON {"` + "\n" + `{"n":2}` + "\n"}
	if diff := cmp.Diff(want, out.writes); diff != "" {
		t.Errorf("writes (-want +got):\n%s", diff)
	}
}

// A runtime_exit waiting for a kill outlives the client's stdin and a
// signal (ctx), in the stdio and the HTTP peer alike, and ends only when
// Killed is closed (in a peer process: by SIGKILL).
func TestKillWaitOutlivesStdinAndSignals(t *testing.T) {
	const exit = `{"type":"runtime_exit","status":"error","wait":"kill"}`
	for name, serve := range map[string]func(context.Context, Config) error{
		"stdio": Run,
		"http": func(ctx context.Context, cfg Config) error {
			return ServeHTTP(ctx, HTTPConfig{Listen: "127.0.0.1:0", Config: cfg})
		},
	} {
		t.Run(name, func(t *testing.T) {
			tr := decode(t, exit)
			if name == "http" {
				tr = decodeHTTP(t, exit)
			}
			inR, inW := io.Pipe()
			trace := newLineWriter()
			killed := make(chan struct{})
			ctx, cancel := context.WithCancel(t.Context())
			done := make(chan error, 1)
			go func() {
				done <- serve(ctx, Config{Transcript: tr, In: inR, Out: io.Discard, Trace: trace, Killed: killed})
			}()
			want := []string{"entry 1 (line 2, runtime_exit): waiting to be killed"}
			if got := <-trace.lines; got != want[0] {
				t.Fatalf("trace %q, want %q", got, want[0])
			}
			cancel()
			want = append(want, "entry 1 (line 2, runtime_exit): signalled, still waiting to be killed")
			if got := <-trace.lines; got != want[1] {
				t.Fatalf("trace %q after the signal, want %q", got, want[1])
			}
			inW.Close()
			close(killed)
			wantErr := &Error{Code: 1, Msg: "runtime exit (error) at entry 1 (line 2, runtime_exit)"}
			if diff := cmp.Diff(wantErr, asError(result(t, done))); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// A flood is written with repeat: an emit_inbound entry's frame sent, or a
// runtime_exit's stderr written, that many times, "<n>" the copy's number.
func TestRepeat(t *testing.T) {
	tr := decode(t,
		`{"type":"emit_inbound","frame":{"n":"<n>"}}`,
		`{"type":"emit_inbound","label":"junk","raw":"garbage <n>","repeat":3}`,
		`{"type":"emit_inbound","frame":{"n":"<n>"},"repeat":2}`,
		`{"type":"runtime_exit","status":"error","stderr":"err <n>\n","repeat":4}`)
	var out writeLog
	var errOut bytes.Buffer
	err := Run(t.Context(), Config{Transcript: tr, In: strings.NewReader(""), Out: &out, Err: &errOut})
	if e := asError(err); e == nil || e.Code != ExitRuntimeError {
		t.Fatalf("Run = %v; want the runtime exit", err)
	}
	want := `{"n":"<n>"}` + "\n" + "garbage 1\ngarbage 2\ngarbage 3\n" + `{"n":"1"}` + "\n" + `{"n":"2"}` + "\n"
	if diff := cmp.Diff(want, strings.Join(out.writes, "")); diff != "" {
		t.Errorf("stdout (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff("err 1\nerr 2\nerr 3\nerr 4\n", errOut.String()); diff != "" {
		t.Errorf("stderr (-want +got):\n%s", diff)
	}
}
