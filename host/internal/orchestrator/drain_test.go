package orchestrator_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/go-hclog"

	"github.com/baton-run/baton/host/internal/domain"
	"github.com/baton-run/baton/host/internal/orchestrator"
	"github.com/baton-run/baton/host/internal/scenario"
	"github.com/baton-run/baton/sdk/clock"
	"github.com/baton-run/baton/sdk/plugintest"
)

// lifecycle is the thread's stored run and session events after a
// sequence, each as a line: what a reader needs to see the order in which
// runs started and ended and sessions opened and closed.
func (e *env) lifecycle(threadID string, after uint64) []string {
	e.t.Helper()
	th := mustThread(e.t, e, threadID)
	ordinal := map[string]int{}
	for _, r := range th.Runs {
		ordinal[r.ID] = r.Ordinal
	}
	recs, err := e.host.ThreadEvents(threadID, after)
	if err != nil {
		e.t.Fatal(err)
	}
	var out []string
	for _, r := range recs {
		p, err := domain.DecodePayload(r.Type, r.Data)
		if err != nil {
			e.t.Fatal(err)
		}
		switch p := p.(type) {
		case domain.RunStarted:
			out = append(out, fmt.Sprintf("run %d started", ordinal[p.RunID]))
		case domain.RunEnded:
			var code string
			if p.Failure != nil {
				code = p.Failure.Code
			}
			out = append(out, fmt.Sprintf("run %d ended %s %q %s", ordinal[p.RunID], p.Status, p.StopReason, code))
		case domain.SessionOpened:
			out = append(out, fmt.Sprintf("session opened (resume %q: %v)", p.ResumeRequested, p.Resumed))
		case domain.SessionEnded:
			out = append(out, fmt.Sprintf("session ended: %s", p.Reason))
		case domain.QueuedRunsResumed:
			var runs []int
			for _, r := range p.Runs {
				runs = append(runs, r.Ordinal)
			}
			out = append(out, fmt.Sprintf("queued runs resumed %v: %s", runs, p.Reason))
		}
	}
	return out
}

// An idle provider session is closed after IdleTimeout on the host's
// clock, its end recorded with the reason idle after the run's end, and
// its provider process stops; the thread's next message opens a session
// that resumes the provider's conversation, and the run completes.
func TestIdleSessionIsClosedAndTheNextRunResumes(t *testing.T) {
	const idle = 10 * time.Minute
	e := &env{t: t, data: t.TempDir(), ws: t.TempDir(), seed: 1, clock: clock.NewFake(epoch), idle: idle}
	e.open()
	t.Cleanup(func() {
		if e.host != nil {
			e.host.Close()
		}
	})
	threadID := e.createThread("acp", "acp/resume.ndjson")
	groups := plugintest.ReadGroups(t, filepath.Join(root, "testdata", "acp/resume.messages"))
	want := assistantTexts(t, "acp/resume.ndjson")
	e.dispatch(domain.Command{ID: "send-1", ThreadID: threadID, Payload: domain.DispatchMessage{Text: groups[0][0]}})
	th := e.waitFor(threadID, "run 1 to end", allRunsEnded(1))
	ended := th.Sequence
	s := th.ProviderSessions[0]
	provider := plugintest.Pidfd(t, s.ProviderPid)
	ctx, cancel := context.WithTimeout(t.Context(), hangGuard)
	defer cancel()
	if err := e.clock.WaitTimers(ctx, 1); err != nil {
		t.Fatalf("no idle timer on the host's clock: %v", err)
	}
	if diff := cmp.Diff([]time.Duration{idle}, e.clock.Pending()); diff != "" {
		t.Fatalf("pending timers (-want +got):\n%s", diff)
	}
	e.clock.Advance(idle - time.Nanosecond)
	if got := mustThread(t, e, threadID).ProviderSessions[0]; got.Status != domain.SessionStatusOpen {
		t.Fatalf("the session closed before its idle time was up: %+v", got)
	}
	e.clock.Advance(time.Nanosecond)
	e.waitFor(threadID, "the idle session to close", func(th domain.Thread) bool {
		return th.ProviderSessions[0].Status == domain.SessionStatusEnded
	})
	if !plugintest.Exited(t, provider, hangGuard) {
		t.Fatalf("the provider process (pid %d) outlived its idle session", s.ProviderPid)
	}
	if diff := cmp.Diff([]string{"session ended: idle"}, e.lifecycle(threadID, ended)); diff != "" {
		t.Errorf("events after run 1 ended (-want +got):\n%s", diff)
	}
	before := e.host.LastSequence()
	e.dispatch(domain.Command{ID: "send-2", ThreadID: threadID, Payload: domain.DispatchMessage{Text: groups[1][0]}})
	th = e.waitFor(threadID, "run 2 to end", allRunsEnded(2))
	root := th.ProviderThreads[0].ProviderRef
	if diff := cmp.Diff([]string{"run 2 started", fmt.Sprintf("session opened (resume %q: true)", root), `run 2 ended completed "end_turn" `},
		e.lifecycle(threadID, before)); diff != "" {
		t.Errorf("events of run 2 (-want +got):\n%s", diff)
	}
	if got := assistantText(th, th.Runs[1].ID); got != want[1] {
		t.Errorf("run 2 text = %q, want %q (the resumed conversation's answer)", got, want[1])
	}
	if len(th.ProviderThreads) != 1 {
		t.Errorf("provider threads %+v; want the one resumed", th.ProviderThreads)
	}
}

// A session whose thread waits on a request is not closed, however long
// it waits: the reaper looks again an idle time later.
// The idle time counts from the session's last use: a run on it part way
// through puts its close off, and the timer, waking early, waits only the
// rest of the time.
func TestIdleTimeCountsFromTheLastUse(t *testing.T) {
	const idle = 10 * time.Minute
	e := &env{t: t, data: t.TempDir(), ws: t.TempDir(), seed: 1, clock: clock.NewFake(epoch), idle: idle}
	e.open()
	t.Cleanup(func() { e.host.Close() })
	threadID := e.createThread("acp", "acp/multi_turn.ndjson")
	msgs := messages(t, "acp/multi_turn.messages")
	ctx, cancel := context.WithTimeout(t.Context(), hangGuard)
	defer cancel()
	e.dispatch(domain.Command{ID: "send-1", ThreadID: threadID, Payload: domain.DispatchMessage{Text: msgs[0]}})
	e.waitFor(threadID, "run 1 to end", allRunsEnded(1))
	if err := e.clock.WaitTimers(ctx, 1); err != nil {
		t.Fatalf("no idle timer on the host's clock: %v", err)
	}
	e.clock.Advance(6 * time.Minute)
	e.dispatch(domain.Command{ID: "send-2", ThreadID: threadID, Payload: domain.DispatchMessage{Text: msgs[1]}})
	th := e.waitFor(threadID, "run 2 to end", allRunsEnded(2))
	ended := th.Sequence
	e.clock.Advance(4 * time.Minute) // 10 minutes after run 1, 4 after run 2: the timer wakes
	if err := e.clock.WaitTimers(ctx, 1); err != nil {
		t.Fatalf("the idle timer was not armed again: %v", err)
	}
	if diff := cmp.Diff([]time.Duration{6 * time.Minute}, e.clock.Pending()); diff != "" {
		t.Fatalf("pending timers after a use part way through (-want +got):\n%s", diff)
	}
	if got := mustThread(t, e, threadID).ProviderSessions[0].Status; got != domain.SessionStatusOpen {
		t.Fatalf("the session closed %v after its last use: %s", 4*time.Minute, got)
	}
	e.clock.Advance(6 * time.Minute)
	e.waitFor(threadID, "the idle session to close", func(th domain.Thread) bool {
		return th.ProviderSessions[0].Status == domain.SessionStatusEnded
	})
	if diff := cmp.Diff([]string{"session ended: idle"}, e.lifecycle(threadID, ended)); diff != "" {
		t.Errorf("events after run 2 ended (-want +got):\n%s", diff)
	}
}

func TestSessionWithAPendingRequestIsNotReaped(t *testing.T) {
	const idle = 10 * time.Minute
	e := &env{t: t, data: t.TempDir(), ws: t.TempDir(), seed: 1, clock: clock.NewFake(epoch), idle: idle}
	e.open()
	t.Cleanup(func() {
		if e.host != nil {
			e.host.Close()
		}
	})
	threadID := e.createThreadWith("acp", "acp/approval_accept.ndjson", domain.ApproveAsk)
	e.dispatch(domain.Command{ID: "send", ThreadID: threadID, Payload: domain.DispatchMessage{Text: "Write allowed.txt"}})
	if err := scenario.Wait(t.Context(), scenario.Host(e.host), threadID, scenario.WaitRequest); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), hangGuard)
	defer cancel()
	for range 3 {
		if err := e.clock.WaitTimers(ctx, 1); err != nil {
			t.Fatalf("no idle timer on the host's clock: %v", err)
		}
		if diff := cmp.Diff([]time.Duration{idle}, e.clock.Pending()); diff != "" {
			t.Fatalf("pending timers (-want +got):\n%s", diff)
		}
		e.clock.Advance(idle)
	}
	// The third look has been taken once the fourth timer is set.
	if err := e.clock.WaitTimers(ctx, 1); err != nil {
		t.Fatal(err)
	}
	th := mustThread(t, e, threadID)
	if s := th.ProviderSessions[0]; s.Status != domain.SessionStatusOpen || th.Requests[0].Status != domain.RequestStatusPending {
		t.Fatalf("after three idle times: session %+v, request %+v", s, th.Requests[0])
	}
	e.dispatch(domain.Command{ID: "allow", ThreadID: threadID, Payload: domain.RespondToRequest{RequestID: th.Requests[0].ID, Decision: "accept"}})
	if r := e.waitFor(threadID, "the run to end", allRunsEnded(1)).Runs[0]; r.Status != domain.RunStatusCompleted {
		t.Fatalf("run %s %+v", r.Status, r.Failure)
	}
}

// Close while a turn runs asks the provider to stop: its own terminal
// ends the run (here the agent answers session/cancel), the end is stored
// before the session's, the next host has nothing to reconcile, and
// neither the plugin nor the provider process is left.
func TestCloseStopsARunningTurn(t *testing.T) {
	e := newEnv(t)
	threadID := e.createThread("acp", "acp/turn_interrupt_late.ndjson")
	e.dispatch(domain.Command{ID: "send", ThreadID: threadID, Payload: domain.DispatchMessage{Text: "Write a very long essay about rivers."}})
	if err := scenario.Wait(t.Context(), scenario.Host(e.host), threadID, scenario.WaitRunning); err != nil {
		t.Fatal(err)
	}
	s := mustThread(t, e, threadID).ProviderSessions[0]
	plugin, provider := plugintest.Pidfd(t, s.PluginPid), plugintest.Pidfd(t, s.ProviderPid)
	if err := e.host.Close(); err != nil {
		t.Fatal(err)
	}
	e.host = nil
	checkExited(t, "Close", plugin, provider)
	e.open()
	if diff := cmp.Diff([]string{"run 1 started", "session opened (resume \"\": false)", `run 1 ended interrupted "cancelled" `, "session ended: closed"},
		e.lifecycle(threadID, 0)); diff != "" {
		t.Errorf("stored order (-want +got):\n%s", diff)
	}
	if types := e.types(threadID, 0); indexOf(types, "thread.recovered") >= 0 || indexOf(types, "effect.cancelled") >= 0 {
		t.Errorf("the next host reconciled the thread: %v", types)
	}
}

// Close while a turn runs whose provider does not stop: after
// DrainTimeout on the host's clock the host ends the run with its reason,
// closes the session, and no process is left.
func TestCloseEndsARunItsProviderDoesNotStop(t *testing.T) {
	e := newEnv(t)
	threadID, plugin, provider := e.stallingTurn()
	closed := make(chan error, 1)
	go func() { closed <- e.host.Close() }()
	ctx, cancel := context.WithTimeout(t.Context(), hangGuard)
	defer cancel()
	pending, err := waitBounds(ctx, e.clock, 1)
	if err != nil {
		t.Fatalf("Close set no bound on the host's clock: %v", err)
	}
	if diff := cmp.Diff([]time.Duration{orchestrator.DrainTimeout}, pending); diff != "" {
		t.Fatalf("pending timers while the run is asked to stop (-want +got):\n%s", diff)
	}
	e.clock.Advance(orchestrator.DrainTimeout)
	select {
	case err := <-closed:
		if err != nil {
			t.Fatal(err)
		}
	case <-ctx.Done():
		t.Fatal("Close still waits after the drain's bound")
	}
	e.host = nil
	checkExited(t, "Close", plugin, provider)
	e.open()
	got := e.lifecycle(threadID, 0)
	if diff := cmp.Diff([]string{"run 1 started", "session opened (resume \"\": false)",
		fmt.Sprintf("run 1 ended interrupted %q host_shut_down", orchestrator.ShutDownReason)}, got[:min(3, len(got))]); diff != "" {
		t.Errorf("stored order (-want +got):\n%s", diff)
	}
	if r := mustThread(t, e, threadID).Runs[0]; r.Status != domain.RunStatusInterrupted {
		t.Errorf("run after Close: %+v", r)
	}
}

// A host killed with a run active and one queued: the next host ends the
// active run with a reason and starts the queued one by itself, which
// completes on a new provider process.
func TestQueuedRunStartsAfterACrash(t *testing.T) {
	dir, ws, threadID := killedWithAQueuedRun(t)
	e := &env{t: t, data: dir, ws: ws, seed: 100, clock: clock.NewFake(epoch)}
	e.open()
	t.Cleanup(func() {
		if e.host != nil {
			e.host.Close()
		}
	})
	th := e.waitFor(threadID, "both runs to end", allRunsEnded(2))
	if diff := cmp.Diff([]string{"run 1 started", "session opened (resume \"\": false)",
		"session ended: the host restarted while this was in progress", `run 1 ended failed "" host_restarted`,
		"queued runs resumed [2]: " + domain.ResumeReason,
		"run 2 started", `session opened (resume "sess_one": false)`, `run 2 ended completed "end_turn" `}, e.lifecycle(threadID, 0)); diff != "" {
		t.Errorf("stored order (-want +got):\n%s", diff)
	}
	if got := assistantText(th, th.Runs[1].ID); got != "Second, done." {
		t.Errorf("run 2 text %q", got)
	}
	// The conversation could not be resumed: run 2's fresh one was told
	// run 1 (the peer checked the prompt).
	type handoff struct {
		Strategy domain.HandoffStrategy
		Runs     []int
		Fallback string
		Status   domain.HandoffStatus
		RunID    string
	}
	var got []handoff
	for _, h := range th.Handoffs {
		var runs []int
		for _, r := range h.Runs {
			runs = append(runs, r.Ordinal)
		}
		got = append(got, handoff{h.Strategy, runs, h.Fallback, h.Status, h.RunID})
	}
	want := []handoff{{domain.HandoffFullThreadSummary, []int{1}, "acp could not resume its conversation sess_one",
		domain.HandoffStatusConsumed, th.Runs[1].ID}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("handoffs (-want +got):\n%s", diff)
	}
}

// killedWithAQueuedRun runs the queued helper's host and kills it: a
// thread (its id) with a run in flight and one queued behind it
// (testdata/crash_queued.ndjson), in the data dir and workspace returned.
func killedWithAQueuedRun(t *testing.T) (dir, ws, threadID string) {
	dir, ws = t.TempDir(), t.TempDir()
	transcript, err := filepath.Abs("testdata/crash_queued.ndjson")
	if err != nil {
		t.Fatal(err)
	}
	argv := []string{peerBin, "--transcript", transcript, "--speed", "0", "--state", filepath.Join(t.TempDir(), "cursor")}
	b, _ := json.Marshal(queuedSetup{PluginDir: pluginDir, Cwd: ws, Argv: argv})
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "BATON_QUEUED_HELPER="+dir, "BATON_QUEUED_SETUP="+string(b))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	if !sc.Scan() {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatal("the helper host said nothing")
	}
	if _, err := fmt.Sscanf(sc.Text(), "ready %s", &threadID); err != nil {
		t.Fatalf("helper said %q", sc.Text())
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	return dir, ws, threadID
}

// A host embedded for one command ends what the killed host left in
// flight but starts none of the runs it left queued, so that a command
// that only reads the thread or cancels them sends nothing: the queued run
// waits, and CancelQueued ends it cancelled with its reason, with no
// provider process started for it.
func TestQueuedRunWaitsInAnEmbeddedHost(t *testing.T) {
	dir, ws, threadID := killedWithAQueuedRun(t)
	e := &env{t: t, data: dir, ws: ws, seed: 100, clock: clock.NewFake(epoch), embedded: true}
	e.open()
	t.Cleanup(func() { e.host.Close() })
	recovered := []string{"run 1 started", "session opened (resume \"\": false)",
		"session ended: the host restarted while this was in progress", `run 1 ended failed "" host_restarted`}
	if diff := cmp.Diff(recovered, e.lifecycle(threadID, 0)); diff != "" {
		t.Errorf("stored order after the open (-want +got):\n%s", diff)
	}
	e.dispatch(domain.Command{ID: "drop", ThreadID: threadID, Payload: domain.CancelQueued{Reason: "dropped by hand"}})
	th := mustThread(t, e, threadID)
	type run struct {
		Status     domain.RunStatus
		StopReason string
	}
	var got []run
	for _, r := range th.Runs {
		got = append(got, run{r.Status, r.StopReason})
	}
	if diff := cmp.Diff([]run{{domain.RunStatusFailed, ""}, {domain.RunStatusCancelled, "dropped by hand"}}, got); diff != "" {
		t.Errorf("runs (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(append(recovered, `run 2 ended cancelled "dropped by hand" `), e.lifecycle(threadID, 0)); diff != "" {
		t.Errorf("stored order after the cancel (-want +got):\n%s", diff)
	}
	if len(th.ProviderSessions) != 1 {
		t.Errorf("sessions: %+v; want only the killed host's", th.ProviderSessions)
	}
}

// queuedSetup is what the queued helper is given.
type queuedSetup struct {
	PluginDir string
	Cwd       string
	Argv      []string
}

// queuedHelper is the host TestQueuedRunStartsAfterACrash kills: a thread
// with a run whose provider is thinking and a run queued behind it. It
// prints "ready THREAD" and waits to be killed.
func queuedHelper(dir string) int {
	var setup queuedSetup
	if err := json.Unmarshal([]byte(os.Getenv("BATON_QUEUED_SETUP")), &setup); err != nil {
		fmt.Fprintln(os.Stderr, "queued helper:", err)
		return 1
	}
	h, err := orchestrator.Open(orchestrator.Config{DataDir: dir, PluginDirs: []string{setup.PluginDir},
		Logger: hclog.New(&hclog.LoggerOptions{Level: hclog.Warn, Output: os.Stderr})})
	if err != nil {
		fmt.Fprintln(os.Stderr, "queued helper:", err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rc, err := h.Dispatch(ctx, domain.Command{ID: "create", Payload: domain.CreateThread{Provider: "acp", Cwd: setup.Cwd,
		ProviderCommand: domain.ProviderCommand{Argv: setup.Argv}}})
	if err == nil {
		_, err = h.Dispatch(ctx, domain.Command{ID: "first", ThreadID: rc.ThreadID, Payload: domain.DispatchMessage{Text: "First"}})
	}
	if err == nil {
		err = thinking(ctx, h, rc.ThreadID)
	}
	if err == nil {
		_, err = h.Dispatch(ctx, domain.Command{ID: "second", ThreadID: rc.ThreadID, Payload: domain.DispatchMessage{Text: "Second", Mode: domain.ModeQueueAfterActive}})
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "queued helper:", err)
		return 1
	}
	fmt.Printf("ready %s\n", rc.ThreadID)
	<-ctx.Done() // killed before
	return 1
}

// thinking waits until the thread's provider has said something.
func thinking(ctx context.Context, h *orchestrator.Host, threadID string) error {
	for _, err := range h.Events(ctx, 0) {
		if err != nil {
			return err
		}
		if th, err := h.Thread(threadID); err == nil && len(th.TurnItems) > 0 {
			return nil
		}
	}
	return fmt.Errorf("the provider of %s said nothing: %w", threadID, ctx.Err())
}

// stallingTurn starts a turn whose provider runs until it is signalled
// (testdata/stall_until_signal.ndjson: its stdin closing does not end it)
// and returns once the provider is thinking, with pidfds of the session's
// plugin and provider processes.
func (e *env) stallingTurn() (threadID string, plugin, provider int) {
	e.t.Helper()
	transcript, err := filepath.Abs("testdata/stall_until_signal.ndjson")
	if err != nil {
		e.t.Fatal(err)
	}
	threadID = e.dispatch(domain.Command{ID: "create", Payload: domain.CreateThread{Provider: "acp", Cwd: e.ws,
		ProviderCommand: domain.ProviderCommand{Argv: []string{peerBin, "--transcript", transcript, "--speed", "0"}}}}).ThreadID
	e.dispatch(domain.Command{ID: "send", ThreadID: threadID, Payload: domain.DispatchMessage{Text: "Take your time"}})
	s := e.waitFor(threadID, "the provider to start thinking", func(th domain.Thread) bool { return len(th.TurnItems) > 0 }).ProviderSessions[0]
	return threadID, plugintest.Pidfd(e.t, s.PluginPid), plugintest.Pidfd(e.t, s.ProviderPid)
}

// checkExited fails the test for a plugin or provider process (a pidfd)
// that has not exited, having outlived what.
func checkExited(t *testing.T, what string, plugin, provider int) {
	t.Helper()
	for _, p := range []struct {
		name string
		fd   int
	}{{"plugin", plugin}, {"provider", provider}} {
		if !plugintest.Exited(t, p.fd, hangGuard) {
			t.Errorf("the %s outlived %s", p.name, what)
		}
	}
}
