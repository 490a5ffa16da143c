package jetstreamlog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/baton-run/baton/host/internal/eventlog"
	"github.com/nats-io/nats.go/jetstream"
)

// The applier is the fold: one goroutine that reads the stream in order
// (an ordered consumer from the replica's watermark + 1) and applies each
// message to the replica, with the watermark in the same Pebble batch.
// Its rule, the same on every host, makes the global event sequence:
//
//  1. A message whose After is the replica's last event sequence is
//     applied: its events get the sequences after it.
//  2. Any other message is void: skipped (only the watermark moves). It
//     can only be a writer's mistaken prediction, and its writer retries.
//  3. A message the replica refuses (it does not decode, or the store
//     refuses the batch, which a writer checks before it publishes) is
//     void too, alike on every host; a replica that fails fails the log.
//
// When a message is one of this host's own writes in flight (its
// Nats-Msg-Id is in the table), it is applied with what the message does
// not carry (the snapshot, the commit hook), and its writer is told.
type applier struct {
	l *Log

	mu       sync.Mutex
	events   uint64 // the replica's last event sequence
	stream   uint64 // the last stream sequence applied (the watermark); moves as its events become readable
	settled  uint64 // the last stream sequence whose apply is over (its writer's request settled)
	changed  chan struct{}
	subjects map[string]uint64       // a subject's last stream sequence, of those seen since Open
	foreign  map[string]foreignWrite // a thread subject's last write applied from another host
	inflight map[string]*request     // this host's writes in flight, by message id
	stopped  bool

	iter jetstream.MessagesContext // under mu: run makes it again (subscribe), stop stops it
	// ctx is every Next's; stop cancels it. It is what ends a Next that
	// the iterator's Stop does not (see stop).
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
}

// startApplier reads the replica's position and starts the fold.
func (l *Log) startApplier(ctx context.Context) error {
	a := &l.a
	a.l = l
	a.changed = make(chan struct{})
	a.subjects = map[string]uint64{}
	a.foreign = map[string]foreignWrite{}
	a.inflight = map[string]*request{}
	a.done = make(chan struct{})
	a.ctx, a.cancel = context.WithCancel(context.Background())
	a.events, _ = l.store.Last()
	v, found, err := l.store.Meta(metaWatermark)
	if err != nil {
		return fmt.Errorf("read the replica's watermark: %w", err)
	}
	if found {
		if a.stream, err = parseWatermark(v); err != nil {
			return err
		}
	}
	a.settled = a.stream
	if err := a.subscribe(ctx); err != nil {
		a.cancel()
		return err
	}
	go a.run()
	return nil
}

// resetAttempts bounds how many times nats.go's ordered consumer tries to
// make its consumer again, after a lost node, heartbeat or connection,
// before its Next gives up and the fold makes a new one (subscribe).
//
// Unbounded (nats.go's default), it retries under one consumer name for
// ever, and a name can be stuck: a consumer made just as a node stopped
// can be placed on that node (the meta leader does not know it is gone
// yet), and nats-server answers every later create of that name with
// "consumer offline" until the node is back. Seen once in some sixty runs
// of the node-loss test: the fold's consumer was being made again for
// minutes with two nodes of three up, and every Append waited for it. A
// new ordered consumer has a new name, placed anew on the nodes up.
const resetAttempts = 3

// subscribe makes the fold's ordered consumer, from the stream sequence
// after the replica's watermark, retrying until ctx ends.
func (a *applier) subscribe(ctx context.Context) error {
	l := a.l
	a.mu.Lock()
	from := a.stream
	a.mu.Unlock()
	cfg := jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverAllPolicy, MaxResetAttempts: resetAttempts}
	if from > 0 {
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, from+1
	}
	return retry(ctx, l.log, "read the stream", func(ctx context.Context) error {
		cons, err := l.js.OrderedConsumer(ctx, streamName(l.inst), cfg)
		if err != nil {
			return err
		}
		// A heartbeat each second: the fold notices a lost server (and
		// its consumer is made again) within seconds, not half a minute.
		it, err := cons.Messages(jetstream.PullExpiry(10*time.Second), jetstream.PullHeartbeat(time.Second))
		if err != nil {
			return err
		}
		if l.wrapIter != nil {
			it = l.wrapIter(it)
		}
		a.mu.Lock()
		a.iter = it
		a.mu.Unlock()
		return nil
	})
}

// current is the fold's iterator.
func (a *applier) current() jetstream.MessagesContext {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.iter
}

func (a *applier) run() {
	defer func() {
		// An iterator subscribe made after stop stopped the one before
		// is stopped here.
		a.current().Stop()
		close(a.done)
	}()
	for {
		iter := a.current()
		msg, err := iter.Next(jetstream.NextContext(a.ctx))
		if a.ctx.Err() != nil {
			return // the log is closing: what Next gave is applied at the next open
		}
		if errors.Is(err, jetstream.ErrMsgIteratorClosed) && a.l.nc.IsClosed() {
			// The servers closed the connection (they refused this
			// client): the log fails with their reason (connect's closed
			// handler); there is nothing to read on.
			return
		}
		if errors.Is(err, jetstream.ErrMsgIteratorClosed) {
			// The ordered consumer gave up making its consumer again
			// (resetAttempts): make a new one, with a new name.
			_, at := a.position()
			a.l.log.Warn("the stream's consumer could not be made again; making a new one", "after", at)
			iter.Stop()
			if err := a.subscribe(a.ctx); err != nil {
				if a.ctx.Err() == nil {
					a.l.fails.set(fmt.Errorf("read stream %s again: %w", streamName(a.l.inst), err))
				}
				return
			}
			continue
		}
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			a.l.fails.set(fmt.Errorf("stream %s is gone: %w", streamName(a.l.inst), err))
			return
		}
		if err != nil {
			// The ordered consumer recreates itself after a lost
			// connection or a gap; nothing to do but read on.
			a.l.log.Debug("reading the stream", "error", err)
			continue
		}
		if err := a.apply(msg); err != nil {
			a.l.fails.set(err)
			a.failInflight(err)
			return
		}
	}
}

// apply folds one message into the replica.
func (a *applier) apply(msg jetstream.Msg) error {
	md, err := msg.Metadata()
	if err != nil {
		return fmt.Errorf("read a stream message's metadata: %w", err)
	}
	seq := md.Sequence.Stream
	a.mu.Lock()
	expect := a.stream + 1
	events := a.events
	req := a.inflight[msg.Headers().Get(jetstream.MsgIDHeader)]
	a.mu.Unlock()
	if seq < expect {
		return nil // delivered again (a consumer made again): applied already
	}
	if seq > expect {
		// The ordered consumer delivers the stream gapless from where
		// it started; another sequence means the stream lost messages.
		return fmt.Errorf("the stream gave message %d after %d: it lost messages (a stream of a Baton log must deny deletes and purges)", seq, expect-1)
	}
	watermark := map[string][]byte{metaWatermark: strconv.AppendUint(nil, seq, 10)}

	var w wireBatch
	var b eventlog.Batch
	void := "" // why the message is void, if it is
	if err := json.Unmarshal(msg.Data(), &w); err != nil {
		void = "it does not decode: " + err.Error()
	} else if w.After != events {
		void = fmt.Sprintf("it follows event %d, the replica's last is %d", w.After, events)
	} else {
		b = w.batch()
	}
	var recs []eventlog.Record
	var ids []string
	var refused error
	advanced := false // guarded by a.mu: the position moved in the commit hook
	if void == "" {
		var own func(uint64)
		if req != nil {
			b.Snapshot = req.in.Snapshot
			own = req.in.OnCommit
		}
		// The position moves before readers can read the events: a
		// writer of this host that sees them predicts after them, never
		// from before (it would be refused, and then take the write it
		// saw for another host's since its prediction: a false fence).
		n := uint64(len(b.Events))
		b.OnCommit = func(last uint64) {
			a.mu.Lock()
			a.advance(seq, msg.Subject(), n, w.Host)
			advanced = true
			a.mu.Unlock()
			if own != nil {
				own(last)
			}
		}
		b.Meta = watermark
		recs, ids, err = a.l.store.Append(b)
		if err != nil {
			if ferr := a.l.store.Failure(); ferr != nil {
				return fmt.Errorf("the replica failed: %w", ferr)
			}
			refused = err
			void = "the replica refuses it: " + err.Error()
		}
	}
	if void != "" {
		if req == nil {
			a.l.log.Warn("a message of the log is void", "seq", seq, "why", void)
		}
		if _, _, err := a.l.store.Append(eventlog.Batch{Meta: watermark}); err != nil {
			return fmt.Errorf("the replica failed: %w", err)
		}
	}

	a.mu.Lock()
	defer a.mu.Unlock()
	switch {
	case advanced:
	case void == "": // a batch of no events: no commit hook ran
		a.advance(seq, msg.Subject(), uint64(len(recs)), w.Host)
	default:
		a.stream = seq
		a.subjects[msg.Subject()] = seq
	}
	if req != nil {
		delete(a.inflight, req.id)
		switch {
		case refused != nil:
			req.settle(nil, nil, refused)
		case void != "":
			req.void = true
		default:
			if err := req.check(recs, ids); err != nil {
				return err
			}
			req.settle(recs, ids, nil)
		}
	}
	a.settled = seq
	close(a.changed)
	a.changed = make(chan struct{})
	return nil
}

// advance moves the replica's position past stream message seq, applied
// with n events, written by host on subject (a.mu held).
func (a *applier) advance(seq uint64, subject string, n uint64, host string) {
	a.stream = seq
	a.subjects[subject] = seq
	a.events += n
	if host != a.l.host {
		a.foreign[subject] = foreignWrite{seq: seq, host: host}
	}
}

// position is the replica's last event sequence and stream sequence.
func (a *applier) position() (events, stream uint64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.events, a.stream
}

// subjectSeq is a subject's last stream sequence as the replica knows it
// (false: no message of it was applied since Open).
func (a *applier) subjectSeq(subject string) (uint64, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	s, ok := a.subjects[subject]
	return s, ok
}

// foreignWrite is another host's write to a thread: its stream sequence
// and its host.
type foreignWrite struct {
	seq  uint64
	host string
}

// foreignSince is the host of another host's write to a thread subject
// applied after stream sequence since ("": none).
func (a *applier) foreignSince(subject string, since uint64) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	if f := a.foreign[subject]; f.seq > since {
		return f.host
	}
	return ""
}

func (a *applier) register(r *request) {
	a.mu.Lock()
	a.inflight[r.id] = r
	a.mu.Unlock()
}

func (a *applier) unregister(r *request) {
	a.mu.Lock()
	delete(a.inflight, r.id)
	a.mu.Unlock()
}

// waitApplied waits until the replica has applied stream sequence seq.
func (a *applier) waitApplied(ctx context.Context, seq uint64) error {
	for {
		a.mu.Lock()
		at, ch, stopped := a.settled, a.changed, a.stopped
		a.mu.Unlock()
		if at >= seq {
			return nil
		}
		if stopped {
			return eventlog.ErrClosed
		}
		select {
		case <-ch:
		case <-a.done:
			if err := a.l.Failure(); err != nil {
				return err
			}
			return eventlog.ErrClosed
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
}

// failInflight answers every write in flight with the log's failure.
func (a *applier) failInflight(err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for id, r := range a.inflight {
		delete(a.inflight, id)
		r.settle(nil, nil, err)
	}
}

// stop stops the fold and waits for it.
//
// The iterator's Stop alone does not end a Next for certain: a Next
// whose consumer is being made again (after a node's loss, a missed
// heartbeat, a reconnect) holds the ordered consumer's lock while it
// retries, and when the new consumer is made, Next subscribes to it after
// Stop has run, then waits on that subscription, which nothing stops, for
// ever (nats.go v1.56.0, ordered.go: resetMessages against Stop), and
// Close with it. So Next is also given the fold's context, which
// stop cancels first: a Next waiting for a message returns at once, and
// one in a consumer's re-creation returns when the attempt under way ends
// (Stop makes it the last; nats.go bounds an attempt to ten seconds and
// the backoff before it to ten), with the context's error.
func (a *applier) stop() {
	a.mu.Lock()
	a.stopped = true
	close(a.changed)
	a.changed = make(chan struct{})
	a.mu.Unlock()
	a.cancel()
	a.current().Stop()
	<-a.done
}
