package orchestrator

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-run/baton/host/internal/domain"
	"github.com/baton-run/baton/sdk/clock"
)

// retry is what stands between a failed write of a provider's events or
// of an action's outcome and their loss. It does not give up while the
// failure may mend: its pauses double, up to maxRetryPause, on the host's
// clock, and Close cuts them short. A refusal, the host closing or its
// store failing end it at once. (The operation here is a function that
// fails as many times as the test says; storefault_test.go fails the
// store's reads under a live host.)
func TestRetryPausesOnTheHostsClock(t *testing.T) {
	f := clock.NewFake(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	h, err := Open(Config{DataDir: t.TempDir(), Clock: f})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	hiccup := errors.New("disk hiccup")

	// play retries an operation that fails its first n calls with err,
	// moving the clock past each of the pauses it expects; it returns the
	// outcome: the retry's error, the calls, the pauses seen.
	type outcome struct {
		Err    error
		Calls  int
		Pauses []time.Duration
	}
	play := func(n int, err error, pauses int) outcome {
		t.Helper()
		calls := 0
		done := make(chan error, 1)
		go func() {
			done <- h.retry("write", func() error {
				calls++
				if calls <= n {
					return err
				}
				return nil
			})
		}()
		var o outcome
		for range pauses {
			if werr := f.WaitTimers(ctx, 1); werr != nil {
				t.Fatalf("after pauses %v: %v", o.Pauses, werr)
			}
			p := f.Pending()
			o.Pauses = append(o.Pauses, p...)
			f.Advance(p[0])
		}
		select {
		case o.Err = <-done:
		case <-ctx.Done():
			t.Fatalf("after pauses %v the retry did not end; pending %v", o.Pauses, f.Pending())
		}
		o.Calls = calls
		return o
	}

	ms := func(ds ...int) []time.Duration {
		out := make([]time.Duration, len(ds))
		for i, d := range ds {
			out[i] = time.Duration(d) * time.Millisecond
		}
		return out
	}
	for _, c := range []struct {
		name string
		n    int
		err  error
		want outcome
	}{
		{"mended on the third try", 2, hiccup, outcome{nil, 3, ms(50, 100)}},
		{"not given up: mended on the twelfth try, the pause doubled up to its cap", 11, hiccup,
			outcome{nil, 12, ms(50, 100, 200, 400, 800, 1600, 3200, 5000, 5000, 5000, 5000)}},
		{"refused: not tried again", 99, domain.ErrInvalid, outcome{domain.ErrInvalid, 1, nil}},
		{"the host closed: not tried again", 99, ErrClosed, outcome{ErrClosed, 1, nil}},
		{"the store failed: not tried again", 99, ErrStoreFailed, outcome{ErrStoreFailed, 1, nil}},
	} {
		got := play(c.n, c.err, len(c.want.Pauses))
		if diff := cmp.Diff(c.want, got, cmp.Comparer(func(a, b error) bool { return errors.Is(a, b) && errors.Is(b, a) })); diff != "" {
			t.Errorf("%s (-want +got):\n%s", c.name, diff)
		}
	}

	// Close during a pause: the retry ends at once, saying the host
	// closed, with the error it was retrying.
	done := make(chan error, 1)
	go func() { done <- h.retry("write", func() error { return hiccup }) }()
	if err := f.WaitTimers(ctx, 1); err != nil {
		t.Fatal(err)
	}
	closed := make(chan error, 1)
	go func() { closed <- h.Close() }()
	select {
	case err := <-done:
		if !errors.Is(err, ErrClosed) || !errors.Is(err, hiccup) {
			t.Errorf("retry cut short by Close = %v; want it to wrap %v and %v", err, ErrClosed, hiccup)
		}
	case <-ctx.Done():
		t.Fatalf("the retry waited out its pause after Close; pending %v", f.Pending())
	}
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if p := f.Pending(); len(p) != 0 {
		t.Errorf("timers left pending: %v", p)
	}
}
