package orchestrator_test

import (
	"path/filepath"
	"testing"

	"github.com/baton-run/baton/host/internal/domain"
	"github.com/baton-run/baton/sdk/plugintest"
)

// A thread continued by a new host resumes the provider's conversation: the
// new session loads the provider thread it had (recorded from
// claude-code-acp's session/load), the run completes on the same provider
// thread, and nothing from the first session is rebound or reallocated.
func TestResumeAfterRestart(t *testing.T) {
	e := newEnv(t)
	threadID := e.createThread("acp", "acp/resume.ndjson")
	groups := plugintest.ReadGroups(t, filepath.Join(root, "testdata", "acp/resume.messages"))
	want := assistantTexts(t, "acp/resume.ndjson")
	if len(groups) != 2 {
		t.Fatalf("the scenario has %d groups, want 2", len(groups))
	}
	e.dispatch(domain.Command{ID: "send-1", ThreadID: threadID, Payload: domain.DispatchMessage{Text: groups[0][0]}})
	e.waitFor(threadID, "run 1 to end", allRunsEnded(1))
	e.restart() // the session closes; the provider process ends

	e.dispatch(domain.Command{ID: "send-2", ThreadID: threadID, Payload: domain.DispatchMessage{Text: groups[1][0]}})
	th := e.waitFor(threadID, "run 2 to end", allRunsEnded(2))
	for i, r := range th.Runs {
		if r.Status != domain.RunStatusCompleted || r.Ordinal != i+1 {
			t.Fatalf("run %d = %s %+v", r.Ordinal, r.Status, r.Failure)
		}
		assertOneRootAndTurn(t, th, r)
		if got := assistantText(th, r.ID); got != want[i] {
			t.Errorf("run %d text = %q, want %q", r.Ordinal, got, want[i])
		}
	}
	if len(th.ProviderSessions) != 2 || len(th.ProviderThreads) != 1 {
		t.Fatalf("sessions %d, provider threads %d; want 2 sessions on 1 resumed provider thread", len(th.ProviderSessions), len(th.ProviderThreads))
	}
	if a1, a2 := th.Runs[0].Attempts[0].SessionID, th.Runs[1].Attempts[0].SessionID; a1 != th.ProviderSessions[0].ID || a2 != th.ProviderSessions[1].ID {
		t.Errorf("attempt sessions = %s, %s; want each run on the session that ran it", a1, a2)
	}
	if th.ProviderTurns[0].ProviderRef == th.ProviderTurns[1].ProviderRef {
		t.Errorf("both runs bound the same provider turn %q", th.ProviderTurns[0].ProviderRef)
	}
	e.restart()
	if s := mustThread(t, e, threadID).ProviderSessions[1]; s.EndReason != "closed" {
		t.Errorf("second session ended %q; want \"closed\" (the peer saw every frame it expected)", s.EndReason)
	}
}
