//go:build linux

package pluginhost_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"github.com/baton-run/baton/host/internal/pluginhost"
	"github.com/baton-run/baton/sdk/clock"
	"github.com/baton-run/baton/sdk/plugintest"
)

// hangGuard bounds a wait that must end without the fake clock moving.
const hangGuard = 30 * time.Second

// Get hands out the running plugin while it lives, and starts it again
// once its process has exited.
func TestGetRestartsAPluginThatExited(t *testing.T) {
	m := pluginhost.New(pluginhost.Config{Dirs: []string{install(t, "acp")}})
	defer m.Close()
	first, err := m.Get(t.Context(), "acp")
	if err != nil {
		t.Fatal(err)
	}
	if again, err := m.Get(t.Context(), "acp"); err != nil || again != first {
		t.Fatalf("Get of a running plugin = %p, %v; want the running one, %p", again, err, first)
	}
	if err := unix.PidfdSendSignal(plugintest.Pidfd(t, first.Pid()), unix.SIGKILL, nil, 0); err != nil {
		t.Fatal(err)
	}
	select {
	case <-first.Exited():
	case <-time.After(hangGuard):
		t.Fatal("the killed plugin never exited")
	}
	second, err := m.Get(t.Context(), "acp")
	if err != nil {
		t.Fatalf("Get after the plugin exited: %v", err)
	}
	if second == first || second.Pid() == first.Pid() {
		t.Fatalf("Get after the plugin exited gave the dead one (pid %d)", first.Pid())
	}
	d, err := second.Describe(t.Context())
	if err != nil {
		t.Fatalf("describe the restarted plugin: %v", err)
	}
	if diff := cmp.Diff(first.Description, d); diff != "" {
		t.Errorf("the restarted plugin's description (-first +second):\n%s", diff)
	}
}

// Close asks every plugin to shut down at once and kills those that have
// not exited after the kill grace on its clock: two stopped plugins hold
// it one grace, not forever (nor two graces). Get fails after it.
func TestCloseKillsStoppedPluginsAfterTheGrace(t *testing.T) {
	const grace = 3 * time.Second
	clk := clock.NewFake(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	m := pluginhost.New(pluginhost.Config{Dirs: []string{install(t, "one", "two")}, Clock: clk, KillGrace: grace})
	var fds []int
	for _, name := range []string{"one", "two"} {
		p, err := m.Get(t.Context(), name)
		if err != nil {
			t.Fatal(err)
		}
		fd := plugintest.Pidfd(t, p.Pid())
		if err := unix.PidfdSendSignal(fd, unix.SIGSTOP, nil, 0); err != nil {
			t.Fatalf("stop plugin %s: %v", name, err)
		}
		// A test that fails leaves the plugin to go on and shut down.
		t.Cleanup(func() { unix.PidfdSendSignal(fd, unix.SIGCONT, nil, 0) })
		fds = append(fds, fd)
	}
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		m.Close()
	}()
	ctx, cancel := context.WithTimeout(t.Context(), hangGuard)
	defer cancel()
	if err := clk.WaitTimers(ctx, 2); err != nil {
		t.Fatalf("Close did not start a kill grace for each stopped plugin on its clock: %v (pending %v)", err, clk.Pending())
	}
	if diff := cmp.Diff([]time.Duration{grace, grace}, clk.Pending()); diff != "" {
		t.Fatalf("pending timers (-want +got):\n%s", diff)
	}
	select {
	case <-closed:
		t.Fatal("Close returned before the kill grace was up")
	default:
	}
	clk.Advance(grace)
	select {
	case <-closed:
	case <-ctx.Done():
		t.Fatal("Close still waits for the plugins after the kill grace")
	}
	for i, fd := range fds {
		if !plugintest.Exited(t, fd, 0) {
			t.Errorf("plugin %d outlived Close", i)
		}
	}
	if p, err := m.Get(t.Context(), "one"); !errors.Is(err, pluginhost.ErrClosed) {
		if err == nil {
			p.Kill()
		}
		t.Errorf("Get after Close: %v, want ErrClosed", err)
	}
}
