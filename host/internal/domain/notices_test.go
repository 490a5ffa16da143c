package domain

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Which events need a person: each case is a batch of events on a thread,
// and the notices it calls for.
func TestNotices(t *testing.T) {
	reset := t0.Add(5 * 60 * 60 * 1e9)
	wait := Wait{ID: "wait1", Kind: WaitContinue, RunID: "run1", Provider: "codex",
		Limit: Limit{Kind: LimitUsageWindow, ResetsAt: reset}, At: reset, Probe: 1, MaxProbes: 3}
	thread := &Thread{ID: "thr1", Title: "Fix the flaky test in ci"}
	waiting := &Thread{ID: "thr1", Title: thread.Title, Loop: &Loop{Wait: &wait}}
	failure := &Failure{Code: "provider_error", Message: "boom"}
	for _, c := range []struct {
		name   string
		thread *Thread
		events []Payload
		want   []Notice
	}{{
		name:   "a request left to a person",
		thread: thread,
		events: []Payload{NodeStarted{RunID: "run1"}, RequestOpened{RequestID: "req1", RunID: "run1", Kind: RequestCommandApproval, Title: "Run\n`make test`?"}},
		want: []Notice{{Event: 1, Type: NoticeRequestPending, RunID: "run1", Title: "Fix the flaky test in ci",
			Detail: NoticeDetail{RequestID: "req1", Kind: RequestCommandApproval, Summary: "Run `make test`?"}}},
	}, {
		name:   "a request the policy answers at once",
		thread: thread,
		events: []Payload{RequestOpened{RequestID: "req1", RunID: "run1", Kind: RequestCommandApproval}, RequestAnswered{RequestID: "req1", Decision: DecisionAccept, By: AnsweredByPolicy}},
	}, {
		name:   "runs that end",
		thread: thread,
		events: []Payload{
			RunEnded{RunID: "run1", Status: RunStatusCompleted},
			RunEnded{RunID: "run2", Status: RunStatusFailed, Failure: failure},
			RunEnded{RunID: "run3", Status: RunStatusInterrupted, StopReason: "user"},
			RunEnded{RunID: "run4", Status: RunStatusCancelled},
			RunEnded{RunID: "run5", Status: RunStatusRolledBack},
			RunEnded{RunID: "run6", Status: RunStatusBlocked},
		},
		want: []Notice{
			{Event: 0, Type: NoticeRunEnded, RunID: "run1", Title: "Fix the flaky test in ci", Detail: NoticeDetail{Status: RunStatusCompleted}},
			{Event: 1, Type: NoticeRunEnded, RunID: "run2", Title: "Fix the flaky test in ci", Detail: NoticeDetail{Status: RunStatusFailed, Failure: failure}},
			{Event: 2, Type: NoticeRunEnded, RunID: "run3", Title: "Fix the flaky test in ci", Detail: NoticeDetail{Status: RunStatusInterrupted, StopReason: "user"}},
		},
	}, {
		name:   "a wait armed",
		thread: thread,
		events: []Payload{LimitReached{RunID: "run1"}, WaitArmed{Wait: wait}},
		want: []Notice{{Event: 1, Type: NoticeWaitStarted, RunID: "run1", Title: "Fix the flaky test in ci",
			Detail: NoticeDetail{WaitID: "wait1", WaitKind: WaitContinue, Provider: "codex", Limit: LimitUsageWindow, Until: reset, Probe: 1}}},
	}, {
		name:   "a wait armed before, fired now",
		thread: waiting,
		events: []Payload{WaitEnded{WaitID: "wait1", Outcome: WaitFired}},
		want: []Notice{{Event: 0, Type: NoticeWaitEnded, RunID: "run1", Title: "Fix the flaky test in ci",
			Detail: NoticeDetail{WaitID: "wait1", WaitKind: WaitContinue, Provider: "codex", Limit: LimitUsageWindow, Until: reset, Probe: 1, Outcome: WaitFired}}},
	}, {
		name:   "a wait armed and cancelled in one batch",
		thread: &Thread{ID: "thr1", Title: thread.Title, Loop: &Loop{}},
		events: []Payload{WaitArmed{Wait: wait}, WaitEnded{WaitID: "wait1", Outcome: WaitCancelled, Reason: "policy cleared"}},
		want: []Notice{
			{Event: 0, Type: NoticeWaitStarted, RunID: "run1", Title: "Fix the flaky test in ci",
				Detail: NoticeDetail{WaitID: "wait1", WaitKind: WaitContinue, Provider: "codex", Limit: LimitUsageWindow, Until: reset, Probe: 1}},
			{Event: 1, Type: NoticeWaitEnded, RunID: "run1", Title: "Fix the flaky test in ci",
				Detail: NoticeDetail{WaitID: "wait1", WaitKind: WaitContinue, Provider: "codex", Limit: LimitUsageWindow, Until: reset, Probe: 1,
					Outcome: WaitCancelled, Reason: "policy cleared"}},
		},
	}, {
		name:   "a return wait ends",
		thread: &Thread{ID: "thr1", Loop: &Loop{Return: &Wait{ID: "wait2", Kind: WaitReturn, Provider: "claude", At: reset}}},
		events: []Payload{WaitEnded{WaitID: "wait2", Outcome: WaitFired}},
		want: []Notice{{Event: 0, Type: NoticeWaitEnded,
			Detail: NoticeDetail{WaitID: "wait2", WaitKind: WaitReturn, Provider: "claude", Until: reset, Outcome: WaitFired}}},
	}, {
		name: "a new thread's first run, titled by its message",
		events: []Payload{ThreadCreated{}, MessageAdded{Role: RoleAssistant, Text: "no"}, MessageAdded{Role: RoleUser, Text: "\nFix the\nflaky test"},
			RunEnded{RunID: "run1", Status: RunStatusFailed}},
		want: []Notice{{Event: 3, Type: NoticeRunEnded, RunID: "run1", Title: "Fix the",
			Detail: NoticeDetail{Status: RunStatusFailed}}},
	}, {
		name:   "nothing that needs a person",
		events: []Payload{ThreadCreated{}, MessageDelta{}},
	}} {
		t.Run(c.name, func(t *testing.T) {
			if diff := cmp.Diff(c.want, Notices(c.thread, c.events)); diff != "" {
				t.Errorf("notices (-want +got):\n%s", diff)
			}
		})
	}
}
