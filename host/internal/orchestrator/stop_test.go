package orchestrator_test

import (
	"context"
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-run/baton/host/internal/domain"
)

// Stop means stop, for every plugin: a provider that ignores the interrupt
// (testdata/*/interrupt_ignored.ndjson: it outlives its stdin closing and
// SIGTERM, and only SIGKILL ends it) has its process ended by the host,
// through its plugin, once the grace has passed on the host's clock, and
// not a moment before. The run ends interrupted saying it was forced, the
// session ended by the host, the process gone. (Cursor's plugin ends the
// turn's process itself, its interrupt being that process's end:
// TestCursorTurnInterrupt.)

// ignoredPrompts is the message each interrupt_ignored transcript expects.
var ignoredPrompts = map[string]string{
	"acp":      "Remember the word: pineapple.",
	"codex":    "Count to a million, slowly",
	"claude":   "Count to a million, slowly",
	"opencode": "Count to a million, slowly",
}

// startIgnored starts a run of provider's interrupt_ignored transcript and
// interrupts it once its turn runs; it returns the thread and the run.
func (e *env) startIgnored(provider string, force bool) (string, domain.Run) {
	e.t.Helper()
	threadID, _, _ := e.newThread(provider, provider+"/interrupt_ignored.ndjson", "")
	e.dispatch(domain.Command{ID: "send", ThreadID: threadID, Payload: domain.DispatchMessage{Text: ignoredPrompts[provider]}})
	th := e.waitFor(threadID, "the turn to start", func(th domain.Thread) bool {
		// An ACP agent's turn starts as its prompt is sent: its first
		// thought shows the prompt reached it.
		return len(th.Runs) == 1 && th.Runs[0].Status == domain.RunStatusRunning && len(th.ProviderTurns) == 1 &&
			(provider != "acp" || len(th.TurnItems) > 0)
	})
	e.dispatch(domain.Command{ID: "stop", ThreadID: threadID, Payload: domain.InterruptRun{RunID: th.Runs[0].ID, Force: force}})
	if ask, ok := interruptFrames[provider]; ok && !force {
		// The interrupt is sent after it is stored, by the outbox: a test
		// that ends the grace before it was sent would kill the provider
		// short of the frame its transcript expects next.
		e.waitFrame(th.ProviderSessions[len(th.ProviderSessions)-1].ID, ask)
	}
	return threadID, th.Runs[0]
}

// interruptFrames is what each provider's interrupt looks like in a
// session's raw frames, where the test knows it.
var interruptFrames = map[string]string{"acp": `"method":"session/cancel"`, "codex": `"method":"turn/interrupt"`}

// stopOrder labels what a forced stop stores, in order.
func stopOrder(r domain.Run) func(domain.Payload) string {
	return runEnd(r, func(p domain.Payload) string {
		switch p.(type) {
		case domain.InterruptRequested:
			return "interrupt requested"
		case domain.StopForced:
			return "stop forced"
		case domain.SessionEnded:
			return "session ended"
		case domain.RunEnded:
			return "-"
		}
		return ""
	})
}

// checkForced checks a run the host stopped by force, and its session.
func (e *env) checkForced(threadID, reason string) domain.Thread {
	e.t.Helper()
	th := e.waitFor(threadID, "the run and its session to end", func(th domain.Thread) bool {
		return allRunsEnded(1)(th) && th.ProviderSessions[0].Status == domain.SessionStatusEnded
	})
	r := th.Runs[0]
	if r.Status != domain.RunStatusInterrupted {
		e.t.Fatalf("run %s, want interrupted", r.Status)
	}
	if diff := cmp.Diff(&domain.Failure{Code: domain.FailureForced, Message: reason}, r.Failure); diff != "" {
		e.t.Errorf("the run's failure (-want +got):\n%s", diff)
	}
	s := th.ProviderSessions[0]
	if s.Status != domain.SessionStatusEnded || s.EndReason != "ended by the host: "+reason {
		e.t.Errorf("session %s, ended for %q", s.Status, s.EndReason)
	}
	// The provider's process (the peer, which only SIGKILL ends) is gone.
	if err := syscall.Kill(s.ProviderPid, 0); s.ProviderPid != 0 && !errors.Is(err, syscall.ESRCH) {
		e.t.Errorf("the provider process %d lives on (kill -0: %v)", s.ProviderPid, err)
	}
	// Every plugin ends the turn of a session it closes before its
	// provider's process is gone (the session's calls end with its
	// context), so the turn's end comes first. The run's end follows its
	// checkpoint, which may be stored before or after the session's end:
	// only its completing is in the order.
	want := []string{"interrupt requested", "stop forced", "root turn's terminal", "run completing", "session ended"}
	e.checkOrder(threadID, "the forced stop", want, func(p domain.Payload) string {
		if l := stopOrder(r)(p); l != "-" {
			return l
		}
		return ""
	})
	return th
}

func TestInterruptIgnoredIsForcedAfterTheGrace(t *testing.T) {
	for _, provider := range []string{"acp", "codex", "claude", "opencode"} {
		t.Run(provider, func(t *testing.T) {
			e := newEnv(t)
			threadID, _ := e.startIgnored(provider, false)
			// The grace is the one timer the interrupt armed; a moment
			// before it ends, the run still runs.
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			if p, err := waitBounds(ctx, e.clock, 1); err != nil || !cmp.Equal(p, []time.Duration{domain.DefaultInterruptGrace}) {
				t.Fatalf("pending timers %v (%v); want the grace, %s", p, err, domain.DefaultInterruptGrace)
			}
			e.clock.Advance(domain.DefaultInterruptGrace - time.Millisecond)
			if p := bounds(e.clock); !cmp.Equal(p, []time.Duration{time.Millisecond}) {
				t.Fatalf("a millisecond before the grace ends, pending timers %v", p)
			}
			if th := mustThread(t, e, threadID); th.Runs[0].Status != domain.RunStatusRunning || th.Runs[0].Stop.Forced != "" {
				t.Fatalf("a millisecond before the grace ends, the run is %s (forced %q)", th.Runs[0].Status, th.Runs[0].Stop.Forced)
			}
			e.clock.Advance(time.Millisecond)
			reason := "the provider did not stop within 10s of the interrupt, so the host ended its process"
			th := e.checkForced(threadID, reason)
			at := epoch.Add(domain.DefaultInterruptGrace)
			if diff := cmp.Diff(domain.RunStop{Deadline: at, Grace: domain.DefaultInterruptGrace, Forced: reason}, th.Runs[0].Stop); diff != "" {
				t.Errorf("the run's stop (-want +got):\n%s", diff)
			}
			if got := *th.Runs[0].EndedAt; !got.Equal(at) {
				t.Errorf("the run ended at %v, want at the grace's end %v", got, at)
			}
			if p := bounds(e.clock); len(p) != 0 {
				t.Errorf("timers left pending: %v", p)
			}
		})
	}
}

// --force ends the provider's process at once: no grace, no request to the
// provider first.
func TestForcedInterruptEndsTheProcessAtOnce(t *testing.T) {
	for _, provider := range []string{"acp", "codex"} {
		t.Run(provider, func(t *testing.T) {
			e := newEnv(t)
			threadID, _ := e.startIgnored(provider, true)
			th := e.checkForced(threadID, "stopped by force: the host ended the provider's process when asked to")
			if !th.Runs[0].Stop.Deadline.IsZero() || !th.Runs[0].EndedAt.Equal(epoch) {
				t.Errorf("the run's stop %+v, ended at %v; want no deadline, ended at once", th.Runs[0].Stop, th.Runs[0].EndedAt)
			}
			e.restart()
			if n := e.countFrames(th, interruptFrames[provider]); n != 0 {
				t.Errorf("the provider was asked to stop %d times; a forced stop asks nothing", n)
			}
		})
	}
}

// The session the host ended is recorded as ended, so the thread's next
// run opens a new one, resuming the provider's conversation (ACP's
// session/load).
func TestNextRunAfterAForcedStopResumes(t *testing.T) {
	e := newEnv(t)
	threadID, _ := e.startIgnored("acp", false)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if _, err := waitBounds(ctx, e.clock, 1); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(domain.DefaultInterruptGrace)
	th := e.checkForced(threadID, "the provider did not stop within 10s of the interrupt, so the host ended its process")
	e.dispatch(domain.Command{ID: "next", ThreadID: threadID, Payload: domain.DispatchMessage{Text: "What was the word?"}})
	th = e.waitFor(threadID, "the next run to end", allRunsEnded(2))
	r := th.Runs[1]
	if r.Status != domain.RunStatusCompleted || assistantText(th, r.ID) != "The word was pineapple." {
		t.Fatalf("the next run %s said %q", r.Status, assistantText(th, r.ID))
	}
	if len(th.ProviderSessions) != 2 || th.ProviderSessions[1].Resumed != th.ProviderThreads[0].ProviderRef {
		t.Fatalf("sessions %+v; want a second one resuming %s", th.ProviderSessions, th.ProviderThreads[0].ProviderRef)
	}
}
