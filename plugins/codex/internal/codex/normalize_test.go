package codex

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sourcegraph/jsonrpc2"

	"github.com/baton-run/baton/sdk"
	"github.com/baton-run/baton/sdk/jsonrpcproc"
)

// feed runs frames (method + params) through the normalizer.
func feed(n *normalizer, frames ...string) []sdk.RuntimeEvent {
	var out []sdk.RuntimeEvent
	for _, f := range frames {
		var msg notification
		if err := json.Unmarshal([]byte(f), &msg); err != nil {
			panic(f)
		}
		out = append(out, n.notification(msg.Method, msg.Params)...)
	}
	return out
}

func kinds(evs []sdk.RuntimeEvent) string {
	var ks []string
	for _, e := range evs {
		k := string(e.Kind)
		if e.ItemKind != "" || e.Status != nil {
			k += ":" + string(e.ItemKind) + ":" + sdk.StatusWord(e.Status)
		}
		ks = append(ks, k)
	}
	return strings.Join(ks, " ")
}

func TestItemsAndDeltas(t *testing.T) {
	n := newNormalizer("T", "/ws")
	evs := feed(n,
		`{"method":"turn/started","params":{"threadId":"T","turn":{"id":"u1","rootTurnId":"u1","status":"inProgress"}}}`,
		`{"method":"item/started","params":{"threadId":"T","turnId":"u1","item":{"type":"userMessage","id":"m0","content":[{"type":"text","text":"hi"}]}}}`,
		`{"method":"item/started","params":{"threadId":"T","turnId":"u1","item":{"type":"reasoning","id":"r1","summary":[],"content":[]}}}`,
		`{"method":"item/reasoning/summaryPartAdded","params":{"threadId":"T","turnId":"u1","itemId":"r1","summaryIndex":0}}`,
		`{"method":"item/reasoning/summaryTextDelta","params":{"threadId":"T","turnId":"u1","itemId":"r1","delta":"a","summaryIndex":0}}`,
		`{"method":"item/reasoning/summaryPartAdded","params":{"threadId":"T","turnId":"u1","itemId":"r1","summaryIndex":1}}`,
		`{"method":"item/reasoning/summaryTextDelta","params":{"threadId":"T","turnId":"u1","itemId":"r1","delta":"b","summaryIndex":1}}`,
		`{"method":"item/completed","params":{"threadId":"T","turnId":"u1","item":{"type":"reasoning","id":"r1","summary":["a","b"]}}}`,
		// Deltas before item/started, then a completed text longer than them.
		`{"method":"item/agentMessage/delta","params":{"threadId":"T","turnId":"u1","itemId":"a1","delta":"Hel"}}`,
		`{"method":"item/started","params":{"threadId":"T","turnId":"u1","item":{"type":"agentMessage","id":"a1","text":""}}}`,
		`{"method":"item/completed","params":{"threadId":"T","turnId":"u1","item":{"type":"agentMessage","id":"a1","text":"Hello"}}}`,
		// A message completed without any delta.
		`{"method":"item/completed","params":{"threadId":"T","turnId":"u1","item":{"type":"agentMessage","id":"a2","text":"Bye"}}}`,
		`{"method":"item/started","params":{"threadId":"T","turnId":"u1","item":{"type":"commandExecution","id":"c1","command":"ls","cwd":"/ws","status":"inProgress"}}}`,
		`{"method":"item/commandExecution/outputDelta","params":{"threadId":"T","turnId":"u1","itemId":"c1","delta":"x\n"}}`,
		`{"method":"item/completed","params":{"threadId":"T","turnId":"u1","item":{"type":"commandExecution","id":"c1","command":"ls","cwd":"/ws","status":"failed","exitCode":2,"aggregatedOutput":"x\n"}}}`,
		`{"method":"item/started","params":{"threadId":"T","turnId":"u1","item":{"type":"fileChange","id":"f1","status":"inProgress","changes":[{"path":"/ws/a.txt","kind":{"type":"add"},"diff":"x"},{"path":"/etc/b","kind":{"type":"delete"},"diff":""}]}}}`,
		`{"method":"item/completed","params":{"threadId":"T","turnId":"u1","item":{"type":"fileChange","id":"f1","status":"declined","changes":[]}}}`,
		`{"method":"item/started","params":{"threadId":"T","turnId":"u1","item":{"type":"mcpToolCall","id":"t1","server":"gh","tool":"search","status":"inProgress"}}}`,
		`{"method":"item/mcpToolCall/progress","params":{"threadId":"T","turnId":"u1","itemId":"t1","message":"50%"}}`,
		`{"method":"item/completed","params":{"threadId":"T","turnId":"u1","item":{"type":"webSearch","id":"w1","query":"go"}}}`,
		`{"method":"turn/plan/updated","params":{"threadId":"T","turnId":"u1","explanation":null,"plan":[{"step":"a","status":"pending"}]}}`,
		`{"method":"item/started","params":{"threadId":"T","turnId":"u1","item":{"type":"imageView","id":"i1","path":"/ws/p.png"}}}`,
		`{"method":"turn/completed","params":{"threadId":"T","turn":{"id":"u1","rootTurnId":"u1","status":"completed","error":null}}}`,
	)
	want := "turn_started " +
		"item_started:reasoning:in_progress content_delta:reasoning: content_delta:reasoning: content_delta:reasoning: item_completed:reasoning:completed " +
		"item_started:assistant_message:in_progress content_delta:assistant_message: content_delta:assistant_message: item_completed:assistant_message:completed " +
		"item_started:assistant_message:in_progress content_delta:assistant_message: item_completed:assistant_message:completed " +
		"item_started:command_execution:in_progress content_delta:command_execution: item_completed:command_execution:failed " +
		"item_started:file_change:in_progress item_completed:file_change:declined " +
		"item_started:tool_call:in_progress item_updated:tool_call: " +
		"item_started:tool_call:in_progress item_completed:tool_call:completed " +
		"plan_updated:plan: item_started:tool_call:in_progress " +
		"item_completed:tool_call:failed item_completed:tool_call:failed turn_terminal::completed"
	if got := kinds(evs); got != want {
		t.Fatalf("events:\n got %s\nwant %s", got, want)
	}
	var texts []string
	for _, ev := range evs {
		if ev.Kind == sdk.EventContentDelta {
			texts = append(texts, ev.Text)
		}
		if ev.ThreadRef != "T" {
			t.Errorf("event %s on thread %q", ev.Kind, ev.ThreadRef)
		}
	}
	if got := strings.Join(texts, "|"); got != "a|\n\n|b|Hel|lo|Bye|x\n" {
		t.Errorf("deltas %q", got)
	}
	titles := map[string]string{}
	for _, ev := range evs {
		if ev.Kind == sdk.EventItemStarted {
			titles[ev.ItemRef] = ev.Title
		}
	}
	for ref, want := range map[string]string{"c1": "ls", "f1": "a.txt, /etc/b", "t1": "gh/search", "w1": "web search go", "i1": "p.png", "a1": ""} {
		if titles[ref] != want {
			t.Errorf("title of %s = %q, want %q", ref, titles[ref], want)
		}
	}
	for _, ev := range evs {
		if ev.Kind == sdk.EventItemCompleted && ev.ItemRef == "c1" {
			if string(ev.Detail) != `{"aggregatedOutput":"x\n","cwd":"/ws","exitCode":2,"status":"failed"}` {
				t.Errorf("command detail %s", ev.Detail)
			}
		}
		if ev.Kind == sdk.EventPlanUpdated && !strings.Contains(string(ev.Detail), `"plan":[{"step":"a"`) {
			t.Errorf("plan detail %s", ev.Detail)
		}
		if ev.Kind == sdk.EventTurnTerminal && (!ev.ThreadUsable || ev.TurnRef != "u1") {
			t.Errorf("terminal %+v", ev)
		}
	}
	if n.activeTurn("T") != "" || len(n.items) != 0 {
		t.Errorf("after the turn: active %q, open items %d", n.activeTurn("T"), len(n.items))
	}
}

// TestChildThreads: a thread other than the root is announced, with its
// parent, before anything else about it.
func TestChildThreads(t *testing.T) {
	t.Run("from the spawning item", func(t *testing.T) {
		n := newNormalizer("P", "")
		n.turnStarted("P", "pt")
		evs := feed(n,
			`{"method":"item/completed","params":{"threadId":"P","turnId":"pt","item":{"type":"collabAgentToolCall","id":"s1","tool":"spawnAgent","status":"completed","senderThreadId":"P","receiverThreadIds":["C"],"prompt":"do it"}}}`,
			`{"method":"turn/started","params":{"threadId":"C","turn":{"id":"ct","rootTurnId":"pt","status":"inProgress"}}}`,
			`{"method":"item/started","params":{"threadId":"C","turnId":"ct","item":{"type":"userMessage","id":"m","content":[{"type":"text","text":"do it"}]}}}`,
			`{"method":"turn/completed","params":{"threadId":"C","turn":{"id":"ct","rootTurnId":"pt","status":"completed"}}}`,
		)
		want := "thread_started item_started:subagent:in_progress item_completed:subagent:completed turn_started " +
			"item_started:user_message:in_progress item_completed:user_message:failed turn_terminal::completed"
		if got := kinds(evs); got != want {
			t.Fatalf("events:\n got %s\nwant %s", got, want)
		}
		if evs[0].ThreadRef != "C" || evs[0].ParentThreadRef != "P" || evs[3].Title != "do it" || evs[1].Title != "spawnAgent: do it" {
			t.Errorf("events %+v", evs[:4])
		}
		if n.activeTurn("P") != "pt" {
			t.Error("the child's end touched the parent's turn")
		}
	})
	t.Run("from rootTurnId", func(t *testing.T) {
		n := newNormalizer("P", "")
		feed(n, `{"method":"turn/started","params":{"threadId":"Q","turn":{"id":"qt","rootTurnId":"qt","status":"inProgress"}}}`)
		evs := feed(n, `{"method":"turn/started","params":{"threadId":"C","turn":{"id":"ct","rootTurnId":"qt","status":"inProgress"}}}`)
		if kinds(evs) != "thread_started turn_started" || evs[0].ParentThreadRef != "Q" {
			t.Errorf("events %+v", evs)
		}
	})
	t.Run("unknown thread", func(t *testing.T) {
		n := newNormalizer("P", "")
		evs := feed(n, `{"method":"item/agentMessage/delta","params":{"threadId":"X","turnId":"xt","itemId":"a","delta":"hi"}}`)
		if kinds(evs) != "thread_started item_started:assistant_message:in_progress content_delta:assistant_message:" || evs[0].ParentThreadRef != "P" {
			t.Errorf("events %+v", evs)
		}
	})
	t.Run("thread/started", func(t *testing.T) {
		n := newNormalizer("", "")
		if evs := feed(n, `{"method":"thread/started","params":{"thread":{"id":"R"}}}`); len(evs) != 0 || n.root != "R" {
			t.Errorf("our own new thread: %+v, root %q", evs, n.root)
		}
		evs := feed(n,
			`{"method":"thread/started","params":{"thread":{"id":"R"}}}`,
			`{"method":"thread/started","params":{"thread":{"id":"G","parentThreadId":"K"}}}`,
			`{"method":"thread/started","params":{"thread":{"id":"F","parentThreadId":null,"forkedFromId":"R"}}}`,
		)
		if kinds(evs) != "thread_started thread_started thread_started" || evs[0].ThreadRef != "K" || evs[0].ParentThreadRef != "R" ||
			evs[1].ThreadRef != "G" || evs[1].ParentThreadRef != "K" || evs[2].ThreadRef != "F" || evs[2].ParentThreadRef != "" {
			t.Errorf("events %+v", evs)
		}
	})
}

func TestTurnEnds(t *testing.T) {
	for _, c := range []struct {
		turn      string
		status    sdk.Status
		code, msg string
	}{
		{`{"id":"u","status":"completed"}`, sdk.TurnCompleted, "", ""},
		{`{"id":"u","status":"interrupted","error":null}`, sdk.TurnInterrupted, "", ""},
		{`{"id":"u","status":"failed","error":{"message":"too long","codexErrorInfo":"contextWindowExceeded"}}`, sdk.TurnFailed, "contextWindowExceeded", "too long"},
		{`{"id":"u","status":"failed","error":{"message":"down","codexErrorInfo":{"httpConnectionFailed":{"httpStatusCode":502}},"additionalDetails":"bad gateway"}}`, sdk.TurnFailed, "httpConnectionFailed", "down: bad gateway"},
		{`{"id":"u","status":"failed","error":{"message":"odd","codexErrorInfo":null}}`, sdk.TurnFailed, "turn_failed", "odd"},
		{`{"id":"u","status":"failed"}`, sdk.TurnFailed, "turn_failed", "the turn failed"},
		{`{"id":"u","status":"exploded"}`, sdk.TurnFailed, "unknown_turn_status", `turn ended with unknown status "exploded"`},
	} {
		n := newNormalizer("T", "")
		evs := feed(n, `{"method":"turn/completed","params":{"threadId":"T","turn":`+c.turn+`}}`)
		term := evs[len(evs)-1]
		var code, msg string
		if term.Failure != nil {
			code, msg = term.Failure.Code, term.Failure.Message
		}
		if term.Status != c.status || code != c.code || msg != c.msg || !term.ThreadUsable {
			t.Errorf("%s: %+v (failure %q %q)", c.turn, term, code, msg)
		}
	}
}

func TestExited(t *testing.T) {
	n := newNormalizer("P", "")
	feed(n,
		`{"method":"turn/started","params":{"threadId":"P","turn":{"id":"pt","rootTurnId":"pt"}}}`,
		`{"method":"turn/started","params":{"threadId":"C","turn":{"id":"ct","rootTurnId":"pt"}}}`,
		`{"method":"item/started","params":{"threadId":"P","turnId":"pt","item":{"type":"commandExecution","id":"c","command":"sleep 9"}}}`,
	)
	evs := n.exited("codex exited during the turn")
	if got := kinds(evs); got != "turn_terminal::failed item_completed:command_execution:failed turn_terminal::failed" {
		t.Fatalf("events %s", got)
	}
	if evs[0].ThreadRef != "C" || evs[2].ThreadRef != "P" || evs[2].ThreadUsable || evs[2].Failure.Code != "provider_exited" {
		t.Errorf("events %+v", evs)
	}
	if len(n.exited("again")) != 0 {
		t.Error("turns ended twice")
	}
}

func TestTurnStartedAfterItsEnd(t *testing.T) {
	n := newNormalizer("T", "")
	feed(n, `{"method":"turn/completed","params":{"threadId":"T","turn":{"id":"u","status":"completed"}}}`)
	n.turnStarted("T", "u") // the turn/start response handled late
	if n.activeTurn("T") != "" {
		t.Error("a finished turn became active")
	}
}

func TestUsageRateLimitsErrors(t *testing.T) {
	n := newNormalizer("T", "")
	n.turnStarted("T", "u")
	evs := feed(n,
		`{"method":"thread/tokenUsage/updated","params":{"threadId":"T","turnId":"old","tokenUsage":{"total":{"totalTokens":99},"last":{"totalTokens":99}}}}`,
		`{"method":"thread/tokenUsage/updated","params":{"threadId":"T","turnId":"u","tokenUsage":{"total":{"totalTokens":30,"inputTokens":20,"cachedInputTokens":5,"outputTokens":10,"reasoningOutputTokens":3},"last":{"totalTokens":3,"inputTokens":2,"cachedInputTokens":0,"outputTokens":1,"reasoningOutputTokens":0},"modelContextWindow":1000}}}`,
		`{"method":"thread/tokenUsage/updated","params":{"threadId":"T","turnId":"u","tokenUsage":{"total":{"totalTokens":40},"last":{"totalTokens":10,"inputTokens":6,"cachedInputTokens":1,"outputTokens":4,"reasoningOutputTokens":2}}}}`,
		`{"method":"thread/tokenUsage/updated","params":{"threadId":"T","tokenUsage":{"total":{"totalTokens":40},"last":{"totalTokens":40}}}}`,
		`{"method":"account/rateLimits/updated","params":{"rateLimits":{"limitId":"codex","primary":{"usedPercent":42,"resetsAt":1800000000,"windowDurationMins":300},"secondary":{"usedPercent":7,"resetsAt":null},"credits":null}}}`,
		`{"method":"account/rateLimits/updated","params":{"rateLimits":{"limitId":null,"primary":null,"secondary":null}}}`,
		`{"method":"error","params":{"threadId":"T","turnId":"u","willRetry":true,"error":{"message":"stream lost","codexErrorInfo":{"responseStreamDisconnected":{"httpStatusCode":null}}}}}`,
		`{"method":"thread/status/changed","params":{"threadId":"T","status":{"type":"idle"}}}`,
		`{"method":"configWarning","params":{"summary":"x"}}`,
		`{"method":"serverRequest/resolved","params":{"threadId":"T","requestId":0}}`,
		`{"method":"brand/new","params":{"x":1}}`,
		`{"method":"turn/started","params":[]}`,
		`{"method":"item/started","params":{"threadId":"T","turnId":"u","item":{"type":"agentMessage"}}}`,
		`{"method":"thread/tokenUsage/updated","params":{"threadId":"T","turnId":"u","tokenUsage":{}}}`,
		`{"method":"item/agentMessage/delta","params":{"threadId":"T","turnId":"u","delta":"x"}}`,
	)
	// A turn's usage sums its model calls ("last"), not the thread's total;
	// a restored total with no turn is no turn's usage.
	if got := kinds(evs); got != "usage usage rate_limit rate_limit diagnostic diagnostic diagnostic diagnostic diagnostic diagnostic" {
		t.Fatalf("events %s", got)
	}
	if u := evs[0].Usage; *u != (sdk.Usage{InputTokens: 2, OutputTokens: 1, TotalTokens: 3}) ||
		!strings.Contains(string(evs[0].Detail), `"modelContextWindow":1000`) {
		t.Errorf("usage %+v %s", u, evs[0].Detail)
	}
	if u := evs[1].Usage; *u != (sdk.Usage{InputTokens: 8, OutputTokens: 5, CachedInputTokens: 1, ReasoningTokens: 2, TotalTokens: 13}) {
		t.Errorf("second usage %+v", u)
	}
	evs = evs[1:]
	if rl := evs[1].RateLimit; rl.Scope != "codex/primary" || rl.UsedPercent != 42 || !rl.ResetsAt.Equal(time.Unix(1800000000, 0)) {
		t.Errorf("primary %+v", rl)
	}
	if rl := evs[2].RateLimit; rl.Scope != "codex/secondary" || !rl.ResetsAt.IsZero() {
		t.Errorf("secondary %+v", rl)
	}
	if d := evs[3]; d.Title != "codex reported an error (it retries)" || d.Failure.Code != "responseStreamDisconnected" || d.TurnRef != "u" {
		t.Errorf("error %+v", d)
	}
	if evs[4].Title != "unknown codex notification brand/new" {
		t.Errorf("unknown %+v", evs[4])
	}
	for _, d := range evs[5:] {
		if d.Title != "malformed frame" || d.Text == "" {
			t.Errorf("malformed %+v", d)
		}
	}
}

func TestOpenRequest(t *testing.T) {
	n := newNormalizer("T", "/ws")
	feed(n, `{"method":"item/started","params":{"threadId":"T","turnId":"u","item":{"type":"fileChange","id":"f","changes":[{"path":"/ws/a.go"}]}}}`)
	for _, c := range []struct {
		method, params string
		kind           sdk.RequestKind
		title, item    string
		options        int
	}{
		{"item/commandExecution/requestApproval", `{"threadId":"T","turnId":"u","itemId":"c","command":"ls","availableDecisions":["accept",{"acceptWithExecpolicyAmendment":{"execpolicy_amendment":["ls"]}},"acceptForSession","decline","cancel","later"]}`, "command_approval", "ls", "c", 4},
		{"item/fileChange/requestApproval", `{"threadId":"T","turnId":"u","itemId":"f","reason":"outside"}`, "file_change_approval", "a.go: outside", "f", 0},
		{"item/fileChange/requestApproval", `{"threadId":"T","turnId":"u","itemId":"g"}`, "file_change_approval", "file change", "g", 0},
		{"item/permissions/requestApproval", `{"threadId":"T","turnId":"u","itemId":"p","cwd":"/ws","permissions":{"network":{"enabled":true}},"reason":"fetch"}`, "permissions", "additional permissions: fetch", "p", 0},
		{"item/tool/requestUserInput", `{"threadId":"T","turnId":"u","itemId":"q","isBlocking":true,"questions":[{"id":"a","header":"A","question":"Why?"},{"id":"b","header":"B","question":"How?"}]}`, "user_input", "Why? / How?", "q", 0},
		{"mcpServer/elicitation/request", `{"threadId":"T","turnId":"u","serverName":"x"}`, "generic", "mcpServer/elicitation/request", "", 0},
		{"account/chatgptAuthTokens/refresh", `{"reason":"expired"}`, "generic", "account/chatgptAuthTokens/refresh", "", 0},
		{"item/commandExecution/requestApproval", `[1]`, "generic", "item/commandExecution/requestApproval", "", 0},
	} {
		q, evs := n.openRequest("req-1", c.method, json.RawMessage(c.params))
		ev := evs[len(evs)-1]
		if ev.Kind != sdk.EventRequestOpened || q.kind != c.kind || ev.RequestKind != c.kind || ev.Title != c.title ||
			ev.ItemRef != c.item || len(ev.Options) != c.options || ev.RequestRef != "req-1" {
			t.Errorf("%s %s: %+v", c.method, c.params, ev)
		}
		if c.kind == "user_input" && !strings.HasPrefix(string(ev.Detail), `[{"id":"a"`) {
			t.Errorf("user input detail %s", ev.Detail)
		}
		if c.kind == "generic" && string(ev.Detail) != c.params {
			t.Errorf("generic detail %s", ev.Detail)
		}
	}
	// A request from a thread not seen before announces it first.
	_, evs := n.openRequest("req-2", "item/tool/call", json.RawMessage(`{"threadId":"C","turnId":"ct","tool":"x"}`))
	if kinds(evs) != "thread_started request_opened" || evs[0].ParentThreadRef != "T" {
		t.Errorf("events %+v", evs)
	}
}

func TestReply(t *testing.T) {
	cmd := &serverRequest{ref: "r", kind: kindCommandApproval}
	perm := &serverRequest{ref: "r", kind: kindPermissions, params: requestParams{Permissions: json.RawMessage(`{"network":{"enabled":true}}`)}}
	ask := &serverRequest{ref: "r", kind: kindUserInput, params: requestParams{Questions: []question{{ID: "a"}, {ID: "b"}}}}
	gen := &serverRequest{ref: "r", kind: kindGeneric}
	for _, c := range []struct {
		q       *serverRequest
		d       sdk.Decision
		answers map[string]string
		want    string
	}{
		{cmd, sdk.DecisionAccept, nil, `{"decision":"accept"}`},
		{cmd, sdk.DecisionAcceptForSession, nil, `{"decision":"acceptForSession"}`},
		{cmd, sdk.DecisionDecline, nil, `{"decision":"decline"}`},
		{cmd, sdk.DecisionCancel, nil, `{"decision":"cancel"}`},
		{cmd, sdk.DecisionAnswer, nil, "invalid"},
		{&serverRequest{kind: kindFileChangeApproval}, sdk.DecisionAcceptForSession, nil, `{"decision":"acceptForSession"}`},
		{perm, sdk.DecisionAccept, nil, `{"permissions":{"network":{"enabled":true}},"scope":"turn"}`},
		{perm, sdk.DecisionAcceptForSession, nil, `{"permissions":{"network":{"enabled":true}},"scope":"session"}`},
		{&serverRequest{kind: kindPermissions}, sdk.DecisionAccept, nil, `{"permissions":{},"scope":"turn"}`},
		{perm, sdk.DecisionDecline, nil, `{"permissions":{}}`},
		{perm, sdk.DecisionCancel, nil, `{"permissions":{}}`},
		{perm, sdk.DecisionAnswer, nil, "invalid"},
		{ask, sdk.DecisionAnswer, map[string]string{"a": "x", "answer": "y"}, `{"answers":{"a":{"answers":["x"]},"b":{"answers":["y"]}}}`},
		{ask, sdk.DecisionAccept, map[string]string{"b": "z"}, `{"answers":{"b":{"answers":["z"]}}}`},
		{ask, sdk.DecisionAnswer, map[string]string{"c": "z"}, "invalid"},
		{ask, sdk.DecisionDecline, nil, `{"answers":{}}`},
		{ask, sdk.DecisionCancel, nil, `{"answers":{}}`},
		{ask, sdk.DecisionAcceptForSession, nil, "invalid"},
		{gen, sdk.DecisionAccept, map[string]string{"result": `{"ok":true}`}, `{"ok":true}`},
		{gen, sdk.DecisionAnswer, map[string]string{"result": `not json`}, `{}`},
		{gen, sdk.DecisionAcceptForSession, nil, `{}`},
		{gen, sdk.DecisionDecline, nil, "error -32000 declined by the user"},
		{gen, sdk.DecisionCancel, nil, "error -32000 declined by the user"},
		{gen, "maybe", nil, "invalid"},
	} {
		res, rerr, err := reply(c.q, c.d, c.answers)
		var got string
		switch {
		case err != nil:
			if !errors.Is(err, sdk.ErrInvalid) {
				t.Errorf("%s %s: %v is not ErrInvalid", c.q.kind, c.d, err)
			}
			got = "invalid"
		case rerr != nil:
			got = "error " + jsonString(rerr.Code) + " " + rerr.Message
		default:
			b, _ := json.Marshal(res)
			got = string(b)
		}
		if got != c.want {
			t.Errorf("%s %s %v: %s, want %s", c.q.kind, c.d, c.answers, got, c.want)
		}
	}
}

func jsonString(v any) string { b, _ := json.Marshal(v); return string(b) }

func TestApprovalPolicy(t *testing.T) {
	for in, want := range map[string]string{"": "untrusted", "untrusted": "untrusted", "on-request": "on-request", "never": "never", "ask": ""} {
		got, err := approvalPolicy(in)
		if got != want || (want == "") != errors.Is(err, sdk.ErrInvalid) {
			t.Errorf("approvalPolicy(%q) = %q, %v", in, got, err)
		}
	}
}

// TestTranscriptFramesDecode: every frame codex sent in the recorded
// transcripts decodes, and none becomes a "malformed" or "unknown"
// diagnostic.
func TestTranscriptFramesDecode(t *testing.T) {
	files, _ := filepath.Glob("../../../../testdata/codex/*.ndjson")
	if len(files) == 0 {
		t.Fatal("no transcripts")
	}
	for _, f := range files {
		for _, line := range inboundFrames(t, f) {
			// codex sends no "jsonrpc" member; jsonrpc2 takes its frames.
			var msg notification
			if err := json.Unmarshal(line, &msg); err != nil {
				t.Fatalf("%s: %s: %v", f, line, err)
			}
			var v any = &jsonrpc2.Response{}
			if msg.Method != "" {
				v = &jsonrpc2.Request{}
			}
			if err := jsonrpcproc.DecodeFrame(line, v); err != nil || bytes.Contains(line, []byte(`"jsonrpc"`)) {
				t.Fatalf("%s: %s: %v", f, line, err)
			}
			if req, ok := v.(*jsonrpc2.Request); !ok || !req.Notif {
				continue
			}
			for _, ev := range newNormalizer("", "").notification(msg.Method, msg.Params) {
				// codex's own error notification (a limit's) is a diagnostic
				// by design; a malformed or unknown frame is not.
				if ev.Kind == sdk.EventDiagnostic && !(msg.Method == "error" && ev.Failure != nil) {
					t.Errorf("%s: %s: %s %s", filepath.Base(f), msg.Method, ev.Title, ev.Text)
				}
			}
		}
	}
}

func inboundFrames(t testing.TB, file string) [][]byte {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		var e struct {
			Type  string          `json:"type"`
			Frame json.RawMessage `json:"frame"`
		}
		if json.Unmarshal(sc.Bytes(), &e) == nil && e.Type == "emit_inbound" {
			out = append(out, e.Frame)
		}
	}
	return out
}

// FuzzDecodeFrame feeds arbitrary codex output through the frame decoder,
// the normalizer and the request opener: nothing panics, and every decode
// error names what is wrong.
func FuzzDecodeFrame(f *testing.F) {
	f.Add([]byte(`{"method":"item/agentMessage/delta","params":{"threadId":"T","turnId":"u","itemId":"a","delta":"x"},"emittedAtMs":1}`))
	f.Add([]byte(`{"method":"turn/started","params":{"threadId":"C","turn":{"id":"ct","rootTurnId":"u"}}}`))
	f.Add([]byte(`{"id":0,"method":"item/tool/requestUserInput","params":{"threadId":"T","turnId":"u","itemId":"q","questions":[{"id":"a","question":"?"}]}}`))
	f.Add([]byte(`{"id":3,"result":{"turn":{"id":"u"}}}`))
	// Rollback: a thread's history mode, a page of its turns (newest
	// first), thread/revert's answer and the notification after it.
	f.Add([]byte(`{"method":"thread/started","params":{"thread":{"id":"F","historyMode":"paginated","forkedFromId":"T"}},"emittedAtMs":1}`))
	f.Add([]byte(`{"id":5,"result":{"data":[{"id":"u3","status":"completed","items":[]},{"id":"u2","status":"inProgress"}],"nextCursor":"{\"rolloutOrdinal\":7}","backwardsCursor":null}}`))
	f.Add([]byte(`{"id":5,"result":{"data":[],"nextCursor":{"k":1}}}`))
	f.Add([]byte(`{"id":6,"result":{"thread":{"id":"T","historyMode":"paginated","turns":[]},"turnsBackwardsCursor":"{}","itemsBackwardsCursor":"{}"}}`))
	f.Add([]byte(`{"method":"thread/reverted","params":{"threadId":"T"},"emittedAtMs":1}`))
	// Limits: a spent window's snapshot, then the failed turn (codex 0.171.0).
	f.Add([]byte(`{"method":"account/rateLimits/updated","params":{"rateLimits":{"limitId":"codex","primary":{"resetsAt":1796152365,"usedPercent":100,"windowDurationMins":300},"secondary":null}},"emittedAtMs":1}`))
	f.Add([]byte(`{"method":"turn/completed","params":{"threadId":"T","turn":{"id":"u","status":"failed","completedAt":1796152362,"error":{"codexErrorInfo":{"responseTooManyFailedAttempts":{"httpStatusCode":429}},"message":"Please try again in 1.5s."}}},"emittedAtMs":1}`))
	f.Add([]byte(`WARNING: banner`))
	f.Fuzz(func(t *testing.T, line []byte) {
		var req jsonrpc2.Request
		if err := jsonrpcproc.DecodeFrame(line, &req); err != nil {
			if !strings.HasPrefix(err.Error(), "not JSON") && !strings.HasPrefix(err.Error(), "not a JSON-RPC message") {
				t.Fatalf("unclear error: %v", err)
			}
		}
		var msg notification
		if json.Unmarshal(line, &msg) != nil {
			return
		}
		var resp struct {
			Result json.RawMessage `json:"result"`
		}
		if json.Unmarshal(line, &resp) == nil && len(resp.Result) > 0 {
			// A response: as a page of turns, and as a thread.
			var page turnsListResult
			if json.Unmarshal(resp.Result, &page) == nil {
				p := turnPages{want: 2}
				if next, err := p.add(page); err != nil {
					if err.Error() == "" {
						t.Fatal("a bad page without a reason")
					}
				} else if next == nil {
					if id, err := p.target("u2"); err != nil && !errors.Is(err, sdk.ErrInvalid) && !errors.Is(err, sdk.ErrBusy) {
						t.Fatalf("target %q: an error that is neither invalid nor busy: %v", id, err)
					}
				} else if !json.Valid(next) || p.missing() <= 0 {
					t.Fatalf("follows cursor %s for %d more turns", next, p.missing())
				}
			}
			var res threadResult
			if json.Unmarshal(resp.Result, &res) == nil {
				newNormalizer("T", "/ws").rememberThread(res.Thread)
			}
		}
		n := newNormalizer("T", "/ws")
		for _, ev := range n.notification(msg.Method, msg.Params) {
			if ev.Kind == sdk.EventDiagnostic && ev.Title == "malformed frame" && ev.Text == "" {
				t.Fatal("a malformed frame without a reason")
			}
		}
		q, evs := n.openRequest("req-0", msg.Method, msg.Params)
		if last := evs[len(evs)-1]; last.Kind != sdk.EventRequestOpened || last.RequestKind != q.kind {
			t.Fatalf("request not opened: %+v", evs)
		}
		for _, d := range []sdk.Decision{sdk.DecisionAccept, sdk.DecisionDecline, sdk.DecisionAnswer} {
			if res, rerr, err := reply(q, d, map[string]string{"answer": "x", "result": string(msg.Params)}); err == nil && rerr == nil {
				if _, err := json.Marshal(res); err != nil {
					t.Fatalf("reply does not encode: %v", err)
				}
			}
		}
	})
}

// compact keeps of each frame what the normalizer reads, so that the fuzz
// seeds stay small: the method, id and params (without the threads' and
// turns' bulky fields), and a thread/start response's thread id.
func compact(t testing.TB, frames [][]byte) [][]byte {
	var out [][]byte
	for _, fr := range frames {
		var m map[string]any
		if err := json.Unmarshal(fr, &m); err != nil {
			t.Fatal(err)
		}
		delete(m, "emittedAtMs")
		if r, ok := m["result"].(map[string]any); ok {
			th, _ := r["thread"].(map[string]any)
			m["result"] = map[string]any{"thread": map[string]any{"id": th["id"]}}
		}
		if p, ok := m["params"].(map[string]any); ok {
			for _, k := range []string{"thread", "turn"} {
				if o, ok := p[k].(map[string]any); ok {
					delete(o, "items")
					for _, x := range []string{"environments", "path", "gitInfo", "preview"} {
						delete(o, x)
					}
				}
			}
		}
		b, _ := json.Marshal(m)
		out = append(out, b)
	}
	return out
}

// FuzzNormalize feeds a sequence of frames (one per line) through one
// normalizer, then ends the process: every thread is announced before
// anything else is said about it, nothing stays open, and no turn ends
// twice.
func FuzzNormalize(f *testing.F) {
	files, _ := filepath.Glob("../../../../testdata/codex/*.ndjson")
	for _, file := range files {
		f.Add(bytes.Join(compact(f, inboundFrames(f, file)), []byte("\n")))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		n := newNormalizer("", "/ws")
		var evs []sdk.RuntimeEvent
		rootAt := -1 // how many events came before the root was known
		for i, line := range bytes.Split(data, []byte("\n")) {
			before := len(evs)
			var msg struct {
				ID     *json.RawMessage `json:"id"`
				Method string           `json:"method"`
				Params json.RawMessage  `json:"params"`
				Result *threadResult    `json:"result"`
			}
			if json.Unmarshal(line, &msg) != nil {
				continue
			}
			switch {
			case msg.Method != "" && msg.ID != nil:
				_, out := n.openRequest("req-"+string(*msg.ID), msg.Method, msg.Params)
				evs = append(evs, out...)
			case msg.Method != "":
				evs = append(evs, n.notification(msg.Method, msg.Params)...)
			case msg.Result != nil && msg.Result.Thread.ID != "" && n.root == "":
				n.setRoot(msg.Result.Thread.ID)
			}
			if rootAt < 0 && n.root != "" {
				rootAt = before // named by this frame (a response, or its own thread/started)
			}
			if i > 500 {
				break
			}
		}
		evs = append(evs, n.exited("gone")...)
		// A thread is known once announced, and the root from when the
		// thread/start response named it (a frame before that could only
		// take it for another thread).
		known := map[string]bool{"": true}
		ended := map[string]bool{}
		for i, ev := range evs {
			if i == rootAt {
				known[n.root] = true
			}
			switch ev.Kind {
			case sdk.EventThreadStarted:
				if known[ev.ThreadRef] && ev.ThreadRef != "" {
					t.Fatalf("thread %q announced twice", ev.ThreadRef)
				}
				if ev.ParentThreadRef != "" && !known[ev.ParentThreadRef] {
					t.Fatalf("thread %q announced before its parent %q", ev.ThreadRef, ev.ParentThreadRef)
				}
				known[ev.ThreadRef] = true
			case sdk.EventTurnTerminal:
				if ended[ev.TurnRef] && ev.TurnRef != "" && len(n.active) > 0 {
					t.Fatalf("turn %q ended twice with turns still active", ev.TurnRef)
				}
				ended[ev.TurnRef] = true
			}
			if ev.Kind != sdk.EventThreadStarted && ev.Kind != sdk.EventDiagnostic && !known[ev.ThreadRef] {
				t.Fatalf("%s on thread %q before its thread_started", ev.Kind, ev.ThreadRef)
			}
		}
		if len(n.active) != 0 {
			t.Fatalf("turns still active after exit: %v", n.active)
		}
	})
}
