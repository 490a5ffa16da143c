package jetstreamlog

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/baton-run/baton/host/internal/eventlog"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The writer: one goroutine that publishes decided writes. Each round it
// takes every Append waiting (a group) and:
//
//  1. predicts each write's place from the replica (its last event and
//     stream sequences) and the writes before it in the group: the event
//     sequence it follows (After), the stream's last sequence and its
//     thread subject's last sequence when it arrives (the expected-last
//     headers), and gives it a new message id;
//  2. publishes the group pipelined and waits for every ack; a write
//     whose outcome is unknown (a timeout, a lost connection) is
//     published again, the same message with the same id, so that
//     JetStream's deduplication makes it idempotent, until it is acked
//     or rejected;
//  3. waits until the replica has applied what was acked (and, when a
//     write was rejected, the stream's last message), and answers the
//     writes the fold applied;
//  4. goes round again with the rest (rejected: the stream moved; or
//     void), re-predicted with new ids, but fails with ErrFenced a write
//     whose thread another host wrote since it was first predicted.
//
// A write that cannot reach the servers waits and retries with backoff,
// until Close gives up on it (stop): then the writer's context is
// cancelled, with errUnsent as its cause, which ends every retry, backoff
// and wait of the writer, and answers each write still waiting with it.
type writer struct {
	l *Log

	mu      sync.Mutex
	queue   []*request
	stopped bool
	wake    chan struct{}
	done    chan struct{}

	// ctx is every server call's and wait's of the writer; stop cancels
	// it (with errUnsent) when it gives up on what is queued.
	ctx    context.Context
	cancel context.CancelCauseFunc
	unsent int // writes answered with errUnsent (the writer's goroutine's; read after done)

	idPrefix string // <host>.<random>: message ids never repeat across opens
	outage   bool   // the servers stopped taking writes: warned once, told once when they are back
	n        uint64

	// beforePublish, when set (tests), is called before a group is
	// published, with its requests; unknown, when a round of it met
	// outcomes it could not know (the servers did not answer).
	beforePublish func([]*request)
	unknown       func()
}

// request is one Append.
type request struct {
	in      eventlog.Batch
	subject string
	thread  string // "" for the log subject
	done    chan struct{}

	// The current attempt.
	id       string
	after    uint64 // the event sequence it follows
	expLast  uint64 // Nats-Expected-Last-Sequence
	expSubj  uint64 // Nats-Expected-Last-Subject-Sequence (thread subjects)
	msg      *nats.Msg
	first    uint64 // the stream sequence its first prediction rested on
	attempts int

	// Set by the applier (under its lock).
	applied bool
	void    bool
	recs    []eventlog.Record
	ids     []string
	err     error
}

func (r *request) settle(recs []eventlog.Record, ids []string, err error) {
	r.applied, r.recs, r.ids, r.err = true, recs, ids, err
}

// check compares what the replica applied with what was predicted.
func (r *request) check(recs []eventlog.Record, ids []string) error {
	bug := func(what string) error {
		return fmt.Errorf("the replica applied message %s differently from its prediction (a bug): %s", r.id, what)
	}
	if len(recs) != len(r.in.Events) {
		return bug(fmt.Sprintf("%d events, predicted %d", len(recs), len(r.in.Events)))
	}
	for i, rec := range recs {
		e := r.in.Events[i]
		if rec.Sequence != r.after+uint64(i)+1 || rec.ThreadID != e.ThreadID || rec.Type != e.Type || !rec.At.Equal(e.At) {
			return bug(fmt.Sprintf("event %d is %d %s %s, predicted %d %s %s", i, rec.Sequence, rec.ThreadID, rec.Type, r.after+uint64(i)+1, e.ThreadID, e.Type))
		}
	}
	last := r.after + uint64(len(recs))
	for i, id := range ids {
		if want := strconv.FormatUint(last, 10) + "." + strconv.Itoa(i); id != want {
			return bug(fmt.Sprintf("effect %d is %s, predicted %s", i, id, want))
		}
	}
	return nil
}

// ErrFenced says a thread was written by another host since this host
// decided what to write to it: its lease moved, and this host's decision
// is not written.
var ErrFenced = errors.New("fenced")

type fencedError struct{ thread, other string }

func (e *fencedError) Error() string {
	return fmt.Sprintf("%v: thread %s was written by host %s since this host decided; its lease moved", ErrFenced, e.thread, e.other)
}
func (e *fencedError) Unwrap() error { return ErrFenced }

// maxGroup bounds how many writes one round publishes.
const maxGroup = 256

// publishTimeout is how long a published write waits for its ack before
// its outcome is unknown and it is published again (the same message:
// JetStream's deduplication makes that harmless, so it can be short).
const publishTimeout = 2 * time.Second

func (l *Log) startWriter() {
	w := &l.w
	w.l = l
	w.wake = make(chan struct{}, 1)
	w.done = make(chan struct{})
	w.ctx, w.cancel = context.WithCancelCause(context.Background())
	var b [6]byte
	rand.Read(b[:]) // never fails (crypto/rand)
	w.idPrefix = l.host + "." + hex.EncodeToString(b[:])
	go w.run()
}

// Append publishes a batch as one message and returns once the replica
// has applied it, with the replica's records and outbox ids. It waits
// while the servers cannot be reached, until Close gives up on it (an
// error wrapping eventlog.ErrClosed; see Close). A batch for a thread another host
// wrote since this host predicted it fails with an error wrapping
// ErrFenced, and nothing of it is written.
func (l *Log) Append(in eventlog.Batch) ([]eventlog.Record, []string, error) {
	if err := check(in); err != nil {
		return nil, nil, fmt.Errorf("append: %w", err)
	}
	r := &request{in: in, done: make(chan struct{})}
	r.subject, r.thread = subject(l.inst, in)
	w := &l.w
	w.mu.Lock()
	if w.stopped {
		w.mu.Unlock()
		return nil, nil, eventlog.ErrClosed
	}
	w.queue = append(w.queue, r)
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
	<-r.done
	return r.recs, r.ids, r.err
}

// check refuses what the replica would refuse, before it is published:
// the checks of eventlog.Store's Append.
func check(in eventlog.Batch) error {
	if len(in.Effects) > 0 && len(in.Events) == 0 {
		return errors.New("effects without an event")
	}
	if in.Snapshot != nil && len(in.Events) == 0 {
		return errors.New("a snapshot without an event to mark it")
	}
	for _, d := range in.Deliveries {
		if d.Event < 0 || d.Event >= len(in.Events) {
			return fmt.Errorf("a notification to %s names event %d of a batch of %d", d.Target, d.Event, len(in.Events))
		}
	}
	if in.CommandID != "" && in.Receipt == nil {
		return fmt.Errorf("command %s has no receipt", in.CommandID)
	}
	for _, e := range in.Events {
		if y := e.At.Year(); y < 1678 || y > 2261 {
			return fmt.Errorf("event %s: time %v is outside the years 1678 to 2261 that the log's Unix nanoseconds hold", e.Type, e.At)
		}
		if !json.Valid(e.Data) {
			return fmt.Errorf("event %s: data is not JSON", e.Type)
		}
	}
	return nil
}

func (w *writer) run() {
	defer close(w.done)
	for {
		w.mu.Lock()
		group := w.queue
		if len(group) > maxGroup {
			group = group[:maxGroup]
		}
		w.queue = w.queue[len(group):]
		stopped := w.stopped
		w.mu.Unlock()
		if len(group) == 0 {
			if stopped {
				return
			}
			<-w.wake
			continue
		}
		w.commit(group)
		for _, r := range group {
			if errors.Is(r.err, errUnsent) {
				w.unsent++
			}
			close(r.done)
		}
	}
}

// errUnsent answers a write Close gave up on: the servers did not take
// it within Options.CloseTimeout. It wraps eventlog.ErrClosed, which a
// host's drain takes for the log being closed under it (as it is) and so
// ends quietly; the write may still be in the stream.
var errUnsent = fmt.Errorf("%w before its servers took the write (they did not answer within the close timeout); "+
	"it may still be in the stream, and the log's next open applies it if so", eventlog.ErrClosed)

// stop takes no more writes and lets the writer commit what is queued,
// waiting for it at most bound; then it gives up on what is left (the
// writer's context is cancelled with errUnsent, which answers every write
// still waiting) and waits for the writer to end. It returns how many
// writes it gave up on.
func (w *writer) stop(bound time.Duration) int {
	w.mu.Lock()
	w.stopped = true
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
	timer := time.NewTimer(bound)
	defer timer.Stop()
	select {
	case <-w.done:
	case <-timer.C:
		w.cancel(errUnsent)
		<-w.done
	}
	w.cancel(nil) // releases the context when nothing was given up
	return w.unsent
}

// closedUnder is err, or errUnsent when Close gave up on the writer's
// writes: a call cut short by that says so, not what the servers last
// answered.
func (w *writer) closedUnder(err error) error {
	if w.ctx.Err() != nil {
		return context.Cause(w.ctx)
	}
	return err
}

// commit writes a group: rounds of predict, publish, wait, until every
// write is applied or has failed.
func (w *writer) commit(group []*request) {
	l := w.l
	ctx := w.ctx
	pending := group
	for len(pending) > 0 {
		err := l.Failure()
		if err == nil && ctx.Err() != nil {
			err = context.Cause(ctx) // Close gave up: nothing more is published
		}
		if err != nil {
			for _, r := range pending {
				r.recs, r.ids, r.err = nil, nil, err
			}
			return
		}
		if err := w.predict(ctx, pending); err != nil {
			err = w.closedUnder(err)
			if errors.Is(err, jetstream.ErrStreamNotFound) {
				err = fmt.Errorf("stream %s is gone: %w", streamName(l.inst), err)
				l.fails.set(err)
			}
			for _, r := range pending {
				l.a.unregister(r)
				r.err = err
			}
			return
		}
		if w.beforePublish != nil {
			w.beforePublish(pending)
		}
		acked, rejected, failed := w.publish(ctx, pending)
		if ctx.Err() != nil {
			// Close gave up while outcomes were unknown: what was not
			// applied by now gets errUnsent below.
			err = context.Cause(ctx)
		} else if rejected {
			// The stream moved: catch up with all of it.
			var info *jetstream.StreamInfo
			err = retry(ctx, l.log, "read the stream's last sequence", func(ctx context.Context) error {
				info, err = l.stream.Info(ctx)
				return err
			})
			if err == nil {
				acked = max(acked, info.State.LastSeq)
			} else if errors.Is(err, jetstream.ErrStreamNotFound) {
				err = fmt.Errorf("stream %s is gone: %w", streamName(l.inst), err)
				l.fails.set(err)
			} else {
				err = w.closedUnder(err)
			}
		}
		if err == nil {
			err = l.a.waitApplied(ctx, acked)
		}
		var next []*request
		for _, r := range pending {
			l.a.unregister(r)
			l.a.mu.Lock()
			applied, void := r.applied, r.void
			l.a.mu.Unlock()
			switch {
			case applied:
				if r.err == nil && r.in.Snapshot != nil && len(r.recs) > 0 {
					w.putSnapshot(r)
				}
			case failed[r] != nil:
				r.err = failed[r]
			case err != nil:
				r.err = err
			case void || rejected:
				if other := l.a.foreignSince(r.subject, r.first); r.thread != "" && other != "" {
					r.err = &fencedError{thread: r.thread, other: other}
					continue
				}
				r.void = false
				next = append(next, r)
			default:
				// Acked and applied as far as the ack, yet not this
				// write: cannot be.
				r.err = fmt.Errorf("message %s was acked but its replica did not apply it (a bug)", r.id)
			}
		}
		pending = next
	}
}

// predict gives each write its place after the replica's position and the
// writes before it, and a new message id.
func (w *writer) predict(ctx context.Context, group []*request) error {
	l := w.l
	events, stream := l.a.position()
	inGroup := map[string]uint64{} // a subject's sequence from an earlier write of the group
	for _, r := range group {
		if r.attempts == 0 {
			r.first = stream
		}
		r.attempts++
		r.after, r.expLast = events, stream
		if r.thread != "" {
			last, ok := inGroup[r.subject]
			if !ok {
				var err error
				if last, err = w.subjectSeq(ctx, r.subject); err != nil {
					return err
				}
			}
			r.expSubj = last
		}
		events += uint64(len(r.in.Events))
		stream++
		inGroup[r.subject] = stream
		w.n++
		r.id = w.idPrefix + "." + strconv.FormatUint(w.n, 10)
		data, err := json.Marshal(resolve(l.host, r.after, r.in))
		if err != nil {
			return fmt.Errorf("encode a batch: %w", err)
		}
		r.msg = &nats.Msg{Subject: r.subject, Data: data, Header: nats.Header{}}
		r.msg.Header.Set(jetstream.MsgIDHeader, r.id)
		r.msg.Header.Set(jetstream.ExpectedLastSeqHeader, strconv.FormatUint(r.expLast, 10))
		if r.thread != "" {
			r.msg.Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(r.expSubj, 10))
		}
		l.a.register(r)
	}
	return nil
}

// subjectSeq is a thread subject's last stream sequence: the replica's
// when it applied one since Open, else the stream's (a direct get).
func (w *writer) subjectSeq(ctx context.Context, subject string) (uint64, error) {
	if s, ok := w.l.a.subjectSeq(subject); ok {
		return s, nil
	}
	var seq uint64
	err := retry(ctx, w.l.log, "read a thread's last message", func(ctx context.Context) error {
		m, err := w.l.stream.GetLastMsgForSubject(ctx, subject)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			seq = 0
			return nil
		}
		if err != nil {
			return err
		}
		seq = m.Sequence
		return nil
	})
	return seq, err
}

// Error codes of JetStream's that say a write was not stored because the
// stream (or its subject) has moved past what it expected (the server's
// errors.json: JSStreamWrongLastSequenceErrF, and the constant form a
// clustered stream answers with).
const (
	codeWrongLastSequence         jetstream.ErrorCode = 10071
	codeWrongLastSequenceConstant jetstream.ErrorCode = 10164
	codeMessageTooBig             jetstream.ErrorCode = 10054
	codeStreamNotFound            jetstream.ErrorCode = 10059
)

// publish publishes the group pipelined and waits for every outcome:
// acked is the highest stream sequence acked, rejected says whether any
// write was refused for a stale prediction, failed holds writes that can
// never be stored. Writes whose outcome is unknown are published again,
// the same messages in the same order, with backoff, until known.
func (w *writer) publish(ctx context.Context, group []*request) (acked uint64, rejected bool, failed map[*request]error) {
	l := w.l
	failed = map[*request]error{}
	todo := group
	wait := firstBackoff
	for len(todo) > 0 {
		futures := make([]jetstream.PubAckFuture, len(todo))
		errs := make([]error, len(todo))
		for i, r := range todo {
			futures[i], errs[i] = l.js.PublishMsgAsync(r.msg)
		}
		var unknown []*request
		var lastErr error
		for i, r := range todo {
			err := errs[i]
			if err == nil {
				select {
				case ack := <-futures[i].Ok():
					acked = max(acked, ack.Sequence)
					continue
				case err = <-futures[i].Err():
				case <-ctx.Done():
					return acked, rejected, failed // Close gave up
				}
			}
			var api *jetstream.APIError
			switch {
			case errors.As(err, &api) && (api.ErrorCode == codeWrongLastSequence || api.ErrorCode == codeWrongLastSequenceConstant):
				rejected = true
			case errors.As(err, &api) && api.ErrorCode == codeStreamNotFound:
				gone := fmt.Errorf("stream %s is gone: %w", streamName(l.inst), err)
				l.fails.set(gone)
				failed[r] = gone
			case errors.As(err, &api) && api.ErrorCode == codeMessageTooBig, errors.Is(err, nats.ErrMaxPayload):
				failed[r] = fmt.Errorf("publish a batch of %d bytes: %w", len(r.msg.Data), err)
			default:
				unknown = append(unknown, r)
				lastErr = err
			}
		}
		if len(unknown) == 0 {
			break
		}
		if cause := l.fails.err(); cause != nil {
			// The log failed (its connection closed for good, say):
			// publishing again cannot mend it.
			for _, r := range unknown {
				failed[r] = cause
			}
			break
		}
		if gone := w.streamGone(ctx); gone != nil {
			l.fails.set(gone)
			for _, r := range unknown {
				failed[r] = gone
			}
			break
		}
		if !w.outage {
			l.log.Warn("the jetstream log's servers do not take writes; writes wait until they do", "error", lastErr, "writes", len(unknown))
			w.outage = true
		}
		if w.unknown != nil {
			w.unknown()
		}
		select {
		case <-ctx.Done():
			return acked, rejected, failed
		case <-l.fails.failed: // the next round fails the writes
		case <-time.After(wait):
		}
		wait = min(wait*2, maxBackoff)
		todo = unknown
	}
	if w.outage { // every write of the last round was answered
		l.log.Info("the jetstream log's servers take writes again")
		w.outage = false
	}
	return acked, rejected, failed
}

// streamGone says whether the stream is gone (deleted under the log), when
// writes are not answered: an outage is waited out, a stream that is gone
// fails the log.
func (w *writer) streamGone(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, tryTimeout)
	defer cancel()
	_, err := w.l.js.Stream(ctx, streamName(w.l.inst))
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return fmt.Errorf("stream %s is gone: %w", streamName(w.l.inst), err)
	}
	return nil
}

// putSnapshot writes a write's snapshot to the bucket, for hosts that
// never wrote its thread. A failed put fails nothing: the thread replays
// from an older snapshot.
func (w *writer) putSnapshot(r *request) {
	sn := *r.in.Snapshot
	sn.Seq = r.recs[len(r.recs)-1].Sequence
	ctx, cancel := context.WithTimeout(w.ctx, tryTimeout)
	defer cancel()
	if _, err := w.l.kv.Put(ctx, token(r.in.ThreadID), snapshotValue(sn)); err != nil {
		w.l.log.Warn("a thread's snapshot could not be shared; other hosts replay it from an older one", "thread", r.in.ThreadID, "error", err)
	}
}
