package service_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	batonv1 "github.com/baton-run/baton/host/api/baton/v1"
	"github.com/baton-run/baton/host/internal/domain"
	"github.com/baton-run/baton/host/internal/eventlog"
	"github.com/baton-run/baton/host/internal/orchestrator"
	"github.com/baton-run/baton/host/internal/service"
	"github.com/baton-run/baton/sdk/replay"
	"github.com/baton-run/baton/sdk/transcript"
)

// A service whose store fails under it, mid-turn, as when the disk fills:
// its log cannot be written, and Pebble gives up. What a client sees: the
// command whose write failed is refused with Unavailable saying the store
// failed and the service is stopping; health says NOT_SERVING; a
// subscription ends with Unavailable, saying the same; the providers'
// processes are gone; and Run returns the failure (`baton serve` exits 1).
func TestRunStopsWhenItsStoreFails(t *testing.T) {
	fatal := parkFatal(t)
	var full atomic.Bool
	fs := fullDisk(&full)
	data := filepath.Join(shortDir(t), "data")
	s := serve(t, service.Config{DataDir: data, StoreFS: fs})
	conn := dialUnix(t, filepath.Join(data, service.SocketName))
	defer conn.Close()
	c := batonv1.NewBatonClient(conn)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()

	// A turn under way: the provider has thought, and says nothing more.
	abs, _ := filepath.Abs(filepath.Join(root, "testdata", "acp/stall.ndjson"))
	tr, err := transcript.ReadFile(abs)
	if err != nil {
		t.Fatal(err)
	}
	argv := append([]string{peerBin, "--transcript", abs, "--speed", "0"}, replay.PeerArgs(tr)...)
	rc, err := c.CreateThread(ctx, &batonv1.CreateThreadRequest{Provider: "acp", Cwd: t.TempDir(), ProviderCommand: &batonv1.ProviderCommand{Argv: argv}})
	if err != nil {
		t.Fatal(err)
	}
	id := rc.GetThreadId()
	sub, err := c.Subscribe(ctx, &batonv1.SubscribeRequest{ThreadId: id})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.SendMessage(ctx, &batonv1.SendMessageRequest{ThreadId: id, Text: "Take your time"}); err != nil {
		t.Fatal(err)
	}
	var th domain.Thread
	for len(th.TurnItems) == 0 {
		if _, err := sub.Recv(); err != nil {
			t.Fatalf("waiting for the provider's thinking: %v", err)
		}
		got, err := c.GetThread(ctx, &batonv1.GetThreadRequest{ThreadId: id})
		if err != nil {
			t.Fatal(err)
		}
		th = decodeThread(t, got)
	}
	procs := []int{th.ProviderSessions[0].PluginPid, th.ProviderSessions[0].ProviderPid}
	wctx, stopWatching := context.WithCancel(ctx)
	defer stopWatching()
	watch, err := healthpb.NewHealthClient(conn).Watch(wctx, &healthpb.HealthCheckRequest{Service: service.Service})
	if err != nil {
		t.Fatal(err)
	}
	if h, err := watch.Recv(); err != nil || h.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health before the failure: %v %v, want SERVING", h, err)
	}

	full.Store(true)
	const cause = "pebble: fatal commit error: no space left on device (injected)"
	const refused = "the event store failed and the service is stopping (it exits 1, for its supervisor to start it again; " +
		"the next start recovers what was in flight): " + cause
	_, err = c.SendMessage(ctx, &batonv1.SendMessageRequest{ThreadId: id, Text: "And then?"})
	type statusOf struct {
		Code    string
		Message string
	}
	st, _ := status.FromError(err)
	if diff := cmp.Diff(statusOf{"Unavailable", refused}, statusOf{st.Code().String(), st.Message()}); diff != "" {
		t.Errorf("the command whose write failed (-want +got):\n%s", diff)
	}
	if h, err := watch.Recv(); err != nil || h.GetStatus() != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Errorf("health after the failure: %v %v, want NOT_SERVING", h, err)
	}
	stopWatching() // the service's stop does not wait for it
	var subErr error
	for subErr == nil {
		_, subErr = sub.Recv()
	}
	st, _ = status.FromError(subErr)
	want := statusOf{"Unavailable", refused + "; subscribe again after the last sequence you received once it is back"}
	if diff := cmp.Diff(want, statusOf{st.Code().String(), st.Message()}); diff != "" {
		t.Errorf("the subscription's end (-want +got):\n%s", diff)
	}
	select {
	case err := <-s.done:
		s.stop()
		s.stop = nil
		want := "serve: the event store failed: " + cause +
			"; the service stopped, for its supervisor to start it again (the next start recovers what was in flight)"
		if err == nil || err.Error() != want {
			t.Errorf("Run returned %v, want %q", err, want)
		}
	case <-time.After(time.Minute):
		t.Fatal("Run did not return a minute after the store failed")
	}
	for _, pid := range procs {
		if !gone(pid) {
			t.Errorf("process %d outlived the service whose store failed", pid)
			unix.Kill(pid, unix.SIGKILL)
		}
	}
	if line, want := <-fatal, "the event store "+filepath.Join(data, "events")+" failed and this process cannot go on: "+cause; line != want {
		t.Errorf("Fatal got %q, want %q", line, want)
	}
}

// parkFatal makes eventlog.Fatal park the goroutine that calls it
// (Pebble's, which must not go on), as a process would end, and send its
// line on the returned channel: the process here is the test's.
func parkFatal(t *testing.T) <-chan string {
	lines := make(chan string, 8)
	saved := eventlog.Fatal
	t.Cleanup(func() { eventlog.Fatal = saved })
	eventlog.Fatal = func(msg string) {
		lines <- msg
		select {}
	}
	return lines
}

// fullDisk is a store's file system on which the log's writes fail while
// full is set.
func fullDisk(full *atomic.Bool) vfs.FS {
	return errorfs.Wrap(vfs.NewMem(), errorfs.InjectorFunc(func(op errorfs.Op) error {
		if full.Load() && op.Kind.ReadOrWrite() == errorfs.OpIsWrite && strings.HasSuffix(op.Path, ".log") {
			return errors.New("no space left on device (injected)")
		}
		return nil
	}))
}

// A host embedded for a command answers through the same Server: when its
// store fails, the Server stops by itself (no Run owns it): health says
// NOT_SERVING and a subscription ends saying the store failed, rather
// than wait for events that will never be stored.
func TestInProcessServerStopsWhenItsStoreFails(t *testing.T) {
	fatal := parkFatal(t)
	var full atomic.Bool
	h, err := orchestrator.Open(orchestrator.Config{DataDir: t.TempDir(), PluginDirs: []string{pluginDir}, Logger: testLogger(t, "host"),
		StoreFS: fullDisk(&full)})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	conn, stop, err := service.InProcess(h, service.Options{Logger: testLogger(t, "service")})
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	c := batonv1.NewBatonClient(conn)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if _, err := c.CreateThread(ctx, &batonv1.CreateThreadRequest{ThreadId: "t1", Provider: "acp", Cwd: t.TempDir()}); err != nil {
		t.Fatal(err)
	}
	sub, err := c.Subscribe(ctx, &batonv1.SubscribeRequest{ThreadId: "t1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sub.Recv(); err != nil {
		t.Fatal(err)
	}
	full.Store(true)
	if _, err := c.SendMessage(ctx, &batonv1.SendMessageRequest{ThreadId: "t1", Text: "hi"}); status.Code(err) != codes.Unavailable {
		t.Errorf("a command as the store fails: %v, want Unavailable", err)
	}
	_, err = sub.Recv()
	st, _ := status.FromError(err)
	const want = "the event store failed and the service is stopping (it exits 1, for its supervisor to start it again; " +
		"the next start recovers what was in flight): pebble: fatal commit error: no space left on device (injected); " +
		"subscribe again after the last sequence you received once it is back"
	if st.Code() != codes.Unavailable || st.Message() != want {
		t.Errorf("the subscription's end: %v, want Unavailable: %s", err, want)
	}
	checkHealth(ctx, t, conn, healthpb.HealthCheckResponse_NOT_SERVING)
	<-fatal // Pebble has called Fatal: the test may put Fatal back
}

// gone waits until a process has ended (a zombie has), for at most a
// minute: its pidfd becomes readable when it does.
func gone(pid int) bool {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return errors.Is(err, unix.ESRCH)
	}
	defer unix.Close(fd)
	for {
		n, err := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, int(time.Minute/time.Millisecond))
		if err == unix.EINTR {
			continue
		}
		return err == nil && n == 1
	}
}
