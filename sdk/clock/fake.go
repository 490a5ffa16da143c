package clock

import (
	"context"
	"sync"
	"time"
)

// Fake is a Clock whose time moves only when a test moves it. Timers fire
// when Advance or Set passes their instant. Waiting for Timers lets a test
// know the code under test is parked on a timer before it moves time, so no
// test sleeps to get the order right.
type Fake struct {
	mu      sync.Mutex
	now     time.Time
	timers  []*fakeTimer
	changed chan struct{} // closed and replaced whenever timers change
}

// NewFake returns a Fake clock reading start.
func NewFake(start time.Time) *Fake {
	return &Fake{now: start, changed: make(chan struct{})}
}

// Now returns the fake time.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// NewTimer returns a timer that fires once the fake time reaches now+d; a
// timer of zero or negative duration fires at once.
func (f *Fake) NewTimer(d time.Duration) Timer {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.timerAt(f.now.Add(d))
}

// NewTimerAt makes a timer that fires once the fake's time reaches at (at
// once when it has): SleepUntil's timer, made in one step with reading the
// time, so a test that moves time meanwhile does not push it later.
func (f *Fake) NewTimerAt(at time.Time) Timer {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.timerAt(at)
}

// timerAt makes a timer for at; f.mu is held.
func (f *Fake) timerAt(at time.Time) Timer {
	t := &fakeTimer{f: f, at: at, c: make(chan time.Time, 1)}
	if !at.After(f.now) {
		t.c <- f.now
		return t
	}
	f.timers = append(f.timers, t)
	f.notify()
	return t
}

// Advance moves the time forward by d, firing the timers it passes.
func (f *Fake) Advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.set(f.now.Add(d))
}

// Set moves the time to t (never backwards), firing the timers it passes.
func (f *Fake) Set(t time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.set(t)
}

// set is Set; f.mu is held.
func (f *Fake) set(t time.Time) {
	if t.Before(f.now) {
		return
	}
	f.now = t
	kept := f.timers[:0]
	for _, tm := range f.timers {
		if tm.at.After(t) {
			kept = append(kept, tm)
			continue
		}
		tm.c <- t
	}
	clear(f.timers[len(kept):])
	f.timers = kept
	f.notify()
}

// Pending returns the durations, from now, of the timers not yet fired, in
// the order they were made.
func (f *Fake) Pending() []time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.pending()
}

// pending is Pending; f.mu is held.
func (f *Fake) pending() []time.Duration {
	ds := make([]time.Duration, len(f.timers))
	for i, t := range f.timers {
		ds[i] = t.at.Sub(f.now)
	}
	return ds
}

// WaitTimers blocks until at least n timers are pending, or ctx ends.
func (f *Fake) WaitTimers(ctx context.Context, n int) error {
	_, err := f.WaitPending(ctx, func(p []time.Duration) bool { return len(p) >= n })
	return err
}

// WaitPending blocks until the pending timers (as Pending gives them)
// satisfy cond, looking again at every change (a timer made, stopped or
// fired), and returns them; or until ctx ends. Unlike a count, cond can
// tell timers apart: some timers going while others come is seen. What it
// returns may have changed by the time the caller looks (another
// goroutine may stop or make a timer): a caller that acts on the timers
// themselves does so under the lock that read them (AdvanceNext).
func (f *Fake) WaitPending(ctx context.Context, cond func([]time.Duration) bool) ([]time.Duration, error) {
	for {
		f.mu.Lock()
		p, changed := f.pending(), f.changed
		f.mu.Unlock()
		if cond(p) {
			return p, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
	}
}

// AdvanceNext waits until a timer is pending, then moves the time to the
// earliest one, firing it; it returns how far the time moved, or ctx's
// cause if ctx ends first. It finds the earliest timer and moves the time
// under one hold of the lock: a timer another goroutine stops or makes
// meanwhile is either seen or not, never seen and then gone (a process
// that exits makes and stops a timer in one breath, while a test moves
// the clock from timer to timer).
func (f *Fake) AdvanceNext(ctx context.Context) (time.Duration, error) {
	for {
		f.mu.Lock()
		if len(f.timers) > 0 {
			next := f.timers[0].at
			for _, t := range f.timers[1:] {
				if t.at.Before(next) {
					next = t.at
				}
			}
			d := next.Sub(f.now)
			f.set(next)
			f.mu.Unlock()
			return d, nil
		}
		changed := f.changed
		f.mu.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
			return 0, context.Cause(ctx)
		}
	}
}

func (f *Fake) notify() {
	close(f.changed)
	f.changed = make(chan struct{})
}

type fakeTimer struct {
	f  *Fake
	at time.Time
	c  chan time.Time
}

func (t *fakeTimer) C() <-chan time.Time { return t.c }

func (t *fakeTimer) Stop() bool {
	f := t.f
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, tm := range f.timers {
		if tm == t {
			f.timers = append(f.timers[:i], f.timers[i+1:]...)
			f.notify()
			return true
		}
	}
	return false
}
