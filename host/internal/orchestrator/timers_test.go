//go:build linux

package orchestrator_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/hashicorp/go-hclog"
	"golang.org/x/sys/unix"

	"github.com/baton-run/baton/host/internal/domain"
	"github.com/baton-run/baton/host/internal/ids"
	"github.com/baton-run/baton/host/internal/orchestrator"
	"github.com/baton-run/baton/sdk/clock"
	"github.com/baton-run/baton/sdk/pluginclient"
	"github.com/baton-run/baton/sdk/plugintest"
)

// The host's waits run on its clock (the fake one of env): these tests
// move it to drive each pause, and check that nothing waits one out that
// it should not. (Linux: a plugin's connections are broken through
// pidfd_getfd.)

// hangGuard bounds a wait that must end without the fake clock moving: a
// host that waits for a timer instead hangs, and the test fails here.
const hangGuard = 30 * time.Second

// breakConnections shuts down, from outside, every connection the plugin
// process pid has with the host: what a broken transport does. The plugin
// lives on, listening, so the host's gRPC channel can connect again. (The
// sockets are reached through pidfd_getfd; shutdown acts on the socket, not
// on the copy of its descriptor.)
func breakConnections(t *testing.T, pid int) {
	t.Helper()
	listening := map[string]bool{} // socket inodes that accept connections
	b, err := os.ReadFile("/proc/net/unix")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) < 7 {
			continue
		}
		flags, err := strconv.ParseUint(f[3], 16, 32)
		if err != nil {
			t.Fatal(err)
		}
		if flags&0x10000 != 0 { // __SO_ACCEPTCON
			listening[f[6]] = true
		}
	}
	pidfd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		t.Fatalf("pidfd of plugin %d: %v", pid, err)
	}
	defer unix.Close(pidfd)
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	broken := 0
	for _, d := range fds {
		link, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, d.Name()))
		inode, ok := strings.CutPrefix(link, "socket:[")
		if err != nil || !ok || listening[strings.TrimSuffix(inode, "]")] {
			continue
		}
		target, _ := strconv.Atoi(d.Name())
		fd, err := unix.PidfdGetfd(pidfd, target, 0)
		if err != nil {
			t.Fatalf("socket %d of plugin %d: %v", target, pid, err)
		}
		if err := unix.Shutdown(fd, unix.SHUT_RDWR); err == nil {
			broken++
		}
		unix.Close(fd)
	}
	if broken == 0 {
		t.Fatalf("plugin %d has no connection to break", pid)
	}
}

// answeredThread plays acp/approval_accept: the run waits for the
// client's answer, midway, then ends. between runs at the wait; the types
// of the events stored after it are returned with the thread.
func (e *env) answeredThread(between func(th domain.Thread)) (domain.Thread, []string) {
	e.t.Helper()
	threadID := e.createThreadWith("acp", "acp/approval_accept.ndjson", domain.ApproveAsk)
	e.dispatch(domain.Command{ID: "send", ThreadID: threadID, Payload: domain.DispatchMessage{Text: "Write allowed.txt"}})
	th := e.waitFor(threadID, "the request", func(th domain.Thread) bool { return len(th.Requests) > 0 })
	between(th)
	e.dispatch(domain.Command{ID: "allow", ThreadID: threadID, Payload: domain.RespondToRequest{RequestID: th.Requests[0].ID, Decision: "accept"}})
	return e.waitFor(threadID, "the run to end", allRunsEnded(1)), e.types(threadID, th.Sequence)
}

// comparable is a thread as another play of the same transcript must have
// it: its workspace path, provider command, process ids and sequence (a
// host's own outcomes may interleave differently with the provider's
// events) are cleared.
func (e *env) comparable(th domain.Thread) domain.Thread {
	e.t.Helper()
	th.ProviderCommand, th.Sequence = domain.ProviderCommand{}, 0
	for i := range th.ProviderBindings {
		th.ProviderBindings[i].Command = domain.ProviderCommand{}
	}
	for i := range th.ProviderSessions {
		th.ProviderSessions[i].PluginPid, th.ProviderSessions[i].ProviderPid = 0, 0
	}
	b, err := json.Marshal(th)
	if err != nil {
		e.t.Fatal(err)
	}
	var out domain.Thread
	if err := json.Unmarshal([]byte(strings.ReplaceAll(string(b), e.ws, "<workspace>")), &out); err != nil {
		e.t.Fatal(err)
	}
	return out
}

// A session's event stream that breaks while its plugin lives is reopened
// after a pause on the host's clock, after the last event stored: the run
// then goes on as if nothing had happened, with nothing lost or stored
// twice. The reference is the same play without the break (same ids, same
// clock, moved as far).
func TestBrokenEventStreamIsReopenedAfterAPause(t *testing.T) {
	ref := newEnv(t)
	want, wantAfter := ref.answeredThread(func(domain.Thread) { ref.clock.Advance(100 * time.Millisecond) })

	e := newEnv(t)
	got, gotAfter := e.answeredThread(func(th domain.Thread) {
		breakConnections(t, th.ProviderSessions[0].PluginPid)
		ctx, cancel := context.WithTimeout(t.Context(), hangGuard)
		defer cancel()
		if err := e.clock.WaitTimers(ctx, 1); err != nil {
			t.Fatalf("the host never paused to reopen the stream: %v", err)
		}
		if diff := cmp.Diff([]time.Duration{100 * time.Millisecond}, e.clock.Pending()); diff != "" {
			t.Fatalf("pending timers (-want +got):\n%s", diff)
		}
		e.clock.Advance(100 * time.Millisecond)
	})
	if diff := cmp.Diff(ref.comparable(want), e.comparable(got), cmpopts.IgnoreUnexported(domain.Thread{}, domain.Run{})); diff != "" {
		t.Errorf("thread after a broken stream (-without the break +with it):\n%s", diff)
	}
	if diff := cmp.Diff(wantAfter, gotAfter); diff != "" {
		t.Errorf("events stored after the wait (-without the break +with it):\n%s", diff)
	}
	if p := e.clock.Pending(); len(p) != 0 {
		t.Errorf("timers left pending: %v", p)
	}
}

// Close during the pause before a reopening does not wait it out: the
// stream is reopened at once for the session's last events. The fake
// clock never moves here, so a host that waited for the pause (or for the
// session's close timeout) would hang.
func TestCloseDuringAReopeningPauseReturnsAtOnce(t *testing.T) {
	e := newEnv(t)
	threadID := e.createThreadWith("acp", "acp/approval_accept.ndjson", domain.ApproveAsk)
	e.dispatch(domain.Command{ID: "send", ThreadID: threadID, Payload: domain.DispatchMessage{Text: "Write allowed.txt"}})
	th := e.waitFor(threadID, "the request", func(th domain.Thread) bool { return len(th.Requests) > 0 })
	breakConnections(t, th.ProviderSessions[0].PluginPid)
	ctx, cancel := context.WithTimeout(t.Context(), hangGuard)
	defer cancel()
	if err := e.clock.WaitTimers(ctx, 1); err != nil {
		t.Fatalf("the host never paused to reopen the stream: %v", err)
	}
	closed := make(chan error, 1)
	go func() { closed <- e.host.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatalf("close: %v", err)
		}
	case <-time.After(hangGuard):
		t.Fatalf("Close waited on the host's clock; pending %v", e.clock.Pending())
	}
	e.host = nil
	if p := e.clock.Pending(); len(p) != 0 {
		t.Errorf("timers left pending: %v", p)
	}
	// The session's end came through the reopened stream.
	e.open()
	th = mustThread(t, e, threadID)
	if s := th.ProviderSessions[0]; s.Status != domain.SessionStatusEnded {
		t.Errorf("session %+v; want its end recorded", s)
	}
}

// A plugin that dies during the pause ends its session at once: there is
// no stream to reopen, and the pause is not waited out.
func TestPluginExitDuringAReopeningPauseEndsTheRunAtOnce(t *testing.T) {
	e := newEnv(t)
	threadID := e.createThreadWith("acp", "acp/approval_accept.ndjson", domain.ApproveAsk)
	e.dispatch(domain.Command{ID: "send", ThreadID: threadID, Payload: domain.DispatchMessage{Text: "Write allowed.txt"}})
	pid := e.waitFor(threadID, "the request", func(th domain.Thread) bool { return len(th.Requests) > 0 }).ProviderSessions[0].PluginPid
	breakConnections(t, pid)
	ctx, cancel := context.WithTimeout(t.Context(), hangGuard)
	defer cancel()
	if err := e.clock.WaitTimers(ctx, 1); err != nil {
		t.Fatalf("the host never paused to reopen the stream: %v", err)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill plugin %d: %v", pid, err)
	}
	th := e.waitFor(threadID, "the run to end", allRunsEnded(1))
	if r := th.Runs[0]; r.Status != domain.RunStatusFailed || r.Failure == nil || r.Failure.Code != "plugin_exited" {
		b, _ := json.Marshal(r)
		t.Fatalf("run = %s; want failed with plugin_exited", b)
	}
	if !e.clock.Now().Equal(epoch) {
		t.Errorf("the clock moved to %v", e.clock.Now())
	}
}

// Close waits for a session's last events for at most 15 seconds of the
// host's clock: a plugin that does not answer (stopped here) does not hold
// the sessions open. (The plugin is let go on once the host has given up
// on the session, and shuts down when asked; for one that does not, see
// TestCloseKillsAPluginThatDoesNotShutDown.)
func TestCloseGivesUpOnASessionThatDoesNotEnd(t *testing.T) {
	gaveUp := make(chan struct{})
	var once sync.Once
	log := hclog.New(&hclog.LoggerOptions{Name: "host", Level: hclog.Warn, Output: watchWriter{testWriter{t}, func(line string) {
		if strings.Contains(line, "session did not end in time") {
			once.Do(func() { close(gaveUp) })
		}
	}}})
	e := &env{t: t, data: t.TempDir(), ws: t.TempDir(), clock: clock.NewFake(epoch)}
	h, err := orchestrator.Open(orchestrator.Config{DataDir: e.data, PluginDirs: []string{pluginDir}, Logger: log,
		IDs: ids.Seeded(1), Clock: e.clock, PluginCallTimeout: callDeadline})
	if err != nil {
		t.Fatal(err)
	}
	e.host = h
	threadID := e.createThreadWith("acp", "acp/approval_accept.ndjson", domain.ApproveAsk)
	e.dispatch(domain.Command{ID: "send", ThreadID: threadID, Payload: domain.DispatchMessage{Text: "Write allowed.txt"}})
	pid := e.waitFor(threadID, "the request", func(th domain.Thread) bool { return len(th.Requests) > 0 }).ProviderSessions[0].PluginPid
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatalf("stop plugin %d: %v", pid, err)
	}
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGCONT) })
	closed := make(chan error, 1)
	go func() { closed <- h.Close() }()
	ctx, cancel := context.WithTimeout(t.Context(), hangGuard)
	defer cancel()
	passDrain(ctx, t, e.clock)
	pending, err := waitBounds(ctx, e.clock, 1)
	if err != nil {
		t.Fatalf("Close set no timeout on the host's clock: %v", err)
	}
	if diff := cmp.Diff([]time.Duration{15 * time.Second}, pending); diff != "" {
		t.Fatalf("pending timers (-want +got):\n%s", diff)
	}
	select {
	case <-gaveUp:
		t.Fatal("Close gave up on the session before its time was up")
	default:
	}
	e.clock.Advance(15 * time.Second)
	select {
	case <-gaveUp:
	case <-ctx.Done():
		t.Fatal("Close still waits for the session once its time is up")
	}
	if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if err := <-closed; err != nil {
		t.Fatalf("close: %v", err)
	}
}

// watchWriter passes each write on and shows it to see.
type watchWriter struct {
	w   testWriter
	see func(string)
}

func (w watchWriter) Write(b []byte) (int, error) {
	w.see(string(b))
	return w.w.Write(b)
}

// Close asks a plugin to shut down and, if it has not exited after the
// kill grace on the host's clock, kills it: a plugin that does not answer
// (stopped here, mid-turn) does not hold Close forever, and neither it nor
// its provider process is left behind. The provider here runs until it is
// signalled (its stdin closing does not end it): it dies with the plugin
// because its parent-death signal is SIGKILL.
func TestCloseKillsAPluginThatDoesNotShutDown(t *testing.T) {
	e := newEnv(t)
	_, plugin, provider := e.stallingTurn()
	if err := unix.PidfdSendSignal(plugin, unix.SIGSTOP, nil, 0); err != nil {
		t.Fatalf("stop the plugin: %v", err)
	}
	// A test that fails leaves the plugin to go on and shut down.
	t.Cleanup(func() { unix.PidfdSendSignal(plugin, unix.SIGCONT, nil, 0) })

	closed := make(chan error, 1)
	go func() { closed <- e.host.Close() }()
	ctx, cancel := context.WithTimeout(t.Context(), hangGuard)
	defer cancel()
	passDrain(ctx, t, e.clock)
	pending, err := waitBounds(ctx, e.clock, 1)
	if err != nil {
		t.Fatalf("Close set no timeout for the session's end on the host's clock: %v", err)
	}
	if diff := cmp.Diff([]time.Duration{15 * time.Second}, pending); diff != "" {
		t.Fatalf("pending timers while the session closes (-want +got):\n%s", diff)
	}
	e.clock.Advance(15 * time.Second)
	if pending, err = waitBounds(ctx, e.clock, 1); err != nil {
		t.Fatalf("Close waits for the stopped plugin with no kill grace on the host's clock (go-plugin's shutdown request has no deadline): %v", err)
	}
	if diff := cmp.Diff([]time.Duration{pluginclient.DefaultKillGrace}, pending); diff != "" {
		t.Fatalf("pending timers while the plugin is asked to shut down (-want +got):\n%s", diff)
	}
	select {
	case err := <-closed:
		t.Fatalf("Close returned (%v) before the kill grace was up", err)
	default:
	}
	if plugintest.Exited(t, plugin, 0) {
		t.Fatal("the plugin was killed before the kill grace was up")
	}
	e.clock.Advance(pluginclient.DefaultKillGrace)
	select {
	case err := <-closed:
		if err != nil {
			t.Fatalf("close: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("Close still waits for the plugin after the kill grace")
	}
	e.host = nil
	checkExited(t, "Close", plugin, provider)
}

// passDrain moves the host's clock past Close's wait for its runs to end
// (the plugin here does not answer the request to stop them).
func passDrain(ctx context.Context, t *testing.T, c *clock.Fake) {
	t.Helper()
	pending, err := waitBounds(ctx, c, 1)
	if err != nil {
		t.Fatalf("Close set no bound on its drain on the host's clock: %v", err)
	}
	if diff := cmp.Diff([]time.Duration{orchestrator.DrainTimeout}, pending); diff != "" {
		t.Fatalf("pending timers while the runs are asked to stop (-want +got):\n%s", diff)
	}
	c.Advance(orchestrator.DrainTimeout)
}

// restartPastDrain restarts the host, moving its clock past Close's wait
// for runs whose providers do not stop.
func (e *env) restartPastDrain() {
	e.t.Helper()
	e.closePastDrain()
	e.open()
}

// closePastDrain closes the host, moving its clock past Close's wait for
// runs whose providers do not stop.
func (e *env) closePastDrain() {
	e.t.Helper()
	closed := make(chan error, 1)
	go func() { closed <- e.host.Close() }()
	ctx, cancel := context.WithTimeout(e.t.Context(), hangGuard)
	defer cancel()
	passDrain(ctx, e.t, e.clock)
	select {
	case err := <-closed:
		if err != nil {
			e.t.Fatalf("close host: %v", err)
		}
	case <-ctx.Done():
		e.t.Fatal("Close still waits after its drain's bound")
	}
	e.host = nil
}
