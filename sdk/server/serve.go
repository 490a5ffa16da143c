// Package server serves a provider Adapter to a Baton host: Serve is what a
// plugin's main calls. It sets up go-plugin (gRPC, the handshake, the
// negotiated protocol version), checks that the adapter's declared
// capabilities are the ones it implements, numbers and buffers each
// session's events for the host, and closes every session when the host
// goes away.
package server

import (
	"context"
	"fmt"
	"math"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/baton-run/baton/sdk"
	"github.com/baton-run/baton/sdk/clock"
	"github.com/baton-run/baton/sdk/internal/wire"
)

// Option configures Serve.
type Option func(*serveConfig)

type serveConfig struct {
	logger hclog.Logger
	test   *plugin.ServeTestConfig
	clock  clock.Clock
}

// WithLogger sets the logger the sdk logs with. Use NewLogger for one the
// host understands.
func WithLogger(l hclog.Logger) Option { return func(c *serveConfig) { c.logger = l } }

// WithClock sets the clock the plugin's shutdown reads: how often it looks
// for its parent, how long it spends closing sessions (default: the
// system clock).
func WithClock(c clock.Clock) Option { return func(cfg *serveConfig) { cfg.clock = c } }

// NewLogger returns the logger a plugin should use: JSON lines on stderr,
// which the host reads and re-logs under the plugin's name.
func NewLogger(name string) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{
		Name:       name,
		Level:      hclog.Trace,
		Output:     os.Stderr,
		JSONFormat: true,
	})
}

// Serve serves the adapter to a Baton host over go-plugin (gRPC only,
// mutual TLS set up by the host) and returns when the host is done with it.
// It must be called from main, before anything is written to stdout:
//
//	func main() {
//		log := server.NewLogger("myagent")
//		if err := server.Serve(myagent.New(log), server.WithLogger(log)); err != nil {
//			log.Error("serve", "error", err)
//			os.Exit(1)
//		}
//	}
//
// It returns an error, before serving anything, for an adapter that
// cannot be served: one whose description lacks a name, version or wire
// protocol, or whose declared capabilities are not the ones it implements
// (sdk.CheckCapabilities). Started by hand rather than by a host, the
// plugin says so and exits 1 (go-plugin's handshake check).
func Serve(a sdk.Adapter, opts ...Option) error {
	cfg := serveConfig{}
	for _, o := range opts {
		o(&cfg)
	}
	if err := check(a); err != nil {
		return err
	}
	if cfg.logger == nil {
		cfg.logger = NewLogger(a.Describe().Name)
	}
	clk := clock.Or(cfg.clock)
	stopProfile := startProfile(cfg.logger)
	defer stopProfile()
	stop, cancel := context.WithCancel(context.Background())
	srv := newServer(stop, a, cfg.logger)
	go exitWithHost(stop, srv, cfg.logger, clk, stopProfile)
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig:  wire.Handshake(sdk.ProtocolVersion),
		VersionedPlugins: wire.Plugins(srv, nil),
		GRPCServer:       grpcServer,
		Logger:           cfg.logger,
		Test:             cfg.test,
	})
	// The host is gone (or done): stop every provider process still running.
	cancel()
	srv.closeAll(clk, shutdownTimeout)
	return nil
}

// grpcServer is the plugin's gRPC server. It takes requests of any size,
// as go-plugin's client (the host's side) sends them: the host is its only
// caller, over a connection of their own, and bounds what it sends itself
// (a user's message is at most 16 MiB). gRPC's default of 4 MiB failed the
// turn of a long pasted log.
func grpcServer(opts []grpc.ServerOption) *grpc.Server {
	return grpc.NewServer(append(opts, grpc.MaxRecvMsgSize(math.MaxInt32))...)
}

// check is what Serve refuses to serve.
func check(a sdk.Adapter) error {
	d := a.Describe()
	if d.Name == "" || d.Version == "" || d.WireProtocol == "" {
		return fmt.Errorf("serve plugin: its description must name it, its version and its wire protocol, got name %q, version %q, wire protocol %q",
			d.Name, d.Version, d.WireProtocol)
	}
	if err := sdk.CheckCapabilities(a); err != nil {
		return fmt.Errorf("serve plugin: %w", err)
	}
	return nil
}

// exitWithHost ends the plugin, after closing its sessions, when the host
// is gone without telling it: on SIGTERM (what Linux sends when the host
// dies, see Launch) or when the plugin's parent changes.
func exitWithHost(stop context.Context, srv *server, log hclog.Logger, clk clock.Clock, stopProfile func()) {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM)
	defer signal.Stop(sig)
	why, gone := hostGone(stop, clk, sig, os.Getppid)
	if !gone {
		return
	}
	log.Info(why + "; closing sessions")
	srv.closeAll(clk, shutdownTimeout)
	stopProfile()
	os.Exit(0)
}

// parentPoll is how often the plugin looks whether its parent changed.
const parentPoll = time.Second

// hostGone waits until the host is gone: a signal on sig, or ppid (the
// parent's pid) changed, looked at every parentPoll on clk. It says why,
// or returns false when stop ends first.
func hostGone(stop context.Context, clk clock.Clock, sig <-chan os.Signal, ppid func() int) (string, bool) {
	parent := ppid()
	for {
		t := clk.NewTimer(parentPoll)
		select {
		case <-stop.Done():
			t.Stop()
			return "", false
		case s := <-sig:
			t.Stop()
			return fmt.Sprintf("%v", s), true
		case <-t.C():
			if p := ppid(); p != parent {
				return fmt.Sprintf("the host is gone (parent %d, now %d)", parent, p), true
			}
		}
	}
}

// shutdownTimeout bounds how long a plugin spends closing its sessions when
// the host goes away; providerproc's grace periods fit inside it.
const shutdownTimeout = 10 * time.Second
