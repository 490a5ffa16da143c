package domain

import (
	"strings"
	"testing"
	"time"

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
	w.host = "a" // on a log several hosts share: the runs a host starts are its
	w.send("one")
	w.send("two")
	want.Runs, want.Queued, want.Status, want.LastRun, want.Title = 2, 1, ThreadStatus(RunStatusStarting), RunStatusStarting, "one"
	want.Host = "a"
	check("one run starting, one queued", true)
	if got := w.thread.Runs[0].Host; got != "a" {
		t.Errorf("the run's host: %q, want a", got)
	}
	w.host = "b" // another host takes the log over: the next run is b's
	w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventTurnStarted, ThreadRef: "pt", TurnRef: "u1"})
	want.Status, want.LastRun = ThreadStatus(RunStatusRunning), RunStatusRunning
	check("running", true)
	w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventTurnTerminal, TurnRef: "u1", Status: sdk.TurnFailed})
	want.Queued, want.Status, want.LastRun, want.Host = 0, ThreadStatus(RunStatusStarting), RunStatusStarting, "b"
	check("the first failed, the second starting", true)
	w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventTurnStarted, ThreadRef: "pt", TurnRef: "u2"})
	w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventTurnTerminal, TurnRef: "u2", Status: sdk.TurnCompleted})
	want.Status, want.LastRun = ThreadIdle, RunStatusCompleted
	check("both ended, the session open", true)
	w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventRuntimeExited, Status: sdk.ExitExited})
	check("the session ended", false)
}

// What a list shows of a thread that needs its user, waits for a limit's
// reset, and has its own worktree.
func TestSummaryNeedsAndWaits(t *testing.T) {
	at := t0.Add(5 * time.Hour)
	th := &Thread{ID: "thr", Provider: "codex", Title: "Fix the build",
		Requests: []RuntimeRequest{{ID: "q1", Status: RequestStatusResolved}, {ID: "q2", Status: RequestStatusPending}, {ID: "q3", Status: RequestStatusPending}},
		Loop:     &Loop{Wait: &Wait{ID: "w1", Kind: WaitContinue, Provider: "codex", At: at, RunID: "run1"}},
		Worktree: &Worktree{Branch: "baton/fix", Path: "/data/worktrees/repo-thr", Repository: "/src/repo"}}
	want := ThreadSummary{ID: "thr", Provider: "codex", Status: ThreadIdle, Title: "Fix the build", Pending: 2,
		Wait: &SummaryWait{At: at, Kind: WaitContinue, Provider: "codex", RunID: "run1"}, Branch: "baton/fix", Worktree: "/data/worktrees/repo-thr", Repository: "/src/repo"}
	if diff := cmp.Diff(want, th.Summary()); diff != "" {
		t.Errorf("summary (-want +got):\n%s", diff)
	}
}

func TestTitleOf(t *testing.T) {
	long := strings.Repeat("word ", 30)
	for _, tc := range []struct{ in, want string }{
		{"Fix the build", "Fix the build"},
		{"\n  \n  Fix   the\tbuild  \nand then the tests", "Fix the build"},
		{"", ""},
		{" \n\t", ""},
		{long, strings.TrimSpace(long[:79]) + "…"},
		{strings.Repeat("é", 100), strings.Repeat("é", 79) + "…"},
		{strings.Repeat("x", 80), strings.Repeat("x", 80)},
	} {
		if got := TitleOf(tc.in); got != tc.want {
			t.Errorf("TitleOf(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
