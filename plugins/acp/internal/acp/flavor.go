package acp

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// A flavor is what one ACP agent needs beyond the protocol: which of its
// authentication methods to take when it answers that a session needs
// one, and what a person does when none can be taken for them. A flavor
// is chosen by the name in the agent's initialize answer
// (agentInfo.name); an agent with no flavor gets the protocol alone, and
// works.
//
// Extensions (`_`-prefixed methods and notifications) are the protocol's
// way for an agent to say more: a notification Baton does not read is
// ignored and a request answered "method not found", as ACP asks of a
// client (session.handle). An agent's own methods without the prefix
// that Baton does not read are a flavor's Ignores (qwen-code's); any
// other unknown method is answered so too, with a diagnostic. None of the
// agents measured sends an extension that means something to Baton (see
// .notes/acp-agents.md); claude-code-acp's tool names in _meta are read
// for every agent (decodeUpdate).
//
// Models need no flavor: every agent that offers a choice says so in its
// session/new answer, as a config option of category "model"
// (session/set_config_option, the protocol's way) or as "models"
// (session/set_model, the unstable method claude-code-acp, gemini-cli and
// Grok-shaped agents answer).
type flavor struct {
	// Name names the flavor in logs and errors.
	Name string
	// Agents are the agentInfo names it is for.
	Agents []string
	// Auth picks the method to authenticate with, among those the agent
	// offers, from the agent's environment ("": none it can take without
	// a person); Login says what a person does instead.
	Auth  func(offered []authMethod, env func(string) string) string
	Login string
	// Ignores are the agent's own methods (outside the protocol, without
	// its `_` prefix) that Baton does not read: a notification is
	// ignored, a request answered "method not found" as any unknown one
	// is, without a diagnostic each time.
	Ignores []string
}

// flavors is every flavor Baton knows, one row an agent family.
var flavors = []flavor{
	{
		// @zed-industries/claude-code-acp: its one method is a login in a
		// terminal (`claude /login`), which a host cannot do for the user.
		Name:   "claude-code-acp",
		Agents: []string{"@zed-industries/claude-code-acp", "@zed-industries/claude-agent-acp", "@agentclientprotocol/claude-agent-acp"},
		Login:  "run `claude /login` in a terminal, or give the agent ANTHROPIC_API_KEY in its environment",
	},
	{
		// @zed-industries/codex-acp: env_var methods (CODEX_API_KEY,
		// OPENAI_API_KEY), taken when the variable is set; else its
		// ChatGPT login, a person's.
		Name:   "codex-acp",
		Agents: []string{"codex-acp"},
		Login:  "run `codex login` in a terminal, or give the agent CODEX_API_KEY or OPENAI_API_KEY in its environment",
	},
	{
		// opencode acp: its one method is `opencode auth login` in a
		// terminal; a provider's key in opencode's own configuration
		// needs none.
		Name:   "opencode",
		Agents: []string{"OpenCode"},
		Login:  "run `opencode auth login` in a terminal, or configure a provider's key in opencode's configuration",
	},
	{
		// qwen-code --acp: it authenticates from its environment
		// (ANTHROPIC_* or OPENAI_*) without authenticate. After each tool
		// call it asks the client for prompts queued mid-turn
		// (craft/drainMidTurnQueue): Baton queues a message to the next
		// run instead, so it declines, and qwen goes on. It suggests the
		// user's next prompt (qwen/notify/session/prompt-suggestion),
		// which Baton does not show.
		Name:    "qwen-code",
		Agents:  []string{"qwen-code"},
		Login:   "run `qwen` once in a terminal to choose its authentication, or give it OPENAI_API_KEY or ANTHROPIC_API_KEY",
		Ignores: []string{"craft/drainMidTurnQueue", "qwen/notify/session/prompt-suggestion"},
	},
	{
		// gemini-cli --experimental-acp: it asks for a method when no
		// auth type is set in its settings; the environment picks one as
		// gemini-cli itself does (getAuthTypeFromEnv), in its order.
		Name:   "gemini",
		Agents: []string{"gemini-cli"},
		Auth: envAuth([]envMethod{
			{"GOOGLE_GENAI_USE_GCA", "true", "oauth-personal"},
			{"GOOGLE_GENAI_USE_VERTEXAI", "true", "vertex-ai"},
			{"GOOGLE_GEMINI_BASE_URL", "", "gateway"},
			{"GEMINI_API_KEY", "", "gemini-api-key"},
			{"GEMINI_CLI_USE_COMPUTE_ADC", "true", "compute-default-credentials"},
		}),
		Login: "give the agent GEMINI_API_KEY (or GOOGLE_GENAI_USE_VERTEXAI=true and Vertex AI's settings) in its environment, or run `gemini` once to log in with Google",
	},
	{
		// Grok-shaped agents (as other hosts' fixtures record them): one
		// method, which the agent handles itself; models in session/new.
		Name:   "grok",
		Agents: []string{"grok", "grok-cli", "grok-replay"},
		Auth:   onlyAgentMethod,
	},
}

// flavorOf is the flavor of the agent that answered initialize with info
// (nil: none).
func flavorOf(info json.RawMessage) *flavor {
	var a struct {
		Name string `json:"name"`
	}
	if json.Unmarshal(info, &a) != nil || a.Name == "" {
		return nil
	}
	for i := range flavors {
		if slices.Contains(flavors[i].Agents, a.Name) {
			return &flavors[i]
		}
	}
	return nil
}

// authMethod is a method an agent offers in its initialize answer.
type authMethod struct {
	ID          string `json:"id"`
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	// Type is "agent" (the default: the agent runs it on authenticate),
	// "terminal" (a person runs the agent with its args; never passed to
	// authenticate) or "env_var" (ACP v1's unstable, since removed,
	// method: the agent reads the variables Vars names from its
	// environment; taken like "agent").
	Type string `json:"type,omitempty"`
	Vars []struct {
		Name string `json:"name"`
	} `json:"vars,omitempty"`
}

// setIn says whether every variable an env_var method names is set in
// env (false for any other method).
func (m authMethod) setIn(env func(string) string) bool {
	if m.Type != "env_var" || len(m.Vars) == 0 {
		return false
	}
	for _, v := range m.Vars {
		if env(v.Name) == "" {
			return false
		}
	}
	return true
}

// AuthMethodEnv is the variable, in the provider command's environment,
// that names the authentication method to take when the agent asks for
// one (ACP's authenticate): for an agent no flavor knows, or to override a
// flavor's choice.
const AuthMethodEnv = "BATON_ACP_AUTH_METHOD"

// chooseAuth is the method to authenticate with, or an error that says
// what the agent offers and what a person does instead.
func chooseAuth(agent string, f *flavor, offered []authMethod, env func(string) string) (string, error) {
	if id := env(AuthMethodEnv); id != "" {
		for _, m := range offered {
			if m.ID == id && m.Type != "terminal" {
				return id, nil
			}
		}
		return "", fmt.Errorf("%s=%s: %s offers no such method it runs itself (it offers %s)", AuthMethodEnv, id, agent, describeMethods(offered))
	}
	if f != nil && f.Auth != nil {
		if id := f.Auth(offered, env); id != "" {
			return id, nil
		}
	}
	// A method the agent completes from variables it reads, which the
	// environment has (codex-acp's CODEX_API_KEY, OPENAI_API_KEY).
	for _, m := range offered {
		if m.setIn(env) {
			return m.ID, nil
		}
	}
	msg := fmt.Sprintf("%s needs authentication and offers %s", agent, describeMethods(offered))
	if f != nil && f.Login != "" {
		msg += ": " + f.Login
	}
	return "", fmt.Errorf("%s; or name the method in %s in the provider command's environment", msg, AuthMethodEnv)
}

// describeMethods lists methods for an error: `id` (name: description).
func describeMethods(ms []authMethod) string {
	if len(ms) == 0 {
		return "no method"
	}
	parts := make([]string, len(ms))
	for i, m := range ms {
		p := m.ID
		if m.Name != "" || m.Description != "" {
			p += " (" + strings.TrimSuffix(strings.TrimPrefix(m.Name+": "+m.Description, ": "), ": ") + ")"
		}
		if m.Type == "terminal" {
			p += " [in a terminal]"
		}
		parts[i] = p
	}
	return strings.Join(parts, ", ")
}

// envMethod takes method when the environment's key is set (to value, or
// to anything when value is "").
type envMethod struct{ key, value, method string }

// envAuth picks the first method, in order, whose variable is set and
// which the agent offers.
func envAuth(order []envMethod) func([]authMethod, func(string) string) string {
	return func(offered []authMethod, env func(string) string) string {
		for _, o := range order {
			v := env(o.key)
			if v == "" || o.value != "" && v != o.value {
				continue
			}
			if slices.ContainsFunc(offered, func(m authMethod) bool { return m.ID == o.method && m.Type != "terminal" }) {
				return o.method
			}
		}
		return ""
	}
}

// onlyAgentMethod takes the agent's method when it offers exactly one it
// runs itself.
func onlyAgentMethod(offered []authMethod, _ func(string) string) string {
	var ids []string
	for _, m := range offered {
		if m.Type != "terminal" {
			ids = append(ids, m.ID)
		}
	}
	if len(ids) == 1 {
		return ids[0]
	}
	return ""
}
