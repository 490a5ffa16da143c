package providerproc

import (
	"bufio"
	"context"
	"errors"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-run/baton/sdk"
	"github.com/baton-run/baton/sdk/clock"
	"github.com/baton-run/baton/sdk/clock/clocktest"
)

var epoch = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)

// line is a line of stderr, with the fake time it came at.
type line struct {
	At   time.Time
	Text string
}

// startReady starts script on f and waits for its "ready" line; its
// stderr lines arrive on the channel returned, stamped with the fake time
// (which moves only when the test moves it).
func startReady(t *testing.T, f *clock.Fake, script string) (*Process, <-chan line) {
	t.Helper()
	stderr := make(chan line, 16)
	p, err := Start(Command{Argv: []string{"sh", "-c", script}, Clock: f,
		Stderr: func(l []byte) { stderr <- line{f.Now(), string(l)} }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-p.Pid(), syscall.SIGKILL); <-p.Done() })
	if line, _ := bufio.NewReader(p.Stdout).ReadString('\n'); line != "ready\n" {
		t.Fatalf("stdout = %q, want ready", line)
	}
	return p, stderr
}

// closeAsync runs Close on its own and reports when it returned.
func closeAsync(ctx context.Context, p *Process) <-chan struct{} {
	done := make(chan struct{})
	go func() { _ = p.Close(ctx); close(done) }()
	return done
}

// returned waits for Close to return. The clock does not move meanwhile;
// the guard is only there so that a broken Close fails rather than hangs.
func returned(t *testing.T, closed <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-closed:
	case <-time.After(clocktest.Guard):
		t.Fatalf("Close did not return %s", what)
	}
}

func alivePending(t *testing.T, p *Process, f *clock.Fake, what string, want ...time.Duration) {
	t.Helper()
	clocktest.Pending(t, f, what, want...)
	select {
	case <-p.Done():
		t.Fatalf("%s: the provider already exited (%v)", what, p.Err())
	default:
	}
}

// next is the next stderr line.
func next(t *testing.T, stderr <-chan line) line {
	t.Helper()
	return clocktest.Within(t, stderr)
}

func waitStatus(t *testing.T, err error) syscall.WaitStatus {
	t.Helper()
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("exit error %v is not an *exec.ExitError", err)
	}
	return ee.Sys().(syscall.WaitStatus)
}

// A provider that does not exit when its stdin closes gets SIGTERM once
// the grace period has passed on the clock, and not a moment before.
func TestCloseSendsSIGTERMAfterTheGrace(t *testing.T) {
	f := clock.NewFake(epoch)
	p, stderr := startReady(t, f, `trap 'echo TERM >&2; exit 7' TERM; echo ready; sleep 300 & wait`)
	closed := closeAsync(t.Context(), p)
	alivePending(t, p, f, "stdin closed", GracePeriod)
	f.Advance(GracePeriod - time.Millisecond)
	alivePending(t, p, f, "a millisecond before the grace ends", time.Millisecond)
	f.Advance(time.Millisecond)
	returned(t, closed, "when the provider exited on SIGTERM")
	if diff := cmp.Diff(line{epoch.Add(GracePeriod), "TERM"}, next(t, stderr)); diff != "" {
		t.Fatalf("the TERM trap's line (-want +got):\n%s", diff)
	}
	if ws := waitStatus(t, p.Err()); !ws.Exited() || ws.ExitStatus() != 7 {
		t.Fatalf("exit %v, want status 7 (its TERM trap)", ws)
	}
	if got := f.Now(); !got.Equal(epoch.Add(GracePeriod)) {
		t.Fatalf("the clock moved to %v", got)
	}
	if p := f.Pending(); len(p) != 0 {
		t.Fatalf("Close left timers pending: %v", p)
	}
}

// A provider that ignores SIGTERM gets SIGKILL once the second grace
// period has passed.
func TestCloseSendsSIGKILLAfterTheSecondGrace(t *testing.T) {
	f := clock.NewFake(epoch)
	p, stderr := startReady(t, f, `trap 'echo TERM >&2' TERM; echo ready; while :; do sleep 300 & wait; done`)
	closed := closeAsync(t.Context(), p)
	alivePending(t, p, f, "stdin closed", GracePeriod)
	f.Advance(GracePeriod)
	if diff := cmp.Diff(line{epoch.Add(GracePeriod), "TERM"}, next(t, stderr)); diff != "" {
		t.Fatalf("the TERM trap's line (-want +got):\n%s", diff)
	}
	alivePending(t, p, f, "after SIGTERM", GracePeriod)
	f.Advance(GracePeriod - time.Millisecond)
	alivePending(t, p, f, "a millisecond before the second grace ends", time.Millisecond)
	f.Advance(time.Millisecond)
	returned(t, closed, "after SIGKILL")
	if ws := waitStatus(t, p.Err()); !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("exit %v, want death by SIGKILL", ws)
	}
}

// A context that ends cuts both grace periods short: the provider is
// killed without the clock moving.
func TestCloseStopsWaitingWhenTheContextEnds(t *testing.T) {
	f := clock.NewFake(epoch)
	p, _ := startReady(t, f, `trap '' TERM; echo ready; sleep 300`)
	ctx, cancel := context.WithCancel(t.Context())
	closed := closeAsync(ctx, p)
	alivePending(t, p, f, "stdin closed", GracePeriod)
	cancel()
	returned(t, closed, "when its context ended")
	if ws := waitStatus(t, p.Err()); !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("exit %v, want death by SIGKILL", ws)
	}
	if got := f.Now(); !got.Equal(epoch) {
		t.Fatalf("the clock moved to %v", got)
	}
	if p := f.Pending(); len(p) != 0 {
		t.Fatalf("Close left timers pending: %v", p)
	}
}

// A provider that exits when its stdin closes is not signalled at all.
func TestCloseOfAProviderThatExitsOnEOF(t *testing.T) {
	f := clock.NewFake(epoch)
	p, _ := startReady(t, f, `trap 'exit 7' TERM; echo ready; cat >/dev/null; exit 3`)
	if err := p.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if ws := waitStatus(t, p.Err()); !ws.Exited() || ws.ExitStatus() != 3 {
		t.Fatalf("exit %v, want status 3 (stdin's end, no signal)", ws)
	}
	if got := f.Now(); !got.Equal(epoch) {
		t.Fatalf("the clock moved to %v", got)
	}
}

// A forced close (a provider that did not stop when asked) does not wait
// for its stdin's end to be heard: SIGTERM at once, at the clock's start,
// and SIGKILL once the grace has passed for one that ignores it too.
func TestForcedCloseSendsSIGTERMAtOnce(t *testing.T) {
	f := clock.NewFake(epoch)
	p, stderr := startReady(t, f, `trap 'echo TERM >&2' TERM; echo ready; while :; do sleep 300 & wait; done`)
	closed := closeAsync(sdk.ForceClose(t.Context()), p)
	if diff := cmp.Diff(line{epoch, "TERM"}, next(t, stderr)); diff != "" {
		t.Fatalf("the TERM trap's line (-want +got):\n%s", diff)
	}
	alivePending(t, p, f, "after SIGTERM", GracePeriod)
	f.Advance(GracePeriod - time.Millisecond)
	alivePending(t, p, f, "a millisecond before the grace ends", time.Millisecond)
	f.Advance(time.Millisecond)
	returned(t, closed, "after SIGKILL")
	if ws := waitStatus(t, p.Err()); !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("exit %v, want death by SIGKILL", ws)
	}
}
