package orchestrator_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-run/baton/host/internal/domain"
	"github.com/baton-run/baton/sdk/clock"
)

// Silence, in a host that stays up: a provider alive but silent mid-turn
// (testdata/acp/stall.ndjson: the agent takes the prompt, thinks, and says
// nothing more) has its process ended once the stall timeout has passed
// on the host's clock, and not a moment before, and the run fails saying
// so; a provider waiting for an approval is not silent, however long it
// waits; an approval nobody answers is declined when the request timeout
// passes.

// newSilenceEnv is newEnv with a host whose turn stall timeout and request
// timeout are the ones given (0: never).
func newSilenceEnv(t *testing.T, stall, requests time.Duration) *env {
	t.Helper()
	e := &env{t: t, data: t.TempDir(), ws: t.TempDir(), seed: 1, clock: clock.NewFake(epoch), stall: stall, requests: requests}
	e.open()
	t.Cleanup(func() {
		if e.host == nil {
			return
		}
		if t.Failed() {
			// A run left going (the stall it should have ended) would hold
			// the drain on a clock nobody moves: end it at once.
			e.host.Halt()
		}
		e.host.Close()
	})
	return e
}

// pendingBounds waits until the host's pending timers (but plugin calls'
// deadlines) are want, and fails saying what they are otherwise.
func (e *env) pendingBounds(want ...time.Duration) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(e.t.Context(), hangGuard)
	defer cancel()
	if _, err := e.clock.WaitPending(ctx, func(p []time.Duration) bool { return cmp.Equal(boundsOf(p), want, cmpEmpty) }); err != nil {
		e.t.Fatalf("pending timers %v (%v); want %v", bounds(e.clock), err, want)
	}
}

// cmpEmpty treats nil and empty lists of durations alike.
var cmpEmpty = cmp.Comparer(func(a, b []time.Duration) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
})

func TestSilentProviderStalls(t *testing.T) {
	const stall = 30 * time.Minute
	e := newSilenceEnv(t, stall, 0)
	threadID := e.createThread("acp", "acp/stall.ndjson")
	e.dispatch(domain.Command{ID: "send", ThreadID: threadID, Payload: domain.DispatchMessage{Text: "Take your time"}})
	// Thinking, and the turn's dispatch recorded: it may be committed after
	// the first frame, and each commit moves the stall's deadline.
	e.waitFor(threadID, "the agent to think", func(th domain.Thread) bool {
		return len(th.Runs) == 1 && th.Runs[0].Status == domain.RunStatusRunning && len(th.TurnItems) > 0 &&
			len(th.Runs[0].Attempts) > 0 && th.Runs[0].Attempts[len(th.Runs[0].Attempts)-1].SessionID != ""
	})
	// The stall timeout is the one timer the silent turn armed; a moment
	// before it passes, the run still runs.
	e.pendingBounds(stall)
	e.clock.Advance(stall - time.Millisecond)
	e.pendingBounds(time.Millisecond)
	if th := mustThread(t, e, threadID); th.Runs[0].Status != domain.RunStatusRunning || th.Runs[0].Stop.Forced != "" {
		t.Fatalf("a millisecond before the stall timeout, the run is %s (forced %q)", th.Runs[0].Status, th.Runs[0].Stop.Forced)
	}
	e.clock.Advance(time.Millisecond)
	th := e.waitFor(threadID, "the run and its session to end", func(th domain.Thread) bool {
		return allRunsEnded(1)(th) && th.ProviderSessions[0].Status == domain.SessionStatusEnded
	})
	reason := "the provider sent nothing for 30m0s mid-turn (the host's turn stall timeout), so the host ended its process"
	r := th.Runs[0]
	want := runOutcome{Status: domain.RunStatusFailed, Code: domain.FailureStalled, EndedAt: epoch.Add(stall), Attempts: []string{"failed"},
		Nodes: []string{"root_turn failed", "reasoning completed"}}
	if diff := cmp.Diff(want, outcomeOf(th, 0)); diff != "" {
		t.Errorf("the run (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(&domain.Failure{Code: domain.FailureStalled, Message: reason}, r.Failure); diff != "" {
		t.Errorf("the run's failure (-want +got):\n%s", diff)
	}
	s := th.ProviderSessions[0]
	if s.EndReason != "ended by the host: "+reason {
		t.Errorf("the session ended for %q", s.EndReason)
	}
	if err := syscall.Kill(s.ProviderPid, 0); s.ProviderPid == 0 || !errors.Is(err, syscall.ESRCH) {
		t.Errorf("the provider process %d lives on (kill -0: %v)", s.ProviderPid, err)
	}
	e.checkOrder(threadID, "the stall", []string{"stalled", "root turn's terminal", "run completing", "session ended"},
		func(p domain.Payload) string {
			switch p.(type) {
			case domain.TurnStalled:
				return "stalled"
			case domain.SessionEnded:
				return "session ended"
			case domain.RunEnded:
				return ""
			}
			return runEnd(r, nil)(p)
		})
	e.pendingBounds()
}

// A provider waiting for an approval (acp/approval_accept.ndjson, policy
// ask) is waiting for the host, not silent: no stall is armed however
// long it waits. Once answered, it has the whole stall timeout from the
// answer, and the run completes.
func TestWaitingForAnApprovalIsNotAStall(t *testing.T) {
	const stall = 30 * time.Minute
	e := newSilenceEnv(t, stall, 0)
	threadID := e.createThreadWith("acp", "acp/approval_accept.ndjson", domain.ApproveAsk)
	e.dispatch(domain.Command{ID: "send", ThreadID: threadID, Payload: domain.DispatchMessage{Text: "Write allowed.txt"}})
	th := e.waitFor(threadID, "the request", func(th domain.Thread) bool {
		return len(th.Requests) == 1 && th.Runs[0].Status == domain.RunStatusWaiting
	})
	e.pendingBounds()
	e.clock.Advance(2 * time.Hour)
	if th := mustThread(t, e, threadID); th.Runs[0].Status != domain.RunStatusWaiting || th.Requests[0].Status != domain.RequestStatusPending {
		t.Fatalf("two hours on, the run is %s and its request %s; want both waiting", th.Runs[0].Status, th.Requests[0].Status)
	}
	e.dispatch(domain.Command{ID: "answer", ThreadID: threadID, Payload: domain.RespondToRequest{RequestID: th.Requests[0].ID, Decision: domain.DecisionAccept}})
	th = e.waitFor(threadID, "the run to end", allRunsEnded(1))
	if diff := cmp.Diff(runOutcome{Status: domain.RunStatusCompleted, EndedAt: epoch.Add(2 * time.Hour), Attempts: []string{"completed"},
		Nodes: []string{"root_turn completed", "file_change completed", "assistant_message completed"}, Text: "I wrote allowed.txt."}, outcomeOf(th, 0)); diff != "" {
		t.Errorf("the run (-want +got):\n%s", diff)
	}
	if b, err := os.ReadFile(filepath.Join(e.ws, "allowed.txt")); err != nil || string(b) != "written with permission\n" {
		t.Errorf("allowed.txt: %q (%v)", b, err)
	}
	e.pendingBounds()
}

// An approval nobody answers (acp/approval_decline.ndjson, policy ask) is
// declined by the host when the request timeout has passed, and not a
// moment before; the provider takes the decline and the run goes on to
// its end.
func TestUnansweredApprovalIsDeclined(t *testing.T) {
	const timeout = 5 * time.Minute
	e := newSilenceEnv(t, 0, timeout)
	threadID := e.createThreadWith("acp", "acp/approval_decline.ndjson", domain.ApproveAsk)
	e.dispatch(domain.Command{ID: "send", ThreadID: threadID, Payload: domain.DispatchMessage{Text: "Write secret.txt"}})
	e.waitFor(threadID, "the request", func(th domain.Thread) bool { return len(th.Requests) == 1 })
	e.pendingBounds(timeout)
	e.clock.Advance(timeout - time.Millisecond)
	e.pendingBounds(time.Millisecond)
	if q := mustThread(t, e, threadID).Requests[0]; q.Status != domain.RequestStatusPending || q.AnsweredBy != "" {
		t.Fatalf("a millisecond before the timeout, the request is %s, answered by %q", q.Status, q.AnsweredBy)
	}
	e.clock.Advance(time.Millisecond)
	th := e.waitFor(threadID, "the run to end", allRunsEnded(1))
	q := th.Requests[0]
	if q.Status != domain.RequestStatusResolved || q.Decision != domain.DecisionDecline || q.AnsweredBy != domain.AnsweredByTimeout {
		t.Errorf("the request: %s, %s by %q; want resolved, decline by timeout", q.Status, q.Decision, q.AnsweredBy)
	}
	if r := th.Runs[0]; r.Status != domain.RunStatusCompleted || !r.EndedAt.Equal(epoch.Add(timeout)) {
		t.Errorf("the run: %s at %v", r.Status, r.EndedAt)
	}
	if _, err := os.Stat(filepath.Join(e.ws, "secret.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("secret.txt was written (%v)", err)
	}
	e.pendingBounds()
}
