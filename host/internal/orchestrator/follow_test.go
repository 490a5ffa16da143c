package orchestrator_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-run/baton/host/internal/domain"
	"github.com/baton-run/baton/host/internal/orchestrator"
	"github.com/baton-run/baton/sdk/clock"
)

// A host embedded for a command arms a thread's waits while a client
// follows the thread or its unattended work goes on, and forgets the
// thread when neither holds: through the real codex plugin and the replay
// peer, two clients follow, one leaves (twice), the run hits its limit,
// the last client leaves during the wait, the wait still fires and the
// run completes, and then the host follows nothing; a client that follows
// the idle thread and leaves leaves nothing either.
func TestFollowedShrinksWhenFollowsEnd(t *testing.T) {
	e := &env{t: t, data: t.TempDir(), ws: t.TempDir(), seed: 1, clock: clock.NewFake(epoch), embedded: true}
	e.open()
	t.Cleanup(func() { e.host.Close() })
	const name = "codex/usage_limit_wait.ndjson"
	e.atCapture(name)
	id := e.createThreadWith("codex", name, domain.ApproveAccept)
	followed := func(when string, want ...string) {
		t.Helper()
		if want == nil {
			want = []string{}
		}
		if diff := cmp.Diff(want, orchestrator.Followed(e.host, id)); diff != "" {
			t.Fatalf("threads followed %s (-want +got):\n%s", when, diff)
		}
	}
	followed("before any client")
	first, err := e.host.Follow(id)
	if err != nil {
		t.Fatal(err)
	}
	second, err := e.host.Follow(id)
	if err != nil {
		t.Fatal(err)
	}
	first()
	first() // once is once
	followed("while the second client follows", id)

	e.setPolicy(id, domain.ContinuationPolicy{OnLimit: domain.OnLimitWait})
	e.dispatch(domain.Command{ID: "m1", ThreadID: id, Payload: domain.DispatchMessage{Text: messages(t, "codex/usage_limit_wait.messages")[0]}})
	th := e.waitFor(id, "the run to wait for the limit", func(t domain.Thread) bool { return t.NextWait() != nil })
	second()
	followed("after the last client left, during the wait", id)

	e.clock.Set(th.NextWait().At)
	e.waitFor(id, "the run to end", allRunsEnded(1))
	followed("once the continuation completed")
	wantEvents := []string{
		"run.started", "attempt.started initial codex",
		"run.limit_reached", "attempt.ended blocked", "wait.armed",
		"wait.ended fired", "attempt.started usage_limit_continuation codex",
		"run.ended completed",
	}
	if diff := cmp.Diff(wantEvents, e.loopEvents(id)); diff != "" {
		t.Fatalf("the run's story (-want +got):\n%s", diff)
	}

	// A client that follows the thread, now idle, and leaves.
	third, err := e.host.Follow(id)
	if err != nil {
		t.Fatal(err)
	}
	followed("while a third client follows", id)
	third()
	followed("after the third client left")
}
