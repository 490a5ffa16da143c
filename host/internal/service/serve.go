package service

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"

	batonv1 "github.com/baton-run/baton/host/api/baton/v1"
	"github.com/baton-run/baton/host/internal/eventlog"
	"github.com/baton-run/baton/host/internal/notify"
	"github.com/baton-run/baton/host/internal/orchestrator"
	"github.com/baton-run/baton/host/internal/rawframes"
	"github.com/baton-run/baton/sdk/clock"
)

// Config configures Run: `baton serve`'s flags.
type Config struct {
	// DataDir holds the event log, the socket and the token; it is made
	// 0700, and refused when others than its owner may reach it (read,
	// write or search it: orchestrator.CheckDataDir).
	DataDir string
	// Command is what the service runs as ("baton serve"), for the data
	// dir's pid file (orchestrator.Config.Command).
	Command string
	// Listen adds listeners: unix:///PATH (replacing DATA/baton.sock) and
	// tcp://HOST:PORT (always with the token; TLS unless on loopback).
	Listen []string
	// TokenFile holds the bearer token TCP callers send (default
	// DATA/token, made on first use).
	TokenFile string
	// TLSCert and TLSKey serve TCP over TLS.
	TLSCert, TLSKey string
	// IdleTimeout is how long an idle provider session stays open.
	IdleTimeout time.Duration
	PluginDirs  []string
	Logger      hclog.Logger
	// RawFrames is the host's raw-frame logs' policy (orchestrator.Config).
	RawFrames rawframes.Policy
	// InterruptGrace is how long an interrupted provider has before the
	// host ends its process (orchestrator.Config).
	InterruptGrace time.Duration
	// TurnStallTimeout and RequestTimeout end a turn whose provider is
	// silent and answer a request nobody answers (orchestrator.Config; 0:
	// never).
	TurnStallTimeout, RequestTimeout time.Duration
	// Clock is the host's clock, and the drain's (default clock.System).
	Clock clock.Clock
	// StoreFS is the file system the host's event log runs on
	// (orchestrator.Config): tests give one that fails under the running
	// service; nothing else sets it.
	StoreFS vfs.FS
	// OpenLog, when set, opens the host's event log in place of the
	// Pebble store in DATA/events (orchestrator.Config): `baton serve
	// --store` gives the log shared with other hosts.
	OpenLog func() (eventlog.Log, error)
	// Store is where the event log is kept, as GetStatus says it (nil:
	// the Pebble store in the data dir).
	Store *batonv1.StoreStatus
	// Forward, when set, makes what runs before every unary call (after
	// the token's check) on a shared log: it carries a call to the host
	// that must answer it, which route says (Route: the host that owns the
	// call's thread; "" for this one).
	Forward func(route func(ctx context.Context, fullMethod string, req any) (string, error)) grpc.UnaryServerInterceptor
	// Attach, when set, is called once the service serves, with the
	// service, to answer calls that come another way than its listeners
	// (a writer's forwarded calls); the drain calls stop first.
	Attach func(batonv1.BatonServer) (stop func(), err error)
	// Host names this host on a shared log: the threads it creates are
	// its own, and the runs it starts record it.
	Host string
	// Beside, when set, runs beside the service from when it serves until
	// it stops (its ctx ends before the drain, and the service waits for
	// it to return): a shared log's coordination, which works on the host.
	Beside func(ctx context.Context, host *orchestrator.Host)
	// Coordinator says which host coordinates a shared log now: the
	// installation lease's holder (GetStatus).
	Coordinator func(context.Context) (string, error)
	// Notify is where the service posts the events that need a person
	// (webhooks: the notify package). Deliveries the log holds for URLs
	// that are not among its targets are dropped as it starts.
	Notify notify.Config
	// Ready, when set, is called once every listener listens, with their
	// addresses (unix:///PATH, tcp://HOST:PORT).
	Ready func(addrs []string)
	// Version is baton's version, as GetStatus says it.
	Version string
	// Pages is the dashboard a browser gets on the TCP listeners (web.go):
	// its index.html and what that loads. Nil: the API and sign-in only.
	Pages fs.FS

	// The service's bounds: what a client, or many, may hold of it. Each
	// is a default when zero (Defaults of Options, and below).
	//
	// MaxConnections bounds the client connections open at once, over
	// every listener; one more is closed as it is accepted, and the log
	// says so.
	MaxConnections int
	// MaxStreams bounds the calls in flight on one connection
	// (subscriptions among them): HTTP/2's MAX_CONCURRENT_STREAMS.
	MaxStreams int
	// ConnectionIdleTimeout closes a connection that has had no call in
	// flight for this long (the client connects again when it next
	// calls); 0: never. A subscription is a call in flight.
	ConnectionIdleTimeout time.Duration
	// Keepalive is how long a connection may be silent before the service
	// pings its client; KeepaliveTimeout how long the client then has to
	// answer before its connection is closed (and its subscriptions
	// end): a client that went away without a word holds nothing for
	// long. gRPC pings at most once a second.
	Keepalive, KeepaliveTimeout time.Duration
	// Subscriptions (Options): how many, and how far behind one may fall.
	MaxSubscribers, MaxThreadSubscribers int
	SubscriberBuffer                     int
	SlowSubscriber                       time.Duration
}

// Defaults of Config's bounds.
const (
	// DefaultMaxConnections leaves room for every terminal, editor and
	// script of a machine, each of which holds one connection.
	DefaultMaxConnections = 256
	// DefaultMaxStreams is above what one client does at once (a
	// dashboard follows each thread it shows on one connection).
	DefaultMaxStreams = 256
	// DefaultKeepalive and DefaultKeepaliveTimeout find a client gone
	// without a word within a minute and a half.
	DefaultKeepalive        = time.Minute
	DefaultKeepaliveTimeout = 20 * time.Second
	// keepaliveMinTime is how often a client may ping the service, at
	// most: more often is a flood, and the connection is closed (gRPC's
	// too_many_pings). Pings without a call in flight are allowed: a
	// client may check an idle connection.
	keepaliveMinTime = 10 * time.Second
)

// webIdleTimeout closes a browser's connection that has had no request
// for this long.
const webIdleTimeout = 5 * time.Minute

// DrainTimeout bounds how long a drain waits for calls in flight before
// it ends them.
const DrainTimeout = 10 * time.Second

// Run runs the service until ctx ends, then drains: health says
// NOT_SERVING, no new call is taken, subscriptions end with Unavailable,
// calls in flight get DrainTimeout to finish, and the host closes (its
// sessions' ends recorded). It returns nil after a drain that ctx asked
// for, or why the service could not start or stopped serving.
//
// A host whose event store fails stops at once (orchestrator's
// storefail.go: commands refused, providers killed), and so does Run, the
// same way, with nothing left to drain: health has said NOT_SERVING and
// the subscriptions have ended from the moment of the failure (the
// Server's watchHost); Run returns the failure, for `baton serve` to exit
// 1 and its supervisor to start it again, which recovers.
func Run(ctx context.Context, cfg Config) error {
	if cfg.DataDir == "" {
		return errors.New("serve: no data dir")
	}
	if abs, err := filepath.Abs(cfg.DataDir); err == nil {
		cfg.DataDir = abs // its socket's address, and what GetStatus says, hold for a client elsewhere
	}
	log := cfg.Logger
	if log == nil {
		log = hclog.NewNullLogger()
	}
	clk := clock.Or(cfg.Clock)
	eps, err := parseListen(cfg.DataDir, cfg.Listen)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	tlsConf, err := loadTLS(cfg.TLSCert, cfg.TLSKey)
	if err != nil {
		return fmt.Errorf("serve: %w", &ConfigError{Err: err})
	}
	tcp := false
	for _, ep := range eps {
		if ep.network != "tcp" {
			continue
		}
		tcp = true
		if host, _, _ := net.SplitHostPort(ep.addr); tlsConf == nil && !isLoopback(host) {
			return fmt.Errorf("serve: %w", configErrorf("listen %s: an address other than loopback needs TLS (a certificate and key)", ep))
		}
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return fmt.Errorf("serve: data dir: %w", err)
	}
	if err := orchestrator.CheckDataDir(cfg.DataDir); err != nil {
		return fmt.Errorf("serve: %w; refusing to serve from it: chmod 700 %s", err, cfg.DataDir)
	}
	for _, ep := range eps {
		if ep.network != "unix" {
			continue
		}
		if err := checkDir("socket dir", filepath.Dir(ep.addr)); err != nil {
			return fmt.Errorf("serve: %w", err)
		}
		if err := clearSocket(ep.addr); err != nil {
			return fmt.Errorf("serve: %w", err)
		}
	}
	var token string
	if tcp {
		if token, err = loadToken(cfg.DataDir, cfg.TokenFile); err != nil {
			return fmt.Errorf("serve: %w", err)
		}
	}

	host, err := orchestrator.Open(orchestrator.Config{DataDir: cfg.DataDir, Command: cfg.Command, PluginDirs: cfg.PluginDirs, Logger: log, Clock: clk, Unattended: true,
		IdleTimeout: cfg.IdleTimeout, RawFrames: cfg.RawFrames, InterruptGrace: cfg.InterruptGrace, StoreFS: cfg.StoreFS,
		TurnStallTimeout: cfg.TurnStallTimeout, RequestTimeout: cfg.RequestTimeout, Notify: &cfg.Notify, OpenLog: cfg.OpenLog,
		Host: cfg.Host})
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	srv := New(host, Options{Logger: log.Named("service"), Clock: clk, Version: cfg.Version, Store: cfg.Store, Coordinator: cfg.Coordinator,
		MaxSubscribers: cfg.MaxSubscribers, MaxThreadSubscribers: cfg.MaxThreadSubscribers,
		SubscriberBuffer: cfg.SubscriberBuffer, SlowSubscriber: cfg.SlowSubscriber})
	auth := &authenticator{token: token, log: log.Named("auth")}
	unary := []grpc.UnaryServerInterceptor{auth.unary}
	if cfg.Forward != nil {
		unary = append(unary, readOwnWrites(host, cfg.Forward(Route(host))))
	}
	g := grpc.NewServer(grpc.ChainUnaryInterceptor(unary...), grpc.ChainStreamInterceptor(auth.stream), grpc.MaxRecvMsgSize(maxRequest),
		grpc.MaxConcurrentStreams(uint32(cmp.Or(cfg.MaxStreams, DefaultMaxStreams))),
		grpc.KeepaliveParams(keepalive.ServerParameters{
			MaxConnectionIdle: cfg.ConnectionIdleTimeout, // 0: gRPC's infinity
			Time:              cmp.Or(cfg.Keepalive, DefaultKeepalive),
			Timeout:           cmp.Or(cfg.KeepaliveTimeout, DefaultKeepaliveTimeout),
		}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: keepaliveMinTime, PermitWithoutStream: true}))
	srv.Register(g)
	srv.sessions = newSessions(clk)
	var web *http.Server
	if tcp {
		h, err := newWebHandler(g, srv.sessions, cfg.Pages, token, tlsConf != nil, log.Named("web"))
		if err != nil {
			host.Close()
			return fmt.Errorf("serve: %w", err)
		}
		web = &http.Server{Handler: h, ReadHeaderTimeout: splitTimeout, IdleTimeout: webIdleTimeout, MaxHeaderBytes: 64 << 10,
			ErrorLog: log.Named("web").StandardLogger(&hclog.StandardLoggerOptions{ForceLevel: hclog.Debug})}
	}
	conns := newConnLimit(cmp.Or(cfg.MaxConnections, DefaultMaxConnections), log.Named("service"))

	var lis, webLis []net.Listener
	var addrs []string
	var status []*batonv1.Listener
	for _, ep := range eps {
		l, err := listen(ep, conns)
		if err != nil {
			for _, l := range append(lis, webLis...) {
				l.Close()
			}
			host.Close()
			return fmt.Errorf("serve: %w", err)
		}
		addrs = append(addrs, addrOf(ep, l))
		onTCP := ep.network == "tcp"
		status = append(status, &batonv1.Listener{Address: addrOf(ep, l), Tls: onTCP && tlsConf != nil, Token: onTCP})
		if onTCP {
			gl, wl := split(l, tlsConf)
			l = gl
			webLis = append(webLis, wl)
		}
		lis = append(lis, l)
	}
	srv.Serving(status)
	detach := func() {}
	if cfg.Attach != nil {
		if detach, err = cfg.Attach(srv); err != nil {
			g.Stop()
			for _, l := range append(lis, webLis...) {
				l.Close()
			}
			host.Close()
			return fmt.Errorf("serve: %w", err)
		}
	}
	served := make(chan error, len(lis)+len(webLis))
	for _, l := range lis {
		go func() { served <- g.Serve(l) }()
	}
	for _, l := range webLis {
		go func() {
			err := web.Serve(l)
			if errors.Is(err, http.ErrServerClosed) {
				err = nil
			}
			served <- err
		}()
	}
	log.Info("serving", "addrs", addrs, "data_dir", cfg.DataDir, "tls", tlsConf != nil)
	if cfg.Ready != nil {
		cfg.Ready(addrs)
	}

	besideCtx, endBeside := context.WithCancel(ctx)
	besideDone := make(chan struct{})
	go func() { // owned here: endBeside ends it, and the stop waits for it
		defer close(besideDone)
		if cfg.Beside != nil {
			cfg.Beside(besideCtx, host)
		}
	}()

	var runErr error
	pending := len(lis) + len(webLis)
	select {
	case <-ctx.Done():
	case err := <-served:
		pending--
		runErr = fmt.Errorf("serve: %w", err)
		log.Error("a listener failed; stopping", "error", err)
	case <-host.Failed():
		runErr = storeFailure(host.Failure())
		log.Error("the event store failed; stopping", "error", host.Failure())
	}
	srv.NotServing()
	endBeside()
	<-besideDone
	detach()
	if host.Failure() == nil {
		log.Info("draining: active runs are asked to stop", "timeout", orchestrator.DrainTimeout)
		host.Drain() // subscribers see the runs end
	}
	log.Info("draining: ending the calls", "timeout", DrainTimeout)
	srv.Shutdown()
	stopped := make(chan struct{})
	webCtx, endWeb := context.WithCancel(context.Background())
	defer endWeb()
	go func() {
		var wg sync.WaitGroup
		if web != nil {
			wg.Go(func() { web.Shutdown(webCtx) })
		}
		g.GracefulStop()
		wg.Wait()
		close(stopped)
	}()
	t := clk.NewTimer(DrainTimeout)
	select {
	case <-stopped:
	case <-t.C():
		log.Warn("calls still running after the drain timeout; ending them", "timeout", DrainTimeout)
		endWeb()
		if web != nil {
			web.Close()
		}
		g.Stop()
		<-stopped
	}
	t.Stop()
	for ; pending > 0; pending-- {
		<-served
	}
	if err := host.Close(); err != nil && runErr == nil {
		runErr = fmt.Errorf("serve: close host: %w", err)
		var f *orchestrator.StoreFailedError
		if errors.As(err, &f) { // it failed as the service drained
			runErr = storeFailure(f)
		}
	}
	log.Info("stopped")
	return runErr
}

// readOwnWrites runs a forward, and after a command another host took,
// waits until this host shows the log through the command's receipt: a
// client that reads here next sees what its command did.
func readOwnWrites(host *orchestrator.Host, forward grpc.UnaryServerInterceptor) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		resp, err := forward(ctx, req, info, handler)
		if rc, ok := resp.(*batonv1.Receipt); ok && err == nil {
			if err := host.WaitFollowed(ctx, rc.GetSequence()); err != nil {
				return nil, status.Errorf(codeOf(err), "%s: the host that runs the thread took the command (receipt at %d), but this host did not show it: %v",
					info.FullMethod, rc.GetSequence(), err)
			}
		}
		return resp, err
	}
}

// Route says which host must answer a call, on a log several hosts share:
// the one that owns the thread the call names, or the one a new thread is
// asked to run on (on_host); "" for this host. A thread this host does not
// know (yet) is answered here, and a thread no host owns.
func Route(host *orchestrator.Host) func(ctx context.Context, fullMethod string, req any) (string, error) {
	here := host.HostName()
	return func(ctx context.Context, fullMethod string, req any) (string, error) {
		thread := ""
		if r, ok := req.(interface{ GetThreadId() string }); ok {
			thread = r.GetThreadId()
		}
		if r, ok := req.(*batonv1.AnswerRequestRequest); ok && thread == "" {
			thread, _ = host.RequestThread(r.GetRequestId()) // not found: answered here
		}
		if thread != "" {
			if owner, err := host.Owner(thread); err == nil {
				if owner == here {
					return "", nil
				}
				return owner, nil
			}
		}
		if r, ok := req.(interface{ GetOnHost() string }); ok && r.GetOnHost() != here {
			return r.GetOnHost(), nil // "" too: here
		}
		return "", nil
	}
}

// storeFailure is what Run returns when the host's event store failed.
func storeFailure(err error) error {
	var f *orchestrator.StoreFailedError
	if !errors.As(err, &f) {
		return fmt.Errorf("serve: %w", err) // unreachable: a host's failure is a *StoreFailedError
	}
	err = fmt.Errorf("serve: the event store failed: %w; the service stopped, for its supervisor to start it again "+
		"(the next start recovers what was in flight)", f.Cause)
	if errors.Is(err, eventlog.ErrDamaged) {
		err = fmt.Errorf("%w; run `baton doctor` to check the store", err)
	}
	return err
}

// loadTLS reads the TLS certificate and key (nil, nil without them).
func loadTLS(certFile, keyFile string) (*tls.Config, error) {
	if certFile == "" && keyFile == "" {
		return nil, nil
	}
	if certFile == "" || keyFile == "" {
		return nil, errors.New("TLS needs both a certificate and its key")
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("TLS: %w", err)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12, NextProtos: []string{"h2"}}, nil
}
