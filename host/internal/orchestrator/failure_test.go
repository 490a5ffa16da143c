package orchestrator_test

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/baton-run/baton/host/internal/domain"
	"github.com/baton-run/baton/host/internal/pluginhost"
)

// A plugin that dies mid-run ends the run with a reason; nothing hangs,
// and the next run starts a new plugin and session.
func TestPluginCrashEndsTheRun(t *testing.T) {
	e := newEnv(t)
	threadID := e.createThread("acp", "acp/stall.ndjson")
	e.dispatch(domain.Command{ID: "send", ThreadID: threadID, Payload: domain.DispatchMessage{Text: "Take your time"}})
	th := e.waitFor(threadID, "the provider to start thinking", func(th domain.Thread) bool { return len(th.TurnItems) > 0 })
	pid := th.ProviderSessions[0].PluginPid
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill plugin %d: %v", pid, err)
	}
	th = e.waitFor(threadID, "the run to end", allRunsEnded(1))
	r := th.Runs[0]
	if r.Status != domain.RunStatusFailed || r.Failure == nil || r.Failure.Code != "plugin_exited" {
		t.Fatalf("run = %s %+v; want failed with plugin_exited", r.Status, r.Failure)
	}
	if s := th.ProviderSessions[0]; s.Status != domain.SessionStatusEnded || !strings.Contains(s.EndReason, "plugin") {
		t.Errorf("session = %+v, want ended naming the plugin", s)
	}
	for _, n := range r.Nodes {
		if n.Status == domain.StatusInProgress {
			t.Errorf("node %s (%s) left in progress", n.ID, n.Kind)
		}
	}
}

// A host restarted while a run was in flight ends that run with a reason
// instead of leaving it running forever (invariant 12).
func TestRestartReconcilesARunInFlight(t *testing.T) {
	e := newEnv(t)
	threadID := e.createThread("acp", "acp/stall.ndjson")
	e.dispatch(domain.Command{ID: "send", ThreadID: threadID, Payload: domain.DispatchMessage{Text: "Take your time"}})
	e.waitFor(threadID, "the provider to start thinking", func(th domain.Thread) bool { return len(th.TurnItems) > 0 })
	e.restart()
	th := mustThread(t, e, threadID)
	r := th.Runs[0]
	if !r.Status.Terminal() || r.Failure == nil {
		t.Fatalf("after restart the run is %s (%+v); want it ended with a reason", r.Status, r.Failure)
	}
	for _, s := range th.ProviderSessions {
		if s.Status != domain.SessionStatusEnded {
			t.Errorf("session %s still %s", s.ID, s.Status)
		}
	}
}

// A plugin binary whose checksum differs from its lockfile is refused with
// a clear error, and the run fails with it rather than running it.
func TestPluginChecksumMismatchIsRefused(t *testing.T) {
	dir := t.TempDir()
	src, err := os.ReadFile(filepath.Join(pluginDir, "baton-plugin-acp"))
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "baton-plugin-acp")
	if err := os.WriteFile(bin, src, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := pluginhost.Lock(dir); err != nil {
		t.Fatal(err)
	}
	f, _ := os.OpenFile(bin, os.O_APPEND|os.O_WRONLY, 0)
	f.Write([]byte("tampered"))
	f.Close()

	m := pluginhost.New(pluginhost.Config{Dirs: []string{dir}})
	defer m.Close()
	_, err = m.Get(t.Context(), "acp")
	if err == nil || !strings.Contains(err.Error(), "SHA-256 does not match") {
		t.Fatalf("err = %v, want a checksum refusal", err)
	}
	os.Remove(filepath.Join(dir, pluginhost.LockfileName))
	if _, err := m.Get(t.Context(), "acp"); err == nil || !strings.Contains(err.Error(), "has no checksum") {
		t.Fatalf("without a lockfile entry: %v", err)
	}
	if _, err := m.Get(t.Context(), "nope"); err == nil || !strings.Contains(err.Error(), "not installed") {
		t.Fatalf("unknown plugin: %v", err)
	}
}

// A provider command that cannot start fails the run with that reason.
func TestBadProviderCommandFailsTheRun(t *testing.T) {
	e := newEnv(t)
	rc := e.dispatch(domain.Command{ID: "create", Payload: domain.CreateThread{Provider: "acp", Cwd: e.ws,
		ProviderCommand: domain.ProviderCommand{Argv: []string{"/nonexistent/agent"}}}})
	e.dispatch(domain.Command{ID: "send", ThreadID: rc.ThreadID, Payload: domain.DispatchMessage{Text: "hi"}})
	th := e.waitFor(rc.ThreadID, "the run to fail", allRunsEnded(1))
	if r := th.Runs[0]; r.Status != domain.RunStatusFailed || !strings.Contains(r.Failure.Message, "/nonexistent/agent") {
		t.Fatalf("run = %s %+v; want failed naming the command", r.Status, r.Failure)
	}
}
