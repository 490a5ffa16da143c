package pluginclient_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/baton-run/baton/sdk"
	"github.com/baton-run/baton/sdk/plugintest"
)

// emitting is a provider adapter, as a plugin author writes one, whose
// sessions emit n content deltas and exit.
type emitting struct{ n int }

func (a emitting) Describe() sdk.Description {
	return sdk.Description{Name: "emitting", Version: "1", WireProtocol: "none"}
}
func (a emitting) OpenSession(_ context.Context, _ sdk.OpenSessionRequest, emit sdk.Emitter) (sdk.OpenSessionResponse, error) {
	for range a.n {
		emit.Emit(sdk.RuntimeEvent{Kind: sdk.EventContentDelta, Text: "token "})
	}
	emit.Emit(sdk.RuntimeEvent{Kind: sdk.EventRuntimeExited, Status: sdk.ExitExited})
	return sdk.OpenSessionResponse{}, nil
}
func (emitting) StartTurn(context.Context, sdk.StartTurnRequest) (sdk.StartTurnResponse, error) {
	return sdk.StartTurnResponse{}, nil
}
func (emitting) CloseSession(context.Context, string) error { return nil }

// legacy answers Unimplemented for the methods a plugin built before
// EventBatches and AckEvents lacks.
func legacy(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	if strings.HasSuffix(info.FullMethod, "/AckEvents") {
		return nil, status.Error(codes.Unimplemented, "method AckEvents not implemented")
	}
	return h(ctx, req)
}

func legacyStreams(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	if strings.HasSuffix(info.FullMethod, "/EventBatches") {
		return status.Error(codes.Unimplemented, "method EventBatches not implemented")
	}
	return h(srv, ss)
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
		opts   []grpc.ServerOption
		legacy bool
	}{
		{"batches", nil, false},
		{"legacy", []grpc.ServerOption{grpc.UnaryInterceptor(legacy), grpc.StreamInterceptor(legacyStreams)}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := plugintest.InProcess(t, emitting{n: n}, tc.opts...)
			ctx := t.Context()
			if _, err := c.OpenSession(ctx, sdk.OpenSessionRequest{SessionID: "s"}); err != nil {
				t.Fatal(err)
			}
			if err := c.AckEvents(ctx, "s", 100); err != nil {
				t.Fatal(err)
			}
			from := uint64(0)
			if !tc.legacy {
				for _, err := range c.Events(ctx, "s", 99) {
					if !errors.Is(err, sdk.ErrInvalid) {
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
			if c.SingleEvents() != tc.legacy {
				t.Fatalf("client fell back to single events: %v, want %v", c.SingleEvents(), tc.legacy)
			}
			// The session is forgotten once its stream is read to its end.
			for _, err := range c.Events(ctx, "s", 0) {
				if !errors.Is(err, sdk.ErrUnknownSession) {
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
