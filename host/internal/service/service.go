// Package service is the host's gRPC API (baton.v1): the server behind
// `baton serve` and behind every CLI verb that embeds the host.
package service

import (
	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"

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
}

// Server answers baton.v1 over one host.
type Server struct {
	batonv1.UnimplementedBatonServer

	host *orchestrator.Host
	log  hclog.Logger
	clk  clock.Clock
}

// New returns a server over h.
func New(h *orchestrator.Host, opts Options) *Server {
	if opts.Logger == nil {
		opts.Logger = hclog.NewNullLogger()
	}
	if opts.Clock == nil {
		opts.Clock = h.Clock()
	}
	return &Server{host: h, log: opts.Logger, clk: opts.Clock}
}

// Register registers the Baton service on g.
func (s *Server) Register(g *grpc.Server) {
	batonv1.RegisterBatonServer(g, s)
}
