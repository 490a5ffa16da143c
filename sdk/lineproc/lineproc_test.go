package lineproc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-run/baton/sdk"
	"github.com/baton-run/baton/sdk/clock"
	"github.com/baton-run/baton/sdk/clock/clocktest"
	"github.com/baton-run/baton/sdk/framelog"
	"github.com/baton-run/baton/sdk/ndjson"
)

var epoch = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)

func start(t *testing.T, stdin bool, script string) *Process {
	t.Helper()
	return startOn(t, nil, stdin, script)
}

// startOn starts script with its timeouts on clk.
func startOn(t *testing.T, clk clock.Clock, stdin bool, script string) *Process {
	t.Helper()
	p, err := Start(Config{Name: "the agent", Command: sdk.ProviderCommand{Argv: []string{"sh", "-c", script}},
		Dir: t.TempDir(), RawFrameLog: filepath.Join(t.TempDir(), "frames.ndjson"), Stdin: stdin, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close(context.Background()) })
	return p
}

func TestLinesBothWaysAndTheExitReport(t *testing.T) {
	p := start(t, true, `echo '{"hello":1}'; read line; echo "$line"; echo "out of tea" >&2; exit 3`)
	line, frame, err := p.Next()
	if err != nil || string(line) != `{"hello":1}` || frame == 0 {
		t.Fatalf("Next = %q, %d, %v", line, frame, err)
	}
	if err := p.Write([]byte(`{"back":2}`)); err != nil {
		t.Fatal(err)
	}
	line, frame2, err := p.Next()
	if err != nil || string(line) != `{"back":2}` || frame2 <= frame {
		t.Fatalf("echo = %q, frame %d after %d, %v", line, frame2, frame, err)
	}
	if _, _, err := p.Next(); err != io.EOF {
		t.Fatalf("after the last line: %v, want io.EOF", err)
	}
	<-p.Done()
	ev := p.ExitEvent("thr", false)
	want := sdk.RuntimeEvent{Kind: sdk.EventRuntimeExited, ThreadRef: "thr", Status: sdk.ExitFailed,
		Failure: &sdk.Failure{Code: "provider_exited", Message: "the agent exited with status 3: out of tea"}}
	if diff := cmp.Diff(want, ev); diff != "" {
		t.Fatalf("exit event (-want +got):\n%s", diff)
	}
}

// Without Stdin the provider's input is at its end at once: a one-shot
// provider that reads it all first starts right away.
func TestStdinClosedAtOnce(t *testing.T) {
	p := start(t, false, `cat; echo '{"started":true}'`)
	line, _, err := p.Next()
	if err != nil || string(line) != `{"started":true}` {
		t.Fatalf("Next = %q, %v", line, err)
	}
	<-p.Done()
	if ev := p.ExitEvent("", true); ev.Status != sdk.ExitClosed || ev.Failure != nil {
		t.Fatalf("exit event %+v", ev)
	}
}

// Signal reaches the whole group at once, a child of the provider too.
func TestSignalEndsTheGroup(t *testing.T) {
	p := start(t, false, `sleep 60 & echo '{"up":1}'; wait`)
	if _, _, err := p.Next(); err != nil {
		t.Fatal(err)
	}
	if err := p.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the provider outlived SIGTERM to its group")
	}
	if _, _, err := p.Next(); err != io.EOF {
		t.Fatalf("stdout after the group ended: %v, want io.EOF (the sleeping child is gone too)", err)
	}
	if err := p.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("signalling a group that is gone: %v", err)
	}
}

// Processes started one after another on one log (a provider started once
// per turn) number their frames on, and ExitEvent leaves the log open.
func TestSharedFrameLog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "frames.ndjson")
	frames, err := framelog.Open(path, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer frames.Close()
	var last uint64
	for i := range 2 {
		p, err := Start(Config{Name: "turn", Command: sdk.ProviderCommand{Argv: []string{"sh", "-c", `echo '{"n":1}'`}},
			Dir: t.TempDir(), Frames: frames})
		if err != nil {
			t.Fatal(err)
		}
		_, idx, err := p.Next()
		if err != nil || idx <= last {
			t.Fatalf("process %d: frame %d after %d, %v", i+1, idx, last, err)
		}
		last = idx
		<-p.Done()
		p.ExitEvent("", false)
	}
	if got := frames.Append(framelog.In, []byte(`{}`)); got != last+1 {
		t.Fatalf("the log after both processes: frame %d, want %d (still open, numbering on)", got, last+1)
	}
	b, err := os.ReadFile(path)
	if err != nil || strings.Count(string(b), `{"n":1}`) != 2 {
		t.Fatalf("log = %q, %v", b, err)
	}
}

// A process the provider started that keeps its stdout open after the
// provider exited (a language server, a command in the background) does
// not keep Next from reaching the end: DrainTimeout after the exit, what
// the provider wrote has been read and Next returns.
func TestStdoutEndsDrainTimeoutAfterTheExit(t *testing.T) {
	f := clock.NewFake(epoch)
	// The sleep's stderr goes elsewhere: os/exec's WaitDelay (on the real
	// clock) would hold Done back for it.
	p := startOn(t, f, false, `sleep 300 2>/dev/null & echo '{"last":1}'; exit 0`)
	line, _, err := p.Next()
	if err != nil || string(line) != `{"last":1}` {
		t.Fatalf("Next = %q, %v", line, err)
	}
	<-p.Done()
	next := make(chan error, 1)
	go func() { _, _, err := p.Next(); next <- err }()
	clocktest.Pending(t, f, "the provider exited", DrainTimeout)
	f.Advance(DrainTimeout - time.Millisecond)
	clocktest.Pending(t, f, "a millisecond before the drain timeout", time.Millisecond)
	select {
	case err := <-next:
		t.Fatalf("Next returned %v before the drain timeout (the sleep holds stdout)", err)
	default:
	}
	f.Advance(time.Millisecond)
	if err := clocktest.Within(t, next); !errors.Is(err, os.ErrClosed) {
		t.Fatalf("Next after the drain timeout: %v, want the closed pipe's error", err)
	}
}

// A provider that closes its stdout and lives on can no longer be heard:
// Wait gives it DrainTimeout to exit, then stops it.
func TestWaitStopsAProviderThatClosedItsStdout(t *testing.T) {
	f := clock.NewFake(epoch)
	p := startOn(t, f, false, `echo '{"bye":1}'; exec >&-; sleep 300`)
	if _, _, err := p.Next(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := p.Next(); err != io.EOF {
		t.Fatalf("Next after stdout closed: %v, want io.EOF", err)
	}
	waited := make(chan error, 1)
	go func() { p.Wait(); waited <- nil }()
	clocktest.Pending(t, f, "stdout ended", DrainTimeout)
	f.Advance(DrainTimeout - time.Millisecond)
	clocktest.Pending(t, f, "a millisecond before the drain timeout", time.Millisecond)
	select {
	case <-p.Done():
		t.Fatalf("the provider exited before the drain timeout: %v", p.Err())
	default:
	}
	f.Advance(time.Millisecond)
	clocktest.Within(t, waited)
	select {
	case <-p.Done():
	default:
		t.Fatal("Wait returned with the provider still running")
	}
	if ev := p.ExitEvent("", false); ev.Status != sdk.ExitFailed || ev.Failure == nil ||
		ev.Failure.Message != "the agent was killed by SIGTERM" {
		t.Fatalf("exit event %+v; want the provider's failure by SIGTERM", ev)
	}
	if got := f.Now(); !got.Equal(epoch.Add(DrainTimeout)) {
		t.Fatalf("the clock moved to %v; SIGTERM alone should have stopped it", got)
	}
}

// A provider that exits by itself is not stopped: Wait returns at once.
func TestWaitForAProviderThatExits(t *testing.T) {
	f := clock.NewFake(epoch)
	p := startOn(t, f, false, `echo '{"bye":1}'; exit 4`)
	for {
		if _, _, err := p.Next(); err != nil {
			break
		}
	}
	<-p.Done()
	p.Wait()
	if ev := p.ExitEvent("", false); ev.Failure == nil || ev.Failure.Message != "the agent exited with status 4" {
		t.Fatalf("exit event %+v; want exit status 4", ev)
	}
	if got := f.Now(); !got.Equal(epoch) {
		t.Fatalf("the clock moved to %v", got)
	}
}

// An over-long stdout line is reported to OnLineTooLong and skipped: the
// lines after it are read as usual.
func TestOverLongLineIsSkipped(t *testing.T) {
	var reported []error
	p, err := Start(Config{Name: "the agent", Dir: t.TempDir(),
		Command: sdk.ProviderCommand{Argv: []string{"sh", "-c",
			fmt.Sprintf(`head -c %d /dev/zero | tr '\0' x; echo; echo '{"after":1}'`, ndjson.DefaultMaxLine+1)}},
		OnLineTooLong: func(err error) { reported = append(reported, err) }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close(context.Background()) })
	line, _, err := p.Next()
	if err != nil || string(line) != `{"after":1}` {
		t.Fatalf("Next = %q, %v; want the line after the over-long one", line, err)
	}
	if len(reported) != 1 || !errors.Is(reported[0], ndjson.ErrLineTooLong) {
		t.Fatalf("reported %v; want one ErrLineTooLong", reported)
	}
	if _, _, err := p.Next(); err != io.EOF {
		t.Fatalf("after the last line: %v, want io.EOF", err)
	}
}

// A closed session's provider that died of SIGTERM was stopped, the way a
// provider is stopped: its exit is clean. Without the close it failed.
func TestExitBySIGTERM(t *testing.T) {
	for _, closed := range []bool{true, false} {
		p := start(t, true, `echo '{"up":1}'; exec sleep 60`)
		if _, _, err := p.Next(); err != nil {
			t.Fatal(err)
		}
		if err := p.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		<-p.Done()
		ev := p.ExitEvent("thr", closed)
		switch {
		case closed && (ev.Status != sdk.ExitClosed || ev.Failure != nil):
			t.Errorf("closed, ended by SIGTERM: exit event %+v, want closed without a failure", ev)
		case !closed && (ev.Status != sdk.ExitFailed || ev.Failure == nil || ev.Failure.Message != "the agent was killed by SIGTERM"):
			t.Errorf("not closed, ended by SIGTERM: exit event %+v, want failed with the signal", ev)
		}
	}
}

// A provider that prints what is not a frame and exits: the exit report
// quotes the line (its first 200 bytes, escaped, with its length when cut,
// and not the protocol's), a line too long to read too, beside the end of
// its stderr.
func TestExitReportQuotesWhatItPrinted(t *testing.T) {
	over := ndjson.DefaultMaxLine + 1
	for name, tc := range map[string]struct{ script, want string }{
		"a line that is not JSON": {`echo 'Usage: agent [flags]'; echo 'bad flag' >&2; exit 2`,
			`the agent exited with status 2: it printed "Usage: agent [flags]", not stream-json; its stderr ends: bad flag`},
		"a line too long to read": {fmt.Sprintf(`printf '{"\377'; head -c %d /dev/zero | tr '\0' x; echo; echo oom >&2; exit 2`, over-3),
			fmt.Sprintf(`the agent exited with status 2: it printed a line over the limit of %d bytes: "{\"\xff%s…" (%d bytes in all); its stderr ends: oom`,
				ndjson.DefaultMaxLine, strings.Repeat("x", 197), over)},
		"a frame after it": {`echo 'Starting'; echo '{"type":"system"}'; exit 2`, `the agent exited with status 2`},
	} {
		t.Run(name, func(t *testing.T) {
			p, err := Start(Config{Name: "the agent", Protocol: "stream-json", Dir: t.TempDir(),
				Command: sdk.ProviderCommand{Argv: []string{"sh", "-c", tc.script}}})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { p.Close(context.Background()) })
			for {
				if _, _, err := p.Next(); err == io.EOF {
					break
				} else if err != nil && !errors.Is(err, ndjson.ErrLineTooLong) {
					t.Fatal(err)
				}
			}
			<-p.Done()
			ev := p.ExitEvent("", false)
			if diff := cmp.Diff(&sdk.Failure{Code: "provider_exited", Message: tc.want}, ev.Failure); diff != "" {
				t.Errorf("exit failure (-want +got):\n%s", diff)
			}
		})
	}
}

// A provider that prints a secret (an MCP server's token, say) has it
// quoted as *** in its exit report, its stdout line or its stderr.
func TestExitReportRedactsSecrets(t *testing.T) {
	p, err := Start(Config{Name: "the agent", Protocol: "stream-json", Dir: t.TempDir(), Redact: []string{"s3cret"},
		Command: sdk.ProviderCommand{Argv: []string{"sh", "-c", `echo 'token s3cret'; echo 'bad s3cret' >&2; exit 2`}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close(context.Background()) })
	for {
		if _, _, err := p.Next(); err == io.EOF {
			break
		}
	}
	<-p.Done()
	want := `the agent exited with status 2: it printed "token ***", not stream-json; its stderr ends: bad ***`
	if ev := p.ExitEvent("", false); ev.Failure == nil || ev.Failure.Message != want {
		t.Errorf("exit failure: %+v, want %s", ev.Failure, want)
	}
}
