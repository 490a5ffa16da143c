package orchestrator

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/baton-run/baton/host/internal/domain"
	"github.com/baton-run/baton/host/internal/eventlog"
	"github.com/baton-run/baton/host/internal/ids"
	"github.com/baton-run/baton/sdk"
)

// Start cost and write cost at scale. The data dirs are made by the real
// commit path, as a host records a thread's run: created, a session, a
// message, the baseline checkpoint, the provider's turn (80 content deltas
// of an answer), its checkpoint, the session's end; about 100 events per
// thread, every effect settled as the worker would, the host closed. They
// are kept in the system's temp dir between runs (generating 10,000
// threads takes a while).

// benchDataDir returns a data dir holding threads recorded threads.
func benchDataDir(b *testing.B, threads int) string {
	b.Helper()
	dir := filepath.Join(os.TempDir(), fmt.Sprintf("baton-bench-layout%d-schema%d-%d", layoutVersion, projectionSchema, threads))
	// Its threads' provider is installed (a stub, never started: their
	// effects are settled by hand), also in a dir an older run made.
	plugins := filepath.Join(dir, "plugins")
	if _, err := os.Stat(filepath.Join(dir, "complete")); err == nil {
		if _, err := StubPlugins(plugins, "acp"); err != nil {
			b.Fatal(err)
		}
		return dir
	}
	os.RemoveAll(dir)
	if _, err := StubPlugins(plugins, "acp"); err != nil {
		b.Fatal(err)
	}
	h, err := Open(Config{DataDir: dir, PluginDirs: []string{plugins}, IDs: ids.Seeded(42)})
	if err != nil {
		b.Fatal(err)
	}
	h.cancel() // the effects are settled below, as a worker would
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= threads {
					return
				}
				if err := recordThread(h, fmt.Sprintf("thr_%06d", i)); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		b.Fatal(err)
	}
	if err := h.Close(); err != nil {
		b.Fatal(err)
	}
	// Settled, as a store that has been in use for a while is.
	s, err := eventlog.Open(filepath.Join(dir, "events"), nil)
	if err != nil {
		b.Fatal(err)
	}
	if err := s.Compact(context.Background()); err != nil {
		b.Fatal(err)
	}
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "complete"), nil, 0o600); err != nil {
		b.Fatal(err)
	}
	return dir
}

// recordThread commits one thread's run, settling each effect with the
// command that records its outcome.
func recordThread(h *Host, thread string) error {
	ctx := context.Background()
	n := 0
	do := func(p domain.CommandPayload, done ...eventlog.EffectRef) error {
		n++
		_, err := h.dispatch(ctx, domain.Command{ID: fmt.Sprintf("%s-%d", thread, n), ThreadID: thread, Payload: p}, done)
		return err
	}
	// pending are the thread's effects in the outbox, by type.
	pending := func() (map[domain.EffectType]domain.Effect, error) {
		out, err := h.store.Outbox()
		if err != nil {
			return nil, err
		}
		m := map[domain.EffectType]domain.Effect{}
		for _, se := range out {
			if se.ThreadID == thread {
				e, err := domain.DecodeEffect(se.Data)
				if err != nil {
					return nil, err
				}
				m[e.EffectType()] = domain.Stored(e, se.ThreadID, se.ID)
			}
		}
		return m, nil
	}
	ref := func(e domain.Effect) eventlog.EffectRef { return eventlog.EffectRef{ThreadID: thread, ID: e.Head().ID} }
	capture := func() error {
		eff, err := pending()
		if err != nil {
			return err
		}
		c := eff[domain.EffectCapture].(domain.CaptureCheckpoint)
		return do(domain.RecordCheckpoint{CheckpointID: c.CheckpointID, Status: domain.CheckpointReady, Commit: "0123456789abcdef0123456789abcdef01234567",
			Files: []domain.FileChange{{Path: "main.go", Kind: "modified", Additions: 3, Deletions: 1}}}, ref(c))
	}
	if err := do(domain.CreateThread{Provider: "acp", Cwd: os.TempDir(), ProviderCommand: domain.ProviderCommand{Argv: []string{"claude-code-acp"}}}); err != nil {
		return err
	}
	if err := do(domain.RecordSessionOpened{SessionID: "ses_" + thread, ThreadRef: "pt-" + thread}); err != nil {
		return err
	}
	if err := do(domain.DispatchMessage{Text: "Explain the failing test in pkg/store and fix it."}); err != nil {
		return err
	}
	if err := capture(); err != nil {
		return err
	}
	eff, err := pending()
	if err != nil {
		return err
	}
	st := eff[domain.EffectStartTurn].(domain.StartTurn)
	if err := do(domain.RecordTurnDispatched{RunID: st.RunID, AttemptID: st.AttemptID, SessionID: "ses_" + thread}, ref(st)); err != nil {
		return err
	}
	evs := []sdk.RuntimeEvent{{Kind: sdk.EventTurnStarted, ThreadRef: "pt-" + thread, TurnRef: "turn-1", ClientTurnID: st.AttemptID}}
	for i := range 80 {
		evs = append(evs, sdk.RuntimeEvent{Kind: sdk.EventContentDelta, TurnRef: "turn-1", ItemRef: "msg-1",
			ItemKind: sdk.ItemAssistantMessage, Text: fmt.Sprintf("token %d of the answer ", i)})
	}
	evs = append(evs, sdk.RuntimeEvent{Kind: sdk.EventItemCompleted, TurnRef: "turn-1", ItemRef: "msg-1"},
		sdk.RuntimeEvent{Kind: sdk.EventTurnTerminal, TurnRef: "turn-1", Status: sdk.TurnCompleted, Title: "end_turn"})
	n++
	if err := h.ingestEvents(thread, "ses_"+thread, fmt.Sprintf("%s-%d", thread, n), evs); err != nil {
		return err
	}
	if err := capture(); err != nil {
		return err
	}
	n++
	return h.ingestEvents(thread, "ses_"+thread, fmt.Sprintf("%s-%d", thread, n), []sdk.RuntimeEvent{
		{Kind: sdk.EventRuntimeExited, Status: sdk.ExitExited}})
}

// BenchmarkOpen measures a host's start on data dirs of 0, 1,000 and
// 10,000 recorded threads (about 100,000 and 1,000,000 events): open, then
// the first command (the close after it is not timed). "new" creates a thread; "touch" commits a
// command on one of the recorded threads, whose projection is loaded from
// its snapshot first. The empty data dir is the baseline: start cost must
// not grow with the log.
func BenchmarkOpen(b *testing.B) {
	for _, threads := range []int{0, 1000, 10000} {
		b.Run(fmt.Sprintf("threads=%d", threads), func(b *testing.B) {
			dir := benchDataDir(b, threads)
			for _, first := range []string{"new", "touch"} {
				if threads == 0 && first == "touch" {
					continue
				}
				b.Run(first, func(b *testing.B) {
					i := 0
					for b.Loop() {
						i++
						h, err := Open(Config{DataDir: dir, PluginDirs: []string{filepath.Join(dir, "plugins")}})
						if err != nil {
							b.Fatal(err)
						}
						var cmd domain.Command
						if first == "new" {
							cmd = domain.Command{ID: fmt.Sprintf("bench-%s", h.cfg.IDs.NewID("c")), Payload: domain.CreateThread{
								Provider: "acp", Cwd: os.TempDir(), ProviderCommand: domain.ProviderCommand{Argv: []string{"x"}}}}
						} else {
							th := fmt.Sprintf("thr_%06d", (i*7919)%threads)
							t, err := h.Thread(th)
							if err != nil {
								b.Fatal(err)
							}
							cmd = domain.Command{ID: h.cfg.IDs.NewID("c"), ThreadID: th, Payload: domain.RecordCheckpoint{
								CheckpointID: t.Checkpoints[0].ID, Status: domain.CheckpointReady}}
						}
						if _, err := h.Dispatch(context.Background(), cmd); err != nil {
							b.Fatal(err)
						}
						// Not timed: a close waits for Pebble's background work
						// (in a small store, a compaction into its one level).
						b.StopTimer()
						if err := h.Close(); err != nil {
							b.Fatal(err)
						}
						b.StartTimer()
					}
				})
			}
		})
	}
}

// BenchmarkParallelCommit: eight threads commit at once through the whole
// commit path (receipt check, decide on a scratch thread, append, publish):
// a provider's delta each. ns/op is per commit; compare with the event
// log's and raw Pebble's BenchmarkParallelAppend.
func BenchmarkParallelCommit(b *testing.B) {
	for _, writers := range []int{1, 8} {
		b.Run(fmt.Sprintf("threads=%d", writers), func(b *testing.B) {
			h := quietHost(b, Config{IDs: ids.Seeded(7)})
			for w := range writers {
				startTurn(b, h, fmt.Sprintf("t%d", w))
			}
			var next atomic.Int64
			var wg sync.WaitGroup
			b.ResetTimer()
			for w := range writers {
				wg.Go(func() {
					th := fmt.Sprintf("t%d", w)
					for {
						i := next.Add(1)
						if i > int64(b.N) {
							return
						}
						if err := h.ingestEvents(th, "s1", fmt.Sprintf("pev-%d", i), []sdk.RuntimeEvent{{Kind: sdk.EventContentDelta,
							TurnRef: "u-" + th, ItemRef: fmt.Sprintf("a%d", i/100), ItemKind: sdk.ItemAssistantMessage, Text: "token "}}); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
		})
	}
}

// startTurn makes a thread with a run whose provider turn has started.
func startTurn(b *testing.B, h *Host, th string) {
	ctx := context.Background()
	for _, c := range []domain.Command{
		{ID: "c-" + th, ThreadID: th, Payload: domain.CreateThread{Provider: "none", Cwd: os.TempDir(), ProviderCommand: domain.ProviderCommand{Argv: []string{"x"}}}},
		{ID: "o-" + th, ThreadID: th, Payload: domain.RecordSessionOpened{SessionID: "s1", ThreadRef: "pt-" + th}},
		{ID: "m-" + th, ThreadID: th, Payload: domain.DispatchMessage{Text: "go"}},
	} {
		if _, err := h.Dispatch(ctx, c); err != nil {
			b.Fatal(err)
		}
	}
	if err := h.ingestEvents(th, "s1", "ts-"+th, []sdk.RuntimeEvent{{Kind: sdk.EventTurnStarted, ThreadRef: "pt-" + th, TurnRef: "u-" + th}}); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkMessageGrowth: deltas ingested into one message of 1,000 and
// of 10,000 deltas, in batches of 64 (as the pump does when they come
// faster than the disk syncs). ns/op is per delta: the cost of a delta
// must not grow with the length of the message so far. deltas/s is the
// host's commit path fed batches (a batch's deltas to one message are one
// event: domain.Coalesce).
func BenchmarkMessageGrowth(b *testing.B) {
	for _, size := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("deltas=%d", size), func(b *testing.B) {
			h := quietHost(b, Config{IDs: ids.Seeded(7)})
			startTurn(b, h, "t")
			batch := make([]sdk.RuntimeEvent, 0, 64)
			b.ResetTimer()
			for i := range b.N {
				// One message of size deltas, then the next.
				batch = append(batch, sdk.RuntimeEvent{Kind: sdk.EventContentDelta, TurnRef: "u-t", ItemRef: fmt.Sprintf("a%d", i/size),
					ItemKind: sdk.ItemAssistantMessage, Text: "token "})
				if len(batch) == cap(batch) || i == b.N-1 {
					if err := h.ingestEvents("t", "s1", fmt.Sprintf("pev-%d", i), batch); err != nil {
						b.Fatal(err)
					}
					batch = batch[:0]
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "deltas/s")
		})
	}
}

// BenchmarkMemory measures resident memory: a host idle on an empty data
// dir, and on the data dir of 10,000 threads (1,000,000 events) none of
// which is touched; each is a fresh process (this test binary, as a
// helper: see rssHelper), so that nothing a test did before counts.
// RSS-MB is the process's resident set after open and a collection.
func BenchmarkMemory(b *testing.B) {
	for _, threads := range []int{0, 10000} {
		b.Run(fmt.Sprintf("idle/threads=%d", threads), func(b *testing.B) {
			dir := benchDataDir(b, threads)
			var rss, anon int
			for b.Loop() {
				cmd := exec.Command(os.Args[0], "-test.run=^$")
				cmd.Env = append(os.Environ(), "BATON_RSS_HELPER="+dir)
				out, err := cmd.Output()
				if err != nil {
					b.Fatalf("rss helper: %v\n%s", err, out)
				}
				if _, err := fmt.Sscanf(string(out), "%d %d", &rss, &anon); err != nil {
					b.Fatalf("rss helper said %q", out)
				}
			}
			b.ReportMetric(float64(rss)/1024, "RSS-MB")
			b.ReportMetric(float64(anon)/1024, "anon-MB")
		})
	}
}

// RSSHelper opens a host on dir, collects garbage, and prints its resident
// set size and the anonymous part of it (heap, stacks; the rest is the
// executable's pages), in kB: the host process BenchmarkMemory measures.
// (This test binary maps more code than baton does: measured beside it,
// baton's own figure is a few MB lower.) With $BATON_RSS_THREAD set it
// then loads that thread and prints the two again, on the same line: the
// host BenchmarkThreadMemory measures.
func RSSHelper(dir string) int {
	cfg, th := Config{DataDir: dir}, os.Getenv("BATON_RSS_THREAD")
	if th != "" {
		cfg.PluginDirs = []string{filepath.Join(dir, "plugins")} // its provider's
	}
	h, err := Open(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer h.Close()
	pid := os.Getpid()
	collect := func() string {
		runtime.GC()
		debug.FreeOSMemory()
		return fmt.Sprint(statusKB(pid, "VmRSS"), " ", statusKB(pid, "RssAnon"))
	}
	line := collect()
	if th != "" {
		t, err := h.view(th)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		line += " " + collect()
		runtime.KeepAlive(t)
	}
	fmt.Println(line)
	return 0
}

// ResidentKB is a process's resident set size in kB; 0 when it cannot be
// read.
func ResidentKB(pid int) int { return statusKB(pid, "VmRSS") }

// statusKB is a field of /proc/PID/status, in kB.
func statusKB(pid int, field string) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, field+":"); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			return n
		}
	}
	return 0
}

// BenchmarkThreadHistory: a delta committed on a thread with 10 and with
// 100 runs behind it (each with its messages, items, turns and
// checkpoints). ns/op is per delta, one commit each. A commit decides on a
// copy of the thread's projection, whose entries (not their texts) it
// copies: this is the one cost that follows a thread's own history.
func BenchmarkThreadHistory(b *testing.B) {
	for _, runs := range []int{10, 100} {
		b.Run(fmt.Sprintf("runs=%d", runs), func(b *testing.B) {
			h := quietHost(b, Config{IDs: ids.Seeded(7)})
			startTurn(b, h, "t")
			n := 0
			ingest := func(evs ...sdk.RuntimeEvent) {
				n++
				if err := h.ingestEvents("t", "s1", fmt.Sprintf("pev-%d", n), evs); err != nil {
					b.Fatal(err)
				}
			}
			capture := func() {
				t, _ := h.view("t")
				for _, c := range t.Checkpoints {
					if c.Status == domain.CheckpointCapturing {
						n++
						if _, err := h.Dispatch(context.Background(), domain.Command{ID: fmt.Sprintf("cap-%d", n), ThreadID: "t",
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
					if _, err := h.Dispatch(context.Background(), domain.Command{ID: fmt.Sprintf("m-%d", n), ThreadID: "t",
						Payload: domain.DispatchMessage{Text: "next"}}); err != nil {
						b.Fatal(err)
					}
					ingest(sdk.RuntimeEvent{Kind: sdk.EventTurnStarted, ThreadRef: "pt-t", TurnRef: turn})
				} else {
					turn = "u-t"
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
			n++
			if _, err := h.Dispatch(context.Background(), domain.Command{ID: fmt.Sprintf("m-%d", n), ThreadID: "t",
				Payload: domain.DispatchMessage{Text: "last"}}); err != nil {
				b.Fatal(err)
			}
			capture()
			ingest(sdk.RuntimeEvent{Kind: sdk.EventTurnStarted, ThreadRef: "pt-t", TurnRef: "last"})
			b.ResetTimer()
			for i := range b.N {
				ingest(sdk.RuntimeEvent{Kind: sdk.EventContentDelta, TurnRef: "last", ItemRef: fmt.Sprintf("a%d", i/100),
					ItemKind: sdk.ItemAssistantMessage, Text: "token "})
			}
		})
	}
}
