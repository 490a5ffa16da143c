package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/spf13/cobra"

	"github.com/baton-run/baton/host/internal/eventlog"
	"github.com/baton-run/baton/host/internal/notify"
	"github.com/baton-run/baton/host/internal/orchestrator"
	"github.com/baton-run/baton/host/internal/service"
)

type serveFlags struct {
	listen          []string
	tlsCert, tlsKey string
	idleTimeout     time.Duration
	logFormat       string
	bounds          serveBounds
	// notify and notifySecret are the webhooks' flags; webhooks what
	// they, and the data dir's saved targets, come to (checkWebhooks).
	notify       []string
	notifySecret string
	webhooks     notify.Config
	// shared are the flags of a log shared with other hosts (--store).
	shared storeFlags
}

// serveBounds are what clients may hold of the service (service.Config).
type serveBounds struct {
	maxConnections, maxStreams            int
	connIdle, keepalive, keepaliveTimeout time.Duration
	maxSubscribers, maxThreadSubscribers  int
	subscriberBuffer                      int
	slowSubscriber                        time.Duration
}

// check refuses a bound that would refuse every client, or that gRPC
// would not take as given.
func (b serveBounds) check() error {
	for _, c := range []struct {
		flag string
		n    int
	}{{"max-connections", b.maxConnections}, {"max-streams", b.maxStreams}, {"max-subscribers", b.maxSubscribers},
		{"max-thread-subscribers", b.maxThreadSubscribers}, {"subscriber-buffer", b.subscriberBuffer}} {
		if c.n < 1 {
			return usagef("serve: --%s must be at least 1, got %d", c.flag, c.n)
		}
	}
	switch {
	case b.connIdle < 0:
		return usagef("serve: --connection-idle-timeout must be a duration from 0 (never), got %v", b.connIdle)
	case b.keepalive < time.Second:
		return usagef("serve: --keepalive must be at least 1s (gRPC pings no more often), got %v", b.keepalive)
	case b.keepaliveTimeout <= 0:
		return usagef("serve: --keepalive-timeout must be a duration above 0, got %v", b.keepaliveTimeout)
	case b.slowSubscriber <= 0:
		return usagef("serve: --slow-subscriber must be a duration above 0, got %v", b.slowSubscriber)
	}
	return nil
}

func serveCommand(g *globals) *cobra.Command {
	f := &serveFlags{}
	c := &cobra.Command{
		Use:   "serve",
		Short: "Run the host as a service until SIGTERM or SIGINT",
		Long: `Serve runs the host as a long-running service: threads go on while terminals,
editors and scripts come and go. Every baton verb finds it on the data
directory's socket (DATA/baton.sock, mode 0600), or with --server.

--listen tcp://127.0.0.1:PORT adds a TCP listener, which always requires a
bearer token (generated on first use into DATA/token, or --token-file); with
--tls-cert and --tls-key it speaks TLS, and only then may it listen on an
address other than loopback.

A TCP listener also serves the dashboard to a browser (baton ui prints a
one-time sign-in link): the same API in the Connect protocol (and gRPC-Web),
each call from a signed-in browser's own page only (its Origin is checked),
beside gRPC on the same address.

The data dir holds the threads' messages in the clear: everything baton
writes there is 0600 (directories 0700), and serve refuses (exit 1) a data
dir that others than its owner may read, write or search, saying how to fix
it (chmod 700 DATA); the other verbs warn.

What clients may hold is bounded: connections (--max-connections, over
every listener; one more is closed at once, and the log says so), calls in
flight on one connection (--max-streams), subscriptions (--max-subscribers,
and --max-thread-subscribers to one thread; one more is refused with
ResourceExhausted). A connection with no call in flight for
--connection-idle-timeout is closed (its client connects again when it next
calls), and one silent for --keepalive is pinged and closed unless its
client answers within --keepalive-timeout. A subscriber whose
--subscriber-buffer events stay unsent for --slow-subscriber is cut off
with ResourceExhausted, naming the last sequence it was sent: it subscribes
again after it.

--notify URL (repeatable) posts one JSON document to URL for each event that
needs a person: a request waiting for an answer (request.pending), a run's
end (run.ended: completed, failed or interrupted), a usage-limit wait begun
and ended (wait.started, wait.ended). The targets saved with baton notify add
are posted to as well, each with its --events. With --notify-secret-file
FILE (mode 0600, or serve refuses it, exit 1) each delivery carries
X-Baton-Signature: sha256=HEX, the HMAC-SHA256 of the body keyed by the
file's content. A delivery is written to the event log with its event, so a
restart loses none; it is removed once the receiver answers 2xx, so none that
succeeded is sent twice. A failed try (no connection, no answer within 10s,
an answer not 2xx) is tried again after 1s, 2s, 4s ... up to every 10
minutes, and given up 24 hours after its event; a 4xx other than 408 and 429
is given up at once. baton notify list shows them all.

SIGTERM or SIGINT drains: the service stops accepting, asks active runs'
providers to stop, records each run's end, closes the plugins, and exits 0.
A second signal exits at once (the next start recovers).

A store that fails under the service (a full or failing disk, damage met by
a read) stops it at once: health says NOT_SERVING, commands are refused
with Unavailable, the providers are stopped, and serve exits 1 so that its
supervisor starts it again; the next start recovers what was in flight.

--store nats://HOST:PORT[,HOST:PORT...] keeps the event log in a NATS
JetStream stream shared by several hosts (--installation names the set),
each keeping a replica of it in DATA/replica. Every host runs the threads
made on it (or sent to it with run --on-host) under a lease of its own, and
answers every call: reads and subscriptions from its replica, commands for
another host's thread carried to that host over NATS. The host that holds
the installation's lease coordinates: when a host's lease is not renewed
for --lease-ttl (it died, or lost the servers), it takes over that host's
--shared-cwd threads (their runs in flight end host_lost, queued runs
start) and marks the others lost until their host comes back. SIGTERM hands
the leases back after the drain. A host that loses its lease while it
serves stops as for a failed store (exit 1); started again, it takes its
threads back. --host names this host (default: the machine's host name); --nats-creds or --nats-token-file (mode 0600, or
serve refuses them, exit 1) and --nats-tls-* say how to reach the servers.`,
		Example: `  baton serve
  baton serve --listen unix:///run/user/1000/baton.sock --log-format json
  baton serve --listen tcp://127.0.0.1:7077 --idle-timeout 30m
  baton serve --notify http://127.0.0.1:9000/baton --notify-secret-file ~/.config/baton/hook-secret
  baton serve --store nats://10.0.0.1:4222,10.0.0.2:4222,10.0.0.3:4222 --nats-creds ~/.config/baton/nats.creds
  grpcurl -unix -plaintext ~/.local/share/baton/baton.sock list`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch f.logFormat {
			case "text", "json":
			default:
				return usagef("serve: --log-format must be text or json, got %q", f.logFormat)
			}
			if (f.tlsCert == "") != (f.tlsKey == "") {
				return usagef("serve: give both --tls-cert and --tls-key, or neither")
			}
			if f.idleTimeout < 0 {
				return usagef("serve: --idle-timeout must be a duration from 0 (never), got %v", f.idleTimeout)
			}
			if err := f.bounds.check(); err != nil {
				return err
			}
			if err := f.shared.check(cmd.Flags()); err != nil {
				return err
			}
			if err := g.checkData(); err != nil {
				return err
			}
			if err := f.checkWebhooks(g.data); err != nil {
				return err
			}
			level := cmp.Or(g.logLevel, "info") // a service says what it does
			log := hclog.New(&hclog.LoggerOptions{Name: "baton", Output: g.stderr, Level: hclog.LevelFromString(level),
				JSONFormat: f.logFormat == "json"})
			ctx, cancel := context.WithCancel(cmd.Context())
			defer cancel()
			sigs := make(chan os.Signal, 2)
			signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
			defer signal.Stop(sigs)
			stopped := make(chan struct{})
			defer close(stopped)
			eventlog.Fatal = storeGaveUp(g, stopped)
			go func() {
				select {
				case sig := <-sigs:
					log.Info("stopping: draining the runs; a second signal stops at once", "signal", sig.String())
					cancel()
				case <-ctx.Done():
					return
				}
				sig := <-sigs
				fmt.Fprintf(g.stderr, "baton: %s: stopping at once\n", sig)
				os.Exit(exitFailed)
			}()
			if err := serve(ctx, g, f, log); err != nil {
				var busy *orchestrator.BusyError
				var bad *service.ConfigError
				switch {
				case errors.As(err, &busy):
					return failf(exitFailed, "%v; wait for it to end, then start the service", err)
				case errors.As(err, &bad):
					return usagef("%v", err) // "serve: …", before anything was touched
				}
				return failf(exitFailed, "%v", err) // "serve: …"
			}
			return nil
		},
	}
	fl := c.Flags()
	fl.StringArrayVar(&f.listen, "listen", nil, "an `address` to serve on: unix:///PATH or tcp://HOST:PORT (repeatable; default: unix://DATA/baton.sock)")
	fl.StringVar(&f.tlsCert, "tls-cert", "", "PEM `file` of the TLS certificate for TCP listeners")
	fl.StringVar(&f.tlsKey, "tls-key", "", "PEM `file` of the TLS certificate's key")
	fl.DurationVar(&f.idleTimeout, "idle-timeout", 10*time.Minute, "close a provider session idle for this `duration` (0: never)")
	fl.StringVar(&f.logFormat, "log-format", "text", "log `format` on stderr: text or json")
	b := &f.bounds
	fl.IntVar(&b.maxConnections, "max-connections", service.DefaultMaxConnections, "hold at most `n` client connections open at once, over every listener")
	fl.IntVar(&b.maxStreams, "max-streams", service.DefaultMaxStreams, "take at most `n` calls in flight on one connection, subscriptions among them")
	fl.DurationVar(&b.connIdle, "connection-idle-timeout", 30*time.Minute, "close a connection with no call in flight for this `duration` (0: never)")
	fl.DurationVar(&b.keepalive, "keepalive", service.DefaultKeepalive, "ping a client whose connection is silent for this `duration` (at least 1s)")
	fl.DurationVar(&b.keepaliveTimeout, "keepalive-timeout", service.DefaultKeepaliveTimeout, "close a connection whose client does not answer a ping within this `duration`")
	fl.IntVar(&b.maxSubscribers, "max-subscribers", service.DefaultMaxSubscribers, "take at most `n` subscriptions open at once")
	fl.IntVar(&b.maxThreadSubscribers, "max-thread-subscribers", service.DefaultMaxThreadSubscribers, "take at most `n` subscriptions open at once to one thread")
	fl.IntVar(&b.subscriberBuffer, "subscriber-buffer", service.DefaultSubscriberBuffer, "keep up to `n` events waiting for a subscriber that is behind")
	fl.DurationVar(&b.slowSubscriber, "slow-subscriber", service.DefaultSlowSubscriber, "cut off a subscriber whose buffer stays full this `duration`")
	fl.StringArrayVar(&f.notify, "notify", nil, "post the events that need a person to this webhook `URL`, http:// or https:// (repeatable; see baton notify)")
	fl.StringVar(&f.notifySecret, "notify-secret-file", "", "sign each webhook delivery with the secret in this `file` (mode 0600)")
	f.shared.register(fl)
	c.RegisterFlagCompletionFunc("log-format", fixedCompletion("text", "json"))
	return c
}

// checkWebhooks checks the webhooks' flags and reads what they name, and
// the data dir's saved targets, into f.webhooks: a URL that is not http or
// https is bad usage (exit 2); a secret file others may read, or a targets
// file that does not read, fails (exit 1), saying how to fix it.
func (f *serveFlags) checkWebhooks(data string) error {
	for _, u := range f.notify {
		if err := notify.CheckURL(u); err != nil {
			return usagef("serve: --notify: %v", err)
		}
	}
	saved, err := notify.LoadTargets(data)
	if err != nil {
		return failf(exitFailed, "serve: %v", err)
	}
	f.webhooks = notify.Config{Targets: notify.Merge(f.notify, saved)}
	if f.notifySecret != "" {
		if f.webhooks.Secret, err = notify.ReadSecret(f.notifySecret); err != nil {
			return failf(exitFailed, "serve: %v", err)
		}
	}
	return nil
}

// storeGaveUpGrace bounds how long the service has to stop by itself once
// its store's Pebble gave up, before the process ends regardless: the
// service's own stop waits at most service.DrainTimeout for calls in
// flight.
const storeGaveUpGrace = 30 * time.Second

// storeGaveUp is serve's eventlog.Fatal. Pebble gave up (a write of its
// log or manifest failed: the disk is full or failing), and the store has
// failed before Fatal is called, so the service is stopping the same way
// as for any store failure (health NOT_SERVING, commands refused, the
// providers killed) and serve returns why, which main prints as it exits
// 1. Fatal, which must not return, waits for that; a service that has not
// stopped after storeGaveUpGrace is ended here with Pebble's line.
func storeGaveUp(g *globals, stopped <-chan struct{}) func(string) {
	return func(msg string) {
		t := time.NewTimer(storeGaveUpGrace)
		select {
		case <-stopped:
			select {} // serve returned: main prints its error and exits
		case <-t.C:
		}
		fmt.Fprintf(g.stderr, "baton: %s; the service did not stop in %s, so it ends now\n", msg, storeGaveUpGrace)
		os.Exit(exitFailed)
	}
}
