package sessions

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"

	"github.com/baton-run/baton/sdk"
)

// recorder is the host's side of an Emitter: every event, in order.
type recorder struct {
	mu  sync.Mutex
	evs []sdk.RuntimeEvent
}

func (r *recorder) Emit(ev sdk.RuntimeEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.evs = append(r.evs, ev)
}

func (r *recorder) all() []sdk.RuntimeEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]sdk.RuntimeEvent(nil), r.evs...)
}

func diag(title string) sdk.RuntimeEvent {
	return sdk.RuntimeEvent{Kind: sdk.EventDiagnostic, Title: title}
}

var errExited = errors.New("the provider exited")

// end is an Exit's end: a turn ended failed, and the exit closed or not.
func end(closed bool) ([]sdk.RuntimeEvent, sdk.RuntimeEvent) {
	status := sdk.ExitExited
	if closed {
		status = sdk.ExitClosed
	}
	return []sdk.RuntimeEvent{{Kind: sdk.EventTurnTerminal, TurnRef: "t1", Status: sdk.TurnFailed}},
		sdk.RuntimeEvent{ThreadRef: "th", Status: status}
}

func TestExitEndsTheSessionLast(t *testing.T) {
	rec := &recorder{}
	l := NewLifecycle(rec)
	l.Emit(diag("before"))
	l.Exit(errExited, end)
	l.Emit(diag("after the exit"))
	l.Exit(errors.New("again"), func(bool) ([]sdk.RuntimeEvent, sdk.RuntimeEvent) {
		t.Error("a second Exit asked for the end again")
		return nil, sdk.RuntimeEvent{}
	})
	want := []sdk.RuntimeEvent{diag("before"),
		{Kind: sdk.EventTurnTerminal, TurnRef: "t1", Status: sdk.TurnFailed},
		{Kind: sdk.EventRuntimeExited, ThreadRef: "th", Status: sdk.ExitExited}}
	if d := cmp.Diff(want, rec.all()); d != "" {
		t.Errorf("events (-want +got):\n%s", d)
	}
	if err := context.Cause(l.Context()); !errors.Is(err, errExited) {
		t.Errorf("the context's cause = %v; want the exit's", err)
	}
	select {
	case <-l.Done():
	default:
		t.Error("Done is open after the exit")
	}
	if l.Closed() {
		t.Error("a session that was never closed says it was")
	}
}

func TestCloseStopsTheProviderAndWaitsForTheExit(t *testing.T) {
	rec := &recorder{}
	l := NewLifecycle(rec)
	closedCause := errors.New("session closed")
	stops := 0
	stop := func() {
		stops++
		if err := context.Cause(l.Context()); !errors.Is(err, closedCause) {
			t.Errorf("stop ran with the context's cause %v; want it ended with the close's first", err)
		}
		go l.Exit(errExited, end) // the provider exits because it was stopped
	}
	if err := l.Close(t.Context(), closedCause, stop); err != nil {
		t.Fatalf("close: %v", err)
	}
	if err := l.Close(t.Context(), closedCause, stop); err != nil {
		t.Fatalf("a second close: %v", err)
	}
	if stops != 1 {
		t.Errorf("stop ran %d times; want once", stops)
	}
	want := []sdk.RuntimeEvent{{Kind: sdk.EventTurnTerminal, TurnRef: "t1", Status: sdk.TurnFailed},
		{Kind: sdk.EventRuntimeExited, ThreadRef: "th", Status: sdk.ExitClosed}}
	if d := cmp.Diff(want, rec.all()); d != "" {
		t.Errorf("events (-want +got):\n%s", d)
	}
	if !l.Closed() {
		t.Error("a closed session says it was not closed")
	}
}

func TestCloseWithoutACauseLeavesTheContextToTheExit(t *testing.T) {
	l := NewLifecycle(&recorder{})
	err := l.Close(t.Context(), nil, func() {
		if l.Context().Err() != nil {
			t.Error("the context ended before the provider was stopped")
		}
		go l.Exit(errExited, end)
	})
	if err != nil {
		t.Fatalf("close: %v", err)
	}
	if err := context.Cause(l.Context()); !errors.Is(err, errExited) {
		t.Errorf("the context's cause = %v; want the exit's", err)
	}
}

func TestCloseAfterTheExitStopsNothing(t *testing.T) {
	l := NewLifecycle(&recorder{})
	l.Exit(errExited, end)
	if err := l.Close(t.Context(), errors.New("closed"), func() { t.Error("stop ran for a provider that exited") }); err != nil {
		t.Fatalf("close: %v", err)
	}
}

func TestCloseGivesUpWithItsContext(t *testing.T) {
	l := NewLifecycle(&recorder{})
	ctx, cancel := context.WithCancelCause(t.Context())
	hung := errors.New("the host gave up")
	err := l.Close(ctx, nil, func() { cancel(hung) }) // a provider that does not exit
	if !errors.Is(err, hung) {
		t.Errorf("close = %v; want the context's cause", err)
	}
}

// TestLifecycleModel runs random sequences of emits, closes and exits, one
// after another, against a model: the events emitted before the exit, then
// the exit's closing events and runtime_exited, closed if a close came
// before the exit; stop run by the first close before the exit only; the
// context ended by the first of a close with a cause and the exit.
func TestLifecycleModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		rec := &recorder{}
		l := NewLifecycle(rec)
		var want []sdk.RuntimeEvent
		var cause error
		exited, closed, stops, wantStops := false, false, 0, 0
		ops := rapid.SliceOf(rapid.SampledFrom([]string{"emit", "close", "close without a cause", "exit"})).Draw(t, "ops")
		for i, op := range ops {
			switch op {
			case "emit":
				ev := diag(fmt.Sprint(i))
				l.Emit(ev)
				if !exited {
					want = append(want, ev)
				}
			case "close", "close without a cause":
				var c error
				if op == "close" {
					c = fmt.Errorf("close %d", i)
				}
				if !exited && !closed {
					wantStops++
					if cause == nil {
						cause = c
					}
				}
				closed = true
				// The provider does not exit here: Close gives up at once.
				ctx, cancel := context.WithCancel(context.Background())
				cancel()
				_ = l.Close(ctx, c, func() { stops++ })
			case "exit":
				c := fmt.Errorf("exit %d", i)
				if !exited {
					evs, ev := end(closed)
					ev.Kind = sdk.EventRuntimeExited
					want = append(append(want, evs...), ev)
					if cause == nil {
						cause = c
					}
				}
				exited = true
				l.Exit(c, end)
			}
		}
		if d := cmp.Diff(want, rec.all()); d != "" {
			t.Fatalf("events (-want +got):\n%s", d)
		}
		if stops != wantStops {
			t.Fatalf("stop ran %d times; want %d", stops, wantStops)
		}
		if got := context.Cause(l.Context()); got != cause && (got == nil || cause == nil || got.Error() != cause.Error()) {
			t.Fatalf("the context's cause = %v; want %v", got, cause)
		}
		if l.Closed() != closed {
			t.Fatalf("Closed = %v; want %v", l.Closed(), closed)
		}
	})
}

// TestExitIsOnceAndLastWhateverTheInterleaving races emitters, closes and
// exits: runtime_exited is emitted once, it is the last event, the closing
// events come right before it, and it says closed when the end was told so.
func TestExitIsOnceAndLastWhateverTheInterleaving(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		rec := &recorder{}
		l := NewLifecycle(rec)
		emitters := rapid.IntRange(0, 4).Draw(t, "emitters")
		closers := rapid.IntRange(0, 3).Draw(t, "closers")
		exits := rapid.IntRange(1, 3).Draw(t, "exits")
		var wg sync.WaitGroup
		for i := range emitters {
			wg.Go(func() {
				for j := range 5 {
					l.Emit(diag(fmt.Sprint(i, "/", j)))
				}
			})
		}
		for i := range closers {
			wg.Go(func() {
				_ = l.Close(context.Background(), fmt.Errorf("close %d", i), func() { go l.Exit(errExited, end) })
			})
		}
		for range exits {
			wg.Go(func() { l.Exit(errExited, end) })
		}
		wg.Wait()
		<-l.Done()
		evs := rec.all()
		n := len(evs)
		if n < 2 || evs[n-1].Kind != sdk.EventRuntimeExited || evs[n-2].Kind != sdk.EventTurnTerminal {
			t.Fatalf("the events end %v; want the turn's terminal then runtime_exited", evs)
		}
		for _, ev := range evs[:n-2] {
			if ev.Kind == sdk.EventRuntimeExited || ev.Kind == sdk.EventTurnTerminal {
				t.Fatalf("%s before the end: %v", ev.Kind, evs)
			}
		}
		if closers == 0 && evs[n-1].Status != sdk.ExitExited {
			t.Fatalf("a session never closed exited %s", sdk.StatusWord(evs[n-1].Status))
		}
	})
}
