package acp

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/go-hclog"

	"github.com/baton-run/baton/sdk"
)

var (
	stdioMCP = sdk.MCPServer{Name: "baton", Transport: sdk.MCPStdio, Command: "mcptool", Args: []string{"--quiet"},
		Env: []sdk.NameValue{{Name: "TOKEN", Value: "env-secret"}}}
	bareMCP = sdk.MCPServer{Name: "bare", Transport: sdk.MCPStdio, Command: "bare-mcp"}
	httpMCP = sdk.MCPServer{Name: "docs", Transport: sdk.MCPHTTP, URL: "http://127.0.0.1:9/mcp",
		Headers: []sdk.NameValue{{Name: "X-Token", Value: "header-secret"}}}
)

// The servers as session/new carries them: ACP's form, every list
// present (an empty one []), the order kept, [] for none.
func TestMCPServersInACPForm(t *testing.T) {
	for _, tc := range []struct {
		name      string
		takesHTTP bool
		servers   []sdk.MCPServer
		want      string
	}{
		{"none", false, nil, `{"cwd":"/w","mcpServers":[]}`},
		{"stdio to an agent without http", false, []sdk.MCPServer{stdioMCP, bareMCP},
			`{"cwd":"/w","mcpServers":[{"name":"baton","command":"mcptool","args":["--quiet"],"env":[{"name":"TOKEN","value":"env-secret"}]},` +
				`{"name":"bare","command":"bare-mcp","args":[],"env":[]}]}`},
		{"http to an agent that takes it", true, []sdk.MCPServer{httpMCP, stdioMCP},
			`{"cwd":"/w","mcpServers":[{"type":"http","name":"docs","url":"http://127.0.0.1:9/mcp","headers":[{"name":"X-Token","value":"header-secret"}]},` +
				`{"name":"baton","command":"mcptool","args":["--quiet"],"env":[{"name":"TOKEN","value":"env-secret"}]}]}`},
		{"http without headers", true, []sdk.MCPServer{{Name: "open", Transport: sdk.MCPHTTP, URL: "https://127.0.0.1/mcp"}},
			`{"cwd":"/w","mcpServers":[{"type":"http","name":"open","url":"https://127.0.0.1/mcp","headers":[]}]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			servers, err := mcpServers("the ACP agent", tc.takesHTTP, tc.servers)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := json.Marshal(newSessionParams{Cwd: "/w", McpServers: servers})
			if diff := cmp.Diff(tc.want, string(got)); diff != "" {
				t.Errorf("session/new params (-want +got):\n%s", diff)
			}
		})
	}
}

// An http server for an agent that did not say it takes one is refused,
// naming the agent, the server and the transport; never dropped.
func TestMCPHTTPServerRefused(t *testing.T) {
	agent := agentName(json.RawMessage(`{"name":"stdio-only","version":"1"}`))
	servers, err := mcpServers(agent, false, []sdk.MCPServer{stdioMCP, httpMCP})
	if err == nil {
		t.Fatalf("servers %v given to an agent that takes no http server; want a refusal", servers)
	}
	var te *sdk.MCPTransportError
	if !errors.As(err, &te) || te.Server != "docs" || te.Transport != sdk.MCPHTTP {
		t.Errorf("refusal %#v; want an MCPTransportError for docs over http", err)
	}
	if want := `the ACP agent "stdio-only" cannot take MCP server "docs" over http (it takes only stdio)`; err.Error() != want {
		t.Errorf("refusal %q; want %q", err, want)
	}
	if got := agentName(nil); got != "the ACP agent" {
		t.Errorf("an agent without agentInfo is named %q", got)
	}
}

func TestMCPToolNames(t *testing.T) {
	servers := []string{"baton", "a", "a__b"}
	for _, tc := range []struct{ name, server, tool string }{
		{"mcp__baton__baton_probe", "baton", "baton_probe"},
		{"mcp__a__b__t", "a__b", "t"}, // the longest configured name that fits
		{"mcp__a__t", "a", "t"},
		{"mcp__acp__Write", "", ""}, // claude-code-acp's own file tool
		{"mcp__baton__", "", ""},
		{"baton__baton_probe", "", ""},
		{"Write", "", ""},
	} {
		server, tool, ok := sdk.MCPToolOf(tc.name, "mcp__", "__", servers)
		if server != tc.server || tool != tc.tool || ok != (tc.server != "") {
			t.Errorf("mcpTool(%q) = %q, %q, %v; want %q, %q", tc.name, server, tool, ok, tc.server, tc.tool)
		}
	}
}

// A call of a host's MCP tool is a tool-call item titled "SERVER/TOOL"
// with the server and tool in its detail; the agent's own tools keep
// their titles.
func TestNormalizerNamesMCPToolCalls(t *testing.T) {
	n := newNormalizer("s1", "p1")
	n.mcpServers = []string{"baton"}
	n.startTurn()
	evs := upd(t, n, `{"sessionId":"s1","update":{"_meta":{"claudeCode":{"toolName":"mcp__baton__baton_probe"}},"sessionUpdate":"tool_call","toolCallId":"c1","title":"mcp__baton__baton_probe","kind":"other","status":"pending","rawInput":{}}}`)
	evs = append(evs, upd(t, n, `{"sessionId":"s1","update":{"_meta":{"claudeCode":{"toolName":"mcp__baton__baton_probe"}},"sessionUpdate":"tool_call_update","toolCallId":"c1","status":"completed","rawOutput":"probe: hi"}}`)...)
	evs = append(evs, upd(t, n, `{"sessionId":"s1","update":{"_meta":{"claudeCode":{"toolName":"mcp__acp__Write"}},"sessionUpdate":"tool_call","toolCallId":"c2","title":"Write /w/a.txt","kind":"edit","status":"pending"}}`)...)
	if len(evs) != 3 {
		t.Fatalf("events %s; want a started and a completed MCP call and a started edit", kinds(evs))
	}
	for i, ev := range evs[:2] {
		var d map[string]any
		_ = json.Unmarshal(ev.Detail, &d)
		if d["mcpServer"] != "baton" || d["mcpTool"] != "baton_probe" {
			t.Errorf("event %d (%s) detail %s; want mcpServer baton and mcpTool baton_probe", i, ev.Kind, ev.Detail)
		}
	}
	if evs[0].Title != "baton/baton_probe" || evs[0].ItemKind != sdk.ItemToolCall {
		t.Errorf("the MCP call started as %s %q; want a tool_call titled %q", evs[0].ItemKind, evs[0].Title, "baton/baton_probe")
	}
	if evs[2].Title != "Write /w/a.txt" || strings.Contains(string(evs[2].Detail), "mcpServer") {
		t.Errorf("the agent's own tool became %q %s; want its title and no MCP server", evs[2].Title, evs[2].Detail)
	}
}

// usage_update states the session's cost so far: a turn's cost is what
// it grew by in the turn, in USD only, carried on the turn's last usage
// report; nothing when the agent states none or the start is unknown.
func TestNormalizerCost(t *testing.T) {
	usage := func(n *normalizer, cost string) *sdk.Usage {
		t.Helper()
		evs := upd(t, n, `{"sessionId":"s1","update":{"sessionUpdate":"usage_update","used":100,"size":1000`+cost+`}}`)
		return evs[0].Usage
	}
	last := func(evs []sdk.RuntimeEvent) *sdk.Usage {
		for i := len(evs) - 1; i >= 0; i-- {
			if evs[i].Kind == sdk.EventUsage {
				return evs[i].Usage
			}
		}
		return nil
	}
	done := &promptResult{StopReason: "end_turn", Usage: &promptUsage{InputTokens: 10, OutputTokens: 2, TotalTokens: 12}}

	n := newNormalizer("s1", "p1")
	n.costKnown = true // a new session: nothing spent yet
	n.startTurn()
	if u := usage(n, `,"cost":{"amount":0.25,"currency":"USD"}`); u.CostMicros != 250000 || u.TotalTokens != 100 {
		t.Errorf("first turn's usage %+v; want 250000 micro-dollars", u)
	}
	if u := last(n.endTurn(done, nil, true)); u == nil || u.CostMicros != 250000 || u.InputTokens != 10 {
		t.Errorf("first turn's last usage %+v; want its tokens and 250000 micro-dollars", u)
	}
	n.startTurn()
	if u := usage(n, `,"cost":{"amount":0.4,"currency":"USD"}`); u.CostMicros != 150000 {
		t.Errorf("second turn's usage %+v; want what the session's cost grew by, 150000", u)
	}
	n.endTurn(done, nil, true)
	n.startTurn()
	if u := usage(n, `,"cost":{"amount":9,"currency":"EUR"}`); u.CostMicros != 0 {
		t.Errorf("a cost in EUR became %d micro-dollars", u.CostMicros)
	}
	if u := usage(n, ``); u.CostMicros != 0 {
		t.Errorf("no cost stated became %d micro-dollars", u.CostMicros)
	}
	if u := last(n.endTurn(done, nil, true)); u.CostMicros != 0 {
		t.Errorf("a turn without a cost in USD reported %d micro-dollars", u.CostMicros)
	}

	// A loaded session: what it cost before is not known until stated.
	n = newNormalizer("s1", "p2")
	n.startTurn()
	if u := usage(n, `,"cost":{"amount":3,"currency":"USD"}`); u.CostMicros != 0 {
		t.Errorf("a loaded session's first turn claimed %d micro-dollars of the session's whole cost", u.CostMicros)
	}
	n.endTurn(done, nil, true)
	n.startTurn()
	if u := usage(n, `,"cost":{"amount":3.5,"currency":"USD"}`); u.CostMicros != 500000 {
		t.Errorf("a loaded session's second turn: %+v; want 500000 micro-dollars", u)
	}
}

// No secret in a log line: message, arguments, or a logger's With.
func TestRedactLogger(t *testing.T) {
	var buf bytes.Buffer
	log := redactLogger(hclog.New(&hclog.LoggerOptions{Output: &buf, Level: hclog.Trace}), []string{"env-secret", "", "header-secret"})
	log = log.With("server", "with env-secret").Named("acp")
	log.Debug("provider stderr", "line", "MCP env TOKEN=env-secret", "error", errors.New("header-secret refused"))
	log.Info("header-secret in the message", "b", []byte("env-secret"))
	if s := buf.String(); strings.Contains(s, "env-secret") || strings.Contains(s, "header-secret") {
		t.Errorf("the log shows a secret:\n%s", s)
	}
	if !strings.Contains(buf.String(), "TOKEN=***") {
		t.Errorf("the log lost the line around the secret:\n%s", buf.String())
	}
	if _, ok := redactLogger(hclog.NewNullLogger(), nil).(redactLog); ok {
		t.Error("no secrets: the logger should be the one given")
	}
}
