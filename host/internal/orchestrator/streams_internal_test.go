package orchestrator

import (
	"context"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-run/baton/host/internal/domain"
	"github.com/baton-run/baton/host/internal/eventlog"
)

// A thread's stream holds a sequence, not the thread's projection: while
// a client follows a thread, the projection leaves memory like any other
// once MaxThreads others are touched, and the stream still yields the
// thread's next event (its thread's signal wakes it), and once the stream
// ends nothing of it is left.
func TestThreadStreamHoldsNoProjection(t *testing.T) {
	h, err := Open(Config{DataDir: t.TempDir(), PluginDirs: stubPlugins(t), MaxThreads: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	create := func(id string) {
		t.Helper()
		if _, err := h.Dispatch(ctx, domain.Command{ID: "create-" + id, ThreadID: id, Payload: domain.CreateThread{
			Provider: "none", Cwd: os.TempDir(), ProviderCommand: domain.ProviderCommand{Argv: []string{"x"}}}}); err != nil {
			t.Fatal(err)
		}
	}
	create("a")
	sctx, stop := context.WithCancel(ctx)
	recs := make(chan eventlog.Record)
	ended := make(chan error, 1)
	go func() {
		defer close(recs)
		for r, err := range h.ThreadStream(sctx, "a", 0) {
			if err != nil {
				ended <- err
				return
			}
			recs <- r
		}
	}()
	next := func(what string) string {
		t.Helper()
		select {
		case r := <-recs:
			return fmt.Sprintf("%d %s %s", r.Sequence, r.ThreadID, r.Type)
		case err := <-ended:
			t.Fatalf("the stream ended before %s: %v", what, err)
		case <-ctx.Done():
			t.Fatalf("no %s on the stream", what)
		}
		return ""
	}
	got := []string{next("a's creation")}
	for _, id := range []string{"b", "c", "d"} {
		create(id)
	}
	if cached := h.cachedThreads(); slices.Contains(cached, "a") {
		t.Fatalf("thread a stays in memory while its stream follows it (cached: %v, MaxThreads 2)", cached)
	}
	rc, err := h.Dispatch(ctx, domain.Command{ID: "policy-a", ThreadID: "a", Payload: domain.SetPolicy{
		Policy: domain.ContinuationPolicy{OnLimit: domain.OnLimitWait}}})
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, next("a's policy"))
	want := []string{"1 a thread.created", fmt.Sprintf("%d a %s", rc.Sequence, domain.PolicySet{}.EventType())}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("thread a's stream (-committed +streamed):\n%s", diff)
	}
	stop()
	for range recs { // the stream ends
	}
	h.signals.mu.Lock()
	left := len(h.signals.m)
	h.signals.mu.Unlock()
	if left != 0 {
		t.Errorf("%d threads' signals are left after their streams ended", left)
	}
}

// cachedThreads lists the threads whose projections are in memory.
func (h *Host) cachedThreads() []string {
	h.cache.mu.Lock()
	defer h.cache.mu.Unlock()
	var ids []string
	for id, e := range h.cache.entries {
		if e.proj.Load() != nil {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}
