// Package clock is the one source of time for Baton's timers: the host's
// retries and reconnects, the checkpoint lock's wait, the provider-process
// close timeouts, the replay peer's pacing. Production code takes a Clock
// (nil means System); tests pass a Fake and move time themselves, so every
// timeout and backoff path can be driven without sleeping.
package clock

import (
	"context"
	"time"
)

// Clock tells the time and makes timers.
type Clock interface {
	Now() time.Time
	NewTimer(d time.Duration) Timer
}

// Timer is a one-shot timer made by a Clock.
type Timer interface {
	// C receives the clock's time once the timer fires.
	C() <-chan time.Time
	// Stop prevents the timer from firing; it reports whether it did.
	Stop() bool
}

// System is the operating system's clock.
var System Clock = system{}

// Or returns c, or System when c is nil, so a zero config works.
func Or(c Clock) Clock {
	if c == nil {
		return System
	}
	return c
}

// Sleep waits d on c, or until ctx ends; it returns ctx's cause then.
func Sleep(ctx context.Context, c Clock, d time.Duration) error {
	t := Or(c).NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// SleepUntil waits on c until the instant at (at once when it has
// passed), or until ctx ends; it returns ctx's cause then. Unlike Sleep(at
// minus now), it does not wait longer when c jumps between reading the
// time and starting the timer: a clock that can start a timer for an
// instant in one step (Fake) is asked to.
func SleepUntil(ctx context.Context, c Clock, at time.Time) error {
	c = Or(c)
	var t Timer
	if ac, ok := c.(interface{ NewTimerAt(time.Time) Timer }); ok {
		t = ac.NewTimerAt(at)
	} else {
		t = c.NewTimer(at.Sub(c.Now()))
	}
	defer t.Stop()
	select {
	case <-t.C():
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// WithTimeout is context.WithTimeoutCause on c: the context it returns
// ends with cause once d has passed on c, when parent ends, or when the
// returned function is called, which also stops the timer. Call it when
// done, as with context.WithTimeout.
func WithTimeout(parent context.Context, c Clock, d time.Duration, cause error) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(parent)
	t := Or(c).NewTimer(d)
	go func() { // ends when ctx does: at the timer, at parent's end, or at stop
		select {
		case <-t.C():
			cancel(cause)
		case <-ctx.Done():
			t.Stop()
		}
	}()
	return ctx, func() {
		t.Stop()
		cancel(nil)
	}
}

type system struct{}

func (system) Now() time.Time { return time.Now() }

func (system) NewTimer(d time.Duration) Timer { return sysTimer{time.NewTimer(d)} }

type sysTimer struct{ t *time.Timer }

func (t sysTimer) C() <-chan time.Time { return t.t.C }
func (t sysTimer) Stop() bool          { return t.t.Stop() }
