package domain

import (
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/baton-run/baton/sdk"
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
		StartQueued{}, CloseIdleSession{}, ShutDown{}, SwitchProvider{}} {
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
	w.ev("s1", limitTerminal("u1", sdk.Limit{Kind: sdk.LimitRate}))
	wait := w.thread.NextWait()
	w.now = wait.At
	d := w.must(Command{ID: "f", ThreadID: "thr", Payload: FireWait{WaitID: wait.ID}})
	var texts []string
	for _, e := range d.Effects {
		if e, ok := e.(StartTurn); ok {
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
	w.ev(session, sdk.RuntimeEvent{Kind: sdk.EventTurnTerminal, TurnRef: turn, Status: sdk.TurnCompleted})
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
	w.ev("s1", limitTerminal("u1", sdk.Limit{Kind: sdk.LimitRate}))
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
			w.ev("s1", limitTerminal("u1", sdk.Limit{Kind: sdk.LimitUsageWindow, ResetsAt: reset, Message: "try again later"}))
			wait := w.thread.NextWait()
			if wait == nil || !wait.At.Equal(now.Add(2*time.Minute)) {
				t.Fatalf("wait %+v, want one at %v", wait, now.Add(2*time.Minute))
			}
			// Probed again with the same answer: the next probe backs off.
			w.now = wait.At
			w.must(Command{ID: "f", ThreadID: "thr", Payload: FireWait{WaitID: wait.ID}})
			w.turnOn("s1", "u2")
			w.ev("s1", limitTerminal("u2", sdk.Limit{Kind: sdk.LimitUsageWindow, ResetsAt: reset}))
			if next := w.thread.NextWait(); next == nil || !next.At.Equal(wait.At.Add(6*time.Minute)) || next.Probe != 2 {
				t.Fatalf("second wait %+v, want probe 2 at %v", next, wait.At.Add(6*time.Minute))
			}
		})
	}
}

// How each loop ends, in the words the log keeps: every budget, the wait
// budget, a blocked run and a failed one, the agent's blocked marker.
func TestHowLoopsEnd(t *testing.T) {
	// turn is the active run's next provider turn on s1: it reports
	// tokens (0: none), answers, and ends as end says.
	turns := 0
	turn := func(w *world, tokens int64, answer string, end sdk.RuntimeEvent) {
		w.t.Helper()
		turns++
		ref := fmt.Sprintf("turn-%d", turns)
		w.turnOn("s1", ref)
		if tokens != 0 {
			w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventUsage, TurnRef: ref, Usage: &sdk.Usage{TotalTokens: tokens}})
		}
		if answer != "" {
			w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventItemStarted, TurnRef: ref, ItemRef: ref + "-a", ItemKind: sdk.ItemAssistantMessage})
			w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventContentDelta, TurnRef: ref, ItemRef: ref + "-a", Text: answer})
			w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventItemCompleted, TurnRef: ref, ItemRef: ref + "-a"})
		}
		end.TurnRef = ref
		w.ev("s1", end)
	}
	fail := func(w *world) {
		w.t.Helper()
		w.must(Command{ID: "chk", ThreadID: "thr", Payload: RecordCheck{CheckResult: CheckResult{RunID: w.thread.Runs[len(w.thread.Runs)-1].ID,
			Command: "make check", ExitCode: 1}}})
	}
	done := sdk.RuntimeEvent{Kind: sdk.EventTurnTerminal, Status: sdk.TurnCompleted}
	limit := func(l sdk.Limit) sdk.RuntimeEvent { return limitTerminal("", l) }
	// The wait that would lift past its budget is the ninth id the
	// decisions draw: the reset plus its jitter, to the second.
	overBudget := "the acp usage limit lifts at " + t0.Add(3*time.Hour+Jitter("wait_9")).Format(time.RFC3339) +
		", past the wait budget (1h0m0s from 2026-11-30T12:00:00Z)"
	type end struct {
		Loop    LoopStatus
		Reason  string
		Run     RunStatus
		Failure *Failure
		Tokens  int64
	}
	for _, c := range []struct {
		name   string
		policy ContinuationPolicy
		play   func(w *world)
		want   end
	}{
		{"max runs, within the hours", ContinuationPolicy{Until: "make check", MaxRuns: 2, MaxDuration: 5 * time.Hour}, func(w *world) {
			turn(w, 0, "", done)
			fail(w)
			turn(w, 0, "", done)
			fail(w)
		}, end{LoopBudget, "max runs (2) reached", RunStatusCompleted, nil, 0}},
		{"max runs, no check", ContinuationPolicy{MaxRuns: 1}, func(w *world) {
			turn(w, 0, "", done)
		}, end{LoopBudget, "max runs (1) reached", RunStatusCompleted, nil, 0}},
		// Negative usage counts as none; the count stops at the largest.
		{"max tokens", ContinuationPolicy{Until: "make check", MaxTokens: 100}, func(w *world) {
			turn(w, -5, "", done)
			fail(w)
			if tok := w.thread.Loop.Tokens; tok != 0 {
				w.t.Fatalf("tokens after a run that used -5: %d", tok)
			}
			turn(w, 50, "", done)
			fail(w)
			turn(w, math.MaxInt64, "", done)
			fail(w)
		}, end{LoopBudget, "max tokens (100) reached: 9223372036854775807 used", RunStatusCompleted, nil, math.MaxInt64}},
		{"max hours at a check", ContinuationPolicy{Until: "make check", MaxDuration: 90 * time.Minute}, func(w *world) {
			w.now = t0.Add(2 * time.Hour)
			turn(w, 0, "", done)
			fail(w)
		}, end{LoopBudget, "max hours (1.50h) reached at 2026-11-30T13:30:00Z", RunStatusCompleted, nil, 0}},
		{"max hours before a wait's instant", ContinuationPolicy{OnLimit: OnLimitWait, MaxDuration: time.Hour}, func(w *world) {
			turn(w, 0, "", limit(sdk.Limit{Kind: sdk.LimitUsageWindow, ResetsAt: t0.Add(2 * time.Hour)}))
		}, end{LoopBudget, "max hours (1h) reached at 2026-11-30T13:00:00Z", RunStatusBlocked,
			&Failure{Code: "loop_budget", Message: "acp usage limit: max hours (1h) reached at 2026-11-30T13:00:00Z"}, 0}},
		{"the wait budget", ContinuationPolicy{OnLimit: OnLimitWait, MaxWait: time.Hour, Until: "make check"}, func(w *world) {
			turn(w, 0, "", limit(sdk.Limit{Kind: sdk.LimitUsageWindow, ResetsAt: t0.Add(3 * time.Hour)}))
		}, end{LoopStopped, "run 1 ended failed: " + overBudget, RunStatusFailed,
			&Failure{Code: "limit_wait_budget", Message: overBudget}, 0}},
		{"a limit, no waiting", ContinuationPolicy{Until: "make check"}, func(w *world) {
			turn(w, 0, "", limit(sdk.Limit{Kind: sdk.LimitRate}))
		}, end{LoopBlocked, "run 1 ended blocked: acp rate limit", RunStatusBlocked, &Failure{Code: "limit", Message: "acp rate limit"}, 0}},
		{"a failed run", ContinuationPolicy{Until: "make check"}, func(w *world) {
			turn(w, 0, "", sdk.RuntimeEvent{Kind: sdk.EventTurnTerminal, Status: sdk.TurnFailed, Failure: &sdk.Failure{Message: "boom"}})
		}, end{LoopStopped, "run 1 ended failed: boom", RunStatusFailed, &Failure{Message: "boom"}, 0}},
		{"the agent is blocked", ContinuationPolicy{Until: "make check"}, func(w *world) {
			turn(w, 0, "I tried.\n"+BlockedMarker+"  need the API key  \nBye.", done)
		}, end{LoopBlocked, "the agent said it is blocked: need the API key", RunStatusCompleted, nil, 0}},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := newWorld(t)
			w.setPolicy(c.policy)
			w.send("work")
			w.open("s1")
			c.play(w)
			l, r := w.thread.Loop, w.thread.Runs[len(w.thread.Runs)-1]
			got := end{l.Status, l.Reason, r.Status, r.Failure, l.Tokens}
			if diff := cmp.Diff(c.want, got); diff != "" {
				t.Errorf("how the loop ended (-want +got):\n%s", diff)
			}
			if w.thread.Unattended() {
				t.Errorf("the loop ended, yet has work to come: %+v", l)
			}
		})
	}
}
