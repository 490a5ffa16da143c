package codex

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/baton-run/baton/sdk"
)

// TestMCPToolApproval: codex asks whether an MCP tool may run with an
// elicitation whose _meta says so (codex 0.171.0's frame): a permission
// request naming server and tool, answered with the elicitation's action.
// Accept for the session is refused (the answer cannot say it); an
// elicitation of another kind stays generic.
func TestMCPToolApproval(t *testing.T) {
	raw := json.RawMessage(`{"_meta":{"codex_approval_kind":"mcp_tool_call","persist":["session","always"],"tool_name":"baton_probe"},` +
		`"message":"Allow the probe MCP server to run tool \"baton_probe\"?","mode":"form","requestedSchema":{"properties":{},"type":"object"},` +
		`"serverName":"probe","threadId":"T","turnId":"u"}`)
	n := newNormalizer("T", "/ws")
	q, evs := n.openRequest("0", methodElicitation, raw)
	if ev := evs[len(evs)-1]; q.kind != sdk.RequestPermission || ev.Title != "probe/baton_probe" || ev.ThreadRef != "T" || ev.TurnRef != "u" {
		t.Fatalf("request_opened %+v; want a permission request for probe/baton_probe on T/u", ev)
	}
	for d, want := range map[sdk.Decision]string{sdk.DecisionAccept: `{"action":"accept","content":{}}`,
		sdk.DecisionDecline: `{"action":"decline"}`, sdk.DecisionCancel: `{"action":"cancel"}`} {
		res, rpcErr, err := reply(q, d, nil)
		got, _ := json.Marshal(res)
		if err != nil || rpcErr != nil || string(got) != want {
			t.Errorf("%s: %s, %v, %v; want %s", sdk.StatusWord(d), got, rpcErr, err, want)
		}
	}
	if _, _, err := reply(q, sdk.DecisionAcceptForSession, nil); !errors.Is(err, sdk.ErrInvalid) {
		t.Errorf("accept for session = %v; want invalid", err)
	}
	other, _ := n.openRequest("1", methodElicitation, json.RawMessage(`{"message":"Your name?","serverName":"x","threadId":"T","turnId":"u"}`))
	if other.kind != kindGeneric {
		t.Errorf("a form elicitation is %s; want generic", other.kind)
	}
}
