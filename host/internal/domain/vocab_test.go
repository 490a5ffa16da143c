package domain

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-run/baton/sdk"
)

// A choice is offered as a sentence says it.
func TestOneOf(t *testing.T) {
	for _, c := range []struct {
		words []string
		want  string
	}{
		{nil, ""},
		{[]string{"idle"}, "idle"},
		{[]string{"steer", "restart"}, "steer or restart"},
		{[]string{"ask", "accept", "decline"}, "ask, accept or decline"},
	} {
		if got := OneOf(c.words...); got != c.want {
			t.Errorf("OneOf(%q) = %q; want %q", c.words, got, c.want)
		}
	}
}

// The lists of a vocabulary that clients offer and check against: a
// thread is idle or its active run's status; the approval policies in
// the order the CLI offers them.
func TestVocabularyLists(t *testing.T) {
	if diff := cmp.Diff([]string{"idle", "starting", "running", "waiting"}, Strings(ThreadStatuses...)); diff != "" {
		t.Errorf("thread statuses (-want +got):\n%s", diff)
	}
	for _, s := range ThreadStatuses[1:] {
		if !RunStatus(s).Active() {
			t.Errorf("thread status %s is no active run's", s)
		}
	}
	if diff := cmp.Diff([]string{"ask", "accept", "decline"}, Strings(ApprovalPolicies...)); diff != "" {
		t.Errorf("approval policies (-want +got):\n%s", diff)
	}
}

// A provider's statuses become the domain's in one function each: a
// turn's end a run's and its node's, an item's status its node's (a word
// of another vocabulary is none).
func TestStatusesAtTheSDKEdge(t *testing.T) {
	type row struct {
		Run  RunStatus
		Node ItemStatus
	}
	got := map[sdk.TurnStatus]row{}
	for _, s := range []sdk.TurnStatus{sdk.TurnCompleted, sdk.TurnInterrupted, sdk.TurnFailed, ""} {
		got[s] = row{runStatus(s), itemStatus(s)}
	}
	want := map[sdk.TurnStatus]row{
		sdk.TurnCompleted:   {RunStatusCompleted, StatusCompleted},
		sdk.TurnInterrupted: {RunStatusInterrupted, StatusCancelled},
		sdk.TurnFailed:      {RunStatusFailed, StatusFailed},
		"":                  {RunStatusCompleted, StatusCompleted},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("turn statuses (-want +got):\n%s", diff)
	}
	nodes := map[string]ItemStatus{}
	for name, s := range map[string]sdk.Status{"in progress": sdk.ItemInProgress, "done": sdk.ItemDone, "declined": sdk.ItemDeclined,
		"a provider's own": sdk.ItemStatus("pending"), "a turn's": sdk.TurnFailed, "none": nil} {
		nodes[name] = nodeStatus(s)
	}
	if diff := cmp.Diff(map[string]ItemStatus{"in progress": "in_progress", "done": "completed", "declined": "declined",
		"a provider's own": "pending", "a turn's": "", "none": ""}, nodes); diff != "" {
		t.Errorf("item statuses as nodes' (-want +got):\n%s", diff)
	}
}
