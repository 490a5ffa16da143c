package modelserver

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"
)

// LogEntry is one logged request.
type LogEntry struct {
	Seq    int    `json:"seq"`
	Time   string `json:"time,omitempty"`
	Method string `json:"method"`
	Path   string `json:"path"`
	Kind   string `json:"kind"`            // "main", "side", "count_tokens", "other"
	Reply  int    `json:"reply,omitempty"` // 1-based script index for main calls
	Model  string `json:"model,omitempty"`
	Note   string `json:"note,omitempty"`
	// Headers holds selected request headers (BodyLog only; secrets redacted).
	Headers map[string]string `json:"headers,omitempty"`
	Body    json.RawMessage   `json:"body,omitempty"`
}

// Journal is a server's request log. Both servers embed it.
type Journal struct {
	// Log receives one human-readable line per request (may be nil).
	Log io.Writer
	// BodyLog receives one JSON line (LogEntry with body) per request (may be nil).
	BodyLog io.Writer
	// Timestamps adds wall-clock times to BodyLog entries.
	Timestamps bool

	jmu     sync.Mutex
	seq     int
	entries []LogEntry
}

// Entries returns a copy of the request log (without bodies).
func (j *Journal) Entries() []LogEntry {
	j.jmu.Lock()
	defer j.jmu.Unlock()
	out := make([]LogEntry, len(j.entries))
	copy(out, j.entries)
	return out
}

// logHeaders returns the headers worth logging, with credentials redacted.
func logHeaders(h http.Header) map[string]string {
	out := map[string]string{}
	for k, v := range h {
		lk := strings.ToLower(k)
		switch {
		case lk == "x-api-key" || lk == "x-goog-api-key" || lk == "authorization" || lk == "cookie":
			out[lk] = "<redacted>"
		case strings.HasPrefix(lk, "anthropic-") || strings.HasPrefix(lk, "openai-") || strings.HasPrefix(lk, "x-") ||
			lk == "user-agent" || lk == "accept" || lk == "originator" || lk == "session_id" || lk == "conversation_id":
			out[lk] = strings.Join(v, ", ")
		}
	}
	return out
}

func (j *Journal) record(e LogEntry, h http.Header, body []byte) {
	j.jmu.Lock()
	defer j.jmu.Unlock()
	j.seq++
	e.Seq = j.seq
	j.entries = append(j.entries, e)
	if j.Log != nil {
		line := fmt.Sprintf("modelserver: #%d %s %s kind=%s", e.Seq, e.Method, e.Path, e.Kind)
		if e.Model != "" {
			line += " model=" + e.Model
		}
		if e.Reply > 0 {
			line += fmt.Sprintf(" reply=%d", e.Reply)
		}
		if e.Note != "" {
			line += " note=" + e.Note
		}
		fmt.Fprintln(j.Log, line)
	}
	if j.BodyLog != nil {
		if h != nil {
			e.Headers = logHeaders(h)
		}
		if j.Timestamps {
			e.Time = time.Now().UTC().Format(time.RFC3339Nano)
		}
		if len(body) > 0 {
			if json.Valid(body) {
				e.Body = json.RawMessage(body)
			} else {
				q, _ := json.Marshal(string(body))
				e.Body = q
			}
		}
		b, _ := json.Marshal(e)
		j.BodyLog.Write(append(b, '\n'))
	}
}

// sseStream starts a text/event-stream reply (with a request id header)
// and returns the function that sends one event and flushes it.
func sseStream(w http.ResponseWriter, idHeader, id string) func(name string, data any) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set(idHeader, id)
	w.WriteHeader(http.StatusOK)
	fl, _ := w.(http.Flusher)
	return func(name string, data any) {
		b, _ := json.Marshal(data)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", name, b)
		if fl != nil {
			fl.Flush()
		}
	}
}

// delay waits a reply's delay; false when the client went away first.
func delay(r *http.Request, ms int) bool {
	if ms <= 0 {
		return true
	}
	t := time.NewTimer(time.Duration(ms) * time.Millisecond)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-r.Context().Done():
		return false
	}
}

// parseReplies reads a script: a JSON list of replies, or an object
// {"replies":[...]} (which may carry other keys, such as a comment).
func parseReplies[R any](b []byte) ([]R, error) {
	b = bytes.TrimSpace(b)
	var s []R
	if len(b) > 0 && b[0] == '{' {
		var w struct {
			Replies []R `json:"replies"`
		}
		if err := json.Unmarshal(b, &w); err != nil {
			return nil, err
		}
		return w.Replies, nil
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, err
	}
	return s, nil
}

// listOrObject decodes a reply written either as a bare list of blocks
// (into list) or as an object (into obj).
func listOrObject(b []byte, list, obj any) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '[' {
		return json.Unmarshal(b, list)
	}
	return json.Unmarshal(b, obj)
}

// loadFile reads and parses a script file; errors name the file.
func loadFile[S any](path string, parse func([]byte) (S, error)) (S, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		var zero S
		return zero, err
	}
	s, err := parse(b)
	if err != nil {
		var zero S
		return zero, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}
