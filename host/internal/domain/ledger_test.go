package domain

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"

	"github.com/baton-run/baton/sdk"
)

// ledgerThread is a thread of three runs: run r1 on codex with attempts
// a1 and a2 (a2 moved to claude), run r2 with attempt b1, and run r3 of a
// log from before attempts reported usage.
func ledgerThread() *Thread {
	return &Thread{ID: "thr", Provider: "codex", Runs: []Run{
		{ID: "r1", Provider: "codex", QueuedAt: t0, Attempts: []Attempt{{ID: "a1"}, {ID: "a2", Provider: "claude"}}},
		{ID: "r2", Provider: "codex", QueuedAt: t0.Add(90 * time.Minute), Attempts: []Attempt{{ID: "b1"}}},
		{ID: "r3", Provider: "claude", QueuedAt: t0.Add(90 * time.Minute)},
	}}
}

func report(t *Thread, at time.Time, p UsageReported) {
	Evolve(t, Event{ThreadID: t.ID, At: at, Payload: p})
}

// The ledger counts each attempt's latest report, in the hour of the
// event that carried it, by provider and model; a breakdown by model
// keeps what it leaves of the total in a row of no model; a run's usage
// (the token budget's count) is its attempts' rows.
func TestLedgerCountsEachAttemptsLatestReport(t *testing.T) {
	th := ledgerThread()
	h0, h1, h2 := t0, t0.Add(time.Hour), t0.Add(2*time.Hour)
	report(th, h0.Add(5*time.Minute), UsageReported{RunID: "r1", AttemptID: "a1", Usage: Usage{InputTokens: 10, TotalTokens: 10, Model: "gpt-5"}})
	// The same attempt again, an hour later: it replaces the first.
	report(th, h1.Add(time.Minute), UsageReported{RunID: "r1", AttemptID: "a1", Usage: Usage{InputTokens: 30, OutputTokens: 5, TotalTokens: 35, Model: "gpt-5"}})
	// Attempt a2 on claude, with a stated cost and a breakdown by model
	// that leaves some of the total unnamed; a model named twice is one row.
	report(th, h1.Add(2*time.Minute), UsageReported{RunID: "r1", AttemptID: "a2",
		Usage: Usage{InputTokens: 100, OutputTokens: 20, CachedInputTokens: 40, ReasoningTokens: 3, TotalTokens: 120, CostMicros: 5000},
		Models: []Usage{
			{Model: "opus", InputTokens: 60, OutputTokens: 10, TotalTokens: 70, CostMicros: 4000},
			{Model: "haiku", InputTokens: 20, OutputTokens: 5, TotalTokens: 25, CostMicros: 500},
			{Model: "opus", InputTokens: 10, TotalTokens: 10},
		}})
	// A breakdown that covers the whole report leaves no unnamed row.
	report(th, h2, UsageReported{RunID: "r2", AttemptID: "b1", Usage: Usage{OutputTokens: 7, TotalTokens: 7},
		Models: []Usage{{Model: "gpt-5", OutputTokens: 7, TotalTokens: 7}}})
	// A run the projection does not hold is not counted.
	report(th, h2, UsageReported{RunID: "gone", AttemptID: "x", Usage: Usage{TotalTokens: 1}})

	want := []LedgerRow{
		{Hour: h1, Provider: "claude", Usage: Usage{InputTokens: 10, OutputTokens: 5, CachedInputTokens: 40, ReasoningTokens: 3, TotalTokens: 15, CostMicros: 500}},
		{Hour: h1, Provider: "claude", Model: "haiku", Usage: Usage{InputTokens: 20, OutputTokens: 5, TotalTokens: 25, CostMicros: 500, Model: "haiku"}},
		{Hour: h1, Provider: "claude", Model: "opus", Usage: Usage{InputTokens: 70, OutputTokens: 10, TotalTokens: 80, CostMicros: 4000, Model: "opus"}},
		{Hour: h1, Provider: "codex", Model: "gpt-5", Usage: Usage{InputTokens: 30, OutputTokens: 5, TotalTokens: 35, Model: "gpt-5"}},
		{Hour: h2, Provider: "codex", Model: "gpt-5", Usage: Usage{OutputTokens: 7, TotalTokens: 7, Model: "gpt-5"}},
	}
	if diff := cmp.Diff(want, th.Ledger); diff != "" {
		t.Errorf("ledger (-want +got):\n%s", diff)
	}
	r1 := Usage{InputTokens: 130, OutputTokens: 25, CachedInputTokens: 40, ReasoningTokens: 3, TotalTokens: 155, CostMicros: 5000, Model: "gpt-5"}
	if diff := cmp.Diff(&r1, th.Runs[0].Usage); diff != "" {
		t.Errorf("run r1's usage, which its budget counts (-want +got):\n%s", diff)
	}
	s := th.Summary()
	total := Usage{InputTokens: 130, OutputTokens: 32, CachedInputTokens: 40, ReasoningTokens: 3, TotalTokens: 162, CostMicros: 5000, Model: "gpt-5"}
	if diff := cmp.Diff(total, s.Usage); diff != "" {
		t.Errorf("the thread's usage (-want +got):\n%s", diff)
	}
	// A report of nothing takes the attempt's rows out.
	report(th, h2, UsageReported{RunID: "r2", AttemptID: "b1"})
	if n := len(th.Ledger); n != 4 || th.Runs[1].Usage == nil || *th.Runs[1].Usage != (Usage{}) {
		t.Errorf("after r2 reported nothing: %d rows, run usage %+v", n, th.Runs[1].Usage)
	}
}

// A log from before attempts reported usage counts the run's report in
// the hour the run was queued, replaced by the next.
func TestLedgerOfAnOldLogsReports(t *testing.T) {
	th := ledgerThread()
	report(th, t0.Add(3*time.Hour), UsageReported{RunID: "r3", Usage: Usage{InputTokens: 4, TotalTokens: 4}})
	report(th, t0.Add(5*time.Hour), UsageReported{RunID: "r3", Usage: Usage{InputTokens: 9, TotalTokens: 9}})
	want := []LedgerRow{{Hour: t0.Add(time.Hour), Provider: "claude", Usage: Usage{InputTokens: 9, TotalTokens: 9}}}
	if diff := cmp.Diff(want, th.Ledger); diff != "" {
		t.Errorf("ledger (-want +got):\n%s", diff)
	}
	if u := th.Runs[2].Usage; u == nil || u.TotalTokens != 9 {
		t.Errorf("run usage %+v, want 9 tokens", u)
	}
}

// Rows a ledger does not hold are not taken out (a ledger is never
// without the rows its attempts put in; ledgerMove does not assume it).
func TestLedgerMoveOfRowsItDoesNotHold(t *testing.T) {
	row := LedgerRow{Hour: t0, Provider: "codex", Usage: Usage{TotalTokens: 3}}
	got := ledgerMove(nil, []LedgerRow{row}, nil)
	if len(got) != 0 {
		t.Errorf("ledger %+v, want none", got)
	}
}

// A usage event's cost, model and breakdown reach the ledger.
func TestUsageEventCarriesCostAndModels(t *testing.T) {
	w := running(t, Capabilities{})
	w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventUsage, TurnRef: "u1",
		Usage:      &sdk.Usage{InputTokens: 8, OutputTokens: 2, TotalTokens: 10, CostMicros: 1234, Model: "opus"},
		ModelUsage: []sdk.Usage{{Model: "opus", InputTokens: 8, OutputTokens: 2, TotalTokens: 10, CostMicros: 1234}}})
	lines, total := Tally([]ThreadLedger{{ThreadID: "thr", Rows: w.thread.Ledger}}, UsageByModel, time.Time{})
	want := []UsageLine{{Key: "opus", Usage: Usage{InputTokens: 8, OutputTokens: 2, TotalTokens: 10, CostMicros: 1234}}}
	if diff := cmp.Diff(want, lines); diff != "" {
		t.Errorf("by model (-want +got):\n%s", diff)
	}
	if total != want[0].Usage {
		t.Errorf("total %+v, want %+v", total, want[0].Usage)
	}
}

// Each grouping of a report, and since.
func TestTally(t *testing.T) {
	day1, day2 := time.Date(2026, 12, 1, 23, 0, 0, 0, time.UTC), time.Date(2026, 12, 2, 1, 0, 0, 0, time.UTC)
	ledgers := []ThreadLedger{
		{ThreadID: "thr_b", Rows: []LedgerRow{
			{Hour: day1, Provider: "codex", Model: "gpt-5", Usage: Usage{TotalTokens: 5, Model: "gpt-5"}},
			{Hour: day2, Provider: "claude", Model: "opus", Usage: Usage{TotalTokens: 7, CostMicros: 9, Model: "opus"}},
		}},
		{ThreadID: "thr_a", Rows: []LedgerRow{{Hour: day2, Provider: "codex", Usage: Usage{TotalTokens: 1}}}},
	}
	for _, c := range []struct {
		by    UsageBy
		since time.Time
		want  []UsageLine
	}{
		{UsageByProvider, time.Time{}, []UsageLine{{"claude", Usage{TotalTokens: 7, CostMicros: 9}}, {"codex", Usage{TotalTokens: 6}}}},
		{"", time.Time{}, []UsageLine{{"claude", Usage{TotalTokens: 7, CostMicros: 9}}, {"codex", Usage{TotalTokens: 6}}}},
		{UsageByThread, time.Time{}, []UsageLine{{"thr_a", Usage{TotalTokens: 1}}, {"thr_b", Usage{TotalTokens: 12, CostMicros: 9}}}},
		{UsageByModel, time.Time{}, []UsageLine{{"", Usage{TotalTokens: 1}}, {"gpt-5", Usage{TotalTokens: 5}}, {"opus", Usage{TotalTokens: 7, CostMicros: 9}}}},
		{UsageByDay, time.Time{}, []UsageLine{{"2026-12-01", Usage{TotalTokens: 5}}, {"2026-12-02", Usage{TotalTokens: 8, CostMicros: 9}}}},
		// since counts from the start of its hour: 23:30 takes in the 23:00 row.
		{UsageByDay, day1.Add(30 * time.Minute), []UsageLine{{"2026-12-01", Usage{TotalTokens: 5}}, {"2026-12-02", Usage{TotalTokens: 8, CostMicros: 9}}}},
		{UsageByDay, day1.Add(time.Hour), []UsageLine{{"2026-12-02", Usage{TotalTokens: 8, CostMicros: 9}}}},
	} {
		t.Run(fmt.Sprintf("%s since %s", c.by, c.since.Format(time.TimeOnly)), func(t *testing.T) {
			lines, total := Tally(ledgers, c.by, c.since)
			if diff := cmp.Diff(c.want, lines); diff != "" {
				t.Errorf("lines (-want +got):\n%s", diff)
			}
			var sum Usage
			for _, l := range c.want {
				sum.Add(l.Usage)
			}
			if total != sum {
				t.Errorf("total %+v, want %+v", total, sum)
			}
		})
	}
}

// Rate limits are kept per provider and scope; the latest over threads
// comes first.
func TestLatestLimits(t *testing.T) {
	th := &Thread{ID: "thr", Provider: "codex", RateLimits: []RateLimit{{Scope: "primary", UsedPercent: 1}}}
	// A limit of an old snapshot names no provider: the thread's.
	Evolve(th, Event{At: t0, Payload: RateLimitReported{RateLimit{Scope: "primary", UsedPercent: 10}}})
	Evolve(th, Event{At: t0.Add(time.Minute), Payload: RateLimitReported{RateLimit{Scope: "primary", UsedPercent: 20, Provider: "claude"}}})
	want := []RateLimit{
		{Scope: "primary", UsedPercent: 10, Provider: "codex", At: t0},
		{Scope: "primary", UsedPercent: 20, Provider: "claude", At: t0.Add(time.Minute)},
	}
	if diff := cmp.Diff(want, th.RateLimits); diff != "" {
		t.Fatalf("thread's limits (-want +got):\n%s", diff)
	}
	other := []RateLimit{
		{Scope: "primary", UsedPercent: 50, Provider: "codex", At: t0.Add(2 * time.Minute)},
		{Scope: "secondary", UsedPercent: 5, Provider: "codex", At: t0.Add(time.Minute)},
		{Scope: "primary", UsedPercent: 15, Provider: "claude", At: t0},
	}
	got := LatestLimits(th.RateLimits, other)
	want = []RateLimit{
		{Scope: "primary", UsedPercent: 50, Provider: "codex", At: t0.Add(2 * time.Minute)},
		{Scope: "primary", UsedPercent: 20, Provider: "claude", At: t0.Add(time.Minute)},
		{Scope: "secondary", UsedPercent: 5, Provider: "codex", At: t0.Add(time.Minute)},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("latest limits (-want +got):\n%s", diff)
	}
}

// TestLedgerSumsAgreeProperty: whatever reports arrive, in whatever
// hours, the ledger grouped by provider, by thread, by model and by day
// sums to the same totals (with or without since), and those are the
// totals of the runs' usage, which the token budget counts.
func TestLedgerSumsAgreeProperty(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		threads := []*Thread{ledgerThread(), ledgerThread(), ledgerThread()}
		for i, th := range threads {
			th.ID = fmt.Sprintf("thr_%d", i)
		}
		count := rapid.Int64Range(0, 1000)
		usage := func(label string) Usage {
			return Usage{InputTokens: count.Draw(rt, label+"in"), OutputTokens: count.Draw(rt, label+"out"),
				CachedInputTokens: count.Draw(rt, label+"cached"), ReasoningTokens: count.Draw(rt, label+"reasoning"),
				TotalTokens: count.Draw(rt, label+"total"), CostMicros: count.Draw(rt, label+"cost"),
				Model: rapid.SampledFrom([]string{"", "gpt-5", "opus"}).Draw(rt, label+"model")}
		}
		attempts := []struct{ run, attempt string }{{"r1", "a1"}, {"r1", "a2"}, {"r2", "b1"}, {"r3", ""}}
		for n := rapid.IntRange(0, 30).Draw(rt, "reports"); n > 0; n-- {
			th := threads[rapid.IntRange(0, len(threads)-1).Draw(rt, "thread")]
			at := attempts[rapid.IntRange(0, len(attempts)-1).Draw(rt, "attempt")]
			p := UsageReported{RunID: at.run, AttemptID: at.attempt, Usage: usage("")}
			for m := rapid.IntRange(0, 3).Draw(rt, "models"); m > 0; m-- {
				p.Models = append(p.Models, usage("m"))
			}
			hour := time.Duration(rapid.IntRange(0, 72).Draw(rt, "hour")) * time.Hour
			report(th, t0.Add(hour+time.Duration(rapid.IntRange(0, 59).Draw(rt, "minute"))*time.Minute), p)
		}
		var ledgers []ThreadLedger
		var runs Usage
		for _, th := range threads {
			ledgers = append(ledgers, ThreadLedger{ThreadID: th.ID, Rows: th.Ledger})
			for _, r := range th.Runs {
				if r.Usage != nil {
					runs.Add(*r.Usage)
				}
			}
		}
		runs.Model = ""
		var summaries Usage
		for _, th := range threads {
			summaries.Add(th.Summary().Usage)
		}
		summaries.Model = ""
		since := t0.Add(time.Duration(rapid.IntRange(0, 80).Draw(rt, "since")) * time.Hour)
		var all, recent Usage
		for i, by := range UsageBys {
			lines, total := Tally(ledgers, by, time.Time{})
			var sum Usage
			for _, l := range lines {
				sum.Add(l.Usage)
			}
			sum.Model = ""
			_, from := Tally(ledgers, by, since)
			if i == 0 {
				all, recent = total, from
			}
			if total != sum || total != all || from != recent {
				rt.Fatalf("by %s: lines sum to %+v, total %+v (since: %+v); by provider: %+v (since: %+v)", by, sum, total, from, all, recent)
			}
		}
		if all != runs || all != summaries {
			rt.Fatalf("the ledger's total %+v, the runs' usage %+v, the threads' summaries' %+v", all, runs, summaries)
		}
	})
}
