package domain

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestLoopCommandTypes(t *testing.T) {
	got := []string{SetPolicy{}.CommandType(), FireWait{}.CommandType(), RecordCheck{}.CommandType()}
	want := []string{"thread.set_policy", "wait.fire", "loop.check.record"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("command types (-want +got):\n%s", diff)
	}
	for _, c := range []CommandPayload{CreateThread{}, DispatchMessage{}, IngestProviderEvent{}, RecordSessionOpened{}, FailRun{}, Recover{},
		InterruptRun{}, RespondToRequest{}, SteerFailed{}, MarkRequestUnreachable{}, RecordTurnDispatched{}, RespondFailed{},
		RollbackToCheckpoint{}, RecordCheckpoint{}, RecordFilesRestored{}, RecordProviderReconciled{},
		StartQueued{}, CloseIdleSession{}, ShutDown{}, SwitchProvider{}, RetireSession{}} {
		for _, typ := range want {
			if c.CommandType() == typ {
				t.Errorf("%T has the loop's command type %s", c, typ)
			}
		}
	}
}

// A steering message sent (by restart) just before the turn hit a limit
// is not lost: the continuation after the wait carries it.
func TestContinuationCarriesSteeringPendingAtTheLimit(t *testing.T) {
	w := newWorld(t)
	w.setPolicy(ContinuationPolicy{OnLimit: OnLimitWait, ContinueText: "go on"})
	w.send("one")
	w.open("s1")
	w.turnOn("s1", "u1")
	w.must(Command{ID: "m2", ThreadID: "thr", Payload: DispatchMessage{Text: "also fix the docs", Mode: ModeRestartActive}})
	w.ev("s1", limitTerminal("u1", Limit{Kind: LimitRate}))
	wait := w.thread.NextWait()
	w.now = wait.At
	d := w.must(Command{ID: "f", ThreadID: "thr", Payload: FireWait{WaitID: wait.ID}})
	var texts []string
	for _, e := range d.Effects {
		if e.Type == EffectStartTurn {
			texts = append(texts, e.Text)
		}
	}
	if diff := cmp.Diff([]string{"go on\n\nalso fix the docs"}, texts); diff != "" {
		t.Errorf("continuation turns (-want +got):\n%s", diff)
	}
	if r := w.thread.Runs[0]; len(r.PendingRestart) != 0 || len(w.thread.Runs) != 1 {
		t.Errorf("the steering message is still pending (%+v) or was queued as a run (%d runs)", r.PendingRestart, len(w.thread.Runs))
	}
}

// completeWithCheck ends the active run's turn completed; the loop asks
// for its check.
func completeWithCheck(w *world, session, turn string) string {
	w.t.Helper()
	w.turnOn(session, turn)
	w.ev(session, ProviderEvent{Kind: EvTurnTerminal, TurnRef: turn, Status: "completed"})
	if !w.thread.Loop.CheckPending {
		w.t.Fatalf("no check asked for after %s: %+v", turn, w.thread.Loop)
	}
	return w.thread.Runs[len(w.thread.Runs)-1].ID
}

// The next run's message says how the check failed, in full.
func TestCheckMessage(t *testing.T) {
	const tail = "\nContinue the work until the check passes. If you cannot go on without a person, start a line with " +
		BlockedMarker + " and say why."
	for _, c := range []struct {
		name string
		res  CheckResult
		want string
	}{
		{"exit", CheckResult{ExitCode: 2, Output: "FAIL x\nFAIL y\n\n"},
			"The check `make check` did not pass (exit 2). The end of its output:\n\n```\nFAIL x\nFAIL y\n```\n" + tail},
		{"timed out", CheckResult{ExitCode: -1, TimedOut: true, Output: "running..."},
			"The check `make check` did not finish in time. The end of its output:\n\n```\nrunning...\n```\n" + tail},
		{"could not run", CheckResult{ExitCode: -1, Error: "exec: \"make\": executable file not found in $PATH"},
			"The check `make check` could not run: exec: \"make\": executable file not found in $PATH." + tail},
		{"no output", CheckResult{ExitCode: 1}, "The check `make check` did not pass (exit 1)." + tail},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := newWorld(t)
			w.setPolicy(ContinuationPolicy{Until: "make check"})
			w.send("fix it")
			w.open("s1")
			res := c.res
			res.RunID, res.Command = completeWithCheck(w, "s1", "u1"), "make check"
			w.must(Command{ID: "chk", ThreadID: "thr", Payload: RecordCheck{CheckResult: res}})
			if len(w.thread.Runs) != 2 {
				t.Fatalf("%d runs after a failed check, want 2", len(w.thread.Runs))
			}
			if diff := cmp.Diff(c.want, w.thread.Runs[1].Input); diff != "" {
				t.Errorf("next run's message (-want +got):\n%s", diff)
			}
		})
	}
}

// A check is recorded once, for a run of the thread; one that ends after
// its loop was turned off only records what it found: a message queued
// while it ran starts, and no run of the loop's is queued.
func TestRecordCheckEdges(t *testing.T) {
	w := newWorld(t)
	// No loop: nothing to record.
	if d := w.must(Command{ID: "chk0", ThreadID: "thr", Payload: RecordCheck{CheckResult: CheckResult{RunID: "run_x", ExitCode: 1}}}); len(d.Events) != 0 {
		t.Fatalf("a check with no loop: %s", types(d))
	}
	w.setPolicy(ContinuationPolicy{Until: "make check", OnLimit: OnLimitWait})
	w.send("fix it")
	w.open("s1")
	runID := completeWithCheck(w, "s1", "u1")
	if _, err := w.decide(Command{ID: "chk1", ThreadID: "thr", Payload: RecordCheck{CheckResult: CheckResult{RunID: "run_x", ExitCode: 1}}}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a check of an unknown run: %v", err)
	}
	// A message sent while the check runs waits for it.
	w.send("and then this")
	if r := w.thread.Runs[1]; r.Status != RunStatusQueued {
		t.Fatalf("a message during the check: run %s", r.Status)
	}
	d := w.must(Command{ID: "off", ThreadID: "thr", Payload: SetPolicy{}})
	if got := types(d); got != "thread.policy_set" {
		t.Fatalf("turning the policy off: %s", got)
	}
	if l := w.thread.Loop; l.Status != LoopStopped || l.Reason != "the policy was turned off" || !l.CheckPending {
		t.Fatalf("loop after turning it off: %+v", l)
	}
	w.now = t0.Add(time.Minute)
	d = w.must(Command{ID: "chk2", ThreadID: "thr", Payload: RecordCheck{CheckResult: CheckResult{RunID: runID, Command: "make check", ExitCode: 1}}})
	if got := types(d); got != "loop.check_recorded run.started attempt.started node.started" {
		t.Fatalf("the check after the loop ended: %s", got)
	}
	want := &CheckResult{RunID: runID, Command: "make check", ExitCode: 1, At: t0.Add(time.Minute)}
	if diff := cmp.Diff(want, w.thread.Loop.Check); diff != "" {
		t.Fatalf("recorded check (-want +got):\n%s", diff)
	}
	if r := w.thread.Runs[1]; len(w.thread.Runs) != 2 || r.Input != "and then this" {
		t.Fatalf("runs after the check: %d, the second %q", len(w.thread.Runs), r.Input)
	}
	// Recorded before: again is nothing.
	if d := w.must(Command{ID: "chk3", ThreadID: "thr", Payload: RecordCheck{CheckResult: CheckResult{RunID: runID, ExitCode: 0}}}); len(d.Events) != 0 {
		t.Fatalf("a check recorded twice: %s", types(d))
	}
}

// A new policy keeps the waits armed under the old one: turning the
// policy off does not strand a waiting run.
func TestNewPolicyKeepsArmedWaits(t *testing.T) {
	w := newWorld(t)
	w.setPolicy(ContinuationPolicy{OnLimit: OnLimitWait})
	w.send("one")
	w.open("s1")
	w.turnOn("s1", "u1")
	w.ev("s1", limitTerminal("u1", Limit{Kind: LimitRate}))
	wait := *w.thread.NextWait()
	w.must(Command{ID: "off", ThreadID: "thr", Payload: SetPolicy{}})
	if l := w.thread.Loop; l.Status != LoopStopped || !cmp.Equal(l.Wait, &wait) || !w.thread.Unattended() {
		t.Fatalf("after turning the policy off: loop %+v, wait %+v", l, l.Wait)
	}
	w.setPolicy(ContinuationPolicy{OnLimit: OnLimitWait, MaxRuns: 3})
	if l := w.thread.Loop; l.Status != LoopActive || !cmp.Equal(l.Wait, &wait) {
		t.Fatalf("after a new policy: loop %+v", l)
	}
}

// Malformed or missing reset information falls back to the backoff: a
// limit that resets never, an hour ago, now, or at the epoch is probed
// after the policy's interval, never at once.
func TestMalformedResetFallsBackToTheBackoff(t *testing.T) {
	now := t0.Add(3 * time.Hour)
	for name, reset := range map[string]time.Time{"none": {}, "an hour ago": now.Add(-time.Hour), "now": now, "the epoch": time.Unix(0, 0)} {
		t.Run(name, func(t *testing.T) {
			w := newWorld(t)
			w.setPolicy(ContinuationPolicy{OnLimit: OnLimitWait, Probe: Backoff{Interval: 2 * time.Minute, Factor: 3, Ceiling: time.Hour}})
			w.send("one")
			w.open("s1")
			w.turnOn("s1", "u1")
			w.now = now
			w.ev("s1", limitTerminal("u1", Limit{Kind: LimitUsageWindow, ResetsAt: reset, Message: "try again later"}))
			wait := w.thread.NextWait()
			if wait == nil || !wait.At.Equal(now.Add(2*time.Minute)) {
				t.Fatalf("wait %+v, want one at %v", wait, now.Add(2*time.Minute))
			}
			// Probed again with the same answer: the next probe backs off.
			w.now = wait.At
			w.must(Command{ID: "f", ThreadID: "thr", Payload: FireWait{WaitID: wait.ID}})
			w.turnOn("s1", "u2")
			w.ev("s1", limitTerminal("u2", Limit{Kind: LimitUsageWindow, ResetsAt: reset}))
			if next := w.thread.NextWait(); next == nil || !next.At.Equal(wait.At.Add(6*time.Minute)) || next.Probe != 2 {
				t.Fatalf("second wait %+v, want probe 2 at %v", next, wait.At.Add(6*time.Minute))
			}
		})
	}
}
