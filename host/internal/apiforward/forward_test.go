package apiforward

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/testing/protocmp"

	batonv1 "github.com/baton-run/baton/host/api/baton/v1"
	"github.com/baton-run/baton/host/internal/natstest"
)

// The writer's side is tested through the real service in
// cmd/baton (TestAFollowerAnswersForTheWriter); these are the replies a
// follower can get that a working writer never sends: none, late ones,
// and damaged ones, each a clear gRPC error.

func connect(t *testing.T) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(natstest.Single(t).URLs())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// respond answers every call to installation inst with reply.
func respond(t *testing.T, nc *nats.Conn, inst string, reply func(*nats.Msg) *nats.Msg) {
	t.Helper()
	sub, err := nc.Subscribe(Subject(inst), func(m *nats.Msg) {
		if r := reply(m); r != nil {
			m.RespondMsg(r)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	nc.Flush()
	t.Cleanup(func() { sub.Unsubscribe() })
}

func TestForwardedReplies(t *testing.T) {
	nc := connect(t)
	send := &batonv1.SendMessageRequest{ThreadId: "thr_1", Text: "hi"}
	method := fullMethod("SendMessage")

	_, err := NewClient(nc, "nobody").Call(t.Context(), method, send)
	if status.Code(err) != codes.Unavailable || !contains(err, "no host writes the shared log now") {
		t.Errorf("no writer: %v, want Unavailable saying no host writes the log", err)
	}

	respond(t, nc, "ok", func(m *nats.Msg) *nats.Msg {
		if m.Header.Get(headerMethod) != method {
			t.Errorf("the method forwarded: %q, want %q", m.Header.Get(headerMethod), method)
		}
		r := nats.NewMsg(m.Reply)
		r.Data = []byte{0x0a, 0x03, 'c', 'm', 'd'} // Receipt{command_id: "cmd"}
		return r
	})
	got, err := NewClient(nc, "ok").Call(t.Context(), method, send)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(&batonv1.Receipt{CommandId: "cmd"}, got, protocmp.Transform()); d != "" {
		t.Errorf("the writer's receipt (-sent +got):\n%s", d)
	}

	respond(t, nc, "refuses", func(m *nats.Msg) *nats.Msg {
		r := nats.NewMsg(m.Reply)
		r.Header.Set(headerCode, "5")
		r.Header.Set(headerMessage, `thread "thr_1" not found`)
		return r
	})
	_, err = NewClient(nc, "refuses").Call(t.Context(), method, send)
	if status.Code(err) != codes.NotFound || status.Convert(err).Message() != `thread "thr_1" not found` {
		t.Errorf("the writer's refusal: %v, want its NotFound and words", err)
	}

	for _, code := range []string{"0", "17", "x"} {
		inst := "bad" + code
		respond(t, nc, inst, func(m *nats.Msg) *nats.Msg {
			r := nats.NewMsg(m.Reply)
			r.Header.Set(headerCode, code)
			return r
		})
		_, err = NewClient(nc, inst).Call(t.Context(), method, send)
		if status.Code(err) != codes.Internal || !contains(err, "bad status code") {
			t.Errorf("status code %q: %v, want Internal naming the bad code", code, err)
		}
	}

	respond(t, nc, "garbled", func(m *nats.Msg) *nats.Msg {
		r := nats.NewMsg(m.Reply)
		r.Data = []byte{0xff, 0xff}
		return r
	})
	_, err = NewClient(nc, "garbled").Call(t.Context(), method, send)
	if status.Code(err) != codes.Internal || !contains(err, "the writer's reply") {
		t.Errorf("a garbled reply: %v, want Internal naming the reply", err)
	}

	quiet := make(chan struct{})
	respond(t, nc, "silent", func(*nats.Msg) *nats.Msg { close(quiet); return nil })
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	_, err = NewClient(nc, "silent").Call(ctx, method, send)
	<-quiet
	if status.Code(err) != codes.DeadlineExceeded || !contains(err, "did not answer in time") {
		t.Errorf("a writer that does not answer: %v, want DeadlineExceeded", err)
	}

	_, err = NewClient(nc, "ok").Call(t.Context(), fullMethod("GetThread"), &batonv1.GetThreadRequest{})
	if status.Code(err) != codes.Unimplemented {
		t.Errorf("a method that is not forwarded: %v, want Unimplemented", err)
	}
}

// Unary forwards what Forwarded names and leaves the rest to the handler.
func TestUnaryForwardsCommandsOnly(t *testing.T) {
	var calls []string
	handler := func(_ context.Context, req any) (any, error) { calls = append(calls, "local"); return req, nil }
	c := NewClient(connect(t), "nobody")
	_, err := c.Unary(t.Context(), &batonv1.GetThreadRequest{}, &grpc.UnaryServerInfo{FullMethod: fullMethod("GetThread")}, handler)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Unary(t.Context(), &batonv1.InterruptRequest{}, &grpc.UnaryServerInfo{FullMethod: fullMethod("Interrupt")}, handler)
	if status.Code(err) != codes.Unavailable {
		t.Errorf("a command with no writer: %v, want Unavailable", err)
	}
	if d := cmp.Diff([]string{"local"}, calls); d != "" {
		t.Errorf("calls answered here (-want +got):\n%s", d)
	}
}

// Every command the API has (a method answered with a Receipt) is
// forwarded: a new one left out would be refused on every follower.
func TestEveryCommandIsForwarded(t *testing.T) {
	sd := batonv1.File_baton_proto.Services().ByName("Baton")
	var commands []string
	for i := range sd.Methods().Len() {
		m := sd.Methods().Get(i)
		if m.Output().FullName() == "baton.v1.Receipt" {
			commands = append(commands, string(m.Name()))
			if !Forwarded(fullMethod(string(m.Name()))) {
				t.Errorf("%s is a command, but a follower does not forward it", m.Name())
			}
		}
	}
	if len(commands) == 0 {
		t.Fatal("the API has no command: the descriptor was not read")
	}
}

func contains(err error, s string) bool {
	return err != nil && strings.Contains(status.Convert(err).Message(), s)
}
