package modelserver

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"

	"github.com/baton-run/baton/sdk/clock"
)

type sseEvent struct {
	Name string
	Data map[string]any
}

func readSSE(t *testing.T, r io.Reader) []sseEvent {
	t.Helper()
	var out []sseEvent
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var name, data string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			data = strings.TrimPrefix(line, "data: ")
		case line == "":
			if name == "" && data == "" {
				continue
			}
			var m map[string]any
			if err := json.Unmarshal([]byte(data), &m); err != nil {
				t.Fatalf("event %q: bad data %q: %v", name, data, err)
			}
			if m["type"] != name {
				t.Fatalf("event name %q but data type %v", name, m["type"])
			}
			out = append(out, sseEvent{name, m})
			name, data = "", ""
		default:
			t.Fatalf("unexpected SSE line %q", line)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

const mainReq = `{"model":"claude-sonnet-4-5-20250929","max_tokens":32000,"stream":%s,
 "system":[{"type":"text","text":"You are a Claude agent, built on Anthropic's Claude Agent SDK."},{"type":"text","text":"You are an interactive CLI tool that helps users with software engineering tasks."}],
 "tools":[{"name":"mcp__acp__Write","input_schema":{"type":"object"}}],
 "messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}]}`

const sideReq = `{"model":"claude-haiku-4-5-20251001","max_tokens":32000,"stream":true,"tools":[],
 "system":[{"type":"text","text":"You are Claude Code, Anthropic's official CLI for Claude."},{"type":"text","text":"You are an expert at analyzing git history. Given a list of files..."}],
 "messages":[{"role":"user","content":[{"type":"text","text":"Files modified by user:\n"}]}]}`

func post(t *testing.T, url, path, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("x-api-key", "sk-test-redacted")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("%s: status %d: %s", path, resp.StatusCode, b)
	}
	return resp
}

func newTestServer(t *testing.T, script string) (*Server, string) {
	t.Helper()
	sc, err := ParseScript([]byte(script))
	if err != nil {
		t.Fatal(err)
	}
	s := New(sc)
	ts := httptest.NewServer(s) // listens on 127.0.0.1
	t.Cleanup(ts.Close)
	if !strings.HasPrefix(ts.URL, "http://127.0.0.1:") {
		t.Fatalf("test server not on 127.0.0.1: %s", ts.URL)
	}
	return s, ts.URL
}

func TestStreamingSSEShape(t *testing.T) {
	s, url := newTestServer(t, `[
	  [{"type":"text","text":"I'll write it."},
	   {"type":"tool_use","name":"mcp__acp__Write","input":{"file_path":"/w/hello.txt","content":"hello world\n"}}],
	  [{"type":"text","text":"Done."}]
	]`)
	s.ChunkRunes = 5
	var bodyLog bytes.Buffer
	s.BodyLog = &bodyLog

	resp := post(t, url, "/v1/messages?beta=true", strings.Replace(mainReq, "%s", "true", 1))
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		t.Fatalf("content-type %q", ct)
	}
	evs := readSSE(t, resp.Body)

	var names []string
	for _, e := range evs {
		if len(names) == 0 || names[len(names)-1] != e.Name {
			names = append(names, e.Name)
		}
	}
	want := []string{"message_start", "ping",
		"content_block_start", "content_block_delta", "content_block_stop",
		"content_block_start", "content_block_delta", "content_block_stop",
		"message_delta", "message_stop"}
	if strings.Join(names, ",") != strings.Join(want, ",") {
		t.Fatalf("event sequence:\n got %v\nwant %v", names, want)
	}

	msg := evs[0].Data["message"].(map[string]any)
	if msg["role"] != "assistant" || msg["model"] != "claude-sonnet-4-5-20250929" || !strings.HasPrefix(msg["id"].(string), "msg_") {
		t.Fatalf("message_start: %v", msg)
	}
	if _, ok := msg["usage"].(map[string]any)["input_tokens"]; !ok {
		t.Fatalf("message_start without usage.input_tokens: %v", msg)
	}

	var text, input string
	var toolStart map[string]any
	deltas := 0
	for _, e := range evs {
		switch e.Name {
		case "content_block_start":
			cb := e.Data["content_block"].(map[string]any)
			if cb["type"] == "tool_use" {
				toolStart = cb
				if e.Data["index"].(float64) != 1 {
					t.Fatalf("tool block index %v", e.Data["index"])
				}
			}
		case "content_block_delta":
			deltas++
			d := e.Data["delta"].(map[string]any)
			switch d["type"] {
			case "text_delta":
				text += d["text"].(string)
			case "input_json_delta":
				input += d["partial_json"].(string)
			default:
				t.Fatalf("delta type %v", d["type"])
			}
		case "message_delta":
			d := e.Data["delta"].(map[string]any)
			if d["stop_reason"] != "tool_use" {
				t.Fatalf("stop_reason %v, want tool_use", d["stop_reason"])
			}
			if _, ok := e.Data["usage"].(map[string]any)["output_tokens"]; !ok {
				t.Fatalf("message_delta without usage: %v", e.Data)
			}
		}
	}
	if text != "I'll write it." {
		t.Fatalf("text %q", text)
	}
	if deltas < 4 {
		t.Fatalf("chunking: only %d deltas", deltas)
	}
	if toolStart == nil || toolStart["name"] != "mcp__acp__Write" || !strings.HasPrefix(toolStart["id"].(string), "toolu_") {
		t.Fatalf("tool_use start: %v", toolStart)
	}
	if in, ok := toolStart["input"].(map[string]any); !ok || len(in) != 0 {
		t.Fatalf("tool_use start input should be {}: %v", toolStart["input"])
	}
	var parsed map[string]string
	if err := json.Unmarshal([]byte(input), &parsed); err != nil || parsed["file_path"] != "/w/hello.txt" || parsed["content"] != "hello world\n" {
		t.Fatalf("tool input %q (%v)", input, err)
	}
	if s.Consumed() != 1 {
		t.Fatalf("consumed %d", s.Consumed())
	}

	// Second call gets reply 2, ending the turn.
	evs = readSSE(t, post(t, url, "/v1/messages", strings.Replace(mainReq, "%s", "true", 1)).Body)
	last := evs[len(evs)-2]
	if last.Name != "message_delta" || last.Data["delta"].(map[string]any)["stop_reason"] != "end_turn" {
		t.Fatalf("second reply: %v", last)
	}

	// Body log: one JSON line per request, api key redacted.
	lines := strings.Split(strings.TrimSpace(bodyLog.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("body log lines: %d", len(lines))
	}
	var le LogEntry
	if err := json.Unmarshal([]byte(lines[0]), &le); err != nil {
		t.Fatal(err)
	}
	if le.Kind != "main" || le.Reply != 1 || le.Headers["x-api-key"] != "<redacted>" || len(le.Body) == 0 {
		t.Fatalf("log entry: %+v", le)
	}
	if strings.Contains(bodyLog.String(), "sk-test-redacted") {
		t.Fatal("api key leaked into body log")
	}
}

func TestSideCallsDoNotConsumeScript(t *testing.T) {
	s, url := newTestServer(t, `[[{"type":"text","text":"hello"}]]`)
	s.SideText = "side"

	textOf := func(evs []sseEvent) string {
		var b strings.Builder
		for _, e := range evs {
			if e.Name == "content_block_delta" {
				b.WriteString(e.Data["delta"].(map[string]any)["text"].(string))
			}
		}
		return b.String()
	}
	if got := textOf(readSSE(t, post(t, url, "/v1/messages", sideReq).Body)); got != "side" {
		t.Fatalf("side call text %q", got)
	}
	// Quota probe shape.
	quota := `{"model":"claude-haiku-4-5-20251001","max_tokens":1,"stream":false,"messages":[{"role":"user","content":"quota"}]}`
	var qm map[string]any
	json.NewDecoder(post(t, url, "/v1/messages", quota).Body).Decode(&qm)
	if qm["stop_reason"] != "max_tokens" {
		t.Fatalf("quota reply: %v", qm)
	}
	if s.Consumed() != 0 {
		t.Fatalf("side calls consumed the script: %d", s.Consumed())
	}
	if got := textOf(readSSE(t, post(t, url, "/v1/messages", strings.Replace(mainReq, "%s", "true", 1)).Body)); got != "hello" {
		t.Fatalf("main call text %q", got)
	}
	// Exhausted script: a fixed text, not an error (errors make the CLI retry).
	if got := textOf(readSSE(t, post(t, url, "/v1/messages", strings.Replace(mainReq, "%s", "true", 1)).Body)); got != s.ExhaustedText {
		t.Fatalf("exhausted text %q", got)
	}
	kinds := []string{}
	for _, e := range s.Entries() {
		kinds = append(kinds, e.Kind)
	}
	if strings.Join(kinds, ",") != "side,side,main,main" {
		t.Fatalf("kinds %v", kinds)
	}
}

func TestNonStreamingAndProbes(t *testing.T) {
	_, url := newTestServer(t, `{"replies":[{"content":[{"type":"tool_use","id":"toolu_x","name":"Bash","input":{"command":"ls"}}]}]}`)
	var m struct {
		Type       string `json:"type"`
		Role       string `json:"role"`
		StopReason string `json:"stop_reason"`
		Content    []struct {
			Type  string         `json:"type"`
			ID    string         `json:"id"`
			Name  string         `json:"name"`
			Input map[string]any `json:"input"`
		} `json:"content"`
		Usage map[string]int `json:"usage"`
	}
	resp := post(t, url, "/v1/messages", strings.Replace(mainReq, "%s", "false", 1))
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("content-type %q", ct)
	}
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
		t.Fatal(err)
	}
	if m.Type != "message" || m.Role != "assistant" || m.StopReason != "tool_use" || len(m.Content) != 1 ||
		m.Content[0].ID != "toolu_x" || m.Content[0].Name != "Bash" || m.Content[0].Input["command"] != "ls" {
		t.Fatalf("non-streaming reply: %+v", m)
	}

	var ct map[string]int
	json.NewDecoder(post(t, url, "/v1/messages/count_tokens", `{"model":"m","messages":[{"role":"user","content":"foo"}]}`).Body).Decode(&ct)
	if ct["input_tokens"] <= 0 {
		t.Fatalf("count_tokens: %v", ct)
	}
	for _, method := range []string{http.MethodGet, http.MethodHead} {
		req, _ := http.NewRequest(method, url+"/", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("%s /: %d", method, resp.StatusCode)
		}
	}
}

func TestParseScript(t *testing.T) {
	sc, err := ParseScript([]byte(`[[{"type":"text","text":"a"}], {"content":[{"type":"text","text":"b"}],"stop_reason":"max_tokens","delay_ms":5}]`))
	if err != nil {
		t.Fatal(err)
	}
	if len(sc) != 2 || sc[0].Content[0].Text != "a" || sc[1].StopReason != "max_tokens" || sc[1].DelayMS != 5 {
		t.Fatalf("%+v", sc)
	}
	for _, bad := range []string{`[[{"type":"image"}]]`, `[[{"type":"tool_use"}]]`, `{`} {
		if _, err := ParseScript([]byte(bad)); err == nil {
			t.Errorf("ParseScript(%s): no error", bad)
		}
	}
	if got := chunk("héllo wörld", 4); strings.Join(got, "|") != "héll|o wö|rld" {
		t.Fatalf("chunk: %q", got)
	}
}

// answer is what a client got from one request.
type answer struct {
	Status int
	Header map[string]string
	Body   string
}

func postAnswer(t *testing.T, url, body string, headers ...string) answer {
	t.Helper()
	resp, err := http.Post(url+"/v1/messages", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	a := answer{Status: resp.StatusCode, Header: map[string]string{}}
	for _, h := range headers {
		if v := resp.Header.Get(h); v != "" {
			a.Header[h] = v
		}
	}
	if resp.StatusCode == http.StatusOK {
		var text strings.Builder
		for _, e := range readSSE(t, bytes.NewReader(b)) {
			if e.Name == "content_block_delta" {
				text.WriteString(e.Data["delta"].(map[string]any)["text"].(string))
			}
		}
		a.Body = text.String()
	} else {
		a.Body = string(b)
	}
	return a
}

// A reply with an http_error answers its main call with that error, its
// reset filled in from the server's clock at each request; Repeat more
// main calls get the same error without consuming the script; side calls
// in between are answered as always; then the script goes on.
func TestHTTPErrorReply(t *testing.T) {
	s, url := newTestServer(t, `[
	 {"http_error": {"status": 429, "repeat": 2, "reset_in_seconds": 3,
	   "headers": {"anthropic-ratelimit-unified-status": "rejected", "anthropic-ratelimit-unified-reset": "{{RESET}}", "retry-after": "3"},
	   "body": {"type":"error","error":{"type":"rate_limit_error","message":"limit; resets {{RESET_ISO}}"}}}},
	 [{"type":"text","text":"after"}],
	 {"http_error": {"status": 529, "body": {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}}},
	 [{"type":"text","text":"last"}]
	]`)
	fc := clock.NewFake(time.Date(2026, 12, 1, 20, 0, 0, 0, time.UTC))
	s.Clock = fc
	s.SideText = "side"
	main := strings.Replace(mainReq, "%s", "true", 1)
	hdrs := []string{"anthropic-ratelimit-unified-status", "anthropic-ratelimit-unified-reset", "retry-after", "Content-Type"}
	limited := func(reset time.Time) answer {
		return answer{Status: 429, Header: map[string]string{"anthropic-ratelimit-unified-status": "rejected",
			"anthropic-ratelimit-unified-reset": fmt.Sprint(reset.Unix()), "retry-after": "3", "Content-Type": "application/json"},
			Body: `{"type":"error","error":{"type":"rate_limit_error","message":"limit; resets ` + reset.Format(time.RFC3339) + `"}}`}
	}
	streamed := func(text string) answer {
		return answer{Status: 200, Header: map[string]string{"Content-Type": "text/event-stream"}, Body: text}
	}
	t0 := fc.Now()
	var got []answer
	got = append(got, postAnswer(t, url, main, hdrs...))
	fc.Advance(time.Second)
	got = append(got, postAnswer(t, url, sideReq, hdrs...), postAnswer(t, url, main, hdrs...))
	fc.Advance(time.Second)
	got = append(got, postAnswer(t, url, main, hdrs...), postAnswer(t, url, main, hdrs...),
		postAnswer(t, url, main, hdrs...), postAnswer(t, url, main, hdrs...))
	want := []answer{
		limited(t0.Add(3 * time.Second)),
		streamed("side"),
		limited(t0.Add(4 * time.Second)),
		limited(t0.Add(5 * time.Second)),
		streamed("after"),
		{Status: 529, Header: map[string]string{"Content-Type": "application/json"}, Body: `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`},
		streamed("last"),
	}
	if diff := gocmp.Diff(want, got); diff != "" {
		t.Fatalf("answers (-want +got):\n%s", diff)
	}
	var log []string
	for _, e := range s.Entries() {
		log = append(log, fmt.Sprintf("%s %d %s", e.Kind, e.Reply, e.Note))
	}
	wantLog := []string{"main 1 http_error 429", "side 0 system:You are an expert at analyzing git history",
		"main 0 http_error 429 (repeat)", "main 0 http_error 429 (repeat)", "main 2 ", "main 3 http_error 529", "main 4 "}
	if diff := gocmp.Diff(wantLog, log); diff != "" {
		t.Fatalf("journal (-want +got):\n%s", diff)
	}
}

// A script's http_error must be an HTTP error, repeat no negative count,
// and the reply no content besides.
func TestParseScriptHTTPError(t *testing.T) {
	for _, bad := range []string{
		`[{"http_error":{"status":200}}]`,
		`[{"http_error":{"status":600}}]`,
		`[{"http_error":{"status":429,"repeat":-1}}]`,
		`[{"http_error":{"status":429},"content":[{"type":"text","text":"x"}]}]`,
	} {
		if _, err := ParseScript([]byte(bad)); err == nil {
			t.Errorf("ParseScript(%s): no error", bad)
		}
	}
	if _, err := ParseScript([]byte(`[{"http_error":{"status":402,"repeat":0}}]`)); err != nil {
		t.Errorf("a 402 reply: %v", err)
	}
}
