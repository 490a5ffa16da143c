// Package jetstreamlog is Baton's event log kept in a NATS JetStream
// stream, for several hosts sharing one log. The stream is the truth; each
// host keeps a replica of it in a local Pebble store (eventlog.Store), fed
// from the stream in stream order, and reads only the replica: receipts
// are kept for ever (not only inside JetStream's duplicate window), and a
// reader on any host sees every host's events.
//
// The code is split by job: this file holds the Log, its options, Open
// and Close, and the reads (all the replica's); layout.go names and
// encodes everything the stream holds; writer.go publishes decided writes
// (prediction, retries, the fence, group commit); applier.go is the fold
// that applies the stream to the replica; snapshot.go the snapshot
// bucket; fail.go how the log fails, and the retries that are not
// failures; connect.go how a host connects to the servers (the lease's
// connection too), and what a refusal is.
package jetstreamlog

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/baton-run/baton/host/internal/eventlog"
	"github.com/hashicorp/go-hclog"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Options say which servers hold the log and where the replica lives. The
// zero value of each field but URLs and Dir works.
type Options struct {
	// URLs are the servers' client URLs (a list, or one comma-separated).
	URLs []string
	// CredsFile is a NATS credentials file, TokenFile a file holding a
	// token (its surrounding white space trimmed).
	CredsFile, TokenFile string
	// TLS: the CA that signs the servers' certificates, and this
	// client's certificate and key (all optional).
	TLS TLS
	// Installation names the stream and bucket ("baton" unless told): one
	// per set of hosts sharing a log.
	Installation string
	// Host names this host in what it writes (the fence compares it; the
	// machine's host name unless told). Two hosts sharing a log must have
	// different names.
	Host string
	// Replicas is the stream's and bucket's replica count when this host
	// creates them (0: 3 when the client sees at least 3 servers, else 1).
	Replicas int
	// Dir is the replica's directory.
	Dir string
	// Logger (nil: none) gets the log's lines.
	Logger hclog.Logger
	// Name is the connection's name as the servers show it.
	Name string
	// Duplicates is the stream's duplicate window when this host creates
	// it (0: JetStream's default, 2 minutes). Nothing depends on it for
	// more than an Append's retries: receipts are the replica's.
	Duplicates time.Duration
	// CloseTimeout bounds how long Close waits for the servers to take
	// the writes still queued when they do not answer (0: 10 seconds),
	// so that a host whose servers are gone still exits.
	CloseTimeout time.Duration

	// wrapIter, when set (tests), wraps the fold's stream iterator.
	wrapIter func(jetstream.MessagesContext) jetstream.MessagesContext
}

// defaultCloseTimeout is Options.CloseTimeout's default: long enough for a
// restarting node or a leader election, short enough that a supervisor
// stopping the host does not give up on it first (systemd waits 90s).
const defaultCloseTimeout = 10 * time.Second

// TLS is the client's TLS files.
type TLS struct {
	CAFile, CertFile, KeyFile string
}

// Log is the event log in JetStream. It is safe for concurrent use.
type Log struct {
	inst, host string
	log        hclog.Logger
	nc         *nats.Conn
	js         jetstream.JetStream
	stream     jetstream.Stream
	kv         jetstream.KeyValue
	store      *eventlog.Store

	fails failure

	w writer  // writer.go
	a applier // applier.go

	closeTimeout time.Duration                                             // Options.CloseTimeout
	wrapIter     func(jetstream.MessagesContext) jetstream.MessagesContext // Options.wrapIter

	closing chan struct{} // closed by Close
	watched chan struct{} // closed when the replica's watcher has stopped

	closeOnce sync.Once
	closeErr  error
}

var _ eventlog.Log = (*Log)(nil)

// Open connects to the servers, makes sure the stream and the snapshot
// bucket exist (creating them if not), opens the replica in o.Dir and
// catches it up to the stream's last message before it returns, so that a
// host's recovery reads a current log. Servers that cannot be reached
// make Open wait and retry until ctx ends; servers that refuse this
// client's token, credentials or TLS fail it at once (ErrRefused).
func Open(ctx context.Context, o Options) (*Log, error) {
	if o.Installation == "" {
		o.Installation = "baton"
	}
	if err := validInstallation(o.Installation); err != nil {
		return nil, fmt.Errorf("open jetstream log: %w", err)
	}
	if o.Host == "" {
		h, err := os.Hostname()
		if err != nil {
			return nil, fmt.Errorf("open jetstream log: name this host (Options.Host): %w", err)
		}
		o.Host = h
	}
	if strings.ContainsAny(o.Host, " \t\r\n") {
		return nil, fmt.Errorf("open jetstream log: host name %q holds white space", o.Host)
	}
	if o.Dir == "" {
		return nil, errors.New("open jetstream log: no replica directory (Options.Dir)")
	}
	log := o.Logger
	if log == nil {
		log = hclog.NewNullLogger()
	}
	if o.CloseTimeout <= 0 {
		o.CloseTimeout = defaultCloseTimeout
	}
	l := &Log{inst: o.Installation, host: o.Host, log: log, closeTimeout: o.CloseTimeout, wrapIter: o.wrapIter,
		closing: make(chan struct{}), watched: make(chan struct{})}
	l.fails.init()
	nc, err := l.connect(ctx, o)
	if err != nil {
		return nil, err
	}
	l.nc = nc
	if err := l.open(ctx, o); err != nil {
		if r := ClosedBy(nc); r != nil {
			err = r // the servers came up, and refused the client
		}
		nc.Close()
		return nil, fmt.Errorf("open jetstream log %s: %w", streamName(o.Installation), err)
	}
	return l, nil
}

// connect connects as Connect does: servers down at first are waited for
// (until ctx ends), and servers lost later too; servers that refuse the
// client fail it. A connection the client library closes later (servers
// that refused it as it reconnected: its token or credentials are no
// longer theirs) fails the log: nothing reopens it, and writes would wait
// on it for ever.
func (l *Log) connect(ctx context.Context, o Options) (*nats.Conn, error) {
	auth, err := ConnectOptions(o)
	if err != nil {
		return nil, fmt.Errorf("open jetstream log: %w", err)
	}
	log := l.log
	opts := append(auth,
		nats.Name(o.Name),
		nats.CustomReconnectDelay(reconnectDelay),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			log.Warn("lost the connection to the jetstream log's servers; writes wait until it is back", "error", err)
		}),
		nats.ReconnectHandler(func(c *nats.Conn) {
			log.Info("reconnected to the jetstream log's servers", "server", c.ConnectedUrlRedacted())
		}),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			// A refusal as the client reconnects comes here (not only a
			// slow consumer): into the host's log, not the library's
			// default, a line on stderr.
			log.Warn("the jetstream log's servers said", "error", err)
		}),
		nats.ClosedHandler(func(c *nats.Conn) {
			select {
			case <-l.closing:
				return // Close closed it
			default:
			}
			why := ClosedBy(c)
			if why == nil {
				why = fmt.Errorf("the connection to the jetstream log's servers closed: %v", c.LastError())
			}
			l.fails.set(why)
		}),
	)
	nc, err := Connect(ctx, o.URLs, log, opts...)
	if err != nil {
		return nil, fmt.Errorf("open jetstream log: %w", err)
	}
	return nc, nil
}

// reconnectDelay backs off from a quarter second to two seconds: a node
// restarting is back within that, and a long outage is not hammered.
func reconnectDelay(attempts int) time.Duration {
	return min(250*time.Millisecond<<min(attempts, 3), 2*time.Second)
}

func (l *Log) open(ctx context.Context, o Options) error {
	js, err := jetstream.New(l.nc, jetstream.WithPublishAsyncTimeout(publishTimeout),
		jetstream.WithPublishAsyncMaxPending(maxGroup*2))
	if err != nil {
		return err
	}
	l.js = js
	if err := l.ensureStream(ctx, o); err != nil {
		return err
	}
	if err := l.ensureBucket(ctx, o); err != nil {
		return err
	}
	store, err := eventlog.OpenWith(o.Dir, eventlog.Options{Logger: l.log.Named("replica"), NoSync: true})
	if err != nil {
		return err
	}
	l.store = store
	if err := l.checkReplica(o.Dir); err != nil {
		store.Close()
		return err
	}
	if err := l.startApplier(ctx); err != nil {
		store.Close()
		return err
	}
	l.startWriter()
	// The replica failing fails the log, whoever meets it first.
	go func() {
		defer close(l.watched)
		select {
		case <-store.Failed():
			l.fails.set(fmt.Errorf("the replica failed: %w", store.Failure()))
		case <-l.closing:
		}
	}()
	// Catch up before returning: a host's recovery reads the log as the
	// stream has it now.
	if err := l.catchUp(ctx); err != nil {
		l.Close()
		return fmt.Errorf("catch up the replica: %w", err)
	}
	return nil
}

// checkReplica makes sure the replica is this stream's: a replica of a
// stream since deleted and made again (or of another installation) would
// read its watermark against messages it never had.
func (l *Log) checkReplica(dir string) error {
	info := l.stream.CachedInfo()
	id := []byte(info.Config.Name + "@" + info.Created.UTC().Format(time.RFC3339Nano))
	v, found, err := l.store.Meta(metaStream)
	switch {
	case err != nil:
		return fmt.Errorf("read the replica's stream: %w", err)
	case !found:
		if last, _ := l.store.Last(); last > 0 {
			return fmt.Errorf("the replica in %s has events but names no stream: it is not a jetstream log's replica", dir)
		}
		return l.store.SetMeta(metaStream, id)
	case string(v) != string(id):
		return fmt.Errorf("the replica in %s is of stream %s, not %s: remove it to rebuild it from this stream", dir, v, id)
	}
	return nil
}

// replicas is the replica count a new stream gets.
func (l *Log) replicas(o Options) int {
	if o.Replicas > 0 {
		return o.Replicas
	}
	if len(l.nc.Servers()) >= 3 {
		return 3
	}
	return 1
}

// ensureStream creates the stream or checks the one there.
func (l *Log) ensureStream(ctx context.Context, o Options) error {
	name := streamName(l.inst)
	want := jetstream.StreamConfig{
		Name:        name,
		Description: "Baton's event log: one message per decided write",
		Subjects:    subjects(l.inst),
		Storage:     jetstream.FileStorage,
		Retention:   jetstream.LimitsPolicy,
		MaxMsgs:     -1, MaxBytes: -1, MaxAge: 0, MaxMsgsPerSubject: -1,
		Discard:     jetstream.DiscardOld,
		DenyDelete:  true,
		DenyPurge:   true,
		AllowDirect: true,
		Replicas:    l.replicas(o),
		Duplicates:  o.Duplicates,
	}
	return retry(ctx, l.log, "find or create the stream "+name, func(ctx context.Context) error {
		s, err := l.js.Stream(ctx, name)
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			s, err = l.js.CreateStream(ctx, want)
			if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
				s, err = l.js.Stream(ctx, name) // another host made it first
			}
		}
		if err != nil {
			return err
		}
		if err := checkStream(s.CachedInfo().Config, want); err != nil {
			return permanent(err)
		}
		l.stream = s
		return nil
	})
}

// checkStream says what in a stream found differs from what the log needs.
func checkStream(got, want jetstream.StreamConfig) error {
	var diffs []string
	if strings.Join(got.Subjects, ",") != strings.Join(want.Subjects, ",") {
		diffs = append(diffs, fmt.Sprintf("its subjects are %q, not %q", got.Subjects, want.Subjects))
	}
	if got.Retention != jetstream.LimitsPolicy {
		diffs = append(diffs, fmt.Sprintf("its retention is %s, not limits", got.Retention))
	}
	if got.MaxMsgs > 0 || got.MaxBytes > 0 || got.MaxAge > 0 || got.MaxMsgsPerSubject > 0 {
		diffs = append(diffs, "it discards messages (max msgs, bytes, age or msgs per subject)")
	}
	if !got.AllowDirect {
		diffs = append(diffs, "it does not allow direct gets")
	}
	if len(diffs) > 0 {
		return fmt.Errorf("stream %s is not a Baton log: %s", got.Name, strings.Join(diffs, "; "))
	}
	return nil
}

// Close commits what is queued, stops the applier and the writer, closes
// the replica and the connection.
//
// While the servers answer, Close waits for every queued write. When they
// do not, it waits at most Options.CloseTimeout, then gives up: every
// write still waiting (its Append, or a Receipt's catch-up) returns an
// error wrapping eventlog.ErrClosed that says the log closed before the
// servers took it, the writer's retries end, and the connection is closed
// rather than drained. A write given up on may still have reached the
// stream (its outcome was unknown, not refused): then it is in the log,
// and the replica applies it when the log is next opened, on this host or
// another. Its caller must not assume it was not written.
func (l *Log) Close() error {
	l.closeOnce.Do(func() {
		unsent := l.w.stop(l.closeTimeout)
		if unsent > 0 {
			l.log.Warn("closed the jetstream log before its servers took every write; they may still be in the stream, and the next open applies them if so",
				"writes", unsent, "waited", l.closeTimeout)
		}
		l.a.stop()
		close(l.closing)
		<-l.watched
		err := l.store.Close()
		if unsent > 0 {
			l.nc.Close() // a drain would wait for servers that do not answer
		} else if derr := l.nc.Drain(); err == nil && derr != nil &&
			!errors.Is(derr, nats.ErrConnectionClosed) && !errors.Is(derr, nats.ErrConnectionReconnecting) {
			err = derr
		}
		l.closeErr = err
	})
	return l.closeErr
}

// The reads: all the replica's.

// Last is the replica's last sequence.
func (l *Log) Last() (uint64, <-chan struct{}) { return l.store.Last() }

// After reads the replica.
func (l *Log) After(after uint64, limit int) ([]eventlog.Record, error) {
	return l.store.After(after, limit)
}

// ThreadAfter reads the replica.
func (l *Log) ThreadAfter(threadID string, after, upTo uint64, limit int) ([]eventlog.Record, error) {
	return l.store.ThreadAfter(threadID, after, upTo, limit)
}

// HasThreadEvent reads the replica.
func (l *Log) HasThreadEvent(threadID string, seq uint64) (bool, error) {
	return l.store.HasThreadEvent(threadID, seq)
}

// Receipt reads the replica, which keeps every receipt for ever. A
// receipt the replica has is the log's; one it has not may be another
// host's write the replica has not applied yet, so the replica first
// catches up with the stream's last message (a read that begins after an
// append returned, on any host, sees its receipt: the conformance suite's
// linearizability check). It waits while the servers cannot be reached,
// until the log closes.
func (l *Log) Receipt(commandID string) ([]byte, bool, error) {
	v, found, err := l.store.Receipt(commandID)
	if err != nil || found {
		return v, found, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { // ends with the call (cancel) or the log (Close)
		select {
		case <-l.closing:
			cancel()
		case <-ctx.Done():
		}
	}()
	if err := l.catchUp(ctx); err != nil {
		select {
		case <-l.closing:
			return nil, false, eventlog.ErrClosed
		default:
		}
		return nil, false, fmt.Errorf("receipt of %s: %w", commandID, err)
	}
	return l.store.Receipt(commandID)
}

// catchUp returns once the replica has applied the stream's last message
// as of the call.
func (l *Log) catchUp(ctx context.Context) error {
	var info *jetstream.StreamInfo
	err := retry(ctx, l.log, "read the stream's last sequence", func(ctx context.Context) error {
		var err error
		info, err = l.stream.Info(ctx)
		return err
	})
	if err != nil {
		return err
	}
	return l.a.waitApplied(ctx, info.State.LastSeq)
}

// Outbox reads the replica.
func (l *Log) Outbox() ([]eventlog.StoredEffect, error) { return l.store.Outbox() }

// Heads reads the replica.
func (l *Log) Heads(after string, limit int) ([]eventlog.Head, error) {
	return l.store.Heads(after, limit)
}

// Head reads the replica.
func (l *Log) Head(threadID string) ([]byte, bool, error) { return l.store.Head(threadID) }

// LiveThreads reads the replica.
func (l *Log) LiveThreads() ([]string, error) { return l.store.LiveThreads() }

// PutThreadState writes the replica only: what it writes is derived.
func (l *Log) PutThreadState(threadID string, head []byte, live bool, sn *eventlog.Snapshot) error {
	return l.store.PutThreadState(threadID, head, live, sn)
}

// PutArchive writes the replica only: what it writes is derived.
func (l *Log) PutArchive(threadID string, parts []eventlog.ArchivePart) error {
	return l.store.PutArchive(threadID, parts)
}

// Archive reads the replica.
func (l *Log) Archive(threadID string, from, to, below uint32) ([]eventlog.ArchivePart, error) {
	return l.store.Archive(threadID, from, to, below)
}

// ArchiveBefore reads the replica.
func (l *Log) ArchiveBefore(threadID string, ordinal, part, below uint32, limit int) ([]eventlog.ArchivePart, error) {
	return l.store.ArchiveBefore(threadID, ordinal, part, below, limit)
}

// Deliveries reads the replica.
func (l *Log) Deliveries(target string) ([]eventlog.StoredDelivery, error) {
	return l.store.Deliveries(target)
}

// TargetStates reads the replica.
func (l *Log) TargetStates() ([]eventlog.TargetState, error) { return l.store.TargetStates() }

// Meta reads the replica.
func (l *Log) Meta(name string) ([]byte, bool, error) { return l.store.Meta(name) }

// SetMeta writes the replica only: a store's metadata is its host's.
func (l *Log) SetMeta(name string, v []byte) error { return l.store.SetMeta(name, v) }

// EffectDone removes a performed effect from every host's outbox.
func (l *Log) EffectDone(ref eventlog.EffectRef) error {
	if _, _, err := l.Append(eventlog.Batch{Done: []eventlog.EffectRef{ref}}); err != nil {
		return fmt.Errorf("remove effect %s of thread %s: %w", ref.ID, ref.ThreadID, err)
	}
	return nil
}

// UpdateDelivery rewrites a stored notification on every host.
func (l *Log) UpdateDelivery(d eventlog.StoredDelivery) error {
	if _, _, err := l.Append(eventlog.Batch{DeliveryUpdates: []eventlog.StoredDelivery{d}}); err != nil {
		return fmt.Errorf("record notification %d to %s: %w", d.Seq, d.Target, err)
	}
	return nil
}

// DeliveryDone removes notifications and writes their targets' states on
// every host.
func (l *Log) DeliveryDone(refs []eventlog.DeliveryRef, states ...eventlog.TargetState) error {
	if len(refs) == 0 && len(states) == 0 {
		return nil
	}
	if _, _, err := l.Append(eventlog.Batch{DeliveriesDone: refs, TargetStates: states}); err != nil {
		return fmt.Errorf("remove %d notifications: %w", len(refs), err)
	}
	return nil
}
