// Package acp drives Agent Client Protocol v1 agents (JSON-RPC 2.0 over
// NDJSON stdio) and normalizes what they say into Baton runtime events.
package acp

import (
	"encoding/json"
	"fmt"

	fastjson "github.com/segmentio/encoding/json"
)

// ProtocolVersion is the ACP major version this adapter speaks. ACP
// negotiates it in initialize; v2 is a draft and changes the turn model.
const ProtocolVersion = 1

// ACP wire types: only the fields the adapter reads or writes. Unknown
// fields are ignored so that newer agents keep working.

type clientInfo struct {
	Name    string `json:"name"`
	Title   string `json:"title,omitempty"`
	Version string `json:"version"`
}

type fsCapability struct {
	ReadTextFile  bool `json:"readTextFile"`
	WriteTextFile bool `json:"writeTextFile"`
}

type clientCapabilities struct {
	FS       fsCapability `json:"fs"`
	Terminal bool         `json:"terminal"`
}

type initializeParams struct {
	ProtocolVersion    int                `json:"protocolVersion"`
	ClientCapabilities clientCapabilities `json:"clientCapabilities"`
	ClientInfo         clientInfo         `json:"clientInfo"`
}

type initializeResult struct {
	ProtocolVersion   int `json:"protocolVersion"`
	AgentCapabilities struct {
		LoadSession     bool `json:"loadSession"`
		MCPCapabilities struct {
			HTTP bool `json:"http"`
		} `json:"mcpCapabilities"`
	} `json:"agentCapabilities"`
	AgentInfo   json.RawMessage `json:"agentInfo,omitempty"`
	AuthMethods []authMethod    `json:"authMethods,omitempty"`
}

type authenticateParams struct {
	MethodID string `json:"methodId"`
}

type newSessionParams struct {
	Cwd        string `json:"cwd"`
	McpServers []any  `json:"mcpServers"`
}

type loadSessionParams struct {
	SessionID  string `json:"sessionId"`
	Cwd        string `json:"cwd"`
	McpServers []any  `json:"mcpServers"`
}

// newSessionResult is session/new's answer (and session/load's, where an
// agent answers more than null): the session, and the agent's choices of
// model, if it offers one.
type newSessionResult struct {
	SessionID string `json:"sessionId"`
	// ConfigOptions are the session's options; one of category "model"
	// chooses the model (session/set_config_option).
	ConfigOptions []configOption `json:"configOptions,omitempty"`
	// Models is the unstable model list (session/set_model).
	Models *struct {
		CurrentModelID  string `json:"currentModelId"`
		AvailableModels []struct {
			ModelID string `json:"modelId"`
			Name    string `json:"name,omitempty"`
		} `json:"availableModels"`
	} `json:"models,omitempty"`
}

// configOption is a session config option: a select's values are flat, or
// in groups of their own.
type configOption struct {
	ID           string          `json:"id"`
	Name         string          `json:"name"`
	Category     string          `json:"category,omitempty"`
	Type         string          `json:"type"`
	CurrentValue json.RawMessage `json:"currentValue"`
	Options      []struct {
		Value   string `json:"value"`
		Options []struct {
			Value string `json:"value"`
		} `json:"options,omitempty"`
	} `json:"options,omitempty"`
}

// values are a select option's values, groups flattened.
func (o configOption) values() []string {
	var vs []string
	for _, v := range o.Options {
		if v.Value != "" {
			vs = append(vs, v.Value)
		}
		for _, g := range v.Options {
			vs = append(vs, g.Value)
		}
	}
	return vs
}

type setConfigOptionParams struct {
	SessionID string `json:"sessionId"`
	ConfigID  string `json:"configId"`
	Value     string `json:"value"`
}

type setModelParams struct {
	SessionID string `json:"sessionId"`
	ModelID   string `json:"modelId"`
}

type contentBlock struct {
	Type string `json:"type"`
	Text string `json:"text,omitempty"`
}

type promptParams struct {
	SessionID string         `json:"sessionId"`
	Prompt    []contentBlock `json:"prompt"`
}

type promptUsage struct {
	InputTokens       int64 `json:"inputTokens"`
	OutputTokens      int64 `json:"outputTokens"`
	TotalTokens       int64 `json:"totalTokens"`
	ThoughtTokens     int64 `json:"thoughtTokens"`
	CachedReadTokens  int64 `json:"cachedReadTokens"`
	CachedWriteTokens int64 `json:"cachedWriteTokens"`
}

type promptResult struct {
	StopReason string       `json:"stopReason"`
	Usage      *promptUsage `json:"usage,omitempty"`
}

type cancelParams struct {
	SessionID string `json:"sessionId"`
}

type permissionOption struct {
	OptionID string `json:"optionId"`
	Name     string `json:"name"`
	Kind     string `json:"kind"`
}

type permissionParams struct {
	SessionID string             `json:"sessionId"`
	ToolCall  json.RawMessage    `json:"toolCall"`
	Options   []permissionOption `json:"options"`
}

type permissionOutcome struct {
	Outcome  string `json:"outcome"`
	OptionID string `json:"optionId,omitempty"`
}

type permissionResult struct {
	Outcome permissionOutcome `json:"outcome"`
}

type readTextFileParams struct {
	SessionID string `json:"sessionId"`
	Path      string `json:"path"`
	Line      *int   `json:"line,omitempty"`
	Limit     *int   `json:"limit,omitempty"`
}

type writeTextFileParams struct {
	SessionID string `json:"sessionId"`
	Path      string `json:"path"`
	Content   string `json:"content"`
}

// sessionUpdate is the params of a session/update notification.
type sessionUpdate struct {
	SessionID string          `json:"sessionId"`
	Update    json.RawMessage `json:"update"`
}

// update is the union of session/update variants, decoded by its
// sessionUpdate discriminator.
type update struct {
	Kind       string          `json:"sessionUpdate"`
	Content    json.RawMessage `json:"content,omitempty"`
	MessageID  string          `json:"messageId,omitempty"`
	ToolCallID string          `json:"toolCallId,omitempty"`
	Title      *string         `json:"title,omitempty"`
	ToolKind   *string         `json:"kind,omitempty"`
	Status     *string         `json:"status,omitempty"`
	RawInput   json.RawMessage `json:"rawInput,omitempty"`
	RawOutput  json.RawMessage `json:"rawOutput,omitempty"`
	Locations  json.RawMessage `json:"locations,omitempty"`
	Entries    json.RawMessage `json:"entries,omitempty"`
	Used       *int64          `json:"used,omitempty"`
	Size       *int64          `json:"size,omitempty"`
	Cost       *cost           `json:"cost,omitempty"`
	// tool is the tool's own name, from _meta (not part of a detail).
	tool string
}

// cost is a usage_update's cost: the session's so far, in a currency.
type cost struct {
	Amount   float64 `json:"amount"`
	Currency string  `json:"currency"`
}

// updateMeta is what Baton reads of an update's _meta: claude-code-acp
// names the model's tool there ("mcp__SERVER__TOOL" for an MCP tool).
type updateMeta struct {
	Meta struct {
		ClaudeCode struct {
			ToolName string `json:"toolName"`
		} `json:"claudeCode"`
	} `json:"_meta"`
}

// json is the update as a detail: the fields Baton knows, re-encoded (only
// for the updates that carry it, not for every chunk of a message).
func (u update) json() json.RawMessage {
	b, _ := json.Marshal(u) // an update always encodes
	return b
}

// decodeUpdate decodes the params of a session/update notification: in one
// pass of a fast decoder (every chunk of an answer comes this way), or, for
// params that pass refuses, as decodeUpdateSlowly says what is wrong.
func decodeUpdate(params []byte) (string, update, error) {
	var p struct {
		SessionID string      `json:"sessionId"`
		Update    *fastUpdate `json:"update"`
	}
	if fastjson.Unmarshal(params, &p) == nil && p.SessionID != "" && p.Update != nil && p.Update.Kind != "" {
		u := p.Update.update
		if u.Kind == "tool_call" || u.Kind == "tool_call_update" {
			u.tool = string(p.Update.Meta)
		}
		return p.SessionID, u, nil
	}
	return decodeUpdateSlowly(params)
}

// fastUpdate is an update with its _meta's tool name, decoded with it.
type fastUpdate struct {
	update
	Meta metaTool `json:"_meta"`
}

// metaTool is the tool name an update's _meta gives (updateMeta); a _meta
// of another shape names none.
type metaTool string

func (m *metaTool) UnmarshalJSON(b []byte) error {
	var meta struct {
		ClaudeCode struct {
			ToolName string `json:"toolName"`
		} `json:"claudeCode"`
	}
	if fastjson.Unmarshal(b, &meta) == nil {
		*m = metaTool(meta.ClaudeCode.ToolName)
	}
	return nil
}

// decodeUpdateSlowly is decodeUpdate with encoding/json, a step at a time:
// its errors say what is wrong with the frame.
func decodeUpdateSlowly(params []byte) (string, update, error) {
	var su sessionUpdate
	if err := json.Unmarshal(params, &su); err != nil {
		return "", update{}, fmt.Errorf("session/update params: %w", err)
	}
	if su.SessionID == "" {
		return "", update{}, fmt.Errorf("session/update has no sessionId")
	}
	if len(su.Update) == 0 || string(su.Update) == "null" {
		return su.SessionID, update{}, fmt.Errorf("session/update has no update")
	}
	var u update
	if err := json.Unmarshal(su.Update, &u); err != nil {
		return su.SessionID, update{}, fmt.Errorf("session/update update: %w", err)
	}
	if u.Kind == "" {
		return su.SessionID, update{}, fmt.Errorf("session/update update has no sessionUpdate kind")
	}
	if u.Kind == "tool_call" || u.Kind == "tool_call_update" {
		var m updateMeta
		if json.Unmarshal(su.Update, &m) == nil { // a _meta of another shape names no tool
			u.tool = m.Meta.ClaudeCode.ToolName
		}
	}
	return su.SessionID, u, nil
}

// textOf returns the text of a content block, or "" for other kinds.
func textOf(raw json.RawMessage) string {
	var b contentBlock
	if fastjson.Unmarshal(raw, &b) != nil || b.Type != "text" {
		return ""
	}
	return b.Text
}
