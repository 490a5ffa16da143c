package apiforward

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/go-hclog"
	"github.com/nats-io/nats.go"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/testing/protocmp"

	batonv1 "github.com/baton-run/baton/host/api/baton/v1"
	"github.com/baton-run/baton/host/internal/natstest"
)

// The serving side is tested through the real service in cmd/baton
// (TestAFollowerAnswersForTheWriter) and here with a stand-in server;
// these are also the replies a host can get that a working host never
// sends: none, late ones, and damaged ones, each a clear gRPC error.

func connect(t *testing.T) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(natstest.Single(t).URLs())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// respond answers every call forwarded to host of installation inst with
// reply.
func respond(t *testing.T, nc *nats.Conn, inst, host string, reply func(*nats.Msg) *nats.Msg) {
	t.Helper()
	sub, err := nc.Subscribe(HostSubject(inst, host), func(m *nats.Msg) {
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

// to routes every call to host.
func to(host string) Route {
	return func(context.Context, string, any) (string, error) { return host, nil }
}

func TestForwardedReplies(t *testing.T) {
	nc := connect(t)
	send := &batonv1.SendMessageRequest{ThreadId: "thr_1", Text: "hi"}
	method := fullMethod("SendMessage")
	c := NewClient(nc, "test", nil)

	_, err := c.Call(t.Context(), "b", method, send)
	if status.Code(err) != codes.Unavailable || status.Convert(err).Message() !=
		"/baton.v1.Baton/SendMessage: host b does not answer: it is not running, or cannot reach the servers" {
		t.Errorf("no host b: %v, want Unavailable saying host b does not answer", err)
	}

	respond(t, nc, "test", "ok", func(m *nats.Msg) *nats.Msg {
		if m.Header.Get(headerMethod) != method {
			t.Errorf("the method forwarded: %q, want %q", m.Header.Get(headerMethod), method)
		}
		r := nats.NewMsg(m.Reply)
		r.Data = []byte{0x0a, 0x03, 'c', 'm', 'd'} // Receipt{command_id: "cmd"}
		return r
	})
	got, err := c.Call(t.Context(), "ok", method, send)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(&batonv1.Receipt{CommandId: "cmd"}, got, protocmp.Transform()); d != "" {
		t.Errorf("the host's receipt (-sent +got):\n%s", d)
	}

	respond(t, nc, "test", "refuses", func(m *nats.Msg) *nats.Msg {
		r := nats.NewMsg(m.Reply)
		r.Header.Set(headerCode, "5")
		r.Header.Set(headerMessage, `thread "thr_1" not found`)
		return r
	})
	_, err = c.Call(t.Context(), "refuses", method, send)
	if status.Code(err) != codes.NotFound || status.Convert(err).Message() != `thread "thr_1" not found` {
		t.Errorf("the host's refusal: %v, want its NotFound and words", err)
	}

	for _, code := range []string{"0", "17", "x"} {
		host := "bad" + code
		respond(t, nc, "test", host, func(m *nats.Msg) *nats.Msg {
			r := nats.NewMsg(m.Reply)
			r.Header.Set(headerCode, code)
			return r
		})
		_, err = c.Call(t.Context(), host, method, send)
		if status.Code(err) != codes.Internal || !contains(err, "host "+host+"'s reply has a bad status code") {
			t.Errorf("status code %q: %v, want Internal naming the host and the bad code", code, err)
		}
	}

	respond(t, nc, "test", "garbled", func(m *nats.Msg) *nats.Msg {
		r := nats.NewMsg(m.Reply)
		r.Data = []byte{0xff, 0xff}
		return r
	})
	_, err = c.Call(t.Context(), "garbled", method, send)
	if status.Code(err) != codes.Internal || !contains(err, "host garbled's reply") {
		t.Errorf("a garbled reply: %v, want Internal naming the host's reply", err)
	}

	quiet := make(chan struct{})
	respond(t, nc, "test", "silent", func(*nats.Msg) *nats.Msg { close(quiet); return nil })
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	_, err = c.Call(ctx, "silent", method, send)
	<-quiet
	if status.Code(err) != codes.DeadlineExceeded || !contains(err, "host silent did not answer in time") {
		t.Errorf("a host that does not answer: %v, want DeadlineExceeded", err)
	}

	_, err = c.Call(t.Context(), "ok", fullMethod("GetThread"), &batonv1.GetThreadRequest{})
	if status.Code(err) != codes.Unimplemented {
		t.Errorf("a method that is not forwarded: %v, want Unimplemented", err)
	}
	_, err = c.Call(t.Context(), "a.b", method, send)
	if status.Code(err) != codes.Internal || !contains(err, `host name "a.b"`) {
		t.Errorf("a host name a subject cannot hold: %v, want Internal naming it", err)
	}
}

// Unary forwards what Forwarded names, to the host its Route says, and
// leaves the rest to the handler.
func TestUnaryForwardsCommandsOnly(t *testing.T) {
	var calls []string
	handler := func(_ context.Context, req any) (any, error) { calls = append(calls, "local"); return req, nil }
	c := NewClient(connect(t), "test", to("nobody"))
	_, err := c.Unary(t.Context(), &batonv1.GetThreadRequest{}, &grpc.UnaryServerInfo{FullMethod: fullMethod("GetThread")}, handler)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Unary(t.Context(), &batonv1.InterruptRequest{}, &grpc.UnaryServerInfo{FullMethod: fullMethod("Interrupt")}, handler)
	if status.Code(err) != codes.Unavailable || !contains(err, "host nobody does not answer") {
		t.Errorf("a command to a host not running: %v, want Unavailable naming it", err)
	}
	if d := cmp.Diff([]string{"local"}, calls); d != "" {
		t.Errorf("calls answered here (-want +got):\n%s", d)
	}
}

// receipts is a host's stand-in service: its receipts name it and the
// thread.
type receipts struct {
	batonv1.UnimplementedBatonServer
	host string
}

func (r receipts) SendMessage(_ context.Context, req *batonv1.SendMessageRequest) (*batonv1.Receipt, error) {
	return &batonv1.Receipt{CommandId: r.host + ":" + req.GetThreadId()}, nil
}

// serve answers host's forwarded calls with srv until the test ends.
func serve(t *testing.T, nc *nats.Conn, host string, srv batonv1.BatonServer) {
	t.Helper()
	s, err := Serve(nc, "test", host, srv, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
}

// TestEachCallGoesToTheHostItsRouteNames: with hosts a and b serving, a
// call goes to the one the Route names for it, or to this host's handler
// when it names none; a Route's error is the call's.
func TestEachCallGoesToTheHostItsRouteNames(t *testing.T) {
	nc := connect(t)
	serve(t, nc, "a", receipts{host: "a"})
	serve(t, nc, "b", receipts{host: "b"})
	owner := map[string]string{"thr_a": "a", "thr_b": "b", "thr_here": ""}
	var routed []string
	c := NewClient(nc, "test", func(_ context.Context, method string, req any) (string, error) {
		id := req.(*batonv1.SendMessageRequest).GetThreadId()
		routed = append(routed, method+" "+id)
		host, ok := owner[id]
		if !ok {
			return "", status.Errorf(codes.NotFound, "thread %q not found", id)
		}
		return host, nil
	})
	handler := func(_ context.Context, req any) (any, error) {
		return &batonv1.Receipt{CommandId: "here:" + req.(*batonv1.SendMessageRequest).GetThreadId()}, nil
	}
	info := &grpc.UnaryServerInfo{FullMethod: fullMethod("SendMessage")}
	var got []string
	for _, id := range []string{"thr_b", "thr_a", "thr_here", "thr_b", "thr_none"} {
		resp, err := c.Unary(t.Context(), &batonv1.SendMessageRequest{ThreadId: id}, info, handler)
		if err != nil {
			got = append(got, status.Code(err).String()+": "+status.Convert(err).Message())
			continue
		}
		got = append(got, resp.(*batonv1.Receipt).GetCommandId())
	}
	want := []string{"b:thr_b", "a:thr_a", "here:thr_here", "b:thr_b", `NotFound: thread "thr_none" not found`}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("who answered each call (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{
		"/baton.v1.Baton/SendMessage thr_b", "/baton.v1.Baton/SendMessage thr_a", "/baton.v1.Baton/SendMessage thr_here",
		"/baton.v1.Baton/SendMessage thr_b", "/baton.v1.Baton/SendMessage thr_none",
	}, routed); d != "" {
		t.Errorf("the calls routed (-want +got):\n%s", d)
	}
}

func TestServeRefusesAHostNameASubjectCannotHold(t *testing.T) {
	_, err := Serve(connect(t), "test", "b.local", receipts{}, hclog.NewNullLogger())
	if want := `take forwarded calls: host name "b.local": use 1 to 64 letters, digits, - and _`; err == nil || err.Error() != want {
		t.Errorf("Serve on host b.local: %v, want %q", err, want)
	}
}

// Every command the API has (a method answered with a Receipt) is
// forwarded to the host its Route names: a new one left out would be
// answered by a host that does not run the thread. Host b's stand-in
// answers each as not implemented, naming it.
func TestEveryCommandIsForwarded(t *testing.T) {
	nc := connect(t)
	serve(t, nc, "b", receipts{host: "b"})
	c := NewClient(nc, "test", to("b"))
	sd := batonv1.File_baton_proto.Services().ByName("Baton")
	var commands []string
	for i := range sd.Methods().Len() {
		m := sd.Methods().Get(i)
		if m.Output().FullName() != "baton.v1.Receipt" {
			continue
		}
		commands = append(commands, string(m.Name()))
		in, err := protoregistry.GlobalTypes.FindMessageByName(m.Input().FullName())
		if err != nil {
			t.Fatal(err)
		}
		local := errors.New("answered by this host")
		handler := func(context.Context, any) (any, error) { return nil, local }
		_, err = c.Unary(t.Context(), in.New().Interface(), &grpc.UnaryServerInfo{FullMethod: fullMethod(string(m.Name()))}, handler)
		switch {
		case m.Name() == "SendMessage":
			if err != nil {
				t.Errorf("SendMessage forwarded to b: %v", err)
			}
		case errors.Is(err, local):
			t.Errorf("%s is a command, but it is not forwarded", m.Name())
		case status.Code(err) != codes.Unimplemented || status.Convert(err).Message() != "method "+string(m.Name())+" not implemented":
			t.Errorf("%s forwarded to b: %v, want b's stand-in's Unimplemented", m.Name(), err)
		}
	}
	if len(commands) == 0 {
		t.Fatal("the API has no command: the descriptor was not read")
	}
}

func contains(err error, s string) bool {
	return err != nil && strings.Contains(status.Convert(err).Message(), s)
}
