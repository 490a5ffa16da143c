// Package cursor drives the Cursor agent CLI (`cursor-agent`, newer name
// `agent`) in print mode: one process per turn, started with the prompt as
// a positional argument and stdin closed, whose stdout is NDJSON events
// (`--output-format stream-json`). The chat continues from turn to turn with
// `--resume CHAT_ID`, the chat id being the session_id of system/init.
package cursor

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// WireProtocol is what Describe says the plugin speaks: cursor-agent's
// print mode with stream-json NDJSON on stdout, one process per turn.
const WireProtocol = "cursor-agent-print/stream-json"

// event is one stdout line of cursor-agent. Which fields are set depends on
// Type (and Subtype); unknown fields are ignored, unknown types reported.
type event struct {
	Type    string `json:"type"`
	Subtype string `json:"subtype"`
	// SessionID is the chat id, on every event.
	SessionID string `json:"session_id"`

	// system/init
	Model          string `json:"model"`
	Cwd            string `json:"cwd"`
	PermissionMode string `json:"permissionMode"`
	APIKeySource   string `json:"apiKeySource"`

	// user, assistant
	Message *message `json:"message"`
	// TimestampMs is set on streamed pieces (--stream-partial-output
	// deltas, and messages sent before tool calls); the whole text sent
	// again at the end has none.
	TimestampMs *int64 `json:"timestamp_ms"`
	ModelCallID string `json:"model_call_id"`

	// thinking/delta
	Text string `json:"text"`

	// tool_call
	CallID   string          `json:"call_id"`
	ToolCall json.RawMessage `json:"tool_call"`

	// result
	IsError    bool            `json:"is_error"`
	Result     json.RawMessage `json:"result"`
	DurationMs int64           `json:"duration_ms"`
	RequestID  string          `json:"request_id"`
	Usage      json.RawMessage `json:"usage"`
	Error      json.RawMessage `json:"error"`
}

type message struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// text joins the message's text parts. Content is a list of parts
// ({"type":"text","text":…}); a plain string is taken as it is.
func (m *message) text() string {
	if m == nil || len(m.Content) == 0 {
		return ""
	}
	var s string
	if json.Unmarshal(m.Content, &s) == nil {
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(m.Content, &parts) != nil {
		return ""
	}
	var b strings.Builder
	for _, p := range parts {
		if p.Type == "text" || p.Type == "" {
			b.WriteString(p.Text)
		}
	}
	return b.String()
}

// resultText is a result event's text: a string, or an object's message.
func (e *event) resultText() string {
	for _, raw := range []json.RawMessage{e.Result, e.Error} {
		if len(raw) == 0 {
			continue
		}
		var s string
		if json.Unmarshal(raw, &s) == nil && s != "" {
			return s
		}
		var o struct {
			Message string `json:"message"`
			Error   string `json:"error"`
		}
		if json.Unmarshal(raw, &o) == nil && (o.Message != "" || o.Error != "") {
			return cmp.Or(o.Message, o.Error)
		}
	}
	return ""
}

// DecodeEvent decodes one stdout line, with an error that says what is
// wrong with it. Every event needs a type.
func DecodeEvent(line []byte) (*event, error) {
	line = bytes.TrimSpace(line)
	var e event
	if err := json.Unmarshal(line, &e); err != nil {
		// Unmarshal checks the whole line is JSON before it decodes any
		// of it: a syntax error is a line that is not JSON.
		if se := (*json.SyntaxError)(nil); errors.As(err, &se) {
			return nil, fmt.Errorf("not JSON: %.120q", line)
		}
		return nil, fmt.Errorf("not a cursor-agent event (%v): %.120q", err, line)
	}
	if e.Type == "" {
		return nil, fmt.Errorf("an event without a type: %.120q", line)
	}
	return &e, nil
}

// toolCall is the tool_call member of a tool_call event: one key naming
// the variant (shellToolCall, editToolCall, …, function, task) whose value
// holds args and, once completed, result.
type toolCall struct {
	Variant string
	Args    json.RawMessage
	Result  json.RawMessage
	// Name is a function call's name.
	Name string
	// args is Args decoded, once for the item's title and its detail.
	args args
}

var errNoVariant = errors.New("tool_call names no tool")

// decodeToolCall reads the variant of a tool_call member. Of several keys
// (none seen so far) the first in sorted order is taken.
func decodeToolCall(raw json.RawMessage) (toolCall, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return toolCall{}, fmt.Errorf("tool_call is not an object: %w", err)
	}
	var variant string
	for k := range m {
		if variant == "" || k < variant {
			variant = k
		}
	}
	if variant == "" {
		return toolCall{}, errNoVariant
	}
	tc := toolCall{Variant: variant}
	var body struct {
		Args   json.RawMessage `json:"args"`
		Result json.RawMessage `json:"result"`
		// function: {name, arguments}
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}
	if err := json.Unmarshal(m[variant], &body); err != nil {
		return toolCall{}, fmt.Errorf("tool_call %s is not an object: %w", variant, err)
	}
	tc.Args, tc.Result, tc.Name = body.Args, body.Result, body.Name
	if tc.Args == nil && body.Arguments != nil {
		tc.Args = body.Arguments
	}
	tc.args = decodeArgs(tc.Args)
	return tc, nil
}

// toolResult is a completed tool call's outcome: success, error or
// rejected, each with its own body.
type toolResult struct {
	Outcome string // "success", "error", "rejected", or "" when there is none
	Body    json.RawMessage
	// Shell is Body decoded as a shell result, as far as it decodes (its
	// message fields also say why another call failed); whole says that
	// all of Body decoded.
	Shell shellResult
	whole bool
}

func decodeResult(raw json.RawMessage) toolResult {
	if len(raw) == 0 || string(raw) == "null" {
		return toolResult{}
	}
	res := toolResult{Outcome: "success", Body: raw}
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) == nil {
		for _, k := range []string{"success", "error", "rejected", "failure", "cancelled", "timeout"} {
			if b, ok := m[k]; ok {
				switch k {
				case "failure", "timeout":
					k = "error"
				case "cancelled":
					k = "rejected"
				}
				res.Outcome, res.Body = k, b
				break
			}
		}
	}
	res.whole = json.Unmarshal(res.Body, &res.Shell) == nil
	return res
}

// args is the union of the argument fields the variants use.
type args struct {
	Command     string          `json:"command"`
	Path        string          `json:"path"`
	TargetFile  string          `json:"targetFile"`
	Pattern     string          `json:"pattern"`
	GlobPattern string          `json:"globPattern"`
	Query       string          `json:"query"`
	Description string          `json:"description"`
	Prompt      string          `json:"prompt"`
	Name        string          `json:"name"`
	ToolName    string          `json:"toolName"`
	ProviderID  string          `json:"providerIdentifier"`
	Todos       json.RawMessage `json:"todos"`
}

func decodeArgs(raw json.RawMessage) args {
	var a args
	if len(raw) == 0 {
		return a
	}
	if json.Unmarshal(raw, &a) != nil {
		// function arguments may be a JSON string holding an object.
		var s string
		if json.Unmarshal(raw, &s) == nil {
			_ = json.Unmarshal([]byte(s), &a)
		}
	}
	return a
}

// shellResult is the body of a shell call's success (or error).
type shellResult struct {
	ExitCode      *int   `json:"exitCode"`
	Stdout        string `json:"stdout"`
	Stderr        string `json:"stderr"`
	ExecutionTime *int64 `json:"executionTime"`
	Message       string `json:"message"`
	Error         string `json:"error"`
	ErrorMessage  string `json:"errorMessage"`
	Reason        string `json:"reason"`
}

// usage is result.usage. The names cursor uses are not documented; both
// camelCase and snake_case are read.
type usage struct {
	InputTokens       *int64 `json:"inputTokens"`
	OutputTokens      *int64 `json:"outputTokens"`
	CacheReadTokens   *int64 `json:"cacheReadTokens"`
	CacheWriteTokens  *int64 `json:"cacheWriteTokens"`
	ReasoningTokens   *int64 `json:"reasoningTokens"`
	TotalTokens       *int64 `json:"totalTokens"`
	InputTokensS      *int64 `json:"input_tokens"`
	OutputTokensS     *int64 `json:"output_tokens"`
	CacheReadTokensS  *int64 `json:"cache_read_tokens"`
	CacheReadInputS   *int64 `json:"cache_read_input_tokens"`
	ReasoningTokensS  *int64 `json:"reasoning_tokens"`
	TotalTokensS      *int64 `json:"total_tokens"`
	CacheWriteTokensS *int64 `json:"cache_write_tokens"`
}
