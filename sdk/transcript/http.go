package transcript

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"sort"
)

// HTTP transcripts. A provider that is an HTTP server with a server-sent
// event stream (OpenCode's `opencode serve`) is recorded in the same
// envelope, with these frames:
//
// expect_outbound, a request the client sends:
//
//	{"http":"request","method":"POST","path":"/session/ses_1/prompt_async",
//	 "query":{"directory":"<workspace>"},"body":{"parts":[...]}}
//
// query is omitted when the request has none (a value is a string, or a
// list of strings for a repeated key); body is the JSON body, or a string
// for a body that is not JSON, and is omitted when empty. They are compared
// structurally like any frame ("<any>", "<workspace>").
//
// emit_inbound, the response to a request:
//
//	{"http":"response","status":200,"body":{...}}
//	{"http":"response","status":200,"stream":true}
//
// It answers the oldest matched request still unanswered, or the one whose
// expect_outbound entry has the label in "request". "stream":true opens a
// text/event-stream; the events that follow go to the newest open stream:
//
//	{"sse":{"type":"session.idle","properties":{...}}}
//
// written as "data: <the JSON>\n\n" ("event" and "id" members, when
// present, become the event's fields). A response is sent when its entry
// comes, so a transcript keeps the server's races: events a request caused
// may come before its response, and a terminal event before the response to
// the request that caused it.
//
// emit_inbound, a line the server prints on stdout, "<listen>" standing for
// the address the peer listens on (http://127.0.0.1:PORT):
//
//	{"stdout":"opencode server listening on <listen>"}
//
// The client is the process's parent: it going away (the peer's stdin
// closing, or SIGTERM) is what a runtime_exit waiting for stdin_close
// waits for.
const (
	HTTPRequest  = "request"
	HTTPResponse = "response"
	// Listen stands for the address a replay peer listens on.
	Listen = "<listen>"
)

// HTTPFrame is an HTTP transcript frame (see above); which fields are set
// depends on the kind.
type HTTPFrame struct {
	HTTP   string          `json:"http,omitempty"`
	Method string          `json:"method,omitempty"`
	Path   string          `json:"path,omitempty"`
	Query  map[string]any  `json:"query,omitempty"`
	Body   json.RawMessage `json:"body,omitempty"`
	Status int             `json:"status,omitempty"`
	// Stream says that the response opens an event stream.
	Stream bool `json:"stream,omitempty"`
	// Request names the expect_outbound entry (by label) a response answers.
	Request string `json:"request,omitempty"`
	// SSE is an event's data; Event and ID its other fields.
	SSE    json.RawMessage `json:"sse,omitempty"`
	Event  string          `json:"event,omitempty"`
	ID     string          `json:"id,omitempty"`
	Stdout *string         `json:"stdout,omitempty"`
	// ContentType is a response's content type when its body is not JSON
	// (the body is then the text, as a JSON string).
	ContentType string `json:"contentType,omitempty"`
}

// Kind says which HTTP frame f is: "request", "response", "sse", "stdout",
// or "" for none of them.
func (f HTTPFrame) Kind() string {
	switch {
	case f.HTTP == HTTPRequest || f.HTTP == HTTPResponse:
		return f.HTTP
	case len(f.SSE) > 0:
		return "sse"
	case f.Stdout != nil:
		return "stdout"
	}
	return ""
}

// DecodeHTTPFrame decodes a frame as an HTTP frame.
func DecodeHTTPFrame(b []byte) (HTTPFrame, error) {
	var f HTTPFrame
	if err := json.Unmarshal(b, &f); err != nil {
		return f, fmt.Errorf("not an HTTP frame: %w", err)
	}
	return f, nil
}

// IsHTTP says whether a transcript is of an HTTP provider: one of its
// frames is an HTTP request or response, or a line the server prints on
// stdout ({"stdout": ...}).
func (t *Transcript) IsHTTP() bool {
	for _, e := range t.Entries {
		if e.Type != TypeExpectOutbound && e.Type != TypeEmitInbound {
			continue
		}
		var f struct {
			HTTP string `json:"http"`
		}
		if json.Unmarshal(e.Frame, &f) == nil && (f.HTTP == HTTPRequest || f.HTTP == HTTPResponse) {
			return true
		}
		// A line the server prints on stdout, and nothing else: a
		// server that dies before it listens has no requests.
		var line map[string]json.RawMessage
		if json.Unmarshal(e.Frame, &line) == nil && len(line) == 1 && line["stdout"] != nil {
			return true
		}
	}
	return false
}

// RequestFrame is the expect_outbound frame of a request with body.
func RequestFrame(r *http.Request, body []byte) json.RawMessage {
	f := HTTPFrame{HTTP: HTTPRequest, Method: r.Method, Path: r.URL.Path, Query: queryMap(r.URL.Query()), Body: BodyValue(body)}
	b, _ := marshalFrame(f)
	return b
}

// BodyValue is how a body appears in a frame: its JSON, a JSON string for
// a body that is not JSON, nil for none.
func BodyValue(body []byte) json.RawMessage {
	body = bytes.TrimSpace(body)
	if len(body) == 0 {
		return nil
	}
	// Compact checks the body is JSON as it goes (and leaves buf empty
	// when it is not).
	var buf bytes.Buffer
	if json.Compact(&buf, body) == nil {
		return buf.Bytes()
	}
	s, _ := json.Marshal(string(body))
	return s
}

func queryMap(q url.Values) map[string]any {
	if len(q) == 0 {
		return nil
	}
	m := make(map[string]any, len(q))
	keys := make([]string, 0, len(q))
	for k := range q {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if v := q[k]; len(v) == 1 {
			m[k] = v[0]
		} else {
			m[k] = v
		}
	}
	return m
}

func marshalFrame(v any) (json.RawMessage, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

// MarshalHTTPFrame encodes a frame without HTML escaping.
func MarshalHTTPFrame(f HTTPFrame) (json.RawMessage, error) { return marshalFrame(f) }
