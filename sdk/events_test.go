package sdk

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"testing"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	pb "github.com/baton-run/baton/sdk/internal/pluginpb"
)

// emitting is a provider adapter, as a plugin author writes one, whose
// sessions emit n content deltas and exit.
type emitting struct{ n int }

func (a emitting) Describe() Description { return Description{Name: "emitting"} }
func (a emitting) OpenSession(_ context.Context, _ OpenSessionRequest, emit Emitter) (OpenSessionResponse, error) {
	for range a.n {
		emit.Emit(RuntimeEvent{Kind: EventContentDelta, Text: "token "})
	}
	emit.Emit(RuntimeEvent{Kind: EventRuntimeExited, Status: ExitExited})
	return OpenSessionResponse{}, nil
}
func (emitting) StartTurn(context.Context, StartTurnRequest) (StartTurnResponse, error) {
	return StartTurnResponse{}, nil
}
func (emitting) InterruptTurn(context.Context, InterruptTurnRequest) error       { return nil }
func (emitting) RespondToRequest(context.Context, RespondToRequestRequest) error { return nil }
func (emitting) CloseSession(context.Context, string) error                      { return nil }

// legacy is a plugin built before EventBatches: it answers Unimplemented.
type legacy struct{ *server }

func (legacy) EventBatches(*pb.EventsRequest, pb.Provider_EventBatchesServer) error {
	return status.Error(codes.Unimplemented, "method EventBatches not implemented")
}

func (legacy) AckEvents(context.Context, *pb.AckEventsRequest) (*pb.AckEventsResponse, error) {
	return nil, status.Error(codes.Unimplemented, "method AckEvents not implemented")
}

// serve runs a provider service on a unix socket and returns a client of it.
func serve(t *testing.T, impl pb.ProviderServer) *Client {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "p.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer()
	pb.RegisterProviderServer(g, impl)
	go g.Serve(l)
	t.Cleanup(g.Stop)
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &Client{rpc: pb.NewProviderClient(conn), exited: t.Context()}
}

// A session's events reach the host whole and in order, in batches from a
// plugin that serves them, one by one from a plugin built before batches
// (the client falls back, and remembers). Events the host acknowledged are
// dropped: a stream resumes after them, not before; a plugin built before
// acknowledgements keeps them, and acknowledging it is no error.
func TestEventsInBatchesAndFromOlderPlugins(t *testing.T) {
	const n = 1500 // several batches
	for _, tc := range []struct {
		name   string
		impl   func(*server) pb.ProviderServer
		legacy bool
	}{
		{"batches", func(s *server) pb.ProviderServer { return s }, false},
		{"legacy", func(s *server) pb.ProviderServer { return legacy{s} }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newServer(t.Context(), emitting{n: n}, hclog.NewNullLogger())
			c := serve(t, tc.impl(srv))
			ctx := t.Context()
			if _, err := c.OpenSession(ctx, OpenSessionRequest{SessionID: "s"}); err != nil {
				t.Fatal(err)
			}
			if err := c.AckEvents(ctx, "s", 100); err != nil {
				t.Fatal(err)
			}
			from := uint64(0)
			if !tc.legacy {
				for _, err := range c.Events(ctx, "s", 99) {
					if !errors.Is(err, ErrInvalid) {
						t.Fatalf("resuming before acknowledged events: %v", err)
					}
					break
				}
				from = 100
			}
			var seqs []uint64
			for ev, err := range c.Events(ctx, "s", from) {
				if err != nil {
					t.Fatal(err)
				}
				seqs = append(seqs, ev.Sequence)
			}
			if len(seqs) != n+1-int(from) {
				t.Fatalf("%d events after %d, want %d", len(seqs), from, n+1-int(from))
			}
			for i, s := range seqs {
				if s != from+uint64(i+1) {
					t.Fatalf("event %d has sequence %d", i, s)
				}
			}
			if c.noBatches.Load() != tc.legacy {
				t.Fatalf("client fell back to single events: %v, want %v", c.noBatches.Load(), tc.legacy)
			}
			// The session is forgotten once its stream is read to its end.
			for _, err := range c.Events(ctx, "s", 0) {
				if !errors.Is(err, ErrUnknownSession) {
					t.Fatalf("the ended session still streams: %v", err)
				}
				break
			}
			if err := c.AckEvents(ctx, "s", 5); err != nil {
				t.Fatalf("acknowledging a session that ended: %v", err)
			}
		})
	}
}
