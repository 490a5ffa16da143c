package server

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

	"github.com/baton-run/baton/sdk"
	"github.com/baton-run/baton/sdk/clock"
	"github.com/baton-run/baton/sdk/clock/clocktest"
	pb "github.com/baton-run/baton/sdk/internal/pluginpb"
)

var epoch = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)

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
		clocktest.Pending(t, f, "looking for the parent", parentPoll)
		f.Advance(parentPoll)
	}
	clocktest.Pending(t, f, "looking for the parent", parentPoll)
	select {
	case g := <-got:
		t.Fatalf("host taken for gone with its parent there: %+v", g)
	default:
	}
	ppid.Store(1) // reparented
	f.Advance(parentPoll - time.Millisecond)
	clocktest.Pending(t, f, "a millisecond before the next look", time.Millisecond)
	f.Advance(time.Millisecond)
	if diff := cmp.Diff(gone{"the host is gone (parent 100, now 1)", true}, clocktest.Within(t, got), cmp.AllowUnexported(gone{})); diff != "" {
		t.Fatalf("parent changed (-want +got):\n%s", diff)
	}

	got = watch(t.Context())
	clocktest.Pending(t, f, "looking for the parent", parentPoll)
	sig <- syscall.SIGTERM
	if diff := cmp.Diff(gone{"terminated", true}, clocktest.Within(t, got), cmp.AllowUnexported(gone{})); diff != "" {
		t.Fatalf("SIGTERM (-want +got):\n%s", diff)
	}

	stop, cancel := context.WithCancel(t.Context())
	got = watch(stop)
	clocktest.Pending(t, f, "looking for the parent", parentPoll)
	cancel()
	if diff := cmp.Diff(gone{"", false}, clocktest.Within(t, got), cmp.AllowUnexported(gone{})); diff != "" {
		t.Fatalf("stopped (-want +got):\n%s", diff)
	}
	clocktest.Pending(t, f, "stopped")
}

// idle is an adapter whose sessions do nothing.
type idle struct{}

func (idle) Describe() sdk.Description {
	return sdk.Description{Name: "idle", Version: "1", WireProtocol: "none"}
}
func (idle) OpenSession(context.Context, sdk.OpenSessionRequest, sdk.Emitter) (sdk.OpenSessionResponse, error) {
	return sdk.OpenSessionResponse{}, nil
}
func (idle) StartTurn(context.Context, sdk.StartTurnRequest) (sdk.StartTurnResponse, error) {
	return sdk.StartTurnResponse{}, nil
}
func (idle) CloseSession(context.Context, string) error { return nil }

// closing is an adapter whose sessions take as long to close as their
// context lets them, but "quick", which closes at once.
type closing struct {
	idle
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
	clocktest.Pending(t, f, "closing", shutdownTimeout)
	<-a.quick
	f.Advance(shutdownTimeout - time.Millisecond)
	select {
	case <-done:
		t.Fatal("closeAll returned with sessions still closing")
	default:
	}
	f.Advance(time.Millisecond)
	clocktest.Within(t, done)
	const timedOut = "closing sessions at shutdown: context deadline exceeded after 10s"
	if diff := cmp.Diff(map[string]string{"quick": "closed", "stuck-1": timedOut, "stuck-2": timedOut}, a.causes); diff != "" {
		t.Fatalf("how the sessions closed (-want +got):\n%s", diff)
	}
}
