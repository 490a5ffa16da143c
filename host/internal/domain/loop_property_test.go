package domain

import (
	"fmt"
	"math"
	"time"

	"github.com/baton-run/baton/sdk"
	"testing"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"
)

// driver plays the host around a thread's continuation loop: it turns
// each attempt the domain starts into a provider turn on one session,
// fires each armed wait at its instant (or later, as a host that was
// down), and records each check the domain asks for. Every decision goes
// through Decide (world.must), and every wait a decision arms is checked
// against that decision's Env.Now.
type driver struct {
	w     *world
	rt    *rapid.T
	turns int
	// armed are the waits armed, each with the Env.Now of its decision.
	armed []armedWait
	// runsStarted counts the runs started since the policy was set;
	// startedAtTokens the loop's tokens when each started.
	runsStarted     int
	startedAtTokens []int64
	startedAt       []time.Time
	// tokens are the loop's tokens as the driver counts them: a run's
	// usage is the sum of its attempts', each the last its turn reported
	// (each sum at most math.MaxInt64), added when the run ends while the
	// loop is active, at most math.MaxInt64.
	tokens    int64
	runTokens map[string][]int64 // by run: each attempt's
}

// sat is a+b over counts, at most math.MaxInt64.
func sat(a, b int64) int64 { return int64(min(uint64(a)+uint64(b), math.MaxInt64)) }

type armedWait struct {
	Wait
	now time.Time
}

func (dr *driver) do(cmd Command) Decision {
	now, tokens := dr.w.env().Now, dr.tokens
	active := dr.w.thread.loopActive()
	d := dr.w.must(cmd)
	for _, e := range d.Events {
		switch e := e.(type) {
		case RunEnded:
			if active {
				var run int64
				for _, n := range dr.runTokens[e.RunID] {
					run = sat(run, n)
				}
				dr.tokens = sat(dr.tokens, run)
			}
		case LoopEnded:
			active = false
		case WaitArmed:
			// (c) never before the decision's now: strictly after it, or
			// the host would fire it at once, again and again.
			if !e.At.After(now) || !e.ArmedAt.Equal(now) {
				dr.rt.Fatalf("%s armed wait %+v at %v (armed at %v), deciding at %v", cmd.Payload.CommandType(), e.Wait, e.At, e.ArmedAt, now)
			}
			dr.armed = append(dr.armed, armedWait{e.Wait, now})
		case RunStarted:
			dr.runsStarted++
			dr.startedAtTokens = append(dr.startedAtTokens, tokens)
			dr.startedAt = append(dr.startedAt, now)
		}
	}
	return d
}

func (dr *driver) ev(e sdk.RuntimeEvent) Decision {
	return dr.do(Command{ID: "e", ThreadID: "thr", Payload: IngestProviderEvent{SessionID: "s1", Event: e}})
}

// turn is the provider's turn of the active attempt: it starts, reports
// the run's usage so far, and ends as end says (its TurnRef filled in).
func (dr *driver) turn(tokens int64, end sdk.RuntimeEvent) Decision {
	return dr.say("", tokens, end)
}

// say is a turn whose answer is text.
func (dr *driver) say(text string, tokens int64, end sdk.RuntimeEvent) Decision {
	dr.turns++
	ref := fmt.Sprintf("u%d", dr.turns)
	dr.ev(sdk.RuntimeEvent{Kind: sdk.EventTurnStarted, ThreadRef: "pt", TurnRef: ref})
	if text != "" {
		item := ref + "-answer"
		dr.ev(sdk.RuntimeEvent{Kind: sdk.EventItemStarted, TurnRef: ref, ItemRef: item, ItemKind: sdk.ItemAssistantMessage})
		dr.ev(sdk.RuntimeEvent{Kind: sdk.EventContentDelta, TurnRef: ref, ItemRef: item, Text: text})
		dr.ev(sdk.RuntimeEvent{Kind: sdk.EventItemCompleted, TurnRef: ref, ItemRef: item})
	}
	if tokens != 0 {
		if dr.runTokens == nil {
			dr.runTokens = map[string][]int64{}
		}
		r := dr.w.thread.ActiveRun()
		dr.runTokens[r.ID] = append(dr.runTokens[r.ID], tokens) // one report a turn, a turn an attempt
		dr.ev(sdk.RuntimeEvent{Kind: sdk.EventUsage, TurnRef: ref, Usage: &sdk.Usage{TotalTokens: tokens}})
	}
	end.TurnRef = ref
	return dr.ev(end)
}

// fire fires the thread's armed wait, late by up to late.
func (dr *driver) fire(late time.Duration) Decision {
	wait := dr.w.thread.NextWait()
	dr.w.now = wait.At.Add(time.Duration(rapid.Int64Range(0, int64(late)).Draw(dr.rt, "late")))
	return dr.do(Command{ID: "fire-" + wait.ID, ThreadID: "thr", Payload: FireWait{WaitID: wait.ID}})
}

func completed() sdk.RuntimeEvent {
	return sdk.RuntimeEvent{Kind: sdk.EventTurnTerminal, Status: sdk.TurnCompleted}
}

func hitLimit(l sdk.Limit) sdk.RuntimeEvent {
	return sdk.RuntimeEvent{Kind: sdk.EventTurnTerminal, Status: sdk.TurnFailed, Limit: &l, Failure: &sdk.Failure{Code: "usage_limit", Message: l.Message}}
}

// boundedBackoff draws a probe backoff whose instants stay within the
// years a log can write (a ceiling of at most 20 years).
func boundedBackoff(rt *rapid.T) Backoff {
	b := Backoff{
		Interval: rapid.SampledFrom([]time.Duration{0, 1, time.Second, time.Minute, DefaultProbeInterval, 3 * time.Hour}).Draw(rt, "interval"),
		Factor:   factorGen().Draw(rt, "factor"),
	}
	if rapid.Bool().Draw(rt, "ceiling set") {
		b.Ceiling = time.Duration(rapid.Int64Range(max(int64(b.Interval), 1), int64(20*365*24*time.Hour)).Draw(rt, "ceiling"))
	}
	return b
}

// resetGen draws the reset a limit says, seen from now: none, one that
// passed (malformed: a provider's clock, a stale snapshot), now itself,
// or one to come.
func resetGen(rt *rapid.T, now time.Time, label string) (time.Time, bool) {
	switch rapid.IntRange(0, 4).Draw(rt, label) {
	case 0:
		return time.Time{}, false
	case 1:
		return now.Add(-time.Duration(rapid.Int64Range(1, int64(1000*time.Hour)).Draw(rt, label+" ago"))), false
	case 2:
		return now, false
	case 3:
		return time.Unix(0, 0), false // an epoch of zero
	}
	return now.Add(time.Duration(rapid.Int64Range(1, int64(10*24*time.Hour)).Draw(rt, label+" in"))), true
}

// TestCreditsTopUpAfterFailedProbesResumesProperty: a credits limit with
// no usable reset (none, passed, now, the epoch) is probed on the backoff;
// k probes (k < MaxProbes) hit it again, each arming the next wait at
// exactly Backoff.Next(probe, now of the limit's decision), however late
// the host fires them; then the credits are topped up and the next
// continuation completes the same run: its attempts are the initial one
// and k+1 usage_limit_continuation ones, each sending the continue text.
func TestCreditsTopUpAfterFailedProbesResumesProperty(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		pol := ContinuationPolicy{OnLimit: OnLimitWait, Probe: boundedBackoff(rt), MaxProbes: rapid.IntRange(1, 12).Draw(rt, "max probes"),
			MaxWait: math.MaxInt64, ContinueText: rapid.SampledFrom([]string{"", "go on"}).Draw(rt, "continue text")}
		k := rapid.IntRange(0, pol.MaxProbes-1).Draw(rt, "failed probes")
		w := newWorld(t)
		w.now = t0.Add(time.Duration(rapid.Int64Range(0, int64(365*24*time.Hour)).Draw(rt, "start")))
		dr := &driver{w: w, rt: rt}
		w.setPolicy(pol)
		p := w.thread.Loop.Policy
		w.send("work")
		w.open("s1")
		credits := func() sdk.Limit {
			at, _ := resetGen(rt, w.now, "reset")
			if at.After(w.now) {
				at = time.Time{}
			}
			return sdk.Limit{Kind: sdk.LimitCredits, ResetsAt: at, Message: "credit balance too low"}
		}
		dr.turn(10, hitLimit(credits()))
		var texts []string
		for i := 0; i <= k; i++ {
			w.now = w.now.Add(time.Duration(rapid.Int64Range(0, int64(time.Minute)).Draw(rt, "turn time")))
			d := dr.fire(2 * time.Hour)
			for _, e := range d.Effects {
				if e, ok := e.(StartTurn); ok {
					texts = append(texts, e.Text)
				}
			}
			if i < k {
				dr.turn(10, hitLimit(credits()))
			} else {
				dr.turn(10, completed())
			}
		}
		r := w.thread.Runs[0]
		var reasons []AttemptReason
		for _, a := range r.Attempts {
			reasons = append(reasons, a.Reason)
		}
		want := []AttemptReason{AttemptInitial}
		var wantTexts []string
		for range k + 1 {
			want = append(want, AttemptUsageLimitContinuation)
			wantTexts = append(wantTexts, p.ContinueText)
		}
		if r.Status != RunStatusCompleted || !cmp.Equal(reasons, want) || !cmp.Equal(texts, wantTexts) {
			rt.Fatalf("after %d failed probes: run %s (%+v), attempts %v, continuation texts %q", k, r.Status, r.Failure, reasons, texts)
		}
		var got, wantAt []time.Time
		for i, a := range dr.armed {
			got = append(got, a.At)
			wantAt = append(wantAt, p.Probe.Next(i+1, a.now))
			if a.Probe != i+1 || a.MaxProbes != p.MaxProbes || !a.Since.Equal(dr.armed[0].now) {
				rt.Fatalf("wait %d: %+v", i+1, a.Wait)
			}
		}
		if diff := cmp.Diff(wantAt, got); diff != "" || len(got) != k+1 {
			rt.Fatalf("probe instants of %+v (-want +got):\n%s", p.Probe, diff)
		}
		if w.thread.NextWait() != nil || r.WaitID != "" {
			rt.Fatalf("a wait is left armed: %+v", w.thread.NextWait())
		}
	})
}

// TestLoopBudgetsEndTheLoopProperty: for random budgets (runs, tokens,
// hours) and random runs (completed with a failing check, limits with or
// without a reset, waits fired late), the loop ends: it never starts more
// than MaxRuns runs, never starts one once MaxTokens are used or once
// MaxDuration has passed, never arms a wait past MaxDuration, MaxWait or
// MaxProbes, and every wait is at the limit's reset plus its jitter when
// the reset is to come, else on the backoff, strictly after the now of the
// decision that armed it. While the loop is active it always has work to
// come (never stuck active with nothing armed, running or checking).
func TestLoopBudgetsEndTheLoopProperty(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		pol := ContinuationPolicy{Until: rapid.SampledFrom([]string{"", "make check"}).Draw(rt, "until"),
			OnLimit:   rapid.SampledFrom([]OnLimit{OnLimitStop, OnLimitWait}).Draw(rt, "on limit"),
			Probe:     boundedBackoff(rt),
			MaxProbes: rapid.IntRange(0, 4).Draw(rt, "max probes"),
			MaxWait:   rapid.SampledFrom([]time.Duration{0, time.Hour, 3 * 24 * time.Hour}).Draw(rt, "max wait"),
		}
		if rapid.Bool().Draw(rt, "max runs set") {
			pol.MaxRuns = rapid.IntRange(1, 8).Draw(rt, "max runs")
		}
		if rapid.Bool().Draw(rt, "max tokens set") {
			pol.MaxTokens = rapid.Int64Range(1, 100).Draw(rt, "max tokens")
		}
		if rapid.Bool().Draw(rt, "max duration set") || pol.MaxRuns == 0 && pol.MaxTokens == 0 {
			pol.MaxDuration = rapid.OneOf(rapid.SampledFrom([]time.Duration{1, 45 * time.Minute, 2 * time.Hour, 5 * time.Hour, 12 * time.Hour}),
				rapid.Map(rapid.Int64Range(int64(time.Hour), int64(12*time.Hour)), func(d int64) time.Duration { return time.Duration(d) })).Draw(rt, "max duration")
		}
		w := newWorld(t)
		w.now = t0.Add(time.Duration(rapid.Int64Range(0, int64(365*24*time.Hour)).Draw(rt, "start")))
		dr := &driver{w: w, rt: rt}
		w.setPolicy(pol)
		p, since := w.thread.Loop.Policy, w.thread.Loop.Since
		dr.do(Command{ID: "m", ThreadID: "thr", Payload: DispatchMessage{Text: "work", Mode: ModeQueueAfterActive}})
		w.open("s1")
		// Each turn takes at least 30 minutes and uses at least 5 tokens,
		// so that some budget must run out within 25 runs; sometimes it
		// reports so many that the loop's count must stop at the largest.
		tokens := rapid.OneOf(rapid.Int64Range(5, 40), rapid.Just[int64](math.MaxInt64), rapid.Int64Range(math.MaxInt64/2, math.MaxInt64))
		var answer string // the last turn's
		for step := 0; ; step++ {
			l := w.thread.Loop
			if l.Status != LoopActive {
				break
			}
			if step > 25*(p.MaxProbes+2) {
				rt.Fatalf("the loop is still active after %d steps: %+v", step, l)
			}
			if !w.thread.Unattended() {
				if p.Until != "" {
					rt.Fatalf("the loop is active with nothing to come: %+v", l)
				}
				// Without a check, the next run is a person's message.
				dr.do(Command{ID: "m", ThreadID: "thr", Payload: DispatchMessage{Text: "more", Mode: ModeQueueAfterActive}})
				continue
			}
			switch r := w.thread.ActiveRun(); {
			case l.Wait != nil:
				dr.fire(time.Hour)
			case l.CheckPending:
				w.now = w.now.Add(time.Duration(rapid.Int64Range(0, int64(10*time.Minute)).Draw(rt, "check time")))
				dr.do(Command{ID: "chk", ThreadID: "thr", Payload: RecordCheck{CheckResult: CheckResult{RunID: w.thread.Runs[len(w.thread.Runs)-1].ID,
					Command: p.Until, ExitCode: rapid.IntRange(1, 3).Draw(rt, "exit"), Output: "FAIL\n"}}})
			case r != nil:
				w.now = w.now.Add(time.Duration(rapid.Int64Range(int64(30*time.Minute), int64(3*time.Hour)).Draw(rt, "turn time")))
				used := tokens.Draw(rt, "tokens")
				answer = ""
				switch rapid.IntRange(0, 9).Draw(rt, "outcome") {
				case 0, 1, 2, 3:
					dr.turn(used, completed())
				case 4:
					// The agent says it is blocked, or only mentions the marker.
					answer = rapid.SampledFrom([]string{"Done.\n  " + BlockedMarker + " need the API key\n", BlockedMarker,
						"Will print " + BlockedMarker + " if stuck."}).Draw(rt, "answer")
					dr.say(answer, used, completed())
				case 5:
					dr.turn(used, sdk.RuntimeEvent{Kind: sdk.EventTurnTerminal, Status: sdk.TurnFailed, Failure: &sdk.Failure{Message: "boom"}})
				default:
					at, _ := resetGen(rt, w.now, "reset")
					kind := rapid.SampledFrom([]sdk.LimitKind{sdk.LimitUsageWindow, sdk.LimitRate, sdk.LimitCredits, sdk.LimitOverload}).Draw(rt, "kind")
					dr.turn(used, hitLimit(sdk.Limit{Kind: kind, ResetsAt: at}))
				}
			default:
				rt.Fatalf("the loop is active, no wait, no check, no run: %+v", l)
			}
		}
		l := w.thread.Loop
		if p.MaxRuns > 0 && (dr.runsStarted > p.MaxRuns || l.Runs != dr.runsStarted) {
			rt.Fatalf("%d runs started (loop counts %d), at most %d", dr.runsStarted, l.Runs, p.MaxRuns)
		}
		for i, spent := range dr.startedAtTokens {
			if p.MaxTokens > 0 && spent >= p.MaxTokens {
				rt.Fatalf("run %d started with %d tokens used, max %d", i+1, spent, p.MaxTokens)
			}
			if at := dr.startedAt[i]; p.MaxDuration > 0 && !at.Before(since.Add(p.MaxDuration)) {
				rt.Fatalf("run %d started at %v, after the loop's hours end at %v", i+1, at, since.Add(p.MaxDuration))
			}
		}
		if l.Tokens != dr.tokens {
			rt.Fatalf("the loop counts %d tokens, its runs used %d", l.Tokens, dr.tokens)
		}
		// Waits: where the policy says, within its bounds.
		var probe int
		var run string
		for _, a := range dr.armed {
			if a.RunID != run {
				run, probe = a.RunID, 0
			}
			probe++
			want := p.Probe.Next(probe, a.now)
			if a.Limit.ResetsAt.After(a.now) {
				want = a.Limit.ResetsAt.Add(Jitter(a.ID))
			}
			if !a.At.Equal(want) || a.Probe != probe || a.Probe > p.MaxProbes || a.At.After(a.Since.Add(p.MaxWait)) ||
				p.MaxDuration > 0 && !a.At.Before(since.Add(p.MaxDuration)) {
				rt.Fatalf("wait %+v armed at %v: want it at %v, probe %d of at most %d, within %v of %v and the loop's hours",
					a.Wait, a.now, want, probe, p.MaxProbes, p.MaxWait, a.Since)
			}
		}
		// Why it ended is so; an answer that says the agent is blocked
		// ends it so.
		last := w.thread.Runs[len(w.thread.Runs)-1]
		said := map[string]string{"Done.\n  " + BlockedMarker + " need the API key\n": "the agent said it is blocked: need the API key",
			BlockedMarker: "the agent said it is blocked: (no reason given)"}[answer]
		if said != "" && last.Status == RunStatusCompleted && (l.Status != LoopBlocked || l.Reason != said) {
			rt.Fatalf("run %d said %q; the loop ended %s (%s)", last.Ordinal, answer, l.Status, l.Reason)
		}
		switch l.Status {
		case LoopBudget:
			if !(p.MaxRuns > 0 && l.Runs >= p.MaxRuns || p.MaxTokens > 0 && l.Tokens >= p.MaxTokens ||
				p.MaxDuration > 0 && !w.now.Before(since.Add(p.MaxDuration)) || last.Status == RunStatusBlocked && last.Failure.Code == "loop_budget") {
				rt.Fatalf("the loop ended on a budget, none spent: %+v", l)
			}
		case LoopBlocked:
			if !(last.Status == RunStatusBlocked && p.OnLimit == OnLimitStop || last.Status == RunStatusCompleted && l.Reason == said) {
				rt.Fatalf("the loop ended blocked (%s); last run %s, on-limit %q, its answer %q", l.Reason, last.Status, p.OnLimit, answer)
			}
		case LoopStopped:
			if last.Status != RunStatusFailed {
				rt.Fatalf("the loop stopped (%s); last run %s", l.Reason, last.Status)
			}
		default:
			rt.Fatalf("the loop ended %s (%s)", l.Status, l.Reason)
		}
		if w.thread.Unattended() {
			rt.Fatalf("the loop ended %s but has work to come: %+v", l.Status, l)
		}
	})
}
