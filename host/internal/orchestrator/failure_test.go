package orchestrator_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"

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
// instead of leaving it running forever (invariant 12): the host that
// closes does, when the provider does not.
func TestRestartReconcilesARunInFlight(t *testing.T) {
	e := newEnv(t)
	threadID := e.createThread("acp", "acp/stall.ndjson")
	e.dispatch(domain.Command{ID: "send", ThreadID: threadID, Payload: domain.DispatchMessage{Text: "Take your time"}})
	e.waitFor(threadID, "the provider to start thinking", func(th domain.Thread) bool { return len(th.TurnItems) > 0 })
	// The agent takes the request to stop and says nothing more: Close
	// ends the run itself once its drain's bound is up.
	e.restartPastDrain()
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

// A provider command that cannot start fails the run saying so in one
// sentence naming the command, and no session is recorded.
func TestBadProviderCommandFailsTheRun(t *testing.T) {
	e := newEnv(t)
	rc := e.dispatch(domain.Command{ID: "create", Payload: domain.CreateThread{Provider: "acp", Cwd: e.ws,
		ProviderCommand: domain.ProviderCommand{Argv: []string{"/nonexistent/agent"}}}})
	e.dispatch(domain.Command{ID: "send", ThreadID: rc.ThreadID, Payload: domain.DispatchMessage{Text: "hi"}})
	th := e.waitFor(rc.ThreadID, "the run to fail", allRunsEnded(1))
	want := startFailure{domain.RunStatusFailed, &domain.Failure{Code: "start_failed",
		Message: "acp: the provider command /nonexistent/agent does not exist"}, []domain.ProviderSession{}}
	if diff := cmp.Diff(want, startFailure{th.Runs[0].Status, th.Runs[0].Failure, th.ProviderSessions}); diff != "" {
		t.Errorf("run (-want +got):\n%s", diff)
	}
}

// startFailure is how a run whose provider could not start ended.
type startFailure struct {
	Status   domain.RunStatus
	Failure  *domain.Failure
	Sessions []domain.ProviderSession
}

// A provider that exits before it answers (authored transcripts: each
// exits at once, saying on stderr why) fails the run with one sentence:
// which provider, how it exited, before what, and the end of its stderr.
// Through the real plugins: JSON-RPC (acp, codex), stream-json (claude;
// cursor, whose turn's process exits without a result) and HTTP (opencode,
// whose server exits before it listens).
func TestProviderThatExitsAtOnceSaysWhy(t *testing.T) {
	for provider, want := range map[string]domain.Failure{
		"acp": {Code: "start_failed",
			Message: "acp: the agent exited with status 1 before answering initialize: Starting agent; Error: ANTHROPIC_API_KEY is not set"},
		"claude": {Code: "start_failed",
			Message: "claude exited with status 1 before answering initialize: Invalid API key · Please run /login"},
		"codex": {Code: "start_failed",
			Message: "codex exited with status 2 before answering initialize: Error: unexpected argument 'app-server' found"},
		"cursor": {Code: "provider_exited", Message: filepath.Base(peerBin) +
			" exited with status 1 during the turn: Error: Authentication required. Please run 'cursor-agent login' first."},
		"opencode": {Code: "start_failed",
			Message: "opencode exited with status 1 before it said where it listens: it printed \"Warning: OPENCODE_SERVER_PASSWORD is not set; server is unsecured.\"; its stderr ends: Error: listen EADDRINUSE: address already in use 127.0.0.1"},
	} {
		t.Run(provider, func(t *testing.T) {
			e := newEnv(t)
			threadID := e.createThread(provider, provider+"/exit_at_start.ndjson")
			e.dispatch(domain.Command{ID: "send", ThreadID: threadID, Payload: domain.DispatchMessage{Text: "hi"}})
			th := e.waitFor(threadID, "the run to fail", allRunsEnded(1))
			if diff := cmp.Diff(&want, th.Runs[0].Failure); diff != "" || th.Runs[0].Status != domain.RunStatusFailed {
				t.Errorf("run %s; failure (-want +got):\n%s", th.Runs[0].Status, diff)
			}
			if want.Code == "start_failed" && len(th.ProviderSessions) != 0 {
				t.Errorf("sessions %+v; want none: none opened", th.ProviderSessions)
			}
		})
	}
}

// A provider that dies while a turn is being started (codex exits on
// reading turn/start; authored from the recorded resume) does not fail the
// run: the turn never reached it, so once the session's end is recorded
// the host opens a new session, resuming the provider's thread, and sends
// the turn there. The run completes in one attempt.
func TestTurnStartedAgainAfterTheProviderDied(t *testing.T) {
	e := newEnv(t)
	threadID, _, _ := e.codexThread("start_turn_crash", "")
	e.dispatch(domain.Command{ID: "send", ThreadID: threadID, Payload: domain.DispatchMessage{Text: "Remember the word banana"}})
	th := e.waitFor(threadID, "the run to end", allRunsEnded(1))
	r := th.Runs[0]
	type outcome struct {
		Status    domain.RunStatus
		Attempts  int
		Assistant string
		Sessions  []string // each session's status and how it ended
		Threads   []string // the provider threads bound
	}
	got := outcome{r.Status, len(r.Attempts), assistantText(th, r.ID), nil, nil}
	for _, s := range th.ProviderSessions {
		got.Sessions = append(got.Sessions, string(s.Status)+" "+s.EndReason)
	}
	for _, pt := range th.ProviderThreads {
		got.Threads = append(got.Threads, pt.ProviderRef)
	}
	want := outcome{domain.RunStatusCompleted, 1, "Noted: the word is banana.",
		[]string{"ended codex exited with status 1: thread 'main' panicked at app-server/src/turn.rs: turn/start: unexpected end of input", "open "}, []string{"01a22c20-dbd1-7ac1-afa5-e9808b4b9b79"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the run whose provider died at its start (-want +got):\n%s", diff)
	}
	// The turn went to the second session, once the first had ended.
	session := map[string]int{}
	e.checkOrder(threadID, "the sessions and the turn", []string{
		"run started", "session 1 opened", "session 1 ended", "session 2 opened", "turn started in session 2", "run ended completed",
	}, func(p domain.Payload) string {
		switch p := p.(type) {
		case domain.RunStarted:
			return "run started"
		case domain.SessionOpened:
			session[p.SessionID] = len(session) + 1
			return fmt.Sprintf("session %d opened", session[p.SessionID])
		case domain.SessionEnded:
			return fmt.Sprintf("session %d ended", session[p.SessionID])
		case domain.ProviderTurnBound:
			return fmt.Sprintf("turn started in session %d", session[p.SessionID])
		case domain.RunEnded:
			return "run ended " + string(p.Status)
		}
		return ""
	})
	// The second process saw every frame it expected.
	e.restart()
	th = mustThread(t, e, threadID)
	if len(th.ProviderSessions) != 2 {
		t.Fatalf("provider sessions: %+v", th.ProviderSessions)
	}
	if s := th.ProviderSessions[1]; s.Status != domain.SessionStatusEnded || s.EndReason != "closed" {
		t.Errorf("the second session = %s (%q); want ended, closed", s.Status, s.EndReason)
	}
	if n := e.countFrames(th, `"method":"turn/start"`); n != 2 {
		t.Errorf("turn/start sent %d times, want 2 (once to each process)", n)
	}
}
