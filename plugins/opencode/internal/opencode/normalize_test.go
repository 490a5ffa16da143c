package opencode

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-run/baton/sdk"
	"github.com/baton-run/baton/sdk/sse"
)

// ev builds an event's data.
func ev(typ string, props string) []byte {
	return []byte(fmt.Sprintf(`{"id":"evt_1","type":%q,"properties":%s}`, typ, props))
}

func feed(t *testing.T, n *normalizer, events ...[]byte) []sdk.RuntimeEvent {
	t.Helper()
	var out []sdk.RuntimeEvent
	for _, b := range events {
		e, err := decodeEvent(b)
		if err != nil {
			t.Fatalf("decode %s: %v", b, err)
		}
		out = append(out, n.event(e)...)
	}
	return out
}

func user(session, id string) []byte {
	return ev("message.updated", fmt.Sprintf(`{"sessionID":%q,"info":{"id":%q,"sessionID":%q,"role":"user"}}`, session, id, session))
}

func assistant(session, id, parent string) []byte {
	return ev("message.updated", fmt.Sprintf(`{"sessionID":%q,"info":{"id":%q,"sessionID":%q,"role":"assistant","parentID":%q}}`,
		session, id, session, parent))
}

func textPart(session, msg, id, text string, end bool) []byte {
	tm := `{"start":1}`
	if end {
		tm = `{"start":1,"end":2}`
	}
	return ev("message.part.updated", fmt.Sprintf(`{"sessionID":%q,"part":{"id":%q,"messageID":%q,"sessionID":%q,"type":"text","text":%q,"time":%s}}`,
		session, id, msg, session, text, tm))
}

func delta(session, msg, part, text string) []byte {
	return ev("message.part.delta", fmt.Sprintf(`{"sessionID":%q,"messageID":%q,"partID":%q,"field":"text","delta":%q}`, session, msg, part, text))
}

func idle(session string) []byte { return ev("session.idle", fmt.Sprintf(`{"sessionID":%q}`, session)) }

func busy(session string) []byte {
	return ev("session.status", fmt.Sprintf(`{"sessionID":%q,"status":{"type":"busy"}}`, session))
}

func kinds(evs []sdk.RuntimeEvent) string {
	var ks []string
	for _, e := range evs {
		ks = append(ks, string(e.Kind))
	}
	return strings.Join(ks, " ")
}

func TestTurnFromUserMessageToIdle(t *testing.T) {
	n := newNormalizer("ses_root", "/ws")
	n.expectTurn("client-1")
	out := feed(t, n,
		user("ses_root", "msg_u1"), user("ses_root", "msg_u1"), // repeated with a summary later
		busy("ses_root"),
		assistant("ses_root", "msg_a1", "msg_u1"),
		textPart("ses_root", "msg_u1", "prt_user", "Say hello", false), // the user's own text: not an item
		textPart("ses_root", "msg_a1", "prt_t", "", false),
		delta("ses_root", "msg_a1", "prt_t", "Hel"),
		delta("ses_root", "msg_a1", "prt_t", "lo"),
		textPart("ses_root", "msg_a1", "prt_t", "Hello!", true),
		ev("message.part.updated", `{"sessionID":"ses_root","part":{"id":"prt_s","messageID":"msg_a1","sessionID":"ses_root","type":"step-finish","tokens":{"total":12,"input":10,"output":2,"reasoning":0,"cache":{"read":0,"write":0}}}}`),
		ev("session.status", `{"sessionID":"ses_root","status":{"type":"idle"}}`),
		idle("ses_root"), idle("ses_root"))
	want := "turn_started item_started content_delta content_delta content_delta item_completed usage turn_terminal"
	if got := kinds(out); got != want {
		t.Fatalf("events %s; want %s", got, want)
	}
	if out[0].ClientTurnID != "client-1" || out[0].TurnRef != "msg_u1" {
		t.Errorf("turn_started %+v", out[0])
	}
	if out[4].Text != "!" || out[5].Text != "Hello!" {
		t.Errorf("the missing tail %q, completed text %q", out[4].Text, out[5].Text)
	}
	if u := out[6].Usage; u == nil || u.TotalTokens != 12 || u.InputTokens != 10 {
		t.Errorf("usage %+v", out[6].Usage)
	}
	if term := out[7]; term.Status != sdk.TurnCompleted || term.TurnRef != "msg_u1" || !term.ThreadUsable {
		t.Errorf("terminal %+v", term)
	}
	// The next turn gets no client turn id that was not given, and an idle
	// before its session went busy (an abort's late second idle) does not
	// end it.
	out = feed(t, n, user("ses_root", "msg_u2"), idle("ses_root"))
	if len(out) != 1 || out[0].ClientTurnID != "" {
		t.Errorf("second turn %s %+v", kinds(out), out)
	}
	if out = feed(t, n, busy("ses_root"), idle("ses_root")); kinds(out) != "turn_terminal" {
		t.Errorf("after busy, idle gave %s", kinds(out))
	}
}

func TestOtherSessionsIgnored(t *testing.T) {
	n := newNormalizer("ses_root", "/ws")
	out := feed(t, n, user("ses_other", "msg_1"), idle("ses_other"),
		ev("session.created", `{"sessionID":"ses_x","info":{"id":"ses_x","parentID":"ses_other"}}`))
	if len(out) != 0 {
		t.Fatalf("events for another client's sessions: %s", kinds(out))
	}
}

// TestChildSession: a task's child session is a child thread; its idle
// ends its own turn, not the root's.
func TestChildSession(t *testing.T) {
	n := newNormalizer("ses_root", "/ws")
	out := feed(t, n, user("ses_root", "msg_u1"), assistant("ses_root", "msg_a1", "msg_u1"),
		ev("message.part.updated", `{"sessionID":"ses_root","part":{"id":"prt_task","messageID":"msg_a1","sessionID":"ses_root","type":"tool","tool":"task","callID":"c1","state":{"status":"running","input":{"description":"Say hi","prompt":"hi","subagent_type":"general"}}}}`),
		ev("session.created", `{"sessionID":"ses_child","info":{"id":"ses_child","parentID":"ses_root","title":"Say hi (@general subagent)"}}`),
		ev("session.updated", `{"sessionID":"ses_child","info":{"id":"ses_child","parentID":"ses_root"}}`),
		user("ses_child", "msg_cu"), busy("ses_child"), assistant("ses_child", "msg_ca", "msg_cu"),
		textPart("ses_child", "msg_ca", "prt_ct", "Hi", true),
		idle("ses_child"))
	want := "turn_started item_started thread_started turn_started item_started content_delta item_completed turn_terminal"
	if got := kinds(out); got != want {
		t.Fatalf("events %s; want %s", got, want)
	}
	if out[1].ItemKind != sdk.ItemSubagent || out[1].Title != "task: Say hi" {
		t.Errorf("task item %+v", out[1])
	}
	if ts := out[2]; ts.ThreadRef != "ses_child" || ts.ParentThreadRef != "ses_root" {
		t.Errorf("thread_started %+v", ts)
	}
	if out[3].ClientTurnID != "" || out[3].ThreadRef != "ses_child" {
		t.Errorf("child turn %+v", out[3])
	}
	if term := out[7]; term.ThreadRef != "ses_child" {
		t.Errorf("terminal %+v", term)
	}
	if n.activeTurn("ses_root") != "msg_u1" {
		t.Errorf("the root turn ended with its child")
	}
}

// TestQueuedPromptJoinsTurn: a user message that arrives while the turn
// runs is that turn's, not a new one.
func TestQueuedPromptJoinsTurn(t *testing.T) {
	n := newNormalizer("ses_root", "/ws")
	out := feed(t, n, user("ses_root", "msg_u1"), busy("ses_root"), user("ses_root", "msg_u2"), assistant("ses_root", "msg_a2", "msg_u2"),
		textPart("ses_root", "msg_a2", "prt_t", "both", true), idle("ses_root"))
	if got := kinds(out); got != "turn_started item_started content_delta item_completed turn_terminal" {
		t.Fatalf("events %s", got)
	}
	if out[4].TurnRef != "msg_u1" {
		t.Errorf("terminal %+v", out[4])
	}
	got := n.turns([]messageWithParts{{Info: messageInfo{ID: "msg_u1", Role: "user"}}, {Info: messageInfo{ID: "msg_u2", Role: "user"}},
		{Info: messageInfo{ID: "msg_a2", Role: "assistant"}}, {Info: messageInfo{ID: "msg_u3", Role: "user"}}}, sessionInfo{})
	if strings.Join(got, " ") != "msg_u1 msg_u3" {
		t.Errorf("turns %v; want the queued message left out", got)
	}
	if got := n.turns([]messageWithParts{{Info: messageInfo{ID: "msg_u1", Role: "user"}}, {Info: messageInfo{ID: "msg_u3", Role: "user"}}},
		sessionInfo{Revert: &struct {
			MessageID string `json:"messageID"`
		}{MessageID: "msg_u3"}}); strings.Join(got, " ") != "msg_u1" {
		t.Errorf("turns %v; want those before the revert", got)
	}
}

func TestAbortAndErrors(t *testing.T) {
	n := newNormalizer("ses_root", "/ws")
	out := feed(t, n, user("ses_root", "msg_u1"), busy("ses_root"), assistant("ses_root", "msg_a1", "msg_u1"), textPart("ses_root", "msg_a1", "prt_t", "", false))
	n.abort("ses_root")
	out = append(out, feed(t, n, ev("session.error", `{"sessionID":"ses_root","error":{"name":"MessageAbortedError","data":{"message":"Aborted"}}}`),
		idle("ses_root"))...)
	term := out[len(out)-1]
	if term.Status != sdk.TurnInterrupted || term.Failure != nil || out[len(out)-2].Kind != sdk.EventItemCompleted {
		t.Fatalf("events %s, terminal %+v; want the open item closed and the turn interrupted", kinds(out), term)
	}
	out = feed(t, n, user("ses_root", "msg_u2"), busy("ses_root"),
		ev("session.error", `{"sessionID":"ses_root","error":{"name":"APIError","data":{"message":"overloaded"}}}`), idle("ses_root"))
	term = out[len(out)-1]
	if term.Status != sdk.TurnFailed || term.Failure == nil || term.Failure.Message != "overloaded" || out[1].Kind != sdk.EventDiagnostic {
		t.Fatalf("events %s, terminal %+v; want a diagnostic and a failed turn", kinds(out), term)
	}
	// opencode exiting ends a running turn as failed, unusable.
	out = feed(t, n, user("ses_root", "msg_u3"))
	out = n.exited("gone")
	if len(out) != 1 || out[0].Status != sdk.TurnFailed || out[0].ThreadUsable {
		t.Fatalf("exit: %+v", out)
	}
}

func TestToolsAndPermissions(t *testing.T) {
	n := newNormalizer("ses_root", "/ws")
	out := feed(t, n, user("ses_root", "msg_u1"), assistant("ses_root", "msg_a1", "msg_u1"),
		ev("message.part.updated", `{"sessionID":"ses_root","part":{"id":"prt_b","messageID":"msg_a1","sessionID":"ses_root","type":"tool","tool":"bash","callID":"c1","state":{"status":"pending","input":{}}}}`),
		ev("message.part.updated", `{"sessionID":"ses_root","part":{"id":"prt_b","messageID":"msg_a1","sessionID":"ses_root","type":"tool","tool":"bash","callID":"c1","state":{"status":"running","input":{"command":"ls"}}}}`))
	if got := kinds(out); got != "turn_started item_started" || out[1].ItemKind != sdk.ItemCommandExecution {
		t.Fatalf("events %s %+v", got, out)
	}
	req, ok := n.permissionAsked(permissionAsked{ID: "per_1", SessionID: "ses_root", Permission: "bash", Patterns: []string{"ls"},
		Metadata: json.RawMessage(`{"command":"ls"}`), Tool: &struct {
			MessageID string `json:"messageID"`
			CallID    string `json:"callID"`
		}{MessageID: "msg_a1", CallID: "c1"}}, nil)
	if !ok || req.RequestKind != "command_approval" || req.ItemRef != "prt_b" || req.TurnRef != "msg_u1" || req.Text != "ls" || len(req.Options) != 3 {
		t.Fatalf("request %+v", req)
	}
	if _, ok := n.permissionAsked(permissionAsked{ID: "per_2", SessionID: "ses_other"}, nil); ok {
		t.Error("another client's permission opened a request")
	}
	n.rejectedCall("c1")
	out = feed(t, n,
		ev("message.part.updated", `{"sessionID":"ses_root","part":{"id":"prt_b","messageID":"msg_a1","sessionID":"ses_root","type":"tool","tool":"bash","callID":"c1","state":{"status":"error","input":{"command":"ls"},"error":"The user rejected permission"}}}`),
		ev("message.part.updated", `{"sessionID":"ses_root","part":{"id":"prt_w","messageID":"msg_a1","sessionID":"ses_root","type":"tool","tool":"write","callID":"c2","state":{"status":"completed","input":{"filePath":"/ws/a/b.txt","content":"x"},"output":"Wrote file"}}}`))
	if got := kinds(out); got != "item_completed item_started item_completed" {
		t.Fatalf("events %s", got)
	}
	if out[0].Status != sdk.ItemDeclined || out[0].Title != "ls" {
		t.Errorf("declined command %+v", out[0])
	}
	if out[1].ItemKind != sdk.ItemFileChange || out[1].Title != "a/b.txt" || out[2].Status != sdk.ItemDone {
		t.Errorf("file change %+v %+v", out[1], out[2])
	}
}

func TestMalformedEvents(t *testing.T) {
	if _, err := decodeEvent([]byte(`{"properties":{}}`)); err == nil {
		t.Error("an event without a type decoded")
	}
	// Data that is not JSON: the error quotes it (bounded, escaped).
	_, err := decodeEvent([]byte("\xffnot json " + strings.Repeat("z", 300)))
	want := `event is not a JSON object (invalid character 'ÿ' looking for beginning of value): "\xffnot json ` +
		strings.Repeat("z", 200-len("\xffnot json ")) + `…" (310 bytes in all)`
	if err == nil || err.Error() != want {
		t.Errorf("data that is not JSON: %v, want %s", err, want)
	}
	n := newNormalizer("ses_root", "/ws")
	out := feed(t, n, ev("message.updated", `{"info":"x"}`))
	if len(out) != 1 || out[0].Kind != sdk.EventDiagnostic {
		t.Fatalf("malformed event gave %s", kinds(out))
	}
}

// FuzzNormalize: any sequence of events normalizes without panicking, and
// what comes out is consistent: items complete only once started, turns
// end only once started, nothing after a thread's turn ended refers to it.
func FuzzNormalize(f *testing.F) {
	for _, name := range []string{"simple", "approval_accept", "subagent"} {
		for _, data := range transcriptEvents(f, name) {
			f.Add(data)
		}
	}
	f.Add([]byte(`{"type":"message.updated","properties":{"sessionID":"ses_root","info":{"id":"m","sessionID":"ses_root","role":"user"}}}` + "\n" +
		`{"type":"session.idle","properties":{"sessionID":"ses_root"}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		n := newNormalizer("", "/ws")
		started := map[string]bool{}
		turns := map[string]bool{}
		for _, line := range strings.Split(string(b), "\n") {
			e, err := decodeEvent([]byte(line))
			if err != nil {
				continue
			}
			if n.root == "" {
				var p struct {
					SessionID string `json:"sessionID"`
				}
				if json.Unmarshal(e.Properties, &p) == nil && p.SessionID != "" {
					n.setRoot(p.SessionID)
				}
			}
			for _, out := range n.event(e) {
				switch out.Kind {
				case sdk.EventItemStarted:
					if started[out.ItemRef] {
						t.Fatalf("item %s started twice", out.ItemRef)
					}
					started[out.ItemRef] = true
				case sdk.EventItemCompleted:
					if !started[out.ItemRef] {
						t.Fatalf("item %s completed, never started", out.ItemRef)
					}
					delete(started, out.ItemRef)
				case sdk.EventTurnStarted:
					turns[out.TurnRef] = true
				case sdk.EventTurnTerminal:
					if !turns[out.TurnRef] {
						t.Fatalf("turn %s ended, never started", out.TurnRef)
					}
					delete(turns, out.TurnRef)
				}
			}
		}
	})
}

// transcriptEvents reads a transcript's SSE events, joined as one input.
func transcriptEvents(f *testing.F, name string) [][]byte {
	file, err := os.Open(filepath.Join("..", "..", "..", "..", "testdata", "opencode", name+".ndjson"))
	if err != nil {
		return nil
	}
	defer file.Close()
	var lines []string
	sc := bufio.NewScanner(file)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var e struct {
			Frame struct {
				SSE json.RawMessage `json:"sse"`
			} `json:"frame"`
		}
		if json.Unmarshal(sc.Bytes(), &e) == nil && len(e.Frame.SSE) > 0 {
			lines = append(lines, string(e.Frame.SSE))
		}
	}
	return [][]byte{[]byte(strings.Join(lines, "\n"))}
}

// FuzzDecodeEvent: the plugin's path for the bytes of its event stream
// (server-sent events, then each event's JSON) never panics, and every
// event it decodes has a type and normalizes.
func FuzzDecodeEvent(f *testing.F) {
	f.Add([]byte("data: {\"id\":\"evt_1\",\"type\":\"server.connected\",\"properties\":{}}\n\n"))
	f.Add([]byte("data: {\"type\":\"session.idle\",\"properties\":{\"sessionID\":\"ses_root\"}}\r\n\r\ndata: {\"type\":1}\n\n"))
	f.Add([]byte("data: {\"type\":\"message.updated\",\"properties\":{\"sessionID\":\"ses_root\",\"info\":{\"id\":\"m\",\"role\":\"user\",\"sessionID\":\"ses_root\"}}}\n\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		n := newNormalizer("ses_root", "/ws")
		d := sse.NewDecoder(bytes.NewReader(b))
		for {
			ev, err := d.Next()
			if err != nil {
				return
			}
			e, err := decodeEvent(ev.Data)
			if err != nil {
				continue
			}
			if e.Type == "" {
				t.Fatalf("decoded an event without a type from %q", ev.Data)
			}
			_ = n.event(e)
		}
	})
}

// TestStateDoesNotGrowWithTurns: over a long session, what the normalizer
// keeps of ended turns is their user messages (for rollback), not their
// assistant messages, tool calls or rejections.
func TestStateDoesNotGrowWithTurns(t *testing.T) {
	n := newNormalizer("ses_root", "/ws")
	const turns = 20
	for i := range turns {
		u, a, a2 := fmt.Sprintf("msg_u%d", i), fmt.Sprintf("msg_a%d", i), fmt.Sprintf("msg_b%d", i)
		tool := func(a, part, call, status string) []byte {
			return ev("message.part.updated", fmt.Sprintf(`{"sessionID":"ses_root","part":{"id":%q,"messageID":%q,"sessionID":"ses_root","type":"tool","tool":"bash","callID":%q,"state":{"status":%q,"input":{"command":"ls"}}}}`,
				part, a, call, status))
		}
		c1, c2 := fmt.Sprintf("call_%d_1", i), fmt.Sprintf("call_%d_2", i)
		out := feed(t, n, user("ses_root", u), busy("ses_root"), assistant("ses_root", a, u),
			tool(a, "prt_"+c1, c1, "running"), tool(a, "prt_"+c1, c1, "completed"), tool(a, "prt_"+c2, c2, "running"))
		n.rejectedCall(c2)
		out = append(out, feed(t, n, tool(a, "prt_"+c2, c2, "error"), assistant("ses_root", a2, u),
			textPart("ses_root", a2, "prt_t"+a2, "done", true), idle("ses_root"),
			// a late update of the ended turn's message binds nothing
			assistant("ses_root", a2, u))...)
		if term := out[len(out)-1]; term.Kind != sdk.EventTurnTerminal || term.Status != sdk.TurnCompleted {
			t.Fatalf("turn %d: events %s", i, kinds(out))
		}
	}
	if len(n.msgRole) != 0 || len(n.callPart) != 0 || len(n.rejected) != 0 || len(n.msgTurn) != turns || len(n.items) != 0 {
		t.Errorf("after %d turns: %d message roles, %d tool calls, %d rejections, %d messages bound to turns, %d open items; want 0, 0, 0, %d, 0",
			turns, len(n.msgRole), len(n.callPart), len(n.rejected), len(n.msgTurn), len(n.items), turns)
	}
}

// TestUsageSumsTheTurnsSteps: each step-finish reports the turn's usage so
// far; the next turn counts from zero.
func TestUsageSumsTheTurnsSteps(t *testing.T) {
	step := func(msg, part string, in, out int) []byte {
		return ev("message.part.updated", fmt.Sprintf(`{"sessionID":"ses_root","part":{"id":%q,"messageID":%q,"sessionID":"ses_root","type":"step-finish","tokens":{"input":%d,"output":%d,"reasoning":0,"cache":{"read":1,"write":0}}}}`,
			part, msg, in, out))
	}
	usage := func(evs []sdk.RuntimeEvent) []sdk.Usage {
		var us []sdk.Usage
		for _, e := range evs {
			if e.Kind == sdk.EventUsage {
				us = append(us, *e.Usage)
			}
		}
		return us
	}
	n := newNormalizer("ses_root", "/ws")
	first := usage(feed(t, n, user("ses_root", "msg_u1"), busy("ses_root"), assistant("ses_root", "msg_a1", "msg_u1"),
		step("msg_a1", "prt_s1", 10, 2), assistant("ses_root", "msg_a2", "msg_u1"), step("msg_a2", "prt_s2", 20, 3), idle("ses_root")))
	second := usage(feed(t, n, user("ses_root", "msg_u2"), busy("ses_root"), assistant("ses_root", "msg_a3", "msg_u2"),
		step("msg_a3", "prt_s3", 5, 1), idle("ses_root")))
	want := []sdk.Usage{
		{InputTokens: 10, OutputTokens: 2, CachedInputTokens: 1, TotalTokens: 13},
		{InputTokens: 30, OutputTokens: 5, CachedInputTokens: 2, TotalTokens: 37},
		{InputTokens: 5, OutputTokens: 1, CachedInputTokens: 1, TotalTokens: 7},
	}
	if got := append(first, second...); !slices.Equal(got, want) {
		t.Errorf("usage events %+v; want %+v", got, want)
	}
}

// TestUsageByModel: a turn whose steps ran on two models reports its sum,
// with opencode's costs, and one usage a model, sorted by model.
func TestUsageByModel(t *testing.T) {
	msg := func(id, model string) []byte {
		return ev("message.updated", fmt.Sprintf(`{"sessionID":"ses_root","info":{"id":%q,"sessionID":"ses_root","role":"assistant","parentID":"msg_u1","providerID":"p","modelID":%q}}`, id, model))
	}
	step := func(msg, part string, in int, cost string) []byte {
		return ev("message.part.updated", fmt.Sprintf(`{"sessionID":"ses_root","part":{"id":%q,"messageID":%q,"sessionID":"ses_root","type":"step-finish","cost":%s,"tokens":{"input":%d,"output":1,"reasoning":0,"cache":{"read":0,"write":0}}}}`,
			part, msg, cost, in))
	}
	n := newNormalizer("ses_root", "/ws")
	evs := feed(t, n, user("ses_root", "msg_u1"), busy("ses_root"), msg("msg_a1", "small"), step("msg_a1", "prt_1", 10, "0.000125"),
		msg("msg_a2", "large"), step("msg_a2", "prt_2", 20, "0.5"))
	last := evs[len(evs)-1]
	large := sdk.Usage{InputTokens: 20, OutputTokens: 1, TotalTokens: 21, CostMicros: 500000, Model: "p/large"}
	small := sdk.Usage{InputTokens: 10, OutputTokens: 1, TotalTokens: 11, CostMicros: 125, Model: "p/small"}
	want := sdk.RuntimeEvent{Kind: sdk.EventUsage, ThreadRef: "ses_root", TurnRef: "msg_u1",
		Usage:      &sdk.Usage{InputTokens: 30, OutputTokens: 2, TotalTokens: 32, CostMicros: 500125, Model: "p/large"},
		ModelUsage: []sdk.Usage{large, small}}
	if d := cmp.Diff(want, last); d != "" {
		t.Errorf("usage of a turn on two models (-want +got):\n%s", d)
	}
}

func TestMCPToolName(t *testing.T) {
	servers := []string{"probe", "probe_x", "docs"}
	for _, tc := range []struct{ name, server, tool string }{
		{"probe_baton_probe", "probe", "baton_probe"},
		{"probe_x_run", "probe_x", "run"}, // the longest server name that prefixes it
		{"docs_search", "docs", "search"},
		{"bash", "", ""},
		{"probe_", "", ""},
		{"other_tool", "", ""}, // a server the session was not given
	} {
		server, tool, ok := sdk.MCPToolOf(tc.name, "", "_", servers)
		if server != tc.server || tool != tc.tool || ok != (tc.server != "") {
			t.Errorf("mcpTool(%q) = %q, %q, %v; want %q, %q", tc.name, server, tool, ok, tc.server, tc.tool)
		}
	}
}
