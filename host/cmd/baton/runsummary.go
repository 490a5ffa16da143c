package main

import (
	batonv1 "github.com/baton-run/baton/host/api/baton/v1"
	"github.com/baton-run/baton/host/internal/domain"
)

// What baton run's end says of this invocation's runs: how each ended,
// and so the exit code.

// loopFailed says whether a loop did not end as asked: with --until, its
// check did not pass; without, its last run did not complete.
func loopFailed(t *batonv1.Thread, mine []string) bool {
	if l := t.GetLoop(); l != nil && l.GetPolicy().GetUntil() != "" {
		return domain.LoopStatus(l.GetStatus()) != domain.LoopDone
	}
	for i := len(mine) - 1; i >= 0; i-- {
		if r := runOf(t, mine[i]); r != nil {
			return statusOf(r) != domain.RunStatusCompleted
		}
	}
	return false
}

// anyFailed says whether a run did not complete. A script interrupts and
// restarts runs on purpose, so for a script only a failed run counts.
func anyFailed(t *batonv1.Thread, mine []string, scripted bool) bool {
	for _, id := range mine {
		r := runOf(t, id)
		if r == nil {
			continue
		}
		if st := statusOf(r); st == domain.RunStatusFailed || (!scripted && st != domain.RunStatusCompleted) {
			return true
		}
	}
	return false
}
