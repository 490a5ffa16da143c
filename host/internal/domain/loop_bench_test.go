package domain

import (
	"fmt"
	"testing"
	"time"

	"github.com/baton-run/baton/sdk"
)

// BenchmarkLimitWaitContinue is the cost of the loop's decisions on a
// thread with history: a run's turn ends on a limit (the wait is armed),
// the wait fires (the continuation attempt starts), and the continuation
// completes; at 100 and 1000 earlier runs, beside the baseline of the
// same thread's plain turn (started, completed). The loop's rules look
// only at the newest runs; what follows the history is the scratch copy
// every decision makes of the slices it writes, which the baseline pays
// alike.
func BenchmarkLimitWaitContinue(b *testing.B) {
	for _, n := range []int{100, 1000} {
		b.Run(fmt.Sprintf("baseline/runs=%d", n), func(b *testing.B) {
			base := threadWithRuns(b, n)
			env := Env{Now: t0, NewID: func(p string) string { return p + "_b" }}
			for b.Loop() {
				t := base.Scratch()
				mustDecide(b, &t, IngestProviderEvent{SessionID: "s1", Event: sdk.RuntimeEvent{Kind: sdk.EventTurnStarted, ThreadRef: "pt", TurnRef: "last"}}, env)
				mustDecide(b, &t, IngestProviderEvent{SessionID: "s1", Event: sdk.RuntimeEvent{Kind: sdk.EventTurnTerminal, TurnRef: "last", Status: sdk.TurnCompleted}}, env)
			}
		})
		b.Run(fmt.Sprintf("limit/runs=%d", n), func(b *testing.B) {
			base := threadWithRuns(b, n)
			base.Loop = &Loop{Policy: ContinuationPolicy{OnLimit: OnLimitWait}.WithDefaults(), Since: t0, Status: LoopActive}
			l := sdk.Limit{Kind: sdk.LimitUsageWindow, ResetsAt: t0.Add(time.Hour)}
			id := 0
			env := Env{Now: t0, NewID: func(p string) string { id++; return fmt.Sprintf("%s_b%d", p, id) }}
			b.ResetTimer()
			for b.Loop() {
				t := base.Scratch()
				mustDecide(b, &t, IngestProviderEvent{SessionID: "s1", Event: sdk.RuntimeEvent{Kind: sdk.EventTurnStarted, ThreadRef: "pt", TurnRef: "last"}}, env)
				mustDecide(b, &t, IngestProviderEvent{SessionID: "s1", Event: sdk.RuntimeEvent{Kind: sdk.EventTurnTerminal, TurnRef: "last",
					Status: sdk.TurnFailed, Limit: &l}}, env)
				mustDecide(b, &t, FireWait{WaitID: t.NextWait().ID}, env)
			}
		})
	}
}

// threadWithRuns is a thread with n completed runs and one more started.
func threadWithRuns(b *testing.B, n int) Thread {
	b.Helper()
	t := Thread{}
	id := 0
	env := Env{Now: t0, NewID: func(p string) string { id++; return fmt.Sprintf("%s_%d", p, id) }}
	mustDecide(b, &t, CreateThread{Provider: "acp", Cwd: "/w", ProviderCommand: ProviderCommand{Argv: []string{"agent"}}}, env)
	mustDecide(b, &t, RecordSessionOpened{SessionID: "s1", ThreadRef: "pt"}, env)
	for i := range n + 1 {
		d := mustDecide(b, &t, DispatchMessage{Text: fmt.Sprintf("message %d", i), Mode: ModeQueueAfterActive}, env)
		for _, e := range d.Effects {
			if e, ok := e.(CaptureCheckpoint); ok {
				mustDecide(b, &t, RecordCheckpoint{CheckpointID: e.CheckpointID, Status: CheckpointReady, Commit: "c"}, env)
			}
		}
		if i == n {
			break // the last run is the benchmark's
		}
		ref := fmt.Sprintf("u%d", i)
		mustDecide(b, &t, IngestProviderEvent{SessionID: "s1", Event: sdk.RuntimeEvent{Kind: sdk.EventTurnStarted, ThreadRef: "pt", TurnRef: ref}}, env)
		d = mustDecide(b, &t, IngestProviderEvent{SessionID: "s1", Event: sdk.RuntimeEvent{Kind: sdk.EventTurnTerminal, TurnRef: ref, Status: sdk.TurnCompleted}}, env)
		for _, e := range d.Effects {
			if e, ok := e.(CaptureCheckpoint); ok {
				mustDecide(b, &t, RecordCheckpoint{CheckpointID: e.CheckpointID, Status: CheckpointReady, Commit: "c"}, env)
			}
		}
	}
	return t
}

func mustDecide(b *testing.B, t *Thread, p CommandPayload, env Env) Decision {
	b.Helper()
	d, err := Decide(t, Command{ID: "b", ThreadID: "thr", Payload: p}, env)
	if err != nil {
		b.Fatalf("%s: %v", p.CommandType(), err)
	}
	return d
}
