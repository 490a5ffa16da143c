package clocktest_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/baton-run/baton/sdk/clock"
	"github.com/baton-run/baton/sdk/clock/clocktest"
)

func TestPendingAndWithin(t *testing.T) {
	f := clock.NewFake(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
	clocktest.Pending(t, f, "no timers")
	done := make(chan time.Time, 1)
	go func() {
		a, b := f.NewTimer(2*time.Second), f.NewTimer(time.Second)
		defer a.Stop()
		done <- <-b.C()
	}()
	clocktest.Pending(t, f, "two timers, any order", time.Second, 2*time.Second)
	f.Advance(time.Second)
	if got := clocktest.Within(t, done); !got.Equal(f.Now()) {
		t.Fatalf("fired at %v, now %v", got, f.Now())
	}
}

func TestWaitPendingAndReceiveSayWhatIsWrong(t *testing.T) {
	f := clock.NewFake(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
	tm := f.NewTimer(time.Second)
	defer tm.Stop()
	err := clocktest.WaitPending(t.Context(), f, 2*time.Second)
	if err == nil || !strings.Contains(err.Error(), "pending timers") || !strings.Contains(err.Error(), "2000000000") {
		t.Fatalf("WaitPending with other timers = %v; want a diff of the timers", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	err = clocktest.WaitPending(ctx, f, time.Second, time.Second)
	if want := "waiting for 2 timers, have [1s]: context canceled"; err == nil || err.Error() != want || !errors.Is(err, context.Canceled) {
		t.Fatalf("WaitPending for more timers than there are = %v; want %q", err, want)
	}
	if v, err := clocktest.Receive(ctx, make(chan int)); v != 0 || err == nil || err.Error() != "nothing received: context canceled" {
		t.Fatalf("Receive after its context ended = %v, %v", v, err)
	}
}
