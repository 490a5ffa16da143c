package orchestrator

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/baton-run/baton/host/internal/domain"
	"github.com/baton-run/baton/host/internal/eventlog"
	"github.com/baton-run/baton/host/internal/ids"
	"github.com/baton-run/baton/sdk"
)

// What a thread costs as its history grows. The data dirs hold one thread
// of 10 and one of 1,000 runs, recorded through the real commit path: each
// run a message of about 300 bytes, a provider turn with a command (its
// output in the item's detail) and an answer of 20 content deltas, and its
// checkpoint with two files. They are kept in the system's temp dir
// between runs of the benchmark (1,000 runs take a while to record).

// historyDataDir is a data dir holding thread "t" of runs runs, its
// provider session ended.
func historyDataDir(b *testing.B, runs int) string {
	b.Helper()
	dir := filepath.Join(os.TempDir(), fmt.Sprintf("baton-bench-history-layout%d-schema%d-%d", layoutVersion, projectionSchema, runs))
	if _, err := os.Stat(filepath.Join(dir, "complete")); err == nil {
		return dir
	}
	os.RemoveAll(dir)
	plugins, err := StubPlugins(filepath.Join(dir, "plugins"), "none")
	if err != nil {
		b.Fatal(err)
	}
	h, err := Open(Config{DataDir: dir, PluginDirs: []string{plugins}, IDs: ids.Seeded(11)})
	if err != nil {
		b.Fatal(err)
	}
	h.cancel() // the effects stay in the outbox: this test records their outcomes
	if err := recordHistory(h, "t", runs); err != nil {
		b.Fatal(err)
	}
	if err := h.ingestEvents("t", "s1", "exit", []sdk.RuntimeEvent{{Kind: sdk.EventRuntimeExited, Status: sdk.ExitExited}}); err != nil {
		b.Fatal(err)
	}
	// Settled, as a worker would have: a host that opens the data dir
	// finds nothing of the thread to do, and leaves it unloaded.
	pending, err := h.store.Outbox()
	if err != nil {
		b.Fatal(err)
	}
	for _, se := range pending {
		if err := h.store.EffectDone(eventlog.EffectRef{ThreadID: se.ThreadID, ID: se.ID}); err != nil {
			b.Fatal(err)
		}
	}
	if err := h.Close(); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "complete"), nil, 0o600); err != nil {
		b.Fatal(err)
	}
	return dir
}

// recordHistory commits runs runs on a new thread, each as a provider
// would make it.
func recordHistory(h *Host, th string, runs int) error {
	ctx := context.Background()
	n := 0
	do := func(p domain.CommandPayload) error {
		n++
		_, err := h.Dispatch(ctx, domain.Command{ID: fmt.Sprintf("c-%d", n), ThreadID: th, Payload: p})
		return err
	}
	ingest := func(evs ...sdk.RuntimeEvent) error {
		n++
		return h.ingestEvents(th, "s1", fmt.Sprintf("pev-%d", n), evs)
	}
	capture := func() error {
		t, err := h.view(th)
		if err != nil {
			return err
		}
		for _, c := range t.Checkpoints {
			if c.Status == domain.CheckpointCapturing {
				if err := do(domain.RecordCheckpoint{CheckpointID: c.ID, Status: domain.CheckpointReady,
					Commit: fmt.Sprintf("%040d", n), Files: []domain.FileChange{{Path: "pkg/store/store.go", Kind: "modified", Additions: 12, Deletions: 3},
						{Path: "pkg/store/store_test.go", Kind: "modified", Additions: 40, Deletions: 0}}}); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := do(domain.CreateThread{Provider: "none", Cwd: os.TempDir(), ProviderCommand: domain.ProviderCommand{Argv: []string{"x"}}}); err != nil {
		return err
	}
	if err := do(domain.RecordSessionOpened{SessionID: "s1", ThreadRef: "pt"}); err != nil {
		return err
	}
	ask := strings.Repeat("Explain the failing test in pkg/store and fix it, keeping the API. ", 4)
	for r := range runs {
		if err := do(domain.DispatchMessage{Text: fmt.Sprintf("%d: %s", r+1, ask)}); err != nil {
			return err
		}
		if err := capture(); err != nil { // the baseline, before the first run
			return err
		}
		turn := fmt.Sprintf("u%d", r+1)
		evs := []sdk.RuntimeEvent{{Kind: sdk.EventTurnStarted, ThreadRef: "pt", TurnRef: turn},
			{Kind: sdk.EventItemStarted, TurnRef: turn, ItemRef: turn + "/cmd", ItemKind: "command_execution", Title: "go test ./pkg/store/..."}}
		for i := range 20 {
			evs = append(evs, sdk.RuntimeEvent{Kind: sdk.EventContentDelta, TurnRef: turn, ItemRef: turn + "/msg",
				ItemKind: sdk.ItemAssistantMessage, Text: fmt.Sprintf("word %d of the answer, ", i)})
		}
		evs = append(evs, sdk.RuntimeEvent{Kind: sdk.EventItemCompleted, TurnRef: turn, ItemRef: turn + "/cmd",
			Detail: []byte(`{"exitCode":0,"aggregatedOutput":"ok  \tgithub.com/example/pkg/store\t0.412s\n"}`)},
			sdk.RuntimeEvent{Kind: sdk.EventItemCompleted, TurnRef: turn, ItemRef: turn + "/msg"},
			sdk.RuntimeEvent{Kind: sdk.EventTurnTerminal, TurnRef: turn, Status: sdk.TurnCompleted})
		if err := ingest(evs...); err != nil {
			return err
		}
		if err := capture(); err != nil {
			return err
		}
	}
	return nil
}

// BenchmarkThreadMemory: a thread of 10 and one of 1,000 runs, loaded.
//
//   - load: a host that has opened the data dir loads the thread (its
//     snapshot and the events after it; ns/op). thread-heap-KB is the heap the loaded
//     projection holds (the live heap after a collection, with it loaded,
//     less the same before), median of the iterations; snapshot-KB the
//     snapshot it was loaded from.
//   - rss: a fresh process (this test binary, as RSSHelper) opens the
//     data dir and loads the thread: RSS-MB is its resident set after,
//     thread-anon-MB what loading added to its anonymous pages (heap,
//     stacks), medians of the iterations.
//   - delta/decide: a content delta decided on a scratch copy of the
//     loaded thread, with a run of its own active: what the commit path
//     does in memory for each provider frame (ns/op, allocs/op).
//   - delta/commit: the same delta through the whole commit path (the
//     synced write included).
func BenchmarkThreadMemory(b *testing.B) {
	for _, runs := range []int{10, 1000} {
		b.Run(fmt.Sprintf("runs=%d", runs), func(b *testing.B) {
			dir := historyDataDir(b, runs)
			b.Run("load", func(b *testing.B) {
				var heaps []float64
				var snap int
				for b.Loop() {
					b.StopTimer() // only the load is timed
					h, err := Open(Config{DataDir: dir, PluginDirs: []string{filepath.Join(dir, "plugins")}})
					if err != nil {
						b.Fatal(err)
					}
					before := liveHeap()
					b.StartTimer()
					t, err := h.view("t")
					if err != nil {
						b.Fatal(err)
					}
					b.StopTimer()
					after := liveHeap()
					runtime.KeepAlive(t)
					heaps = append(heaps, float64(after-before)/1024)
					e := h.cache.acquire("t")
					snap = e.snapshotSize
					h.cache.release(e)
					if err := h.Close(); err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
				}
				b.ReportMetric(median(heaps), "thread-heap-KB")
				b.ReportMetric(float64(snap)/1024, "snapshot-KB")
			})
			b.Run("rss", func(b *testing.B) {
				var rss, anon []float64
				for b.Loop() {
					cmd := exec.Command(os.Args[0], "-test.run=^$")
					cmd.Env = append(os.Environ(), "BATON_RSS_HELPER="+dir, "BATON_RSS_THREAD=t")
					out, err := cmd.Output()
					if err != nil {
						b.Fatalf("rss helper: %v\n%s", err, out)
					}
					var idleRSS, idleAnon, loadedRSS, loadedAnon int
					if _, err := fmt.Sscanf(string(out), "%d %d %d %d", &idleRSS, &idleAnon, &loadedRSS, &loadedAnon); err != nil {
						b.Fatalf("rss helper said %q", out)
					}
					rss = append(rss, float64(loadedRSS)/1024)
					anon = append(anon, float64(loadedAnon-idleAnon)/1024)
				}
				b.ReportMetric(median(rss), "RSS-MB")
				b.ReportMetric(median(anon), "thread-anon-MB")
			})
			b.Run("delta", func(b *testing.B) {
				work := b.TempDir()
				if err := os.CopyFS(work, os.DirFS(dir)); err != nil {
					b.Fatal(err)
				}
				h := quietHost(b, Config{DataDir: work, PluginDirs: []string{filepath.Join(work, "plugins")}, IDs: ids.Seeded(12)})
				ctx := context.Background()
				for i, c := range []domain.CommandPayload{
					domain.RecordSessionOpened{SessionID: "s2", ThreadRef: "pt"},
					domain.DispatchMessage{Text: "one more"},
				} {
					if _, err := h.Dispatch(ctx, domain.Command{ID: fmt.Sprintf("more-%d", i), ThreadID: "t", Payload: c}); err != nil {
						b.Fatal(err)
					}
				}
				t, _ := h.view("t")
				for _, c := range t.Checkpoints {
					if c.Status == domain.CheckpointCapturing {
						b.Fatalf("checkpoint %s is still being captured", c.ID)
					}
				}
				if err := h.ingestEvents("t", "s2", "more-turn", []sdk.RuntimeEvent{{Kind: sdk.EventTurnStarted, ThreadRef: "pt", TurnRef: "last"}}); err != nil {
					b.Fatal(err)
				}
				delta := func(i int) sdk.RuntimeEvent {
					return sdk.RuntimeEvent{Kind: sdk.EventContentDelta, TurnRef: "last", ItemRef: fmt.Sprintf("a%d", i/100),
						ItemKind: sdk.ItemAssistantMessage, Text: "token "}
				}
				b.Run("decide", func(b *testing.B) {
					cur, _ := h.view("t")
					env := domain.Env{NewID: h.cfg.IDs.NewID}
					i := 0
					for b.Loop() {
						i++
						scratch := cur.Scratch()
						if _, err := domain.Decide(&scratch, domain.Command{ID: "d", ThreadID: "t",
							Payload: domain.IngestProviderEvent{SessionID: "s2", Event: delta(i)}}, env); err != nil {
							b.Fatal(err)
						}
					}
				})
				b.Run("commit", func(b *testing.B) {
					i := 0
					for b.Loop() {
						i++
						if err := h.ingestEvents("t", "s2", fmt.Sprintf("pev-delta-%d", i), []sdk.RuntimeEvent{delta(i)}); err != nil {
							b.Fatal(err)
						}
					}
				})
			})
		})
	}
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if n := len(s); n%2 == 0 {
		return (s[n/2-1] + s[n/2]) / 2
	} else {
		return s[n/2]
	}
}
