// Package codex drives `codex app-server` (its JSON-RPC protocol, v2, as
// NDJSON over stdio) and normalizes what it says into Baton runtime events.
//
// The wire facts it relies on were verified against codex-cli 0.171.0 (see
// .notes/codex-probe.md): codex never sends a "jsonrpc" member but accepts
// one; every notification carries an extra top-level emittedAtMs; server
// requests have integer ids from 0 per connection; a sub-agent's thread gets
// no thread/started notification.
package codex

import (
	"encoding/json"
	"fmt"

	"github.com/baton-run/baton/sdk"
)

// WireProtocol names the protocol in the plugin's description.
const WireProtocol = "codex-app-server/v2"

// Codex wire types: only the fields the adapter reads or writes. Unknown
// fields are ignored so that newer codex versions keep working.

type clientInfo struct {
	Name    string `json:"name"`
	Title   string `json:"title,omitempty"`
	Version string `json:"version"`
}

type initializeCapabilities struct {
	ExperimentalAPI bool `json:"experimentalApi"`
}

type initializeParams struct {
	ClientInfo   clientInfo             `json:"clientInfo"`
	Capabilities initializeCapabilities `json:"capabilities"`
}

type initializeResult struct {
	UserAgent string `json:"userAgent"`
}

type threadStartParams struct {
	Cwd            string `json:"cwd"`
	ApprovalPolicy string `json:"approvalPolicy"`
	Sandbox        string `json:"sandbox"`
	Model          string `json:"model,omitempty"`
	// Config overrides codex's configuration for the thread, keyed by
	// dotted path as -c takes them (the host's MCP servers: mcpConfig).
	Config map[string]any `json:"config,omitempty"`
}

type threadResumeParams struct {
	ThreadID       string `json:"threadId"`
	Cwd            string `json:"cwd"`
	ApprovalPolicy string `json:"approvalPolicy"`
	Sandbox        string `json:"sandbox"`
	// ExcludeTurns skips hydrating the thread's history into the response:
	// the host has it, and full hydration is deprecated.
	ExcludeTurns bool           `json:"excludeTurns"`
	Config       map[string]any `json:"config,omitempty"`
}

// thread is the part of codex's Thread object the adapter reads.
type thread struct {
	ID             string  `json:"id"`
	ParentThreadID *string `json:"parentThreadId"`
	ForkedFromID   *string `json:"forkedFromId"`
	Model          string  `json:"model"`
	CliVersion     string  `json:"cliVersion"`
	AgentNickname  *string `json:"agentNickname"`
	// HistoryMode is how codex keeps the thread's history (see
	// historyPaginated); absent in versions that do not say.
	HistoryMode string `json:"historyMode"`
}

// historyPaginated is the historyMode of a thread whose history codex keeps
// in pages (0.171.0 creates every thread so). Such a thread has no
// thread/rollback: thread/revert cuts its history before a turn, whose id
// thread/turns/list gives.
const historyPaginated = "paginated"

type threadResult struct {
	Thread thread `json:"thread"`
	// Model is the thread's model (thread/start and thread/resume say it
	// here too).
	Model string `json:"model"`
}

type userInput struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type turnStartParams struct {
	ThreadID string      `json:"threadId"`
	Input    []userInput `json:"input"`
}

type turnSteerParams struct {
	ThreadID       string      `json:"threadId"`
	Input          []userInput `json:"input"`
	ExpectedTurnID string      `json:"expectedTurnId"`
}

type turnInterruptParams struct {
	ThreadID string `json:"threadId"`
	TurnID   string `json:"turnId"`
}

// thread/turns/list pages a thread's turns. The cursors are codex's own,
// opaque (JSON strings holding JSON in 0.171.0) and passed back as they
// came; null asks for the first page.
type turnsListParams struct {
	ThreadID      string          `json:"threadId"`
	Cursor        json.RawMessage `json:"cursor"`
	Limit         int             `json:"limit"`
	SortDirection string          `json:"sortDirection"`
	ItemsView     string          `json:"itemsView"`
}

type turnsListResult struct {
	Data       []turn          `json:"data"`
	NextCursor json.RawMessage `json:"nextCursor"`
}

// threadRevertParams: thread/revert keeps the history before BeforeTurnID
// and drops that turn and every later one.
type threadRevertParams struct {
	ThreadID     string `json:"threadId"`
	BeforeTurnID string `json:"beforeTurnId"`
}

// threadRollbackParams: thread/rollback (codex before paginated history)
// drops the last NumTurns turns.
type threadRollbackParams struct {
	ThreadID string `json:"threadId"`
	NumTurns uint32 `json:"numTurns"`
}

// turn is codex's Turn object.
type turn struct {
	ID          string     `json:"id"`
	RootTurnID  string     `json:"rootTurnId"`
	Status      string     `json:"status"`
	Error       *turnError `json:"error"`
	CompletedAt *int64     `json:"completedAt"`
}

type turnError struct {
	Message           string          `json:"message"`
	CodexErrorInfo    json.RawMessage `json:"codexErrorInfo"`
	AdditionalDetails *string         `json:"additionalDetails"`
}

type turnResult struct {
	Turn turn `json:"turn"`
}

// notification is any server notification's envelope.
type notification struct {
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
}

type turnNotification struct {
	ThreadID string `json:"threadId"`
	Turn     turn   `json:"turn"`
}

type itemNotification struct {
	ThreadID string          `json:"threadId"`
	TurnID   string          `json:"turnId"`
	Item     json.RawMessage `json:"item"`
}

// item is the union of codex's ThreadItem variants, decoded by type.
type item struct {
	Type   string  `json:"type"`
	ID     string  `json:"id"`
	Status *string `json:"status"`
	// agentMessage, plan
	Text *string `json:"text"`
	// reasoning (summary, content: lists of strings), userMessage
	// (content: a list of user inputs)
	Summary []string        `json:"summary"`
	Content json.RawMessage `json:"content"`
	// commandExecution
	Command          *string         `json:"command"`
	Cwd              *string         `json:"cwd"`
	ExitCode         *int            `json:"exitCode"`
	AggregatedOutput *string         `json:"aggregatedOutput"`
	DurationMs       *int64          `json:"durationMs"`
	CommandActions   json.RawMessage `json:"commandActions"`
	// fileChange
	Changes json.RawMessage `json:"changes"`
	// mcpToolCall, dynamicToolCall, collabAgentToolCall
	Server *string `json:"server"`
	Tool   *string `json:"tool"`
	// collabAgentToolCall
	SenderThreadID    string   `json:"senderThreadId"`
	ReceiverThreadIDs []string `json:"receiverThreadIds"`
	Prompt            *string  `json:"prompt"`
	// webSearch
	Query *string `json:"query"`
	// imageView
	Path *string `json:"path"`
}

type fileUpdate struct {
	Path string `json:"path"`
}

type deltaNotification struct {
	ThreadID string `json:"threadId"`
	TurnID   string `json:"turnId"`
	ItemID   string `json:"itemId"`
	Delta    string `json:"delta"`
}

type threadStartedNotification struct {
	Thread thread `json:"thread"`
}

type tokenUsageBreakdown struct {
	InputTokens           int64 `json:"inputTokens"`
	CachedInputTokens     int64 `json:"cachedInputTokens"`
	OutputTokens          int64 `json:"outputTokens"`
	ReasoningOutputTokens int64 `json:"reasoningOutputTokens"`
	TotalTokens           int64 `json:"totalTokens"`
}

type tokenUsageNotification struct {
	ThreadID   string `json:"threadId"`
	TurnID     string `json:"turnId"`
	TokenUsage struct {
		Total *tokenUsageBreakdown `json:"total"`
		Last  *tokenUsageBreakdown `json:"last"`
	} `json:"tokenUsage"`
}

type rateLimitWindow struct {
	UsedPercent        float64 `json:"usedPercent"`
	ResetsAt           *int64  `json:"resetsAt"`
	WindowDurationMins *int64  `json:"windowDurationMins"`
}

type rateLimitsNotification struct {
	RateLimits struct {
		LimitID   *string          `json:"limitId"`
		Primary   *rateLimitWindow `json:"primary"`
		Secondary *rateLimitWindow `json:"secondary"`
	} `json:"rateLimits"`
}

type errorNotification struct {
	ThreadID  string    `json:"threadId"`
	TurnID    string    `json:"turnId"`
	WillRetry bool      `json:"willRetry"`
	Error     turnError `json:"error"`
}

type planNotification struct {
	ThreadID    string          `json:"threadId"`
	TurnID      string          `json:"turnId"`
	Explanation *string         `json:"explanation"`
	Plan        json.RawMessage `json:"plan"`
}

type requestResolvedNotification struct {
	ThreadID  string          `json:"threadId"`
	RequestID json.RawMessage `json:"requestId"`
}

// requestParams is what every server request of a turn carries.
type requestParams struct {
	ThreadID string `json:"threadId"`
	TurnID   string `json:"turnId"`
	ItemID   string `json:"itemId"`
	// item/commandExecution/requestApproval
	Command            *string           `json:"command"`
	AvailableDecisions []json.RawMessage `json:"availableDecisions"`
	// item/fileChange/requestApproval, item/permissions/requestApproval
	Reason *string `json:"reason"`
	// item/permissions/requestApproval
	Permissions json.RawMessage `json:"permissions"`
	// item/tool/requestUserInput
	Questions []question `json:"questions"`
	// mcpServer/elicitation/request
	ServerName string           `json:"serverName"`
	Message    string           `json:"message"`
	Meta       *elicitationMeta `json:"_meta"`
}

// elicitationMeta is what codex adds to an MCP server's elicitation: an
// approval of a tool call says so, and names the tool.
type elicitationMeta struct {
	ApprovalKind string `json:"codex_approval_kind"`
	ToolName     string `json:"tool_name"`
}

// elicitationResult answers an elicitation (MCP's ElicitResult).
type elicitationResult struct {
	Action  string          `json:"action"`
	Content json.RawMessage `json:"content,omitempty"`
}

type question struct {
	ID       string `json:"id"`
	Header   string `json:"header"`
	Question string `json:"question"`
}

// Replies to server requests.

type decisionResult struct {
	Decision string `json:"decision"`
}

type permissionsResult struct {
	Permissions json.RawMessage `json:"permissions"`
	Scope       string          `json:"scope,omitempty"`
}

type userInputAnswer struct {
	Answers []string `json:"answers"`
}

type userInputResult struct {
	Answers map[string]userInputAnswer `json:"answers"`
}

// decodeParams decodes a frame's params into v with an error that names the
// method.
func decodeParams(method string, params json.RawMessage, v any) error {
	if len(params) == 0 || string(params) == "null" {
		return fmt.Errorf("%s has no params", method)
	}
	if err := json.Unmarshal(params, v); err != nil {
		return fmt.Errorf("%s params: %w", method, err)
	}
	return nil
}

// errorCode turns a codexErrorInfo (a string, or an object with one key
// such as {"httpConnectionFailed":{…}}) into a failure code.
func errorCode(info json.RawMessage) string {
	var s string
	if json.Unmarshal(info, &s) == nil {
		return s
	}
	var o map[string]json.RawMessage
	if json.Unmarshal(info, &o) == nil && len(o) == 1 {
		for k := range o {
			return k
		}
	}
	return ""
}

// failure converts a codex TurnError.
func (e *turnError) failure(fallbackCode string) *sdk.Failure {
	if e == nil {
		return nil
	}
	f := &sdk.Failure{Code: errorCode(e.CodexErrorInfo), Message: e.Message}
	if f.Code == "" {
		f.Code = fallbackCode
	}
	if e.AdditionalDetails != nil && *e.AdditionalDetails != "" {
		f.Message += ": " + *e.AdditionalDetails
	}
	return f
}
