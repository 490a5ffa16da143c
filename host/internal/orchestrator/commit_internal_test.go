package orchestrator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"

	"pgregory.net/rapid"

	"github.com/baton-run/baton/host/internal/domain"
	"github.com/baton-run/baton/host/internal/eventlog"
	"github.com/baton-run/baton/host/internal/ids"
	"github.com/baton-run/baton/sdk"
)

// The commit path under concurrency, as a property. Writers on several
// threads at once commit random client commands and provider event
// batches (the real host, the real Pebble log in a temp dir; the effects
// the commands call for stay in the outbox, so that the test alone drives
// what is committed), while a reader follows the log. Then:
//
//   - the log is gapless and no reader ever saw a sequence it could not
//     read, or an event its thread's projection did not show yet;
//   - each thread's events are in the order its commands were committed,
//     each command's events contiguous in the thread and ending at its
//     receipt's sequence;
//   - a command sent again returns its original receipt;
//   - every thread's live projection equals the one rebuilt from its
//     events, and the one loaded from its snapshot and the events after it.
func TestCommitProperty(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		nThreads := rapid.IntRange(1, 4).Draw(rt, "threads")
		plans := make([][]step, nThreads)
		for i := range plans {
			plans[i] = rapid.SliceOfN(rapid.Custom(drawStep), 1, 25).Draw(rt, fmt.Sprintf("plan%d", i))
		}
		snapshotBytes := rapid.SampledFrom([]int{1, 400, 1 << 20}).Draw(rt, "snapshotBytes")
		maxThreads := rapid.IntRange(1, 8).Draw(rt, "maxThreads")

		h, err := Open(Config{DataDir: t.TempDir(), PluginDirs: stubPlugins(t), IDs: ids.Seeded(1), SnapshotBytes: snapshotBytes, MaxThreads: maxThreads})
		if err != nil {
			rt.Fatal(err)
		}
		defer h.Close()
		h.cancel() // effects stay in the outbox: no plugin is started

		stop := make(chan struct{})
		readerErr := make(chan error, 1)
		go func() { readerErr <- follow(h, stop) }()

		logs := make([][]committed, nThreads)
		errs := make([]error, nThreads)
		var wg sync.WaitGroup
		for i := range nThreads {
			wg.Go(func() { logs[i], errs[i] = run(h, fmt.Sprintf("t%d", i), plans[i]) })
		}
		wg.Wait()
		close(stop)
		if err := <-readerErr; err != nil {
			rt.Fatal(err)
		}
		for _, err := range errs {
			if err != nil {
				rt.Fatal(err)
			}
		}

		all, err := h.store.After(0, 0)
		if err != nil {
			rt.Fatal(err)
		}
		for i, r := range all {
			if r.Sequence != uint64(i+1) {
				rt.Fatalf("event %d has sequence %d: the log has a gap", i+1, r.Sequence)
			}
		}
		for i := range nThreads {
			checkThread(rt, h, fmt.Sprintf("t%d", i), logs[i])
		}
	})
}

// step is one thing a writer does to its thread.
type step struct {
	op     string
	n      int
	status sdk.Status
}

func drawStep(t *rapid.T) step {
	return step{
		op:     rapid.SampledFrom([]string{"send", "send", "turn", "deltas", "deltas", "end", "capture", "interrupt", "again"}).Draw(t, "op"),
		n:      rapid.IntRange(1, 40).Draw(t, "n"),
		status: rapid.SampledFrom([]sdk.Status{sdk.TurnCompleted, sdk.TurnFailed, sdk.TurnInterrupted}).Draw(t, "status"),
	}
}

// committed is a command a writer committed, the receipt it got, and the
// thread's last event before and after it.
type committed struct {
	cmd           domain.Command
	rc            domain.Receipt
	before, after uint64
}

// run commits a plan on a thread: its creation, a provider session, then
// each step resolved against the thread as it is.
func run(h *Host, thread string, plan []step) ([]committed, error) {
	ctx := context.Background()
	var out []committed
	n := 0
	seq := func() uint64 {
		t, err := h.view(thread)
		if err != nil {
			return 0
		}
		return t.Sequence
	}
	send := func(p domain.CommandPayload) error {
		n++
		before := seq()
		cmd := domain.Command{ID: fmt.Sprintf("%s-%d", thread, n), ThreadID: thread, Payload: p}
		rc, err := h.Dispatch(ctx, cmd)
		if err != nil {
			if errors.Is(err, domain.ErrConflict) || errors.Is(err, domain.ErrNotFound) {
				return nil // refused by the domain: nothing committed
			}
			return fmt.Errorf("%s: %w", cmd.ID, err)
		}
		out = append(out, committed{cmd: cmd, rc: rc, before: before, after: seq()})
		return nil
	}
	batch := func(evs ...sdk.RuntimeEvent) error {
		n++
		id := fmt.Sprintf("%s-%d", thread, n)
		before := seq()
		if err := h.ingestEvents(thread, "s1", id, evs); err != nil {
			return fmt.Errorf("%s: %w", id, err)
		}
		b, _, _ := h.store.Receipt(id)
		var rc domain.Receipt
		json.Unmarshal(b, &rc)
		out = append(out, committed{cmd: domain.Command{ID: id}, rc: rc, before: before, after: seq()})
		return nil
	}
	if err := send(domain.CreateThread{Provider: "none", Cwd: os.TempDir(), ProviderCommand: domain.ProviderCommand{Argv: []string{"x"}}}); err != nil {
		return nil, err
	}
	if err := send(domain.RecordSessionOpened{SessionID: "s1", ThreadRef: "pt"}); err != nil {
		return nil, err
	}
	turns := 0
	for i, st := range plan {
		t, err := h.view(thread)
		if err != nil {
			return nil, err
		}
		active := activeRun(t)
		var turn string
		if active != nil {
			for _, pt := range t.ProviderTurns {
				if pt.RunID == active.ID && pt.AttemptID == active.ActiveAttempt {
					turn = pt.ProviderRef
				}
			}
		}
		switch {
		case st.op == "send":
			err = send(domain.DispatchMessage{Text: fmt.Sprintf("message %d", i), Mode: domain.ModeQueueAfterActive})
		case st.op == "turn" && active != nil && turn == "":
			turns++
			err = batch(sdk.RuntimeEvent{Kind: sdk.EventTurnStarted, ThreadRef: "pt", TurnRef: fmt.Sprintf("u%d", turns)})
		case st.op == "deltas" && turn != "":
			evs := make([]sdk.RuntimeEvent, st.n)
			for j := range evs {
				evs[j] = sdk.RuntimeEvent{Kind: sdk.EventContentDelta, TurnRef: turn, ItemRef: fmt.Sprintf("a%d", i%3),
					ItemKind: sdk.ItemAssistantMessage, Text: fmt.Sprintf("d%d ", j)}
			}
			err = batch(evs...)
		case st.op == "end" && turn != "":
			err = batch(sdk.RuntimeEvent{Kind: sdk.EventItemCompleted, TurnRef: turn, ItemRef: fmt.Sprintf("a%d", i%3)},
				sdk.RuntimeEvent{Kind: sdk.EventTurnTerminal, TurnRef: turn, Status: st.status})
		case st.op == "capture":
			for _, c := range t.Checkpoints {
				if c.Status == domain.CheckpointCapturing {
					err = send(domain.RecordCheckpoint{CheckpointID: c.ID, Status: domain.CheckpointMissing, Reason: "not git"})
					break
				}
			}
		case st.op == "interrupt" && len(t.Runs) > 0:
			err = send(domain.InterruptRun{RunID: t.Runs[len(t.Runs)-1].ID})
		case st.op == "again" && len(out) > 0:
			// A command sent again returns its original receipt and
			// appends nothing.
			c := out[st.n%len(out)]
			if c.cmd.Payload == nil {
				break // a batch of provider events: its id is checked below
			}
			rc, err := h.Dispatch(ctx, c.cmd)
			if err != nil || rc != c.rc {
				return nil, fmt.Errorf("%s sent again: %+v %v, want the original %+v", c.cmd.ID, rc, err, c.rc)
			}
			if seq() != t.Sequence {
				return nil, fmt.Errorf("%s sent again changed the thread", c.cmd.ID)
			}
		}
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// follow reads the log as it grows until stop, checking that it never sees
// a gap, nor an event its thread's published projection does not show.
func follow(h *Host, stop <-chan struct{}) error {
	var after uint64
	for {
		_, changed := h.store.Last()
		recs, err := h.store.After(after, 0)
		if err != nil {
			return err
		}
		for _, r := range recs {
			if r.Sequence != after+1 {
				return fmt.Errorf("the reader saw %d after %d", r.Sequence, after)
			}
			after = r.Sequence
			e := h.cache.acquire(r.ThreadID)
			p := e.proj.Load()
			h.cache.release(e)
			if p != nil && p.Sequence < r.Sequence {
				return fmt.Errorf("event %d of %s was readable before its projection (at %d) showed it", r.Sequence, r.ThreadID, p.Sequence)
			}
		}
		select {
		case <-changed:
		case <-stop:
			return nil
		}
	}
}

// checkThread checks one thread's events against its commands, and its
// projections against each other.
func checkThread(rt *rapid.T, h *Host, thread string, log []committed) {
	recs, err := h.store.ThreadAfter(thread, 0, 0, 0)
	if err != nil {
		rt.Fatal(err)
	}
	var prev committed
	for k, c := range log {
		if k > 0 && c.before != prev.after {
			rt.Fatalf("%s: the thread was at %d before it, but at %d after the command before", c.cmd.ID, c.before, prev.after)
		}
		if c.rc.Sequence < prev.rc.Sequence {
			rt.Fatalf("%s: receipt at %d after one at %d", c.cmd.ID, c.rc.Sequence, prev.rc.Sequence)
		}
		i, j := indexSeq(recs, c.before), indexSeq(recs, c.after)
		if c.after > c.before {
			// Its events are the thread's after the ones before, in one
			// run of sequences, and its receipt names the last.
			if c.rc.Sequence != c.after || j <= i || recs[i+1].Sequence != c.after-uint64(j-i-1) {
				rt.Fatalf("%s: receipt at %d, events %d..%d of the thread (before %d, after %d)", c.cmd.ID, c.rc.Sequence,
					i+1, j, c.before, c.after)
			}
		} else if j != i {
			rt.Fatalf("%s: appended nothing, yet the thread has events after %d", c.cmd.ID, c.before)
		}
		b, ok, _ := h.store.Receipt(c.cmd.ID)
		var rc domain.Receipt
		if json.Unmarshal(b, &rc); !ok || rc.Sequence != c.rc.Sequence {
			rt.Fatalf("%s: stored receipt %s", c.cmd.ID, b)
		}
		prev = c
	}
	live, err := h.view(thread)
	if err != nil {
		rt.Fatal(err)
	}
	full := &domain.Thread{}
	for _, r := range recs {
		if err := apply(full, r); err != nil {
			rt.Fatal(err)
		}
	}
	loaded, _, err := h.loadThread(thread)
	if err != nil {
		rt.Fatal(err)
	}
	a, _ := json.Marshal(live)
	b, _ := json.Marshal(full)
	c, _ := json.Marshal(loaded)
	if string(a) != string(b) {
		rt.Fatalf("thread %s: the live projection differs from the log's\nlive: %s\nlog:  %s", thread, a, b)
	}
	if string(c) != string(b) {
		rt.Fatalf("thread %s: snapshot and tail differ from the log\nloaded: %s\nlog:    %s", thread, c, b)
	}
}

func indexSeq(recs []eventlog.Record, seq uint64) int {
	for i, r := range recs {
		if r.Sequence == seq {
			return i
		}
	}
	return -1
}

// Projections no one holds leave memory when more threads than the bound
// have been touched, the least recently used first; a thread in flight
// (here, a session open) stays. A thread that left is loaded again, equal.
func TestProjectionsLeaveMemory(t *testing.T) {
	h := quietHost(t, Config{IDs: ids.Seeded(3), MaxThreads: 2})
	ctx := context.Background()
	for i := range 5 {
		th := fmt.Sprintf("t%d", i)
		if _, err := h.Dispatch(ctx, domain.Command{ID: "c" + th, ThreadID: th, Payload: domain.CreateThread{Provider: "none", Cwd: os.TempDir(),
			ProviderCommand: domain.ProviderCommand{Argv: []string{"x"}}}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := h.Dispatch(ctx, domain.Command{ID: "o", ThreadID: "t0", Payload: domain.RecordSessionOpened{SessionID: "s"}}); err != nil {
		t.Fatal(err)
	}
	before, _ := json.Marshal(mustView(t, h, "t1"))
	for _, th := range []string{"t2", "t3", "t4"} {
		mustView(t, h, th)
	}
	h.cache.mu.Lock()
	var in []string
	for el := h.cache.lru.Front(); el != nil; el = el.Next() {
		in = append(in, el.Value.(*threadEntry).id)
	}
	h.cache.mu.Unlock()
	if fmt.Sprint(in) != "[t4 t0]" {
		t.Fatalf("threads in memory, most recent first: %v, want [t4 t0] (t0 has a session open)", in)
	}
	after, _ := json.Marshal(mustView(t, h, "t1"))
	if string(before) != string(after) {
		t.Fatalf("t1 loaded again differs:\n%s\n%s", before, after)
	}
}

// quietHost is a host on a temp data dir whose effects stay in the outbox:
// no plugin is started, so that the test alone drives what is committed.
func quietHost(tb testing.TB, cfg Config) *Host {
	tb.Helper()
	if cfg.DataDir == "" {
		cfg.DataDir = tb.TempDir()
	}
	if cfg.PluginDirs == nil {
		cfg.PluginDirs = stubPlugins(tb)
	}
	h, err := Open(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { h.Close() })
	h.cancel()
	return h
}

func mustView(t *testing.T, h *Host, id string) *domain.Thread {
	t.Helper()
	th, err := h.view(id)
	if err != nil {
		t.Fatal(err)
	}
	return th
}

// activeRun is the thread's run going (not waiting for a limit), if any.
func activeRun(t *domain.Thread) *domain.Run {
	for i := range t.Runs {
		if t.Runs[i].Status.Active() && t.Runs[i].WaitID == "" {
			return &t.Runs[i]
		}
	}
	return nil
}
