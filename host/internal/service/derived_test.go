package service

import (
	"slices"
	"testing"
	"time"

	"github.com/baton-run/baton/host/internal/domain"
	"github.com/baton-run/baton/host/internal/orchestrator"
)

// The API carries what a client says of a thread that takes one of the
// domain's rules, so that no client repeats the rule: a limit in words, a
// policy as applied, a wait at its reset or a probe, a check that passed,
// the runs a handoff covers, and whether the loop has work to come.
func TestDerivedFields(t *testing.T) {
	reset := epoch.Add(time.Hour)
	limit := domain.Limit{Kind: domain.LimitUsageWindow, Scope: "five_hour", ResetsAt: reset}
	if got := limitPB(limit).GetDescription(); got != "usage limit (five_hour)" {
		t.Errorf("a usage limit's description: %q", got)
	}
	if got := limitPB(domain.Limit{}).GetDescription(); got != "limit" {
		t.Errorf("a limit of no kind's description: %q", got)
	}

	for _, tc := range []struct {
		what  string
		limit domain.Limit
		at    time.Time
		want  bool
	}{
		{"at the reset", limit, reset, true},
		{"at the reset and the most jitter", limit, reset.Add(domain.MaxJitter), true},
		{"past the reset and its jitter", limit, reset.Add(domain.MaxJitter + time.Second), false},
		{"before the reset", limit, reset.Add(-time.Second), false},
		{"for a limit with no reset", domain.Limit{Kind: domain.LimitRate}, reset, false},
	} {
		if got := waitPB(domain.Wait{Limit: tc.limit, At: tc.at}).GetAtReset(); got != tc.want {
			t.Errorf("a wait %s: at_reset %v, want %v", tc.what, got, tc.want)
		}
	}

	if got := policyPB(domain.ContinuationPolicy{}).GetApplied(); got != nil {
		t.Errorf("an off policy applies %v, want none", got)
	}
	applied := policyPB(domain.ContinuationPolicy{OnLimit: domain.OnLimitWait, Until: "make test"}).GetApplied()
	if applied.GetMaxProbes() != domain.DefaultMaxProbes || applied.GetMaxWait().AsDuration() != domain.DefaultMaxWait ||
		applied.GetCheckTimeout().AsDuration() != domain.DefaultCheckTimeout || applied.GetOnLimit() != string(domain.OnLimitWait) {
		t.Errorf("a wait policy with a check applies %v; want the defaults filled in", applied)
	}

	for _, tc := range []struct {
		check domain.CheckResult
		want  bool
	}{
		{domain.CheckResult{Command: "true"}, true},
		{domain.CheckResult{Command: "false", ExitCode: 1}, false},
		{domain.CheckResult{Command: "sleep 9", TimedOut: true}, false},
		{domain.CheckResult{Command: "nope", Error: "not found"}, false},
	} {
		if got := checkPB(tc.check).GetPassed(); got != tc.want {
			t.Errorf("check %+v: passed %v, want %v", tc.check, got, tc.want)
		}
	}

	listed := handoffPB(domain.ContextHandoff{FromRun: 1, ToRun: 3, Runs: []domain.HandoffRun{{Ordinal: 1}, {Ordinal: 3}}})
	older := handoffPB(domain.ContextHandoff{FromRun: 2, ToRun: 4}) // made before handoffs listed their runs
	if got := listed.GetCoveredRuns(); !slices.Equal(got, []uint32{1, 3}) {
		t.Errorf("a handoff of runs 1 and 3 covers %v", got)
	}
	if got := older.GetCoveredRuns(); !slices.Equal(got, []uint32{2, 3, 4}) {
		t.Errorf("an older handoff of runs 2 to 4 covers %v", got)
	}

	waiting := domain.Thread{ID: "thr", Loop: &domain.Loop{Status: domain.LoopActive, Wait: &domain.Wait{ID: "w"}}}
	if !threadPB(waiting, orchestrator.Page{}).GetUnattended() {
		t.Error("a thread with a wait armed is not unattended")
	}
	if threadPB(domain.Thread{ID: "thr"}, orchestrator.Page{}).GetUnattended() {
		t.Error("a thread with no loop is unattended")
	}
}
