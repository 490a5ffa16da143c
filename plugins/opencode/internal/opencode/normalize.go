package opencode

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/baton-run/baton/sdk"
	"github.com/baton-run/baton/sdk/clock"
	"github.com/baton-run/baton/sdk/sessions"
)

// normalizer turns one opencode server's events into runtime events. It
// does no I/O; the session feeds it events in the order they arrived.
//
// Threads are opencode sessions: the session the plugin created (or
// resumed) is the root; a session whose parentID is a known thread (a task
// tool's child session) is announced with thread_started naming its parent
// before any of its turns. Sessions of other clients of the same server
// are ignored.
//
// Turns are user messages: a user message on a thread with no turn running
// starts one (its id is the turn ref), the assistant messages whose
// parentID is it belong to it, and the thread's session.idle ends it. A
// user message that arrives while a turn runs (a prompt queued while busy)
// joins the running turn.
type normalizer struct {
	root string
	cwd  string

	threads    map[string]bool     // announced sessions
	active     map[string]*running // session -> its running turn
	msgTurn    map[string]string   // message -> its turn; a user message's is kept (seen, and for rollback)
	msgRole    map[string]string   // message -> user or assistant
	items      sessions.Items[struct{}]
	callPart   map[string]string // tool callID -> part id
	rejected   map[string]bool   // tool callIDs whose permission was rejected
	clientTurn string            // the host's id for the next root turn
	expecting  bool              // a prompt was accepted; its root turn has not started
	abortNext  bool              // the client interrupted that turn before it started
	abortOnRun bool              // the root's running turn is to be aborted once it runs
	abortNow   string            // a session to abort now (see takeAbort)
	// clock is when events arrive, for a retry's next call (nil: the
	// system clock).
	clock clock.Clock
	raw   json.RawMessage // the event being normalized
	// mcpServers are the names of the host's MCP servers the session was
	// given: how an MCP tool's name is told from opencode's own (mcpTool).
	mcpServers []string
}

// running is a session's running turn, and what its end will say: all of
// it goes when the turn ends.
type running struct {
	id       string               // the turn ref: its user message's id
	busy     bool                 // the session went busy since the turn started
	aborting bool                 // the client asked for an abort, or opencode reported one
	failure  *sdk.Failure         // the turn's first error
	usage    sdk.Usage            // summed over its steps
	byModel  map[string]sdk.Usage // the same, by model
	models   map[string]string    // assistant message -> its model (providerID/modelID)
	limit    *sdk.Limit           // the provider limit the turn ends on
}

func newNormalizer(root, cwd string) *normalizer {
	n := &normalizer{cwd: cwd, threads: map[string]bool{}, active: map[string]*running{}, msgTurn: map[string]string{},
		msgRole: map[string]string{}, callPart: map[string]string{},
		rejected: map[string]bool{}}
	if root != "" {
		n.setRoot(root)
	}
	return n
}

// setRoot names the session's own opencode session.
func (n *normalizer) setRoot(id string) {
	n.root = id
	n.threads[id] = true
}

// expectTurn says that the next root turn is the one the host started as
// clientTurn.
func (n *normalizer) expectTurn(clientTurn string) {
	n.clientTurn, n.expecting, n.abortNext = clientTurn, true, false
}

// unexpectTurn forgets the expected turn: its prompt was not accepted.
func (n *normalizer) unexpectTurn() { n.clientTurn, n.expecting, n.abortNext = "", false, false }

// abortExpected says that the client interrupted the root turn its prompt
// starts before it started; false when no such turn is expected.
func (n *normalizer) abortExpected() bool {
	if !n.expecting {
		return false
	}
	n.abortNext = true
	return true
}

// takeAbort returns a session to abort now ("" for none): a turn
// interrupted before it started, once it runs (opencode aborts only a
// session that is busy).
func (n *normalizer) takeAbort() string {
	s := n.abortNow
	n.abortNow = ""
	return s
}

// activeTurn is a thread's running turn ("" when none).
func (n *normalizer) activeTurn(thread string) string {
	if t := n.active[thread]; t != nil {
		return t.id
	}
	return ""
}

// abort marks the thread's running turn as interrupted by the client: its
// end is an interruption.
func (n *normalizer) abort(thread string) {
	if t := n.active[thread]; t != nil {
		t.aborting = true
	}
}

// event normalizes one event. Malformed events become diagnostics.
func (n *normalizer) event(ev event) []sdk.RuntimeEvent {
	n.raw = ev.Raw
	out, err := n.dispatch(ev)
	if err != nil {
		return append(out, sdk.RuntimeEvent{Kind: sdk.EventDiagnostic, Title: "malformed event", Text: err.Error()})
	}
	return out
}

func decode[T any](ev event) (T, error) {
	var v T
	if err := json.Unmarshal(ev.Properties, &v); err != nil {
		return v, fmt.Errorf("%s: %w", ev.Type, err)
	}
	return v, nil
}

func (n *normalizer) dispatch(ev event) ([]sdk.RuntimeEvent, error) {
	switch ev.Type {
	case "session.created", "session.updated":
		p, err := decode[sessionEvent](ev)
		if err != nil {
			return nil, err
		}
		return n.session(p.Info), nil
	case "message.updated":
		p, err := decode[messageEvent](ev)
		if err != nil {
			return nil, err
		}
		return n.message(p.Info), nil
	case "message.part.updated":
		p, err := decode[partEvent](ev)
		if err != nil {
			return nil, err
		}
		return n.part(p.Part), nil
	case "message.part.delta":
		p, err := decode[deltaEvent](ev)
		if err != nil {
			return nil, err
		}
		return n.delta(p), nil
	case "session.status":
		p, err := decode[statusEvent](ev)
		if err != nil {
			return nil, err
		}
		if t := n.active[p.SessionID]; p.Status.Type == "busy" && t != nil {
			t.busy = true
			if p.SessionID == n.root && n.abortOnRun {
				n.abortOnRun = false
				t.aborting = true
				n.abortNow = p.SessionID
			}
		}
		if p.Status.Type == "retry" && n.threads[p.SessionID] {
			out := []sdk.RuntimeEvent{{Kind: sdk.EventDiagnostic, ThreadRef: p.SessionID, TurnRef: n.activeTurn(p.SessionID),
				Title: fmt.Sprintf("opencode retries the model call (attempt %d)", p.Status.Attempt), Text: p.Status.Message}}
			t := n.active[p.SessionID]
			if p.SessionID != n.root || t == nil || t.aborting || t.limit != nil {
				return out, nil
			}
			if l := retryLimit(p, n.raw, clock.Or(n.clock).Now()); l != nil {
				// A limit that does not clear soon: the turn ends on it
				// (the abort's idle ends it) instead of waiting unseen.
				t.limit, t.aborting, n.abortNow = l, true, p.SessionID
				out = append(out, sdk.RuntimeEvent{Kind: sdk.EventDiagnostic, ThreadRef: p.SessionID, TurnRef: t.id,
					Title: "the turn stops on the " + string(l.Kind) + " limit instead of waiting for opencode's retries"})
			}
			return out, nil
		}
		return nil, nil
	case "session.idle":
		p, err := decode[idleEvent](ev)
		if err != nil {
			return nil, err
		}
		return n.idle(p.SessionID), nil
	case "session.error":
		p, err := decode[sessionErrorEvent](ev)
		if err != nil {
			return nil, err
		}
		return n.sessionError(p), nil
	}
	return nil, nil // everything else carries nothing the host uses
}

// session announces a child session of a known thread.
func (n *normalizer) session(info sessionInfo) []sdk.RuntimeEvent {
	if info.ID == "" || n.threads[info.ID] || info.ParentID == "" || !n.threads[info.ParentID] {
		return nil
	}
	n.threads[info.ID] = true
	detail, _ := json.Marshal(map[string]string{"title": info.Title})
	return []sdk.RuntimeEvent{{Kind: sdk.EventThreadStarted, ThreadRef: info.ID, ParentThreadRef: info.ParentID,
		Title: info.Title, Detail: detail}}
}

// message starts a turn at a new user message, and binds assistant
// messages to their turn.
func (n *normalizer) message(m messageInfo) []sdk.RuntimeEvent {
	if m.ID == "" || !n.threads[m.SessionID] {
		return nil
	}
	switch m.Role {
	case "user":
		if _, seen := n.msgTurn[m.ID]; seen {
			return nil // an update of a user message already bound
		}
		if turn := n.activeTurn(m.SessionID); turn != "" {
			n.msgTurn[m.ID] = turn // queued while the turn ran: it is that turn's input now
			return nil
		}
		n.active[m.SessionID] = &running{id: m.ID}
		n.msgTurn[m.ID] = m.ID
		ev := sdk.RuntimeEvent{Kind: sdk.EventTurnStarted, ThreadRef: m.SessionID, TurnRef: m.ID}
		if m.SessionID == n.root {
			ev.ClientTurnID, n.clientTurn = n.clientTurn, ""
			n.abortOnRun, n.expecting, n.abortNext = n.abortNext, false, false
		}
		return []sdk.RuntimeEvent{ev}
	case "assistant":
		turn, ok := n.msgTurn[m.ParentID]
		if !ok || n.activeTurn(m.SessionID) != turn {
			return nil // not of a running turn: nothing of it is emitted
		}
		n.msgRole[m.ID] = "assistant"
		n.msgTurn[m.ID] = turn
		if m.ModelID != "" {
			r := n.active[m.SessionID]
			if r.models == nil {
				r.models = map[string]string{}
			}
			r.models[m.ID] = m.ProviderID + "/" + m.ModelID
		}
		if m.Error != nil {
			n.noteError(m.SessionID, m.Error)
		}
	}
	return nil
}

// noteError keeps the session's running turn's error for its terminal
// event; an abort is an interruption, not a failure.
func (n *normalizer) noteError(session string, e *errorInfo) {
	t := n.active[session]
	switch {
	case t == nil:
	case e.Name == "MessageAbortedError":
		t.aborting = true
	case t.failure == nil:
		t.failure = &sdk.Failure{Code: e.Name, Message: e.message()}
	}
	if t != nil && t.limit == nil {
		t.limit = errorLimit(e, n.raw, clock.Or(n.clock).Now())
	}
}

// turnOf is the running turn a part belongs to ("" when none).
func (n *normalizer) turnOf(session, message string) string {
	turn := n.msgTurn[message]
	if turn == "" || n.activeTurn(session) != turn {
		return ""
	}
	return turn
}

func (n *normalizer) part(p part) []sdk.RuntimeEvent {
	turn := n.turnOf(p.SessionID, p.MessageID)
	if turn == "" || n.msgRole[p.MessageID] != "assistant" || p.ID == "" {
		return nil
	}
	switch p.Type {
	case "text", "reasoning":
		if p.Synthetic {
			return nil
		}
		kind := sdk.ItemAssistantMessage
		if p.Type == "reasoning" {
			kind = sdk.ItemReasoning
		}
		out, it := n.open(p.SessionID, turn, p.ID, kind, "", nil)
		if p.Time == nil || p.Time.End == 0 {
			return out
		}
		if streamed := it.Streamed.String(); strings.HasPrefix(p.Text, streamed) && len(p.Text) > len(streamed) {
			out = append(out, sdk.RuntimeEvent{Kind: sdk.EventContentDelta, ThreadRef: p.SessionID, TurnRef: turn,
				ItemRef: p.ID, ItemKind: kind, Text: p.Text[len(streamed):]})
		}
		return append(out, n.complete(it, sdk.ItemDone, p.Text, nil))
	case "tool":
		return n.tool(p, turn)
	case "step-finish":
		if p.Tokens == nil {
			return nil
		}
		return []sdk.RuntimeEvent{n.step(n.active[p.SessionID], p)} // turn is the session's running turn
	}
	return nil
}

// step adds a step's usage, as opencode reports it at the step's end, to
// its turn's, and reports the turn's so far, by model where opencode
// named the model (the assistant message's providerID/modelID). The
// step's cost is opencode's (from the model's prices in its
// configuration; 0 where it has none).
func (n *normalizer) step(r *running, p part) sdk.RuntimeEvent {
	total := p.Tokens.Total
	if total == 0 {
		total = p.Tokens.Input + p.Tokens.Output + p.Tokens.Reasoning + p.Tokens.Cache.Read + p.Tokens.Cache.Write
	}
	u := sdk.Usage{InputTokens: p.Tokens.Input, OutputTokens: p.Tokens.Output, ReasoningTokens: p.Tokens.Reasoning,
		CachedInputTokens: p.Tokens.Cache.Read, TotalTokens: total, CostMicros: sdk.CostMicrosOf(p.Cost),
		Model: r.models[p.MessageID]}
	r.usage.Add(u)
	if u.Model != "" {
		if r.byModel == nil {
			r.byModel = map[string]sdk.Usage{}
		}
		m := r.byModel[u.Model]
		m.Add(u)
		r.byModel[u.Model] = m
	}
	c := r.usage
	ev := sdk.RuntimeEvent{Kind: sdk.EventUsage, ThreadRef: p.SessionID, TurnRef: r.id, Usage: &c}
	for _, m := range slices.Sorted(maps.Keys(r.byModel)) {
		ev.ModelUsage = append(ev.ModelUsage, r.byModel[m])
	}
	return ev
}

// open starts an item unless it is open.
func (n *normalizer) open(thread, turn, id string, kind sdk.ItemKind, title string, detail json.RawMessage) ([]sdk.RuntimeEvent, *sessions.Item[struct{}]) {
	it, started := n.items.Start(thread, turn, id, kind, title)
	if !started {
		return nil, it
	}
	ev := it.Started()
	ev.Detail = detail
	return []sdk.RuntimeEvent{ev}, it
}

func (n *normalizer) complete(it *sessions.Item[struct{}], status sdk.ItemStatus, text string, detail json.RawMessage) sdk.RuntimeEvent {
	ev := n.items.Complete(it, status)
	ev.Text, ev.Detail = text, detail
	return ev
}

// toolKind maps opencode's tool names to item kinds.
func toolKind(tool string) sdk.ItemKind {
	switch tool {
	case "bash":
		return sdk.ItemCommandExecution
	case "edit", "write", "patch", "multiedit", "apply_patch":
		return sdk.ItemFileChange
	case "task":
		return sdk.ItemSubagent
	}
	return sdk.ItemToolCall
}

// toolTitle says what a tool call does, from its input.
func (n *normalizer) toolTitle(tool string, input json.RawMessage) string {
	var in struct {
		Command     string `json:"command"`
		FilePath    string `json:"filePath"`
		Description string `json:"description"`
		Prompt      string `json:"prompt"`
	}
	_ = json.Unmarshal(input, &in)
	switch toolKind(tool) {
	case sdk.ItemCommandExecution:
		return in.Command
	case sdk.ItemFileChange:
		if in.FilePath != "" {
			return sdk.RelPath(n.cwd, in.FilePath)
		}
	case sdk.ItemSubagent:
		if in.Description != "" {
			return "task: " + in.Description
		}
	}
	return tool
}

func (n *normalizer) tool(p part, turn string) []sdk.RuntimeEvent {
	if p.State == nil {
		return nil
	}
	if p.CallID != "" {
		n.callPart[p.CallID] = p.ID
	}
	kind := toolKind(p.Tool)
	title := n.toolTitle(p.Tool, p.State.Input)
	server, mcp, isMCP := sdk.MCPToolOf(p.Tool, "", "_", n.mcpServers)
	switch {
	case isMCP:
		kind, title = sdk.ItemToolCall, sdk.MCPToolTitle(server, mcp)
	case p.State.Title != "" && kind == sdk.ItemToolCall:
		title = p.Tool + ": " + p.State.Title
	}
	fields := map[string]any{"tool": p.Tool, "callID": p.CallID, "input": p.State.Input}
	if isMCP {
		fields["mcpServer"], fields["mcpTool"] = server, mcp
	}
	detail, _ := json.Marshal(fields)
	out, it := n.open(p.SessionID, turn, p.ID, kind, title, detail)
	if it.Title == "" || it.Title == p.Tool {
		it.Title = title // the input arrives after the pending state
	}
	switch p.State.Status {
	case "completed":
		n.callDone(p.CallID)
		fields["output"], fields["metadata"] = p.State.Output, p.State.Metadata
		d, _ := json.Marshal(fields)
		return append(out, n.complete(it, sdk.ItemDone, p.State.Output, d))
	case "error":
		status := sdk.ItemFailed
		if n.rejected[p.CallID] {
			status = sdk.ItemDeclined
		}
		n.callDone(p.CallID)
		return append(out, n.complete(it, status, p.State.Error, detail))
	}
	return out
}

func (n *normalizer) delta(d deltaEvent) []sdk.RuntimeEvent {
	it := n.items.Get(d.SessionID, d.PartID)
	if it == nil || d.Field != "text" || d.Delta == "" {
		return nil
	}
	return []sdk.RuntimeEvent{it.Delta(d.Delta)}
}

func (n *normalizer) sessionError(p sessionErrorEvent) []sdk.RuntimeEvent {
	s := p.SessionID
	if s == "" {
		s = n.root
	}
	if !n.threads[s] || p.Error == nil {
		return nil
	}
	n.noteError(s, p.Error)
	if p.Error.Name == "MessageAbortedError" {
		return nil
	}
	return []sdk.RuntimeEvent{{Kind: sdk.EventDiagnostic, ThreadRef: s, TurnRef: n.activeTurn(s),
		Title: "opencode session error: " + p.Error.Name, Text: p.Error.message()}}
}

// idle ends the thread's running turn: interrupted when the client asked
// for an abort (or opencode reported one), failed on a session error.
//
// Only an idle after the turn's session went busy ends it: an abort's
// second session.idle can come after the next prompt's user message.
func (n *normalizer) idle(session string) []sdk.RuntimeEvent {
	t := n.active[session]
	if t == nil || !t.busy {
		return nil
	}
	status, failure := sdk.TurnCompleted, t.failure
	switch {
	case t.limit != nil:
		// Ended on a limit: failed, also when the plugin aborted it.
		if failure == nil || failure.Code == "MessageAbortedError" {
			failure = &sdk.Failure{Code: "provider_limit", Message: t.limit.Message}
		}
		out := n.end(session, t.id, sdk.TurnFailed, failure, true)
		out[len(out)-1].Limit = t.limit
		return out
	case t.aborting:
		status, failure = sdk.TurnInterrupted, nil
	case failure != nil:
		status = sdk.TurnFailed
	}
	return n.end(session, t.id, status, failure, true)
}

// end closes a turn's open items and emits its terminal event.
func (n *normalizer) end(session, turn string, status sdk.TurnStatus, failure *sdk.Failure, usable bool) []sdk.RuntimeEvent {
	itemStatus := sdk.ItemFailed
	if status == sdk.TurnCompleted {
		itemStatus = sdk.ItemDone
	}
	out := n.items.CloseTurn(session, turn, itemStatus, "")
	// What is kept of an ended turn is its user messages (rollback
	// tells the turns from them); its assistant messages are forgotten.
	for id := range n.msgRole {
		if n.msgTurn[id] == turn {
			delete(n.msgRole, id)
			delete(n.msgTurn, id)
		}
	}
	delete(n.active, session)
	if len(n.active) == 0 {
		clear(n.callPart) // the calls of tool parts that never completed
		clear(n.rejected)
	}
	return append(out, sdk.RuntimeEvent{Kind: sdk.EventTurnTerminal, ThreadRef: session, TurnRef: turn, Status: status,
		Failure: failure, ThreadUsable: usable})
}

// exited ends every running turn: opencode is gone. Child threads first.
func (n *normalizer) exited(report string) []sdk.RuntimeEvent {
	var out []sdk.RuntimeEvent
	for _, s := range slices.Sorted(maps.Keys(n.active)) {
		if s == n.root {
			continue
		}
		out = append(out, n.end(s, n.active[s].id, sdk.TurnFailed, &sdk.Failure{Code: "provider_exited", Message: report}, false)...)
	}
	if turn := n.activeTurn(n.root); turn != "" {
		out = append(out, n.end(n.root, turn, sdk.TurnFailed, &sdk.Failure{Code: "provider_exited", Message: report}, false)...)
	} else if n.expecting {
		// opencode took the prompt and died before its user message
		// started the turn: the host's turn is announced (named by its
		// client turn id, there being no message) and fails, rather than
		// never ending.
		ref := "unstarted/" + n.clientTurn
		out = append(out, sdk.RuntimeEvent{Kind: sdk.EventTurnStarted, ThreadRef: n.root, TurnRef: ref, ClientTurnID: n.clientTurn})
		n.clientTurn, n.expecting, n.abortNext = "", false, false
		out = append(out, n.end(n.root, ref, sdk.TurnFailed, &sdk.Failure{Code: "provider_exited", Message: report}, false)...)
	}
	return out
}

// permissionKind names a permission request by what it is about, in the
// host's request kinds: a command, a file change, or another permission
// (webfetch, external_directory, ...).
func permissionKind(permission string) sdk.RequestKind {
	switch permission {
	case "bash":
		return "command_approval"
	case "edit":
		return "file_change_approval"
	}
	return "permission"
}

// permissionOptions are the answers opencode takes.
var permissionOptions = []sdk.RequestOption{
	{ID: "once", Label: "Allow once", Kind: "allow_once"},
	{ID: "always", Label: "Always allow", Kind: "allow_always"},
	{ID: "reject", Label: "Reject", Kind: "reject_once"},
}

// permissionAsked opens a request for a permission.asked event; ok is
// false for a session that is not this session's.
func (n *normalizer) permissionAsked(p permissionAsked, raw json.RawMessage) (sdk.RuntimeEvent, bool) {
	if !n.threads[p.SessionID] || p.ID == "" {
		return sdk.RuntimeEvent{}, false
	}
	ev := sdk.RuntimeEvent{Kind: sdk.EventRequestOpened, ThreadRef: p.SessionID, TurnRef: n.activeTurn(p.SessionID),
		RequestRef: p.ID, RequestKind: permissionKind(p.Permission), Title: p.Permission + ": " + strings.Join(p.Patterns, ", "),
		Options: permissionOptions, Detail: raw}
	if p.Tool != nil {
		ev.ItemRef = n.callPart[p.Tool.CallID]
	}
	var meta struct {
		Command  string `json:"command"`
		FilePath string `json:"filepath"`
		Diff     string `json:"diff"`
	}
	_ = json.Unmarshal(p.Metadata, &meta)
	switch {
	case meta.Command != "":
		ev.Text = meta.Command
	case meta.Diff != "":
		ev.Text = meta.Diff
	case meta.FilePath != "":
		ev.Text = sdk.RelPath(n.cwd, meta.FilePath)
	}
	return ev, true
}

// callDone forgets a tool call that completed.
func (n *normalizer) callDone(callID string) {
	delete(n.callPart, callID)
	delete(n.rejected, callID)
}

// rejectedCall remembers a tool call whose permission was rejected: its
// error is a decline.
func (n *normalizer) rejectedCall(callID string) {
	if callID != "" {
		n.rejected[callID] = true
	}
}
