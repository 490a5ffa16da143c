package sessions

import (
	"context"
	"sync"

	"github.com/baton-run/baton/sdk"
)

// Lifecycle is a session's life from its provider's start to the report of
// its exit: what every adapter whose session runs a provider process keeps
// alike, so that the session's last event is its runtime_exited, once,
// whatever the order in which the provider exits, the host closes the
// session and the plugin's own goroutines end.
//
// It keeps:
//
//   - a context (Context) that ends when the provider exits, or when the
//     session is closed with a cause: the session's calls and goroutines run
//     under it;
//   - whether the host closed the session (Closed): its exit is then
//     ExitClosed, not a failure, and what was cut short was cut on purpose;
//   - whether the exit was reported: Exit reports it once (the events that
//     end what was still open, then runtime_exited) and the events emitted
//     through Emit after it are dropped, so nothing follows runtime_exited;
//   - Done, closed once the exit was reported: Close waits for it, and a
//     Table forgets the session then.
//
// The adapter emits every event of the session through Emit, and has one
// goroutine that waits for its provider's exit (every frame it wrote
// handled) and calls Exit. CloseSession calls Close with a stop that makes
// the provider exit.
//
// Lifecycle's lock is taken last: a plugin may call Emit or Closed while it
// holds its own session lock; Exit calls end without it.
type Lifecycle struct {
	emit   sdk.Emitter
	ctx    context.Context
	cancel context.CancelCauseFunc
	done   chan struct{}

	mu      sync.Mutex
	closed  bool // Close was called
	exiting bool // Exit was called
	exited  bool // runtime_exited was emitted
}

// NewLifecycle starts the life of a session whose events go to emit.
func NewLifecycle(emit sdk.Emitter) *Lifecycle {
	ctx, cancel := context.WithCancelCause(context.Background())
	return &Lifecycle{emit: emit, ctx: ctx, cancel: cancel, done: make(chan struct{})}
}

// Context ends when the provider exits (its cause the one given to Exit),
// or when the session is closed with a cause (see Close).
func (l *Lifecycle) Context() context.Context { return l.ctx }

// Done is closed once the exit was reported (runtime_exited emitted).
func (l *Lifecycle) Done() <-chan struct{} { return l.done }

// Closed says whether the host closed the session.
func (l *Lifecycle) Closed() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.closed
}

// Emit implements sdk.Emitter: the event goes to the host, unless the exit
// was reported, after which nothing may follow.
func (l *Lifecycle) Emit(ev sdk.RuntimeEvent) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.exited {
		l.emit.Emit(ev)
	}
}

// Exit reports the provider's exit, once: later calls return at once. It
// ends Context with cause, then asks end (told whether the session was
// closed) for the events that end what the provider left open (requests
// resolved cancelled, items closed, turns ended) and for the runtime_exited
// event (whose Kind Exit sets), emits them in that order with nothing
// between, and closes Done. Call it once the provider exited and every
// frame it wrote was handled.
func (l *Lifecycle) Exit(cause error, end func(closed bool) (closing []sdk.RuntimeEvent, exited sdk.RuntimeEvent)) {
	l.mu.Lock()
	if l.exiting {
		l.mu.Unlock()
		return
	}
	l.exiting = true
	l.mu.Unlock()
	l.cancel(cause)
	closing, exited := end(l.Closed())
	exited.Kind = sdk.EventRuntimeExited
	l.mu.Lock()
	for _, ev := range closing {
		l.emit.Emit(ev)
	}
	l.emit.Emit(exited)
	l.exited = true
	l.mu.Unlock()
	close(l.done)
}

// Close closes the session: its exit is reported as closed. The first
// Close of a session whose provider has not exited ends Context with cause
// (a nil cause leaves it to the exit: a provider that still sends its last
// events while it stops) and runs stop, which makes the provider exit.
// Every Close then waits for the exit's report, or for ctx's end.
func (l *Lifecycle) Close(ctx context.Context, cause error, stop func()) error {
	l.mu.Lock()
	first := !l.closed && !l.exiting
	l.closed = true
	l.mu.Unlock()
	if first {
		if cause != nil {
			l.cancel(cause)
		}
		stop()
	}
	select {
	case <-l.done:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}
