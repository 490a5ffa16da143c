package service_test

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"sync"
	"testing"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	batonv1 "github.com/baton-run/baton/host/api/baton/v1"
	"github.com/baton-run/baton/host/internal/domain"
	"github.com/baton-run/baton/host/internal/orchestrator"
	"github.com/baton-run/baton/host/internal/service"
)

// What the service costs beside the embedded host, measured in the same
// run: one simple run (a new thread, a provider session with the replay
// peer, one turn through the real acp plugin, every event committed with
// fsync), first through the orchestrator directly, then through the
// service over a unix socket (a command, a subscription from the receipt's
// sequence, the run's events streamed to the client). And fifty threads
// through the service, one after another and all at once.

// benchHost opens a host with the real clock and plugins.
func benchHost(b *testing.B) *orchestrator.Host {
	h, err := orchestrator.Open(orchestrator.Config{DataDir: b.TempDir(), PluginDirs: []string{pluginDir}, Logger: hclog.NewNullLogger()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { h.Close() })
	return h
}

// benchService serves a host on a unix socket and returns a client.
func benchService(b *testing.B, h *orchestrator.Host) batonv1.BatonClient {
	srv := service.New(h, service.Options{})
	g := grpc.NewServer()
	srv.Register(g)
	sock := filepath.Join(b.TempDir(), "baton.sock")
	lis, err := net.Listen("unix", sock)
	if err != nil {
		b.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); g.Serve(lis) }()
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { conn.Close(); srv.Shutdown(); g.Stop(); <-done })
	return batonv1.NewBatonClient(conn)
}

func simpleArgv(b *testing.B) []string {
	return []string{peerBin, "--transcript", filepath.Join(root, "testdata", "acp", "simple.ndjson"), "--speed", "0"}
}

const simpleMessage = "Say hello."

// embeddedRun is one simple run through the orchestrator.
func embeddedRun(ctx context.Context, b *testing.B, h *orchestrator.Host, argv []string) {
	rc, err := h.Dispatch(ctx, domain.Command{ID: h.NewID("cmd"), Payload: domain.CreateThread{
		Provider: "acp", Cwd: b.TempDir(), ProviderCommand: domain.ProviderCommand{Argv: argv}}})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := h.Dispatch(ctx, domain.Command{ID: h.NewID("cmd"), ThreadID: rc.ThreadID,
		Payload: domain.DispatchMessage{Text: simpleMessage}}); err != nil {
		b.Fatal(err)
	}
	for rec, err := range h.ThreadStream(ctx, rc.ThreadID, rc.Sequence) {
		if err != nil {
			b.Fatal(err)
		}
		if rec.Type == (domain.RunEnded{}).EventType() {
			return
		}
	}
}

// serviceRun is the same run through the service: what a client does.
func serviceRun(ctx context.Context, c batonv1.BatonClient, cwd string, argv []string) error {
	rc, err := c.CreateThread(ctx, &batonv1.CreateThreadRequest{Provider: "acp", Cwd: cwd,
		ProviderCommand: &batonv1.ProviderCommand{Argv: argv}})
	if err != nil {
		return err
	}
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	st, err := c.Subscribe(sctx, &batonv1.SubscribeRequest{ThreadId: rc.GetThreadId(), AfterSequence: rc.GetSequence()})
	if err != nil {
		return err
	}
	if _, err := c.SendMessage(ctx, &batonv1.SendMessageRequest{ThreadId: rc.GetThreadId(), Text: simpleMessage}); err != nil {
		return err
	}
	for {
		e, err := st.Recv()
		if err != nil {
			return fmt.Errorf("thread %s: %w", rc.GetThreadId(), err)
		}
		if e.GetType() == (domain.RunEnded{}).EventType() {
			return nil
		}
	}
}

func BenchmarkOneTurn(b *testing.B) {
	argv := simpleArgv(b)
	b.Run("embedded", func(b *testing.B) {
		h := benchHost(b)
		for b.Loop() {
			embeddedRun(b.Context(), b, h, argv)
		}
	})
	b.Run("service", func(b *testing.B) {
		c := benchService(b, benchHost(b))
		for b.Loop() {
			if err := serviceRun(b.Context(), c, b.TempDir(), argv); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkFiftyThreads: one op is fifty simple runs on fifty threads
// through one service. Concurrent threads share the log's synced commits
// and the plugin process; each runs its own replay peer.
func BenchmarkFiftyThreads(b *testing.B) {
	const n = 50
	argv := simpleArgv(b)
	b.Run("sequential", func(b *testing.B) {
		c := benchService(b, benchHost(b))
		for b.Loop() {
			for range n {
				if err := serviceRun(b.Context(), c, b.TempDir(), argv); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	b.Run("concurrent", func(b *testing.B) {
		c := benchService(b, benchHost(b))
		for b.Loop() {
			var wg sync.WaitGroup
			errs := make(chan error, n)
			for range n {
				cwd := b.TempDir()
				wg.Go(func() {
					if err := serviceRun(b.Context(), c, cwd, argv); err != nil {
						errs <- err
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				b.Fatal(err)
			}
		}
	})
}
