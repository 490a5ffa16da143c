package orchestrator_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/baton-run/baton/host/internal/domain"
)

// The thread's default approval policy declines the agent's request: the
// request is durable and resolved through the real plugin, the agent gets
// its "reject" option, and the file is never written (recorded from
// claude-code-acp).
func TestApprovalDeclinedByPolicy(t *testing.T) {
	e := newEnv(t)
	threadID := e.createThread("acp", "acp/approval_decline.ndjson")
	msgs := messages(t, "acp/approval_decline.messages")
	e.dispatch(domain.Command{ID: "send", ThreadID: threadID, Payload: domain.DispatchMessage{Text: msgs[0]}})
	th := e.waitFor(threadID, "the run to end", allRunsEnded(1))
	if th.ApprovalPolicy != domain.ApproveDecline {
		t.Errorf("policy = %q, want decline by default", th.ApprovalPolicy)
	}
	if r := th.Runs[0]; r.Status != domain.RunStatusCompleted {
		t.Fatalf("run = %s %+v", r.Status, r.Failure)
	}
	if len(th.Requests) != 1 {
		t.Fatalf("requests = %+v, want one", th.Requests)
	}
	q := th.Requests[0]
	if q.Kind != "permission" || q.Status != domain.RequestStatusResolved || q.Decision != domain.DecisionDecline ||
		q.RunID != th.Runs[0].ID || q.NodeID == "" || len(q.Options) == 0 {
		t.Errorf("request = %+v; want a permission resolved as declined, on the run's tool node, with options", q)
	}
	if _, err := os.Stat(filepath.Join(e.ws, "secret.txt")); err == nil {
		t.Error("the declined write happened")
	}
	e.restart()
	if s := mustThread(t, e, threadID).ProviderSessions[0]; s.EndReason != "closed" {
		t.Errorf("session ended %q; want \"closed\" (the peer saw the reject it expected)", s.EndReason)
	}
}
