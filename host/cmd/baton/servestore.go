package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/pflag"
	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	batonv1 "github.com/baton-run/baton/host/api/baton/v1"

	"github.com/baton-run/baton/host/internal/apiforward"
	"github.com/baton-run/baton/host/internal/eventlog"
	"github.com/baton-run/baton/host/internal/jetstreamlog"
	"github.com/baton-run/baton/host/internal/lease"
	"github.com/baton-run/baton/host/internal/service"
)

// storeFlags are serve's flags for an event log shared by several hosts
// in a JetStream stream (--store nats://...), and the lease that lets one
// of them at a time write it.
type storeFlags struct {
	store                  string
	urls                   []string // --store, checked: nats://HOST:PORT each
	creds, tokenFile       string
	tlsCA, tlsCert, tlsKey string
	replicas               int
	installation, hostName string
	leaseTTL               time.Duration
	natsFlagsGiven         []string // --nats-* and lease flags given, for the check without --store
}

// replicaDir is where a host keeps its replica of a shared log, inside
// its data dir: not DATA/events, so that a `baton run` without the
// service, which opens DATA/events, never writes the replica.
const replicaDir = "replica"

func (s *storeFlags) register(fl *pflag.FlagSet) {
	fl.StringVar(&s.store, "store", "", "share the event log with other hosts in a NATS JetStream stream: `nats://HOST:PORT[,HOST:PORT...]`")
	fl.StringVar(&s.creds, "nats-creds", "", "NATS credentials `file` (mode 0600) for --store")
	fl.StringVar(&s.tokenFile, "nats-token-file", "", "`file` (mode 0600) holding the NATS token for --store")
	fl.StringVar(&s.tlsCA, "nats-tls-ca", "", "PEM `file` of the CA that signs the NATS servers' certificates")
	fl.StringVar(&s.tlsCert, "nats-tls-cert", "", "PEM `file` of this host's NATS client certificate")
	fl.StringVar(&s.tlsKey, "nats-tls-key", "", "PEM `file` of the NATS client certificate's key")
	fl.IntVar(&s.replicas, "nats-replicas", 0, "`n` servers keep the shared log and the lease (0: 3 when there are at least 3 servers, else 1)")
	fl.StringVar(&s.installation, "installation", "baton", "`name` of the set of hosts sharing the log; one of them at a time writes it")
	fl.StringVar(&s.hostName, "host", "", "this host's `name` among those sharing the log (default: the machine's host name)")
	fl.DurationVar(&s.leaseTTL, "lease-ttl", lease.DefaultTTL, "a follower takes over this `duration` after the writing host stopped renewing its lease (at least 1s)")
}

// check checks the flags of a shared store (usage errors, exit 2, naming
// the flag), and the secrets' files (exit 1 for one others may read, as
// for --notify-secret-file).
func (s *storeFlags) check(fl *pflag.FlagSet) error {
	for _, name := range []string{"nats-creds", "nats-token-file", "nats-tls-ca", "nats-tls-cert", "nats-tls-key",
		"nats-replicas", "installation", "host", "lease-ttl"} {
		if fl.Changed(name) {
			s.natsFlagsGiven = append(s.natsFlagsGiven, "--"+name)
		}
	}
	if s.store == "" {
		if len(s.natsFlagsGiven) > 0 {
			return usagef("serve: %s needs --store nats://HOST:PORT", s.natsFlagsGiven[0])
		}
		return nil
	}
	urls, err := parseStore(s.store)
	if err != nil {
		return usagef("serve: --store: %v", err)
	}
	s.urls = urls
	switch {
	case s.replicas < 0:
		return usagef("serve: --nats-replicas must be from 0 (the default), got %d", s.replicas)
	case s.leaseTTL < lease.MinTTL:
		return usagef("serve: --lease-ttl must be at least %v, got %v", lease.MinTTL, s.leaseTTL)
	case (s.tlsCert == "") != (s.tlsKey == ""):
		return usagef("serve: give both --nats-tls-cert and --nats-tls-key, or neither")
	case s.creds != "" && s.tokenFile != "":
		return usagef("serve: give --nats-creds or --nats-token-file, not both")
	}
	if err := lease.CheckInstallation(s.installation); err != nil {
		return usagef("serve: --installation: %v", err)
	}
	if s.hostName == "" {
		h, err := os.Hostname()
		if err != nil {
			return failf(exitFailed, "serve: name this host with --host: %v", err)
		}
		// The machine's name without its domain: a host's name is one
		// token of its lease's key and of its forwarded calls' subject.
		s.hostName, _, _ = strings.Cut(h, ".")
	}
	if err := lease.CheckHost(s.hostName); err != nil {
		return usagef("serve: --host: %v", err)
	}
	for _, c := range []struct{ flag, file string }{{"nats-creds", s.creds}, {"nats-token-file", s.tokenFile}} {
		if c.file == "" {
			continue
		}
		if err := privateFile(c.file); err != nil {
			return failf(exitFailed, "serve: --%s: %v", c.flag, err)
		}
	}
	return nil
}

// parseStore reads --store: nats://HOST:PORT, more of them after commas
// (each with or without nats://).
func parseStore(v string) ([]string, error) {
	if !strings.HasPrefix(v, "nats://") {
		return nil, fmt.Errorf("want nats://HOST:PORT[,HOST:PORT...], got %q", v)
	}
	var urls []string
	for _, part := range strings.Split(v, ",") {
		addr := strings.TrimPrefix(strings.TrimSpace(part), "nats://")
		host, port, err := net.SplitHostPort(addr)
		if err != nil || host == "" {
			return nil, fmt.Errorf("%q is not HOST:PORT", part)
		}
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return nil, fmt.Errorf("%q: the port must be a number from 1 to 65535", part)
		}
		urls = append(urls, "nats://"+net.JoinHostPort(host, port))
	}
	return urls, nil
}

// privateFile refuses a secret's file that others than its owner may read
// or change.
func privateFile(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	if mode := fi.Mode().Perm(); mode&0o077 != 0 {
		return fmt.Errorf("%s is mode %04o: others than its owner may read or change it; chmod 600 %s", path, mode, path)
	}
	return nil
}

// logOptions are the shared log's options as the flags say (Dir,
// Logger and Name are the caller's).
func (s *storeFlags) logOptions() jetstreamlog.Options {
	return jetstreamlog.Options{URLs: s.urls, CredsFile: s.creds, TokenFile: s.tokenFile,
		TLS:          jetstreamlog.TLS{CAFile: s.tlsCA, CertFile: s.tlsCert, KeyFile: s.tlsKey},
		Installation: s.installation, Host: s.hostName, Replicas: s.replicas}
}

// connect connects to the servers of the shared log for the lease (the
// log connects on its own, with the same options, through the same
// jetstreamlog.Connect): servers down at first are waited for (until ctx
// ends), and servers lost later too; servers that refuse the host's
// token, credentials or TLS fail it.
func (s *storeFlags) connect(ctx context.Context, log hclog.Logger) (*nats.Conn, error) {
	opts, err := jetstreamlog.ConnectOptions(s.logOptions())
	if err != nil {
		return nil, err
	}
	opts = append(opts,
		nats.Name("baton serve "+s.hostName+" (lease)"),
		nats.ReconnectWait(250*time.Millisecond),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			log.Warn("lost the connection to the lease's servers", "error", err)
		}),
	)
	return jetstreamlog.Connect(ctx, s.urls, log, opts...)
}

// releaseTimeout bounds handing the lease back as the service stops: a
// server that does not answer leaves the lease to expire.
const releaseTimeout = 5 * time.Second

// serveShared runs the service on a log shared with other hosts. Until
// it holds the installation's lease it follows the log (a follower: reads
// and subscriptions from its replica, commands carried to the writer over
// NATS); once it holds it, it writes the log and runs its threads, and
// answers the calls followers carry to it. After the drain it hands the
// lease back, so that a follower takes over at once. A lease lost while
// writing stops the service as a failed store does (exit 1): its
// supervisor starts it again, and it follows.
func serveShared(ctx context.Context, data string, s *storeFlags, cfg service.Config, log hclog.Logger) error {
	llog := log.Named("lease")
	nc, err := s.connect(ctx, llog)
	if err != nil {
		if ctx.Err() != nil {
			return nil // stopped before it served
		}
		return fmt.Errorf("serve: %w", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	ls, err := lease.Open(ctx, js, lease.Options{Installation: s.installation, Host: s.hostName, TTL: s.leaseTTL,
		Replicas: s.replicas, Logger: llog})
	if err != nil {
		if ctx.Err() != nil {
			return nil // stopped before it served
		}
		if r := jetstreamlog.ClosedBy(nc); r != nil {
			err = r // the servers came up, and refused this host
		}
		return fmt.Errorf("serve: %w", err)
	}
	status := &batonv1.StoreStatus{Kind: "jetstream", Servers: s.urls, Installation: s.installation, Host: s.hostName}
	cfg.Host = s.hostName
	cfg.OpenLog = func() (eventlog.Log, error) {
		o := s.logOptions()
		o.Dir, o.Logger, o.Name = filepath.Join(data, replicaDir), log.Named("jetstream"), "baton serve "+s.hostName
		return jetstreamlog.Open(ctx, o)
	}
	cfg.Writer = func(ctx context.Context) (string, error) {
		h, _, err := ls.Holder(ctx)
		return h.Host, err
	}
	acquired, err := followShared(ctx, ls, nc, status, cfg, log)
	if !acquired {
		return err
	}
	if err != nil {
		log.Warn("the follower stopped with an error as this host took the lease", "error", err)
	}
	if ctx.Err() != nil { // stopped as the lease came: hand it back
		return release(ls, nil)
	}
	if prev := ls.Previous(); prev.Host != "" && prev.Host != s.hostName {
		// Another host wrote the log last: what it left in flight was
		// lost with it (had it handed the lease back, its drain would have
		// ended it).
		cfg.TakeoverFrom = prev.Host
	}
	status = proto.CloneOf(status)
	status.Role, status.LeaseSince = "writer", timestamppb.Now()
	cfg.Store = status
	open := cfg.OpenLog
	cfg.OpenLog = func() (eventlog.Log, error) {
		l, err := open()
		if err != nil {
			return nil, err
		}
		return ls.Guard(l), nil
	}
	cfg.Attach = func(srv batonv1.BatonServer) (func(), error) {
		fs, err := apiforward.Serve(nc, s.installation, s.hostName, srv, log.Named("forward"))
		if err != nil {
			return nil, err
		}
		return fs.Stop, nil
	}
	return release(ls, service.Run(ctx, cfg))
}

// followShared runs the service as a follower of the shared log until this host
// takes the installation's lease (acquired) or ctx ends; err is why the
// follower or the wait for the lease stopped otherwise.
func followShared(ctx context.Context, ls *lease.Lease, nc *nats.Conn, status *batonv1.StoreStatus, cfg service.Config,
	log hclog.Logger) (acquired bool, err error) {
	fctx, stopFollowing := context.WithCancel(ctx)
	defer stopFollowing()
	actx, stopAcquiring := context.WithCancel(ctx)
	defer stopAcquiring()
	took := make(chan error, 1)
	go func() { // owned here: stopAcquiring ends it, and follow waits for it
		err := ls.Acquire(actx)
		took <- err
		if err == nil {
			stopFollowing()
		}
	}()
	status = proto.CloneOf(status)
	status.Role = "follower"
	cfg.Store, cfg.Follower = status, true
	cfg.Forward = apiforward.NewClient(nc, status.Installation, toWriter(ls)).Unary
	ferr := service.Run(fctx, cfg)
	stopAcquiring()
	if aerr := <-took; aerr != nil {
		if ctx.Err() != nil {
			log.Info("stopped as a follower")
			return false, ferr
		}
		if r := jetstreamlog.ClosedBy(nc); r != nil {
			aerr = r // the servers refused this host as it reconnected
		}
		return false, errors.Join(ferr, fmt.Errorf("serve: %w", aerr))
	}
	return true, ferr
}

// toWriter routes every forwarded call of a follower to the host that
// holds the installation's lease: the writer. Its own name, in the instant
// it takes the lease, is routed too (not answered yet, so Unavailable):
// a follower never runs a command itself.
func toWriter(ls *lease.Lease) apiforward.Route {
	return func(ctx context.Context, method string, _ any) (string, error) {
		h, ok, err := ls.Holder(ctx)
		if err != nil {
			return "", grpcstatus.Errorf(codes.Unavailable, "%s: %v", method, err)
		}
		if !ok {
			return "", grpcstatus.Errorf(codes.Unavailable, "%s: no host writes the shared log now (the writer's lease is free or being taken over); try again", method)
		}
		return h.Host, nil
	}
}

// release hands the lease back after the service ran (runErr, returned),
// bounded by releaseTimeout: a server that does not answer leaves the
// lease to expire.
func release(ls *lease.Lease, runErr error) error {
	rctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancel()
	if err := ls.Release(rctx); err != nil && runErr == nil {
		return fmt.Errorf("serve: %w", err)
	}
	return runErr
}
