package orchestrator_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-run/baton/host/internal/domain"
	"github.com/baton-run/baton/host/internal/eventlog"
	"github.com/baton-run/baton/host/internal/jetstreamlog"
	"github.com/baton-run/baton/host/internal/natstest"
	"github.com/baton-run/baton/host/internal/orchestrator"
	"github.com/baton-run/baton/sdk/clock"
)

// sharedEnv is a host on an event log shared in JetStream (its replica in
// its data dir), as host name on installation "follow": it runs its own
// threads and follows the others'.
func sharedEnv(t *testing.T, urls, name string) *env {
	t.Helper()
	// Each host its own ids: seeded alike, two hosts would make the same.
	e := &env{t: t, data: t.TempDir(), ws: t.TempDir(), seed: 1 + 1000*uint64(name[0]), clock: clock.NewFake(epoch), hostName: name}
	e.openLog = func() (eventlog.Log, error) {
		return jetstreamlog.Open(t.Context(), jetstreamlog.Options{URLs: []string{urls}, Installation: "follow", Host: name,
			Dir: filepath.Join(e.data, "replica")})
	}
	e.open()
	t.Cleanup(func() {
		if e.host != nil {
			e.host.Close()
		}
	})
	return e
}

// A host shows what another commits as its owner shows it: a thread it
// had read before the run (cached, the run's events applied to it as they
// arrive) and one it reads only after (loaded from its replica) are the
// owner's projections, whole; its thread stream yields the owner's events
// in order, once each; and it takes no command for the owner's threads,
// naming the owner. (w is the owner, f the host that follows.)
func TestAHostShowsWhatAnotherCommits(t *testing.T) {
	nats := natstest.Single(t)
	w := sharedEnv(t, nats.URLs(), "w")
	f := sharedEnv(t, nats.URLs(), "f")
	w.gitWorkspace()

	created := w.dispatch(domain.Command{ID: "create-cached", Payload: domain.CreateThread{
		Provider: "acp", Cwd: w.ws, ProviderCommand: w.peer("acp", "acp/simple.ndjson")}})
	cached := created.ThreadID
	// Once the follower has followed the log through the receipt, it
	// shows the thread (a client that gave the command reads its write).
	if err := f.host.WaitFollowed(t.Context(), created.Sequence); err != nil {
		t.Fatal(err)
	}
	if _, err := f.host.Thread(cached); err != nil { // now in the follower's cache
		t.Fatalf("the follower, through the creation's receipt: %v", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	stream := f.host.ThreadStream(ctx, cached, 0)

	msgs := messages(t, "acp/simple.messages")
	w.dispatch(domain.Command{ID: "send-cached", ThreadID: cached, Payload: domain.DispatchMessage{Text: msgs[0]}})
	want := w.waitFor(cached, "the run's end on the writer", allRunsEnded(1))
	got := f.waitFor(cached, "the run's end on the follower", allRunsEnded(1))
	if d := cmp.Diff(want, got, ignoreUnexported); d != "" {
		t.Errorf("the cached thread on the follower (-writer +follower):\n%s", d)
	}
	wantEvents, err := w.host.ThreadEvents(cached, 0)
	if err != nil {
		t.Fatal(err)
	}
	var gotEvents []eventlog.Record
	for r, err := range stream {
		if err != nil {
			t.Fatal(err)
		}
		gotEvents = append(gotEvents, r)
		if r.Sequence == want.Sequence {
			break
		}
	}
	if d := cmp.Diff(wantEvents, gotEvents); d != "" {
		t.Errorf("the follower's thread stream (-writer's events +streamed):\n%s", d)
	}

	loaded := w.dispatch(domain.Command{ID: "create-loaded", Payload: domain.CreateThread{
		Provider: "acp", Cwd: w.ws, ProviderCommand: w.peer("acp", "acp/multi_turn.ndjson")}}).ThreadID
	turns := messages(t, "acp/multi_turn.messages")
	w.dispatch(domain.Command{ID: "send-loaded", ThreadID: loaded, Payload: domain.DispatchMessage{Text: turns[0]}})
	want = w.waitFor(loaded, "the run's end on the writer", allRunsEnded(1))
	f.waitSeen(loaded)
	got = f.waitFor(loaded, "the run's end on the follower", allRunsEnded(1))
	if d := cmp.Diff(want, got, ignoreUnexported); d != "" {
		t.Errorf("a thread the follower loads after its run (-writer +follower):\n%s", d)
	}

	_, err = f.host.Dispatch(t.Context(), domain.Command{ID: "send-f", ThreadID: loaded, Payload: domain.DispatchMessage{Text: turns[1]}})
	var elsewhere *orchestrator.OwnedElsewhereError
	if !errors.As(err, &elsewhere) || *elsewhere != (orchestrator.OwnedElsewhereError{Thread: loaded, Host: "w"}) {
		t.Errorf("a command for w's thread given to f: %v, want it refused as w's", err)
	}
}

// waitSeen waits until the host's log holds an event of the thread.
func (e *env) waitSeen(threadID string) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(e.t.Context(), time.Minute)
	defer cancel()
	for r, err := range e.host.Events(ctx, 0) {
		if err != nil {
			e.t.Fatalf("waiting for thread %s: %v", threadID, err)
		}
		if r.ThreadID == threadID {
			return
		}
	}
}
