package orchestrator_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-run/baton/host/internal/domain"
)

// How the effects of a thread are performed when the provider cannot be
// reached.

// A thread whose provider has no plugin installed fails its run when the
// turn is to start, naming the provider, and no session is recorded.
func TestProviderWithNoPluginFailsTheRun(t *testing.T) {
	e := newEnv(t)
	rc := e.dispatch(domain.Command{ID: "create", Payload: domain.CreateThread{Provider: "nope", Cwd: e.ws,
		ProviderCommand: domain.ProviderCommand{Argv: []string{"nope-agent"}}}})
	e.dispatch(domain.Command{ID: "send", ThreadID: rc.ThreadID, Payload: domain.DispatchMessage{Text: "hi"}})
	th := e.waitFor(rc.ThreadID, "the run to fail", allRunsEnded(1))
	type outcome struct {
		Status   domain.RunStatus
		Failure  *domain.Failure
		Sessions []domain.ProviderSession
	}
	want := outcome{domain.RunStatusFailed, &domain.Failure{Code: "start_failed",
		Message: "plugin not installed: no baton-plugin-nope in [" + pluginDir + "]"}, []domain.ProviderSession{}}
	if diff := cmp.Diff(want, outcome{th.Runs[0].Status, th.Runs[0].Failure, th.ProviderSessions}); diff != "" {
		t.Errorf("run (-want +got):\n%s", diff)
	}
}
