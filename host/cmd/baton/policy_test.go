package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/shlex"
	"github.com/spf13/cobra"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/durationpb"

	batonv1 "github.com/baton-run/baton/host/api/baton/v1"
	"github.com/baton-run/baton/host/internal/domain"
	"github.com/baton-run/baton/host/internal/service"
)

// parsePolicy parses args as run's policy flags (the environment applied
// as baton does) and checks them.
func parsePolicy(t *testing.T, continued bool, args ...string) (*batonv1.ContinuationPolicy, error) {
	t.Helper()
	var f policyFlags
	cmd := &cobra.Command{Use: "run"}
	addPolicyFlags(cmd.Flags(), &f)
	if err := cmd.Flags().Parse(args); err != nil {
		t.Fatal(err)
	}
	if err := applyEnv(cmd); err != nil {
		t.Fatal(err)
	}
	f.collect(cmd.Flags(), continued)
	return f.check("run")
}

// The policy flags make the policy they say, and only the flags given
// count: none given is no policy at all.
func TestPolicyFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want *batonv1.ContinuationPolicy
	}{
		{nil, nil},
		{[]string{"--on-limit", "wait"}, &batonv1.ContinuationPolicy{OnLimit: "wait"}},
		{[]string{"--on-limit", "stop"}, &batonv1.ContinuationPolicy{}},
		{[]string{"--on-limit", "switch:claude"}, &batonv1.ContinuationPolicy{OnLimit: "switch", SwitchTo: "claude"}},
		{[]string{"--on-limit", "switch:claude,return"}, &batonv1.ContinuationPolicy{OnLimit: "switch", SwitchTo: "claude", Return: true}},
		{[]string{"--until", "go test ./...", "--max-runs", "5", "--max-hours", "1.5", "--max-tokens", "2000000", "--check-timeout", "90s"},
			&batonv1.ContinuationPolicy{Until: "go test ./...", MaxRuns: 5, MaxDuration: durationpb.New(90 * time.Minute), MaxTokens: 2000000,
				CheckTimeout: durationpb.New(90 * time.Second)}},
		{[]string{"--on-limit", "wait", "--max-wait", "36h", "--max-probes", "3", "--probe-interval", "2m", "--probe-factor", "1.5",
			"--probe-ceiling", "30m", "--continue-text", "go on"},
			&batonv1.ContinuationPolicy{OnLimit: "wait", MaxWait: durationpb.New(36 * time.Hour), MaxProbes: 3,
				ProbeInterval: durationpb.New(2 * time.Minute), ProbeFactor: 1.5, ProbeCeiling: durationpb.New(30 * time.Minute), ContinueText: "go on"}},
	} {
		got, err := parsePolicy(t, false, tc.args...)
		if err != nil {
			t.Errorf("%q: %v", tc.args, err)
			continue
		}
		if d := cmp.Diff(tc.want, got, protocmp.Transform()); d != "" {
			t.Errorf("%q: policy (-want +got):\n%s", tc.args, d)
		}
	}
}

// Bad policy flags are usage errors (exit 2) naming the flag, before
// anything is written.
func TestPolicyFlagErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"--on-limit", "sleep"}, `run: --on-limit must be wait, switch:PROVIDER[,return] or stop, got "sleep"`},
		{[]string{"--on-limit", "switch:"}, `run: --on-limit switch:: "" is not a provider name (want switch:PROVIDER or switch:PROVIDER,return)`},
		{[]string{"--on-limit", "switch:Claude"}, `run: --on-limit switch:Claude: "Claude" is not a provider name`},
		{[]string{"--on-limit", "switch:claude,back"}, `run: --on-limit switch:claude,back: "claude,back" is not a provider name`},
		{[]string{"--until", " "}, "run: --until is blank"},
		{[]string{"--continue-text", ""}, "run: --continue-text is blank"},
		{[]string{"--max-runs", "-1"}, "run: --max-runs must be a count (0: the default), got -1"},
		{[]string{"--max-probes", "-2"}, "run: --max-probes must be a count (0: the default), got -2"},
		{[]string{"--max-tokens", "-3"}, "run: --max-tokens must be a count (0: the default), got -3"},
		{[]string{"--max-hours", "-1"}, "run: --max-hours must be from 0 (no bound) to less than 2562047, got -1"},
		{[]string{"--max-hours", "NaN"}, "run: --max-hours must be from 0 (no bound) to less than 2562047, got NaN"},
		{[]string{"--max-hours", "1e9"}, "run: --max-hours must be from 0 (no bound) to less than 2562047, got 1e+09"},
		{[]string{"--max-wait", "-1h"}, "run: --max-wait must not be negative, got -1h0m0s"},
		{[]string{"--check-timeout", "-1s"}, "run: --check-timeout must not be negative, got -1s"},
		{[]string{"--probe-interval", "-1m"}, "run: --probe-interval must not be negative, got -1m0s"},
		{[]string{"--probe-factor", "0.5"}, "run: --probe-factor must be at least 1 (0: the default), got 0.5"},
		{[]string{"--probe-factor", "+Inf"}, "run: --probe-factor must be at least 1 (0: the default), got +Inf"},
		{[]string{"--probe-ceiling", "1m"}, "run: --probe-ceiling 1m0s is below the probe interval 5m0s"},
		{[]string{"--probe-interval", "2h", "--probe-ceiling", "1h"}, "run: --probe-ceiling 1h0m0s is below the probe interval 2h0m0s"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(append([]string{"run", "--data", t.TempDir(), "--provider", "acp"}, append(tc.args, "hi")...), strings.NewReader(""), &stdout, &stderr)
		if code != exitUsage || !strings.HasPrefix(stderr.String(), "baton: "+tc.msg) {
			t.Errorf("%q: exit %d, %q; want exit 2 with %q", tc.args, code, stderr.String(), tc.msg)
		}
	}
	// Not a number at all: said in words, naming the flag.
	var stdout, stderr bytes.Buffer
	if code := run([]string{"send", "--max-runs", "many", "thr", "hi"}, strings.NewReader(""), &stdout, &stderr); code != exitUsage ||
		stderr.String() != "baton: send: --max-runs \"many\": give a whole number\n" {
		t.Errorf("--max-runs many: exit %d, %s", code, stderr.String())
	}
}

// The environment sets a new thread's policy (BATON_ON_LIMIT, ...), never
// the policy of a thread that goes on.
func TestPolicyFlagsFromTheEnvironmentAreForNewThreads(t *testing.T) {
	t.Setenv("BATON_ON_LIMIT", "wait")
	t.Setenv("BATON_MAX_RUNS", "4")
	got, err := parsePolicy(t, false)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(&batonv1.ContinuationPolicy{OnLimit: "wait", MaxRuns: 4}, got, protocmp.Transform()); d != "" {
		t.Errorf("a new thread's policy from the environment (-want +got):\n%s", d)
	}
	if got, err := parsePolicy(t, true); err != nil || got != nil {
		t.Errorf("a thread that goes on: policy %v, %v; want none", got, err)
	}
	got, err = parsePolicy(t, true, "--until", "make test")
	if d := cmp.Diff(&batonv1.ContinuationPolicy{Until: "make test"}, got, protocmp.Transform()); err != nil || d != "" {
		t.Errorf("a thread that goes on, with --until: %v (-want +got):\n%s", err, d)
	}
}

// A switch to a provider the thread has not used runs its usual command;
// one it has used keeps the thread's; one with no usual command is named.
func TestPolicyForSwitch(t *testing.T) {
	th := &batonv1.Thread{Id: "thr", Provider: "codex", ProviderBindings: []*batonv1.ProviderBinding{{Provider: "codex"}, {Provider: "claude"}}}
	got, missing := policyFor(th, &batonv1.ContinuationPolicy{OnLimit: "switch", SwitchTo: "acp"})
	want := &batonv1.ContinuationPolicy{OnLimit: "switch", SwitchTo: "acp", SwitchProviderCommand: &batonv1.ProviderCommand{Argv: []string{"claude-code-acp"}}}
	if d := cmp.Diff(want, got, protocmp.Transform()); d != "" || missing != "" {
		t.Errorf("switch to a new provider (-want +got):\n%s%s", d, missing)
	}
	got, missing = policyFor(th, &batonv1.ContinuationPolicy{OnLimit: "switch", SwitchTo: "claude", Return: true})
	want = &batonv1.ContinuationPolicy{OnLimit: "switch", SwitchTo: "claude", Return: true}
	if d := cmp.Diff(want, got, protocmp.Transform()); d != "" || missing != "" {
		t.Errorf("switch to a provider used before (-want +got):\n%s%s", d, missing)
	}
	if _, missing = policyFor(th, &batonv1.ContinuationPolicy{OnLimit: "switch", SwitchTo: "homebrew"}); missing != "homebrew" {
		t.Errorf("switch to a provider with no usual command: missing %q", missing)
	}
	wait := &batonv1.ContinuationPolicy{OnLimit: "wait"}
	if got, _ := policyFor(th, wait); got != wait {
		t.Errorf("a wait policy changed: %v", got)
	}
}

// printed is what a printer at now (in UTC) says of the events, given
// as the service gives them.
func printed(t *testing.T, now time.Time, th domain.Thread, events ...domain.Payload) string {
	t.Helper()
	var b bytes.Buffer
	p := newPrinter(&b, false, service.ThreadMessage(th))
	p.now, p.loc = func() time.Time { return now }, time.UTC
	for i, e := range events {
		p.event(apiEvent(t, uint64(i+1), th.ID, e))
	}
	return b.String()
}

// apiEvent is an event as the service gives it.
func apiEvent(t *testing.T, seq uint64, threadID string, pl domain.Payload) *batonv1.Event {
	t.Helper()
	ev, err := service.EventMessage(seq, threadID, time.Time{}, pl)
	if err != nil {
		t.Fatal(err)
	}
	return ev
}

// The lines of unattended work: limits, waits (a reset, a probe, a
// return), their ends, checks and the loop's end.
func TestPrinterLoopLines(t *testing.T) {
	now := time.Date(2026, 12, 1, 11, 52, 0, 0, time.UTC)
	reset := time.Date(2026, 12, 1, 14, 5, 0, 0, time.UTC)
	usage := domain.Limit{Kind: domain.LimitUsageWindow, ResetsAt: reset}
	th := domain.Thread{ID: "thr", Runs: []domain.Run{{ID: "run_1", Ordinal: 1}, {ID: "run_2", Ordinal: 2}}}
	got := printed(t, now, th,
		domain.PolicySet{Policy: domain.ContinuationPolicy{OnLimit: domain.OnLimitWait, Until: "go test ./...", MaxRuns: 5}},
		domain.LimitReached{RunID: "run_2", Provider: "codex", Limit: domain.Limit{Kind: domain.LimitUsageWindow, Scope: "five_hour", ResetsAt: reset}},
		domain.WaitArmed{Wait: domain.Wait{ID: "w1", Kind: domain.WaitContinue, RunID: "run_2", Provider: "codex", Limit: usage,
			At: reset.Add(7 * time.Second), Probe: 2, MaxProbes: 8}},
		domain.WaitEnded{WaitID: "w1", Outcome: domain.WaitFired},
		domain.LimitReached{RunID: "run_2", Provider: "codex", Limit: domain.Limit{Kind: domain.LimitRate}},
		domain.WaitArmed{Wait: domain.Wait{ID: "w2", Kind: domain.WaitContinue, RunID: "run_2", Provider: "codex",
			Limit: domain.Limit{Kind: domain.LimitRate}, At: now.Add(20 * time.Minute), Probe: 3, MaxProbes: 8}},
		domain.WaitEnded{WaitID: "w2", Outcome: domain.WaitCancelled, Reason: "interrupted"},
		domain.WaitArmed{Wait: domain.Wait{ID: "w3", Kind: domain.WaitReturn, Provider: "codex", Limit: usage, At: reset}},
		domain.WaitEnded{WaitID: "w3", Outcome: domain.WaitFired},
		domain.WaitArmed{Wait: domain.Wait{ID: "w4", Kind: domain.WaitContinue, Provider: "claude",
			Limit: domain.Limit{Kind: domain.LimitCredits, ResetsAt: now.Add(-time.Hour)}, At: now.Add(6*24*time.Hour + 23*time.Hour), Probe: 1, MaxProbes: 2}},
		domain.CheckRequested{RunID: "run_2", Command: "go test ./..."},
		domain.CheckRecorded{CheckResult: domain.CheckResult{RunID: "run_2", Command: "go test ./...", ExitCode: 1,
			Output: "ok  a\nok  b\n--- FAIL: TestX\n    x_test.go:9: got 1\nFAIL\nFAIL\tpkg\t0.01s\n"}},
		domain.CheckRecorded{CheckResult: domain.CheckResult{Command: "sleep 999", TimedOut: true}},
		domain.CheckRecorded{CheckResult: domain.CheckResult{Command: "go test ./..."}},
		domain.LoopEnded{Status: domain.LoopDone, Reason: "the check passed"},
		domain.LoopEnded{Status: domain.LoopBudget, Reason: "max runs (5) reached"},
		domain.RunEnded{RunID: "run_2", Status: domain.RunStatusBlocked, Failure: &domain.Failure{Message: "codex usage limit (five_hour)"}},
	)
	want := strings.Join([]string{
		"⚙ policy: on a limit: wait (at most 8 waits, 8d in all); until `go test ./...` passes (timeout 10m); at most 5 runs",
		"  ⏸ codex hit its usage limit (five_hour): resets 14:05 (in 2h13m)",
		"⏳ waiting for codex usage limit: resets 14:05 (in 2h13m), probe 2 of at most 8",
		"⏳ the wait for codex usage limit is over: continuing run 2",
		"  ⏸ codex hit its rate limit: no reset time given",
		"⏳ waiting for codex rate limit: probe 3 of at most 8 at 12:12 (in 20m)",
		"⏳ the wait for codex rate limit was cancelled: interrupted",
		"⏳ returning to codex at 14:05 (in 2h13m), after its usage limit resets",
		"⏳ the wait to return to codex is over: returning",
		"⏳ waiting for claude credits: probe 1 of at most 2 at Dec 8 10:52 (in 6d23h)",
		"◇ check `go test ./...` after run 2",
		"✖ check `go test ./...` failed (exit 1); last lines:",
		"    │ ok b",
		"    │ --- FAIL: TestX",
		"    │ x_test.go:9: got 1",
		"    │ FAIL",
		"    │ FAIL pkg 0.01s",
		"✖ check `sleep 999` timed out",
		"✔ check `go test ./...` passed",
		"● loop done: the check passed",
		"● loop stopped: max runs (5) reached",
		"⏸ run 2 blocked: codex usage limit (five_hour)",
	}, "\n") + "\n"
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("printed (-want +got):\n%s", d)
	}
}

// baton show's policy, loop and armed wait lines.
func TestShowLoop(t *testing.T) {
	now := time.Date(2026, 12, 1, 11, 52, 0, 0, time.UTC)
	reset := time.Date(2026, 12, 1, 14, 5, 0, 0, time.UTC)
	th := domain.Thread{ID: "thr", Provider: "codex", Cwd: "/w", ApprovalPolicy: domain.ApproveDecline, Loop: &domain.Loop{
		Policy: domain.ContinuationPolicy{OnLimit: domain.OnLimitSwitch, SwitchTo: "claude", Return: true, MaxTokens: 500000, MaxDuration: 8 * time.Hour},
		Since:  now.Add(-time.Hour), Status: domain.LoopActive, Runs: 3, Tokens: 120000,
		Return: &domain.Wait{ID: "w", Kind: domain.WaitReturn, Provider: "codex", Limit: domain.Limit{Kind: domain.LimitUsageWindow, ResetsAt: reset}, At: reset},
		Check:  &domain.CheckResult{Command: "make test", ExitCode: 2, Output: "boom"},
	}}
	var b bytes.Buffer
	showLoop(&b, service.ThreadMessage(th), now, time.UTC)
	want := strings.Join([]string{
		"  policy: on a limit: switch to claude, return after the reset (at most 8 waits, 8d in all); at most 8h, 500000 tokens",
		"  loop: active; 3 runs, 120000 of 500000 tokens since 10:52 (until 18:52)",
		"  ⏳ returning to codex at 14:05 (in 2h13m), after its usage limit resets",
		"  last check `make test` failed (exit 2)",
	}, "\n") + "\n"
	if d := cmp.Diff(want, b.String()); d != "" {
		t.Errorf("show (-want +got):\n%s", d)
	}
	b.Reset()
	th.Loop = &domain.Loop{Since: now, Status: domain.LoopBudget, Reason: "max runs (5) reached", Runs: 5,
		Policy: domain.ContinuationPolicy{MaxRuns: 5}}
	showLoop(&b, service.ThreadMessage(th), now.Add(24*time.Hour), time.UTC)
	want = "  policy: at most 5 runs\n  loop: budget (max runs (5) reached); 5 of 5 runs, 0 tokens since Dec 1 11:52\n"
	if d := cmp.Diff(want, b.String()); d != "" {
		t.Errorf("show of an ended loop (-want +got):\n%s", d)
	}
}

// Durations as people say them, instants as the local clock shows them.
func TestDurationsAndClockTimes(t *testing.T) {
	for d, want := range map[time.Duration]string{0: "0s", 44*time.Second + 600*time.Millisecond: "45s", time.Minute: "1m",
		20*time.Minute + 29*time.Second: "20m", 2*time.Hour + 13*time.Minute: "2h13m", 3 * time.Hour: "3h",
		7 * 24 * time.Hour: "7d", 6*24*time.Hour + 23*time.Hour + 59*time.Minute: "6d23h", 24*time.Hour + 30*time.Minute: "1d"} {
		if got := fmtDuration(d); got != want {
			t.Errorf("fmtDuration(%v) = %q, want %q", d, got, want)
		}
	}
	now := time.Date(2026, 12, 31, 23, 0, 0, 0, time.UTC)
	for at, want := range map[time.Time]string{now.Add(30 * time.Minute): "23:30 (in 30m)",
		now.Add(2 * time.Hour): "Jan 1 2027 01:00 (in 2h)", now.Add(-5 * time.Minute): "22:55 (5m ago)", now: "23:00 (now)",
		now.Add(-24 * time.Hour): "Dec 30 23:00 (1d ago)"} {
		p := &printer{now: func() time.Time { return now }, loc: time.UTC}
		if got := p.when(at); got != want {
			t.Errorf("when(%v) = %q, want %q", at, got, want)
		}
	}
	// In the local zone: 23:00 UTC is the next day at UTC+2.
	p := &printer{now: func() time.Time { return now }, loc: time.FixedZone("EET", 2*3600)}
	if got := p.when(now.Add(time.Hour)); got != "02:00 (in 1h)" {
		t.Errorf("when in UTC+2 = %q, want 02:00 (in 1h)", got)
	}
}

// loopLines are the lines of baton run's output that tell the loop: its
// policy, checks and end.
func loopLines(out string) []string {
	var keep []string
	for _, l := range strings.Split(out, "\n") {
		for _, p := range []string{"⚙ ", "◇ ", "✔ check", "✖ check", "    │ ", "● loop", "⏳ ", "✔ run", "✖ run", "⏸ "} {
			if strings.HasPrefix(l, p) {
				keep = append(keep, l)
				break
			}
		}
	}
	return keep
}

// baton run --until follows the thread past its runs until the loop is
// over: a check that passes is exit 0, a budget that ends the loop first
// exit 1.
func TestRunUntil(t *testing.T) {
	peer := peerCommand(t, "acp/simple.ndjson")
	msg := lines(t, "acp/simple.messages")[0]
	for _, tc := range []struct {
		name  string
		flags []string
		code  int
		want  []string
	}{
		{"passes", []string{"--until", "echo checking; exit 0"}, exitOK, []string{
			"⚙ policy: until `echo checking; exit 0` passes (timeout 10m)",
			"✔ run 1 completed (end_turn)",
			"◇ check `echo checking; exit 0` after run 1",
			"✔ check `echo checking; exit 0` passed",
			"● loop done: the check passed",
		}},
		{"out of runs", []string{"--until", "echo one; echo two; exit 3", "--max-runs", "1", "--check-timeout", "1m"}, exitFailed, []string{
			"⚙ policy: until `echo one; echo two; exit 3` passes (timeout 1m); at most 1 run",
			"✔ run 1 completed (end_turn)",
			"◇ check `echo one; echo two; exit 3` after run 1",
			"✖ check `echo one; echo two; exit 3` failed (exit 3); last lines:",
			"    │ one",
			"    │ two",
			"● loop stopped: max runs (1) reached",
		}},
	} {
		args := append([]string{"run", "--cwd", t.TempDir(), "--provider", "acp", "--provider-command", peer}, append(tc.flags, msg)...)
		out, errOut, code := baton(t, args...)
		if d := cmp.Diff(tc.want, loopLines(out)); d != "" || code != tc.code {
			t.Errorf("%s: exit %d, want %d; the loop's lines (-want +got):\n%s\n%s\n%s", tc.name, code, tc.code, d, out, errOut)
		}
	}
}

// waitingLine is the wait baton run --on-limit wait shows for codex's
// recorded usage limit (its reset already past: the first probe, 5m on).
var waitingLine = regexp.MustCompile(`^⏳ waiting for codex usage limit \(codex/primary\): probe 1 of at most 8 at ([A-Z][a-z]+ \d+ )?\d\d:\d\d \(in 5m\)$`)

// runUntilWait starts baton run --on-limit wait on codex's recorded usage
// limit and returns once it shows its wait: the process, its lines so
// far, and the channel of the lines to come.
func runUntilWait(t *testing.T, data string) (*exec.Cmd, []string, <-chan string, *bytes.Buffer) {
	t.Helper()
	cmd := exec.Command(filepath.Join(binDir, "baton"), "run", "--data", data, "--cwd", t.TempDir(), "--provider", "codex", "--approve", "accept",
		"--provider-command", peerCommand(t, "codex/usage_limit.ndjson"), "--on-limit", "wait", lines(t, "codex/usage_limit.messages")[0])
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	errb := &bytes.Buffer{}
	cmd.Stderr = errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	seen := make(chan string)
	go func() {
		defer close(seen)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			seen <- sc.Text()
		}
	}()
	var got []string
	timeout := time.After(60 * time.Second)
	for {
		select {
		case l, ok := <-seen:
			if !ok {
				t.Fatalf("run ended without waiting: %v\n%s\n%s", cmd.Wait(), strings.Join(got, "\n"), errb.String())
			}
			got = append(got, l)
			if strings.HasPrefix(l, "⏳") {
				if !waitingLine.MatchString(l) {
					t.Errorf("the wait line %q does not match %s", l, waitingLine)
				}
				return cmd, got, seen, errb
			}
		case <-timeout:
			cmd.Process.Kill()
			t.Fatalf("run never showed a wait:\n%s\n%s", strings.Join(got, "\n"), errb.String())
		}
	}
}

// loopState is what a thread's loop came to: its status, its armed wait,
// its runs' statuses and the kind of limit they hit.
type loopState struct {
	Loop  domain.LoopStatus
	Wait  *domain.Wait
	Runs  []domain.RunStatus
	Limit domain.LimitKind
}

func stateOf(th domain.Thread) loopState {
	s := loopState{Runs: []domain.RunStatus{}}
	if th.Loop != nil {
		s.Loop, s.Wait = th.Loop.Status, th.Loop.Wait
	}
	for _, r := range th.Runs {
		s.Runs = append(s.Runs, r.Status)
		if r.Limit != nil {
			s.Limit = r.Limit.Kind
		}
	}
	return s
}

// cancelled is a thread whose wait was cancelled.
var cancelled = loopState{Loop: domain.LoopStopped, Runs: []domain.RunStatus{domain.RunStatusBlocked}, Limit: domain.LimitUsageWindow}

// baton run --on-limit wait against codex's recorded usage limit says
// what it waits for and until when; Ctrl-C cancels the wait: the run ends
// blocked, the loop stopped, exit 130.
func TestRunWaitsOnALimitAndCtrlCCancels(t *testing.T) {
	data := t.TempDir()
	cmd, got, seen, errb := runUntilWait(t, data)
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	kill := time.AfterFunc(60*time.Second, func() { cmd.Process.Kill() }) // a wait Ctrl-C did not cancel
	for l := range seen {
		got = append(got, l)
	}
	err := cmd.Wait()
	kill.Stop()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != exitInterrupted {
		t.Errorf("run after Ctrl-C in a wait: %v, want exit 130\n%s", err, errb.String())
	}
	limit := regexp.MustCompile(`^  ⏸ codex hit its usage limit \(codex/primary\): resets (\w+ \d+ )?\d\d:\d\d \(\S+ ago\)$`)
	var limits int
	for _, l := range got {
		if limit.MatchString(l) {
			limits++
		}
	}
	var loop []string
	for _, l := range loopLines(strings.Join(got, "\n")) {
		loop = append(loop, waitingLine.ReplaceAllString(l, "⏳ waiting (probe 1)"))
	}
	wantLoop := []string{"⚙ policy: on a limit: wait (at most 8 waits, 8d in all)", "⏳ waiting (probe 1)",
		"⏳ the wait for codex usage limit (codex/primary) was cancelled", "● loop stopped: the wait was cancelled",
		"⏸ run 1 blocked: codex usage limit (codex/primary): the wait was cancelled"}
	if d := cmp.Diff(wantLoop, loop); d != "" || limits != 1 {
		t.Errorf("run's loop lines (-want +got), %d limit lines (want 1):\n%s\n%s", limits, d, strings.Join(got, "\n"))
	}
	th := showJSON(t, data, threadOf(t, strings.Join(got, "\n")+"\n"))
	if d := cmp.Diff(cancelled, stateOf(th)); d != "" {
		t.Errorf("the thread after the cancelled wait (-want +got):\n%s", d)
	}
}

// A wait outlives the host that armed it (SIGKILLed): baton show prints
// it, and baton interrupt cancels it.
func TestInterruptCancelsADurableWait(t *testing.T) {
	data := t.TempDir()
	cmd, got, seen, _ := runUntilWait(t, data)
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	go func() {
		for range seen {
		}
	}()
	cmd.Wait()
	m := regexp.MustCompile(`^● thread (\S+) `).FindStringSubmatch(got[0])
	if m == nil {
		t.Fatalf("no thread id in %q", got[0])
	}
	thread := m[1]
	th := showJSON(t, data, thread)
	if th.Loop == nil || th.Loop.Wait == nil || len(th.Runs) != 1 || th.Runs[0].WaitID != th.Loop.Wait.ID {
		t.Fatalf("after SIGKILL, the wait is gone: loop %+v, runs %+v", th.Loop, th.Runs)
	}
	out, errOut, code := baton(t, "show", "--data", data, thread)
	var waits []string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "  ⏳ ") {
			waits = append(waits, waitingLine.ReplaceAllString(strings.TrimPrefix(l, "  "), "⏳ waiting (probe 1)"))
		}
	}
	if d := cmp.Diff([]string{"⏳ waiting (probe 1)"}, waits); code != exitOK || d != "" {
		t.Errorf("show: exit %d; its wait lines (-want +got):\n%s\n%s%s", code, d, out, errOut)
	}
	out, errOut, code = baton(t, "interrupt", "--data", data, thread)
	want := "run 1 of thread " + thread + ": its wait for codex usage limit (codex/primary) is cancelled\n"
	if d := cmp.Diff(want, out); code != exitOK || d != "" {
		t.Errorf("interrupt: exit %d (-want +got):\n%s%s", code, d, errOut)
	}
	if d := cmp.Diff(cancelled, stateOf(showJSON(t, data, thread))); d != "" {
		t.Errorf("the thread after the interrupt (-want +got):\n%s", d)
	}
}

// Against a service, baton send --on-limit sets the thread's policy
// before its message and prints it; a switch target the thread has not
// used gets its usual command. The environment's policy is for new
// threads: a send with BATON_ON_LIMIT set and no flag leaves it be.
func TestServeSendSetsPolicy(t *testing.T) {
	data, ws := t.TempDir(), t.TempDir()
	startServe(t, data)
	thread, groups := firstACPRun(t, data, ws)
	out, errOut, code := baton(t, "send", "--data", data, "--on-limit", "switch:claude,return", "--max-runs", "3", thread, groups[2])
	want := "⚙ policy: on a limit: switch to claude, return after the reset (at most 8 waits, 8d in all); at most 3 runs\nsent to thread " + thread + " (run run_"
	if code != exitOK || !strings.HasPrefix(out, want) {
		t.Fatalf("send --on-limit: exit %d\n%s\nwant it to start with:\n%s\n%s", code, out, want, errOut)
	}
	wantPolicy := domain.ContinuationPolicy{OnLimit: domain.OnLimitSwitch, SwitchTo: "claude", Return: true,
		SwitchCommand: domain.ProviderCommand{Argv: []string{"claude"}}, MaxRuns: 3}.WithDefaults()
	th := showJSON(t, data, thread)
	if th.Loop == nil {
		t.Fatal("send --on-limit set no policy")
	}
	if d := cmp.Diff(wantPolicy, th.Loop.Policy); d != "" {
		t.Errorf("the thread's policy (-want +got):\n%s", d)
	}
	t.Setenv("BATON_ON_LIMIT", "wait")
	out, errOut, code = baton(t, "send", "--data", data, "--mode", "queue", thread, groups[2])
	if code != exitOK || !strings.HasPrefix(out, "sent to thread ") {
		t.Fatalf("send with BATON_ON_LIMIT: exit %d\n%s\n%s", code, out, errOut)
	}
	if d := cmp.Diff(wantPolicy, showJSON(t, data, thread).Loop.Policy); d != "" {
		t.Errorf("the environment changed the policy of a thread that goes on (-want +got):\n%s", d)
	}
}

// baton run --until on codex's recorded loop (its flags as recorded): the
// check fails twice, each time starting the next run with its output, then
// passes; run follows all three runs and exits 0.
func TestRunUntilLoopOnCodex(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(root, "testdata", "codex", "until_loop.flags"))
	if err != nil {
		t.Fatal(err)
	}
	flags, err := shlex.Split(string(b))
	if err != nil {
		t.Fatal(err)
	}
	data := t.TempDir()
	args := append([]string{"run", "--data", data, "--cwd", t.TempDir(), "--provider", "codex", "--provider-command",
		peerCommand(t, "codex/until_loop.ndjson")}, append(flags, lines(t, "codex/until_loop.messages")[0])...)
	out, errOut, code := baton(t, args...)
	check := "`n=$(ls step*.txt 2>/dev/null | wc -l); echo \"$n of 3 steps done\"; test \"$n\" -ge …`"
	want := []string{"⚙ policy: until " + check + " passes (timeout 10m); at most 5 runs"}
	for n := 1; n <= 3; n++ {
		want = append(want, fmt.Sprintf("✔ run %d completed (completed)", n), fmt.Sprintf("◇ check %s after run %d", check, n))
		if n < 3 {
			want = append(want, "✖ check "+check+" failed (exit 1); last lines:", fmt.Sprintf("    │ %d of 3 steps done", n))
		}
	}
	want = append(want, "✔ check "+check+" passed", "● loop done: the check passed")
	if d := cmp.Diff(want, loopLines(out)); code != exitOK || d != "" {
		t.Errorf("run: exit %d; the loop's lines (-want +got):\n%s\n%s\n%s", code, d, out, errOut)
	}
	th := showJSON(t, data, threadOf(t, out))
	if d := cmp.Diff(loopState{Loop: domain.LoopDone, Runs: []domain.RunStatus{domain.RunStatusCompleted, domain.RunStatusCompleted,
		domain.RunStatusCompleted}}, stateOf(th)); d != "" || th.Loop.Runs != 3 {
		t.Errorf("the thread after the loop (-want +got), %d loop runs (want 3):\n%s", th.Loop.Runs, d)
	}
}
