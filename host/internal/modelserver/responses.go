package modelserver

// A scripted, deterministic stand-in for the OpenAI Responses API
// (POST /v1/responses with "stream": true), meant to sit behind a custom
// model provider of the real `codex` CLI (wire_api = "responses") so that
// `codex app-server` runs real turns without any real model.
//
// The script has the same shape as the Anthropic one: an ordered list of
// replies; each reply is a list of blocks ("text", "reasoning",
// "function_call", "custom_tool_call"), optionally with a delay. Every main
// request (one that carries the agent loop's tools) consumes the next reply.
// Requests without tools (side calls) and the other endpoints codex touches
// (GET /v1/models, POST /v1/responses/compact) never consume the script.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/baton-run/baton/sdk/clock"
)

// ResponsesBlock is one output item of a scripted Responses API reply.
type ResponsesBlock struct {
	// Type is "text" (an assistant message), "reasoning" (a reasoning item
	// whose summary is Text), "function_call" or "custom_tool_call".
	Type string `json:"type"`
	// Text is the text of a text block or the summary of a reasoning block.
	Text string `json:"text,omitempty"`
	// ID is the output item id; generated deterministically when empty.
	ID string `json:"id,omitempty"`
	// CallID is the call id of a tool call; generated when empty.
	CallID string `json:"call_id,omitempty"`
	// Name is the tool name of a tool call (codex 0.171: "exec_command",
	// "apply_patch", "spawn_agent", ...).
	Name string `json:"name,omitempty"`
	// Namespace is the namespace of a function_call to a tool of a
	// "namespace" tool group (codex 0.171: "multi_agent_v1" for
	// spawn_agent, wait_agent, ...); omitted when empty.
	Namespace string `json:"namespace,omitempty"`
	// Arguments are the function_call arguments: a JSON object (sent
	// compacted as a string) or a JSON string (sent as is). The text
	// "{{agent_id}}" in them is replaced by the last "agent_id" that a
	// function_call_output of the request's input carries (the id codex's
	// spawn_agent returns), so a script can wait_agent / send_input /
	// close_agent on a sub-agent whose id is only known at run time.
	Arguments json.RawMessage `json:"arguments,omitempty"`
	// Input is the raw input of a custom_tool_call (e.g. an apply_patch
	// patch text).
	Input string `json:"input,omitempty"`
}

// ResponsesReply is one scripted Responses API reply.
type ResponsesReply struct {
	Content []ResponsesBlock `json:"content"`
	// DelayMS delays the stream after response.created by this many
	// milliseconds (for interrupt / steer tests). The delay ends early when
	// the client goes away.
	DelayMS int `json:"delay_ms,omitempty"`
	// Error, when set, ends the stream with response.failed carrying this
	// error instead of response.completed (e.g. {"code":"server_error",
	// "message":"boom"}).
	Error *ResponsesError `json:"error,omitempty"`
	// HTTPError, when set, answers the call with this HTTP error instead
	// of a stream (Content is then empty).
	HTTPError *HTTPError `json:"http_error,omitempty"`
	// Thread, when set, restricts this reply to requests of a root thread
	// ("root") or of a sub-agent thread ("sub": codex marks those with the
	// x-openai-subagent / x-codex-parent-thread-id headers). Use it to keep
	// the script deterministic when a parent and a sub-agent sample at the
	// same time.
	Thread string `json:"thread,omitempty"`
	// Match, when set, restricts this reply to requests whose last input
	// item (as JSON) contains this substring.
	Match string `json:"match,omitempty"`
}

// ResponsesError is the error object of a response.failed event.
type ResponsesError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// UnmarshalJSON accepts either a bare list of blocks or an object
// {"content":[...], "delay_ms":..., "error":...}.
func (r *ResponsesReply) UnmarshalJSON(b []byte) error {
	type plain ResponsesReply
	return listOrObject(b, &r.Content, (*plain)(r))
}

// ResponsesScript is an ordered list of replies.
type ResponsesScript []ResponsesReply

// ParseResponsesScript parses a script: a JSON list of replies, or an object
// {"replies":[...]}.
func ParseResponsesScript(b []byte) (ResponsesScript, error) {
	s, err := parseReplies[ResponsesReply](b)
	if err != nil {
		return nil, err
	}
	for i, r := range s {
		if r.Thread != "" && r.Thread != "root" && r.Thread != "sub" {
			return nil, fmt.Errorf("reply %d: thread must be \"root\" or \"sub\", not %q", i, r.Thread)
		}
		if e := r.HTTPError; e != nil && (e.Status < 400 || e.Status > 599 || e.Repeat < 0 || e.ResetInSeconds < 0) {
			return nil, fmt.Errorf("reply %d: http_error needs a status 400-599 and no negative repeat or reset_in_seconds", i)
		}
		for j, bl := range r.Content {
			switch bl.Type {
			case "text", "reasoning":
			case "function_call":
				if bl.Name == "" {
					return nil, fmt.Errorf("reply %d block %d: function_call without name", i, j)
				}
				if a := bytes.TrimSpace(bl.Arguments); len(a) > 0 && a[0] != '{' && a[0] != '"' {
					return nil, fmt.Errorf("reply %d block %d: arguments must be an object or a string", i, j)
				}
			case "custom_tool_call":
				if bl.Name == "" {
					return nil, fmt.Errorf("reply %d block %d: custom_tool_call without name", i, j)
				}
			default:
				return nil, fmt.Errorf("reply %d block %d: unknown block type %q", i, j, bl.Type)
			}
		}
	}
	return s, nil
}

// LoadResponsesScript reads and parses a Responses script file.
func LoadResponsesScript(path string) (ResponsesScript, error) {
	return loadFile(path, ParseResponsesScript)
}

// ResponsesRequest is the subset of a Responses API request that we look at.
type ResponsesRequest struct {
	Model        string            `json:"model"`
	Instructions string            `json:"instructions,omitempty"`
	Stream       bool              `json:"stream"`
	Input        []json.RawMessage `json:"input,omitempty"`
	Tools        []json.RawMessage `json:"tools,omitempty"`

	// ParentThread is the parent thread id of a sub-agent's request (from
	// the x-codex-parent-thread-id header or the parent_thread_id of the
	// x-codex-turn-metadata header; not part of the body). Empty for a root
	// thread.
	ParentThread string `json:"-"`
	// Subagent is the x-openai-subagent header (e.g. "collab_spawn").
	Subagent string `json:"-"`
}

// fillFromHeaders sets the header-derived fields of a request.
func (r *ResponsesRequest) fillFromHeaders(h http.Header) {
	r.Subagent = h.Get("x-openai-subagent")
	r.ParentThread = h.Get("x-codex-parent-thread-id")
	if r.ParentThread == "" {
		var md struct {
			ParentThreadID string `json:"parent_thread_id"`
		}
		_ = json.Unmarshal([]byte(h.Get("x-codex-turn-metadata")), &md)
		r.ParentThread = md.ParentThreadID
	}
}

// IsSubagent reports whether the request comes from a sub-agent thread.
func (r *ResponsesRequest) IsSubagent() bool {
	return r.ParentThread != "" || r.Subagent != ""
}

// matches reports whether a reply may answer the request.
func (r *ResponsesReply) matches(req *ResponsesRequest) bool {
	switch r.Thread {
	case "root":
		if req.IsSubagent() {
			return false
		}
	case "sub":
		if !req.IsSubagent() {
			return false
		}
	}
	if r.Match != "" {
		if len(req.Input) == 0 || !strings.Contains(string(req.Input[len(req.Input)-1]), r.Match) {
			return false
		}
	}
	return true
}

// ToolNames returns the names of the request's tools (for function and
// custom tools; other tool types by their type).
func (r *ResponsesRequest) ToolNames() []string {
	out := make([]string, 0, len(r.Tools))
	for _, t := range r.Tools {
		var v struct {
			Type string `json:"type"`
			Name string `json:"name"`
		}
		_ = json.Unmarshal(t, &v)
		if v.Name != "" {
			out = append(out, v.Name)
		} else {
			out = append(out, v.Type)
		}
	}
	return out
}

const agentIDPlaceholder = "{{agent_id}}"

// lastAgentID returns the last "agent_id" found in the JSON output of a
// function_call_output input item (codex's spawn_agent result).
func (r *ResponsesRequest) lastAgentID() string {
	for i := len(r.Input) - 1; i >= 0; i-- {
		var it struct {
			Type   string `json:"type"`
			Output string `json:"output"`
		}
		if json.Unmarshal(r.Input[i], &it) != nil || it.Type != "function_call_output" {
			continue
		}
		var out struct {
			AgentID string `json:"agent_id"`
		}
		if json.Unmarshal([]byte(it.Output), &out) == nil && out.AgentID != "" {
			return out.AgentID
		}
	}
	return ""
}

// lastUserText returns the text of the last user message of the input.
func (r *ResponsesRequest) lastUserText() string {
	for i := len(r.Input) - 1; i >= 0; i-- {
		var m struct {
			Type    string          `json:"type"`
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		}
		if json.Unmarshal(r.Input[i], &m) != nil || m.Role != "user" {
			continue
		}
		var s string
		if json.Unmarshal(m.Content, &s) == nil {
			return s
		}
		var parts []struct {
			Text string `json:"text"`
		}
		_ = json.Unmarshal(m.Content, &parts)
		texts := make([]string, 0, len(parts))
		for _, p := range parts {
			texts = append(texts, p.Text)
		}
		return strings.Join(texts, "\n")
	}
	return ""
}

// compactionMarkers are fragments of the prompt codex sends (as the last
// user message) when it compacts a thread's history locally.
var compactionMarkers = []string{
	"CONTEXT CHECKPOINT COMPACTION",
	"You are performing a CONTEXT CHECKPOINT",
	"Create a handoff summary",
}

// IsResponsesSideCall reports whether a Responses request is one of the
// CLI's own side calls rather than a sampling request of the agent loop.
//
// Observed with codex 0.171.0: every agent-loop request (root thread and
// sub-agent threads alike) carries a non-empty "tools" list; a local
// compaction request carries the compaction prompt as its last user message.
func IsResponsesSideCall(r *ResponsesRequest) bool {
	if len(r.Tools) == 0 {
		return true
	}
	return responsesSideReason(r) != ""
}

func responsesSideReason(r *ResponsesRequest) string {
	last := r.lastUserText()
	for _, m := range compactionMarkers {
		if strings.Contains(last, m) {
			return "compaction"
		}
	}
	if len(r.Tools) == 0 {
		return "no-tools"
	}
	return ""
}

// ResponsesServer is the scripted OpenAI Responses API server. Create it
// with NewResponses.
type ResponsesServer struct {
	// SideText is the fixed reply text for side calls (and compaction).
	SideText string
	// ExhaustedText is the reply text once the script is used up.
	ExhaustedText string
	// ChunkRunes splits text / argument deltas into chunks of at most this
	// many runes (0: one delta per item).
	ChunkRunes int
	// Models are the model ids listed by GET /v1/models (default
	// "gpt-scripted").
	Models []string
	Journal
	// Classify, when set, replaces IsResponsesSideCall.
	Classify func(*ResponsesRequest) (side bool)
	// Clock is the time of a scripted HTTP error's reset (nil: the system
	// clock).
	Clock clock.Clock

	mu      sync.Mutex
	script  ResponsesScript
	used    []bool
	next    int // number of replies served
	seq     int
	respSeq int
	itemSeq int
	callSeq int
	entries []LogEntry
	repeats errorRepeats
}

// NewResponses returns a Responses API server serving script.
func NewResponses(script ResponsesScript) *ResponsesServer {
	return &ResponsesServer{
		script:        script,
		used:          make([]bool, len(script)),
		SideText:      "OK",
		ExhaustedText: "(modelserver: script exhausted)",
	}
}

// Consumed returns how many script replies have been served.
func (s *ResponsesServer) Consumed() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.next
}

// ServeHTTP implements http.Handler.
func (s *ResponsesServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 64<<20))
	path := r.URL.Path
	switch {
	case r.Method == http.MethodPost && strings.HasSuffix(path, "/responses/compact"):
		s.serveCompact(w, r, path, body)
	case r.Method == http.MethodPost && strings.HasSuffix(path, "/responses"):
		s.serveResponses(w, r, path, body)
	case r.Method == http.MethodGet && strings.HasSuffix(path, "/models"):
		s.record(LogEntry{Method: r.Method, Path: r.URL.RequestURI(), Kind: "models"}, r.Header, nil)
		writeJSON(w, http.StatusOK, s.modelList())
	default:
		s.record(LogEntry{Method: r.Method, Path: r.URL.RequestURI(), Kind: "other"}, r.Header, body)
		if r.Method == http.MethodHead {
			w.WriteHeader(http.StatusOK)
			return
		}
		writeJSON(w, http.StatusNotFound, map[string]any{"error": map[string]any{
			"type": "invalid_request_error", "code": "not_found",
			"message": "modelserver: no such endpoint " + r.Method + " " + path,
		}})
	}
}

// modelList answers GET /v1/models in both the OpenAI shape ("data") and
// codex's own model-catalog shape ("models": an empty list makes codex keep
// its bundled catalog).
func (s *ResponsesServer) modelList() map[string]any {
	ids := s.Models
	if len(ids) == 0 {
		ids = []string{"gpt-scripted"}
	}
	data := make([]map[string]any, 0, len(ids))
	for _, id := range ids {
		data = append(data, map[string]any{"id": id, "object": "model", "created": 0, "owned_by": "baton"})
	}
	return map[string]any{"object": "list", "data": data, "models": []any{}}
}

func (s *ResponsesServer) serveCompact(w http.ResponseWriter, r *http.Request, path string, body []byte) {
	var req ResponsesRequest
	_ = json.Unmarshal(body, &req)
	s.record(LogEntry{Method: r.Method, Path: path, Kind: "compact", Model: req.Model}, r.Header, body)
	writeJSON(w, http.StatusOK, map[string]any{"output": []any{map[string]any{
		"type": "message", "role": "user",
		"content": []any{map[string]any{"type": "input_text", "text": s.SideText}},
	}}})
}

// wireItem is a block with its ids assigned.
type wireItem struct {
	ResponsesBlock
	args string // function_call arguments as sent
}

// pick returns the index of the first unused reply that may answer req, or
// -1. Called with s.mu held.
func (s *ResponsesServer) pick(req *ResponsesRequest) int {
	for i := range s.script {
		if !s.used[i] && s.script[i].matches(req) {
			return i
		}
	}
	return -1
}

func (s *ResponsesServer) serveResponses(w http.ResponseWriter, r *http.Request, path string, body []byte) {
	var req ResponsesRequest
	if err := json.Unmarshal(body, &req); err != nil {
		s.record(LogEntry{Method: r.Method, Path: path, Kind: "bad", Note: err.Error()}, r.Header, body)
		writeJSON(w, http.StatusBadRequest, map[string]any{"error": map[string]any{
			"type": "invalid_request_error", "code": "bad_json", "message": "modelserver: bad JSON: " + err.Error(),
		}})
		return
	}
	req.fillFromHeaders(r.Header)
	e := LogEntry{Method: r.Method, Path: path, Model: req.Model}
	var reply ResponsesReply
	s.mu.Lock()
	classify := s.Classify
	if classify == nil {
		classify = IsResponsesSideCall
	}
	if classify(&req) {
		e.Kind = "side"
		e.Note = responsesSideReason(&req)
		reply = ResponsesReply{Content: []ResponsesBlock{{Type: "text", Text: s.SideText}}}
	} else {
		e.Kind = "main"
		if herr, ok := s.repeats.again(); ok {
			s.mu.Unlock()
			e.Note = fmt.Sprintf("http-error %d (repeated)", herr.Status)
			s.record(e, r.Header, body)
			herr.write(w, clock.Or(s.Clock).Now())
			return
		}
		if i := s.pick(&req); i >= 0 {
			reply = s.script[i]
			s.used[i] = true
			s.next++
			e.Reply = i + 1
		} else {
			e.Note = "script-exhausted"
			reply = ResponsesReply{Content: []ResponsesBlock{{Type: "text", Text: s.ExhaustedText}}}
		}
		if req.IsSubagent() {
			e.Note = strings.TrimPrefix(e.Note+" subagent", " ")
		}
	}
	if herr := reply.HTTPError; herr != nil {
		s.repeats.serve(herr)
		s.mu.Unlock()
		e.Note = strings.TrimPrefix(e.Note+fmt.Sprintf(" http-error %d", herr.Status), " ")
		s.record(e, r.Header, body)
		herr.write(w, clock.Or(s.Clock).Now())
		return
	}
	s.respSeq++
	respID := fmt.Sprintf("resp_%024d", s.respSeq)
	items := make([]wireItem, len(reply.Content))
	for i, b := range reply.Content {
		it := wireItem{ResponsesBlock: b}
		if it.ID == "" {
			s.itemSeq++
			prefix := map[string]string{"text": "msg", "reasoning": "rs", "function_call": "fc", "custom_tool_call": "ctc"}[b.Type]
			it.ID = fmt.Sprintf("%s_%024d", prefix, s.itemSeq)
		}
		if (b.Type == "function_call" || b.Type == "custom_tool_call") && it.CallID == "" {
			s.callSeq++
			it.CallID = fmt.Sprintf("call_%024d", s.callSeq)
		}
		if b.Type == "function_call" {
			it.args = argumentsString(b.Arguments)
			if strings.Contains(it.args, agentIDPlaceholder) {
				it.args = strings.ReplaceAll(it.args, agentIDPlaceholder, req.lastAgentID())
			}
		}
		items[i] = it
	}
	s.mu.Unlock()
	s.record(e, r.Header, body)

	model := req.Model
	if model == "" {
		model = "gpt-scripted"
	}
	inTok := estimateTokens(body)
	outTok := 0
	for _, it := range items {
		outTok += len(it.Text)/4 + len(it.args)/4 + len(it.Input)/4 + 1
	}
	created := time.Now().Unix()
	respObj := func(status string, output []any, usage any) map[string]any {
		return map[string]any{
			"id": respID, "object": "response", "created_at": created, "status": status,
			"model": model, "output": output, "usage": usage, "error": nil,
			"incomplete_details": nil, "parallel_tool_calls": false, "tool_choice": "auto",
		}
	}

	if !req.Stream {
		output := make([]any, 0, len(items))
		for _, it := range items {
			output = append(output, itemJSON(it, true))
		}
		writeJSON(w, http.StatusOK, respObj("completed", output, responsesUsage(inTok, outTok)))
		return
	}

	send := sseStream(w, "x-request-id", "req_"+respID[5:])
	seqNo := 0
	ev := func(name string, data map[string]any) {
		data["type"] = name
		data["sequence_number"] = seqNo
		seqNo++
		send(name, data)
	}
	ev("response.created", map[string]any{"response": respObj("in_progress", []any{}, nil)})
	ev("response.in_progress", map[string]any{"response": respObj("in_progress", []any{}, nil)})
	if !delay(r, reply.DelayMS) {
		return
	}
	output := make([]any, 0, len(items))
	for i, it := range items {
		ev("response.output_item.added", map[string]any{"output_index": i, "item": itemJSON(it, false)})
		switch it.Type {
		case "text":
			part := func(text string) map[string]any {
				return map[string]any{"type": "output_text", "text": text, "annotations": []any{}}
			}
			ev("response.content_part.added", map[string]any{"item_id": it.ID, "output_index": i, "content_index": 0, "part": part("")})
			for _, c := range chunk(it.Text, s.ChunkRunes) {
				ev("response.output_text.delta", map[string]any{"item_id": it.ID, "output_index": i, "content_index": 0, "delta": c})
			}
			ev("response.output_text.done", map[string]any{"item_id": it.ID, "output_index": i, "content_index": 0, "text": it.Text})
			ev("response.content_part.done", map[string]any{"item_id": it.ID, "output_index": i, "content_index": 0, "part": part(it.Text)})
		case "reasoning":
			part := func(text string) map[string]any { return map[string]any{"type": "summary_text", "text": text} }
			ev("response.reasoning_summary_part.added", map[string]any{"item_id": it.ID, "output_index": i, "summary_index": 0, "part": part("")})
			for _, c := range chunk(it.Text, s.ChunkRunes) {
				ev("response.reasoning_summary_text.delta", map[string]any{"item_id": it.ID, "output_index": i, "summary_index": 0, "delta": c})
			}
			ev("response.reasoning_summary_text.done", map[string]any{"item_id": it.ID, "output_index": i, "summary_index": 0, "text": it.Text})
			ev("response.reasoning_summary_part.done", map[string]any{"item_id": it.ID, "output_index": i, "summary_index": 0, "part": part(it.Text)})
		case "function_call":
			for _, c := range chunk(it.args, s.ChunkRunes) {
				ev("response.function_call_arguments.delta", map[string]any{"item_id": it.ID, "output_index": i, "delta": c})
			}
			ev("response.function_call_arguments.done", map[string]any{"item_id": it.ID, "output_index": i, "arguments": it.args})
		case "custom_tool_call":
			for _, c := range chunk(it.Input, s.ChunkRunes) {
				ev("response.custom_tool_call_input.delta", map[string]any{"item_id": it.ID, "output_index": i, "delta": c})
			}
			ev("response.custom_tool_call_input.done", map[string]any{"item_id": it.ID, "output_index": i, "input": it.Input})
		}
		done := itemJSON(it, true)
		output = append(output, done)
		ev("response.output_item.done", map[string]any{"output_index": i, "item": done})
	}
	if reply.Error != nil {
		resp := respObj("failed", output, nil)
		resp["error"] = map[string]any{"code": reply.Error.Code, "message": reply.Error.Message}
		ev("response.failed", map[string]any{"response": resp})
		return
	}
	ev("response.completed", map[string]any{"response": respObj("completed", output, responsesUsage(inTok, outTok))})
}

func responsesUsage(in, out int) map[string]any {
	return map[string]any{
		"input_tokens":          in,
		"input_tokens_details":  map[string]any{"cached_tokens": 0},
		"output_tokens":         out,
		"output_tokens_details": map[string]any{"reasoning_tokens": 0},
		"total_tokens":          in + out,
	}
}

// argumentsString turns scripted arguments (object or JSON string) into the
// string a function_call item carries.
func argumentsString(a json.RawMessage) string {
	a = bytes.TrimSpace(a)
	if len(a) == 0 {
		return "{}"
	}
	if a[0] == '"' {
		var s string
		if json.Unmarshal(a, &s) == nil {
			return s
		}
	}
	return compactJSON(a)
}

// itemJSON renders an output item; done selects the completed form (full
// content) over the in-progress form of output_item.added.
func itemJSON(it wireItem, done bool) map[string]any {
	status := "in_progress"
	if done {
		status = "completed"
	}
	switch it.Type {
	case "reasoning":
		summary := []any{}
		if done && it.Text != "" {
			summary = append(summary, map[string]any{"type": "summary_text", "text": it.Text})
		}
		return map[string]any{"id": it.ID, "type": "reasoning", "summary": summary}
	case "function_call":
		args := ""
		if done {
			args = it.args
		}
		m := map[string]any{"id": it.ID, "type": "function_call", "status": status,
			"name": it.Name, "call_id": it.CallID, "arguments": args}
		if it.Namespace != "" {
			m["namespace"] = it.Namespace
		}
		return m
	case "custom_tool_call":
		input := ""
		if done {
			input = it.Input
		}
		return map[string]any{"id": it.ID, "type": "custom_tool_call", "status": status,
			"name": it.Name, "call_id": it.CallID, "input": input}
	default:
		content := []any{}
		if done {
			content = append(content, map[string]any{"type": "output_text", "text": it.Text, "annotations": []any{}})
		}
		return map[string]any{"id": it.ID, "type": "message", "status": status, "role": "assistant", "content": content}
	}
}
