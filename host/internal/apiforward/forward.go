// Package apiforward carries a baton.v1 call that a host cannot answer
// itself to the host that can (the one that owns the call's thread, or
// writes the log), over NATS request/reply on the servers the log is on:
// no new listener, and no host needs to know where another is. Each host
// answers the calls carried to it on its own subject (Serve) as it answers
// its own clients; a host's service asks a Route which host answers each
// call and forwards it there (Client.Unary), returning that host's answer,
// or its error, as if it were its own.
//
// What may be forwarded is what changes the log or reads the files of a
// thread's cwd, which is on the machine of the host that runs the thread
// (Forwarded); reads of the log and subscriptions are each host's own,
// from its replica.
//
// A forwarded call carries the method in a header and the request in its
// protobuf form; the reply carries the response in its protobuf form, or a
// gRPC status code and message in headers. The NATS account the hosts
// share is the trust boundary: a forwarded call is not authenticated again.
package apiforward

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/nats-io/nats.go"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	batonv1 "github.com/baton-run/baton/host/api/baton/v1"
	"github.com/baton-run/baton/host/internal/lease"
)

// Headers of a forwarded call and its reply.
const (
	headerMethod   = "Baton-Method"   // the call's full gRPC method name
	headerTimeout  = "Baton-Timeout"  // how long the caller waits, in milliseconds
	headerCode     = "Baton-Code"     // the reply's gRPC status code (absent: OK)
	headerMessage  = "Baton-Message"  // the reply's status message
	defaultTimeout = 30 * time.Second // a call's bound when its caller gave none
)

// MaxConcurrent bounds the forwarded calls a host runs at once; more
// wait in NATS's pending buffer.
const MaxConcurrent = 64

// HostSubject is where host of installation inst takes forwarded calls.
// It is outside the installation's stream (baton.<inst>.>), which would
// otherwise store every call. A host's name is one token of it, as of its
// lease's key (lease.CheckHost).
func HostSubject(inst, host string) string { return "batonapi." + inst + ".host." + host }

// forwarded are the methods a host may forward: every command (each
// returns a Receipt), and Diff, which reads a thread's cwd.
var forwarded = map[string]bool{}

func init() {
	for _, m := range []string{"CreateThread", "SendMessage", "AnswerRequest", "Interrupt", "CancelQueued", "Rollback",
		"SwitchProvider", "SetPolicy", "Merge", "Archive", "Diff"} {
		forwarded[fullMethod(m)] = true
	}
}

func fullMethod(name string) string { return "/" + batonv1.Baton_ServiceDesc.ServiceName + "/" + name }

// Forwarded says whether a host may forward a method to another.
func Forwarded(fullMethod string) bool { return forwarded[fullMethod] }

// Route says which host answers a Forwarded call: "" for this host (its
// handler runs), else the host the call is forwarded to. An error is the
// call's, returned as it is (a gRPC status, for the client to see its
// code).
type Route func(ctx context.Context, fullMethod string, req any) (host string, err error)

// Client forwards a host's calls to the hosts its Route names.
type Client struct {
	nc    *nats.Conn
	inst  string
	route Route
}

// NewClient forwards calls over nc to the hosts of installation inst that
// route names.
func NewClient(nc *nats.Conn, inst string, route Route) *Client {
	return &Client{nc: nc, inst: inst, route: route}
}

// Unary is a gRPC unary server interceptor: a Forwarded call goes to the
// host the Route names, and its answer is returned as the handler's would
// be; any other call, and one routed to "", is this host's own.
func (c *Client) Unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if !Forwarded(info.FullMethod) {
		return handler(ctx, req)
	}
	host, err := c.route(ctx, info.FullMethod, req)
	if err != nil {
		return nil, err
	}
	if host == "" {
		return handler(ctx, req)
	}
	return c.Call(ctx, host, info.FullMethod, req.(proto.Message))
}

// Call forwards one call to host and returns its response.
func (c *Client) Call(ctx context.Context, host, method string, req proto.Message) (proto.Message, error) {
	if err := lease.CheckHost(host); err != nil {
		return nil, status.Errorf(codes.Internal, "forward %s: %v", method, err)
	}
	out, err := newOutput(method)
	if err != nil {
		return nil, status.Error(codes.Unimplemented, err.Error())
	}
	data, err := proto.Marshal(req)
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "forward %s: %v", method, err)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, defaultTimeout)
		defer cancel()
	}
	deadline, _ := ctx.Deadline()
	msg := nats.NewMsg(HostSubject(c.inst, host))
	msg.Header.Set(headerMethod, method)
	msg.Header.Set(headerTimeout, strconv.FormatInt(time.Until(deadline).Milliseconds(), 10))
	msg.Data = data
	reply, err := c.nc.RequestMsgWithContext(ctx, msg)
	switch {
	case errors.Is(err, nats.ErrNoResponders):
		return nil, status.Errorf(codes.Unavailable, "%s: host %s does not answer: it is not running, or cannot reach the servers", method, host)
	case errors.Is(err, context.DeadlineExceeded):
		return nil, status.Errorf(codes.DeadlineExceeded, "%s: host %s did not answer in time", method, host)
	case errors.Is(err, context.Canceled):
		return nil, status.FromContextError(err).Err()
	case err != nil:
		return nil, status.Errorf(codes.Unavailable, "%s: forward to host %s: %v", method, host, err)
	}
	if code := reply.Header.Get(headerCode); code != "" {
		n, err := strconv.Atoi(code)
		if err != nil || n <= 0 || n > int(codes.Unauthenticated) {
			return nil, status.Errorf(codes.Internal, "%s: host %s's reply has a bad status code %q", method, host, code)
		}
		return nil, status.Error(codes.Code(n), reply.Header.Get(headerMessage))
	}
	if err := proto.Unmarshal(reply.Data, out); err != nil {
		return nil, status.Errorf(codes.Internal, "%s: host %s's reply: %v", method, host, err)
	}
	return out, nil
}

// newOutput is a new message of a forwarded method's response type.
func newOutput(method string) (proto.Message, error) {
	name, ok := strings.CutPrefix(method, "/"+batonv1.Baton_ServiceDesc.ServiceName+"/")
	if !ok || !forwarded[method] {
		return nil, fmt.Errorf("%s is not a forwarded method", method)
	}
	d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(batonv1.Baton_ServiceDesc.ServiceName))
	if err != nil {
		return nil, err
	}
	m := d.(protoreflect.ServiceDescriptor).Methods().ByName(protoreflect.Name(name))
	if m == nil {
		return nil, fmt.Errorf("%s: no such method", method)
	}
	t, err := protoregistry.GlobalTypes.FindMessageByName(m.Output().FullName())
	if err != nil {
		return nil, err
	}
	return t.New().Interface(), nil
}

// Server answers the calls forwarded to a host.
type Server struct {
	sub *nats.Subscription
	sem chan struct{} // a slot per call running

	mu      sync.Mutex
	stopped bool           // guarded by mu: no call starts
	wg      sync.WaitGroup // the calls running
	closing chan struct{}  // closed by Stop: a call waiting for a slot gives up

	ctx    context.Context // the calls'; ends after Stop has waited for them
	cancel context.CancelFunc
}

// Serve answers the calls other hosts of installation inst forward to
// host with srv, until Stop.
func Serve(nc *nats.Conn, inst, host string, srv batonv1.BatonServer, log hclog.Logger) (*Server, error) {
	if err := lease.CheckHost(host); err != nil {
		return nil, fmt.Errorf("take forwarded calls: %w", err)
	}
	subject := HostSubject(inst, host)
	handlers := map[string]grpc.MethodHandler{}
	for _, m := range batonv1.Baton_ServiceDesc.Methods {
		if name := fullMethod(m.MethodName); forwarded[name] {
			handlers[name] = m.Handler
		}
	}
	s := &Server{sem: make(chan struct{}, MaxConcurrent), closing: make(chan struct{})}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	sub, err := nc.Subscribe(subject, func(m *nats.Msg) {
		select {
		case s.sem <- struct{}{}:
		case <-s.closing:
			return
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.stopped {
			<-s.sem
			return
		}
		s.wg.Go(func() {
			defer func() { <-s.sem }()
			s.answer(m, srv, handlers, log)
		})
	})
	if err == nil {
		err = nc.Flush() // the server knows the subscription before the host says it serves
	}
	if err != nil {
		if sub != nil {
			sub.Unsubscribe()
		}
		s.cancel()
		return nil, fmt.Errorf("take forwarded calls on %s: %w", subject, err)
	}
	s.sub = sub
	return s, nil
}

// answer runs one forwarded call and replies.
func (s *Server) answer(m *nats.Msg, srv batonv1.BatonServer, handlers map[string]grpc.MethodHandler, log hclog.Logger) {
	method := m.Header.Get(headerMethod)
	timeout := defaultTimeout
	if ms, err := strconv.ParseInt(m.Header.Get(headerTimeout), 10, 64); err == nil && ms > 0 {
		timeout = time.Duration(ms) * time.Millisecond
	}
	ctx, cancel := context.WithTimeout(s.ctx, timeout)
	defer cancel()
	reply := nats.NewMsg(m.Reply)
	var err error
	if h, ok := handlers[method]; !ok {
		err = status.Errorf(codes.Unimplemented, "this host does not take %q forwarded", method)
	} else {
		var resp any
		resp, err = h(srv, ctx, func(v any) error { return proto.Unmarshal(m.Data, v.(proto.Message)) }, nil)
		if err == nil {
			reply.Data, err = proto.Marshal(resp.(proto.Message))
		}
	}
	if err != nil {
		st := status.Convert(err)
		reply.Header.Set(headerCode, strconv.Itoa(int(st.Code())))
		reply.Header.Set(headerMessage, st.Message())
	}
	if err := m.RespondMsg(reply); err != nil {
		log.Warn("answer a forwarded call", "method", method, "error", err)
	}
}

// Stop takes no more forwarded calls and waits for those running (each
// is bounded by its caller's timeout).
func (s *Server) Stop() {
	s.sub.Unsubscribe()
	s.mu.Lock()
	if !s.stopped {
		s.stopped = true
		close(s.closing)
	}
	s.mu.Unlock()
	s.wg.Wait()
	s.cancel()
}
