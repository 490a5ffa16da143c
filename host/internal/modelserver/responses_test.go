package modelserver

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/baton-run/baton/sdk/clock"
	"github.com/google/go-cmp/cmp"
)

// codexReq is a trimmed main-loop request of codex 0.171 (tools present).
const codexReq = `{"model":"baton-scripted","stream":true,"store":false,
 "tools":[{"type":"function","name":"exec_command","parameters":{"type":"object"}},
          {"type":"custom","name":"apply_patch","format":{"type":"grammar"}},
          {"type":"namespace","name":"multi_agent_v1","tools":[{"type":"function","name":"spawn_agent"}]},
          {"type":"web_search"}],
 "input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"say hello"}]}]}`

func postResponses(t *testing.T, url, body string, hdr map[string]string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url+"/v1/responses", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer sk-fake")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	return resp
}

func eventNames(evs []sseEvent) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.Name
	}
	return out
}

func completedOutput(t *testing.T, evs []sseEvent) []any {
	t.Helper()
	last := evs[len(evs)-1]
	if last.Name != "response.completed" {
		t.Fatalf("last event %q", last.Name)
	}
	resp := last.Data["response"].(map[string]any)
	if resp["usage"].(map[string]any)["total_tokens"].(float64) <= 0 {
		t.Fatalf("no usage: %v", resp["usage"])
	}
	return resp["output"].([]any)
}

func TestParseResponsesScript(t *testing.T) {
	s, err := ParseResponsesScript([]byte(`{"replies":[
	  [{"type":"reasoning","text":"think"},{"type":"text","text":"hi"}],
	  {"delay_ms":5,"thread":"sub","content":[{"type":"function_call","name":"exec_command","arguments":"{\"cmd\":\"ls\"}"}]},
	  [{"type":"custom_tool_call","name":"apply_patch","input":"*** Begin Patch\n*** End Patch\n"}]
	]}`))
	if err != nil {
		t.Fatal(err)
	}
	if len(s) != 3 || s[1].DelayMS != 5 || s[1].Thread != "sub" || s[2].Content[0].Input == "" {
		t.Fatalf("parsed %+v", s)
	}
	for _, bad := range []string{
		`[[{"type":"function_call"}]]`,
		`[[{"type":"custom_tool_call"}]]`,
		`[[{"type":"tool_use","name":"x"}]]`,
		`[[{"type":"function_call","name":"x","arguments":[1]}]]`,
		`[{"thread":"child","content":[]}]`,
		`[{"http_error":{"status":200}}]`,
		`[{"http_error":{"status":429,"repeat":-1}}]`,
		`[{"http_error":{"status":429,"reset_in_seconds":-1}}]`,
	} {
		if _, err := ParseResponsesScript([]byte(bad)); err == nil {
			t.Errorf("%s: want error", bad)
		}
	}
}

func TestResponsesTextStream(t *testing.T) {
	srv := NewResponses(ResponsesScript{{Content: []ResponsesBlock{
		{Type: "reasoning", Text: "Thinking."},
		{Type: "text", Text: "Hello there"},
	}}})
	srv.ChunkRunes = 5
	ts := httptest.NewServer(srv)
	defer ts.Close()
	evs := readSSE(t, postResponses(t, ts.URL, codexReq, nil).Body)
	want := []string{
		"response.created", "response.in_progress",
		"response.output_item.added", "response.reasoning_summary_part.added",
		"response.reasoning_summary_text.delta", "response.reasoning_summary_text.delta",
		"response.reasoning_summary_text.done", "response.reasoning_summary_part.done", "response.output_item.done",
		"response.output_item.added", "response.content_part.added",
		"response.output_text.delta", "response.output_text.delta", "response.output_text.delta",
		"response.output_text.done", "response.content_part.done", "response.output_item.done",
		"response.completed",
	}
	if got := eventNames(evs); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("events\n got %v\nwant %v", got, want)
	}
	var text string
	for _, e := range evs {
		if e.Name == "response.output_text.delta" {
			text += e.Data["delta"].(string)
		}
		if int(e.Data["sequence_number"].(float64)) < 0 {
			t.Fatal("bad sequence number")
		}
	}
	if text != "Hello there" {
		t.Fatalf("text %q", text)
	}
	out := completedOutput(t, evs)
	msg := out[1].(map[string]any)
	if msg["type"] != "message" || msg["role"] != "assistant" ||
		msg["content"].([]any)[0].(map[string]any)["text"] != "Hello there" {
		t.Fatalf("message item %v", msg)
	}
	rs := out[0].(map[string]any)
	if rs["type"] != "reasoning" || rs["summary"].([]any)[0].(map[string]any)["text"] != "Thinking." {
		t.Fatalf("reasoning item %v", rs)
	}
	if srv.Consumed() != 1 {
		t.Fatalf("consumed %d", srv.Consumed())
	}
}

func TestResponsesToolCalls(t *testing.T) {
	patch := "*** Begin Patch\n*** Add File: a.txt\n+hi\n*** End Patch\n"
	srv := NewResponses(ResponsesScript{{Content: []ResponsesBlock{
		{Type: "function_call", Name: "exec_command", Arguments: json.RawMessage(`{ "cmd": "ls" }`)},
		{Type: "function_call", Name: "spawn_agent", Namespace: "multi_agent_v1", Arguments: json.RawMessage(`"{\"message\":\"m\"}"`), CallID: "call_fixed"},
		{Type: "custom_tool_call", Name: "apply_patch", Input: patch},
	}}})
	ts := httptest.NewServer(srv)
	defer ts.Close()
	evs := readSSE(t, postResponses(t, ts.URL, codexReq, nil).Body)
	out := completedOutput(t, evs)
	fc := out[0].(map[string]any)
	if fc["type"] != "function_call" || fc["name"] != "exec_command" || fc["arguments"] != `{"cmd":"ls"}` ||
		!strings.HasPrefix(fc["call_id"].(string), "call_") || fc["namespace"] != nil {
		t.Fatalf("function_call %v", fc)
	}
	ns := out[1].(map[string]any)
	if ns["namespace"] != "multi_agent_v1" || ns["arguments"] != `{"message":"m"}` || ns["call_id"] != "call_fixed" {
		t.Fatalf("namespaced function_call %v", ns)
	}
	ct := out[2].(map[string]any)
	if ct["type"] != "custom_tool_call" || ct["name"] != "apply_patch" || ct["input"] != patch {
		t.Fatalf("custom_tool_call %v", ct)
	}
	var args, input string
	for _, e := range evs {
		switch e.Name {
		case "response.function_call_arguments.delta":
			args += e.Data["delta"].(string)
		case "response.custom_tool_call_input.delta":
			input += e.Data["delta"].(string)
		case "response.output_item.added":
			it := e.Data["item"].(map[string]any)
			if it["type"] == "function_call" && it["arguments"] != "" {
				t.Fatalf("added item carries arguments: %v", it)
			}
		}
	}
	if args != `{"cmd":"ls"}{"message":"m"}` || input != patch {
		t.Fatalf("deltas %q %q", args, input)
	}
}

func TestResponsesSideCallsAndOtherEndpoints(t *testing.T) {
	srv := NewResponses(ResponsesScript{{Content: []ResponsesBlock{{Type: "text", Text: "main"}}}})
	srv.SideText = "side"
	ts := httptest.NewServer(srv)
	defer ts.Close()

	// No tools: a side call, answered without consuming the script.
	side := `{"model":"m","stream":true,"input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"title?"}]}]}`
	out := completedOutput(t, readSSE(t, postResponses(t, ts.URL, side, nil).Body))
	if out[0].(map[string]any)["content"].([]any)[0].(map[string]any)["text"] != "side" || srv.Consumed() != 0 {
		t.Fatalf("side call: %v consumed=%d", out, srv.Consumed())
	}
	// Compaction prompt (tools present): also a side call.
	compact := strings.Replace(codexReq, "say hello", "You are performing a CONTEXT CHECKPOINT COMPACTION.", 1)
	readSSE(t, postResponses(t, ts.URL, compact, nil).Body)
	if srv.Consumed() != 0 {
		t.Fatal("compaction consumed the script")
	}
	// Non-streaming main call.
	resp := postResponses(t, ts.URL, strings.Replace(codexReq, `"stream":true`, `"stream":false`, 1), nil)
	var r map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		t.Fatal(err)
	}
	if r["status"] != "completed" || srv.Consumed() != 1 {
		t.Fatalf("non-stream: %v", r)
	}
	// Exhausted.
	out = completedOutput(t, readSSE(t, postResponses(t, ts.URL, codexReq, nil).Body))
	if !strings.Contains(out[0].(map[string]any)["content"].([]any)[0].(map[string]any)["text"].(string), "exhausted") {
		t.Fatalf("exhausted: %v", out)
	}
	// GET /v1/models.
	mr, err := http.Get(ts.URL + "/v1/models?client_version=0.171.0")
	if err != nil {
		t.Fatal(err)
	}
	defer mr.Body.Close()
	var ml map[string]any
	if err := json.NewDecoder(mr.Body).Decode(&ml); err != nil || mr.StatusCode != 200 {
		t.Fatalf("models: %d %v", mr.StatusCode, err)
	}
	if ml["data"].([]any)[0].(map[string]any)["id"] != "gpt-scripted" {
		t.Fatalf("models: %v", ml)
	}
	// POST /v1/responses/compact.
	cr, err := http.Post(ts.URL+"/v1/responses/compact", "application/json", strings.NewReader(codexReq))
	if err != nil {
		t.Fatal(err)
	}
	defer cr.Body.Close()
	if cr.StatusCode != 200 || srv.Consumed() != 1 {
		t.Fatalf("compact: %d", cr.StatusCode)
	}
	kinds := []string{}
	for _, e := range srv.Entries() {
		kinds = append(kinds, e.Kind)
	}
	if got := strings.Join(kinds, ","); got != "side,side,main,main,models,compact" {
		t.Fatalf("kinds %s", got)
	}
}

func TestResponsesThreadMatchAndAgentID(t *testing.T) {
	srv := NewResponses(ResponsesScript{
		{Thread: "sub", Content: []ResponsesBlock{{Type: "text", Text: "child"}}},
		{Thread: "root", Content: []ResponsesBlock{{Type: "function_call", Name: "wait_agent", Namespace: "multi_agent_v1",
			Arguments: json.RawMessage(`{"targets":["{{agent_id}}"]}`)}}},
		{Match: "needle", Content: []ResponsesBlock{{Type: "text", Text: "matched"}}},
	})
	ts := httptest.NewServer(srv)
	defer ts.Close()
	parent := strings.Replace(codexReq, `"input":[`, `"input":[{"type":"function_call_output","call_id":"c1","output":"{\"agent_id\":\"019f-child\",\"nickname\":\"Euler\"}"},`, 1)
	out := completedOutput(t, readSSE(t, postResponses(t, ts.URL, parent, nil).Body))
	if fc := out[0].(map[string]any); fc["name"] != "wait_agent" || fc["arguments"] != `{"targets":["019f-child"]}` {
		t.Fatalf("root reply %v", fc)
	}
	out = completedOutput(t, readSSE(t, postResponses(t, ts.URL, codexReq, map[string]string{
		"x-openai-subagent": "collab_spawn", "x-codex-parent-thread-id": "019f-parent",
	}).Body))
	if out[0].(map[string]any)["content"].([]any)[0].(map[string]any)["text"] != "child" {
		t.Fatalf("sub reply %v", out)
	}
	// Reply 3 only matches a last input item containing "needle".
	out = completedOutput(t, readSSE(t, postResponses(t, ts.URL, codexReq, nil).Body))
	if !strings.Contains(out[0].(map[string]any)["content"].([]any)[0].(map[string]any)["text"].(string), "exhausted") {
		t.Fatalf("unmatched request got %v", out)
	}
	out = completedOutput(t, readSSE(t, postResponses(t, ts.URL, strings.Replace(codexReq, "say hello", "a needle", 1), nil).Body))
	if out[0].(map[string]any)["content"].([]any)[0].(map[string]any)["text"] != "matched" || srv.Consumed() != 3 {
		t.Fatalf("matched reply %v", out)
	}
	var replies []int
	for _, e := range srv.Entries() {
		replies = append(replies, e.Reply)
	}
	if len(replies) != 4 || replies[0] != 2 || replies[1] != 1 || replies[2] != 0 || replies[3] != 3 {
		t.Fatalf("reply indexes %v", replies)
	}
}

func TestResponsesDelayAndFailure(t *testing.T) {
	srv := NewResponses(ResponsesScript{
		// An hour: only a client that goes away ends it.
		{DelayMS: 3_600_000, Content: []ResponsesBlock{{Type: "text", Text: "slow"}}},
		{Error: &ResponsesError{Code: "server_error", Message: "boom"}, Content: []ResponsesBlock{{Type: "text", Text: "partial"}}},
	})
	ts := httptest.NewServer(srv)
	defer ts.Close()

	// The client goes away during the delay (codex interrupt / steer). The
	// handler must end with it: ts.Close waits for handlers, so one still
	// sleeping would hold the test until its timeout.
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, ts.URL+"/v1/responses", strings.NewReader(codexReq))
	resp, err := http.DefaultClient.Do(req)
	if err == nil {
		_, err = io.ReadAll(resp.Body)
		resp.Body.Close()
	}
	if err == nil {
		t.Fatal("delay: the slow reply was delivered")
	}
	evs := readSSE(t, postResponses(t, ts.URL, codexReq, nil).Body)
	last := evs[len(evs)-1]
	if last.Name != "response.failed" {
		t.Fatalf("last %q", last.Name)
	}
	if e := last.Data["response"].(map[string]any)["error"].(map[string]any); e["code"] != "server_error" || e["message"] != "boom" {
		t.Fatalf("error %v", e)
	}
	if srv.Consumed() != 2 {
		t.Fatalf("consumed %d", srv.Consumed())
	}
}

func TestResponsesBodyLog(t *testing.T) {
	srv := NewResponses(nil)
	var buf strings.Builder
	srv.BodyLog = &buf
	ts := httptest.NewServer(srv)
	defer ts.Close()
	readSSE(t, postResponses(t, ts.URL, codexReq, map[string]string{"originator": "codex_cli_rs"}).Body)
	var e LogEntry
	if err := json.Unmarshal([]byte(strings.TrimSpace(buf.String())), &e); err != nil {
		t.Fatal(err)
	}
	if e.Headers["authorization"] != "<redacted>" || e.Headers["originator"] != "codex_cli_rs" || len(e.Body) == 0 {
		t.Fatalf("log entry %+v", e)
	}
	var req ResponsesRequest
	if err := json.Unmarshal(e.Body, &req); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(req.ToolNames(), ","); got != "exec_command,apply_patch,multi_agent_v1,web_search" {
		t.Fatalf("tools %s", got)
	}
}

// rawPost posts a Responses request and returns the status, the headers
// named and the body, whatever the status.
func rawPost(t *testing.T, url string, names ...string) (int, map[string]string, string) {
	t.Helper()
	resp, err := http.Post(url+"/v1/responses", "application/json", strings.NewReader(codexReq))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	hdr := map[string]string{}
	for _, n := range names {
		hdr[n] = resp.Header.Get(n)
	}
	return resp.StatusCode, hdr, string(b)
}

// A scripted HTTP error answers the call, and Repeat more calls, with the
// status, headers and body, the reset filled in from the server's clock;
// the repeats do not consume the script, whose next reply answers the call
// after them.
func TestResponsesHTTPErrorRepeats(t *testing.T) {
	script, err := ParseResponsesScript([]byte(`[
	  {"http_error":{"status":429,"repeat":2,"reset_in_seconds":90,
	    "headers":{"x-codex-primary-reset-at":"{{RESET}}","x-codex-primary-used-percent":"100"},
	    "body":{"error":{"type":"usage_limit_reached","resets_at":"{{RESET}}","at":"{{RESET_ISO}}","message":"try at {{RESET}}"}}}},
	  [{"type":"text","text":"after"}],
	  {"http_error":{"status":503,"body":{"error":{"message":"overloaded"}}}},
	  [{"type":"text","text":"last"}]
	]`))
	if err != nil {
		t.Fatal(err)
	}
	srv := NewResponses(script)
	srv.Clock = clock.NewFake(time.Date(2026, 12, 1, 19, 0, 0, 0, time.UTC))
	ts := httptest.NewServer(srv)
	defer ts.Close()

	type answer struct {
		Status  int
		Headers map[string]string
		Body    string
	}
	limit := answer{429, map[string]string{"Content-Type": "application/json", "X-Codex-Primary-Reset-At": "1796151690",
		"X-Codex-Primary-Used-Percent": "100"},
		`{"error":{"type":"usage_limit_reached","resets_at":1796151690,"at":"2026-12-01T19:01:30Z","message":"try at 1796151690"}}`}
	var got []answer
	for range 3 {
		st, h, b := rawPost(t, ts.URL, "Content-Type", "X-Codex-Primary-Reset-At", "X-Codex-Primary-Used-Percent")
		got = append(got, answer{st, h, b})
	}
	if d := cmp.Diff([]answer{limit, limit, limit}, got); d != "" {
		t.Fatalf("the error and its repeats (-want +got):\n%s", d)
	}
	if n := srv.Consumed(); n != 1 {
		t.Fatalf("consumed %d after the repeats, want 1", n)
	}
	evs := readSSE(t, postResponses(t, ts.URL, codexReq, nil).Body)
	if out := completedOutput(t, evs); out[0].(map[string]any)["content"].([]any)[0].(map[string]any)["text"] != "after" {
		t.Fatalf("after the repeats: %v", out)
	}
	// No repeat: the error is sent once.
	if st, _, b := rawPost(t, ts.URL); st != 503 || b != `{"error":{"message":"overloaded"}}` {
		t.Fatalf("503: %d %s", st, b)
	}
	evs = readSSE(t, postResponses(t, ts.URL, codexReq, nil).Body)
	if out := completedOutput(t, evs); out[0].(map[string]any)["content"].([]any)[0].(map[string]any)["text"] != "last" {
		t.Fatalf("after the 503: %v", out)
	}
	var notes []string
	for _, e := range srv.Entries() {
		notes = append(notes, fmt.Sprint(e.Reply, " ", e.Note))
	}
	want := []string{"1 http-error 429", "0 http-error 429 (repeated)", "0 http-error 429 (repeated)", "2 ", "3 http-error 503", "4 "}
	if d := cmp.Diff(want, notes); d != "" {
		t.Fatalf("request log (-want +got):\n%s", d)
	}
}
