package domain

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-run/baton/sdk"
)

// Stop means stop: a provider that does not end its turn within the grace
// of an interrupt has its process ended by the host, and the run ends
// interrupted saying so, however the session's end comes.

func interruptCmd(runID string, force bool) Command {
	return Command{ID: "i", ThreadID: "thr", Payload: InterruptRun{RunID: runID, Force: force}}
}

// The grace runs from the interrupt, on the decisions' clock; when it has
// passed with the turn still going, ForceStop ends the session's process,
// and the turn's end the closing session reports ends the run interrupted
// with the forced stop's reason, not the plugin's.
func TestInterruptIgnoredIsForcedAfterTheGrace(t *testing.T) {
	for _, end := range []string{"turn terminal, then the exit", "the exit alone"} {
		t.Run(end, func(t *testing.T) {
			w := running(t, Capabilities{})
			w.send("next")
			r := w.thread.Runs[0]
			if _, _, ok := w.thread.StopDeadline(); ok {
				t.Fatal("a deadline before any interrupt")
			}
			w.must(interruptCmd(r.ID, false))
			cmd, at, ok := w.thread.StopDeadline()
			if want := (ForceStop{RunID: r.ID, AttemptID: r.ActiveAttempt}); !ok || cmd != want || !at.Equal(t0.Add(DefaultInterruptGrace)) {
				t.Fatalf("deadline: %+v at %v (%v); want %+v at %v", cmd, at, ok, want, t0.Add(DefaultInterruptGrace))
			}
			if diff := cmp.Diff(RunStop{Deadline: t0.Add(10 * time.Second), Grace: 10 * time.Second}, w.thread.Runs[0].Stop); diff != "" {
				t.Fatalf("run's stop (-want +got):\n%s", diff)
			}
			w.now = at
			n := len(w.effects)
			d := w.must(Command{ID: "f", ThreadID: "thr", Payload: cmd})
			if got := types(d); got != "run.stop.forced" {
				t.Fatalf("force stop: %s", got)
			}
			want := []Effect{EndSession{EffectHead: EffectHead{ThreadID: "thr"}, RunID: r.ID, AttemptID: r.ActiveAttempt, SessionID: "s1"}}
			if diff := cmp.Diff(want, w.effects[n:]); diff != "" {
				t.Fatalf("effects (-want +got):\n%s", diff)
			}
			if _, _, ok := w.thread.StopDeadline(); ok {
				t.Fatal("a deadline once the stop is forced")
			}
			// Asked again meanwhile: nothing more to do.
			if d, err := w.decide(interruptCmd(r.ID, true)); err != nil || len(d.Events) != 0 {
				t.Fatalf("interrupt while forced: %s %v", types(d), err)
			}
			if d := w.must(Command{ID: "f", ThreadID: "thr", Payload: cmd}); len(d.Events) != 0 {
				t.Fatalf("force stop twice: %s", types(d))
			}
			reason := "the provider did not stop within 10s of the interrupt, so the host ended its process"
			if end == "turn terminal, then the exit" {
				d = w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventTurnTerminal, TurnRef: "u1", Status: sdk.TurnFailed,
					Failure: &sdk.Failure{Code: "closed", Message: "the session was closed"}})
				if got := types(d); got != "node.completed run.completing checkpoint.scope.opened checkpoint.requested checkpoint.recorded run.ended run.started attempt.started node.started" {
					t.Fatalf("terminal: %s", got)
				}
			}
			d = w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventRuntimeExited, Status: sdk.ExitClosed})
			got := w.thread.Runs[0]
			if got.Status != RunStatusInterrupted || got.StopReason != "" {
				t.Fatalf("run: %s %q", got.Status, got.StopReason)
			}
			if diff := cmp.Diff(&Failure{Code: FailureForced, Message: reason}, got.Failure); diff != "" {
				t.Fatalf("failure (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(RunStop{Deadline: t0.Add(10 * time.Second), Grace: 10 * time.Second, Forced: reason}, got.Stop); diff != "" {
				t.Fatalf("run's stop (-want +got):\n%s", diff)
			}
			if s := w.thread.ProviderSessions[0]; s.Status != SessionStatusEnded || s.EndReason != "ended by the host: "+reason {
				t.Fatalf("session: %s %q", s.Status, s.EndReason)
			}
			if next := w.thread.Runs[1]; next.Status != RunStatusStarting {
				t.Fatalf("the next run: %s", next.Status)
			}
		})
	}
}

// A turn that ends within its grace ends as the provider says; the timer
// that fires after finds nothing to stop.
func TestInterruptHonouredInTimeIsNotForced(t *testing.T) {
	w := running(t, Capabilities{})
	w.now = t0.Add(time.Minute)
	r := w.thread.Runs[0]
	w.must(interruptCmd(r.ID, false))
	cmd, at, _ := w.thread.StopDeadline()
	if !at.Equal(t0.Add(time.Minute + DefaultInterruptGrace)) {
		t.Fatalf("deadline %v: the grace runs from the interrupt", at)
	}
	w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventTurnTerminal, TurnRef: "u1", Status: sdk.TurnInterrupted})
	if d := w.must(Command{ID: "f", ThreadID: "thr", Payload: cmd}); len(d.Events) != 0 || len(d.Effects) != 0 {
		t.Fatalf("force stop of an ended run: %s %+v", types(d), d.Effects)
	}
	if got := w.thread.Runs[0]; got.Status != RunStatusInterrupted || got.Failure != nil || got.Stop.Forced != "" {
		t.Fatalf("run: %+v", got)
	}
	// A ForceStop for an attempt that is not the run's, or for a run with
	// no deadline (an interrupt logged before there were any): nothing.
	w2 := running(t, Capabilities{})
	r2 := w2.thread.Runs[0]
	w2.edit(func(t *Thread) { t.Runs[0].InterruptRequested = true })
	for _, p := range []ForceStop{{RunID: r2.ID, AttemptID: r2.ActiveAttempt}, {RunID: r2.ID, AttemptID: "att_other"}, {RunID: "run_nope"}} {
		if d := w2.must(Command{ID: "f", ThreadID: "thr", Payload: p}); len(d.Events) != 0 {
			t.Fatalf("force stop %+v: %s", p, types(d))
		}
	}
}

// The host's grace is the environment's.
func TestInterruptGraceFromTheEnvironment(t *testing.T) {
	w := running(t, Capabilities{})
	r := w.thread.Runs[0]
	scratch := w.thread.Scratch()
	env := w.env()
	env.InterruptGrace = 3 * time.Second
	d, err := Decide(&scratch, interruptCmd(r.ID, false), env)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]Payload{InterruptRequested{RunID: r.ID, AttemptID: r.ActiveAttempt, Grace: 3 * time.Second}}, d.Events); diff != "" {
		t.Fatalf("events (-want +got):\n%s", diff)
	}
}

// A forced interrupt ends the process at once: no request to the provider
// first. One after a plain interrupt forces it without waiting out the
// grace.
func TestForcedInterrupt(t *testing.T) {
	for _, asked := range []bool{false, true} {
		w := running(t, Capabilities{})
		r := w.thread.Runs[0]
		if asked {
			w.must(interruptCmd(r.ID, false))
		}
		n := len(w.effects)
		d := w.must(interruptCmd(r.ID, true))
		want := "run.interrupt.requested run.stop.forced"
		if asked {
			want = "run.stop.forced"
		}
		if got := types(d); got != want {
			t.Fatalf("asked before %v: %s, want %s", asked, got, want)
		}
		wantEff := []Effect{EndSession{EffectHead: EffectHead{ThreadID: "thr"}, RunID: r.ID, AttemptID: r.ActiveAttempt, SessionID: "s1"}}
		if diff := cmp.Diff(wantEff, w.effects[n:]); diff != "" {
			t.Fatalf("effects (-want +got):\n%s", diff)
		}
		w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventRuntimeExited, Status: sdk.ExitClosed})
		reason := "stopped by force: the host ended the provider's process when asked to"
		if got := w.thread.Runs[0]; got.Status != RunStatusInterrupted || got.Failure == nil || *got.Failure != (Failure{Code: FailureForced, Message: reason}) {
			t.Fatalf("run: %s %+v", got.Status, got.Failure)
		}
	}
}

// An attempt no session has taken yet has no process to end: a forced
// stop ends its run at once.
func TestForcedInterruptBeforeTheTurnStarted(t *testing.T) {
	w := newWorld(t)
	w.send("one")
	r := w.thread.Runs[0]
	n := len(w.effects)
	d := w.must(interruptCmd(r.ID, true))
	if got := types(d); got != "run.interrupt.requested run.stop.forced node.completed run.completing checkpoint.scope.opened checkpoint.requested checkpoint.recorded run.ended" {
		t.Fatalf("forced before the start: %s", got)
	}
	for _, e := range w.effects[n:] {
		if _, ok := e.(CaptureCheckpoint); !ok {
			t.Fatalf("an effect other than the checkpoint: %+v", e)
		}
	}
	if got := w.thread.Runs[0]; got.Status != RunStatusInterrupted || got.Failure.Code != FailureForced {
		t.Fatalf("run: %s %+v", got.Status, got.Failure)
	}
}
