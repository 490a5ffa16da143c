package sdk

import (
	"context"

	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/go-hclog"

	"github.com/baton-run/baton/sdk/clock"
	pb "github.com/baton-run/baton/sdk/internal/pluginpb"
)

var epoch = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)

// pending waits until the fake clock has the timers want (from now).
func pending(t *testing.T, f *clock.Fake, what string, want []time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute) // a guard: a broken timer fails, not hangs
	defer cancel()
	if err := f.WaitTimers(ctx, len(want)); err != nil {
		t.Fatalf("%s: waiting for %d timers, have %v: %v", what, len(want), f.Pending(), err)
	}
	if diff := cmp.Diff(want, f.Pending()); diff != "" {
		t.Fatalf("%s: pending timers (-want +got):\n%s", what, diff)
	}
}

// within receives from c; the guard only keeps a broken wait from hanging
// the test.
func within[T any](t *testing.T, c <-chan T) T {
	t.Helper()
	select {
	case v := <-c:
		return v
	case <-time.After(time.Minute):
		t.Fatal("nothing after a minute")
	}
	var zero T
	return zero
}

type gone struct {
	why  string
	gone bool
}

// The plugin looks for its parent every parentPoll on its clock, and
// takes a changed parent, or SIGTERM, for the host's end; a plugin that
// shuts down first stops looking.
func TestHostGone(t *testing.T) {
	f := clock.NewFake(epoch)
	var ppid atomic.Int64
	ppid.Store(100)
	sig := make(chan os.Signal, 1)
	watch := func(stop context.Context) <-chan gone {
		c := make(chan gone, 1)
		go func() {
			why, ok := hostGone(stop, f, sig, func() int { return int(ppid.Load()) })
			c <- gone{why, ok}
		}()
		return c
	}

	got := watch(t.Context())
	for range 3 { // the parent is still there: it looks again
		pending(t, f, "looking for the parent", []time.Duration{parentPoll})
		f.Advance(parentPoll)
	}
	pending(t, f, "looking for the parent", []time.Duration{parentPoll})
	select {
	case g := <-got:
		t.Fatalf("host taken for gone with its parent there: %+v", g)
	default:
	}
	ppid.Store(1) // reparented
	f.Advance(parentPoll - time.Millisecond)
	pending(t, f, "a millisecond before the next look", []time.Duration{time.Millisecond})
	f.Advance(time.Millisecond)
	if diff := cmp.Diff(gone{"the host is gone (parent 100, now 1)", true}, within(t, got), cmp.AllowUnexported(gone{})); diff != "" {
		t.Fatalf("parent changed (-want +got):\n%s", diff)
	}

	got = watch(t.Context())
	pending(t, f, "looking for the parent", []time.Duration{parentPoll})
	sig <- syscall.SIGTERM
	if diff := cmp.Diff(gone{"terminated", true}, within(t, got), cmp.AllowUnexported(gone{})); diff != "" {
		t.Fatalf("SIGTERM (-want +got):\n%s", diff)
	}

	stop, cancel := context.WithCancel(t.Context())
	got = watch(stop)
	pending(t, f, "looking for the parent", []time.Duration{parentPoll})
	cancel()
	if diff := cmp.Diff(gone{"", false}, within(t, got), cmp.AllowUnexported(gone{})); diff != "" {
		t.Fatalf("stopped (-want +got):\n%s", diff)
	}
	pending(t, f, "stopped", []time.Duration{})
}

// closing is an adapter whose sessions take as long to close as their
// context lets them, but "quick", which closes at once.
type closing struct {
	emitting
	quick  chan struct{} // closed once "quick" closed
	mu     sync.Mutex
	causes map[string]string
}

func (a *closing) CloseSession(ctx context.Context, id string) error {
	if id == "quick" {
		a.mu.Lock()
		defer a.mu.Unlock()
		a.causes[id] = "closed"
		close(a.quick)
		return nil
	}
	<-ctx.Done()
	a.mu.Lock()
	defer a.mu.Unlock()
	a.causes[id] = context.Cause(ctx).Error()
	return context.Cause(ctx)
}

// Closing the sessions at shutdown takes at most shutdownTimeout on the
// plugin's clock: sessions that do not close by then are given up on,
// told why by their context.
func TestCloseAllGivesUpAfterTheShutdownTimeout(t *testing.T) {
	f := clock.NewFake(epoch)
	a := &closing{quick: make(chan struct{}), causes: map[string]string{}}
	srv := newServer(t.Context(), a, hclog.NewNullLogger())
	for _, id := range []string{"quick", "stuck-1", "stuck-2"} {
		if _, err := srv.OpenSession(t.Context(), &pb.OpenSessionRequest{SessionId: id}); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan struct{})
	go func() { srv.closeAll(f, shutdownTimeout); close(done) }()
	pending(t, f, "closing", []time.Duration{shutdownTimeout})
	<-a.quick
	f.Advance(shutdownTimeout - time.Millisecond)
	select {
	case <-done:
		t.Fatal("closeAll returned with sessions still closing")
	default:
	}
	f.Advance(time.Millisecond)
	within(t, done)
	const timedOut = "closing sessions at shutdown: context deadline exceeded after 10s"
	if diff := cmp.Diff(map[string]string{"quick": "closed", "stuck-1": timedOut, "stuck-2": timedOut}, a.causes); diff != "" {
		t.Fatalf("how the sessions closed (-want +got):\n%s", diff)
	}
}
