package claude

import (
	"encoding/json"
	"errors"
	"fmt"
)

// WireProtocol names what the plugin speaks to the provider.
const WireProtocol = "claude-code/stream-json"

// Frame types on stdout (CLI → host) and stdin (host → CLI).
const (
	typeSystem          = "system"
	typeAssistant       = "assistant"
	typeUser            = "user"
	typeResult          = "result"
	typeRateLimit       = "rate_limit_event"
	typeControlRequest  = "control_request"
	typeControlResponse = "control_response"
	typeControlCancel   = "control_cancel_request"
	typeCommandLife     = "command_lifecycle"
	typeStreamEvent     = "stream_event"
	typeKeepAlive       = "keep_alive"
)

// frame is one line from the CLI: the envelope every type shares, the
// rest kept raw for the type's own decoding.
type frame struct {
	Type            string          `json:"type"`
	Subtype         string          `json:"subtype,omitempty"`
	SessionID       string          `json:"session_id,omitempty"`
	UUID            string          `json:"uuid,omitempty"`
	ParentToolUseID *string         `json:"parent_tool_use_id,omitempty"`
	IsReplay        bool            `json:"isReplay,omitempty"`
	Message         json.RawMessage `json:"message,omitempty"`
	ToolUseResult   json.RawMessage `json:"tool_use_result,omitempty"`

	// control_request / control_cancel_request
	RequestID string          `json:"request_id,omitempty"`
	Request   json.RawMessage `json:"request,omitempty"`
	// control_response
	Response *controlResponseBody `json:"response,omitempty"`

	// rate_limit_event
	RateLimitInfo *rateLimitInfo `json:"rate_limit_info,omitempty"`

	// command_lifecycle
	CommandUUID string `json:"command_uuid,omitempty"`
	State       string `json:"state,omitempty"`

	// system init
	Capabilities []string `json:"capabilities,omitempty"`

	// assistant: the message the CLI makes up for an API error it gave up
	// on (is_api_error_message) names the error's class ("rate_limit",
	// "billing_error", "server_error", ...).
	Error             string `json:"error,omitempty"`
	IsAPIErrorMessage bool   `json:"is_api_error_message,omitempty"`

	raw json.RawMessage
}

// decodeFrame decodes one line. A line that is not a JSON object with a
// type is an error; what a type's own fields hold is checked where they
// are used.
func decodeFrame(line []byte) (*frame, error) {
	var f frame
	if err := json.Unmarshal(line, &f); err != nil {
		return nil, fmt.Errorf("not a claude frame: %w", err)
	}
	if f.Type == "" {
		return nil, errors.New("not a claude frame: no type")
	}
	f.raw = line
	return &f, nil
}

// parent is the Task tool use a frame of a subagent belongs to ("" at the
// root).
func (f *frame) parent() string {
	if f.ParentToolUseID == nil {
		return ""
	}
	return *f.ParentToolUseID
}

// message is an assistant or user message.
type message struct {
	ID      string          `json:"id,omitempty"`
	Role    string          `json:"role"`
	Model   string          `json:"model,omitempty"`
	Content json.RawMessage `json:"content"`
}

// block is one content block.
type block struct {
	Type string `json:"type"`
	// text
	Text string `json:"text,omitempty"`
	// thinking
	Thinking string `json:"thinking,omitempty"`
	// tool_use
	ID    string          `json:"id,omitempty"`
	Name  string          `json:"name,omitempty"`
	Input json.RawMessage `json:"input,omitempty"`
	// tool_result
	ToolUseID string          `json:"tool_use_id,omitempty"`
	Content   json.RawMessage `json:"content,omitempty"`
	IsError   bool            `json:"is_error,omitempty"`
}

// blocks decodes a message's content: a string is one text block.
func (m *message) blocks() ([]block, error) {
	if len(m.Content) == 0 || string(m.Content) == "null" {
		return nil, nil
	}
	var s string
	if json.Unmarshal(m.Content, &s) == nil {
		return []block{{Type: "text", Text: s}}, nil
	}
	var bs []block
	if err := json.Unmarshal(m.Content, &bs); err != nil {
		return nil, fmt.Errorf("message content: %w", err)
	}
	return bs, nil
}

// toolInput is what the tools the plugin names items by take.
type toolInput struct {
	Command      string `json:"command,omitempty"`
	Description  string `json:"description,omitempty"`
	FilePath     string `json:"file_path,omitempty"`
	NotebookPath string `json:"notebook_path,omitempty"`
	Prompt       string `json:"prompt,omitempty"`
	SubagentType string `json:"subagent_type,omitempty"`
}

// systemFrame holds the fields of the system subtypes the plugin reads.
type systemFrame struct {
	Subtype           string `json:"subtype"`
	SessionID         string `json:"session_id"`
	Model             string `json:"model,omitempty"`
	Cwd               string `json:"cwd,omitempty"`
	PermissionMode    string `json:"permissionMode,omitempty"`
	ClaudeCodeVersion string `json:"claude_code_version,omitempty"`
	// task_*
	TaskID         string          `json:"task_id,omitempty"`
	TaskType       string          `json:"task_type,omitempty"` // local_agent (a subagent), local_bash (a background command)
	ToolUseID      string          `json:"tool_use_id,omitempty"`
	Description    string          `json:"description,omitempty"`
	Prompt         string          `json:"prompt,omitempty"`
	IsBackgrounded bool            `json:"is_backgrounded,omitempty"`
	Status         string          `json:"status,omitempty"`
	Summary        string          `json:"summary,omitempty"`
	Patch          json.RawMessage `json:"patch,omitempty"`
}

// resultFrame is the terminal frame of a CLI turn.
type resultFrame struct {
	Subtype        string   `json:"subtype"`
	IsError        bool     `json:"is_error"`
	Result         string   `json:"result,omitempty"`
	Errors         []string `json:"errors,omitempty"`
	TerminalReason string   `json:"terminal_reason,omitempty"`
	StopReason     *string  `json:"stop_reason,omitempty"`
	APIErrorStatus *int     `json:"api_error_status,omitempty"`
	// APIErrorType is the API error body's type (rate_limit_error,
	// overloaded_error, invalid_request_error, billing_error, ...).
	APIErrorType string `json:"api_error_type,omitempty"`
	// APIError is the CLI's own name for the error, when it has one
	// ("usage_limit_reached" for a rejected five-hour or weekly limit).
	APIError     string       `json:"api_error,omitempty"`
	SessionID    string       `json:"session_id"`
	NumTurns     int          `json:"num_turns,omitempty"`
	TotalCostUSD float64      `json:"total_cost_usd,omitempty"`
	Usage        *resultUsage `json:"usage,omitempty"`
	// ModelUsage is the conversation's usage so far by model, subagents'
	// included, with its cost (the CLI's running totals, as
	// TotalCostUSD is).
	ModelUsage map[string]modelUsage `json:"modelUsage,omitempty"`
}

// modelUsage is one model's entry of a result's modelUsage.
type modelUsage struct {
	InputTokens              int64   `json:"inputTokens"`
	OutputTokens             int64   `json:"outputTokens"`
	CacheReadInputTokens     int64   `json:"cacheReadInputTokens"`
	CacheCreationInputTokens int64   `json:"cacheCreationInputTokens"`
	ThinkingTokens           int64   `json:"thinkingTokens"`
	CostUSD                  float64 `json:"costUSD"`
}

type resultUsage struct {
	InputTokens              int64 `json:"input_tokens"`
	OutputTokens             int64 `json:"output_tokens"`
	CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
	CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
	OutputTokensDetails      *struct {
		ThinkingTokens int64 `json:"thinking_tokens"`
	} `json:"output_tokens_details,omitempty"`
}

// rateLimitInfo is a rate_limit_event's body.
type rateLimitInfo struct {
	Status        string   `json:"status"`
	ResetsAt      *int64   `json:"resetsAt,omitempty"`
	RateLimitType string   `json:"rateLimitType,omitempty"`
	Utilization   *float64 `json:"utilization,omitempty"`
	// UnifiedWindows, on a rejected event of a plan, has each window's
	// utilization (the event itself has none then).
	UnifiedWindows map[string]struct {
		Utilization *float64 `json:"utilization,omitempty"`
	} `json:"unifiedWindows,omitempty"`
}

// controlRequestBody is the request of a control_request, either way.
type controlRequestBody struct {
	Subtype        string          `json:"subtype"`
	ToolName       string          `json:"tool_name,omitempty"`
	DisplayName    string          `json:"display_name,omitempty"`
	Input          json.RawMessage `json:"input,omitempty"`
	Description    string          `json:"description,omitempty"`
	Title          string          `json:"title,omitempty"`
	DecisionReason string          `json:"decision_reason,omitempty"`
	ToolUseID      string          `json:"tool_use_id,omitempty"`
	AgentID        string          `json:"agent_id,omitempty"`
	BlockedPath    string          `json:"blocked_path,omitempty"`
	// PermissionSuggestions are the rule updates the CLI offers with the
	// request ({"type":"addRules",…,"destination":"localSettings"}, …).
	PermissionSuggestions []json.RawMessage `json:"permission_suggestions,omitempty"`
}

// controlResponseBody is the response of a control_response, either way.
type controlResponseBody struct {
	Subtype   string          `json:"subtype"`
	RequestID string          `json:"request_id"`
	Response  json.RawMessage `json:"response,omitempty"`
	Error     string          `json:"error,omitempty"`
}

// Frames the plugin writes.

type outControlRequest struct {
	Type      string `json:"type"`
	RequestID string `json:"request_id"`
	Request   any    `json:"request"`
}

type outControlResponse struct {
	Type     string              `json:"type"`
	Response controlResponseBody `json:"response"`
}

type outUserMessage struct {
	Type            string      `json:"type"`
	Message         userContent `json:"message"`
	ParentToolUseID *string     `json:"parent_tool_use_id"`
	SessionID       string      `json:"session_id"`
	UUID            string      `json:"uuid,omitempty"`
}

type userContent struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// permissionAllow and permissionDeny answer can_use_tool.
type permissionAllow struct {
	Behavior           string            `json:"behavior"`
	UpdatedInput       json.RawMessage   `json:"updatedInput"`
	UpdatedPermissions []json.RawMessage `json:"updatedPermissions,omitempty"`
}

type permissionDeny struct {
	Behavior  string `json:"behavior"`
	Message   string `json:"message"`
	Interrupt bool   `json:"interrupt,omitempty"`
}
