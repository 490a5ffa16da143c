package modelserver

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// geminiMainReq is a trimmed agent-loop request of gemini-cli 0.61 (its
// tools as functionDeclarations, no JSON response config).
const geminiMainReq = `{"contents":[{"role":"user","parts":[{"text":"Say hello."}]}],
 "systemInstruction":{"role":"user","parts":[{"text":"You are Gemini CLI"}]},
 "tools":[{"functionDeclarations":[{"name":"write_file"},{"name":"read_file"}]}],
 "generationConfig":{"temperature":1,"thinkingConfig":{"includeThoughts":true}}}`

// geminiRouterReq is gemini-cli 0.61's model router call (its classifier).
const geminiRouterReq = `{"contents":[{"role":"user","parts":[{"text":"Say hello."}]}],
 "systemInstruction":{"role":"user","parts":[{"text":"You are a specialized Task Routing AI."}]},
 "generationConfig":{"responseMimeType":"application/json","responseJsonSchema":{"type":"OBJECT",
  "properties":{"complexity_reasoning":{"type":"STRING"},"complexity_score":{"type":"INTEGER"}},
  "required":["complexity_reasoning","complexity_score"]}}}`

// geminiNextSpeakerReq is the next-speaker check (a Gemini API schema).
const geminiNextSpeakerReq = `{"contents":[{"role":"user","parts":[{"text":"Who speaks next?"}]}],
 "generationConfig":{"responseMimeType":"application/json","responseSchema":{"type":"object",
  "properties":{"reasoning":{"type":"string"},"next_speaker":{"type":"string","enum":["model","user"]}}}}}`

func postGemini(t *testing.T, url, model, method, body string) *http.Response {
	t.Helper()
	u := url + "/v1beta/models/" + model + ":" + method
	if method == "streamGenerateContent" {
		u += "?alt=sse"
	}
	req, err := http.NewRequest(http.MethodPost, u, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("x-goog-api-key", "test-key-redacted")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// readGeminiSSE reads the data lines of a Gemini SSE stream.
func readGeminiSSE(t *testing.T, r io.Reader) []any {
	t.Helper()
	var out []any
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), "\r")
		if line == "" {
			continue
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			t.Fatalf("not a data line: %q", line)
		}
		var v any
		if err := json.Unmarshal([]byte(data), &v); err != nil {
			t.Fatalf("bad data %q: %v", data, err)
		}
		out = append(out, v)
	}
	return out
}

func decodeJSON(t *testing.T, s string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("%s: %v", s, err)
	}
	return v
}

func TestParseGeminiScript(t *testing.T) {
	s, err := ParseGeminiScript([]byte(`{"replies":[
	  [{"type":"thought","text":"think"},{"type":"text","text":"hi"}],
	  {"delay_ms":5,"finish_reason":"MAX_TOKENS","content":[{"type":"function_call","name":"write_file","args":{"file_path":"/x"}}]},
	  {"http_error":{"status":429,"body":{"error":{"code":429}}}}
	]}`))
	if err != nil {
		t.Fatal(err)
	}
	if len(s) != 3 || s[1].DelayMS != 5 || s[1].FinishReason != "MAX_TOKENS" || s[2].HTTPError.Status != 429 {
		t.Fatalf("parsed %+v", s)
	}
	for _, bad := range []string{
		`[[{"type":"function_call"}]]`,
		`[[{"type":"function_call","name":"x","args":[1]}]]`,
		`[[{"type":"tool_use","name":"x"}]]`,
		`[{"http_error":{"status":200}}]`,
		`[{"http_error":{"status":429},"content":[{"type":"text","text":"x"}]}]`,
	} {
		if _, err := ParseGeminiScript([]byte(bad)); err == nil {
			t.Errorf("%s: want error", bad)
		}
	}
}

// A main call streams the reply's parts, one SSE chunk per text chunk and
// per function call; the last carries the finish reason and the usage.
func TestGeminiStream(t *testing.T) {
	srv := NewGemini(GeminiScript{
		{Content: []GeminiBlock{
			{Type: "thought", Text: "Hm."},
			{Type: "text", Text: "Hello there"},
			{Type: "function_call", Name: "write_file", Args: json.RawMessage(`{"file_path":"/w/a.txt","content":"x"}`)},
		}},
	})
	srv.ChunkRunes = 6
	ts := httptest.NewServer(srv)
	defer ts.Close()
	resp := postGemini(t, ts.URL, "gemini-3.8-flash", "streamGenerateContent", geminiMainReq)
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	got := readGeminiSSE(t, resp.Body)
	n := estimateTokens([]byte(geminiMainReq))
	chunk := func(part string) string {
		return `{"candidates":[{"content":{"role":"model","parts":[` + part + `]},"index":0}],"modelVersion":"gemini-3.8-flash","responseId":"resp_000000000000000000000001"}`
	}
	last := `{"candidates":[{"content":{"role":"model","parts":[{"functionCall":{"id":"call_000000000000000000000001","name":"write_file","args":{"file_path":"/w/a.txt","content":"x"}}}]},"index":0,"finishReason":"STOP"}],
	  "modelVersion":"gemini-3.8-flash","responseId":"resp_000000000000000000000001",
	  "usageMetadata":{"promptTokenCount":` + itoa(n) + `,"candidatesTokenCount":14,"totalTokenCount":` + itoa(n+14) + `}}`
	want := []any{
		decodeJSON(t, chunk(`{"text":"Hm.","thought":true}`)),
		decodeJSON(t, chunk(`{"text":"Hello "}`)),
		decodeJSON(t, chunk(`{"text":"there"}`)),
		decodeJSON(t, last),
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("stream (-want +got):\n%s", d)
	}
	if srv.Consumed() != 1 {
		t.Fatalf("consumed %d", srv.Consumed())
	}
}

// Side calls (the router, the next-speaker check, a call without tools) get
// a minimal answer and leave the script alone; generateContent answers one
// JSON object; countTokens a count.
func TestGeminiSideCalls(t *testing.T) {
	srv := NewGemini(GeminiScript{{Content: []GeminiBlock{{Type: "text", Text: "main"}}}})
	ts := httptest.NewServer(srv)
	defer ts.Close()
	answer := func(body string, method string) any {
		resp := postGemini(t, ts.URL, "gemini-3.5-flash-lite", method, body)
		if method == "streamGenerateContent" {
			evs := readGeminiSSE(t, resp.Body)
			return evs[len(evs)-1]
		}
		var v any
		if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	text := func(v any) string {
		c := v.(map[string]any)["candidates"].([]any)[0].(map[string]any)
		if c["finishReason"] != "STOP" {
			t.Fatalf("finish %v", c["finishReason"])
		}
		return c["content"].(map[string]any)["parts"].([]any)[0].(map[string]any)["text"].(string)
	}
	for _, c := range []struct{ body, method, want string }{
		{geminiRouterReq, "generateContent", `{"complexity_reasoning":"","complexity_score":1}`},
		{geminiNextSpeakerReq, "generateContent", `{"next_speaker":"user","reasoning":""}`},
		{`{"contents":[{"role":"user","parts":[{"text":"Summarize"}]}]}`, "streamGenerateContent", "OK"},
	} {
		if got := text(answer(c.body, c.method)); got != c.want {
			t.Errorf("side answer %s, want %s", got, c.want)
		}
	}
	if got := text(answer(geminiMainReq, "generateContent")); got != "main" {
		t.Errorf("main answer %q", got)
	}
	resp := postGemini(t, ts.URL, "gemini-3.8-flash", "countTokens", geminiMainReq)
	var ct map[string]any
	json.NewDecoder(resp.Body).Decode(&ct)
	if d := cmp.Diff(map[string]any{"totalTokens": float64(estimateTokens([]byte(geminiMainReq)))}, ct); d != "" {
		t.Errorf("countTokens (-want +got):\n%s", d)
	}
	if resp := postGemini(t, ts.URL, "x", "embedContent", `{}`); resp.StatusCode != http.StatusNotFound {
		t.Errorf("embedContent: status %d", resp.StatusCode)
	}
	var kinds []string
	for _, e := range srv.Entries() {
		kinds = append(kinds, e.Kind+" "+e.Note)
	}
	want := []string{"side json:complexity_reasoning,complexity_score", "side json:next_speaker,reasoning", "side no-tools",
		"main ", "count_tokens ", "other "}
	if d := cmp.Diff(want, kinds); d != "" {
		t.Errorf("journal (-want +got):\n%s", d)
	}
	if srv.Consumed() != 1 {
		t.Errorf("consumed %d", srv.Consumed())
	}
}

// A scripted HTTP error answers a main call with its status and body, and
// its repeats answer the retries without consuming the script.
func TestGeminiHTTPError(t *testing.T) {
	srv := NewGemini(GeminiScript{
		{HTTPError: &HTTPError{Status: 429, Repeat: 1, Body: json.RawMessage(`{"error":{"code":429,"status":"RESOURCE_EXHAUSTED"}}`)}},
		{Content: []GeminiBlock{{Type: "text", Text: "after"}}},
	})
	ts := httptest.NewServer(srv)
	defer ts.Close()
	for i := 0; i < 2; i++ {
		resp := postGemini(t, ts.URL, "m", "streamGenerateContent", geminiMainReq)
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 429 || string(b) != `{"error":{"code":429,"status":"RESOURCE_EXHAUSTED"}}` {
			t.Fatalf("call %d: %d %s", i, resp.StatusCode, b)
		}
	}
	evs := readGeminiSSE(t, postGemini(t, ts.URL, "m", "streamGenerateContent", geminiMainReq).Body)
	if len(evs) != 1 || srv.Consumed() != 2 {
		t.Fatalf("after the error: %v, consumed %d", evs, srv.Consumed())
	}
}

func TestSchemaAnswer(t *testing.T) {
	for _, c := range []struct{ schema, want string }{
		{``, `{}`},
		{`not json`, `{}`},
		{`{"type":"OBJECT","properties":{"a":{"type":"BOOLEAN"},"b":{"type":"ARRAY"},"c":{"type":"NUMBER","minimum":0},"d":{"const":"x"}}}`,
			`{"a":false,"b":[],"c":0,"d":"x"}`},
		{`{"type":"object","properties":{"o":{"type":["object","null"],"properties":{"s":{"enum":["yes","no"]}}},"u":{"anyOf":[{"type":"integer"}]}}}`,
			`{"o":{"s":"yes"},"u":1}`},
	} {
		if got := string(schemaAnswer(json.RawMessage(c.schema))); got != c.want {
			t.Errorf("schemaAnswer(%s) = %s, want %s", c.schema, got, c.want)
		}
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }
