// Package modelserver implements a scripted, deterministic stand-in for the
// Anthropic Messages API. It is meant to sit behind ANTHROPIC_BASE_URL of a
// real agent (e.g. Claude Code via @zed-industries/claude-code-acp) so that
// the agent runs real turns without any real model.
//
// The script is an ordered list of replies; each reply is a list of content
// blocks (text or tool_use). Every "main" POST /v1/messages call consumes the
// next reply. Side calls the Claude Code CLI makes on its own (quota probe,
// title / topic generation with the small model, etc.) are recognised by
// IsSideCall and answered with a fixed short text without consuming the
// script.
package modelserver

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/baton-run/baton/sdk/clock"
)

// Block is one content block of a scripted reply.
type Block struct {
	// Type is "text" or "tool_use" (also "thinking", streamed as a thinking block).
	Type string `json:"type"`
	// Text is the text of a text (or thinking) block.
	Text string `json:"text,omitempty"`
	// ID is the tool_use id; generated deterministically when empty.
	ID string `json:"id,omitempty"`
	// Name is the tool name of a tool_use block (e.g. "Write").
	Name string `json:"name,omitempty"`
	// Input is the tool input object of a tool_use block.
	Input json.RawMessage `json:"input,omitempty"`
}

// Reply is one scripted model reply.
type Reply struct {
	Content []Block `json:"content"`
	// StopReason overrides the stop reason; by default "tool_use" when the
	// reply has a tool_use block, else "end_turn".
	StopReason string `json:"stop_reason,omitempty"`
	// DelayMS delays the stream after message_start by this many milliseconds
	// (useful to test cancellation mid turn).
	DelayMS int `json:"delay_ms,omitempty"`
	// HTTPError, when set, answers the call with this HTTP error instead
	// of a reply (Content is then empty).
	HTTPError *HTTPError `json:"http_error,omitempty"`
}

// UnmarshalJSON accepts either a bare list of blocks or an object
// {"content":[...], "stop_reason":..., "delay_ms":...}.
func (r *Reply) UnmarshalJSON(b []byte) error {
	type plain Reply
	return listOrObject(b, &r.Content, (*plain)(r))
}

// Script is an ordered list of replies.
type Script []Reply

// HTTPError is a scripted reply that is no model answer but an HTTP error:
// the status, headers and body a real API sends when a limit is hit (429
// with its rate-limit headers, 529 overloaded, 402 billing), so that a real
// agent reports the limit as it would in production. It is set on a Reply
// (Messages API) or a ResponsesReply (Responses API) as "http_error".
type HTTPError struct {
	Status  int               `json:"status"`
	Headers map[string]string `json:"headers,omitempty"`
	// Body is sent as it is (JSON).
	Body json.RawMessage `json:"body,omitempty"`
	// Repeat answers this many more requests (besides the first) with the
	// same error without consuming the script, for agents that retry a 429
	// on their own before they give up.
	Repeat int `json:"repeat,omitempty"`
	// ResetInSeconds, when set, is written into every header and body
	// value "{{RESET}}" as the Unix time that many seconds after the
	// request (and "{{RESET_ISO}}" as RFC 3339), so a recorded reset lies
	// a known distance after the frame that carries it.
	ResetInSeconds int `json:"reset_in_seconds,omitempty"`
}

// ParseScript parses a script: a JSON list of replies, or an object
// {"replies":[...]}.
func ParseScript(b []byte) (Script, error) {
	s, err := parseReplies[Reply](b)
	if err != nil {
		return nil, err
	}
	for i, r := range s {
		if he := r.HTTPError; he != nil {
			switch {
			case he.Status < 400 || he.Status > 599:
				return nil, fmt.Errorf("reply %d: http_error status %d is no HTTP error", i, he.Status)
			case he.Repeat < 0:
				return nil, fmt.Errorf("reply %d: http_error repeat %d is negative", i, he.Repeat)
			case len(r.Content) > 0:
				return nil, fmt.Errorf("reply %d: an http_error reply has no content", i)
			}
		}
		for j, bl := range r.Content {
			switch bl.Type {
			case "text", "thinking":
			case "tool_use":
				if bl.Name == "" {
					return nil, fmt.Errorf("reply %d block %d: tool_use without name", i, j)
				}
			default:
				return nil, fmt.Errorf("reply %d block %d: unknown block type %q", i, j, bl.Type)
			}
		}
	}
	return s, nil
}

// LoadScript reads and parses a script file.
func LoadScript(path string) (Script, error) { return loadFile(path, ParseScript) }

// MessagesRequest is the subset of a Messages API request that we look at.
type MessagesRequest struct {
	Model     string            `json:"model"`
	MaxTokens int               `json:"max_tokens"`
	Stream    bool              `json:"stream"`
	System    json.RawMessage   `json:"system,omitempty"`
	Messages  []json.RawMessage `json:"messages"`
	Tools     []json.RawMessage `json:"tools,omitempty"`
}

// SystemText flattens the system prompt (string or list of text blocks).
func (r *MessagesRequest) SystemText() string {
	if len(r.System) == 0 {
		return ""
	}
	var s string
	if json.Unmarshal(r.System, &s) == nil {
		return s
	}
	var blocks []struct {
		Text string `json:"text"`
	}
	if json.Unmarshal(r.System, &blocks) == nil {
		parts := make([]string, 0, len(blocks))
		for _, b := range blocks {
			parts = append(parts, b.Text)
		}
		return strings.Join(parts, "\n")
	}
	return string(r.System)
}

// sideCallMarkers are system-prompt fragments of the Claude Code CLI's own
// (non-agent-loop) model calls. They are only used to label log lines.
var sideCallMarkers = []string{
	"You are an expert at analyzing git history",
	"Analyze if this message indicates a new conversation topic",
	"Generate a concise",
	"write a 5-10 word title",
	"Summarize this coding conversation",
	"Your task is to create a detailed summary of the conversation",
	"Extract any file paths that this command",
	"Your task is to process Bash commands",
}

// mainLoopMarkers are system-prompt fragments that only the agent loop's
// own system prompt carries (Claude Code preset prompt).
var mainLoopMarkers = []string{
	"You are an interactive CLI tool that helps users",
	"You are an interactive agent that helps users",
}

// IsSideCall reports whether a request is one of the CLI's side calls rather
// than a turn of the agent loop.
//
// Observed with Claude Code 2.1.x (agent SDK 0.2.44): the agent loop
// (including Task subagents) always sends a non-empty "tools" list and the
// Claude Code system prompt; side calls (e.g. the session-start "analyzing
// git history" call on the small model claude-haiku-*, quota probe
// "quota"/max_tokens 1, title/topic generation) send "tools": [] or none.
// A request without tools still counts as a main call when its system prompt
// is the agent loop's (a session whose built-in tools are all disabled).
func IsSideCall(r *MessagesRequest) bool {
	if len(r.Tools) > 0 {
		return false
	}
	sys := r.SystemText()
	for _, m := range mainLoopMarkers {
		if strings.Contains(sys, m) {
			return false
		}
	}
	return true
}

// sideCallReason names why a request was classified as a side call (for logs).
func sideCallReason(r *MessagesRequest) string {
	sys := r.SystemText()
	for _, m := range sideCallMarkers {
		if strings.Contains(sys, m) {
			return "system:" + m
		}
	}
	if r.MaxTokens == 1 {
		return "max_tokens=1"
	}
	return "no-tools"
}

// Server is the scripted model server. Create with New.
type Server struct {
	// SideText is the fixed reply text for side calls.
	SideText string
	// ExhaustedText is the reply text once the script is used up.
	ExhaustedText string
	// ChunkRunes splits text deltas into chunks of at most this many runes
	// (0: one delta per block).
	ChunkRunes int
	Journal
	// Classify, when set, replaces IsSideCall.
	Classify func(*MessagesRequest) (side bool)
	// Clock is the time a scripted error's reset is counted from (nil:
	// the system clock).
	Clock clock.Clock

	mu      sync.Mutex
	script  Script
	next    int
	msgSeq  int
	toolSeq int
	repeats errorRepeats
}

// New returns a server serving script.
func New(script Script) *Server {
	return &Server{
		script:        script,
		SideText:      "OK",
		ExhaustedText: "(modelserver: script exhausted)",
	}
}

// Consumed returns how many script replies have been served.
func (s *Server) Consumed() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.next
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 64<<20))
	path := r.URL.Path
	switch {
	case r.Method == http.MethodPost && strings.HasSuffix(path, "/v1/messages/count_tokens"):
		var req MessagesRequest
		_ = json.Unmarshal(body, &req)
		s.record(LogEntry{Method: r.Method, Path: path, Kind: "count_tokens", Model: req.Model}, r.Header, body)
		writeJSON(w, http.StatusOK, map[string]any{"input_tokens": estimateTokens(body)})
	case r.Method == http.MethodPost && strings.HasSuffix(path, "/v1/messages"):
		s.serveMessages(w, r, path, body)
	default:
		s.record(LogEntry{Method: r.Method, Path: r.URL.RequestURI(), Kind: "other"}, r.Header, body)
		if r.Method == http.MethodHead {
			w.WriteHeader(http.StatusOK)
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{})
	}
}

func (s *Server) serveMessages(w http.ResponseWriter, r *http.Request, path string, body []byte) {
	var req MessagesRequest
	if err := json.Unmarshal(body, &req); err != nil {
		s.record(LogEntry{Method: r.Method, Path: path, Kind: "bad", Note: err.Error()}, r.Header, body)
		writeJSON(w, http.StatusBadRequest, map[string]any{
			"type":  "error",
			"error": map[string]any{"type": "invalid_request_error", "message": "modelserver: bad JSON: " + err.Error()},
		})
		return
	}
	var reply Reply
	e := LogEntry{Method: r.Method, Path: path, Model: req.Model}
	s.mu.Lock()
	classify := s.Classify
	if classify == nil {
		classify = IsSideCall
	}
	if classify(&req) {
		e.Kind = "side"
		e.Note = sideCallReason(&req)
		reply = Reply{Content: []Block{{Type: "text", Text: s.SideText}}}
		if req.MaxTokens == 1 {
			// The quota probe asks for a single token.
			reply.StopReason = "max_tokens"
		}
	} else {
		e.Kind = "main"
		if failing, ok := s.repeats.again(); ok {
			s.mu.Unlock()
			e.Note = fmt.Sprintf("http_error %d (repeat)", failing.Status)
			s.record(e, r.Header, body)
			failing.write(w, clock.Or(s.Clock).Now())
			return
		}
		if s.next < len(s.script) {
			reply = s.script[s.next]
			s.next++
			e.Reply = s.next
		} else {
			e.Note = "script-exhausted"
			reply = Reply{Content: []Block{{Type: "text", Text: s.ExhaustedText}}}
		}
		if he := reply.HTTPError; he != nil {
			s.repeats.serve(he)
			s.mu.Unlock()
			e.Note = fmt.Sprintf("http_error %d", he.Status)
			s.record(e, r.Header, body)
			he.write(w, clock.Or(s.Clock).Now())
			return
		}
	}
	s.msgSeq++
	msgID := fmt.Sprintf("msg_%024d", s.msgSeq)
	// Assign deterministic tool_use ids.
	blocks := make([]Block, len(reply.Content))
	copy(blocks, reply.Content)
	for i := range blocks {
		if blocks[i].Type == "tool_use" && blocks[i].ID == "" {
			s.toolSeq++
			blocks[i].ID = fmt.Sprintf("toolu_%024d", s.toolSeq)
		}
		if blocks[i].Type == "tool_use" && len(blocks[i].Input) == 0 {
			blocks[i].Input = json.RawMessage("{}")
		}
	}
	s.mu.Unlock()
	s.record(e, r.Header, body)

	stop := reply.StopReason
	if stop == "" {
		stop = "end_turn"
		for _, b := range blocks {
			if b.Type == "tool_use" {
				stop = "tool_use"
			}
		}
	}
	model := req.Model
	if model == "" {
		model = "claude-scripted"
	}
	inTok := estimateTokens(body)
	outTok := 0
	for _, b := range blocks {
		outTok += len(b.Text)/4 + len(b.Input)/4 + 1
	}
	if !req.Stream {
		content := make([]map[string]any, 0, len(blocks))
		for _, b := range blocks {
			content = append(content, blockJSON(b, false))
		}
		writeJSON(w, http.StatusOK, map[string]any{
			"id": msgID, "type": "message", "role": "assistant", "model": model,
			"content": content, "stop_reason": stop, "stop_sequence": nil,
			"usage": map[string]any{"input_tokens": inTok, "output_tokens": outTok},
		})
		return
	}
	ev := sseStream(w, "request-id", "req_"+msgID[4:])
	ev("message_start", map[string]any{"type": "message_start", "message": map[string]any{
		"id": msgID, "type": "message", "role": "assistant", "model": model,
		"content": []any{}, "stop_reason": nil, "stop_sequence": nil,
		"usage": map[string]any{"input_tokens": inTok, "output_tokens": 1,
			"cache_creation_input_tokens": 0, "cache_read_input_tokens": 0},
	}})
	ev("ping", map[string]any{"type": "ping"})
	if !delay(r, reply.DelayMS) {
		return
	}
	for i, b := range blocks {
		ev("content_block_start", map[string]any{"type": "content_block_start", "index": i, "content_block": blockJSON(b, true)})
		switch b.Type {
		case "text":
			for _, c := range chunk(b.Text, s.ChunkRunes) {
				ev("content_block_delta", map[string]any{"type": "content_block_delta", "index": i,
					"delta": map[string]any{"type": "text_delta", "text": c}})
			}
		case "thinking":
			for _, c := range chunk(b.Text, s.ChunkRunes) {
				ev("content_block_delta", map[string]any{"type": "content_block_delta", "index": i,
					"delta": map[string]any{"type": "thinking_delta", "thinking": c}})
			}
			ev("content_block_delta", map[string]any{"type": "content_block_delta", "index": i,
				"delta": map[string]any{"type": "signature_delta", "signature": "scripted"}})
		case "tool_use":
			in := compactJSON(b.Input)
			for _, c := range chunk(in, s.ChunkRunes) {
				ev("content_block_delta", map[string]any{"type": "content_block_delta", "index": i,
					"delta": map[string]any{"type": "input_json_delta", "partial_json": c}})
			}
		}
		ev("content_block_stop", map[string]any{"type": "content_block_stop", "index": i})
	}
	ev("message_delta", map[string]any{"type": "message_delta",
		"delta": map[string]any{"stop_reason": stop, "stop_sequence": nil},
		"usage": map[string]any{"output_tokens": outTok}})
	ev("message_stop", map[string]any{"type": "message_stop"})
}

func blockJSON(b Block, start bool) map[string]any {
	switch b.Type {
	case "tool_use":
		var in any = map[string]any{}
		if !start {
			_ = json.Unmarshal(b.Input, &in)
		}
		return map[string]any{"type": "tool_use", "id": b.ID, "name": b.Name, "input": in}
	case "thinking":
		if start {
			return map[string]any{"type": "thinking", "thinking": "", "signature": ""}
		}
		return map[string]any{"type": "thinking", "thinking": b.Text, "signature": "scripted"}
	default:
		if start {
			return map[string]any{"type": "text", "text": ""}
		}
		return map[string]any{"type": "text", "text": b.Text}
	}
}

func compactJSON(b json.RawMessage) string {
	if len(b) == 0 {
		return "{}"
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		return string(b)
	}
	return buf.String()
}

// chunk splits s into pieces of at most n runes (n<=0: one piece). An empty
// string yields no pieces.
func chunk(s string, n int) []string {
	if s == "" {
		return nil
	}
	if n <= 0 || utf8.RuneCountInString(s) <= n {
		return []string{s}
	}
	var out []string
	for len(s) > 0 {
		i, k := 0, 0
		for i < len(s) && k < n {
			_, sz := utf8.DecodeRuneInString(s[i:])
			i += sz
			k++
		}
		out = append(out, s[:i])
		s = s[i:]
	}
	return out
}

func estimateTokens(body []byte) int {
	return len(body)/4 + 1
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	w.Write(b)
}
