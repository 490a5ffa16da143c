package domain

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// leftBehind: a live session may take the provider's next run only while
// its conversation is the one the thread's binding goes on in. (The
// orchestrator's TestLeftBehind, moved with the decision.)
func TestLeftBehind(t *testing.T) {
	th := Thread{
		ProviderThreads: []ProviderThread{
			{ID: "pt1", SessionID: "s1", ProviderRef: "c1", Detached: true},
			{ID: "pt2", SessionID: "s2", ProviderRef: "c2"},
		},
		ProviderSessions: []ProviderSession{{ID: "s1"}, {ID: "s2"}, {ID: "s3", Resumed: "c1"}, {ID: "s4"}},
	}
	for _, c := range []struct {
		name    string
		b       ProviderBinding
		session string
		want    bool
	}{
		{"its conversation goes on", ProviderBinding{SessionID: "s2", ThreadRef: "c2"}, "s2", false},
		{"the conversation it started was left behind", ProviderBinding{SessionID: "s1"}, "s1", true},
		{"the conversation it resumed was left behind", ProviderBinding{SessionID: "s3"}, "s3", true},
		{"a fresh session with no conversation yet", ProviderBinding{SessionID: "s4"}, "s4", false},
	} {
		if got := th.leftBehind(c.b, c.session); got != c.want {
			t.Errorf("%s: leftBehind = %v, want %v", c.name, got, c.want)
		}
	}
}

// TestChooseSession: the live session takes a turn on what it runs; a
// turn on another provider, model or command, or on a conversation the
// provider left behind, retires it (saying where the thread went) for a
// new session, which resumes the provider's own conversation where it has
// one and its plugin can.
func TestChooseSession(t *testing.T) {
	acp := ProviderCommand{Argv: []string{"agent"}}
	codex := ProviderCommand{Argv: []string{"codex", "app-server"}, Env: []string{"A=1"}}
	th := Thread{Provider: "acp", Model: "m1",
		ProviderBindings: []ProviderBinding{
			{Provider: "acp", Model: "m1", Command: acp, SessionID: "s1", ThreadRef: "c1"},
			{Provider: "codex", Command: codex, SessionID: "s2"},
		},
		ProviderThreads:  []ProviderThread{{ID: "pt2", SessionID: "s2", ProviderRef: "c2", Detached: true}},
		ProviderSessions: []ProviderSession{{ID: "s1"}, {ID: "s2"}},
	}
	onACP := &LiveSession{ID: "s1", Provider: "acp", Model: "m1", Command: acp}
	for _, c := range []struct {
		name     string
		live     *LiveSession
		provider string
		model    string
		want     SessionChoice
	}{
		{"the thread's own, live", onACP, "", "",
			SessionChoice{Provider: "acp", Model: "m1", Command: acp, Reuse: true, Resume: "c1"}},
		{"none live", nil, "acp", "m1",
			SessionChoice{Provider: "acp", Model: "m1", Command: acp, Resume: "c1"}},
		{"another model", onACP, "acp", "m2",
			SessionChoice{Provider: "acp", Model: "m2", Command: acp, Resume: "c1", Retire: "the thread switched to acp (m2)"}},
		{"another command", &LiveSession{ID: "s1", Provider: "acp", Model: "m1", Command: ProviderCommand{Argv: []string{"old"}}}, "acp", "m1",
			SessionChoice{Provider: "acp", Model: "m1", Command: acp, Resume: "c1", Retire: "the thread switched to acp (m1), with another command"}},
		{"another provider", onACP, "codex", "",
			SessionChoice{Provider: "codex", Command: codex, Retire: "the thread switched to codex"}},
		{"a conversation left behind", &LiveSession{ID: "s2", Provider: "codex", Command: codex}, "codex", "",
			SessionChoice{Provider: "codex", Command: codex, Retire: "the thread switched to codex, with another command"}},
	} {
		if diff := cmp.Diff(c.want, th.ChooseSession(c.live, c.provider, c.model)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", c.name, diff)
		}
	}
	c := th.ChooseSession(nil, "", "")
	if got := [2]string{c.ResumeRef(true), c.ResumeRef(false)}; got != [2]string{"c1", ""} {
		t.Errorf("resume refs, with and without the plugin's resume: %q", got)
	}
}
