// Package service is the host's gRPC API (baton.v1): the server behind
// `baton serve` and behind every CLI verb that embeds the host.
//
// The files: commands.go the commands, reads.go the reads, subscribe.go
// the event streams, status.go how errors become gRPC codes, convert.go
// the conversions; serve.go, listen.go and auth.go run the service on its
// listeners (Run).
package service

import (
	"context"
	"errors"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/status"

	batonv1 "github.com/baton-run/baton/host/api/baton/v1"
	"github.com/baton-run/baton/host/internal/orchestrator"
	"github.com/baton-run/baton/sdk/clock"
)

// Options configures a Server. The zero value works.
type Options struct {
	Logger hclog.Logger
	// Clock times how long a subscriber may stay behind (default: the
	// host's clock).
	Clock clock.Clock
	// SlowSubscriber is how long a subscriber's buffer may stay full
	// before its stream is ended with ResourceExhausted (default 30s).
	SlowSubscriber time.Duration
	// SubscriberBuffer is how many events wait for a subscriber while it
	// is behind (default 1024).
	SubscriberBuffer int
	// MaxSubscribers bounds the subscriptions open at once, of every
	// thread and of the whole log (default DefaultMaxSubscribers); one
	// more is refused with ResourceExhausted.
	MaxSubscribers int
	// MaxThreadSubscribers bounds the subscriptions open at once to one
	// thread (default DefaultMaxThreadSubscribers).
	MaxThreadSubscribers int
	// Version is baton's version, as GetStatus says it.
	Version string
	// Store is where the host's event log is kept, as GetStatus says it
	// (nil: the Pebble store in the data dir).
	Store *batonv1.StoreStatus
	// Coordinator, when set, says which host coordinates a shared log now
	// (the installation lease's holder), for GetStatus.
	Coordinator func(context.Context) (string, error)
}

// Defaults of Options. A subscriber costs little while it keeps up (two
// goroutines and its buffer's slots), and at most its buffer's events and
// a page of the log while it is behind; the bounds leave room for every
// terminal, editor and dashboard of a machine, and stop a client that
// leaks subscriptions before it holds the service's memory.
const (
	DefaultSlowSubscriber       = 30 * time.Second
	DefaultSubscriberBuffer     = 1024
	DefaultMaxSubscribers       = 1024
	DefaultMaxThreadSubscribers = 64
)

// Service is baton.v1's full name, as health and reflection know it.
const Service = "baton.v1.Baton"

// Server answers baton.v1 over one host.
type Server struct {
	batonv1.UnimplementedBatonServer

	host   *orchestrator.Host
	log    hclog.Logger
	clk    clock.Clock
	slow   time.Duration
	buffer int
	subs   subscribers
	health *health.Server

	// What GetStatus says of the service: its version, and since when and
	// where it serves (Serving; New's time and none until then).
	version     string
	store       *batonv1.StoreStatus
	coordinator func(context.Context) (string, error)
	started     time.Time
	listeners   []*batonv1.Listener

	// sessions are the browsers' sign-ins (session.go; nil until Run
	// makes them).
	sessions *sessions

	// stopping ends when the service shuts down: subscriptions end with
	// Unavailable.
	stopping context.Context
	stop     context.CancelFunc
}

// New returns a server over h.
func New(h *orchestrator.Host, opts Options) *Server {
	if opts.Logger == nil {
		opts.Logger = hclog.NewNullLogger()
	}
	if opts.Clock == nil {
		opts.Clock = h.Clock()
	}
	if opts.SlowSubscriber <= 0 {
		opts.SlowSubscriber = DefaultSlowSubscriber
	}
	if opts.SubscriberBuffer <= 0 {
		opts.SubscriberBuffer = DefaultSubscriberBuffer
	}
	if opts.MaxSubscribers <= 0 {
		opts.MaxSubscribers = DefaultMaxSubscribers
	}
	if opts.MaxThreadSubscribers <= 0 {
		opts.MaxThreadSubscribers = DefaultMaxThreadSubscribers
	}
	stopping, stop := context.WithCancel(context.Background())
	s := &Server{host: h, log: opts.Logger, clk: opts.Clock, slow: opts.SlowSubscriber, buffer: opts.SubscriberBuffer,
		subs:   subscribers{max: opts.MaxSubscribers, perThread: opts.MaxThreadSubscribers, byThread: map[string]int{}},
		health: health.NewServer(), version: opts.Version, store: opts.Store, coordinator: opts.Coordinator, started: opts.Clock.Now(), stopping: stopping, stop: stop}
	go s.watchHost() // ends at Shutdown, or when the host's store fails
	return s
}

// watchHost shuts the server down when the host's event store fails
// (orchestrator's storefail.go): health says NOT_SERVING at once, and
// every subscription ends with Unavailable, saying why (shutdownStatus);
// commands are refused by the host. Its owner (Run) then stops.
func (s *Server) watchHost() {
	select {
	case <-s.host.Failed():
		s.Shutdown()
	case <-s.stopping.Done():
	}
}

// shutdownStatus is how a subscription ends when the service stops.
func (s *Server) shutdownStatus() error {
	if msg, ok := storeFailed(s.host.Failure()); ok {
		return status.Error(codes.Unavailable, msg+"; subscribe again after the last sequence you received once it is back")
	}
	return status.Error(codes.Unavailable, "service shutting down; subscribe again after the last sequence you received")
}

// storeFailed is the message of a call refused because the host's event
// store failed.
func storeFailed(err error) (string, bool) {
	var f *orchestrator.StoreFailedError
	if !errors.As(err, &f) {
		return "", false
	}
	return "the event store failed and the service is stopping (it exits 1, for its supervisor to start it again; " +
		"the next start recovers what was in flight): " + f.Cause.Error(), true
}

// Serving records where the service listens, from now: what GetStatus
// says. It is called before the listeners serve.
func (s *Server) Serving(listeners []*batonv1.Listener) {
	s.started, s.listeners = s.clk.Now(), listeners
}

// Register registers the Baton service on g, with gRPC health (SERVING
// for "" and baton.v1.Baton) and server reflection, so that grpcurl
// works against it.
func (s *Server) Register(g *grpc.Server) {
	batonv1.RegisterBatonServer(g, s)
	healthpb.RegisterHealthServer(g, s.health)
	s.health.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	s.health.SetServingStatus(Service, healthpb.HealthCheckResponse_SERVING)
	reflection.Register(g)
}

// NotServing makes health say NOT_SERVING: what a drain says first, while
// the host's runs end and subscribers still see them.
func (s *Server) NotServing() { s.health.Shutdown() }

// Shutdown begins a drain: health says NOT_SERVING and every subscription
// ends with Unavailable ("service shutting down"). Commands still in
// flight finish; the caller stops the gRPC server next.
func (s *Server) Shutdown() {
	s.health.Shutdown()
	s.stop()
}
