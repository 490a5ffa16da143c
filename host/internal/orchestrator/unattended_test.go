package orchestrator_test

import (
	"context"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-run/baton/host/internal/domain"
	"github.com/baton-run/baton/sdk/transcript"
)

// Unattended work through the real plugins and the replay peer, on the
// host's fake clock: a run that hits a provider limit waits for the reset
// the provider gave and goes on as a new attempt of the same run, however
// long the wait, in no wall time to speak of.

// atCapture sets the host's clock to when a transcript was recorded, so
// that the reset its limit frame carries lies as far ahead as it did then.
func (e *env) atCapture(name string) time.Time {
	e.t.Helper()
	tr, err := transcript.ReadFile(filepath.Join(root, "testdata", name))
	if err != nil {
		e.t.Fatal(err)
	}
	at, err := tr.Header.CapturedAt()
	if err != nil {
		e.t.Fatalf("%s: %v", name, err)
	}
	e.clock.Set(at)
	return at
}

// countSent counts the frames the plugins sent their providers (raw-frame
// lines "out") that hold text, in every session of the thread (read once
// the host has closed them).
func (e *env) countSent(th domain.Thread, text string) int {
	e.t.Helper()
	e.host.Close()
	n := 0
	for _, s := range th.ProviderSessions {
		for line := range strings.Lines(e.rawFrames(s.ID)) {
			if strings.Contains(line, `"dir":"out"`) && strings.Contains(line, text) {
				n++
			}
		}
	}
	return n
}

// setPolicy sets the thread's continuation policy.
func (e *env) setPolicy(threadID string, p domain.ContinuationPolicy) {
	e.t.Helper()
	e.dispatch(domain.Command{ID: "policy-" + threadID, ThreadID: threadID, Payload: domain.SetPolicy{Policy: p}})
}

// loopEvents are the thread's events of the loop and its runs' lives,
// in order, with the attempt reason or outcome that tells them apart.
func (e *env) loopEvents(threadID string) []string {
	e.t.Helper()
	return e.storedOrder(threadID, func(p domain.Payload) string {
		line, _ := loopEvent(p.EventType(), p)
		return line
	})
}

// loopEvent is an event of the loop or of a run's life as loopEvents
// shows it (ok false: not one).
func loopEvent(typ string, p domain.Payload) (string, bool) {
	switch p := p.(type) {
	case domain.RunStarted, domain.LimitReached, domain.WaitArmed, domain.CheckRequested, domain.ProviderSwitched:
		return typ, true
	case domain.AttemptStarted:
		return typ + " " + string(p.Reason) + " " + p.Provider, true
	case domain.AttemptEnded:
		return typ + " " + string(p.Status), true
	case domain.WaitEnded:
		return typ + " " + string(p.Outcome), true
	case domain.RunEnded:
		return typ + " " + string(p.Status), true
	case domain.CheckRecorded:
		return typ + " exit " + strconv.Itoa(p.ExitCode), true
	case domain.LoopEnded:
		return typ + " " + string(p.Status) + ": " + p.Reason, true
	}
	return "", false
}

// waitAndContinue plays a transcript whose first run hits a limit, waits
// for the reset and continues: it checks the wait's exact instants and
// the run's whole story, and returns the thread.
func waitAndContinue(t *testing.T, e *env, provider, name string, wantReset time.Time) domain.Thread {
	captured := e.atCapture(name)
	id := e.createThreadWith(provider, name, domain.ApproveAccept)
	e.setPolicy(id, domain.ContinuationPolicy{OnLimit: domain.OnLimitWait})
	e.dispatch(domain.Command{ID: "m1", ThreadID: id, Payload: domain.DispatchMessage{Text: messages(t, strings.TrimSuffix(name, ".ndjson")+".messages")[0]}})
	th := e.waitFor(id, "the run to wait for the limit", func(t domain.Thread) bool { return t.NextWait() != nil })
	w := *th.NextWait()
	r := th.Runs[0]
	// The wait fires at the reset the provider gave, plus the wait's jitter.
	reset := w.Limit.ResetsAt
	if reset.IsZero() || !w.At.Equal(reset.Add(domain.Jitter(w.ID))) || w.Probe != 1 || w.MaxProbes != domain.DefaultMaxProbes ||
		w.Kind != domain.WaitContinue || w.Provider != provider || w.RunID != r.ID || !w.ArmedAt.Equal(e.clock.Now()) {
		t.Fatalf("wait %+v (now %s)", w, e.clock.Now())
	}
	if !reset.Equal(wantReset) || !reset.After(captured) {
		t.Fatalf("the limit resets at %s, want %s (the recorded frame's), after the recording began at %s", reset, wantReset, captured)
	}
	if r.Status != domain.RunStatusWaiting || r.WaitID != w.ID || r.Limit == nil || *r.Limit != w.Limit {
		t.Fatalf("run %s wait %q limit %+v", r.Status, r.WaitID, r.Limit)
	}
	// The host's one timer is the wait's, armed for its instant; a moment
	// before it, the timer is still pending, so nothing fired (the wait's
	// firing is a commit the projection would show only later).
	ctx, cancel := context.WithTimeout(t.Context(), hangGuard)
	defer cancel()
	if p, err := waitBounds(ctx, e.clock, 1); err != nil || !cmp.Equal(p, []time.Duration{w.At.Sub(e.clock.Now())}) {
		t.Fatalf("pending timers %v (%v); want the wait's, %s", p, err, w.At.Sub(e.clock.Now()))
	}
	e.clock.Set(w.At.Add(-time.Millisecond))
	if p := bounds(e.clock); !cmp.Equal(p, []time.Duration{time.Millisecond}) {
		t.Fatalf("a millisecond before the wait's instant, pending timers %v; want the wait's, 1ms", p)
	}
	e.clock.Set(w.At)
	th = e.waitFor(id, "the run to end", allRunsEnded(1))
	r = th.Runs[0]
	var reasons []string
	for _, a := range r.Attempts {
		reasons = append(reasons, string(a.Reason)+" "+string(a.Status)+" "+a.StartedAt.UTC().Format(time.RFC3339Nano))
	}
	want := []string{
		"initial blocked " + r.Attempts[0].StartedAt.UTC().Format(time.RFC3339Nano),
		"usage_limit_continuation completed " + w.At.UTC().Format(time.RFC3339Nano),
	}
	if r.Status != domain.RunStatusCompleted || !cmp.Equal(reasons, want) {
		t.Fatalf("run %s attempts\n%s", r.Status, cmp.Diff(want, reasons))
	}
	wantEvents := []string{
		"run.started", "attempt.started initial " + provider,
		"run.limit_reached", "attempt.ended blocked", "wait.armed",
		"wait.ended fired", "attempt.started usage_limit_continuation " + provider,
		"run.ended completed",
	}
	if diff := cmp.Diff(wantEvents, e.loopEvents(id)); diff != "" {
		t.Fatalf("the run's story (-want +got):\n%s", diff)
	}
	return th
}

func TestUsageLimitWaitThenContinue(t *testing.T) {
	for _, c := range []struct {
		provider string
		reset    time.Time // the reset the recorded limit frame gives
	}{
		{"codex", time.Unix(1796154059, 0)},  // account/rateLimits/updated primary.resetsAt
		{"claude", time.Unix(1796154783, 0)}, // rate_limit_event (rejected, five_hour) resetsAt
	} {
		t.Run(c.provider, func(t *testing.T) {
			p := c.provider
			e := newEnv(t)
			th := waitAndContinue(t, e, p, p+"/usage_limit_wait.ndjson", c.reset)
			if got := e.countSent(th, domain.DefaultContinueText); got != 1 {
				t.Fatalf("the continuation was sent to the provider %d times", got)
			}
		})
	}
}

// stepsCheck is the --until check testdata/codex/until_loop.flags gives:
// it passes once three step files are written, and says how many are.
const stepsCheck = `n=$(ls step*.txt 2>/dev/null | wc -l); echo "$n of 3 steps done"; test "$n" -ge 3`

// An --until loop: the check fails after the first two runs, each failure
// queues a run that carries the check's output, and the third run's check
// passes, which ends the loop done. Recorded from the real codex.
func TestUntilLoopRunsUntilTheCheckPasses(t *testing.T) {
	e := newEnv(t)
	const name = "codex/until_loop.ndjson"
	id := e.createThreadWith("codex", name, domain.ApproveAccept)
	e.setPolicy(id, domain.ContinuationPolicy{Until: stepsCheck, MaxRuns: 5})
	e.dispatch(domain.Command{ID: "m1", ThreadID: id, Payload: domain.DispatchMessage{Text: messages(t, strings.TrimSuffix(name, ".ndjson")+".messages")[0]}})
	th := e.waitFor(id, "the loop to end", func(t domain.Thread) bool { return t.Loop != nil && t.Loop.Status != domain.LoopActive })
	wantEvents := []string{
		"run.started", "attempt.started initial codex", "run.ended completed",
		"loop.check_requested", "loop.check_recorded exit 1",
		"run.started", "attempt.started initial codex", "run.ended completed",
		"loop.check_requested", "loop.check_recorded exit 1",
		"run.started", "attempt.started initial codex", "run.ended completed",
		"loop.check_requested", "loop.check_recorded exit 0",
		"loop.ended done: the check passed",
	}
	if diff := cmp.Diff(wantEvents, e.loopEvents(id)); diff != "" {
		t.Fatalf("the loop (-want +got):\n%s", diff)
	}
	var inputs []string
	for _, r := range th.Runs {
		inputs = append(inputs, r.Input)
	}
	next := func(n int) string {
		return "The check `" + stepsCheck + "` did not pass (exit 1). The end of its output:\n\n```\n" + strconv.Itoa(n) +
			" of 3 steps done\n```\n\nContinue the work until the check passes. If you cannot go on without a person, start a line with " +
			domain.BlockedMarker + " and say why."
	}
	if diff := cmp.Diff([]string{messages(t, strings.TrimSuffix(name, ".ndjson")+".messages")[0], next(1), next(2)}, inputs); diff != "" {
		t.Fatalf("the runs' messages (-want +got):\n%s", diff)
	}
	l := th.Loop
	if l.Runs != 3 || l.Check == nil || !l.Check.Passed() || l.Check.Output != "3 of 3 steps done\n" || l.CheckPending || th.Unattended() {
		t.Fatalf("loop %+v check %+v", l, l.Check)
	}
}

// A policy that would switch to a provider with no plugin is refused when
// it is set, not when the limit comes at 2 a.m.
func TestSwitchPolicyToAnUninstalledProviderIsRefused(t *testing.T) {
	e := newEnv(t)
	id := e.createThread("codex", "codex/usage_limit_wait.ndjson")
	_, err := e.host.Dispatch(t.Context(), domain.Command{ID: "pol", ThreadID: id, Payload: domain.SetPolicy{Policy: domain.ContinuationPolicy{
		OnLimit: domain.OnLimitSwitch, SwitchTo: "nosuch", SwitchCommand: domain.ProviderCommand{Argv: []string{"nosuch"}}}}})
	if err == nil || !strings.Contains(err.Error(), `provider "nosuch" is not installed`) {
		t.Fatalf("switch policy to an uninstalled provider: %v", err)
	}
	if th, _ := e.host.Thread(id); th.Loop != nil {
		t.Fatalf("the refused policy was set: %+v", th.Loop)
	}
}

// A seven-day window: claude's weekly limit, rejected with its reset a
// week ahead. The wait is a week of the host's clock, exactly to the
// recorded reset plus the wait's jitter, and no time of the test's; the
// continuation goes to the same claude process, kept open over the week.
func TestSevenDayWaitUnderTheFakeClock(t *testing.T) {
	e := newEnv(t)
	th := waitAndContinue(t, e, "claude", "claude/usage_limit_seven_day.ndjson", time.Unix(1796759613, 0))
	r := th.Runs[0]
	if got := r.Attempts[1].StartedAt.Sub(r.Attempts[0].StartedAt).Round(time.Hour); got != 7*24*time.Hour {
		t.Fatalf("the continuation came %s after the run began, want a week", got)
	}
	if r.Limit.Scope != "seven_day" || r.Limit.Kind != domain.LimitUsageWindow {
		t.Fatalf("limit %+v", r.Limit)
	}
}
