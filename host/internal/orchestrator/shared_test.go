package orchestrator_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-run/baton/host/internal/domain"
	"github.com/baton-run/baton/host/internal/eventlog"
	"github.com/baton-run/baton/host/internal/natstest"
	"github.com/baton-run/baton/host/internal/orchestrator"
	"github.com/baton-run/baton/host/internal/scenario"
)

// Two hosts on one shared log each run the threads made on them, at the
// same time. Each shows the other's thread whole, as its owner shows it;
// each run records the host that ran it; a command for a thread given to
// the host that does not own it is refused, naming the owner; and the log
// read through either host is the same gapless sequence.
func TestTwoHostsRunTheirOwnThreadsAtOnce(t *testing.T) {
	nats := natstest.Single(t)
	a := sharedEnv(t, nats.URLs(), "a")
	b := sharedEnv(t, nats.URLs(), "b")
	a.gitWorkspace()
	b.gitWorkspace()
	onA := a.createThread("acp", "acp/simple.ndjson")
	onB := b.createThread("acp", "acp/multi_turn.ndjson")
	simple, multi := messages(t, "acp/simple.messages"), messages(t, "acp/multi_turn.messages")
	a.dispatch(domain.Command{ID: "send-a", ThreadID: onA, Payload: domain.DispatchMessage{Text: simple[0]}})
	b.dispatch(domain.Command{ID: "send-b", ThreadID: onB, Payload: domain.DispatchMessage{Text: multi[0]}})

	wantA := a.waitFor(onA, "a's run's end on a", allRunsEnded(1))
	wantB := b.waitFor(onB, "b's run's end on b", allRunsEnded(1))
	for _, th := range []domain.Thread{wantA, wantB} {
		if th.Runs[0].Status != domain.RunStatusCompleted {
			t.Fatalf("thread %s's run: %s %+v", th.ID, th.Runs[0].Status, th.Runs[0].Failure)
		}
	}
	if got := []string{wantA.Host, wantA.Runs[0].Host, wantB.Host, wantB.Runs[0].Host}; !slices.Equal(got, []string{"a", "a", "b", "b"}) {
		t.Errorf("the threads' hosts and their runs' (a's thread, its run, b's, its run): %q", got)
	}
	b.waitSeen(onA)
	a.waitSeen(onB)
	if d := cmp.Diff(wantA, b.waitFor(onA, "a's run's end on b", allRunsEnded(1)), ignoreUnexported); d != "" {
		t.Errorf("a's thread shown by b (-a +b):\n%s", d)
	}
	if d := cmp.Diff(wantB, a.waitFor(onB, "b's run's end on a", allRunsEnded(1)), ignoreUnexported); d != "" {
		t.Errorf("b's thread shown by a (-b +a):\n%s", d)
	}
	for _, c := range []struct {
		on     *env
		thread string
		owner  string
	}{{a, onA, "a"}, {b, onA, "a"}, {a, onB, "b"}, {b, onB, "b"}} {
		if got, err := c.on.host.Owner(c.thread); got != c.owner || err != nil {
			t.Errorf("thread %s's owner, asked of a host: %q, %v; want %q", c.thread, got, err, c.owner)
		}
	}

	_, err := b.host.Dispatch(t.Context(), domain.Command{ID: "send-a-on-b", ThreadID: onA, Payload: domain.DispatchMessage{Text: simple[0]}})
	var elsewhere *orchestrator.OwnedElsewhereError
	if !errors.As(err, &elsewhere) || *elsewhere != (orchestrator.OwnedElsewhereError{Thread: onA, Host: "a"}) {
		t.Errorf("a command for a's thread given to b: %v; want it refused as a's", err)
	}

	last := max(wantA.Sequence, wantB.Sequence)
	throughA, throughB := logUpTo(t, a, last), logUpTo(t, b, last)
	if d := cmp.Diff(throughA, throughB); d != "" {
		t.Errorf("the log through a and through b (-a +b):\n%s", d)
	}
	for i, r := range throughA {
		if r.Sequence != uint64(i+1) {
			t.Fatalf("the shared log's event %d has sequence %d: not one gapless sequence", i, r.Sequence)
		}
	}
}

// logUpTo is the log through a host, from its start up to seq.
func logUpTo(t *testing.T, e *env, seq uint64) []eventlog.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	var out []eventlog.Record
	for r, err := range e.host.Events(ctx, 0) {
		if err != nil {
			t.Fatalf("read the log through a host: %v", err)
		}
		out = append(out, r)
		if r.Sequence >= seq {
			break
		}
	}
	return out
}

// The coordinating host takes over a lost host's threads. Host a has two
// threads, each with a run in flight and one queued. The one whose cwd
// every host shares becomes b's: a can no longer command it, its run in
// flight ends host_lost, and its queued run runs on b. The other is
// marked lost, so that it shows where its cwd is; its queued run waits,
// and when a comes back it takes the thread back and runs it.
func TestTheCoordinatorTakesOverALostHostsThreads(t *testing.T) {
	nats := natstest.Single(t)
	a := sharedEnv(t, nats.URLs(), "a")
	b := sharedEnv(t, nats.URLs(), "b")
	a.gitWorkspace()
	start := func(name string, shared bool) string {
		rc := a.dispatch(domain.Command{ID: "create-" + name, Payload: domain.CreateThread{Provider: "acp", Cwd: a.ws, SharedCwd: shared,
			ProviderCommand: a.peer("acp", "acp/restart_queued.ndjson")}})
		a.dispatch(domain.Command{ID: "send-" + name, ThreadID: rc.ThreadID, Payload: domain.DispatchMessage{Text: "Take your time"}})
		if err := scenario.Wait(t.Context(), scenario.Host(a.host), rc.ThreadID, scenario.WaitRunning); err != nil {
			t.Fatal(err)
		}
		a.dispatch(domain.Command{ID: "queue-" + name, ThreadID: rc.ThreadID, Payload: domain.DispatchMessage{Text: "Then finish", Mode: domain.ModeQueueAfterActive}})
		return rc.ThreadID
	}
	shared, own := start("shared", true), start("own", false)
	b.waitSeen(own)

	if err := b.host.TakeOver(t.Context(), func(h string) bool { return h == "a" }); err != nil {
		t.Fatal(err)
	}
	_, err := a.host.Dispatch(t.Context(), domain.Command{ID: "send-shared-on-a", ThreadID: shared, Payload: domain.DispatchMessage{Text: "more"}})
	if !errors.Is(err, orchestrator.ErrOwnedElsewhere) {
		t.Errorf("a command for the thread b took, given to a: %v; want it refused as b's", err)
	}
	marked := b.waitFor(own, "the thread marked lost", func(th domain.Thread) bool { return th.HostLost != nil })
	if want := (domain.HostLost{Host: "a", At: epoch}); *marked.HostLost != want || marked.Host != "a" {
		t.Errorf("the thread whose cwd is a's: host %q, lost %+v; want a's, lost %+v", marked.Host, *marked.HostLost, want)
	}
	// a stops at once: its provider processes end with it.
	a.host.Halt()
	if err := a.host.Close(); err != nil {
		t.Logf("close a: %v", err)
	}
	a.host = nil

	took := b.waitFor(shared, "the queued run's end on b", allRunsEnded(2))
	if d := cmp.Diff([]string{
		"run 1 started", "session opened (resume \"\": false)",
		"session ended: host a was lost while this was in progress; host b took over",
		`run 1 ended failed "" host_lost`,
		"queued runs resumed [2]: they were queued when the host stopped",
		"run 2 started", "session opened (resume \"sess_first\": false)", `run 2 ended completed "end_turn" `,
	}, b.lifecycle(shared, 0)); d != "" {
		t.Errorf("the shared thread's runs and sessions (-want +got):\n%s", d)
	}
	if got := []string{took.Host, took.Runs[0].Host, took.Runs[1].Host}; !slices.Equal(got, []string{"b", "a", "b"}) {
		t.Errorf("the taken thread's host, and its runs': %q, want b; a, b", got)
	}
	if th := mustThread(t, b, own); th.Summary().Queued != 1 || th.Host != "a" {
		t.Errorf("the thread whose cwd is a's, on b: host %q, %d queued; want a's, its run still queued", th.Host, th.Summary().Queued)
	}

	a.open() // a comes back
	back := a.waitFor(own, "the queued run's end on a", allRunsEnded(2))
	if back.HostLost != nil || back.Host != "a" || back.Runs[1].Status != domain.RunStatusCompleted || back.Runs[1].Host != "a" {
		t.Errorf("the thread a took back: host %q, lost %+v, run 2 %s on %q", back.Host, back.HostLost, back.Runs[1].Status, back.Runs[1].Host)
	}
}
