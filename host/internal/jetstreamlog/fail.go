package jetstreamlog

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Failure: a log fails for good when its replica fails (the Pebble store
// did: eventlog's fail.go), when the stream is gone, or when the stream
// holds what the fold cannot trust (a mismatch between what a writer
// predicted and what its replica applied is a bug). Servers that cannot be
// reached are not a failure: writes wait and retry, until Close gives up
// on them after Options.CloseTimeout.

// failure is why a log failed (once set, never cleared).
type failure struct {
	mu     sync.Mutex
	cause  error
	failed chan struct{}
}

func (f *failure) init() { f.failed = make(chan struct{}) }

func (f *failure) set(cause error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.cause == nil && cause != nil {
		f.cause = cause
		close(f.failed)
	}
}

func (f *failure) err() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.cause
}

// Failed is closed when the log fails.
func (l *Log) Failed() <-chan struct{} { return l.fails.failed }

// Failure is why the log failed (nil: it has not).
func (l *Log) Failure() error { return l.fails.err() }

// permanentError is an error retrying does not mend.
type permanentError struct{ error }

func (e permanentError) Unwrap() error { return e.error }

func permanent(err error) error { return permanentError{err} }

// Backoff between tries against servers that do not answer: from a tenth
// of a second to two seconds.
const (
	firstBackoff = 100 * time.Millisecond
	maxBackoff   = 2 * time.Second
	// tryTimeout bounds one request to the servers.
	tryTimeout = 5 * time.Second
)

// retry calls try until it succeeds, returns a permanent error, or ctx
// ends, backing off between tries; it warns once when the servers stop
// answering and once when they answer again.
func retry(ctx context.Context, log hclog.Logger, what string, try func(context.Context) error) error {
	wait := firstBackoff
	warned := false
	for {
		tctx, cancel := context.WithTimeout(ctx, tryTimeout)
		err := try(tctx)
		cancel()
		if err == nil {
			if warned {
				log.Info("the jetstream log's servers answer again", "doing", what)
			}
			return nil
		}
		var p permanentError
		if errors.As(err, &p) {
			return p.error
		}
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			return err // the stream is gone: waiting does not bring it back
		}
		if errors.Is(err, nats.ErrConnectionClosed) {
			// Closed for good: by Close, or by servers that refused the
			// client twice when it reconnected (Open says which).
			return err
		}
		if !warned {
			log.Warn("the jetstream log's servers do not answer; trying again", "doing", what, "error", err)
			warned = true
		}
		select {
		case <-ctx.Done():
			return errors.Join(context.Cause(ctx), err)
		case <-time.After(wait):
		}
		wait = min(wait*2, maxBackoff)
	}
}
