package acp

import (
	"encoding/json"
	"strings"
	"testing"
)

// chooseAuth's rules, whole: the environment's override (a method the agent
// runs itself, else refused), the flavor's choice, else a refusal that
// lists the methods and what a person does.
func TestChooseAuth(t *testing.T) {
	gemini := flavorOf(json.RawMessage(`{"name":"gemini-cli"}`))
	grok := flavorOf(json.RawMessage(`{"name":"grok-replay"}`))
	if gemini == nil || gemini.Name != "gemini" || grok == nil || grok.Name != "grok" || flavorOf(json.RawMessage(`{"name":"someone-else"}`)) != nil ||
		flavorOf(json.RawMessage(`not json`)) != nil {
		t.Fatalf("flavorOf: gemini %v, grok %v", gemini, grok)
	}
	geminiMethods := []authMethod{{ID: "oauth-personal", Name: "Log in with Google"}, {ID: "gemini-api-key", Name: "Gemini API key"},
		{ID: "vertex-ai"}, {ID: "gateway"}}
	var codexMethods []authMethod // as codex-acp 0.16.0 answers initialize
	if err := json.Unmarshal([]byte(`[{"id":"chatgpt","name":"Login with ChatGPT"},
		{"id":"codex-api-key","name":"Use CODEX_API_KEY","type":"env_var","vars":[{"name":"CODEX_API_KEY"}]},
		{"id":"openai-api-key","name":"Use OPENAI_API_KEY","type":"env_var","vars":[{"name":"OPENAI_API_KEY"}]}]`), &codexMethods); err != nil {
		t.Fatal(err)
	}
	terminal := []authMethod{{ID: "login", Name: "Log in", Description: "in a terminal", Type: "terminal"}, {ID: "agent", Name: "Agent"}}
	env := func(kv ...string) func(string) string {
		return func(k string) string {
			for i := 0; i+1 < len(kv); i += 2 {
				if kv[i] == k {
					return kv[i+1]
				}
			}
			return ""
		}
	}
	for _, c := range []struct {
		name    string
		f       *flavor
		offered []authMethod
		env     func(string) string
		want    string
		err     string
	}{
		{"gemini, api key", gemini, geminiMethods, env("GEMINI_API_KEY", "k"), "gemini-api-key", ""},
		{"gemini, vertex first", gemini, geminiMethods, env("GEMINI_API_KEY", "k", "GOOGLE_GENAI_USE_VERTEXAI", "true"), "vertex-ai", ""},
		{"gemini, vertex not true", gemini, geminiMethods, env("GOOGLE_GENAI_USE_VERTEXAI", "false", "GOOGLE_GEMINI_BASE_URL", "http://127.0.0.1:9"), "gateway", ""},
		{"gemini, a method it does not offer", gemini, geminiMethods[:1], env("GEMINI_API_KEY", "k"), "",
			`the ACP agent "g" needs authentication and offers oauth-personal (Log in with Google): give the agent GEMINI_API_KEY`},
		{"override", nil, terminal, env(AuthMethodEnv, "agent"), "agent", ""},
		{"override of a terminal method", nil, terminal, env(AuthMethodEnv, "login"), "",
			`BATON_ACP_AUTH_METHOD=login: the ACP agent "g" offers no such method it runs itself (it offers login (Log in: in a terminal) [in a terminal], agent (Agent))`},
		{"grok's one method", grok, terminal, env(), "agent", ""},
		{"grok with two", grok, append(terminal, authMethod{ID: "other"}), env(), "",
			`the ACP agent "g" needs authentication and offers login (Log in: in a terminal) [in a terminal], agent (Agent), other; or name the method in BATON_ACP_AUTH_METHOD`},
		{"no flavor, no methods", nil, nil, env(), "", `the ACP agent "g" needs authentication and offers no method; or name`},
		{"env_var method with its variable", flavorOf(json.RawMessage(`{"name":"codex-acp"}`)), codexMethods, env("OPENAI_API_KEY", "k"), "openai-api-key", ""},
		{"env_var method without", flavorOf(json.RawMessage(`{"name":"codex-acp"}`)), codexMethods, env(), "",
			"offers chatgpt (Login with ChatGPT), codex-api-key (Use CODEX_API_KEY), openai-api-key (Use OPENAI_API_KEY): run `codex login` in a terminal"},
	} {
		got, err := chooseAuth(`the ACP agent "g"`, c.f, c.offered, c.env)
		if got != c.want || (err == nil) != (c.err == "") || err != nil && !strings.Contains(err.Error(), c.err) {
			t.Errorf("%s: %q, %v; want %q, %q", c.name, got, err, c.want, c.err)
		}
	}
}

// A select's values, flat and in groups, as the protocol allows both.
func TestConfigOptionValues(t *testing.T) {
	var o configOption
	if err := json.Unmarshal([]byte(`{"id":"model","name":"Model","category":"model","type":"select","currentValue":"a",
		"options":[{"value":"a","name":"A"},{"group":"more","name":"More","options":[{"value":"b","name":"B"},{"value":"c","name":"C"}]}]}`), &o); err != nil {
		t.Fatal(err)
	}
	if got := o.values(); len(got) != 3 || got[0] != "a" || got[1] != "b" || got[2] != "c" {
		t.Errorf("values %q, want [a b c]", got)
	}
}
