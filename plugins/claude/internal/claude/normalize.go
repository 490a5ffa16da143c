package claude

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/baton-run/baton/sdk"
	"github.com/baton-run/baton/sdk/sessions"
)

// normalizer turns one Claude Code session's frames into runtime events. It
// does no I/O; the session feeds it frames in the order they arrived and
// tells it what the host asked for (a turn, a steer, an interrupt).
//
// Threads: the CLI's session id is the root thread; the CLI names it in
// the first frame after the first user message (or it is the session being
// resumed). A subagent (the Task tool, called Agent by newer CLIs) is a
// child thread named by the tool use's id: its frames carry that id as
// parent_tool_use_id. Its one turn ends with the Task's tool result (a
// foreground agent) or with the task_notification that says it stopped (a
// background agent); its end never ends the root turn.
//
// Turns: the host's turn is one user message and every steer written into
// it. The CLI echoes each user message it takes (--replay-user-messages);
// a steer it took after the model had finished becomes a CLI turn of its
// own with its own result. A background subagent (the default in 2.1.332)
// may outlive the CLI turn that started it; its end starts another CLI
// turn (the task notification), with its own result. So a result ends the
// host's turn only when every message written for it has been echoed and
// every background subagent it started has ended (or when the turn was
// interrupted).
//
// Usage: a result's usage is its CLI turn's, but its total_cost_usd and
// modelUsage are the conversation's running totals (a resumed or forked
// conversation's include the turns before). The normalizer keeps the last
// totals it saw (costs) and gives each turn what they grew by; after a
// resume it does not know the totals before, and the first result only
// sets them.
type normalizer struct {
	root string
	cwd  string

	turn     *rootTurn
	items    sessions.Items[tool] // open tool items, by thread and tool use id
	children map[string]*child    // Task tool use id -> its thread
	// lastEntry is the uuid of the newest root assistant message: the
	// point a resumed session can be truncated at.
	lastEntry string
	// turns are the root turns this session ran, oldest first.
	turns []ranTurn
	// forkOf is the session the root forks after a rollback, until the
	// CLI takes a message on the fork: it writes the fork only then, and a
	// fork it has not written cannot be resumed (a second rollback cuts
	// forkOf again).
	forkOf string
	// costs are the CLI's running totals as of its last result.
	costs runningTotals
}

// runningTotals are the cost and the usage by model that a result says
// the conversation has run up so far.
type runningTotals struct {
	known      bool // false: not known yet (a resumed conversation)
	costMicros int64
	models     map[string]sdk.Usage
}

// rootTurn is the host's turn in progress.
type rootTurn struct {
	ref, clientTurn string
	announced       bool
	unconsumed      int // user messages written for it and not echoed yet
	interrupted     bool
	// idle says that the CLI ended a CLI turn of the host's turn and has
	// not started another yet (see result).
	idle  bool
	usage sdk.Usage
	// models is the turn's usage by model (from the running totals).
	models map[string]sdk.Usage
	// What the CLI said about a provider limit during the turn, kept until
	// its result, which says only that the turn failed on an API error:
	// the last rate_limit_event if its status is "rejected" (nil once a
	// later event says the limit lets requests through again), the
	// event's frame as it came, and the class of the last API error the
	// CLI gave up on (its made-up assistant message's "error").
	rejected    *rateLimitInfo
	rejectedRaw json.RawMessage
	apiError    string
}

// ranTurn is a root turn this session ran, with the last root assistant
// message before it: the entry to truncate at to drop it and every turn
// after it ("" for a conversation's first turn, which has nothing before
// it).
type ranTurn struct{ ref, before string }

// tool is what an open tool item keeps besides: a tool use whose result
// has not come.
type tool struct {
	name     string
	declined bool // the host declined its permission request
}

// child is a subagent's thread and its one turn.
type child struct {
	thread, turn string
	rootTurn     string // the host's turn that started it
	background   bool
	ended        bool
}

func newNormalizer(root, cwd string) *normalizer {
	return &normalizer{root: root, cwd: cwd, children: map[string]*child{}, costs: runningTotals{known: true}}
}

// activeTurn is the root turn in progress ("" when none).
func (n *normalizer) activeTurn() string {
	if n.turn == nil {
		return ""
	}
	return n.turn.ref
}

// startTurn begins the host's turn ref (clientTurn is the host's id for
// it). Its turn_started waits until the root thread is known.
func (n *normalizer) startTurn(ref, clientTurn string) []sdk.RuntimeEvent {
	n.turn = &rootTurn{ref: ref, clientTurn: clientTurn, unconsumed: 1}
	n.turns = append(n.turns, ranTurn{ref: ref, before: n.lastEntry})
	return n.announceTurn()
}

// cancelStart forgets a turn whose user message could not be written.
func (n *normalizer) cancelStart(ref string) {
	if n.turn != nil && n.turn.ref == ref {
		n.turn = nil
		n.turns = n.turns[:len(n.turns)-1]
	}
}

// rolledBack says that the conversation goes on as fork (of session
// source, not written yet), without turn first and the turns after it.
func (n *normalizer) rolledBack(fork, source, first string) {
	i := slices.IndexFunc(n.turns, func(t ranTurn) bool { return t.ref == first })
	n.lastEntry = n.turns[i].before
	n.turns = n.turns[:i]
	n.root = fork
	n.forkOf = source
}

// steer adds a user message to the turn in progress.
func (n *normalizer) steer() bool {
	if n.turn == nil {
		return false
	}
	n.turn.unconsumed++
	return true
}

// interrupting marks the turn in progress as interrupted by the host: its
// next result ends it, whatever is still queued.
func (n *normalizer) interrupting() {
	if n.turn != nil {
		n.turn.interrupted = true
	}
}

func (n *normalizer) announceTurn() []sdk.RuntimeEvent {
	if n.turn == nil || n.turn.announced || n.root == "" {
		return nil
	}
	n.turn.announced = true
	return []sdk.RuntimeEvent{{Kind: sdk.EventTurnStarted, ThreadRef: n.root, TurnRef: n.turn.ref, ClientTurnID: n.turn.clientTurn}}
}

// learnRoot takes the session id from a frame, when the root thread is not
// known yet.
func (n *normalizer) learnRoot(sessionID string) []sdk.RuntimeEvent {
	if n.root != "" || sessionID == "" {
		return nil
	}
	n.root = sessionID
	return append([]sdk.RuntimeEvent{{Kind: sdk.EventThreadStarted, ThreadRef: sessionID}}, n.announceTurn()...)
}

// ignoredSystem are system subtypes that carry nothing the host uses.
var ignoredSystem = map[string]bool{
	"init": true, "status": true, "compact_boundary": true, "hook_started": true, "hook_response": true,
	"hook_progress": true, "background_tasks_changed": true, "session_state_changed": true, "thinking_tokens": true,
	"task_updated": true, "files_persisted": true, "local_command_output": true,
}

// frame normalizes one frame from the CLI. Control frames are the
// session's; they never come here.
func (n *normalizer) frame(f *frame) []sdk.RuntimeEvent {
	out := n.learnRoot(f.SessionID)
	evs, err := n.dispatch(f)
	out = append(out, evs...)
	if err != nil {
		out = append(out, malformed(err, f.raw))
	}
	return out
}

func malformed(err error, raw []byte) sdk.RuntimeEvent {
	ev := sdk.RuntimeEvent{Kind: sdk.EventDiagnostic, Title: "malformed frame", Text: err.Error()}
	if json.Valid(raw) {
		ev.Detail = raw
	}
	return ev
}

func (n *normalizer) dispatch(f *frame) ([]sdk.RuntimeEvent, error) {
	switch f.Type {
	case typeAssistant:
		return n.assistant(f)
	case typeUser:
		return n.user(f)
	case typeResult:
		var r resultFrame
		if err := json.Unmarshal(f.raw, &r); err != nil {
			return nil, fmt.Errorf("result: %w", err)
		}
		return n.result(r, f.raw), nil
	case typeSystem:
		return n.system(f)
	case typeRateLimit:
		if f.RateLimitInfo == nil {
			return nil, fmt.Errorf("rate_limit_event without rate_limit_info")
		}
		if t := n.turn; t != nil {
			t.rejected, t.rejectedRaw = nil, nil
			if f.RateLimitInfo.Status == "rejected" {
				t.rejected, t.rejectedRaw = f.RateLimitInfo, f.raw
			}
		}
		return []sdk.RuntimeEvent{n.rateLimit(*f.RateLimitInfo, f.raw)}, nil
	case typeCommandLife:
		// A message the CLI dropped from its queue will never be echoed:
		// the turn must not wait for it.
		if f.State == "cancelled" && n.turn != nil && n.turn.unconsumed > 0 {
			n.turn.unconsumed--
		}
		return nil, nil
	case typeStreamEvent, typeKeepAlive:
		return nil, nil
	}
	// Kept, never fatal: a newer CLI's frame the host may still show.
	return []sdk.RuntimeEvent{{Kind: sdk.EventDiagnostic, Title: "unknown claude frame " + f.Type, Detail: f.raw}}, nil
}

// where names the thread and turn a frame belongs to: the root turn, or a
// subagent's. ok is false for a root frame outside any turn.
func (n *normalizer) where(parent string) (thread, turn string, out []sdk.RuntimeEvent, ok bool) {
	if n.turn == nil && parent == "" || n.root == "" {
		// Outside the host's turns, or before the CLI named its session
		// (it always names it first): nothing to bind the frame to.
		return "", "", nil, false
	}
	if parent == "" {
		return n.root, n.turn.ref, nil, true
	}
	c, out := n.child(parent, "")
	if c == nil || c.ended {
		// A parent named like the session, or a subagent that goes on
		// after its turn was ended for it (its parent turn was
		// interrupted): nothing to bind it to.
		return "", "", nil, false
	}
	return c.thread, c.turn, out, true
}

// child is the subagent thread of a Task tool use, announced (thread and
// turn) the first time it is named. A tool use named like the session has
// none (nil): its thread would be a second one with the root's id.
func (n *normalizer) child(toolUse, title string) (*child, []sdk.RuntimeEvent) {
	if toolUse == n.root {
		return nil, nil
	}
	if c := n.children[toolUse]; c != nil {
		return c, nil
	}
	c := &child{thread: toolUse, turn: toolUse + "/turn", rootTurn: n.activeTurn()}
	n.children[toolUse] = c
	return c, []sdk.RuntimeEvent{
		{Kind: sdk.EventThreadStarted, ThreadRef: c.thread, ParentThreadRef: n.root, ParentItemRef: toolUse},
		{Kind: sdk.EventTurnStarted, ThreadRef: c.thread, TurnRef: c.turn, Title: title},
	}
}

func (n *normalizer) outside(f *frame) []sdk.RuntimeEvent {
	return []sdk.RuntimeEvent{{Kind: sdk.EventDiagnostic, Title: "claude sent " + f.Type + " outside a turn", Detail: f.raw}}
}

// assistant normalizes an assistant message: text and thinking are whole
// items at once; a tool use starts an item its result completes.
func (n *normalizer) assistant(f *frame) ([]sdk.RuntimeEvent, error) {
	var m message
	if err := json.Unmarshal(f.Message, &m); err != nil || len(f.Message) == 0 {
		if err == nil {
			err = fmt.Errorf("no message")
		}
		return nil, fmt.Errorf("assistant: %w", err)
	}
	blocks, err := m.blocks()
	if err != nil {
		return nil, fmt.Errorf("assistant: %w", err)
	}
	thread, turn, out, ok := n.where(f.parent())
	if !ok {
		return n.outside(f), nil
	}
	if f.parent() == "" && f.UUID != "" {
		n.lastEntry = f.UUID
	}
	if f.IsAPIErrorMessage && f.parent() == "" && n.turn != nil {
		n.turn.apiError = f.Error
	}
	for i, b := range blocks {
		id := f.UUID
		if id == "" {
			id = m.ID
		}
		if len(blocks) > 1 {
			id = fmt.Sprintf("%s/%d", id, i)
		}
		switch b.Type {
		case "text", "thinking":
			kind, text := sdk.ItemAssistantMessage, b.Text
			if b.Type == "thinking" {
				kind, text = sdk.ItemReasoning, b.Thinking
			}
			out = append(out,
				sdk.RuntimeEvent{Kind: sdk.EventItemStarted, ThreadRef: thread, TurnRef: turn, ItemRef: id, ItemKind: kind, Status: sdk.ItemInProgress})
			if text != "" {
				out = append(out, sdk.RuntimeEvent{Kind: sdk.EventContentDelta, ThreadRef: thread, TurnRef: turn, ItemRef: id, ItemKind: kind, Text: text})
			}
			out = append(out, sdk.RuntimeEvent{Kind: sdk.EventItemCompleted, ThreadRef: thread, TurnRef: turn, ItemRef: id, ItemKind: kind, Status: sdk.ItemDone})
		case "tool_use":
			if b.ID == "" {
				return out, fmt.Errorf("assistant: tool_use without an id")
			}
			out = append(out, n.toolUse(thread, turn, b)...)
		case "redacted_thinking":
		default:
			out = append(out, sdk.RuntimeEvent{Kind: sdk.EventDiagnostic, ThreadRef: thread, TurnRef: turn,
				Title: "unknown assistant content block " + b.Type})
		}
	}
	return out, nil
}

// toolKind maps a tool's name to an item kind.
func toolKind(name string) sdk.ItemKind {
	switch name {
	case "Bash":
		return sdk.ItemCommandExecution
	case "Edit", "Write", "MultiEdit", "NotebookEdit":
		return sdk.ItemFileChange
	case "Task", "Agent":
		return sdk.ItemSubagent
	}
	return sdk.ItemToolCall
}

func (n *normalizer) toolUse(thread, turn string, b block) []sdk.RuntimeEvent {
	var in toolInput
	_ = json.Unmarshal(b.Input, &in) // a tool's input is the model's; the title is best effort
	kind := toolKind(b.Name)
	title := b.Name
	switch kind {
	case sdk.ItemCommandExecution:
		title = in.Command
	case sdk.ItemFileChange:
		title = sdk.RelPath(n.cwd, cmp.Or(in.FilePath, in.NotebookPath))
	case sdk.ItemSubagent:
		title = b.Name
		if d := cmp.Or(in.Description, sdk.Title(in.Prompt)); d != "" {
			title += ": " + d
		}
	}
	server, mcpTool, isMCP := mcpToolName(b.Name)
	if isMCP {
		title = sdk.MCPToolTitle(server, mcpTool)
	}
	if old := n.items.Get(thread, b.ID); old != nil {
		n.items.Forget(old) // a tool use named again starts again
	}
	it, _ := n.items.Start(thread, turn, b.ID, kind, title)
	it.Data.name = b.Name
	var detail json.RawMessage
	switch {
	case isMCP:
		d := map[string]any{"tool": b.Name, "mcpServer": server, "mcpTool": mcpTool}
		if len(b.Input) > 0 {
			d["input"] = b.Input
		}
		detail, _ = json.Marshal(d)
	case len(b.Input) > 0:
		detail, _ = json.Marshal(map[string]any{"tool": b.Name, "input": b.Input})
	}
	out := []sdk.RuntimeEvent{{Kind: sdk.EventItemStarted, ThreadRef: thread, TurnRef: turn, ItemRef: b.ID, ItemKind: kind,
		Title: title, Status: sdk.ItemInProgress, Detail: detail}}
	if kind == sdk.ItemSubagent {
		_, evs := n.child(b.ID, cmp.Or(in.Prompt, in.Description))
		out = append(out, evs...)
	}
	return out
}

// mcpToolName splits the name Claude Code gives an MCP server's tool,
// mcp__SERVER__TOOL (ok false for any other tool).
func mcpToolName(name string) (server, tool string, ok bool) {
	rest, ok := strings.CutPrefix(name, "mcp__")
	if !ok {
		return "", "", false
	}
	server, tool, ok = strings.Cut(rest, "__")
	if !ok || server == "" || tool == "" {
		return "", "", false
	}
	return server, tool, true
}

// toolItem is the open item of tool use id, on whichever thread (nil when
// none is open). A permission request names only the tool use.
func (n *normalizer) toolItem(id string) *sessions.Item[tool] { return n.items.Find(id) }

// decline says that the host declined tool use id's permission: its
// result completes its item as declined.
func (n *normalizer) decline(id string) {
	if it := n.toolItem(id); it != nil {
		it.Data.declined = true
	}
}

// user normalizes a user message: the echo of the host's own input (one
// message of the turn taken), or tool results completing tool items.
func (n *normalizer) user(f *frame) ([]sdk.RuntimeEvent, error) {
	if f.IsReplay {
		if f.parent() == "" && n.turn != nil && n.turn.unconsumed > 0 {
			n.turn.unconsumed--
			n.turn.idle = false
			n.forkOf = "" // the CLI took a message: a fork is written now
		}
		return nil, nil
	}
	var m message
	if err := json.Unmarshal(f.Message, &m); err != nil || len(f.Message) == 0 {
		if err == nil {
			err = fmt.Errorf("no message")
		}
		return nil, fmt.Errorf("user: %w", err)
	}
	blocks, err := m.blocks()
	if err != nil {
		return nil, fmt.Errorf("user: %w", err)
	}
	var out []sdk.RuntimeEvent
	for _, b := range blocks {
		if b.Type != "tool_result" {
			continue // the CLI's own notes ("[Request interrupted by user]", task notifications)
		}
		out = append(out, n.toolResult(f, b)...)
	}
	return out, nil
}

func (n *normalizer) toolResult(f *frame, b block) []sdk.RuntimeEvent {
	thread := n.root
	if p := f.parent(); p != "" {
		if c := n.children[p]; c != nil && c.ended {
			// A subagent stopped with its turn (an interrupt) reports the
			// tool use it was in; its item ended with the turn.
			return nil
		}
		thread = p // a subagent's thread is named by its tool use
	}
	it := n.items.Get(thread, b.ToolUseID)
	if it == nil {
		return []sdk.RuntimeEvent{{Kind: sdk.EventDiagnostic, ThreadRef: thread, Title: "tool result for an unknown tool use " + b.ToolUseID, Detail: f.raw}}
	}
	status := sdk.ItemDone
	switch {
	case it.Data.declined:
		status = sdk.ItemDeclined
	case b.IsError:
		status = sdk.ItemFailed
	}
	text := resultText(b.Content)
	d := map[string]any{"tool": it.Data.name, "output": text}
	if len(f.ToolUseResult) > 0 {
		d["result"] = f.ToolUseResult
	}
	detail, _ := json.Marshal(d)
	var out []sdk.RuntimeEvent
	if it.Kind == sdk.ItemCommandExecution && text != "" {
		out = append(out, it.Delta(text))
	}
	done := n.items.Complete(it, status)
	done.Detail = detail
	out = append(out, done)
	if it.Kind == sdk.ItemSubagent {
		if c := n.children[it.Ref]; c != nil && !c.background {
			out = append(out, n.endChild(c, map[sdk.ItemStatus]sdk.TurnStatus{sdk.ItemDone: sdk.TurnCompleted, sdk.ItemDeclined: sdk.TurnInterrupted}[status], text)...)
		}
	}
	return out
}

// resultText is a tool result's text (a string or text blocks).
func resultText(content json.RawMessage) string {
	var s string
	if json.Unmarshal(content, &s) == nil {
		return s
	}
	var bs []block
	if json.Unmarshal(content, &bs) != nil {
		return ""
	}
	var parts []string
	for _, b := range bs {
		if b.Type == "text" {
			parts = append(parts, b.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// endChild ends a subagent's turn (status "" is failed) and whatever it
// left open.
func (n *normalizer) endChild(c *child, status sdk.TurnStatus, text string) []sdk.RuntimeEvent {
	if c.ended {
		return nil
	}
	c.ended = true
	out := n.closeItems(c.thread, c.turn)
	ev := sdk.RuntimeEvent{Kind: sdk.EventTurnTerminal, ThreadRef: c.thread, TurnRef: c.turn, Status: status}
	if status == "" {
		ev.Status = sdk.TurnFailed
		ev.Failure = &sdk.Failure{Code: "subagent_failed", Message: cmp.Or(sdk.Title(text), "the subagent failed")}
	}
	return append(out, ev)
}

// closeItems fails the tool items a turn left open.
func (n *normalizer) closeItems(thread, turn string) []sdk.RuntimeEvent {
	return n.items.CloseTurn(thread, turn, sdk.ItemFailed, "the item was still open when the turn ended")
}

// system normalizes the system messages that matter: the task_* lifecycle
// of subagents.
func (n *normalizer) system(f *frame) ([]sdk.RuntimeEvent, error) {
	var s systemFrame
	if err := json.Unmarshal(f.raw, &s); err != nil {
		return nil, fmt.Errorf("system: %w", err)
	}
	switch s.Subtype {
	case "init":
		// Each CLI turn starts with it: the CLI runs a queued message or
		// answers a task notification.
		if n.turn != nil {
			n.turn.idle = false
		}
		return nil, nil
	case "task_started":
		if s.ToolUseID == "" || n.root == "" {
			return nil, nil // a session not named yet (or a task no tool use names)
		}
		if n.children[s.ToolUseID] == nil && s.TaskType != "local_agent" {
			// A background command (task_type local_bash, named by its
			// Bash tool use) is no subagent: its item is its tool use, and
			// the host's turn does not wait for it (a server started in the
			// background may never end).
			return nil, nil
		}
		c, out := n.child(s.ToolUseID, cmp.Or(s.Prompt, s.Description))
		if c == nil {
			return nil, nil
		}
		c.background = s.IsBackgrounded
		return out, nil
	case "task_progress":
		if s.ToolUseID == "" || n.children[s.ToolUseID] == nil {
			return nil, nil
		}
		return []sdk.RuntimeEvent{{Kind: sdk.EventItemUpdated, ThreadRef: n.root, TurnRef: n.activeTurn(), ItemRef: s.ToolUseID,
			ItemKind: sdk.ItemSubagent, Detail: f.raw}}, nil
	case "task_notification":
		c := n.children[s.ToolUseID]
		if s.ToolUseID == "" || c == nil {
			return nil, nil
		}
		var status sdk.TurnStatus
		switch s.Status {
		case "completed":
			status = sdk.TurnCompleted
		case "killed", "stopped", "cancelled":
			status = sdk.TurnInterrupted
		}
		return n.endChild(c, status, s.Summary), nil
	case "api_retry":
		return []sdk.RuntimeEvent{{Kind: sdk.EventDiagnostic, ThreadRef: n.root, TurnRef: n.activeTurn(),
			Title: "claude retries a model request", Detail: f.raw}}, nil
	}
	if ignoredSystem[s.Subtype] {
		return nil, nil
	}
	return []sdk.RuntimeEvent{{Kind: sdk.EventDiagnostic, Title: "unknown claude system message " + s.Subtype, Detail: f.raw}}, nil
}

// rateLimit reports a rate_limit_event with the instant the limit resets.
func (n *normalizer) rateLimit(r rateLimitInfo, raw json.RawMessage) sdk.RuntimeEvent {
	rl := &sdk.RateLimit{Scope: r.RateLimitType}
	if r.ResetsAt != nil {
		rl.ResetsAt = sdk.UnixSeconds(*r.ResetsAt)
	}
	u := r.Utilization
	if w, ok := r.UnifiedWindows[r.RateLimitType]; ok && u == nil {
		u = w.Utilization
	}
	if u != nil {
		rl.UsedPercent = *u * 100
	}
	return sdk.RuntimeEvent{Kind: sdk.EventRateLimit, ThreadRef: n.root, TurnRef: n.activeTurn(), Title: r.Status,
		RateLimit: rl, Detail: raw}
}

// result handles the CLI's result. It ends the host's turn unless a
// message written for the turn is still queued: then the CLI runs it as a
// turn of its own, which belongs to the same host turn.
func (n *normalizer) result(r resultFrame, raw json.RawMessage) []sdk.RuntimeEvent {
	t := n.turn
	if t == nil {
		return []sdk.RuntimeEvent{{Kind: sdk.EventDiagnostic, ThreadRef: n.root, Title: "claude sent a result outside a turn", Detail: raw}}
	}
	if !t.announced {
		// Before the CLI named its session (it names it first): the turn
		// has no thread to end on; the CLI's exit reports it.
		return []sdk.RuntimeEvent{{Kind: sdk.EventDiagnostic, Title: "claude sent a result before it named its session", Detail: raw}}
	}
	if r.Usage != nil {
		t.usage.Add(r.Usage.usage())
	}
	cost, models := n.costs.advance(r)
	t.usage.Add(sdk.Usage{CostMicros: cost})
	for _, m := range models {
		if t.models == nil {
			t.models = map[string]sdk.Usage{}
		}
		u := t.models[m.Model]
		u.Add(m)
		t.models[m.Model] = u
	}
	if !t.interrupted && !strings.HasPrefix(r.TerminalReason, "aborted") && (t.unconsumed > 0 || n.backgroundRunning(t.ref)) {
		// A steer still queued, or a background subagent of the turn still
		// running: the CLI goes on by itself (the queued message, or the
		// subagent's task notification, starts a CLI turn of its own),
		// and that turn's result ends the host's.
		t.idle = true
		return nil
	}
	title := r.Subtype
	if r.TerminalReason != "" {
		title += " (" + r.TerminalReason + ")"
	}
	status, failure := resultStatus(r, t.interrupted)
	out := n.endTurn(status, failure, title, raw)
	if status == sdk.TurnFailed {
		out[len(out)-1].Limit = t.limit(r, raw)
	}
	return out
}

// usage is a result's usage for the host: its input counts the tokens read
// from and written to the prompt cache too.
func (u *resultUsage) usage() sdk.Usage {
	in := u.InputTokens + u.CacheReadInputTokens + u.CacheCreationInputTokens
	out := sdk.Usage{InputTokens: in, CachedInputTokens: u.CacheReadInputTokens, OutputTokens: u.OutputTokens,
		TotalTokens: in + u.OutputTokens}
	if d := u.OutputTokensDetails; d != nil {
		out.ReasoningTokens = d.ThinkingTokens
	}
	return out
}

// modelUsage is a model's running totals for the host.
func (m modelUsage) usage(model string) sdk.Usage {
	in := m.InputTokens + m.CacheReadInputTokens + m.CacheCreationInputTokens
	return sdk.Usage{InputTokens: in, CachedInputTokens: m.CacheReadInputTokens, OutputTokens: m.OutputTokens,
		ReasoningTokens: m.ThinkingTokens, TotalTokens: in + m.OutputTokens, CostMicros: sdk.CostMicrosOf(m.CostUSD), Model: model}
}

// advance takes a result's running totals and returns what they grew by
// since the last result: the cost, and the usage of each model that grew,
// sorted by model. Totals not known before, or that went back (a CLI that
// counts afresh), give nothing: no cost is made up. A result without
// totals changes nothing.
func (c *runningTotals) advance(r resultFrame) (cost int64, models []sdk.Usage) {
	if r.TotalCostUSD == 0 && len(r.ModelUsage) == 0 {
		return 0, nil
	}
	now := sdk.CostMicrosOf(r.TotalCostUSD)
	cur := make(map[string]sdk.Usage, len(r.ModelUsage))
	for model, m := range r.ModelUsage {
		cur[model] = m.usage(model)
	}
	known, prevCost, prev := c.known, c.costMicros, c.models
	c.known, c.costMicros, c.models = true, now, cur
	if !known {
		return 0, nil
	}
	cost = max(now-prevCost, 0)
	for _, model := range slices.Sorted(maps.Keys(cur)) {
		if d, ok := grew(cur[model], prev[model]); ok {
			models = append(models, d)
		}
	}
	return cost, models
}

// grew is what usage now has more than before (ok false when nothing, or
// when a count went back).
func grew(now, before sdk.Usage) (sdk.Usage, bool) {
	d := sdk.Usage{Model: now.Model, InputTokens: now.InputTokens - before.InputTokens,
		CachedInputTokens: now.CachedInputTokens - before.CachedInputTokens, OutputTokens: now.OutputTokens - before.OutputTokens,
		ReasoningTokens: now.ReasoningTokens - before.ReasoningTokens, TotalTokens: now.TotalTokens - before.TotalTokens,
		CostMicros: now.CostMicros - before.CostMicros}
	if min(d.InputTokens, d.CachedInputTokens, d.OutputTokens, d.ReasoningTokens, d.TotalTokens, d.CostMicros) < 0 {
		return sdk.Usage{}, false
	}
	d.Model = ""
	if d.IsZero() {
		return sdk.Usage{}, false
	}
	d.Model = now.Model
	return d, true
}

// interruptAcknowledged ends the host's turn ref when the CLI acknowledged
// its interrupt while no CLI turn ran (its last result came, and it waited
// to run a queued message or for a background subagent): no result follows
// then. (Claude Code stops the turn's background tasks, and reports them
// stopped, before it acknowledges.) stillQueued is how many messages the
// CLI says it still runs: their result ends the turn.
func (n *normalizer) interruptAcknowledged(ref string, stillQueued int) []sdk.RuntimeEvent {
	if n.turn == nil || n.turn.ref != ref || !n.turn.idle || stillQueued > 0 {
		return nil
	}
	return n.endTurn(sdk.TurnInterrupted, nil, "interrupted between claude's turns", nil)
}

// endTurn ends the host's turn in progress: its open items, and on an
// interrupt its subagents still running, then its usage and terminal.
func (n *normalizer) endTurn(status sdk.TurnStatus, failure *sdk.Failure, title string, raw json.RawMessage) []sdk.RuntimeEvent {
	t := n.turn
	n.turn = nil
	out := n.closeItems(n.root, t.ref)
	if status == sdk.TurnInterrupted {
		for _, key := range slices.Sorted(maps.Keys(n.children)) {
			if c := n.children[key]; !c.ended {
				out = append(out, n.endChild(c, sdk.TurnInterrupted, "")...)
			}
		}
	}
	u := t.usage
	var models []sdk.Usage
	for _, model := range slices.Sorted(maps.Keys(t.models)) {
		models = append(models, t.models[model])
	}
	if len(models) == 1 {
		u.Model = models[0].Model
	}
	if !u.IsZero() || len(models) > 0 {
		out = append(out, sdk.RuntimeEvent{Kind: sdk.EventUsage, ThreadRef: n.root, TurnRef: t.ref, Usage: &u, ModelUsage: models})
	}
	return append(out, sdk.RuntimeEvent{Kind: sdk.EventTurnTerminal, ThreadRef: n.root, TurnRef: t.ref, Status: status,
		Failure: failure, ThreadUsable: true, Title: title, Detail: raw})
}

// backgroundRunning says whether a background subagent the turn started
// is still running.
func (n *normalizer) backgroundRunning(turn string) bool {
	for _, c := range n.children {
		if c.rootTurn == turn && c.background && !c.ended {
			return true
		}
	}
	return false
}

// resultStatus maps a result to a turn status. A "success" result may
// still carry is_error (an API failure the CLI gave up on): failed.
func resultStatus(r resultFrame, interrupted bool) (sdk.TurnStatus, *sdk.Failure) {
	switch {
	case strings.HasPrefix(r.TerminalReason, "aborted"):
		return sdk.TurnInterrupted, nil
	case interrupted && r.Subtype == "error_during_execution":
		return sdk.TurnInterrupted, nil
	case r.Subtype == "success" && !r.IsError:
		return sdk.TurnCompleted, nil
	}
	code := r.Subtype
	if r.APIErrorStatus != nil {
		code = fmt.Sprintf("api_error_%d", *r.APIErrorStatus)
	} else if r.Subtype == "success" {
		code = "error"
	}
	msg := strings.Join(r.Errors, "; ")
	if msg == "" {
		msg = r.Result
	}
	if msg == "" {
		msg = "claude ended the turn with " + r.Subtype
	}
	return sdk.TurnFailed, &sdk.Failure{Code: code, Message: msg}
}

// exited ends what is still running when the CLI is gone: subagents'
// turns first, then the root's, failed, on a thread that cannot go on in
// this process.
func (n *normalizer) exited(message string) []sdk.RuntimeEvent {
	defer func() { n.turn = nil }()
	var out []sdk.RuntimeEvent
	for _, key := range slices.Sorted(maps.Keys(n.children)) {
		if c := n.children[key]; !c.ended {
			evs := n.endChild(c, "", message)
			out = append(out, evs...)
		}
	}
	if t := n.turn; t != nil && t.announced {
		// (A turn never announced, the CLI gone before it named its
		// session, the host never bound: runtime_exited tells it.)
		n.turn = nil
		out = append(out, n.closeItems(n.root, t.ref)...)
		out = append(out, sdk.RuntimeEvent{Kind: sdk.EventTurnTerminal, ThreadRef: n.root, TurnRef: t.ref, Status: sdk.TurnFailed,
			Failure: &sdk.Failure{Code: "provider_exited", Message: message}})
	}
	return out
}
