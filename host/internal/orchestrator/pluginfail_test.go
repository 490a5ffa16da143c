package orchestrator_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-run/baton/host/internal/domain"
	"github.com/baton-run/baton/host/internal/orchestrator"
	"github.com/baton-run/baton/host/internal/testbin"
	"github.com/baton-run/baton/sdk/clock"
)

// The test plugin host/internal/testbin/crashplugin, built once, installed
// as three providers, crashy and steady (one process each), and mute,
// which never answers Describe.
var (
	testPluginsOnce sync.Once
	testPluginsDir  string
	testPluginsErr  error
)

func crashPlugins(t *testing.T) string {
	t.Helper()
	testPluginsOnce.Do(func() {
		testPluginsDir, testPluginsErr = os.MkdirTemp("", "baton-crashplugin-")
		if testPluginsErr == nil {
			testPluginsErr = testbin.Plugin(root, "./internal/testbin/crashplugin", testPluginsDir, "crashy", "steady", "mute")
		}
	})
	if testPluginsErr != nil {
		t.Fatal(testPluginsErr)
	}
	return testPluginsDir
}

func removeTestPlugins() {
	if testPluginsDir != "" {
		os.RemoveAll(testPluginsDir)
	}
}

// newCrashEnv is newEnv with the crash plugins installed.
func newCrashEnv(t *testing.T) *env {
	t.Helper()
	return newCrashEnvGrace(t, 0)
}

// newCrashEnvGrace is newCrashEnv whose host gives an interrupted run
// grace (0: the default).
func newCrashEnvGrace(t *testing.T, grace time.Duration) *env {
	t.Helper()
	e := &env{t: t, data: t.TempDir(), ws: t.TempDir(), seed: 1, clock: clock.NewFake(epoch), dirs: []string{crashPlugins(t)},
		calls: orchestrator.DefaultPluginCallTimeout, grace: grace}
	e.open()
	t.Cleanup(func() {
		if e.host == nil {
			return
		}
		if t.Failed() {
			// A call left hanging (the deadline it should have had) would
			// hold the close: the plugins are killed at once instead.
			e.host.Halt()
		}
		e.host.Close()
	})
	return e
}

// fifo makes a named pipe: the crash plugin waits for it to be written.
func fifo(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "cue")
	if err := syscall.Mkfifo(p, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// crashThread creates a thread on a crash plugin provider running argv.
func (e *env) crashThread(id, provider string, argv ...string) string {
	e.t.Helper()
	return e.dispatch(domain.Command{ID: "create-" + id, Payload: domain.CreateThread{Provider: provider, Cwd: e.ws,
		ProviderCommand: domain.ProviderCommand{Argv: argv}}}).ThreadID
}

// runOutcome is what these tests assert of a run: its state, its attempts'
// and nodes', and its failure's code.
type runOutcome struct {
	Status   domain.RunStatus
	Code     string
	EndedAt  time.Time
	Attempts []string // status of each
	Nodes    []string // kind and status of each
	Text     string   // its assistant text
}

func outcomeOf(th domain.Thread, i int) runOutcome {
	r := th.Runs[i]
	v := runOutcome{Status: r.Status, Text: assistantText(th, r.ID)}
	if r.Failure != nil {
		v.Code = r.Failure.Code
	}
	if r.EndedAt != nil {
		v.EndedAt = *r.EndedAt
	}
	for _, a := range r.Attempts {
		v.Attempts = append(v.Attempts, string(a.Status))
	}
	for _, n := range r.Nodes {
		v.Nodes = append(v.Nodes, string(n.Kind)+" "+string(n.Status))
	}
	return v
}

// A plugin that crashes mid-turn (it panics after its turn said something)
// fails only the attempt that was running, at once, with the end of its
// stderr in the reason (the panic); a thread on another plugin process
// goes on, and the crashed thread's next message starts a new plugin
// process.
func TestPluginCrashMidTurnFailsOnlyItsAttempt(t *testing.T) {
	e := newCrashEnv(t)
	cueA, cueB := fifo(t), fifo(t)
	a := e.crashThread("a", "crashy", "crash", cueA)
	b := e.crashThread("b", "steady", "gate", cueB)
	e.dispatch(domain.Command{ID: "send-a", ThreadID: a, Payload: domain.DispatchMessage{Text: "fall over"}})
	e.dispatch(domain.Command{ID: "send-b", ThreadID: b, Payload: domain.DispatchMessage{Text: "keep going"}})
	working := func(th domain.Thread) bool { return len(th.Runs) > 0 && assistantText(th, th.Runs[0].ID) == "working" }
	pidA := e.waitFor(a, "a to work", working).ProviderSessions[0].PluginPid
	pidB := e.waitFor(b, "b to work", working).ProviderSessions[0].PluginPid
	if pidA == pidB {
		t.Fatalf("both threads on plugin process %d", pidA)
	}
	if err := os.WriteFile(cueA, []byte("go"), 0); err != nil { // the plugin panics
		t.Fatal(err)
	}
	th := e.waitFor(a, "a's run to end", allRunsEnded(1))
	// The failure is recorded at the instant of the crash: the host's
	// clock never moved, so no timeout or pause of the host stood between
	// the process's death and the attempt's failure.
	want := runOutcome{Status: domain.RunStatusFailed, Code: "plugin_exited", EndedAt: epoch, Attempts: []string{"failed"},
		Nodes: []string{"root_turn failed", "assistant_message cancelled"}, Text: "working"}
	if diff := cmp.Diff(want, outcomeOf(th, 0)); diff != "" {
		t.Errorf("a's run (-want +got):\n%s", diff)
	}
	msg := th.Runs[0].Failure.Message
	for _, part := range []string{"the crashy plugin went away: ", "; the end of its stderr:\n",
		`"@message":"about to fall over"`, "panic: crashplugin: the provider fell over mid-turn", "main.(*adapter).StartTurn"} {
		if !strings.Contains(msg, part) {
			t.Errorf("the failure does not say %q:\n%s", part, msg)
		}
	}
	if s := th.ProviderSessions[0]; s.Status != domain.SessionStatusEnded || s.EndReason != msg {
		t.Errorf("a's session: %s, %q; want ended with the run's reason", s.Status, s.EndReason)
	}
	if err := syscall.Kill(pidA, 0); err != syscall.ESRCH {
		t.Errorf("the crashed plugin %d: %v, want it gone", pidA, err)
	}

	// b, on another plugin process, goes on as if nothing happened.
	thb, err := e.host.Thread(b)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(runOutcome{Status: domain.RunStatusRunning, Attempts: []string{"in_progress"},
		Nodes: []string{"root_turn in_progress", "assistant_message in_progress"}, Text: "working"}, outcomeOf(thb, 0)); diff != "" {
		t.Errorf("b's run while a's plugin crashed (-want +got):\n%s", diff)
	}
	if err := os.WriteFile(cueB, []byte("go"), 0); err != nil {
		t.Fatal(err)
	}
	thb = e.waitFor(b, "b's run to end", allRunsEnded(1))
	if diff := cmp.Diff(runOutcome{Status: domain.RunStatusCompleted, EndedAt: epoch, Attempts: []string{"completed"},
		Nodes: []string{"root_turn completed", "assistant_message completed"}, Text: "working, done"}, outcomeOf(thb, 0)); diff != "" {
		t.Errorf("b's run (-want +got):\n%s", diff)
	}
	if s := thb.ProviderSessions; len(s) != 1 || s[0].Status != domain.SessionStatusOpen || s[0].PluginPid != pidB {
		t.Errorf("b's sessions: %+v; want its one session open on plugin %d", s, pidB)
	}

	// a's next message starts a new plugin process (this one answers).
	if err := os.Remove(cueA); err != nil {
		t.Fatal(err)
	}
	e.dispatch(domain.Command{ID: "send-a2", ThreadID: a, Payload: domain.DispatchMessage{Text: "again"}})
	th = e.waitFor(a, "a's second run to end", allRunsEnded(2))
	if diff := cmp.Diff(runOutcome{Status: domain.RunStatusCompleted, EndedAt: epoch, Attempts: []string{"completed"},
		Nodes: []string{"root_turn completed", "assistant_message completed"}, Text: "ok"}, outcomeOf(th, 1)); diff != "" {
		t.Errorf("a's second run (-want +got):\n%s", diff)
	}
	if s := th.ProviderSessions; len(s) != 2 || s[1].PluginPid == pidA || s[1].PluginPid == 0 {
		t.Errorf("a's sessions: %+v; want a second one on a new plugin process", s)
	}
}

// advanceTo waits until the host has a timer pending d from now, then
// moves the clock by d.
func (e *env) advanceTo(d time.Duration) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(e.t.Context(), hangGuard)
	defer cancel()
	// Other timers come and go meanwhile (other calls' deadlines): what is
	// waited for is this one among them.
	if _, err := e.clock.WaitPending(ctx, func(p []time.Duration) bool { return slices.Contains(p, d) }); err != nil {
		e.t.Fatalf("no timer of %s: %v (pending: %v)", d, err, e.clock.Pending())
	}
	e.clock.Advance(d)
}

// A plugin that never answers a call is killed when the call's deadline
// on the host's clock passes, and the attempt fails saying which call and
// how long the host waited; the thread's next message starts a new
// plugin process.
func TestPluginThatHangsIsKilled(t *testing.T) {
	for _, call := range []string{"StartTurn", "InterruptTurn"} {
		t.Run(call, func(t *testing.T) {
			// The interrupt's grace outlasts the call's deadline here: what
			// ends the run is the killing of the plugin that hung (see
			// TestForcedStopGoesAroundAHungInterrupt for the grace first).
			e := newCrashEnvGrace(t, 2*orchestrator.DefaultPluginCallTimeout)
			a := e.crashThread("a", "crashy", "hang", call)
			e.dispatch(domain.Command{ID: "send", ThreadID: a, Payload: domain.DispatchMessage{Text: "hang"}})
			nodes := []string{"root_turn failed"}
			if call == "InterruptTurn" {
				th := e.waitFor(a, "the turn to start", func(th domain.Thread) bool { return len(th.ProviderTurns) > 0 })
				e.dispatch(domain.Command{ID: "stop", ThreadID: a, Payload: domain.InterruptRun{RunID: th.Runs[0].ID}})
				nodes = []string{"root_turn failed", "assistant_message cancelled"}
			} else {
				e.waitFor(a, "the session to open", func(th domain.Thread) bool { return len(th.ProviderSessions) > 0 })
			}
			e.advanceTo(orchestrator.DefaultPluginCallTimeout)
			th := e.waitFor(a, "the run to end", allRunsEnded(1))
			code := "plugin_exited" // the session's end, which ended the turn
			if call == "StartTurn" {
				code = "start_failed" // the turn never started
			}
			want := runOutcome{Status: domain.RunStatusFailed, Code: code, EndedAt: epoch.Add(time.Minute),
				Attempts: []string{"failed"}, Nodes: nodes}
			if diff := cmp.Diff(want, outcomeOf(th, 0)); diff != "" {
				t.Errorf("the run (-want +got):\n%s", diff)
			}
			msg := th.Runs[0].Failure.Message
			if w := "the crashy plugin did not answer " + call + " within 1m0s, so the host killed it; the end of its stderr:\n"; !strings.HasPrefix(msg, w) {
				t.Errorf("the failure says:\n%s\nwant it to start with:\n%s", msg, w)
			}
			pid := th.ProviderSessions[0].PluginPid
			if err := syscall.Kill(pid, 0); err != syscall.ESRCH {
				t.Errorf("the plugin %d that hung: %v, want it gone", pid, err)
			}
		})
	}
}

// Stop means stop even when the plugin hangs on the interrupt itself: the
// forced stop at the grace's end goes beside the thread's effects (the
// interrupt call hangs in them), and the session's end gives up the hung
// call, so the run ends interrupted at the grace (its checkpoint, queued
// behind the call, goes on), not when the call's deadline would have
// killed the plugin a minute later.
func TestForcedStopGoesAroundAHungInterrupt(t *testing.T) {
	e := newCrashEnv(t)
	a := e.crashThread("a", "crashy", "hang", "InterruptTurn")
	e.dispatch(domain.Command{ID: "send", ThreadID: a, Payload: domain.DispatchMessage{Text: "hang"}})
	th := e.waitFor(a, "the turn to start", func(th domain.Thread) bool { return len(th.ProviderTurns) > 0 })
	e.dispatch(domain.Command{ID: "stop", ThreadID: a, Payload: domain.InterruptRun{RunID: th.Runs[0].ID}})
	e.advanceTo(domain.DefaultInterruptGrace)
	th = e.waitFor(a, "the run to end", allRunsEnded(1))
	want := runOutcome{Status: domain.RunStatusInterrupted, Code: domain.FailureForced, EndedAt: epoch.Add(domain.DefaultInterruptGrace),
		Attempts: []string{"interrupted"}, Nodes: []string{"root_turn interrupted", "assistant_message cancelled"}}
	if diff := cmp.Diff(want, outcomeOf(th, 0)); diff != "" {
		t.Errorf("the run (-want +got):\n%s", diff)
	}
	// The hung interrupt was given up with the session: no deadline of it
	// is left to kill the plugin, which answers everything else.
	if p := bounds(e.clock); len(p) != 0 {
		t.Errorf("pending timers %v; want none", p)
	}
}

// A plugin that crashes in StartTurn fails the run's start with the end
// of its stderr (its panic), at once.
func TestPluginCrashInStartTurnSaysWhy(t *testing.T) {
	e := newCrashEnv(t)
	a := e.crashThread("a", "crashy", "crash-start")
	e.dispatch(domain.Command{ID: "send", ThreadID: a, Payload: domain.DispatchMessage{Text: "fall over"}})
	th := e.waitFor(a, "the run to end", allRunsEnded(1))
	want := runOutcome{Status: domain.RunStatusFailed, Code: "start_failed", EndedAt: epoch, Attempts: []string{"failed"},
		Nodes: []string{"root_turn failed"}}
	if diff := cmp.Diff(want, outcomeOf(th, 0)); diff != "" {
		t.Errorf("the run (-want +got):\n%s", diff)
	}
	msg := th.Runs[0].Failure.Message
	for _, part := range []string{"the crashy plugin went away: ", "; the end of its stderr:\n",
		`"@message":"about to fall over"`, "panic: crashplugin: StartTurn fell over"} {
		if !strings.Contains(msg, part) {
			t.Errorf("the failure does not say %q:\n%s", part, msg)
		}
	}
}

// A plugin that does not answer CloseSession when the host closes is
// killed after the close's bound (15s of the host's clock), and the
// session's end says why.
func TestPluginThatHangsInCloseSessionIsKilled(t *testing.T) {
	e := newCrashEnv(t)
	a := e.crashThread("a", "crashy", "hang", "CloseSession")
	e.dispatch(domain.Command{ID: "send", ThreadID: a, Payload: domain.DispatchMessage{Text: "answer"}})
	pid := e.waitFor(a, "the run to end", allRunsEnded(1)).ProviderSessions[0].PluginPid
	closed := make(chan error, 1)
	go func() { closed <- e.host.Close() }()
	e.advanceTo(15 * time.Second)
	select {
	case err := <-closed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(hangGuard):
		t.Fatalf("Close did not return once the plugin was killed; pending timers: %v", e.clock.Pending())
	}
	e.host = nil
	if err := syscall.Kill(pid, 0); err != syscall.ESRCH {
		t.Errorf("the plugin %d that hung: %v, want it gone", pid, err)
	}
	e.open()
	s := mustThread(t, e, a).ProviderSessions[0]
	if w := "the crashy plugin did not answer CloseSession within 15s, so the host killed it; the end of its stderr:\n"; s.Status != domain.SessionStatusEnded || !strings.HasPrefix(s.EndReason, w) {
		t.Errorf("the session: %s, %q; want it ended, saying %q", s.Status, s.EndReason, w)
	}
}
