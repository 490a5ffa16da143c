package cursor

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/go-hclog"

	"github.com/baton-run/baton/sdk"
	"github.com/baton-run/baton/sdk/clock"
	"github.com/baton-run/baton/sdk/clock/clocktest"
	"github.com/baton-run/baton/sdk/lineproc"
	"github.com/baton-run/baton/sdk/providerproc"
)

// The adapter in this process on a fake clock, with small sh scripts as
// cursor-agent: the timeouts of a turn's process (its linger after the
// result, the grace before SIGKILL, the waits for its exit) are driven by
// moving the clock, never by waiting for them.

var epoch = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)

// resultLine ends a turn (initLine, of normalize_test.go, begins it).
const resultLine = `{"type":"result","subtype":"success","is_error":false,"result":"done","session_id":"chat-1"}`

// events collects what the adapter emits.
type events chan sdk.RuntimeEvent

func (e events) Emit(ev sdk.RuntimeEvent) { e <- ev }

// step is what a test compares of an event.
type step struct {
	Kind   sdk.EventKind
	Status sdk.Status
	Text   string
}

// until reads events up to one of kind, and returns them as steps.
func (e events) until(t *testing.T, kind sdk.EventKind) []step {
	t.Helper()
	var got []step
	for {
		select {
		case ev := <-e:
			got = append(got, step{ev.Kind, ev.Status, ev.Text})
			if ev.Kind == kind {
				return got
			}
		case <-time.After(clocktest.Guard):
			t.Fatalf("no %s within %v; got %+v", kind, clocktest.Guard, got)
		}
	}
}

// open opens a session whose cursor-agent is script, on f.
func open(t *testing.T, f *clock.Fake, script string) (*Adapter, string, events) {
	t.Helper()
	a := New(hclog.NewNullLogger(), WithClock(f))
	em := make(events, 256)
	const id = "s"
	if _, err := a.OpenSession(t.Context(), sdk.OpenSessionRequest{SessionID: id, Cwd: t.TempDir(),
		Command: sdk.ProviderCommand{Argv: []string{"sh", "-c", script}}}, em); err != nil {
		t.Fatal(err)
	}
	return a, id, em
}

// current is the session's latest process.
func current(t *testing.T, a *Adapter, id string) *turnProc {
	t.Helper()
	s, err := a.sessions.Get(id)
	if err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cur
}

func running(t *testing.T, tp *turnProc, what string) {
	t.Helper()
	select {
	case <-tp.proc.Done():
		t.Fatalf("%s: the process already exited (%v)", what, tp.proc.Err())
	default:
	}
}

func exitErr(t *testing.T, tp *turnProc) string {
	t.Helper()
	select {
	case <-tp.exited:
	case <-time.After(clocktest.Guard):
		t.Fatal("the turn's process did not end")
	}
	if err := tp.proc.Err(); err != nil {
		return err.Error()
	}
	return ""
}

var completedTurn = []step{{Kind: sdk.EventThreadStarted}, {Kind: sdk.EventTurnStarted},
	{Kind: sdk.EventTurnTerminal, Status: sdk.TurnCompleted}}

// A process that lives on after its result gets SIGTERM lingerAfterResult
// later, and one that ignores it SIGKILL a grace period after that.
func TestLingerAfterTheResult(t *testing.T) {
	for _, c := range []struct {
		name, trap, exit string
	}{
		{"ends on SIGTERM", "", "signal: terminated"},
		{"ignores SIGTERM", "trap '' TERM;", "signal: killed"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := clock.NewFake(epoch)
			a, id, em := open(t, f, c.trap+"echo '"+initLine+"'; echo '"+resultLine+"'; exec sleep 300")
			if _, err := a.StartTurn(t.Context(), sdk.StartTurnRequest{SessionID: id, Input: sdk.TurnInput{Text: "hi"}}); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(completedTurn, em.until(t, sdk.EventTurnTerminal)); diff != "" {
				t.Fatalf("the turn (-want +got):\n%s", diff)
			}
			tp := current(t, a, id)
			clocktest.Pending(t, f, "after the result", lingerAfterResult)
			f.Advance(lingerAfterResult - time.Millisecond)
			clocktest.Pending(t, f, "a millisecond before the linger ends", time.Millisecond)
			running(t, tp, "a millisecond before the linger ends")
			f.Advance(time.Millisecond)
			if c.trap != "" {
				clocktest.Pending(t, f, "SIGTERM ignored", providerproc.GracePeriod)
				f.Advance(providerproc.GracePeriod - time.Millisecond)
				clocktest.Pending(t, f, "a millisecond before SIGKILL", time.Millisecond)
				running(t, tp, "a millisecond before SIGKILL")
				f.Advance(time.Millisecond)
			}
			if got := exitErr(t, tp); got != c.exit {
				t.Fatalf("the process ended with %q, want %q", got, c.exit)
			}
			if err := a.CloseSession(t.Context(), id); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([]step{{Kind: sdk.EventRuntimeExited, Status: sdk.ExitClosed}}, em.until(t, sdk.EventRuntimeExited)); diff != "" {
				t.Fatalf("after the turn (-want +got):\n%s", diff)
			}
		})
	}
}

// The next turn waits for the process of the turn before to exit, but
// only waitExitTimeout, or until its context ends. The process here
// ignores SIGTERM and something it started holds its stdout (in a session
// of its own, out of reach of the group's signals), so that its turn ends
// DrainTimeout after its SIGKILL: past the wait.
func TestNextTurnWaitsForTheProcessBefore(t *testing.T) {
	for _, cancelled := range []bool{false, true} {
		t.Run("cancelled="+strconv.FormatBool(cancelled), func(t *testing.T) {
			f := clock.NewFake(epoch)
			dir := t.TempDir()
			pidfile, started := filepath.Join(dir, "pid"), filepath.Join(dir, "started")
			if err := syscall.Mkfifo(started, 0o600); err != nil {
				t.Fatal(err)
			}
			// The script goes on only once the holder is in its own session
			// (it says so through the FIFO), so the group's SIGKILL can
			// never reach it first.
			a, id, em := open(t, f, "trap '' TERM; setsid sh -c 'echo $$ >"+pidfile+"; echo >"+started+"; exec sleep 300' 2>/dev/null & read _ <"+started+
				"; echo '"+initLine+"'; echo '"+resultLine+"'; exec sleep 300")
			if _, err := a.StartTurn(t.Context(), sdk.StartTurnRequest{SessionID: id, Input: sdk.TurnInput{Text: "hi"}}); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				if b, err := os.ReadFile(pidfile); err == nil {
					if pid, _ := strconv.Atoi(strings.TrimSpace(string(b))); pid > 0 {
						_ = syscall.Kill(pid, syscall.SIGKILL)
					}
				}
			})
			if diff := cmp.Diff(completedTurn, em.until(t, sdk.EventTurnTerminal)); diff != "" {
				t.Fatalf("the turn (-want +got):\n%s", diff)
			}
			tp := current(t, a, id)
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			next := make(chan error, 1)
			go func() {
				_, err := a.StartTurn(ctx, sdk.StartTurnRequest{SessionID: id, Input: sdk.TurnInput{Text: "again"}})
				next <- err
			}()
			clocktest.Pending(t, f, "the next turn waits", lingerAfterResult, waitExitTimeout)
			var err error
			if cancelled {
				cancel()
				err = clocktest.Within(t, next)
				if !errors.Is(err, context.Canceled) {
					t.Fatalf("next turn, cancelled: %v", err)
				}
				if got := f.Now(); !got.Equal(epoch) {
					t.Fatalf("the clock moved to %v", got)
				}
				clocktest.Pending(t, f, "the wait given up", lingerAfterResult)
				f.Advance(lingerAfterResult) // SIGTERM, ignored
				clocktest.Pending(t, f, "SIGTERM ignored", providerproc.GracePeriod)
				f.Advance(providerproc.GracePeriod) // SIGKILL; the drain begins
				clocktest.Pending(t, f, "SIGKILL", lineproc.DrainTimeout)
				f.Advance(lineproc.DrainTimeout)
			} else {
				f.Advance(lingerAfterResult) // SIGTERM, ignored
				clocktest.Pending(t, f, "SIGTERM ignored", providerproc.GracePeriod, waitExitTimeout-lingerAfterResult)
				f.Advance(providerproc.GracePeriod) // SIGKILL; the drain begins
				left := waitExitTimeout - lingerAfterResult - providerproc.GracePeriod
				clocktest.Pending(t, f, "SIGKILL", left, lineproc.DrainTimeout)
				running := tp.exited
				select {
				case <-running:
					t.Fatal("the turn's process ended before its drain")
				case err := <-next:
					t.Fatalf("the next turn returned %v before waitExitTimeout", err)
				default:
				}
				f.Advance(left)
				err = clocktest.Within(t, next)
				if want := "start turn: the process of the turn before did not exit"; !errors.Is(err, sdk.ErrBusy) || !strings.Contains(err.Error(), want) {
					t.Fatalf("next turn: %v, want ErrBusy: %s", err, want)
				}
				clocktest.Pending(t, f, "the drain goes on", lineproc.DrainTimeout-left)
				f.Advance(lineproc.DrainTimeout - left)
			}
			// The drain over, the turn's stdout is closed and its process
			// ends.
			if got := exitErr(t, tp); got != "signal: killed" {
				t.Fatalf("the process ended with %q", got)
			}
		})
	}
}

// Closing a session stops its running turn: SIGTERM, then SIGKILL a grace
// period later for a process that ignores it; the turn ends interrupted
// and runtime_exited comes last.
func TestCloseStopsTheRunningTurn(t *testing.T) {
	f := clock.NewFake(epoch)
	a, id, em := open(t, f, "trap '' TERM; echo '"+initLine+"'; exec sleep 300")
	if _, err := a.StartTurn(t.Context(), sdk.StartTurnRequest{SessionID: id, Input: sdk.TurnInput{Text: "hi"}}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]step{{Kind: sdk.EventThreadStarted}, {Kind: sdk.EventTurnStarted}}, em.until(t, sdk.EventTurnStarted)); diff != "" {
		t.Fatalf("the turn (-want +got):\n%s", diff)
	}
	tp := current(t, a, id)
	closed := make(chan error, 1)
	go func() { closed <- a.CloseSession(t.Context(), id) }()
	clocktest.Pending(t, f, "closing", providerproc.GracePeriod, waitExitTimeout)
	f.Advance(providerproc.GracePeriod - time.Millisecond)
	running(t, tp, "a millisecond before SIGKILL")
	f.Advance(time.Millisecond)
	if err := clocktest.Within(t, closed); err != nil {
		t.Fatal(err)
	}
	if got := exitErr(t, tp); got != "signal: killed" {
		t.Fatalf("the process ended with %q", got)
	}
	want := []step{{Kind: sdk.EventTurnTerminal, Status: sdk.TurnInterrupted, Text: "the session was closed"},
		{Kind: sdk.EventRuntimeExited, Status: sdk.ExitClosed}}
	if diff := cmp.Diff(want, em.until(t, sdk.EventRuntimeExited)); diff != "" {
		t.Fatalf("closing (-want +got):\n%s", diff)
	}
	if got := f.Now(); !got.Equal(epoch.Add(providerproc.GracePeriod)) {
		t.Fatalf("the clock moved to %v", got)
	}
}
