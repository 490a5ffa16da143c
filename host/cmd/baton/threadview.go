package main

import (
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	batonv1 "github.com/baton-run/baton/host/api/baton/v1"
	"github.com/baton-run/baton/host/internal/domain"
)

// Plain readings of the API's messages that more than one verb makes:
// a thread's run by id or ordinal, its active run, a provider's binding,
// and a message's instants. What takes a rule of the domain's (the active
// run, a limit's words, a policy's defaults) the service has filled in.

// runOf is t's run of id runID (nil: the thread as read has none).
func runOf(t *batonv1.Thread, runID string) *batonv1.Run {
	for _, r := range t.GetRuns() {
		if r.GetId() == runID {
			return r
		}
	}
	return nil
}

// runByOrdinal is t's run of that ordinal (nil: the thread as read has
// none).
func runByOrdinal(t *batonv1.Thread, ordinal int) *batonv1.Run {
	for _, r := range t.GetRuns() {
		if int(r.GetOrdinal()) == ordinal {
			return r
		}
	}
	return nil
}

// activeRun is t's run that is starting, running or waiting (nil: none).
func activeRun(t *batonv1.Thread) *batonv1.Run {
	if id := t.GetActiveRunId(); id != "" {
		return runOf(t, id)
	}
	return nil
}

// lastStarted is t's newest run that has started (nil: none has).
func lastStarted(t *batonv1.Thread) *batonv1.Run {
	runs := t.GetRuns()
	for i := len(runs) - 1; i >= 0; i-- {
		if runs[i].GetStartedAt() != nil {
			return runs[i]
		}
	}
	return nil
}

// usedProvider says whether t has used provider: it has a binding to it.
func usedProvider(t *batonv1.Thread, provider string) bool {
	for _, b := range t.GetProviderBindings() {
		if b.GetProvider() == provider {
			return true
		}
	}
	return false
}

// statusOf is a run's status in the domain's vocabulary.
func statusOf(r *batonv1.Run) domain.RunStatus { return domain.RunStatus(r.GetStatus()) }

// describeLimit is a limit in words, with the provider's name before it
// when given: "codex usage limit (five_hour)".
func describeLimit(l *batonv1.Limit, provider string) string {
	return strings.TrimSpace(provider + " " + l.GetDescription())
}

// instant is a Timestamp as an instant (the zero instant for none, not
// 1970's).
func instant(t *timestamppb.Timestamp) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.AsTime()
}

// durationOf is a Duration as a duration (0 for none).
func durationOf(d *durationpb.Duration) time.Duration {
	if d == nil {
		return 0
	}
	return d.AsDuration()
}

// ints are ordinals as ints.
func ints(ns []uint32) []int {
	out := make([]int, len(ns))
	for i, n := range ns {
		out[i] = int(n)
	}
	return out
}
