package acp

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/baton-run/baton/sdk"
)

// normalizer turns one ACP session's updates into runtime events. It does
// no I/O; the session feeds it frames in the order they arrived.
type normalizer struct {
	threadRef string
	// turnPrefix makes turn refs unique: ACP has no turn ids, and a loaded
	// session keeps its id, so the refs carry the plugin session's id.
	turnPrefix string
	turnRef    string // the running turn, "" between turns
	turns      int

	// The open streamed item (assistant message or reasoning), closed when
	// another kind of output starts or the turn ends.
	open     string
	openKind sdk.ItemKind
	items    int
	tools    map[string]bool // tool calls started and not yet completed
	// now is the adapter's clock: a limit's retry hint counts from it.
	now func() time.Time

	// mcpServers are the names of the host's MCP servers the session
	// was given: a tool call to one of them names the server and the tool.
	mcpServers []string

	// Cost: ACP's usage_update states the session's cost so far, so a
	// turn's is what it grew by since the turn started. costKnown: the
	// session's cost so far is known (0 for a new session; a loaded one's
	// is known once an update states it); costSeen is the last stated.
	// turnBase is the session's cost when the running turn started (nil:
	// not known, and the turn reports no cost); turnCost is the turn's so
	// far, carried on each of its usage events (the host keeps the last).
	costKnown bool
	costSeen  float64
	turnBase  *float64
	turnCost  int64
}

func newNormalizer(threadRef, turnPrefix string) *normalizer {
	return &normalizer{threadRef: threadRef, turnPrefix: turnPrefix, tools: map[string]bool{}}
}

// startTurn begins a turn and returns its ref and the turn-started event.
func (n *normalizer) startTurn() (string, sdk.RuntimeEvent) {
	n.turns++
	n.turnRef = fmt.Sprintf("%s#%d", n.turnPrefix, n.turns)
	n.items = 0
	n.turnBase, n.turnCost = nil, 0
	if n.costKnown {
		base := n.costSeen
		n.turnBase = &base
	}
	return n.turnRef, n.event(sdk.RuntimeEvent{Kind: sdk.EventTurnStarted})
}

func (n *normalizer) event(ev sdk.RuntimeEvent) sdk.RuntimeEvent {
	ev.ThreadRef = n.threadRef
	ev.TurnRef = n.turnRef
	return ev
}

// closeOpen ends the open streamed item, if any.
func (n *normalizer) closeOpen() []sdk.RuntimeEvent {
	if n.open == "" {
		return nil
	}
	ev := n.event(sdk.RuntimeEvent{Kind: sdk.EventItemCompleted, ItemRef: n.open, ItemKind: n.openKind, Status: sdk.ItemDone})
	n.open, n.openKind = "", ""
	return []sdk.RuntimeEvent{ev}
}

// stream appends a chunk to the open item of kind k, starting one if needed.
func (n *normalizer) stream(k sdk.ItemKind, messageID, text string) []sdk.RuntimeEvent {
	var out []sdk.RuntimeEvent
	if n.openKind != k || (messageID != "" && messageID != n.open) {
		out = append(out, n.closeOpen()...)
		n.items++
		ref := messageID
		if ref == "" {
			ref = fmt.Sprintf("%s/%s-%d", n.turnRef, k, n.items)
		}
		n.open, n.openKind = ref, k
		out = append(out, n.event(sdk.RuntimeEvent{Kind: sdk.EventItemStarted, ItemRef: ref, ItemKind: k, Status: sdk.ItemInProgress}))
	}
	if text != "" {
		out = append(out, n.event(sdk.RuntimeEvent{Kind: sdk.EventContentDelta, ItemRef: n.open, ItemKind: k, Text: text}))
	}
	return out
}

// toolItemKind maps an ACP tool kind to an item kind.
func toolItemKind(kind string) sdk.ItemKind {
	switch kind {
	case "execute":
		return sdk.ItemCommandExecution
	case "edit", "delete", "move":
		return sdk.ItemFileChange
	}
	return sdk.ItemToolCall
}

// toolStatus maps an ACP tool status to an item status; done says whether
// the item has ended.
func toolStatus(s string) (status sdk.ItemStatus, done bool) {
	switch s {
	case "completed":
		return sdk.ItemDone, true
	case "failed":
		return sdk.ItemFailed, true
	}
	return sdk.ItemInProgress, false
}

// toolDetail is a tool call's detail: the fields ACP gives, and for a
// call to a host's MCP server, "mcpServer" and "mcpTool".
func toolDetail(u update, mcpServer, mcpTool string) json.RawMessage {
	d := map[string]json.RawMessage{}
	if mcpServer != "" {
		d["mcpServer"], _ = json.Marshal(mcpServer)
		d["mcpTool"], _ = json.Marshal(mcpTool)
	}
	for k, v := range map[string]json.RawMessage{"rawInput": u.RawInput, "rawOutput": u.RawOutput,
		"locations": u.Locations, "content": u.Content} {
		if len(v) > 0 && string(v) != "null" {
			d[k] = v
		}
	}
	if u.ToolKind != nil {
		d["kind"], _ = json.Marshal(*u.ToolKind)
	}
	if len(d) == 0 {
		return nil
	}
	b, _ := json.Marshal(d)
	return b
}

// update normalizes one session/update. Updates outside a turn (history
// replayed by session/load, or late chunks) are reported as diagnostics.
func (n *normalizer) update(u update) []sdk.RuntimeEvent {
	switch u.Kind {
	case "agent_message_chunk":
		if n.turnRef == "" {
			return n.outsideTurn(u)
		}
		return n.stream(sdk.ItemAssistantMessage, u.MessageID, textOf(u.Content))
	case "agent_thought_chunk":
		if n.turnRef == "" {
			return n.outsideTurn(u)
		}
		return n.stream(sdk.ItemReasoning, u.MessageID, textOf(u.Content))
	case "user_message_chunk":
		// The agent echoing the user's input (or replaying history):
		// the host already has the user's message.
		return nil
	case "tool_call":
		if n.turnRef == "" {
			return n.outsideTurn(u)
		}
		out := n.closeOpen()
		status, done := toolStatus(deref(u.Status))
		if n.tools[u.ToolCallID] {
			// Agents repeat tool_call for a call they announced (claude-code-acp
			// sends it again with the full input): an upsert, not a new item.
			u.Kind = "tool_call_update"
			return append(out, n.update(u)...)
		}
		title, server, tool := n.toolTitle(u)
		ev := n.event(sdk.RuntimeEvent{Kind: sdk.EventItemStarted, ItemRef: u.ToolCallID,
			ItemKind: toolItemKind(deref(u.ToolKind)), Title: title, Status: sdk.ItemInProgress, Detail: toolDetail(u, server, tool)})
		out = append(out, ev)
		n.tools[u.ToolCallID] = true
		if done {
			ev.Kind, ev.Status = sdk.EventItemCompleted, status
			out = append(out, ev)
			delete(n.tools, u.ToolCallID)
		}
		return out
	case "tool_call_update":
		if n.turnRef == "" {
			return n.outsideTurn(u)
		}
		out := n.closeOpen()
		status, done := toolStatus(deref(u.Status))
		kind := sdk.EventItemUpdated
		if done {
			kind = sdk.EventItemCompleted
			delete(n.tools, u.ToolCallID)
		}
		var ik sdk.ItemKind
		if u.ToolKind != nil {
			ik = toolItemKind(*u.ToolKind)
		}
		title, server, tool := n.toolTitle(u)
		return append(out, n.event(sdk.RuntimeEvent{Kind: kind, ItemRef: u.ToolCallID, ItemKind: ik,
			Title: title, Status: status, Detail: toolDetail(u, server, tool)}))
	case "plan":
		return []sdk.RuntimeEvent{n.event(sdk.RuntimeEvent{Kind: sdk.EventPlanUpdated, ItemKind: sdk.ItemPlan, Detail: u.Entries})}
	case "usage_update":
		ev := n.event(sdk.RuntimeEvent{Kind: sdk.EventUsage, Detail: u.json()})
		n.cost(u.Cost)
		if u.Used != nil || n.turnCost > 0 {
			ev.Usage = &sdk.Usage{CostMicros: n.turnCost}
			if u.Used != nil {
				ev.Usage.TotalTokens = *u.Used
			}
		}
		return []sdk.RuntimeEvent{ev}
	case "available_commands_update", "current_mode_update", "config_option_update", "session_info_update":
		return []sdk.RuntimeEvent{n.event(sdk.RuntimeEvent{Kind: sdk.EventSessionState, Title: u.Kind, Detail: u.json()})}
	}
	// Kept, never dropped: a newer agent's update the host may still show.
	return []sdk.RuntimeEvent{n.event(sdk.RuntimeEvent{Kind: sdk.EventDiagnostic, Title: "unknown session/update " + u.Kind, Detail: u.json()})}
}

// toolTitle is a tool call's title and, for a call to one of the host's
// MCP servers (claude-code-acp names it "mcp__SERVER__TOOL", in _meta and
// as the title), the server and the tool. Such a call is titled
// "SERVER/TOOL" where the agent's title is only that name.
func (n *normalizer) toolTitle(u update) (title, server, tool string) {
	title = deref(u.Title)
	name := u.tool
	if name == "" {
		name = title
	}
	server, tool, ok := sdk.MCPToolOf(name, "mcp__", "__", n.mcpServers)
	if !ok {
		return title, "", ""
	}
	if title == name || (title == "" && u.Kind == "tool_call") {
		title = sdk.MCPToolTitle(server, tool)
	}
	return title, server, tool
}

// cost takes the session's cost so far from a usage_update: the running
// turn's is what it grew by since the turn started, when that is known.
// Only a cost in US dollars is taken; another currency is none.
func (n *normalizer) cost(c *cost) {
	if c == nil || !strings.EqualFold(c.Currency, "USD") {
		return
	}
	if n.turnRef != "" && n.turnBase != nil {
		n.turnCost = sdk.CostMicrosOf(c.Amount - *n.turnBase)
	}
	n.costSeen, n.costKnown = c.Amount, true
}

func (n *normalizer) outsideTurn(u update) []sdk.RuntimeEvent {
	return []sdk.RuntimeEvent{n.event(sdk.RuntimeEvent{Kind: sdk.EventDiagnostic,
		Title: "session/update " + u.Kind + " outside a turn"})}
}

// stopStatus maps an ACP stop reason to a turn status.
func stopStatus(reason string) (sdk.TurnStatus, *sdk.Failure) {
	switch reason {
	case "end_turn", "max_tokens", "max_turn_requests":
		return sdk.TurnCompleted, nil
	case "cancelled":
		return sdk.TurnInterrupted, nil
	case "refusal":
		return sdk.TurnFailed, &sdk.Failure{Code: "refusal", Message: "the agent refused the prompt"}
	}
	return sdk.TurnFailed, &sdk.Failure{Code: "unknown_stop_reason", Message: fmt.Sprintf("unknown stop reason %q", reason)}
}

// endTurn closes open items and returns the turn's terminal events. An
// unusable thread (the agent died) is marked so.
func (n *normalizer) endTurn(res *promptResult, callErr error, threadUsable bool) []sdk.RuntimeEvent {
	out := n.closeOpen()
	for _, id := range slices.Sorted(maps.Keys(n.tools)) {
		out = append(out, n.event(sdk.RuntimeEvent{Kind: sdk.EventItemCompleted, ItemRef: id, Status: sdk.ItemFailed,
			Text: "the tool call was still open when the turn ended"}))
		delete(n.tools, id)
	}
	term := n.event(sdk.RuntimeEvent{Kind: sdk.EventTurnTerminal, ThreadUsable: threadUsable})
	switch {
	case callErr != nil:
		term.Status = sdk.TurnFailed
		term.Failure = &sdk.Failure{Code: "prompt_failed", Message: callErr.Error()}
		if errors.Is(callErr, sdk.ErrProviderExited) {
			term.Failure.Code = "provider_exited" // as every plugin says it
		}
		now := time.Now
		if n.now != nil {
			now = n.now
		}
		term.Limit = limitOf(callErr, now())
	default:
		term.Status, term.Failure = stopStatus(res.StopReason)
		term.Title = res.StopReason
		if u := res.Usage; u != nil {
			// The turn's cost so far rides along: the host keeps the
			// last usage report.
			out = append(out, n.event(sdk.RuntimeEvent{Kind: sdk.EventUsage, Usage: &sdk.Usage{
				InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, CachedInputTokens: u.CachedReadTokens,
				ReasoningTokens: u.ThoughtTokens, TotalTokens: u.TotalTokens, CostMicros: n.turnCost}}))
		}
	}
	out = append(out, term)
	n.turnRef = ""
	return out
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
