package orchestrator_test

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-run/baton/host/internal/domain"
)

// TestUsageLimitSwitchReturn (level 4, recorded from the real binaries:
// codex 0.171.0 and claude through the scripted model servers): a thread
// on codex with --on-limit switch:claude,return. Run 1's first model call
// gets a 429 usage limit (codex's five-hour window spent, resetting 3 s
// later): the attempt ends blocked, the thread switches to claude, and a
// continuation attempt of run 1 goes on there (claude writes a.txt); a
// return to codex is armed at the reset. When the host's clock passes it,
// the thread is on codex again, and run 2 goes to codex's own
// conversation with a delta handoff of what claude did.
func TestUsageLimitSwitchReturn(t *testing.T) {
	pair := switchPair{"codex", "claude"}
	t.Run(pair.name(), func(t *testing.T) {
		const scenario = "usage_limit_switch_return"
		s := newSwitchThread(t, scenario, pair, scenario+".ndjson")
		e := s.e
		e.dispatch(domain.Command{ID: "policy", ThreadID: s.id, Payload: domain.SetPolicy{Policy: domain.ContinuationPolicy{
			OnLimit: domain.OnLimitSwitch, SwitchTo: pair.second, SwitchCommand: s.cmd2, Return: true}}})
		e.dispatch(domain.Command{ID: "send-1", ThreadID: s.id, Payload: domain.DispatchMessage{Text: switchMessages[0]}})
		th := e.waitFor(s.id, "run 1 to end on claude, a return armed", func(th domain.Thread) bool {
			return len(th.Runs) == 1 && th.Runs[0].Status == domain.RunStatusCompleted && th.Loop != nil && th.Loop.Return != nil
		})
		ret := *th.Loop.Return
		if ret.Kind != domain.WaitReturn || ret.Provider != pair.first || ret.Limit.Kind != domain.LimitKind("usage_window") ||
			ret.Limit.ResetsAt.IsZero() || ret.At.Before(ret.Limit.ResetsAt) {
			t.Fatalf("return %+v; want back to %s at codex's usage-window reset or after it", ret, pair.first)
		}
		if th.Provider != pair.second {
			t.Fatalf("thread on %s after the limit, want %s", th.Provider, pair.second)
		}
		// The host's clock passes the reset: the thread returns.
		e.clock.Set(ret.At)
		e.waitFor(s.id, "the return to "+pair.first, func(th domain.Thread) bool {
			return th.Provider == pair.first && th.Loop != nil && th.Loop.Return == nil
		})
		th = s.run(2)
		if recording(t, scenario, pair.name()) != nil {
			return // the replay checks the rest
		}

		if diff := cmp.Diff([]runView{
			{1, pair.second, domain.RunStatusCompleted, []string{"added a.txt +1 -0"}}, // the limit moved it
			{2, pair.first, domain.RunStatusCompleted, []string{"added b.txt +1 -0"}},
		}, runViews(th)); diff != "" {
			t.Errorf("runs (-want +got):\n%s", diff)
		}
		type attemptView struct {
			Reason   domain.AttemptReason
			Status   domain.AttemptStatus
			Provider string
		}
		var attempts []attemptView
		for _, r := range th.Runs {
			for _, a := range r.Attempts {
				attempts = append(attempts, attemptView{a.Reason, a.Status, a.Provider})
			}
		}
		r1 := th.Runs[0]
		if diff := cmp.Diff([]attemptView{
			{"initial", "blocked", pair.first},
			{domain.AttemptUsageLimitContinuation, "completed", pair.second},
			{"initial", "completed", pair.first},
		}, attempts); diff != "" {
			t.Errorf("attempts (-want +got):\n%s", diff)
		}
		if r1.Limit == nil || r1.Limit.Kind != "usage_window" || r1.Limit.Scope != "codex/primary" {
			t.Errorf("run 1's limit %+v; want codex's usage window (codex/primary)", r1.Limit)
		}
		// Claude took run 1 with nothing before it to tell; codex, back,
		// is told run 1, which it began but claude finished.
		var handoffs []string
		for _, h := range th.Handoffs {
			handoffs = append(handoffs, fmt.Sprintf("%s %s->%s %v %s run %s", h.Strategy, h.FromProvider, h.ToProvider,
				domain.HandoffOrdinals(h.Runs, h.FromRun, h.ToRun), h.Status, h.RunID))
		}
		if diff := cmp.Diff([]string{fmt.Sprintf("%s claude->codex [1] consumed run %s", domain.HandoffDeltaSinceLastSeen, th.Runs[1].ID)},
			handoffs); diff != "" {
			t.Errorf("handoffs (-want +got):\n%s", diff)
		}
		if got := e.files(); !hasFiles(got, map[string]string{"a.txt": "one\n", "b.txt": "two\n"}) {
			t.Errorf("workspace = %q", got)
		}
	})
}
