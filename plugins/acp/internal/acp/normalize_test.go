package acp

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/sourcegraph/jsonrpc2"

	"github.com/baton-run/baton/sdk"
	"github.com/baton-run/baton/sdk/jsonrpcproc"
)

func upd(t *testing.T, n *normalizer, params string) []sdk.RuntimeEvent {
	t.Helper()
	_, u, err := decodeUpdate([]byte(params))
	if err != nil {
		t.Fatalf("decode %s: %v", params, err)
	}
	return n.update(u)
}

func kinds(evs []sdk.RuntimeEvent) string {
	var ks []string
	for _, e := range evs {
		ks = append(ks, string(e.Kind)+":"+string(e.ItemKind)+":"+sdk.StatusWord(e.Status))
	}
	return strings.Join(ks, " ")
}

func TestNormalizerStreamsAndClosesItems(t *testing.T) {
	n := newNormalizer("s1", "p1")
	ref, started := n.startTurn()
	if ref != "p1#1" || started.Kind != sdk.EventTurnStarted || started.TurnRef != ref {
		t.Fatalf("start: %q %+v", ref, started)
	}
	var all []sdk.RuntimeEvent
	for _, p := range []string{
		`{"sessionId":"s1","update":{"sessionUpdate":"agent_thought_chunk","content":{"type":"text","text":"think"}}}`,
		`{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":""}}}`,
		`{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"hi"}}}`,
		`{"sessionId":"s1","update":{"sessionUpdate":"tool_call","toolCallId":"c1","title":"Run ls","kind":"execute","status":"pending"}}`,
		`{"sessionId":"s1","update":{"sessionUpdate":"tool_call","toolCallId":"c1","title":"Run ls -la","kind":"execute","status":"in_progress","rawInput":{"cmd":"ls -la"}}}`,
		`{"sessionId":"s1","update":{"sessionUpdate":"tool_call_update","toolCallId":"c1","status":"completed","rawOutput":"ok"}}`,
		`{"sessionId":"s1","update":{"sessionUpdate":"tool_call","toolCallId":"c2","kind":"edit","status":"failed"}}`,
		`{"sessionId":"s1","update":{"sessionUpdate":"tool_call","toolCallId":"c3","kind":"read"}}`,
		`{"sessionId":"s1","update":{"sessionUpdate":"plan","entries":[{"content":"a","status":"pending"}]}}`,
		`{"sessionId":"s1","update":{"sessionUpdate":"usage_update","used":100,"size":1000}}`,
		`{"sessionId":"s1","update":{"sessionUpdate":"current_mode_update","modeId":"ask"}}`,
		`{"sessionId":"s1","update":{"sessionUpdate":"user_message_chunk","content":{"type":"text","text":"echo"}}}`,
		`{"sessionId":"s1","update":{"sessionUpdate":"brand_new"}}`,
		`{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk","messageId":"m9","content":{"type":"image","data":""}}}`,
	} {
		all = append(all, upd(t, n, p)...)
	}
	all = append(all, n.endTurn(&promptResult{StopReason: "end_turn", Usage: &promptUsage{InputTokens: 1, OutputTokens: 2, TotalTokens: 3}}, nil, true)...)
	want := "item_started:reasoning:in_progress content_delta:reasoning: item_completed:reasoning:completed " +
		"item_started:assistant_message:in_progress content_delta:assistant_message: item_completed:assistant_message:completed " +
		"item_started:command_execution:in_progress item_updated:command_execution:in_progress item_completed::completed " +
		"item_started:file_change:in_progress item_completed:file_change:failed " +
		"item_started:tool_call:in_progress plan_updated:plan: usage:: session_state:: diagnostic:: " +
		"item_started:assistant_message:in_progress " +
		"item_completed:assistant_message:completed item_completed::failed usage:: turn_terminal::completed"
	if got := kinds(all); got != want {
		t.Errorf("events:\n got %s\nwant %s", got, want)
	}
	for _, e := range all {
		if e.TurnRef != "p1#1" || e.ThreadRef != "s1" {
			t.Fatalf("event %+v lacks its turn", e)
		}
	}
	// Outside a turn, output is a diagnostic.
	if evs := upd(t, n, `{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"late"}}}`); len(evs) != 1 || evs[0].Kind != sdk.EventDiagnostic {
		t.Errorf("late chunk: %s", kinds(evs))
	}
}

func TestStopReasons(t *testing.T) {
	for reason, want := range map[string]sdk.Status{"end_turn": sdk.TurnCompleted, "max_tokens": sdk.TurnCompleted,
		"max_turn_requests": sdk.TurnCompleted, "cancelled": sdk.TurnInterrupted, "refusal": sdk.TurnFailed, "weird": sdk.TurnFailed} {
		n := newNormalizer("s", "p")
		n.startTurn()
		evs := n.endTurn(&promptResult{StopReason: reason}, nil, true)
		if term := evs[len(evs)-1]; term.Status != want || term.Title != reason {
			t.Errorf("%s: %+v, want %s", reason, term, want)
		}
	}
	n := newNormalizer("s", "p")
	n.startTurn()
	evs := n.endTurn(&promptResult{}, jsonrpc2.ErrClosed, false)
	if term := evs[len(evs)-1]; term.Status != sdk.TurnFailed || term.ThreadUsable || term.Failure == nil {
		t.Errorf("failed call: %+v", term)
	}
}

func TestPickOption(t *testing.T) {
	opts := []permissionOption{{"always", "Always", "allow_always"}, {"allow", "Allow", "allow_once"}, {"reject", "Reject", "reject_once"}}
	for d, want := range map[sdk.Decision]permissionOutcome{
		sdk.DecisionAccept:           {"selected", "allow"},
		sdk.DecisionAcceptForSession: {"selected", "always"},
		sdk.DecisionDecline:          {"selected", "reject"},
		sdk.DecisionCancel:           {"cancelled", ""},
	} {
		if got := pickOption(opts, d); got != want {
			t.Errorf("%s: %+v, want %+v", d, got, want)
		}
	}
	if got := pickOption(opts[:1], sdk.DecisionDecline); got.Outcome != "cancelled" {
		t.Errorf("decline with no reject option must cancel, got %+v", got)
	}
}

func TestDecodeUpdateErrors(t *testing.T) {
	for in, want := range map[string]string{
		`[`:                             "session/update params",
		`{"update":{}}`:                 "no sessionId",
		`{"sessionId":"s"}`:             "has no update",
		`{"sessionId":"s","update":[]}`: "session/update update",
		`{"sessionId":"s","update":{}}`: "no sessionUpdate kind",
	} {
		if _, _, err := decodeUpdate([]byte(in)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("decodeUpdate(%s) = %v, want %q", in, err, want)
		}
	}
}

// FuzzDecodeFrame feeds arbitrary agent output through the frame decoder
// and the normalizer: nothing panics, and every error names the problem.
func FuzzDecodeFrame(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"x"}}}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"tool_call","toolCallId":"c","kind":"execute","status":"completed"}}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":3,"result":{"stopReason":"end_turn"}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"usage_update","used":5,"size":9,"cost":{"amount":0.5,"currency":"USD"}}}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"_meta":{"claudeCode":{"toolName":"mcp__baton__probe"}},"sessionUpdate":"tool_call","toolCallId":"c","title":"mcp__baton__probe"}}}`))
	f.Add([]byte(`Warning: banner`))
	f.Add([]byte(`{"type":"system"}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		var msg struct {
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
		}
		var req jsonrpc2.Request
		if err := jsonrpcproc.DecodeFrame(line, &req); err != nil {
			if !strings.HasPrefix(err.Error(), "not JSON") && !strings.HasPrefix(err.Error(), "not a JSON-RPC message") {
				t.Fatalf("unclear error: %v", err)
			}
		}
		if json.Unmarshal(line, &msg) != nil {
			return
		}
		_, u, err := decodeUpdate(msg.Params)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "session/update") {
				t.Fatalf("unclear error: %v", err)
			}
			return
		}
		n := newNormalizer("s", "p")
		n.mcpServers, n.costKnown = []string{"baton", "b__x"}, true
		n.startTurn()
		evs := n.update(u)
		evs = append(evs, n.update(u)...)
		evs = append(evs, n.endTurn(&promptResult{StopReason: "end_turn"}, nil, true)...)
		for _, ev := range evs {
			if ev.Usage != nil && ev.Usage.CostMicros < 0 {
				t.Fatalf("a negative cost: %+v", ev.Usage)
			}
		}
		if evs[len(evs)-1].Kind != sdk.EventTurnTerminal || len(n.tools) != 0 || n.open != "" {
			t.Fatalf("the turn did not close everything: %+v", evs)
		}
	})
}

// FuzzDecodeUpdateOnePass: the one-pass decoder of session/update params
// reads them as the step-by-step one does. Params the fast pass takes
// come out the same (session, every field, the tool from _meta); those
// it refuses go the slow way, so every error is the slow way's.
func FuzzDecodeUpdateOnePass(f *testing.F) {
	for _, s := range []string{
		`{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"x"}}}`,
		`{"sessionId":"s","update":{"_meta":{"claudeCode":{"toolName":"mcp__a__b"}},"sessionUpdate":"tool_call","toolCallId":"c","rawInput":{"a":[1,2]}}}`,
		`{"sessionId":"s","update":{"_meta":"x","sessionUpdate":"tool_call_update","status":"completed"}}`,
		`{"sessionId":"s","update":{"sessionUpdate":"usage_update","used":5,"size":9,"cost":{"amount":0.5,"currency":"USD"}}}`,
		`{"sessionId":"s","update":{"sessionUpdate":"plan","entries":[{"content":"a"}]}}`,
		`{"sessionId":"s","update":null}`, `{"sessionId":"","update":{}}`, `{"SESSIONID":"s","Update":{"SessionUpdate":"x"}}`,
		`{"sessionId":"s","update":{"sessionUpdate":"x","used":"9"}}`, `[]`, `{"sessionId":"s","update":{"sessionUpdate":"x"}} x`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, params []byte) {
		sid, u, err := decodeUpdate(params)
		wsid, wu, werr := decodeUpdateSlowly(params)
		if (err == nil) != (werr == nil) || err != nil && err.Error() != werr.Error() {
			t.Fatalf("%s: one pass: %v; slowly: %v", params, err, werr)
		}
		if err != nil {
			return
		}
		if sid != wsid || !reflect.DeepEqual(u, wu) {
			t.Fatalf("%s: one pass %q %#v\nslowly %q %#v", params, sid, u, wsid, wu)
		}
	})
}
