//go:build linux

package pluginhost_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/baton-run/baton/host/internal/pluginhost"
	"github.com/baton-run/baton/host/internal/testbin"
	"github.com/baton-run/baton/sdk/clock"
)

// A plugin that never describes itself (the crash plugin installed as
// mute) holds up no caller but those that want it, and those only until
// its deadline on the manager's clock; a caller that gives up does not
// give up for the others; Close does not wait for it.

// root is the repository root, from this package's directory.
const root = "../../.."

// mutePlugins is a plugin directory holding the crash plugin as mute and
// as steady (which answers).
func mutePlugins(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := testbin.Plugin(root, "./internal/testbin/crashplugin", dir, "mute", "steady"); err != nil {
		t.Fatal(err)
	}
	return dir
}

// describing waits until the Describe deadlines pending on clk are want.
func describing(t *testing.T, clk *clock.Fake, want ...time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), hangGuard)
	defer cancel()
	if _, err := clk.WaitPending(ctx, func(p []time.Duration) bool { return slices.Equal(p, want) }); err != nil {
		t.Fatalf("Describe deadlines pending: %v (pending %v, want %v)", err, clk.Pending(), want)
	}
}

// gotten is what a Get returned.
type gotten struct {
	p   *pluginhost.Plugin
	err error
}

// getAsync runs Get in the background.
func getAsync(ctx context.Context, m *pluginhost.Manager, name string) <-chan gotten {
	ch := make(chan gotten, 1)
	go func() {
		p, err := m.Get(ctx, name)
		ch <- gotten{p, err}
	}()
	return ch
}

func TestDescribeThatHangsHoldsUpOnlyItsCallers(t *testing.T) {
	const timeout = time.Minute
	clk := clock.NewFake(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	m := pluginhost.New(pluginhost.Config{Dirs: []string{mutePlugins(t)}, Clock: clk, CallTimeout: timeout})
	defer m.Close()

	// A starts mute, and gives up while it describes itself; B, waiting
	// for the same start, starts it afresh rather than fail with A.
	ctxA, cancelA := context.WithCancel(t.Context())
	a := getAsync(ctxA, m, "mute")
	describing(t, clk, timeout)
	clk.Advance(time.Second) // A's deadline is a second nearer than any later start's
	b := getAsync(t.Context(), m, "mute")
	// Meanwhile another plugin starts, with the clock still.
	steadyCtx, cancelSteady := context.WithTimeout(t.Context(), hangGuard)
	defer cancelSteady()
	if p, err := m.Get(steadyCtx, "steady"); err != nil || p.Description.Name != "crashplugin" {
		t.Fatalf("Get steady while mute describes itself: %v", err)
	}
	describing(t, clk, timeout-time.Second) // A's alone: steady's deadline went with its answer
	cancelA()
	if got := <-a; !errors.Is(got.err, context.Canceled) {
		t.Fatalf("A's Get: %v, want its own cancellation", got.err)
	}
	describing(t, clk, timeout) // B's start, A's gone
	clk.Advance(timeout)
	var got gotten
	select {
	case got = <-b:
	case <-time.After(hangGuard):
		t.Fatalf("B's Get did not end at its deadline (pending %v)", clk.Pending())
	}
	if want := "the mute plugin did not answer Describe within 1m0s, so the host killed it"; got.err == nil || !strings.HasPrefix(got.err.Error(), want) {
		t.Fatalf("B's Get: %v, want it to start with %q", got.err, want)
	}
}

// Close does not wait for a plugin that is describing itself: the start
// stops what it started once its deadline has passed, and Get after Close
// says the manager is closed.
func TestCloseDoesNotWaitForADescribe(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	m := pluginhost.New(pluginhost.Config{Dirs: []string{mutePlugins(t)}, Clock: clk})
	a := getAsync(t.Context(), m, "mute")
	describing(t, clk, pluginhost.DefaultCallTimeout)
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		m.Close()
	}()
	select {
	case <-closed:
	case <-time.After(hangGuard):
		t.Fatal("Close waits for a plugin that is describing itself")
	}
	describing(t, clk, pluginhost.DefaultCallTimeout) // still: Close left it to its deadline
	clk.Advance(pluginhost.DefaultCallTimeout)
	if got := <-a; got.err == nil {
		got.p.Kill()
		t.Fatal("Get of a plugin that never described itself succeeded")
	}
	if _, err := m.Get(t.Context(), "steady"); !errors.Is(err, pluginhost.ErrClosed) {
		t.Errorf("Get after Close: %v, want ErrClosed", err)
	}
}
