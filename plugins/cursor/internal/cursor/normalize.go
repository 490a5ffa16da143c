package cursor

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/baton-run/baton/sdk"
)

// normalizer turns one session's cursor-agent events into runtime events.
// It keeps the chat id across turns (processes) and the open items of the
// turn in progress. It does no I/O; the caller serializes calls.
type normalizer struct {
	cwd  string
	chat string // the chat id: the provider thread

	turn       string // the turn in progress ("" between turns)
	clientTurn string
	pid        int    // the turn's process, named in its turn_started
	started    bool   // turn_started emitted
	ended      bool   // turn_terminal emitted
	model      string // the model the turn's process named (its init): its usage's

	msg      *textItem // the assistant message being written
	think    string    // the ref of the reasoning being written ("" when none)
	items    int       // items made up by the plugin this turn
	sawDelta bool      // a --stream-partial-output delta came this turn
	tools    map[string]*toolItem

	// notFrame, when set, is told of each line that is not an event (the
	// turn's process, whose exit report quotes the first).
	notFrame func([]byte)
}

// textItem is the assistant message being written; its text so far tells
// a repeat of it from new text.
type textItem struct {
	ref  string
	text strings.Builder
}

type toolItem struct {
	ref  string
	kind sdk.ItemKind
}

func newNormalizer(cwd, chat string) *normalizer {
	return &normalizer{cwd: cwd, chat: chat}
}

// begin starts a turn run by process pid. Its turn_started comes at once
// when the chat is known, else with the chat id (system/init).
func (n *normalizer) begin(turn, clientTurn string, pid int) []sdk.RuntimeEvent {
	*n = normalizer{cwd: n.cwd, chat: n.chat, turn: turn, clientTurn: clientTurn, pid: pid, tools: map[string]*toolItem{}}
	if n.chat == "" {
		return nil
	}
	return n.start()
}

// start emits turn_started once.
func (n *normalizer) start() []sdk.RuntimeEvent {
	if n.started || n.turn == "" {
		return nil
	}
	n.started = true
	detail, _ := json.Marshal(map[string]int{"pid": n.pid})
	return []sdk.RuntimeEvent{{Kind: sdk.EventTurnStarted, ThreadRef: n.chat, TurnRef: n.turn, ClientTurnID: n.clientTurn,
		Detail: detail}}
}

// inTurn says whether events belong to a turn that has not ended.
func (n *normalizer) inTurn() bool { return n.turn != "" && !n.ended }

// line normalizes one stdout line. A line that is not an event is a
// diagnostic, never fatal.
func (n *normalizer) line(b []byte) []sdk.RuntimeEvent {
	e, err := DecodeEvent(b)
	if err != nil {
		if n.notFrame != nil {
			n.notFrame(b)
		}
		return []sdk.RuntimeEvent{{Kind: sdk.EventDiagnostic, Title: "malformed frame", Text: err.Error()}}
	}
	return n.event(e, b)
}

func (n *normalizer) event(e *event, raw []byte) []sdk.RuntimeEvent {
	switch e.Type {
	case "system":
		if e.Subtype == "init" {
			return n.init(e, raw)
		}
	case "user":
		if !n.inTurn() {
			return nil
		}
		out := n.start()
		ref := n.turn + "/user"
		text := e.Message.text()
		return append(out,
			sdk.RuntimeEvent{Kind: sdk.EventItemStarted, ThreadRef: n.chat, TurnRef: n.turn, ItemRef: ref,
				ItemKind: sdk.ItemUserMessage, Title: sdk.Title(text), Status: sdk.ItemInProgress},
			sdk.RuntimeEvent{Kind: sdk.EventItemCompleted, ThreadRef: n.chat, TurnRef: n.turn, ItemRef: ref,
				ItemKind: sdk.ItemUserMessage, Text: text, Status: sdk.ItemDone})
	case "assistant":
		if !n.inTurn() {
			return nil
		}
		return n.assistant(e)
	case "thinking":
		if !n.inTurn() {
			return nil
		}
		return n.thinking(e)
	case "tool_call":
		if !n.inTurn() {
			return nil
		}
		return n.toolCall(e, raw)
	case "result":
		if !n.inTurn() {
			return []sdk.RuntimeEvent{{Kind: sdk.EventDiagnostic, Title: "a result outside a turn", Detail: raw}}
		}
		return n.result(e, raw)
	}
	return []sdk.RuntimeEvent{{Kind: sdk.EventDiagnostic, Title: "unknown cursor-agent event " + strings.TrimSuffix(e.Type+"/"+e.Subtype, "/"),
		Detail: json.RawMessage(raw)}}
}

// init names the chat. The first names the provider thread; a resumed
// process names the chat it continues, and one that names another chat
// (the CLI did not resume) is reported and followed.
func (n *normalizer) init(e *event, raw []byte) []sdk.RuntimeEvent {
	var out []sdk.RuntimeEvent
	n.model = e.Model
	if e.SessionID != "" && e.SessionID != n.chat {
		if n.chat != "" {
			out = append(out, sdk.RuntimeEvent{Kind: sdk.EventDiagnostic, ThreadRef: e.SessionID,
				Title: "cursor-agent did not resume chat " + n.chat,
				Text:  "it started chat " + e.SessionID + "; the earlier context is not in it"})
		}
		n.chat = e.SessionID
		detail, _ := json.Marshal(map[string]string{"model": e.Model, "permissionMode": e.PermissionMode,
			"apiKeySource": e.APIKeySource})
		out = append(out, sdk.RuntimeEvent{Kind: sdk.EventThreadStarted, ThreadRef: n.chat, Detail: detail})
	}
	return append(out, n.start()...)
}

// assistant handles assistant text. Without --stream-partial-output each
// event is a whole message (the one before tool calls carries
// model_call_id and timestamp_ms; the last neither). With it, the pieces
// carry timestamp_ms and no model_call_id; the text before a tool call is
// sent again with model_call_id, and the whole reply once more without
// timestamp_ms. Those repeats are dropped.
func (n *normalizer) assistant(e *event) []sdk.RuntimeEvent {
	text := e.Message.text()
	delta := e.TimestampMs != nil && e.ModelCallID == ""
	switch {
	case delta:
		n.sawDelta = true
	case e.ModelCallID != "" && n.msg != nil && n.msg.text.Len() > 0 && strings.HasSuffix(n.msg.text.String(), text):
		return nil // the streamed text before a tool call, again
	case e.TimestampMs == nil && n.sawDelta:
		return nil // the whole reply, again
	}
	out := n.start()
	out = append(out, n.closeThinking()...)
	if n.msg == nil {
		n.msg = &textItem{ref: n.newRef("msg")}
		out = append(out, sdk.RuntimeEvent{Kind: sdk.EventItemStarted, ThreadRef: n.chat, TurnRef: n.turn, ItemRef: n.msg.ref,
			ItemKind: sdk.ItemAssistantMessage, Status: sdk.ItemInProgress})
	}
	if text == "" {
		return out
	}
	n.msg.text.WriteString(text)
	return append(out, sdk.RuntimeEvent{Kind: sdk.EventContentDelta, ThreadRef: n.chat, TurnRef: n.turn, ItemRef: n.msg.ref,
		ItemKind: sdk.ItemAssistantMessage, Text: text})
}

func (n *normalizer) thinking(e *event) []sdk.RuntimeEvent {
	out := n.start()
	switch e.Subtype {
	case "completed":
		return append(out, n.closeThinking()...)
	case "delta", "":
	default:
		return append(out, sdk.RuntimeEvent{Kind: sdk.EventDiagnostic, Title: "unknown cursor-agent event thinking/" + e.Subtype})
	}
	if n.think == "" {
		n.think = n.newRef("thinking")
		out = append(out, sdk.RuntimeEvent{Kind: sdk.EventItemStarted, ThreadRef: n.chat, TurnRef: n.turn, ItemRef: n.think,
			ItemKind: sdk.ItemReasoning, Status: sdk.ItemInProgress})
	}
	if e.Text == "" {
		return out
	}
	return append(out, sdk.RuntimeEvent{Kind: sdk.EventContentDelta, ThreadRef: n.chat, TurnRef: n.turn, ItemRef: n.think,
		ItemKind: sdk.ItemReasoning, Text: e.Text})
}

func (n *normalizer) newRef(kind string) string {
	n.items++
	return fmt.Sprintf("%s/%s-%d", n.turn, kind, n.items)
}

func (n *normalizer) closeThinking() []sdk.RuntimeEvent {
	if n.think == "" {
		return nil
	}
	ev := sdk.RuntimeEvent{Kind: sdk.EventItemCompleted, ThreadRef: n.chat, TurnRef: n.turn, ItemRef: n.think,
		ItemKind: sdk.ItemReasoning, Status: sdk.ItemDone}
	n.think = ""
	return []sdk.RuntimeEvent{ev}
}

func (n *normalizer) closeMessage() []sdk.RuntimeEvent {
	if n.msg == nil {
		return nil
	}
	ev := sdk.RuntimeEvent{Kind: sdk.EventItemCompleted, ThreadRef: n.chat, TurnRef: n.turn, ItemRef: n.msg.ref,
		ItemKind: sdk.ItemAssistantMessage, Status: sdk.ItemDone}
	n.msg = nil
	return []sdk.RuntimeEvent{ev}
}

// toolCall handles tool_call started and completed. A tool call ends the
// message and the reasoning before it.
func (n *normalizer) toolCall(e *event, raw []byte) []sdk.RuntimeEvent {
	out := n.start()
	out = append(out, n.closeThinking()...)
	out = append(out, n.closeMessage()...)
	tc, err := decodeToolCall(e.ToolCall)
	if err != nil || e.CallID == "" {
		if err == nil {
			err = fmt.Errorf("a tool call without a call_id")
		}
		return append(out, sdk.RuntimeEvent{Kind: sdk.EventDiagnostic, Title: "malformed tool_call " + e.Subtype,
			Text: err.Error(), Detail: json.RawMessage(raw)})
	}
	kind, title := n.describeTool(tc)
	switch e.Subtype {
	case "started":
		if _, open := n.tools[e.CallID]; open {
			return out
		}
		n.tools[e.CallID] = &toolItem{ref: e.CallID, kind: kind}
		return append(out, sdk.RuntimeEvent{Kind: sdk.EventItemStarted, ThreadRef: n.chat, TurnRef: n.turn, ItemRef: e.CallID,
			ItemKind: kind, Title: title, Status: sdk.ItemInProgress, Detail: n.toolDetail(tc, toolResult{})})
	case "completed":
		if _, open := n.tools[e.CallID]; !open {
			// A completion without its start: the item is made whole.
			out = append(out, sdk.RuntimeEvent{Kind: sdk.EventItemStarted, ThreadRef: n.chat, TurnRef: n.turn, ItemRef: e.CallID,
				ItemKind: kind, Title: title, Status: sdk.ItemInProgress})
		}
		delete(n.tools, e.CallID)
		res := decodeResult(tc.Result)
		ev := sdk.RuntimeEvent{Kind: sdk.EventItemCompleted, ThreadRef: n.chat, TurnRef: n.turn, ItemRef: e.CallID,
			ItemKind: kind, Title: title, Status: toolStatus(tc, res), Detail: n.toolDetail(tc, res), Text: toolText(tc, res)}
		return append(out, ev)
	}
	return append(out, sdk.RuntimeEvent{Kind: sdk.EventDiagnostic, Title: "unknown cursor-agent event tool_call/" + e.Subtype,
		Detail: json.RawMessage(raw)})
}

// describeTool is the item kind and title of a tool call.
func (n *normalizer) describeTool(tc toolCall) (sdk.ItemKind, string) {
	a := tc.args
	path := sdk.RelPath(n.cwd, cmp.Or(a.Path, a.TargetFile))
	switch tc.Variant {
	case "shellToolCall":
		return sdk.ItemCommandExecution, a.Command
	case "editToolCall":
		return sdk.ItemFileChange, "Edit " + path
	case "writeToolCall":
		return sdk.ItemFileChange, "Write " + path
	case "deleteToolCall":
		return sdk.ItemFileChange, "Delete " + path
	case "readToolCall":
		return sdk.ItemToolCall, "Read " + path
	case "grepToolCall":
		return sdk.ItemToolCall, strings.TrimSpace("Grep " + a.Pattern + " " + path)
	case "globToolCall":
		return sdk.ItemToolCall, "Glob " + cmp.Or(a.GlobPattern, a.Pattern)
	case "lsToolCall":
		return sdk.ItemToolCall, "List " + path
	case "todoToolCall", "updateTodosToolCall":
		return sdk.ItemToolCall, "Update the to-do list"
	case "mcpToolCall":
		return sdk.ItemToolCall, strings.TrimPrefix(cmp.Or(a.ProviderID, a.Name)+"/"+cmp.Or(a.ToolName, a.Name), "/")
	case "function":
		return sdk.ItemToolCall, cmp.Or(tc.Name, "function")
	case "task", "taskToolCall":
		return sdk.ItemSubagent, cmp.Or(a.Description, sdk.Title(a.Prompt), "Subagent")
	}
	return sdk.ItemToolCall, strings.TrimSuffix(tc.Variant, "ToolCall")
}

// toolStatus is a completed call's item status: a success is completed
// (a command that exited non-zero failed), an error failed, a rejection
// declined.
func toolStatus(tc toolCall, res toolResult) sdk.ItemStatus {
	switch res.Outcome {
	case "error":
		return sdk.ItemFailed
	case "rejected":
		return sdk.ItemDeclined
	}
	if sr := res.Shell; tc.Variant == "shellToolCall" && res.whole && sr.ExitCode != nil && *sr.ExitCode != 0 {
		return sdk.ItemFailed
	}
	return sdk.ItemDone
}

// toolText is what a completed item says: a command's output, a failure's
// message.
func toolText(tc toolCall, res toolResult) string {
	sr := res.Shell
	if tc.Variant == "shellToolCall" && (sr.Stdout != "" || sr.Stderr != "") {
		return sr.Stdout + sr.Stderr
	}
	if res.Outcome == "error" || res.Outcome == "rejected" {
		if msg := cmp.Or(sr.Message, sr.ErrorMessage, sr.Error, sr.Reason); msg != "" {
			return msg
		}
		var s string
		if json.Unmarshal(res.Body, &s) == nil {
			return s
		}
	}
	return ""
}

// toolDetail keeps what the item's node shows: for commands the command
// and its exit; for file changes the path; for the rest cursor's own call.
func (n *normalizer) toolDetail(tc toolCall, res toolResult) json.RawMessage {
	a := tc.args
	d := map[string]any{"tool": tc.Variant}
	switch tc.Variant {
	case "shellToolCall":
		d["command"] = a.Command
		if sr := res.Shell; res.whole {
			if sr.ExitCode != nil {
				d["exitCode"] = *sr.ExitCode
			}
			if sr.Stdout != "" {
				d["stdout"] = sr.Stdout
			}
			if sr.Stderr != "" {
				d["stderr"] = sr.Stderr
			}
			if sr.ExecutionTime != nil {
				d["durationMs"] = *sr.ExecutionTime
			}
		}
	case "editToolCall", "writeToolCall", "deleteToolCall":
		kind := map[string]string{"editToolCall": "update", "writeToolCall": "add", "deleteToolCall": "delete"}[tc.Variant]
		d["changes"] = []map[string]string{{"path": sdk.RelPath(n.cwd, cmp.Or(a.Path, a.TargetFile)), "kind": kind}}
	default:
		if len(tc.Args) > 0 {
			d["args"] = tc.Args
		}
	}
	if res.Outcome != "" {
		d["outcome"] = res.Outcome
		if tc.Variant != "shellToolCall" && len(res.Body) > 0 {
			d["result"] = res.Body
		}
	}
	b, _ := json.Marshal(d)
	return b
}

// result ends the turn: what is open closes, usage is reported, and the
// terminal event says how it went. The chat takes another turn either way.
func (n *normalizer) result(e *event, raw []byte) []sdk.RuntimeEvent {
	out := n.start()
	out = append(out, n.closeOpen(sdk.ItemFailed)...)
	if u := decodeUsage(e.Usage); u != nil {
		// The result states tokens only: no cost, no breakdown by model.
		u.Model = n.model
		out = append(out, sdk.RuntimeEvent{Kind: sdk.EventUsage, ThreadRef: n.chat, TurnRef: n.turn, Usage: u, Detail: e.Usage})
	}
	detail, _ := json.Marshal(map[string]any{"subtype": e.Subtype, "durationMs": e.DurationMs, "requestId": e.RequestID})
	term := sdk.RuntimeEvent{Kind: sdk.EventTurnTerminal, ThreadRef: n.chat, TurnRef: n.turn, Status: sdk.TurnCompleted,
		ThreadUsable: true, Detail: detail}
	if e.IsError || (e.Subtype != "" && e.Subtype != "success") {
		term.Status = sdk.TurnFailed
		term.Failure = &sdk.Failure{Code: cmp.Or(e.Subtype, "error"), Message: cmp.Or(e.resultText(), "cursor-agent reported an error")}
		term.Text = term.Failure.Message
	}
	n.ended = true
	return append(out, term)
}

// closeOpen ends every open item; tool calls still running get status.
func (n *normalizer) closeOpen(status sdk.ItemStatus) []sdk.RuntimeEvent {
	out := n.closeThinking()
	out = append(out, n.closeMessage()...)
	refs := make([]string, 0, len(n.tools))
	for ref := range n.tools {
		refs = append(refs, ref)
	}
	slices.Sort(refs)
	for _, ref := range refs {
		t := n.tools[ref]
		out = append(out, sdk.RuntimeEvent{Kind: sdk.EventItemCompleted, ThreadRef: n.chat, TurnRef: n.turn, ItemRef: t.ref,
			ItemKind: t.kind, Status: status, Text: "the tool call was still running when the turn ended"})
		delete(n.tools, ref)
	}
	return out
}

// exited ends a turn whose process is gone without a result: interrupted
// when the host asked for it (or closed the session), else failed with why.
// The chat is still there for the next process to resume.
func (n *normalizer) exited(interrupted bool, why string) []sdk.RuntimeEvent {
	if n.turn == "" || n.ended {
		n.turn = ""
		return nil
	}
	out := n.start()
	term := sdk.RuntimeEvent{Kind: sdk.EventTurnTerminal, ThreadRef: n.chat, TurnRef: n.turn, ThreadUsable: true}
	if interrupted {
		out = append(out, n.closeOpen(sdk.ItemDeclined)...)
		term.Status, term.Text = sdk.TurnInterrupted, why
	} else {
		out = append(out, n.closeOpen(sdk.ItemFailed)...)
		term.Status, term.Text = sdk.TurnFailed, why
		term.Failure = &sdk.Failure{Code: "provider_exited", Message: why}
	}
	n.ended = true
	n.turn = ""
	return append(out, term)
}

// done says that the turn has its terminal event.
func (n *normalizer) done() bool { return n.turn == "" || n.ended }

func decodeUsage(raw json.RawMessage) *sdk.Usage {
	if len(raw) == 0 {
		return nil
	}
	var u usage
	if json.Unmarshal(raw, &u) != nil {
		return nil
	}
	v := func(ps ...*int64) int64 {
		for _, p := range ps {
			if p != nil {
				return *p
			}
		}
		return 0
	}
	out := &sdk.Usage{
		InputTokens:       v(u.InputTokens, u.InputTokensS),
		OutputTokens:      v(u.OutputTokens, u.OutputTokensS),
		CachedInputTokens: v(u.CacheReadTokens, u.CacheReadTokensS, u.CacheReadInputS),
		ReasoningTokens:   v(u.ReasoningTokens, u.ReasoningTokensS),
		TotalTokens:       v(u.TotalTokens, u.TotalTokensS),
	}
	if out.TotalTokens == 0 {
		out.TotalTokens = out.InputTokens + out.OutputTokens + out.CachedInputTokens + v(u.CacheWriteTokens, u.CacheWriteTokensS)
	}
	if *out == (sdk.Usage{}) {
		return nil
	}
	return out
}
