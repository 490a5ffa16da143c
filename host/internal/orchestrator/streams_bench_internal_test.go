package orchestrator

import (
	"context"
	"fmt"
	"runtime"
	"testing"

	"github.com/baton-run/baton/host/internal/domain"
	"github.com/baton-run/baton/host/internal/ids"
	"github.com/baton-run/baton/sdk"
)

// BenchmarkSubscriptionMemory: what subscriptions hold, on a thread of 10
// and of 1,000 runs (each with its messages, items, turns and
// checkpoints; its session ended, so nothing keeps it in flight). Each
// subscription has read the thread from its start and waits for more;
// then another thread is touched, so that the cache (MaxThreads 1) may let
// the followed thread's projection go. B/sub is the live heap the
// subscriptions add (and their goroutines' stacks), per subscription (1
// and 100 of them), once collected;
// projection-B is the followed thread's projection, for scale.
func BenchmarkSubscriptionMemory(b *testing.B) {
	for _, runs := range []int{10, 1000} {
		for _, subs := range []int{1, 100} {
			b.Run(fmt.Sprintf("runs=%d/subs=%d", runs, subs), func(b *testing.B) {
				h := quietHost(b, Config{IDs: ids.Seeded(7), MaxThreads: 1})
				head := recordRuns(b, h, "t", runs)
				projection := heapOf(func() any { t, _, _ := h.loadThread("t"); return t })
				// Live again (quietHost stopped it, so that no effect ran),
				// for the streams; nothing more is committed.
				h.ctx, h.cancel = context.WithCancel(context.Background())
				touch := func() {
					if _, err := h.view("x"); err != nil {
						b.Fatal(err)
					}
				}
				if _, err := h.Dispatch(context.Background(), domain.Command{ID: "create-x", ThreadID: "x", Payload: domain.CreateThread{
					Provider: "none", Cwd: b.TempDir(), ProviderCommand: domain.ProviderCommand{Argv: []string{"x"}}}}); err != nil {
					b.Fatal(err)
				}
				var perSub float64
				for b.Loop() {
					touch()
					before := liveHeap()
					ctx, stop := context.WithCancel(context.Background())
					caught := make(chan error, subs)
					done := make(chan struct{}, subs)
					for range subs {
						go func() {
							defer func() { done <- struct{}{} }()
							for r, err := range h.ThreadStream(ctx, "t", 0) {
								if err != nil || r.Sequence == head {
									caught <- err
								}
								if err != nil {
									return
								}
							}
						}()
					}
					for range subs {
						if err := <-caught; err != nil {
							b.Fatal(err)
						}
					}
					touch()
					perSub = float64(liveHeap()-before) / float64(subs)
					stop()
					for range subs {
						<-done
					}
				}
				b.ReportMetric(perSub, "B/sub")
				b.ReportMetric(float64(projection), "projection-B")
			})
		}
	}
}

// recordRuns commits a thread of runs runs, as BenchmarkThreadHistory
// does, its session ended at the end; it returns the thread's last
// sequence.
func recordRuns(b *testing.B, h *Host, th string, runs int) uint64 {
	startTurn(b, h, th)
	n := 0
	ingest := func(evs ...sdk.RuntimeEvent) {
		n++
		if err := h.ingestEvents(th, "s1", fmt.Sprintf("pev-%d", n), evs); err != nil {
			b.Fatal(err)
		}
	}
	capture := func() {
		t, _ := h.view(th)
		for _, c := range t.Checkpoints {
			if c.Status == domain.CheckpointCapturing {
				n++
				if _, err := h.Dispatch(context.Background(), domain.Command{ID: fmt.Sprintf("cap-%d", n), ThreadID: th,
					Payload: domain.RecordCheckpoint{CheckpointID: c.ID, Status: domain.CheckpointMissing}}); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	for r := range runs {
		turn := fmt.Sprintf("u-%d", r)
		if r > 0 {
			n++
			if _, err := h.Dispatch(context.Background(), domain.Command{ID: fmt.Sprintf("m-%d", n), ThreadID: th,
				Payload: domain.DispatchMessage{Text: "next"}}); err != nil {
				b.Fatal(err)
			}
			ingest(sdk.RuntimeEvent{Kind: sdk.EventTurnStarted, ThreadRef: "pt-" + th, TurnRef: turn})
		} else {
			turn = "u-" + th
		}
		evs := []sdk.RuntimeEvent{{Kind: sdk.EventItemStarted, TurnRef: turn, ItemRef: turn + "/cmd", ItemKind: "command_execution", Title: "go test"}}
		for i := range 20 {
			evs = append(evs, sdk.RuntimeEvent{Kind: sdk.EventContentDelta, TurnRef: turn, ItemRef: turn + "/msg",
				ItemKind: sdk.ItemAssistantMessage, Text: fmt.Sprintf("word %d ", i)})
		}
		evs = append(evs, sdk.RuntimeEvent{Kind: sdk.EventItemCompleted, TurnRef: turn, ItemRef: turn + "/cmd"},
			sdk.RuntimeEvent{Kind: sdk.EventTurnTerminal, TurnRef: turn, Status: sdk.TurnCompleted})
		ingest(evs...)
		capture()
	}
	ingest(sdk.RuntimeEvent{Kind: sdk.EventRuntimeExited, Status: sdk.ExitExited})
	t, err := h.view(th)
	if err != nil {
		b.Fatal(err)
	}
	if t.Live() {
		b.Fatalf("thread %s is still in flight: its projection would stay in memory whatever follows it", th)
	}
	return t.Sequence
}

// liveHeap is the heap's live bytes and the goroutines' stacks, once
// collected.
func liveHeap() int64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc + m.StackInuse) // signed: a difference of two may be below zero
}

// heapOf is the live heap that what build returns holds: the mean of 8
// held at once, so that garbage the collector finds between the two
// readings (a few KiB) does not outweigh a small value.
func heapOf(build func() any) int64 {
	const n = 8
	before := liveHeap()
	held := make([]any, 0, n)
	for range n {
		held = append(held, build())
	}
	after := liveHeap()
	runtime.KeepAlive(held)
	return (after - before) / n
}
