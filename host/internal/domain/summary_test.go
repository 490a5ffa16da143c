package domain

import (
	"testing"

	"github.com/baton-run/baton/sdk"
	"github.com/google/go-cmp/cmp"
)

// A thread's summary, as the thread list shows it, and whether a restart
// must reconcile it, through a thread's life.
func TestSummaryAndLive(t *testing.T) {
	w := newWorld(t)
	want := ThreadSummary{ID: "thr", Provider: "acp", Cwd: "/w", CreatedAt: t0, UpdatedAt: t0, Status: ThreadIdle, Sequence: w.seq}
	check := func(what string, live bool) {
		t.Helper()
		want.Sequence = w.seq
		if diff := cmp.Diff(want, w.thread.Summary()); diff != "" {
			t.Errorf("%s: summary (-want +got):\n%s", what, diff)
		}
		if w.thread.Live() != live {
			t.Errorf("%s: live %v, want %v", what, w.thread.Live(), live)
		}
	}
	check("created", false)
	w.open("s1")
	check("a session open", true)
	w.send("one")
	w.send("two")
	want.Runs, want.Queued, want.Status, want.LastRun = 2, 1, ThreadStatus(RunStatusStarting), RunStatusStarting
	check("one run starting, one queued", true)
	w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventTurnStarted, ThreadRef: "pt", TurnRef: "u1"})
	want.Status, want.LastRun = ThreadStatus(RunStatusRunning), RunStatusRunning
	check("running", true)
	w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventTurnTerminal, TurnRef: "u1", Status: sdk.TurnFailed})
	want.Queued, want.Status, want.LastRun = 0, ThreadStatus(RunStatusStarting), RunStatusStarting
	check("the first failed, the second starting", true)
	w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventTurnStarted, ThreadRef: "pt", TurnRef: "u2"})
	w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventTurnTerminal, TurnRef: "u2", Status: sdk.TurnCompleted})
	want.Status, want.LastRun = ThreadIdle, RunStatusCompleted
	check("both ended, the session open", true)
	w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventRuntimeExited, Status: sdk.ExitExited})
	check("the session ended", false)
}
