// Package lease keeps the leases of the hosts that share a JetStream
// event log: each host's own (HostKey), which a process of that host holds
// while it runs and reaches the servers, so that the others know it is
// alive (Watch, Alive); and the installation's (InstallationKey), which
// one host at a time holds, to coordinate (it takes over the threads of a
// host whose own lease is gone). A lease is taken by Acquire, waiting
// while another holds it, kept by renewals, and handed back by Release (as
// a service drains), or lost when its holder stops renewing it (its
// process or machine died, or it lost the servers).
//
// The leases are keys in a key-value bucket of their own per installation
// (Bucket). A lease's value says who holds it (Holder), and it is written
// with a TTL: the servers remove it, leaving a marker, when the holder has
// not renewed it for that long. Beside each lease a key without a TTL
// keeps who took it last ("last-holder" for the installation's,
// "last-holder.<key>" for the others), so that the next holder knows
// whether another host, or another process of its own, held it before
// (Previous). Every write names the revision it replaces, so two hosts
// never both believe a write of theirs made them the holder: taking the
// lease is a Create (no value, or a deleted one), renewing it an Update of
// the holder's last revision, handing it back a Delete of that revision.
// A host's own lease left by its previous process (killed, or restarted
// within the TTL) is taken over at once with an Update of its revision
// (ReclaimOwn), since no other host takes that key.
//
// The holder renews every TTL/3 on its own clock. It counts the lease as
// lost (Lost closes) when a renewal is refused because the revision moved
// (the lease expired, and perhaps another host took it), or when no server
// answered a renewal before the lease, counted from the last renewal it
// sent, would expire: the servers count from when they stored that
// renewal, later than it was sent, so the holder gives up no later than
// they free the lease.
package lease

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/baton-run/baton/sdk/clock"
)

// DefaultTTL is how long a lease outlives its holder's last renewal: long
// enough that a holder renewing every TTL/3 rides out a server's election
// (a few seconds) without losing it, short enough that a standby takes
// over a dead host's work within a quarter of a minute.
const DefaultTTL = 15 * time.Second

// MinTTL is the shortest TTL: the servers count a value's TTL in whole
// seconds.
const MinTTL = time.Second

// InstallationKey is the installation's lease's key in its bucket: its
// holder coordinates the hosts (it takes over the threads of a host whose
// own lease is gone).
const InstallationKey = "installation"

// hostPrefix begins the key of each host's own lease (HostKey).
const hostPrefix = "host."

// lastPrefix names the keys that hold, without a TTL, the holder that last
// took each lease: the next holder reads it to know whether another host
// (or another process of this one) held it before (Previous). The
// installation's is "last-holder" alone, as it was before hosts had
// leases of their own, so that a bucket written then keeps working.
const lastPrefix = "last-holder"

// lastKey is the key that keeps who took lease key k last.
func lastKey(k string) string {
	if k == InstallationKey {
		return lastPrefix
	}
	return lastPrefix + "." + k
}

// HostKey is the key of host's own lease: it is held while a process of
// that host runs and reaches the servers (Watch, Alive). CheckHost says
// which names a key can hold.
func HostKey(host string) string { return hostPrefix + host }

var hostName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// CheckHost refuses a host name that cannot be one token of a key or a
// subject: a host's lease and the subject its forwarded calls come on
// are named for it.
func CheckHost(name string) error {
	if !hostName.MatchString(name) {
		return fmt.Errorf("host name %q: use 1 to 64 letters, digits, - and _", name)
	}
	return nil
}

// keyName is what a lease's key may be: tokens a key-value bucket takes,
// joined by dots.
var keyName = regexp.MustCompile(`^[-/_=A-Za-z0-9]+(\.[-/_=A-Za-z0-9]+)*$`)

// markerTTL is how long the servers keep the marker of a lease that
// expired: a standby watching the key is told at once, so the marker needs
// to outlive only a watcher that reconnects.
const markerTTL = time.Minute

// requestTimeout bounds one request of a standby to the servers (taking
// the lease): one that is not answered in that long is tried again, so
// that servers that come back are found however long the host has
// waited.
const requestTimeout = 5 * time.Second

// retryPause is how long a host waits before it asks the servers again
// after they did not answer (they are electing a leader, or unreachable).
const retryPause = 250 * time.Millisecond

// Holder is the lease's value: who holds it, since when, and as which
// process, so that a standby's log can say whom it waits for.
type Holder struct {
	Host  string    `json:"host"`
	Since time.Time `json:"since"`
	PID   int       `json:"pid"`
}

// Options configure a Lease. The zero value of every field but
// Installation and Host works.
type Options struct {
	// Installation names the hosts that share one log; it names the
	// lease's bucket (CheckInstallation says what it may be).
	Installation string
	// Host is this host's name, as standbys' logs show it (CheckHost
	// says what it may be).
	Host string
	// Key is the lease's key in the installation's bucket (default
	// InstallationKey; HostKey for a host's own lease).
	Key string
	// ReclaimOwn lets Acquire take the lease at once, rather than wait
	// out its TTL, when its holder is a process of this same host name:
	// the process before this one, killed or restarted. Set it only for
	// a key no other host takes (HostKey(Host)): two processes of one
	// host name that both reclaim take the lease from each other.
	ReclaimOwn bool
	// PID is this host's process id (default os.Getpid()).
	PID int
	// TTL is how long the lease outlives the holder's last renewal
	// (default DefaultTTL; at least MinTTL). It is rounded up to whole
	// seconds for the servers.
	TTL time.Duration
	// Replicas is how many servers keep the bucket (default: 3 when the
	// client sees at least 3 servers, else 1). A bucket that exists keeps
	// what it has unless this is set.
	Replicas int
	// Clock times the renewals and the retries (default clock.System).
	Clock  clock.Clock
	Logger hclog.Logger
}

// Lease is one host's hold on its installation's lease: Acquire takes it,
// Lost says when it was lost, Release hands it back.
type Lease struct {
	kv   jetstream.KeyValue
	js   jetstream.JetStream
	key  string // the lease's key in the bucket
	subj string // the key's subject, for renewals
	opts Options
	clk  clock.Clock
	log  hclog.Logger

	mu       sync.Mutex
	previous Holder        // who took the lease before this host's Acquire
	rev      uint64        // the holder's last revision; 0: not held
	expires  time.Time     // when the holder counts it expired, on its clock
	value    []byte        // the held value (a Holder's JSON)
	lost     chan struct{} // closed when the hold is lost
	lostErr  error
	stop     context.CancelFunc // ends the renewer
	done     chan struct{}      // closed when the renewer has ended
}

var installationName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// CheckInstallation refuses an installation name a bucket cannot be
// named for.
func CheckInstallation(name string) error {
	if !installationName.MatchString(name) {
		return fmt.Errorf("installation name %q: use 1 to 64 letters, digits, - and _", name)
	}
	return nil
}

// Bucket is the key-value bucket of an installation's lease.
func Bucket(installation string) string { return "baton_" + installation + "_leases" }

// Open makes (or finds) the installation's lease bucket, for the lease on
// opts.Key. It takes nothing: Acquire does.
func Open(ctx context.Context, js jetstream.JetStream, opts Options) (*Lease, error) {
	if err := CheckInstallation(opts.Installation); err != nil {
		return nil, fmt.Errorf("open lease: %w", err)
	}
	if opts.Host == "" {
		return nil, errors.New("open lease: no host name")
	}
	if err := CheckHost(opts.Host); err != nil {
		return nil, fmt.Errorf("open lease: %w", err)
	}
	if opts.Key == "" {
		opts.Key = InstallationKey
	}
	if !keyName.MatchString(opts.Key) || strings.HasPrefix(opts.Key, lastPrefix) {
		return nil, fmt.Errorf("open lease: key %q: use tokens of letters, digits, -, _, = and /, joined by dots, not beginning with %q",
			opts.Key, lastPrefix)
	}
	if opts.ReclaimOwn && opts.Key != HostKey(opts.Host) {
		// Another host could hold any other key under a name alike.
		return nil, fmt.Errorf("open lease: ReclaimOwn is for host %s's own lease (key %s), not key %q", opts.Host,
			HostKey(opts.Host), opts.Key)
	}
	if opts.TTL == 0 {
		opts.TTL = DefaultTTL
	}
	if opts.TTL < MinTTL {
		return nil, fmt.Errorf("open lease: TTL %v is under %v", opts.TTL, MinTTL)
	}
	if opts.PID == 0 {
		opts.PID = os.Getpid()
	}
	if opts.Logger == nil {
		opts.Logger = hclog.NewNullLogger()
	}
	cfg := jetstream.KeyValueConfig{Bucket: Bucket(opts.Installation), History: 1, Replicas: opts.Replicas,
		LimitMarkerTTL: markerTTL, Description: "which Baton hosts of the installation are alive, and which one coordinates them"}
	clk := clock.Or(opts.Clock)
	// A cluster that is forming, or electing, cannot place the bucket
	// yet: a host that starts with it waits, as it would for the lease.
	said := false
	for {
		// Each try is bounded: a request the forming cluster drops would
		// otherwise hold the whole of ctx.
		tctx, cancel := context.WithTimeout(ctx, requestTimeout)
		kv, err := bucket(tctx, js, cfg)
		cancel()
		if err == nil {
			return &Lease{kv: kv, js: js, key: opts.Key, subj: "$KV." + cfg.Bucket + "." + opts.Key, opts: opts, clk: clk,
				log: opts.Logger}, nil
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("open lease bucket %s: %w (%w)", cfg.Bucket, err, context.Cause(ctx))
		}
		if closed(err) {
			return nil, fmt.Errorf("open lease bucket %s: %w", cfg.Bucket, closedErr(js, err))
		}
		if !said {
			opts.Logger.Warn("cannot open the lease's bucket yet; trying again", "bucket", cfg.Bucket, "error", err)
			said = true
		}
		if err := clock.Sleep(ctx, clk, retryPause); err != nil {
			return nil, fmt.Errorf("open lease bucket %s: %w", cfg.Bucket, err)
		}
	}
}

// bucket finds the lease's bucket, or makes it (defaultReplicas unless
// told), or changes its replicas when told how many.
func bucket(ctx context.Context, js jetstream.JetStream, cfg jetstream.KeyValueConfig) (jetstream.KeyValue, error) {
	kv, err := js.KeyValue(ctx, cfg.Bucket)
	switch {
	case errors.Is(err, jetstream.ErrBucketNotFound):
		if cfg.Replicas == 0 {
			cfg.Replicas = defaultReplicas(js)
		}
		return js.CreateOrUpdateKeyValue(ctx, cfg)
	case err == nil && cfg.Replicas > 0:
		return js.CreateOrUpdateKeyValue(ctx, cfg)
	}
	return kv, err
}

// closed says whether err is a request on a connection closed for good:
// by its owner, or by the client library when servers refused it (its
// token or credentials) twice alike as it reconnected. Trying again does
// not reopen it.
func closed(err error) bool { return errors.Is(err, nats.ErrConnectionClosed) }

// closedErr is err with why the connection closed, when it says.
func closedErr(js jetstream.JetStream, err error) error {
	if last := js.Conn().LastError(); last != nil {
		return fmt.Errorf("%w (the connection closed on: %w)", err, last)
	}
	return err
}

// Current is who holds the lease now, and false when nobody does.
func (l *Lease) Current(ctx context.Context) (Holder, bool, error) {
	h, ok, err := latest(ctx, l.kv, l.key)
	if err != nil {
		return Holder{}, false, fmt.Errorf("read %s: %w", l.what(), err)
	}
	return h, ok, nil
}

// what names the lease in errors: "the lease on installation x" for the
// installation's, "host b's lease on installation x" for a host's,
// "the lease k on installation x" for another key.
func (l *Lease) what() string {
	if l.key == InstallationKey {
		return "the lease on installation " + l.opts.Installation
	}
	if h, ok := strings.CutPrefix(l.key, hostPrefix); ok {
		return "host " + h + "'s lease on installation " + l.opts.Installation
	}
	return "the lease " + l.key + " on installation " + l.opts.Installation
}

// name names the lease in the log: "the installation's lease", or "host
// b's lease" for a host key.
func (l *Lease) name() string {
	if l.key == InstallationKey {
		return "the installation's lease"
	}
	if h, ok := strings.CutPrefix(l.key, hostPrefix); ok {
		return "host " + h + "'s lease"
	}
	return "the lease " + l.key
}

// latest reads a key's holder, false when it has none (never written,
// deleted or expired).
func latest(ctx context.Context, kv jetstream.KeyValue, k string) (Holder, bool, error) {
	e, err := entry(ctx, kv, k)
	if err != nil || e == nil {
		return Holder{}, false, err
	}
	h, err := decode(e.Value())
	return h, err == nil, err
}

// entry reads a key's present value (nil when it has none: never
// written, deleted or expired). It reads through a watcher, which the
// bucket's leader feeds, rather than a Get, which any replica may answer
// from behind the leader.
func entry(ctx context.Context, kv jetstream.KeyValue, k string) (jetstream.KeyValueEntry, error) {
	w, err := kv.Watch(ctx, k)
	if err != nil {
		return nil, err
	}
	defer w.Stop()
	var e jetstream.KeyValueEntry
	select {
	case e = <-w.Updates(): // the key's present value, or nil: none
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
	if e == nil || e.Operation() != jetstream.KeyValuePut {
		return nil, nil
	}
	return e, nil
}

// put writes the lease's value over revision rev, with the TTL.
func (l *Lease) put(ctx context.Context, rev uint64, v []byte) (uint64, error) {
	ack, err := l.js.PublishMsg(ctx, &nats.Msg{Subject: l.subj, Data: v, Header: nats.Header{}},
		jetstream.WithExpectLastSequencePerSubject(rev), jetstream.WithMsgTTL(l.serverTTL()))
	if err != nil {
		return 0, err
	}
	return ack.Sequence, nil
}

// reclaim takes the lease when its holder is this very process: an
// earlier try of Acquire's was stored although its answer was lost (it
// timed out, or the connection broke). It renews that value, so that its
// TTL counts from now, and says whether this host holds the lease. With
// ReclaimOwn it takes, too, a lease held by another process of this host
// name (the one before this, gone without handing it back): it writes v,
// this process's value, over that holder's revision.
func (l *Lease) reclaim(ctx context.Context, v []byte) bool {
	rctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	e, err := entry(rctx, l.kv, l.key)
	if err != nil || e == nil {
		return false
	}
	h, err := decode(e.Value())
	if err != nil || h.Host != l.opts.Host {
		return false
	}
	if h.PID == l.opts.PID {
		v = e.Value()
	} else if !l.opts.ReclaimOwn {
		return false
	}
	sent := l.clk.Now()
	rev, err := l.put(rctx, e.Revision(), v)
	if err != nil {
		return false
	}
	if h.PID != l.opts.PID {
		l.log.Info(fmt.Sprintf("took over %s from this host's previous process (pid %d, holding it since %s) without waiting for it to expire",
			l.name(), h.PID, h.Since.Format(time.RFC3339)), "installation", l.opts.Installation, "key", l.key)
	}
	l.hold(rev, v, sent)
	return true
}

// serverTTL is the TTL the servers are told: whole seconds, rounded up, so
// that they free the lease no earlier than its holder gives it up.
func (l *Lease) serverTTL() time.Duration {
	return (l.opts.TTL + time.Second - 1).Truncate(time.Second)
}

// Acquire takes the lease, waiting while another host holds it (it says
// once, per holder, whom it waits for) until that host hands it back or its
// lease expires. It returns once this host holds it, renewing it until
// Release or until it is lost (Lost), or with ctx's cause.
func (l *Lease) Acquire(ctx context.Context) error {
	var w jetstream.KeyWatcher // opened at the first refusal
	defer func() {
		if w != nil {
			w.Stop()
		}
	}()
	var waitedFor Holder
	unreachable := false
	for {
		h := Holder{Host: l.opts.Host, Since: l.clk.Now().UTC().Truncate(time.Millisecond), PID: l.opts.PID}
		v, _ := json.Marshal(h) // a struct of plain fields
		sent := l.clk.Now()
		rctx, cancel := context.WithTimeout(ctx, requestTimeout)
		rev, err := l.kv.Create(rctx, l.key, v, jetstream.KeyTTL(l.serverTTL()))
		cancel()
		if err == nil {
			l.hold(rev, v, sent)
			break
		}
		if ctx.Err() != nil {
			return fmt.Errorf("acquire %s: %w", l.what(), context.Cause(ctx))
		}
		if closed(err) {
			return fmt.Errorf("acquire %s: %w", l.what(), closedErr(l.js, err))
		}
		if !errors.Is(err, jetstream.ErrKeyExists) {
			if !unreachable {
				l.log.Warn("cannot reach the servers to take the lease; trying again", "installation", l.opts.Installation,
					"error", err)
				unreachable = true
			}
			if err := clock.Sleep(ctx, l.clk, retryPause); err != nil {
				return fmt.Errorf("acquire %s: %w", l.what(), err)
			}
			continue
		}
		unreachable = false
		if l.reclaim(ctx, v) {
			break
		}
		if w == nil {
			if w, err = l.kv.Watch(ctx, l.key); err != nil {
				w = nil
				// The next Create says whether the servers answer.
				if err := clock.Sleep(ctx, l.clk, retryPause); err != nil {
					return fmt.Errorf("acquire %s: %w", l.what(), err)
				}
				continue
			}
		}
		open, err := l.waitFree(ctx, w, &waitedFor)
		if err != nil {
			return fmt.Errorf("acquire %s: %w", l.what(), err)
		}
		if !open {
			w.Stop()
			w = nil // watched again after the next refusal
		}
	}
	l.recordHolder(ctx)
	l.log.Info("holding "+l.name(), "installation", l.opts.Installation, "key", l.key, "host", l.opts.Host,
		"ttl", l.opts.TTL)
	return nil
}

// recordHolder reads who took the lease last (Previous), and writes this
// host in its place. Failing either, it says so and goes on: the lease is
// held all the same, and Previous is what a recovery's reason is chosen
// by, nothing more.
func (l *Lease) recordHolder(ctx context.Context) {
	l.mu.Lock()
	v := l.value
	l.mu.Unlock()
	var prev Holder
	var err error
	read := false
	// Servers slow to answer (a loaded cluster) get a few tries, each
	// bounded: who held the lease before decides how a recovery names
	// what it ends.
	for try := 0; try < recordTries && ctx.Err() == nil; try++ {
		tctx, cancel := context.WithTimeout(ctx, requestTimeout)
		if !read {
			prev, _, err = latest(tctx, l.kv, lastKey(l.key))
			read = err == nil
		}
		if read {
			_, err = l.kv.Put(tctx, lastKey(l.key), v)
		}
		cancel()
		if err == nil {
			break
		}
	}
	if err != nil {
		l.log.Warn("could not read or write who took the lease last", "installation", l.opts.Installation, "key", l.key,
			"error", err)
	}
	l.mu.Lock()
	l.previous = prev
	l.mu.Unlock()
}

// recordTries is how many times recordHolder asks the servers.
const recordTries = 3

// Previous is the holder that took the lease before this host's last
// Acquire (the zero Holder when none did, or it could not be read): a
// host whose name is not this one's wrote the log last.
func (l *Lease) Previous() Holder {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.previous
}

// Holder reads who holds the lease now (found false: nobody).
func (l *Lease) Holder(ctx context.Context) (Holder, bool, error) {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	e, err := l.kv.Get(ctx, l.key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return Holder{}, false, nil
	}
	if err != nil {
		return Holder{}, false, fmt.Errorf("read %s: %w", l.what(), err)
	}
	var h Holder
	if err := json.Unmarshal(e.Value(), &h); err != nil {
		return Holder{}, false, fmt.Errorf("read %s: %w", l.what(), err)
	}
	return h, h.Host != "", nil
}

// waitFree reads the key's changes until the lease is free (deleted, or
// expired) or its TTL has passed without a word (the watcher may have
// missed the marker across a reconnect), logging whom it waits for. It
// says whether the watcher is still open.
func (l *Lease) waitFree(ctx context.Context, w jetstream.KeyWatcher, waitedFor *Holder) (bool, error) {
	t := l.clk.NewTimer(l.opts.TTL)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return true, context.Cause(ctx)
		case <-t.C():
			return true, nil
		case e, ok := <-w.Updates():
			if !ok {
				return false, nil
			}
			if e == nil {
				continue // the end of the key's present value
			}
			if e.Operation() != jetstream.KeyValuePut {
				return true, nil
			}
			h, err := decode(e.Value())
			if err != nil {
				l.log.Warn("the lease holds a value that is not a holder; waiting for it to expire", "error", err)
				continue
			}
			if h != *waitedFor {
				*waitedFor = h
				l.log.Info(fmt.Sprintf("waiting for host %s's %s, held since %s", h.Host,
					strings.TrimPrefix(l.what(), "the "), h.Since.Format(time.RFC3339)), "holder_pid", h.PID)
			}
		}
	}
}

// hold starts renewing the lease taken at revision rev.
func (l *Lease) hold(rev uint64, v []byte, sent time.Time) {
	ctx, stop := context.WithCancel(context.Background())
	l.mu.Lock()
	l.rev, l.value, l.lost, l.lostErr, l.stop, l.done = rev, v, make(chan struct{}), nil, stop, make(chan struct{})
	l.expires = sent.Add(l.opts.TTL)
	lost, done := l.lost, l.done
	l.mu.Unlock()
	go func() { // owned by the hold: Release stops and waits for it
		defer close(done)
		if err := l.renew(ctx, rev, v, sent); err != nil {
			l.mu.Lock()
			l.lostErr, l.rev = err, 0
			l.mu.Unlock()
			l.log.Error("lost "+l.name(), "installation", l.opts.Installation, "key", l.key, "error", err)
			close(lost)
		}
	}()
}

// renew renews the lease every TTL/3 until ctx ends (nil) or the lease is
// lost (why).
func (l *Lease) renew(ctx context.Context, rev uint64, v []byte, sent time.Time) error {
	ttl := l.opts.TTL
	for {
		if clock.SleepUntil(ctx, l.clk, sent.Add(ttl/3)) != nil {
			return nil
		}
		expires := sent.Add(ttl)
		for {
			at := l.clk.Now()
			if !at.Before(expires) {
				return fmt.Errorf("%s expired: no renewal was answered within its TTL (%v); this host was paused, or could not reach the servers",
					l.what(), ttl)
			}
			actx, cancel := clock.WithTimeout(ctx, l.clk, expires.Sub(at), errors.New("the lease expired"))
			r, err := l.put(actx, rev, v)
			cancel()
			if ctx.Err() != nil {
				return nil
			}
			if err == nil {
				rev, sent = r, at
				l.mu.Lock()
				l.rev, l.expires = rev, at.Add(ttl)
				l.mu.Unlock()
				break
			}
			if wrongRevision(err) {
				// A renewal of ours that was stored although its answer
				// was lost moved the revision: go on from it (counting
				// the TTL from the last renewal answered). Anything else
				// there is another host's.
				actx, cancel := clock.WithTimeout(ctx, l.clk, expires.Sub(l.clk.Now()), errors.New("the lease expired"))
				e, gerr := entry(actx, l.kv, l.key)
				cancel()
				if gerr == nil {
					if e == nil || !bytes.Equal(e.Value(), v) {
						return fmt.Errorf("%s was taken over (it had expired, or another process of this host took it): %w", l.what(), err)
					}
					rev = e.Revision()
					continue
				}
				err = gerr // not read: tried again, as a renewal not answered
			}
			now := l.clk.Now()
			if !now.Before(expires) {
				continue // said above
			}
			l.log.Warn("could not renew the lease; trying again", "installation", l.opts.Installation, "key", l.key, "error", err,
				"expires_in", expires.Sub(now))
			if clock.SleepUntil(ctx, l.clk, now.Add(min(retryPause, expires.Sub(now)))) != nil {
				return nil
			}
		}
	}
}

// Held says whether this host holds the lease now: it took it, has not
// lost it, and its last renewal (or the taking) was sent less than the
// TTL ago on its clock. It is false from the instant the lease may have
// expired, before the renewer finds out and Lost closes: a process that
// was paused (SIGSTOP) past its TTL writes nothing once it runs again.
func (l *Lease) Held() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.rev != 0 && l.clk.Now().Before(l.expires)
}

// Lost is closed when the lease Acquire took is lost (Err says why); nil
// before Acquire.
func (l *Lease) Lost() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lost
}

// Err is why the lease was lost (nil while it is held).
func (l *Lease) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lostErr
}

// Release stops renewing the lease and hands it back, so that a standby
// takes it at once rather than after the TTL. A lease already lost is
// not handed back (another host may hold it); Release then returns nil.
func (l *Lease) Release(ctx context.Context) error {
	l.mu.Lock()
	stop, done := l.stop, l.done
	l.mu.Unlock()
	if stop == nil {
		return nil // never held
	}
	stop()
	<-done
	l.mu.Lock()
	rev := l.rev
	l.rev, l.stop = 0, nil
	l.mu.Unlock()
	if rev == 0 {
		return nil
	}
	if err := l.kv.Delete(ctx, l.key, jetstream.LastRevision(rev)); err != nil {
		if wrongRevision(err) {
			return nil // it expired as the host stopped
		}
		return fmt.Errorf("release %s: %w", l.what(), err)
	}
	l.log.Info("handed back "+l.name(), "installation", l.opts.Installation, "key", l.key)
	return nil
}

// wrongRevision says whether the servers refused a write because the key
// is no longer at the revision it named.
func wrongRevision(err error) bool {
	var api *jetstream.APIError
	return errors.As(err, &api) && (api.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
		api.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant)
}

func decode(v []byte) (Holder, error) {
	var h Holder
	if err := json.Unmarshal(v, &h); err != nil {
		return Holder{}, fmt.Errorf("decode holder %q: %w", v, err)
	}
	return h, nil
}

// defaultReplicas is the replicas of a bucket made without being told: 3
// when the client sees at least 3 servers (a cluster keeps the lease
// through one's loss), else 1; as jetstreamlog makes the log's stream.
func defaultReplicas(js jetstream.JetStream) int {
	if len(js.Conn().Servers()) >= 3 {
		return 3
	}
	return 1
}
