package domain

import (
	"testing"
	"time"

	"github.com/baton-run/baton/sdk"
	"github.com/google/go-cmp/cmp"
)

// TestDrain: a host that stops asks a run whose turn a live provider has
// to stop, and waits for it; it waits, asking nothing, for a run whose
// turn is over; a run whose turn no live provider has, a run waiting for a
// limit, and a thread with no run going are not waited for.
func TestDrain(t *testing.T) {
	type drained struct {
		Stop     *HostStopping
		Wait     bool
		InFlight bool
	}
	drain := func(w *world, live bool) drained {
		stop, wait := w.thread.Drain(func(sessionID string) bool { return live && sessionID == "s1" })
		return drained{stop, wait, w.thread.InFlight()}
	}
	check := func(name string, got, want drained) {
		t.Helper()
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", name, diff)
		}
	}

	w := newWorld(t)
	check("no run", drain(w, true), drained{})
	w.send("one")
	check("a run whose turn no provider has yet", drain(w, true), drained{InFlight: true})
	w.open("s1")
	w.turnOn("s1", "u1")
	r := w.thread.Runs[0]
	check("a run whose turn a live provider has", drain(w, true),
		drained{Stop: &HostStopping{RunID: r.ID, AttemptID: r.ActiveAttempt}, Wait: true, InFlight: true})
	check("a run whose provider is gone", drain(w, false), drained{InFlight: true})
	w.holdCaptures = true
	w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventTurnTerminal, TurnRef: "u1", Status: sdk.TurnCompleted, ThreadUsable: true})
	check("a run whose turn is over, its checkpoint not yet recorded", drain(w, false), drained{Wait: true, InFlight: true})

	w = newWorld(t)
	w.setPolicy(ContinuationPolicy{OnLimit: OnLimitWait})
	w.send("one")
	w.open("s1")
	w.turnOn("s1", "u1")
	w.ev("s1", limitTerminal("u1", sdk.Limit{Kind: sdk.LimitUsageWindow, ResetsAt: t0.Add(time.Hour)}))
	if w.thread.Runs[0].WaitID == "" {
		t.Fatalf("the limit armed no wait: %+v", w.thread.Runs[0])
	}
	check("a run waiting for a limit", drain(w, true), drained{})
}
