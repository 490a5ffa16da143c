package main

import "github.com/baton-run/baton/host/internal/domain"

// What baton run's end says of this invocation's runs: how each ended,
// and so the exit code.

// runOf is t's run of id runID (nil: the projection has none).
func runOf(t domain.Thread, runID string) *domain.Run {
	for i := range t.Runs {
		if t.Runs[i].ID == runID {
			return &t.Runs[i]
		}
	}
	return nil
}

// loopFailed says whether a loop did not end as asked: with --until, its
// check did not pass; without, its last run did not complete.
func loopFailed(t domain.Thread, mine []string) bool {
	if t.Loop != nil && t.Loop.Policy.Until != "" {
		return t.Loop.Status != domain.LoopDone
	}
	for i := len(mine) - 1; i >= 0; i-- {
		if r := runOf(t, mine[i]); r != nil {
			return r.Status != domain.RunStatusCompleted
		}
	}
	return false
}

// anyFailed says whether a run did not complete. A script interrupts and
// restarts runs on purpose, so for a script only a failed run counts.
func anyFailed(t domain.Thread, mine []string, scripted bool) bool {
	for _, id := range mine {
		r := runOf(t, id)
		if r == nil {
			continue
		}
		if r.Status == domain.RunStatusFailed || (!scripted && r.Status != domain.RunStatusCompleted) {
			return true
		}
	}
	return false
}
