package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/baton-run/baton/sdk"
	"github.com/baton-run/baton/sdk/plugintest"
)

// agentsData holds transcripts of particular agents (their flavors).
const agentsData = testdata + "/agents"

// TestGeminiAuthenticatesAndSelectsModel: gemini-cli answers session/new
// with "authentication required" when no auth type is set; the gemini
// flavor takes the method the environment points at (GEMINI_API_KEY:
// gemini-api-key), authenticates, opens the session again, and makes the
// thread's model the session's with session/set_model; the turn then
// streams its thought and its answer. The peer checks every frame the
// plugin sent, in order.
func TestGeminiAuthenticatesAndSelectsModel(t *testing.T) {
	p := plugintest.Start(t, plugintest.Build(t, "."))
	ws := t.TempDir()
	f := filepath.Join(agentsData, "gemini", "auth_model.ndjson")
	cmd := plugintest.PeerCommand(f, ws, "")
	cmd.Env = append(cmd.Env, "GEMINI_API_KEY=made-up-key")
	s := p.OpenWith(t, sdk.OpenSessionRequest{Cwd: ws, Model: "gemini-2.5-flash", Command: cmd})
	s.StartTurn(t, "Say hello.")
	evs := s.WaitTurn(t)
	if term := evs[len(evs)-1]; term.Status != sdk.TurnCompleted {
		t.Fatalf("turn ended %s (%+v)", term.Status, term.Failure)
	}
	if got := plugintest.ItemText(evs, "", sdk.ItemAssistantMessage); got != "Hello from Gemini." {
		t.Errorf("answer %q", got)
	}
	if got := plugintest.ItemText(evs, "", sdk.ItemReasoning); got != "**Greeting** The user wants a hello." {
		t.Errorf("thought %q", got)
	}
	s.Close(t)
}

// TestAuthenticationNobodyCanGive: with nothing in the environment that
// picks a method, the plugin does not guess one (gemini's Google login
// opens a browser): the session is refused with the agent's methods and
// what a person does, and the agent is sent nothing more.
func TestAuthenticationNobodyCanGive(t *testing.T) {
	for _, k := range []string{"GOOGLE_GENAI_USE_GCA", "GOOGLE_GENAI_USE_VERTEXAI", "GOOGLE_GEMINI_BASE_URL", "GEMINI_API_KEY", "GEMINI_CLI_USE_COMPUTE_ADC", "BATON_ACP_AUTH_METHOD"} {
		t.Setenv(k, "") // the plugin inherits the test's environment
	}
	p := plugintest.Start(t, plugintest.Build(t, "."))
	ws := t.TempDir()
	f := filepath.Join(agentsData, "gemini", "auth_refused.ndjson")
	_, err := p.OpenSession(context.Background(), sdk.OpenSessionRequest{SessionID: "refused", Cwd: ws, Command: plugintest.PeerCommand(f, ws, "")})
	want := `session/new: the ACP agent "gemini-cli" needs authentication and offers oauth-personal (Log in with Google: Log in with your Google account), ` +
		`gemini-api-key (Gemini API key: Use an API key with Gemini Developer API), vertex-ai (Vertex AI: Use an API key with Vertex AI GenAI API), ` +
		`gateway (AI API Gateway: Use a custom AI API Gateway): give the agent GEMINI_API_KEY (or GOOGLE_GENAI_USE_VERTEXAI=true and Vertex AI's settings) ` +
		"in its environment, or run `gemini` once to log in with Google; or name the method in BATON_ACP_AUTH_METHOD in the provider command's environment"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("open session: %v\nwant it to say:\n%s", err, want)
	}
}

// TestGrokShape: a Grok-shaped agent (another host's fixture of its
// shape): reasoning then the answer; with a model the thread names,
// session/set_model before the prompt; an extension notification
// (`_`-prefixed) ignored; a model the agent does not list refused.
func TestGrokShape(t *testing.T) {
	p := plugintest.Start(t, plugintest.Build(t, "."))
	for _, c := range []struct{ file, model string }{{"simple.ndjson", ""}, {"model_select.ndjson", "grok-composer-2.5-fast"}} {
		t.Run(c.file, func(t *testing.T) {
			ws := t.TempDir()
			s := p.OpenWith(t, sdk.OpenSessionRequest{Cwd: ws, Model: c.model,
				Command: plugintest.PeerCommand(filepath.Join(agentsData, "grok", c.file), ws, "")})
			s.StartTurn(t, "Say hello.")
			evs := s.WaitTurn(t)
			if term := evs[len(evs)-1]; term.Status != sdk.TurnCompleted {
				t.Fatalf("turn ended %s (%+v)", term.Status, term.Failure)
			}
			if got := plugintest.ItemText(evs, "", sdk.ItemAssistantMessage); got != "fixture simple ok" {
				t.Errorf("answer %q", got)
			}
			if got := plugintest.ItemText(evs, "", sdk.ItemReasoning); got != "I should answer exactly." {
				t.Errorf("reasoning %q", got)
			}
			for _, ev := range evs {
				if ev.Kind == sdk.EventDiagnostic {
					t.Errorf("diagnostic %q: %s", ev.Title, ev.Detail)
				}
			}
			plugintest.CheckItemsClosed(t, evs)
			s.Close(t)
		})
	}
	ws := t.TempDir()
	_, err := p.OpenSession(context.Background(), sdk.OpenSessionRequest{SessionID: "bad-model", Cwd: ws, Model: "grok-9",
		Command: plugintest.PeerCommand(filepath.Join(agentsData, "grok", "simple.ndjson"), ws, "")})
	if want := `model "grok-9": the agent offers grok-build, grok-composer-2.5-fast`; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("a model the agent does not list: %v; want %q", err, want)
	}
}

// TestModelByConfigOption: opencode offers its models as a config option
// of category "model"; the thread's model is set with
// session/set_config_option before the first prompt (the peer checks the
// frame), and a model it does not offer is refused, naming those it does.
func TestModelByConfigOption(t *testing.T) {
	p := plugintest.Start(t, plugintest.Build(t, "."))
	ws := t.TempDir()
	s := p.OpenWith(t, sdk.OpenSessionRequest{Cwd: ws, Model: "opencode/big-pickle",
		Command: plugintest.PeerCommand(filepath.Join(agentsData, "opencode", "model_select.ndjson"), ws, "")})
	s.StartTurn(t, "Say hello.")
	evs := s.WaitTurn(t)
	if term := evs[len(evs)-1]; term.Status != sdk.TurnCompleted {
		t.Fatalf("turn ended %s (%+v)", term.Status, term.Failure)
	}
	s.Close(t)
	// The model the agent runs already: nothing to set (the recorded
	// simple transcript has no set_config_option).
	ws = t.TempDir()
	s = p.OpenWith(t, sdk.OpenSessionRequest{Cwd: ws, Model: "baton/scripted",
		Command: plugintest.PeerCommand(filepath.Join(agentsData, "opencode", "simple.ndjson"), ws, "")})
	s.StartTurn(t, "Say hello.")
	s.WaitTurn(t)
	s.Close(t)
	ws = t.TempDir()
	_, err := p.OpenSession(context.Background(), sdk.OpenSessionRequest{SessionID: "bad-model", Cwd: ws, Model: "gpt-nope",
		Command: plugintest.PeerCommand(filepath.Join(agentsData, "opencode", "simple.ndjson"), ws, "")})
	if want := `model "gpt-nope": the agent offers opencode/big-pickle, `; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("a model the agent does not offer: %v; want %q", err, want)
	}
}

// TestQwenDeclinesQuietly: qwen-code asks, after each tool call, for the
// prompts queued mid-turn (craft/drainMidTurnQueue, outside the
// protocol); its flavor declines it as any unknown request is declined, and ignores its prompt suggestions,
// (the peer checks the answer) but without a diagnostic each time.
func TestQwenDeclinesQuietly(t *testing.T) {
	p := plugintest.Start(t, plugintest.Build(t, "."))
	ws := t.TempDir()
	f := filepath.Join(agentsData, "qwen-code", "multi_turn.ndjson")
	s := p.Open(t, f, ws)
	var all []sdk.RuntimeEvent
	for _, m := range plugintest.ReadGroups(t, filepath.Join(testdata, "multi_turn.messages"))[0] {
		s.StartTurn(t, m)
		evs := s.WaitTurn(t)
		if term := evs[len(evs)-1]; term.Status != sdk.TurnCompleted {
			t.Fatalf("turn %q ended %s (%+v)", m, term.Status, term.Failure)
		}
		all = append(all, evs...)
	}
	s.Close(t)
	items := 0
	for _, ev := range all {
		if ev.Kind == sdk.EventDiagnostic {
			t.Errorf("diagnostic %q", ev.Title)
		}
		if ev.Kind == sdk.EventItemStarted && ev.ItemKind != sdk.ItemAssistantMessage && ev.ItemKind != sdk.ItemReasoning {
			items++
		}
	}
	if items == 0 {
		t.Fatal("no tool call in the turns: the transcript no longer asks what this test is about")
	}
}
