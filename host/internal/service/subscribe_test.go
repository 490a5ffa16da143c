package service_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	batonv1 "github.com/baton-run/baton/host/api/baton/v1"
	"github.com/baton-run/baton/host/internal/service"
	"github.com/baton-run/baton/sdk/clock"
)

// A subscriber that reads nothing does not hold the host up: commands go
// on, its buffer fills, and once it has stayed full for SlowSubscriber
// (on the service's clock) the stream ends with ResourceExhausted naming
// the last sequence sent. Subscribing again after it sees the rest: no
// gap, nothing twice.
func TestSlowSubscriberCutOffAndResumes(t *testing.T) {
	svcClock := clock.NewFake(epoch)
	// Small windows (no dynamic growth): the transport holds little.
	e := newEnv(t, service.Options{Clock: svcClock, SubscriberBuffer: 2},
		grpc.WithInitialWindowSize(64<<10), grpc.WithInitialConnWindowSize(64<<10))
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	stream, err := e.client.Subscribe(ctx, &batonv1.SubscribeRequest{})
	if err != nil {
		t.Fatal(err)
	}
	// Each thread.created carries 32 KiB: a few fill the windows, the
	// transport's write quota and the buffer.
	pad := "PAD=" + strings.Repeat("x", 32<<10)
	var want []uint64
	for i := range 16 {
		rc, err := e.client.CreateThread(ctx, &batonv1.CreateThreadRequest{ThreadId: fmt.Sprintf("t%02d", i), Provider: "acp", Cwd: e.ws,
			ProviderCommand: &batonv1.ProviderCommand{Argv: []string{"agent"}, Env: []string{pad}}})
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, rc.GetSequence())
	}
	if err := svcClock.WaitTimers(ctx, 1); err != nil {
		t.Fatalf("the subscriber never waited for room: %v", err)
	}
	svcClock.Advance(service.DefaultSlowSubscriber)
	var got []uint64
	for {
		ev, err := stream.Recv()
		if err != nil {
			if status.Code(err) != codes.ResourceExhausted {
				t.Fatalf("after %d events: %v, want ResourceExhausted", len(got), err)
			}
			msg := status.Convert(err).Message()
			var last uint64
			if _, err := fmt.Sscanf(msg[strings.LastIndex(msg, "after_sequence "):], "after_sequence %d", &last); err != nil {
				t.Fatalf("%q names no sequence: %v", msg, err)
			}
			if len(got) > 0 && got[len(got)-1] != last {
				t.Errorf("cut off after sequence %d, but the message says %d: %q", got[len(got)-1], last, msg)
			}
			if len(got) == len(want) {
				t.Fatalf("every event was sent before the cut: the test proves nothing")
			}
			break
		}
		got = append(got, ev.GetSequence())
	}
	resume, err := e.client.Subscribe(ctx, &batonv1.SubscribeRequest{AfterSequence: lastOr(got, 0)})
	if err != nil {
		t.Fatal(err)
	}
	for lastOr(got, 0) < want[len(want)-1] {
		ev, err := resume.Recv()
		if err != nil {
			t.Fatalf("resumed stream: %v", err)
		}
		got = append(got, ev.GetSequence())
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("sequences seen across the cut (-committed +seen):\n%s", d)
	}
}

func lastOr(s []uint64, v uint64) uint64 {
	if len(s) == 0 {
		return v
	}
	return s[len(s)-1]
}

// Shutdown ends subscriptions with Unavailable and health says
// NOT_SERVING; before it, health says SERVING for the server and for
// baton.v1.Baton.
func TestShutdownEndsSubscriptions(t *testing.T) {
	e := newEnv(t, service.Options{})
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	hc := healthpb.NewHealthClient(e.conn)
	for _, svc := range []string{"", service.Service} {
		resp, err := hc.Check(ctx, &healthpb.HealthCheckRequest{Service: svc})
		if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			t.Errorf("health of %q: %v %v, want SERVING", svc, resp, err)
		}
	}
	e.create("c1", "t1", "acp", "acp/simple.ndjson", "")
	stream, err := e.client.Subscribe(ctx, &batonv1.SubscribeRequest{ThreadId: "t1"})
	if err != nil {
		t.Fatal(err)
	}
	if ev, err := stream.Recv(); err != nil || ev.GetType() != "thread.created" {
		t.Fatalf("first event %v %v", ev, err)
	}
	e.srv.Shutdown()
	if _, err := stream.Recv(); status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "service shutting down") {
		t.Errorf("subscription at shutdown: %v, want Unavailable, service shutting down", err)
	}
	resp, err := hc.Check(ctx, &healthpb.HealthCheckRequest{Service: service.Service})
	if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Errorf("health after shutdown: %v %v, want NOT_SERVING", resp, err)
	}
}
