// Package clocktest is what tests that drive code on a clock.Fake share:
// waiting until the code under test is parked on the timers it should be,
// and a real-time guard that turns a broken wait into a failure instead of
// a hang.
package clocktest

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/baton-run/baton/sdk/clock"
)

// Guard bounds, in real time, a wait that must end without the fake clock
// moving. It only keeps a broken wait from hanging the test; it never
// measures how long anything takes.
const Guard = time.Minute

// Pending waits until f has as many timers as want, then checks that they
// are want: durations from now, in any order (timers made by goroutines
// that race). It fails the test after Guard.
func Pending(t testing.TB, f *clock.Fake, what string, want ...time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), Guard)
	defer cancel()
	if err := WaitPending(ctx, f, want...); err != nil {
		t.Fatalf("%s: %v", what, err) // runs only in a test that fails; WaitPending's errors are tested
	}
}

// WaitPending is Pending's check: it waits until f has as many timers as
// want, or ctx ends, and says how the timers differ from want.
func WaitPending(ctx context.Context, f *clock.Fake, want ...time.Duration) error {
	if err := f.WaitTimers(ctx, len(want)); err != nil {
		return fmt.Errorf("waiting for %d timers, have %v: %w", len(want), f.Pending(), err)
	}
	got, want := f.Pending(), slices.Clone(want)
	slices.Sort(got)
	slices.Sort(want)
	if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
		return fmt.Errorf("pending timers (-want +got):\n%s", diff)
	}
	return nil
}

// Within receives from c, or fails the test after Guard.
func Within[T any](t testing.TB, c <-chan T) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), Guard)
	defer cancel()
	v, err := Receive(ctx, c)
	if err != nil {
		t.Fatal(err) // runs only in a test that fails; Receive's error is tested
	}
	return v
}

// Receive is Within's wait: it receives from c, or says that ctx ended.
func Receive[T any](ctx context.Context, c <-chan T) (T, error) {
	select {
	case v := <-c:
		return v, nil
	case <-ctx.Done():
		var zero T
		return zero, fmt.Errorf("nothing received: %w", context.Cause(ctx))
	}
}
