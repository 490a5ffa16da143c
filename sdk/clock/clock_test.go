package clock_test

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/baton-run/baton/sdk/clock"
	"github.com/baton-run/baton/sdk/clock/clocktest"
	"github.com/google/go-cmp/cmp"
)

var epoch = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)

func TestFakeFiresTimersInOrderWhenTimeReachesThem(t *testing.T) {
	f := clock.NewFake(epoch)
	a, b, c := f.NewTimer(3*time.Second), f.NewTimer(time.Second), f.NewTimer(2*time.Second)
	if diff := cmp.Diff([]time.Duration{3 * time.Second, time.Second, 2 * time.Second}, f.Pending()); diff != "" {
		t.Fatalf("pending (-want +got):\n%s", diff)
	}
	f.Advance(1500 * time.Millisecond)
	if got := <-b.C(); !got.Equal(epoch.Add(1500 * time.Millisecond)) {
		t.Fatalf("b fired at %v", got)
	}
	select {
	case <-a.C():
		t.Fatal("a fired before its instant")
	case <-c.C():
		t.Fatal("c fired before its instant")
	default:
	}
	if !c.Stop() {
		t.Fatal("stopping a pending timer reported it had fired")
	}
	if c.Stop() || b.Stop() {
		t.Fatal("stopping a stopped or fired timer reported it was pending")
	}
	d, err := f.AdvanceNext(t.Context())
	if err != nil || d != 1500*time.Millisecond {
		t.Fatalf("AdvanceNext = %v, %v; want 1.5s", d, err)
	}
	<-a.C()
	if got := f.Now(); !got.Equal(epoch.Add(3 * time.Second)) {
		t.Fatalf("now = %v", got)
	}
	f.Set(epoch) // never backwards
	if got := f.Now(); !got.Equal(epoch.Add(3 * time.Second)) {
		t.Fatalf("Set moved the clock backwards to %v", got)
	}
	select {
	case <-f.NewTimer(0).C():
	default:
		t.Fatal("a zero timer did not fire at once")
	}
}

func TestSleepWaitsForTheClockOrTheContext(t *testing.T) {
	f := clock.NewFake(epoch)
	done := make(chan error, 1)
	go func() { done <- clock.Sleep(t.Context(), f, time.Minute) }()
	if err := f.WaitTimers(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	f.Advance(time.Minute)
	if err := <-done; err != nil {
		t.Fatalf("Sleep = %v", err)
	}

	stop := errors.New("stopped")
	ctx, cancel := context.WithCancelCause(t.Context())
	go func() { done <- clock.Sleep(ctx, f, time.Minute) }()
	if err := f.WaitTimers(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	cancel(stop)
	if err := <-done; !errors.Is(err, stop) {
		t.Fatalf("Sleep after cancel = %v, want %v", err, stop)
	}
	if p := f.Pending(); len(p) != 0 {
		t.Fatalf("Sleep left its timer pending: %v", p)
	}

	ctx, cancel = context.WithCancelCause(t.Context())
	cancel(context.Canceled)
	if err := f.WaitTimers(ctx, 1); !errors.Is(err, context.Canceled) {
		t.Fatalf("WaitTimers on a cancelled context = %v", err)
	}
	if _, err := f.AdvanceNext(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("AdvanceNext on a cancelled context = %v", err)
	}
}

func TestSystemClock(t *testing.T) {
	if clock.Or(nil) != clock.System {
		t.Fatal("Or(nil) is not the system clock")
	}
	f := clock.NewFake(epoch)
	if clock.Or(f) != f {
		t.Fatal("Or(f) is not f")
	}
	before := time.Now()
	if now := clock.System.Now(); now.Before(before) {
		t.Fatalf("system now %v before %v", now, before)
	}
	if err := clock.Sleep(t.Context(), nil, time.Millisecond); err != nil {
		t.Fatal(err)
	}
	tm := clock.System.NewTimer(time.Hour)
	if !tm.Stop() {
		t.Fatal("stopping an hour timer reported it had fired")
	}
}

func TestWithTimeoutEndsOnTheClock(t *testing.T) {
	f := clock.NewFake(epoch)
	late := errors.New("too late")
	ctx, cancel := clock.WithTimeout(t.Context(), f, time.Second, late)
	defer cancel()
	if diff := cmp.Diff([]time.Duration{time.Second}, f.Pending()); diff != "" {
		t.Fatalf("pending (-want +got):\n%s", diff)
	}
	f.Advance(999 * time.Millisecond)
	if ctx.Err() != nil {
		t.Fatal("the context ended before its time")
	}
	f.Advance(time.Millisecond)
	clocktest.Within(t, ctx.Done())
	if err := context.Cause(ctx); !errors.Is(err, late) {
		t.Fatalf("cause = %v, want %v", err, late)
	}

	ctx, cancel = clock.WithTimeout(t.Context(), f, time.Second, late)
	cancel()
	if err := context.Cause(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("cause after cancel = %v, want context.Canceled", err)
	}
	if p := f.Pending(); len(p) != 0 {
		t.Fatalf("cancel left the timer pending: %v", p)
	}

	parent, end := context.WithCancel(t.Context())
	ctx, cancel = clock.WithTimeout(parent, f, time.Second, late)
	defer cancel()
	end()
	clocktest.Within(t, ctx.Done())
	if err := context.Cause(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("cause after the parent ended = %v, want context.Canceled", err)
	}
}

// SleepUntil wakes at its instant, not later when time moved between
// reading it and starting the timer; an instant passed wakes it at once.
func TestSleepUntil(t *testing.T) {
	f := clock.NewFake(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
	at := f.Now().Add(time.Hour)
	f.Advance(59 * time.Minute) // the jump a Sleep(at - an earlier now) would miss
	done := make(chan error, 1)
	go func() { done <- clock.SleepUntil(t.Context(), f, at) }()
	clocktest.Pending(t, f, "sleeping until the instant", time.Minute)
	f.Advance(time.Minute)
	if err := clocktest.Within(t, done); err != nil {
		t.Fatal(err)
	}
	if err := clock.SleepUntil(t.Context(), f, at.Add(-time.Second)); err != nil {
		t.Fatalf("an instant passed: %v", err)
	}
	ctx, cancel := context.WithCancelCause(t.Context())
	cancel(errors.New("stop"))
	if err := clock.SleepUntil(ctx, f, at.Add(time.Hour)); err == nil || err.Error() != "stop" {
		t.Fatalf("a cancelled sleep: %v", err)
	}
	// The system clock (nil): an instant passed wakes it at once.
	if err := clock.SleepUntil(t.Context(), nil, time.Now().Add(-time.Second)); err != nil {
		t.Fatalf("the system clock: %v", err)
	}
	// A Fake makes the timer for the instant itself: what is pending is
	// the instant's distance from the fake's now, however time moved
	// before.
	tm := f.NewTimerAt(f.Now().Add(90 * time.Second))
	defer tm.Stop()
	clocktest.Pending(t, f, "a timer for an instant", 90*time.Second)
}

// AdvanceNext moves the time to a timer pending when it moves it, never to
// one stopped since it saw it. Here it moves the time again and again
// while timers come and go, each made and stopped at once (as a wait that
// ends at once makes and stops its timer): each move is to the next hour.
// The old AdvanceNext saw a timer pending and then, in a second step, read
// the earliest; a timer stopped between the two left it indexing an empty
// list.
func TestAdvanceNextWhileTimersComeAndGo(t *testing.T) {
	// The race needs goroutines running at once. The old AdvanceNext failed
	// within the 300 moves in every run measured (-race or not, -cpu 1 or
	// 2, on a loaded machine).
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(max(4, runtime.GOMAXPROCS(0))))
	const moves, churners = 300, 2
	f := clock.NewFake(epoch)
	ctx, stop := context.WithCancel(t.Context())
	var churn sync.WaitGroup
	defer churn.Wait()
	defer stop()
	for range churners {
		churn.Go(func() {
			for ctx.Err() == nil {
				f.NewTimer(time.Hour).Stop()
			}
		})
	}
	var got, want []time.Duration
	for range moves {
		d, err := f.AdvanceNext(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		got, want = append(got, d), append(want, time.Hour)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the moves (-want +got):\n%s", diff)
	}
	if want := epoch.Add(moves * time.Hour); !f.Now().Equal(want) {
		t.Errorf("now %v, want %v", f.Now(), want)
	}
}
