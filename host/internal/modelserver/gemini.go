package modelserver

// A scripted, deterministic stand-in for the Gemini API
// (POST /v1beta/models/{model}:streamGenerateContent?alt=sse,
// :generateContent and :countTokens), meant to sit behind
// GOOGLE_GEMINI_BASE_URL of the real gemini-cli (`gemini --acp`) so that it
// runs real turns without any real model.
//
// The script has the shape of the other two: an ordered list of replies;
// each reply is a list of blocks ("text", "thought", "function_call"),
// optionally with a delay or an HTTP error. Every main request (one that
// carries the agent loop's tools as functionDeclarations and asks for no
// JSON answer) consumes the next reply. gemini-cli's own side calls (the
// model router, the next-speaker check, loop detection, summaries: requests
// with a JSON response config or without tools) never consume the script:
// a JSON one is answered with a minimal value of the schema it asks for, the
// others with a fixed text.

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"

	"github.com/baton-run/baton/sdk/clock"
)

// GeminiBlock is one part of a scripted Gemini reply.
type GeminiBlock struct {
	// Type is "text", "thought" (a text part with thought:true) or
	// "function_call".
	Type string `json:"type"`
	// Text is the text of a text or thought block.
	Text string `json:"text,omitempty"`
	// ID is the function call id; generated deterministically when empty
	// (gemini-cli would otherwise make one from the clock and a random
	// number).
	ID string `json:"id,omitempty"`
	// Name is the function name of a function_call (gemini-cli 0.61:
	// "write_file", "run_shell_command", "read_file", ...).
	Name string `json:"name,omitempty"`
	// Args is the function call's argument object.
	Args json.RawMessage `json:"args,omitempty"`
}

// GeminiReply is one scripted Gemini reply.
type GeminiReply struct {
	Content []GeminiBlock `json:"content"`
	// FinishReason overrides the finish reason (default "STOP").
	FinishReason string `json:"finish_reason,omitempty"`
	// DelayMS delays the stream before its first chunk by this many
	// milliseconds (the delay ends early when the client goes away).
	DelayMS int `json:"delay_ms,omitempty"`
	// HTTPError, when set, answers the call with this HTTP error instead
	// of a reply (Content is then empty).
	HTTPError *HTTPError `json:"http_error,omitempty"`
}

// UnmarshalJSON accepts either a bare list of blocks or an object
// {"content":[...], "finish_reason":..., "delay_ms":...}.
func (r *GeminiReply) UnmarshalJSON(b []byte) error {
	type plain GeminiReply
	return listOrObject(b, &r.Content, (*plain)(r))
}

// GeminiScript is an ordered list of replies.
type GeminiScript []GeminiReply

// ParseGeminiScript parses a script: a JSON list of replies, or an object
// {"replies":[...]}.
func ParseGeminiScript(b []byte) (GeminiScript, error) {
	s, err := parseReplies[GeminiReply](b)
	if err != nil {
		return nil, err
	}
	for i, r := range s {
		if e := r.HTTPError; e != nil {
			switch {
			case e.Status < 400 || e.Status > 599 || e.Repeat < 0 || e.ResetInSeconds < 0:
				return nil, fmt.Errorf("reply %d: http_error needs a status 400-599 and no negative repeat or reset_in_seconds", i)
			case len(r.Content) > 0:
				return nil, fmt.Errorf("reply %d: an http_error reply has no content", i)
			}
		}
		for j, bl := range r.Content {
			switch bl.Type {
			case "text", "thought":
			case "function_call":
				if bl.Name == "" {
					return nil, fmt.Errorf("reply %d block %d: function_call without name", i, j)
				}
				var obj map[string]any
				if len(bl.Args) > 0 && json.Unmarshal(bl.Args, &obj) != nil {
					return nil, fmt.Errorf("reply %d block %d: args must be an object", i, j)
				}
			default:
				return nil, fmt.Errorf("reply %d block %d: unknown block type %q", i, j, bl.Type)
			}
		}
	}
	return s, nil
}

// LoadGeminiScript reads and parses a Gemini script file.
func LoadGeminiScript(path string) (GeminiScript, error) { return loadFile(path, ParseGeminiScript) }

// GeminiRequest is the subset of a generateContent request that we look at.
type GeminiRequest struct {
	Contents          []json.RawMessage `json:"contents,omitempty"`
	SystemInstruction json.RawMessage   `json:"systemInstruction,omitempty"`
	Tools             []struct {
		FunctionDeclarations []struct {
			Name string `json:"name"`
		} `json:"functionDeclarations,omitempty"`
	} `json:"tools,omitempty"`
	GenerationConfig struct {
		ResponseMimeType   string          `json:"responseMimeType,omitempty"`
		ResponseSchema     json.RawMessage `json:"responseSchema,omitempty"`
		ResponseJSONSchema json.RawMessage `json:"responseJsonSchema,omitempty"`
	} `json:"generationConfig"`
}

// functionCount is the number of function declarations the request offers.
func (r *GeminiRequest) functionCount() int {
	n := 0
	for _, t := range r.Tools {
		n += len(t.FunctionDeclarations)
	}
	return n
}

// wantsJSON reports whether the request asks for a JSON answer.
func (r *GeminiRequest) wantsJSON() bool {
	g := r.GenerationConfig
	return g.ResponseMimeType == "application/json" || len(g.ResponseSchema) > 0 || len(g.ResponseJSONSchema) > 0
}

// schema is the JSON schema the request asks its answer to follow (nil
// when none).
func (r *GeminiRequest) schema() json.RawMessage {
	if s := r.GenerationConfig.ResponseJSONSchema; len(s) > 0 {
		return s
	}
	return r.GenerationConfig.ResponseSchema
}

// IsGeminiSideCall reports whether a Gemini request is one of gemini-cli's
// own side calls rather than a turn of the agent loop.
//
// Observed with gemini-cli 0.61.0: every agent-loop request carries the
// tools as functionDeclarations and no JSON response config; its model
// router (responseJsonSchema of complexity_reasoning/complexity_score),
// next-speaker check and loop detection ask for JSON
// (responseMimeType application/json) and carry no tools.
func IsGeminiSideCall(r *GeminiRequest) bool {
	return r.wantsJSON() || r.functionCount() == 0
}

func geminiSideReason(r *GeminiRequest) string {
	if r.wantsJSON() {
		var s struct {
			Properties map[string]json.RawMessage `json:"properties"`
		}
		_ = json.Unmarshal(r.schema(), &s)
		names := make([]string, 0, len(s.Properties))
		for k := range s.Properties {
			names = append(names, k)
		}
		sort.Strings(names)
		return "json:" + strings.Join(names, ",")
	}
	return "no-tools"
}

// GeminiServer is the scripted Gemini API server. Create it with NewGemini.
type GeminiServer struct {
	// SideText is the fixed reply text for side calls that ask for no JSON.
	SideText string
	// ExhaustedText is the reply text once the script is used up.
	ExhaustedText string
	// ChunkRunes splits text into chunks (one SSE event each) of at most
	// this many runes (0: one chunk per block).
	ChunkRunes int
	Journal
	// Classify, when set, replaces IsGeminiSideCall.
	Classify func(*GeminiRequest) (side bool)
	// Clock is the time of a scripted HTTP error's reset (nil: the system
	// clock).
	Clock clock.Clock

	mu      sync.Mutex
	script  GeminiScript
	next    int
	respSeq int
	callSeq int
	repeats errorRepeats
}

// NewGemini returns a Gemini API server serving script.
func NewGemini(script GeminiScript) *GeminiServer {
	return &GeminiServer{
		script:        script,
		SideText:      "OK",
		ExhaustedText: "(modelserver: script exhausted)",
	}
}

// Consumed returns how many script replies have been served.
func (s *GeminiServer) Consumed() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.next
}

// geminiMethod splits ".../models/MODEL:METHOD" into MODEL and METHOD.
func geminiMethod(path string) (model, method string, ok bool) {
	i := strings.LastIndex(path, "/models/")
	if i < 0 {
		return "", "", false
	}
	model, method, ok = strings.Cut(path[i+len("/models/"):], ":")
	return model, method, ok && model != ""
}

// ServeHTTP implements http.Handler.
func (s *GeminiServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 64<<20))
	path := r.URL.Path
	model, method, ok := geminiMethod(path)
	switch {
	case ok && r.Method == http.MethodPost && method == "countTokens":
		s.record(LogEntry{Method: r.Method, Path: path, Kind: "count_tokens", Model: model}, r.Header, body)
		writeJSON(w, http.StatusOK, map[string]any{"totalTokens": estimateTokens(body)})
	case ok && r.Method == http.MethodPost && (method == "generateContent" || method == "streamGenerateContent"):
		s.serveGenerate(w, r, path, model, method == "streamGenerateContent", body)
	default:
		s.record(LogEntry{Method: r.Method, Path: r.URL.RequestURI(), Kind: "other"}, r.Header, body)
		if r.Method == http.MethodHead {
			w.WriteHeader(http.StatusOK)
			return
		}
		writeJSON(w, http.StatusNotFound, geminiError(http.StatusNotFound, "NOT_FOUND",
			"modelserver: no such endpoint "+r.Method+" "+path))
	}
}

func geminiError(code int, status, msg string) map[string]any {
	return map[string]any{"error": map[string]any{"code": code, "message": msg, "status": status}}
}

func (s *GeminiServer) serveGenerate(w http.ResponseWriter, r *http.Request, path, model string, stream bool, body []byte) {
	var req GeminiRequest
	if err := json.Unmarshal(body, &req); err != nil {
		s.record(LogEntry{Method: r.Method, Path: path, Kind: "bad", Model: model, Note: err.Error()}, r.Header, body)
		writeJSON(w, http.StatusBadRequest, geminiError(http.StatusBadRequest, "INVALID_ARGUMENT", "modelserver: bad JSON: "+err.Error()))
		return
	}
	e := LogEntry{Method: r.Method, Path: path, Model: model}
	var reply GeminiReply
	s.mu.Lock()
	classify := s.Classify
	if classify == nil {
		classify = IsGeminiSideCall
	}
	if classify(&req) {
		e.Kind = "side"
		e.Note = geminiSideReason(&req)
		text := s.SideText
		if req.wantsJSON() {
			text = string(schemaAnswer(req.schema()))
		}
		reply = GeminiReply{Content: []GeminiBlock{{Type: "text", Text: text}}}
	} else {
		e.Kind = "main"
		if herr, ok := s.repeats.again(); ok {
			s.mu.Unlock()
			e.Note = fmt.Sprintf("http_error %d (repeat)", herr.Status)
			s.record(e, r.Header, body)
			herr.write(w, clock.Or(s.Clock).Now())
			return
		}
		if s.next < len(s.script) {
			reply = s.script[s.next]
			s.next++
			e.Reply = s.next
		} else {
			e.Note = "script-exhausted"
			reply = GeminiReply{Content: []GeminiBlock{{Type: "text", Text: s.ExhaustedText}}}
		}
		if herr := reply.HTTPError; herr != nil {
			s.repeats.serve(herr)
			s.mu.Unlock()
			e.Note = fmt.Sprintf("http_error %d", herr.Status)
			s.record(e, r.Header, body)
			herr.write(w, clock.Or(s.Clock).Now())
			return
		}
	}
	s.respSeq++
	respID := fmt.Sprintf("resp_%024d", s.respSeq)
	blocks := make([]GeminiBlock, len(reply.Content))
	copy(blocks, reply.Content)
	for i := range blocks {
		if blocks[i].Type == "function_call" && blocks[i].ID == "" {
			s.callSeq++
			blocks[i].ID = fmt.Sprintf("call_%024d", s.callSeq)
		}
	}
	s.mu.Unlock()
	s.record(e, r.Header, body)

	finish := reply.FinishReason
	if finish == "" {
		finish = "STOP"
	}
	inTok := estimateTokens(body)
	outTok := 0
	for _, b := range blocks {
		outTok += len(b.Text)/4 + len(b.Args)/4 + 1
	}
	usage := map[string]any{"promptTokenCount": inTok, "candidatesTokenCount": outTok, "totalTokenCount": inTok + outTok}
	chunkJSON := func(parts []any, last bool) map[string]any {
		cand := map[string]any{"content": map[string]any{"role": "model", "parts": parts}, "index": 0}
		m := map[string]any{"candidates": []any{cand}, "modelVersion": model, "responseId": respID}
		if last {
			cand["finishReason"] = finish
			m["usageMetadata"] = usage
		}
		return m
	}
	if !stream {
		parts := make([]any, 0, len(blocks))
		for _, b := range blocks {
			parts = append(parts, geminiPart(b, b.Text))
		}
		writeJSON(w, http.StatusOK, chunkJSON(parts, true))
		return
	}
	send := geminiSSE(w)
	if !delay(r, reply.DelayMS) {
		return
	}
	// One event per text chunk and per function call; the last event
	// carries the finish reason and the usage.
	var events [][]any
	for _, b := range blocks {
		if b.Type == "function_call" {
			events = append(events, []any{geminiPart(b, "")})
			continue
		}
		for _, c := range chunk(b.Text, s.ChunkRunes) {
			events = append(events, []any{geminiPart(b, c)})
		}
	}
	if len(events) == 0 {
		events = append(events, []any{map[string]any{"text": ""}})
	}
	for i, parts := range events {
		send(chunkJSON(parts, i == len(events)-1))
	}
}

// geminiPart renders a block as a Gemini part, text being its (chunk of)
// text.
func geminiPart(b GeminiBlock, text string) map[string]any {
	switch b.Type {
	case "function_call":
		var args any = map[string]any{}
		if len(b.Args) > 0 {
			_ = json.Unmarshal(b.Args, &args)
		}
		return map[string]any{"functionCall": map[string]any{"id": b.ID, "name": b.Name, "args": args}}
	case "thought":
		return map[string]any{"text": text, "thought": true}
	default:
		return map[string]any{"text": text}
	}
}

// geminiSSE starts a Gemini SSE reply (data lines only, as the API with
// alt=sse sends them) and returns the function that sends one chunk.
func geminiSSE(w http.ResponseWriter) func(data any) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	fl, _ := w.(http.Flusher)
	return func(data any) {
		b, _ := json.Marshal(data)
		fmt.Fprintf(w, "data: %s\r\n\r\n", b)
		if fl != nil {
			fl.Flush()
		}
	}
}

// schemaAnswer returns a minimal JSON value that follows schema (a JSON
// schema or a Gemini API schema, whose type names are upper case): an
// object with every property, the first of an enum, the minimum of a
// number (else 1), false, "" and []. A property named next_speaker is
// "user" (gemini-cli's next-speaker check: the turn ends). An empty or
// unreadable schema gives {}.
func schemaAnswer(schema json.RawMessage) json.RawMessage {
	var v any
	_ = json.Unmarshal(schema, &v)
	b, err := json.Marshal(schemaValue(v, "", 0))
	if err != nil {
		return json.RawMessage("{}")
	}
	return b
}

func schemaValue(s any, name string, depth int) any {
	m, _ := s.(map[string]any)
	if name == "next_speaker" {
		return "user"
	}
	if enum, ok := m["enum"].([]any); ok && len(enum) > 0 {
		return enum[0]
	}
	if c, ok := m["const"]; ok {
		return c
	}
	typ, _ := m["type"].(string)
	if ts, ok := m["type"].([]any); ok && len(ts) > 0 {
		typ, _ = ts[0].(string)
	}
	if typ == "" && depth < 8 {
		for _, k := range []string{"anyOf", "oneOf"} {
			if alts, ok := m[k].([]any); ok && len(alts) > 0 {
				return schemaValue(alts[0], name, depth+1)
			}
		}
	}
	switch strings.ToLower(typ) {
	case "string":
		return ""
	case "number", "integer":
		if min, ok := m["minimum"].(float64); ok {
			return min
		}
		return 1
	case "boolean":
		return false
	case "array":
		return []any{}
	case "null":
		return nil
	}
	out := map[string]any{}
	if depth >= 8 {
		return out
	}
	props, _ := m["properties"].(map[string]any)
	for k, p := range props {
		out[k] = schemaValue(p, k, depth+1)
	}
	return out
}
