package sdk

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/baton-run/baton/sdk/clock"
	pb "github.com/baton-run/baton/sdk/internal/pluginpb"
)

// ProtocolVersion is the version of the plugin wire contract this sdk
// speaks. It changes only when an old host could no longer talk to a new
// plugin (or the other way round); adding fields does not change it.
const ProtocolVersion = 1

// pluginKey names the one plugin a Baton plugin binary serves.
const pluginKey = "provider"

// Handshake is the go-plugin handshake. The cookie only keeps a user from
// running a plugin binary by hand by mistake; it is not a secret.
var Handshake = plugin.HandshakeConfig{
	MagicCookieKey:   "BATON_PLUGIN",
	MagicCookieValue: "4a1d7c0e2b9f4e51a3c86d07f2e9b815",
}

// ServeOpt configures Serve.
type ServeOpt func(*serveConfig)

type serveConfig struct {
	logger hclog.Logger
	test   *plugin.ServeTestConfig
	clock  clock.Clock
}

// WithLogger sets the logger the sdk logs with. Use NewLogger for one the
// host understands.
func WithLogger(l hclog.Logger) ServeOpt { return func(c *serveConfig) { c.logger = l } }

// WithClock sets the clock the plugin's shutdown reads: how often it looks
// for its parent, how long it spends closing sessions (default: the
// system clock).
func WithClock(c clock.Clock) ServeOpt { return func(cfg *serveConfig) { cfg.clock = c } }

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
// It must be called from main, before anything is written to stdout.
func Serve(a Adapter, opts ...ServeOpt) {
	cfg := serveConfig{}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.logger == nil {
		cfg.logger = NewLogger(a.Describe().Name)
	}
	clk := clock.Or(cfg.clock)
	stop, cancel := context.WithCancel(context.Background())
	srv := newServer(stop, a, cfg.logger)
	go exitWithHost(stop, srv, cfg.logger, clk)
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig: Handshake,
		VersionedPlugins: map[int]plugin.PluginSet{
			ProtocolVersion: {pluginKey: &grpcPlugin{server: srv}},
		},
		GRPCServer: plugin.DefaultGRPCServer,
		Logger:     cfg.logger,
		Test:       cfg.test,
	})
	// The host is gone (or done): stop every provider process still running.
	cancel()
	srv.closeAll(clk, shutdownTimeout)
}

// exitWithHost ends the plugin, after closing its sessions, when the host
// is gone without telling it: on SIGTERM (what Linux sends when the host
// dies, see Launch) or when the plugin's parent changes.
func exitWithHost(stop context.Context, srv *server, log hclog.Logger, clk clock.Clock) {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM)
	defer signal.Stop(sig)
	why, gone := hostGone(stop, clk, sig, os.Getppid)
	if !gone {
		return
	}
	log.Info(why + "; closing sessions")
	srv.closeAll(clk, shutdownTimeout)
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

// grpcPlugin is the go-plugin glue. The plugin side sets server; the host
// side uses GRPCClient only.
type grpcPlugin struct {
	plugin.NetRPCUnsupportedPlugin
	server *server
}

func (p *grpcPlugin) GRPCServer(_ *plugin.GRPCBroker, s *grpc.Server) error {
	pb.RegisterProviderServer(s, p.server)
	return nil
}

// GRPCClient's ctx is cancelled when the plugin process exits.
func (p *grpcPlugin) GRPCClient(ctx context.Context, _ *plugin.GRPCBroker, c *grpc.ClientConn) (any, error) {
	return &Client{rpc: pb.NewProviderClient(c), exited: ctx}, nil
}
