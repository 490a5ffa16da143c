package orchestrator

import (
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/baton-run/baton/host/internal/domain"
	"github.com/baton-run/baton/host/internal/eventlog"
)

// The cost of a usage report over threads: a report over every thread
// reads one head a thread (linear in the threads, whatever their
// histories), a report of one thread its head alone (the same at any
// number of threads). Each thread's head holds a ledger of 24 hours on
// two models and two rate limits, as a day's busy thread would.
//
//	go test -run '^$' -bench 'Usage' ./internal/orchestrator/
func BenchmarkUsage(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		store := usageStore(b, n)
		b.Run(fmt.Sprintf("every-thread/threads=%d", n), func(b *testing.B) {
			for b.Loop() {
				r, err := ReadUsage(store, UsageQuery{By: domain.UsageByDay})
				if err != nil || len(r.Lines) == 0 {
					b.Fatal(err, r)
				}
			}
		})
		b.Run(fmt.Sprintf("one-thread/threads=%d", n), func(b *testing.B) {
			id := fmt.Sprintf("thr_%08d", n/2)
			for b.Loop() {
				if _, err := ReadUsage(store, UsageQuery{ThreadID: id}); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("limits/threads=%d", n), func(b *testing.B) {
			for b.Loop() {
				if _, err := ReadLimits(store); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// usageStore is a store of n threads' heads, each with a ledger.
func usageStore(b *testing.B, n int) *eventlog.Store {
	b.Helper()
	store, err := eventlog.Open(b.TempDir(), hclog.NewNullLogger())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { store.Close() })
	day := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	for i := range n {
		t := &domain.Thread{ID: fmt.Sprintf("thr_%08d", i), Provider: "codex"}
		for h := range 24 {
			for _, m := range []string{"gpt-5", "gpt-5-mini"} {
				t.Ledger = append(t.Ledger, domain.LedgerRow{Hour: day.Add(time.Duration(h) * time.Hour), Provider: "codex", Model: m,
					Usage: domain.Usage{InputTokens: int64(1000 + i), OutputTokens: 100, TotalTokens: int64(1100 + i), Model: m}})
			}
		}
		t.RateLimits = []domain.RateLimit{{Provider: "codex", Scope: "primary", UsedPercent: 10, At: day.Add(time.Duration(i) * time.Second)},
			{Provider: "codex", Scope: "secondary", UsedPercent: 3, At: day.Add(time.Duration(i) * time.Second)}}
		if err := store.PutThreadState(t.ID, encodeHead(t.Summary(), t), false, nil); err != nil {
			b.Fatal(err)
		}
	}
	return store
}
