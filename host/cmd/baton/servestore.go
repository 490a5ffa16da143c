package main

import (
	"context"
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
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/timestamppb"

	batonv1 "github.com/baton-run/baton/host/api/baton/v1"

	"github.com/baton-run/baton/host/internal/apiforward"
	"github.com/baton-run/baton/host/internal/eventlog"
	"github.com/baton-run/baton/host/internal/jetstreamlog"
	"github.com/baton-run/baton/host/internal/lease"
	"github.com/baton-run/baton/host/internal/orchestrator"
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
	fl.DurationVar(&s.leaseTTL, "lease-ttl", lease.DefaultTTL, "a host whose lease is not renewed for this `duration` (at least 1s) is lost: another takes over its --shared-cwd threads")
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

// serveShared runs the service on a log shared with other hosts. Each
// host runs the threads it owns (those made on it, or sent to it with
// --on-host) and follows the others' as they commit them; a call for a
// thread another host owns is carried to that host over NATS. A host
// holds a lease of its own while it serves (lease.HostKey): a host whose
// lease is lost (it died, or lost the servers) has its threads taken over
// by the host that holds the installation's lease, the coordinator
// (coordinate), which also delivers every host's notifications. After the
// drain both leases are handed back, so that another host takes over at
// once. A host that loses its own lease while it serves stops as a failed
// store does (exit 1): its supervisor starts it again.
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
	refused := func(err error) error {
		if ctx.Err() != nil {
			return nil // stopped before it served
		}
		if r := jetstreamlog.ClosedBy(nc); r != nil {
			err = r // the servers came up, and refused this host
		}
		return fmt.Errorf("serve: %w", err)
	}
	opts := lease.Options{Installation: s.installation, Host: s.hostName, TTL: s.leaseTTL, Replicas: s.replicas, Logger: llog}
	coord, err := lease.Open(ctx, js, opts)
	if err != nil {
		return refused(err)
	}
	opts.Key, opts.ReclaimOwn = lease.HostKey(s.hostName), true
	own, err := lease.Open(ctx, js, opts)
	if err != nil {
		return refused(err)
	}
	if err := own.Acquire(ctx); err != nil {
		return refused(err)
	}
	status := &batonv1.StoreStatus{Kind: "jetstream", Servers: s.urls, Installation: s.installation, Host: s.hostName,
		Role: "host", LeaseSince: timestamppb.Now()}
	cfg.Host, cfg.Store = s.hostName, status
	cfg.OpenLog = func() (eventlog.Log, error) {
		o := s.logOptions()
		o.Dir, o.Logger, o.Name = filepath.Join(data, replicaDir), log.Named("jetstream"), "baton serve "+s.hostName
		l, err := jetstreamlog.Open(ctx, o)
		if err != nil {
			return nil, err
		}
		return own.Guard(l), nil
	}
	cfg.Coordinator = func(ctx context.Context) (string, error) {
		h, _, err := coord.Holder(ctx)
		return h.Host, err
	}
	cfg.Forward = func(route func(ctx context.Context, fullMethod string, req any) (string, error)) grpc.UnaryServerInterceptor {
		return apiforward.NewClient(nc, s.installation, route).Unary
	}
	cfg.Attach = func(srv batonv1.BatonServer) (func(), error) {
		fs, err := apiforward.Serve(nc, s.installation, s.hostName, srv, log.Named("forward"))
		if err != nil {
			return nil, err
		}
		return fs.Stop, nil
	}
	cfg.Beside = func(ctx context.Context, host *orchestrator.Host) {
		coordinate(ctx, coord, js, s.installation, host, log.Named("coordinate"))
	}
	runErr := service.Run(ctx, cfg)
	return release(own, release(coord, runErr))
}

// coordinate takes the installation's lease when it is free and, while it
// holds it, takes over the threads of every host whose own lease is gone
// (orchestrator.Host.TakeOver: as it takes the lease, and each time a
// host's lease goes) and delivers the notifications. It returns when ctx
// ends, the lease held or not (release hands it back).
func coordinate(ctx context.Context, coord *lease.Lease, js jetstream.JetStream, inst string, host *orchestrator.Host, log hclog.Logger) {
	for ctx.Err() == nil {
		if err := coord.Acquire(ctx); err != nil {
			if ctx.Err() == nil {
				log.Error("cannot take the installation's lease; this host does not coordinate", "error", err)
			}
			return
		}
		log.Info("this host coordinates the installation: it takes over lost hosts' threads and delivers notifications")
		held, stop := context.WithCancel(ctx)
		go func() { // owned here: stop ends it
			select {
			case <-coord.Lost():
				log.Warn("lost the installation's lease; another host coordinates", "error", coord.Err())
				stop()
			case <-held.Done():
			}
		}()
		host.Deliver(held)
		watchHosts(held, js, inst, host, log)
		stop()
	}
}

// watchHosts takes over lost hosts' threads, at once and each time a
// host's lease goes, until ctx ends. A watch the servers end (a lost
// connection) is begun again after a pause, with a sweep, since leases
// may have gone unseen meanwhile.
func watchHosts(ctx context.Context, js jetstream.JetStream, inst string, host *orchestrator.Host, log hclog.Logger) {
	gone := func(h string) bool {
		_, alive, err := lease.Alive(ctx, js, inst, h)
		return err == nil && !alive
	}
	sweep := func() {
		if err := host.TakeOver(ctx, gone); err != nil && ctx.Err() == nil {
			log.Error("take over lost hosts' threads", "error", err)
		}
	}
	pause := watchRetry
	for ctx.Err() == nil {
		if w, err := lease.Watch(ctx, js, inst); err != nil {
			log.Error("cannot watch the hosts' leases; trying again", "error", err, "in", pause)
		} else {
			sweep()
			sweepOnLoss(ctx, w, sweep, log)
			w.Stop()
			if ctx.Err() != nil {
				return
			}
			log.Error("the watch of the hosts' leases ended; watching again", "error", w.Err(), "in", pause)
		}
		t := time.NewTimer(pause)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return
		}
		pause = min(2*pause, 8*watchRetry)
	}
}

// watchRetry is the first pause before a failed watch of the host leases
// is begun again.
const watchRetry = 250 * time.Millisecond

// sweepOnLoss sweeps each time w reports a host's lease gone, until w ends.
func sweepOnLoss(ctx context.Context, w *lease.Watcher, sweep func(), log hclog.Logger) {
	for {
		select {
		case ev, ok := <-w.Events():
			if !ok {
				return
			}
			if !ev.Alive {
				log.Warn("a host's lease is gone", "host", ev.Host, "at", ev.At)
				sweep()
			}
		case <-ctx.Done():
			return
		}
	}
}

// release hands a lease back after the service ran (runErr, returned),
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
