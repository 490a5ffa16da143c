package cursor

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/baton-run/baton/sdk"
)

// feed runs lines through a normalizer in one turn.
func feed(n *normalizer, lines ...string) []sdk.RuntimeEvent {
	out := n.begin("s/turn-1", "attempt-1", 0)
	for _, l := range lines {
		out = append(out, n.line([]byte(l))...)
	}
	return out
}

func assistantText(evs []sdk.RuntimeEvent) string {
	var b strings.Builder
	for _, ev := range evs {
		if ev.Kind == sdk.EventContentDelta && ev.ItemKind == sdk.ItemAssistantMessage {
			b.WriteString(ev.Text)
		}
	}
	return b.String()
}

func count(evs []sdk.RuntimeEvent, kind sdk.EventKind, item sdk.ItemKind) int {
	n := 0
	for _, ev := range evs {
		if ev.Kind == kind && (item == "" || ev.ItemKind == item) {
			n++
		}
	}
	return n
}

const (
	initLine = `{"type":"system","subtype":"init","session_id":"chat-1","model":"m","cwd":"/w","permissionMode":"default","apiKeySource":"login"}`
	tool     = `{"type":"tool_call","subtype":"%s","call_id":"c1","tool_call":{"readToolCall":{"args":{"path":"/w/a.txt"}%s}},"model_call_id":"mc-0","timestamp_ms":5}`
)

func toolLine(sub, result string) string {
	return strings.Replace(strings.Replace(tool, "%s", sub, 1), "%s", result, 1)
}

// The assistant text, as each form of the stream carries it: every piece
// of it once.
func TestAssistantTextOnce(t *testing.T) {
	for _, tc := range []struct {
		name     string
		lines    []string
		want     string
		messages int
	}{
		{"whole messages (no --stream-partial-output)", []string{
			`{"type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":"Reading."}]},"session_id":"chat-1","model_call_id":"mc-0","timestamp_ms":1}`,
			toolLine("started", ""), toolLine("completed", `,"result":{"success":{"content":"x"}}`),
			`{"type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":"It says x."}]},"session_id":"chat-1"}`,
		}, "Reading.It says x.", 2},
		{"pieces, the text before a tool call again, the whole reply again", []string{
			`{"type":"assistant","message":{"content":[{"type":"text","text":"Read"}]},"timestamp_ms":1}`,
			`{"type":"assistant","message":{"content":[{"type":"text","text":"ing."}]},"timestamp_ms":2}`,
			`{"type":"assistant","message":{"content":[{"type":"text","text":"Reading."}]},"model_call_id":"mc-0","timestamp_ms":3}`,
			toolLine("started", ""), toolLine("completed", `,"result":{"success":{}}`),
			`{"type":"assistant","message":{"content":[{"type":"text","text":"It says "}]},"timestamp_ms":6}`,
			`{"type":"assistant","message":{"content":[{"type":"text","text":"x."}]},"timestamp_ms":7}`,
			`{"type":"assistant","message":{"content":[{"type":"text","text":"Reading.It says x."}]}}`,
		}, "Reading.It says x.", 2},
		{"a message with model_call_id that was not streamed is kept", []string{
			`{"type":"assistant","message":{"content":[{"type":"text","text":"One."}]},"timestamp_ms":1}`,
			toolLine("started", ""), toolLine("completed", `,"result":{"success":{}}`),
			`{"type":"assistant","message":{"content":[{"type":"text","text":"Two."}]},"model_call_id":"mc-1","timestamp_ms":8}`,
		}, "One.Two.", 2},
		{"a content string", []string{
			`{"type":"assistant","message":{"role":"assistant","content":"Plain."}}`,
		}, "Plain.", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := newNormalizer("/w", "")
			evs := feed(n, append([]string{initLine}, tc.lines...)...)
			if got := assistantText(evs); got != tc.want {
				t.Errorf("text = %q, want %q", got, tc.want)
			}
			if got := count(evs, sdk.EventItemStarted, sdk.ItemAssistantMessage); got != tc.messages {
				t.Errorf("messages = %d, want %d", got, tc.messages)
			}
		})
	}
}

// turn_started comes at once for a known chat, else with system/init, and
// before anything of the turn; a chat that turns out to be another one is
// reported and followed.
func TestTurnStartedAndChat(t *testing.T) {
	n := newNormalizer("/w", "")
	evs := n.begin("s/turn-1", "a1", 0)
	if len(evs) != 0 {
		t.Fatalf("begin without a chat: %+v", evs)
	}
	evs = n.line([]byte(initLine))
	if len(evs) != 2 || evs[0].Kind != sdk.EventThreadStarted || evs[0].ThreadRef != "chat-1" ||
		evs[1].Kind != sdk.EventTurnStarted || evs[1].ClientTurnID != "a1" || evs[1].ThreadRef != "chat-1" {
		t.Fatalf("init: %+v", evs)
	}
	n.line([]byte(`{"type":"result","subtype":"success","is_error":false,"result":"","session_id":"chat-1"}`))
	evs = n.begin("s/turn-2", "a2", 0)
	if len(evs) != 1 || evs[0].Kind != sdk.EventTurnStarted || evs[0].ThreadRef != "chat-1" {
		t.Fatalf("second turn: %+v", evs)
	}
	if evs := n.line([]byte(initLine)); len(evs) != 0 {
		t.Fatalf("the same chat again: %+v", evs)
	}
	evs = n.line([]byte(`{"type":"system","subtype":"init","session_id":"chat-2"}`))
	if len(evs) != 2 || evs[0].Kind != sdk.EventDiagnostic || evs[1].Kind != sdk.EventThreadStarted || n.chat != "chat-2" {
		t.Fatalf("another chat: %+v", evs)
	}
}

// A process gone without a result: interrupted when asked, else failed
// with why; before init the turn still starts (with no chat) and ends.
func TestExited(t *testing.T) {
	n := newNormalizer("/w", "")
	n.begin("s/turn-1", "a1", 0)
	evs := n.exited(false, "cursor-agent exited: exit status 1")
	if len(evs) != 2 || evs[0].Kind != sdk.EventTurnStarted || evs[0].ThreadRef != "" ||
		evs[1].Status != sdk.TurnFailed || evs[1].Failure.Code != "provider_exited" || !evs[1].ThreadUsable {
		t.Fatalf("failed before init: %+v", evs)
	}
	if evs := n.exited(false, "again"); len(evs) != 0 {
		t.Fatalf("a second end: %+v", evs)
	}
	feed(n, initLine, toolLine("started", ""))
	evs = n.exited(true, "interrupted")
	if len(evs) != 2 || evs[0].Kind != sdk.EventItemCompleted || evs[0].Status != sdk.ItemDeclined ||
		evs[1].Status != sdk.TurnInterrupted || evs[1].Failure != nil {
		t.Fatalf("interrupted: %+v", evs)
	}
	// After a result, the exit adds nothing.
	feed(n, initLine, `{"type":"result","subtype":"success","is_error":false}`)
	if evs := n.exited(false, "exit status 1"); len(evs) != 0 || !n.done() {
		t.Fatalf("after the result: %+v", evs)
	}
}

// What is not an event, or not known, is a diagnostic; a result outside a
// turn too; a completion without its start makes the item whole.
func TestOddLines(t *testing.T) {
	n := newNormalizer("/w", "chat-1")
	evs := feed(n, `not json`, `"a string"`, `{"no":"type"}`, `{"type":"mystery","subtype":"x"}`,
		`{"type":"thinking","subtype":"odd"}`, `{"type":"tool_call","subtype":"started","tool_call":{}}`)
	if got := count(evs, sdk.EventDiagnostic, ""); got != 6 {
		t.Fatalf("diagnostics = %d, want 6: %+v", got, evs)
	}
	evs = n.line([]byte(toolLine("completed", `,"result":{"rejected":{"reason":"no"}}`)))
	if count(evs, sdk.EventItemStarted, sdk.ItemToolCall) != 1 || evs[len(evs)-1].Status != sdk.ItemDeclined || evs[len(evs)-1].Text != "no" {
		t.Fatalf("completion without start: %+v", evs)
	}
	n.line([]byte(`{"type":"result","subtype":"success"}`))
	if evs := n.line([]byte(`{"type":"result","subtype":"success"}`)); len(evs) != 1 || evs[0].Kind != sdk.EventDiagnostic {
		t.Fatalf("a second result: %+v", evs)
	}
}

func TestUsage(t *testing.T) {
	for _, tc := range []struct {
		raw  string
		want *sdk.Usage
	}{
		{`{"inputTokens":10,"outputTokens":2,"cacheReadTokens":5,"cacheWriteTokens":1}`, &sdk.Usage{InputTokens: 10, OutputTokens: 2, CachedInputTokens: 5, TotalTokens: 18}},
		{`{"input_tokens":3,"output_tokens":4,"cache_read_input_tokens":1,"total_tokens":9}`, &sdk.Usage{InputTokens: 3, OutputTokens: 4, CachedInputTokens: 1, TotalTokens: 9}},
		{`{}`, nil},
		{`null`, nil},
		{`"x"`, nil},
	} {
		got := decodeUsage([]byte(tc.raw))
		if (got == nil) != (tc.want == nil) || (got != nil && *got != *tc.want) {
			t.Errorf("usage %s = %+v, want %+v", tc.raw, got, tc.want)
		}
	}
}

func TestArgs(t *testing.T) {
	got := strings.Join(Args("/w", "gpt-5", "chat-1", true, "-rf everything"), " ")
	want := "-p --output-format stream-json --stream-partial-output --trust --workspace /w --model gpt-5 --resume chat-1 --force -- -rf everything"
	if got != want {
		t.Errorf("args = %q, want %q", got, want)
	}
}

// TestDecodeEventSaysWhatIsWrong: a line that is not JSON, JSON that is
// not an event object, and an event without a type each say so.
func TestDecodeEventSaysWhatIsWrong(t *testing.T) {
	for _, tc := range []struct{ line, want string }{
		{`{"type":"assistant"`, "not JSON"},
		{`cursor-agent: warning`, "not JSON"},
		{`["type"]`, "not a cursor-agent event"},
		{`{"type":7}`, "not a cursor-agent event"},
		{`{"subtype":"init"}`, "an event without a type"},
	} {
		e, err := DecodeEvent([]byte(tc.line))
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("DecodeEvent(%s) = %+v, %v; want an error starting %q", tc.line, e, err, tc.want)
		}
	}
	if e, err := DecodeEvent([]byte(" {\"type\":\"user\"}\n")); err != nil || e.Type != "user" {
		t.Errorf("DecodeEvent of a user event = %+v, %v", e, err)
	}
}

// TestToolCompletion: what a completed call's item says, from its args and
// its result: a command's exit, output and duration, a function's name, and
// a failure's message.
func TestToolCompletion(t *testing.T) {
	for _, tc := range []struct {
		name, call, result string
		kind               sdk.ItemKind
		title, text        string
		status             sdk.Status
		detailKey          string
		detailValue        any
	}{
		{name: "command exits 2", call: `"shellToolCall":{"args":{"command":"go vet"}`,
			result: `{"success":{"exitCode":2,"stdout":"out\n","stderr":"err\n","executionTime":40}}`,
			kind:   sdk.ItemCommandExecution, title: "go vet", status: sdk.ItemFailed, text: "out\nerr\n",
			detailKey: "durationMs", detailValue: float64(40)},
		{name: "command exits 0", call: `"shellToolCall":{"args":{"command":"true"}`,
			result: `{"success":{"exitCode":0}}`,
			kind:   sdk.ItemCommandExecution, title: "true", status: sdk.ItemDone,
			detailKey: "exitCode", detailValue: float64(0)},
		{name: "function", call: `"function":{"name":"lookup","arguments":"{\"query\":\"x\"}"`,
			result: `{"success":{"answer":1}}`,
			kind:   sdk.ItemToolCall, title: "lookup", status: sdk.ItemDone,
			detailKey: "outcome", detailValue: "success"},
		{name: "edit fails", call: `"editToolCall":{"args":{"path":"/w/a.go"}`,
			result: `{"error":{"errorMessage":"no such file"}}`,
			kind:   sdk.ItemFileChange, title: "Edit a.go", status: sdk.ItemFailed, text: "no such file",
			detailKey: "outcome", detailValue: "error"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := newNormalizer("/w", "chat-1")
			evs := feed(n, `{"type":"tool_call","subtype":"completed","call_id":"c1","tool_call":{`+tc.call+`,"result":`+tc.result+`}}}`)
			ev := evs[len(evs)-1]
			if ev.Kind != sdk.EventItemCompleted || ev.ItemKind != tc.kind || ev.Title != tc.title || ev.Status != tc.status || ev.Text != tc.text {
				t.Fatalf("completion = %+v; want a %s item %q, %s, text %q", ev, tc.kind, tc.title, tc.status, tc.text)
			}
			var d map[string]any
			if err := json.Unmarshal(ev.Detail, &d); err != nil || d[tc.detailKey] != tc.detailValue {
				t.Fatalf("detail %s = %v, want %s %v", ev.Detail, err, tc.detailKey, tc.detailValue)
			}
		})
	}
}

// TestTurnStartedNamesTheProcess: a turn's turn_started names the process
// that runs it, whether it comes at once (the chat known) or with the
// chat's system/init.
func TestTurnStartedNamesTheProcess(t *testing.T) {
	for _, chat := range []string{"chat-1", ""} {
		n := newNormalizer("/w", chat)
		evs := append(n.begin("s/turn-1", "a1", 4242), n.line([]byte(initLine))...)
		if count(evs, sdk.EventTurnStarted, "") != 1 {
			t.Fatalf("chat %q: events %+v, want one turn_started", chat, evs)
		}
		for _, ev := range evs {
			if ev.Kind == sdk.EventTurnStarted && string(ev.Detail) != `{"pid":4242}` {
				t.Errorf("chat %q: turn_started detail %s, want the process id 4242", chat, ev.Detail)
			}
		}
	}
}
