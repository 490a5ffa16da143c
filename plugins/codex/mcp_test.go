package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/baton-run/baton/sdk"
	"github.com/baton-run/baton/sdk/plugintest"
)

// The secrets of the two MCP servers the tests configure: the stdio
// server's env value and the http server's header.
const (
	stdioSecret = "stdio-secret-9a41"
	httpSecret  = "http-secret-5f2c"
)

// mcpServersIn are the servers testdata/codex/mcp_usage.mcp adds for a
// session in ws: one stdio server with a secret in its env and one http
// server with a secret header.
func mcpServersIn(ws string) []sdk.MCPServer {
	return []sdk.MCPServer{
		{Name: "probe", Transport: sdk.MCPStdio, Command: "mcptool", Args: []string{"--quiet"},
			Env: []sdk.NameValue{{Name: "MCPTOOL_EVIDENCE", Value: filepath.Join(ws, "mcp-evidence.txt")}, {Name: "MCPTOOL_TOKEN", Value: stdioSecret}}},
		{Name: "remote", Transport: sdk.MCPHTTP, URL: "http://127.0.0.1:9/mcp",
			Headers: []sdk.NameValue{{Name: "X-Baton-Token", Value: httpSecret}}},
	}
}

// jsonEqual compares JSON by value, not by its spelling.
var jsonEqual = cmp.Comparer(func(a, b json.RawMessage) bool {
	var x, y any
	return json.Unmarshal(a, &x) == nil && json.Unmarshal(b, &y) == nil && reflect.DeepEqual(x, y)
})

// ignoreIDs leaves out what the session numbers itself.
var ignoreIDs = cmpopts.IgnoreFields(sdk.RuntimeEvent{}, "SessionID", "Sequence", "RawFrame")

// TestMCPServersAndUsage (mcp_usage, recorded from codex 0.171.0 by make
// record, its servers added with baton mcp add (mcp_usage.mcp), the stdio
// one host/internal/testbin/mcptool): the host's MCP servers
// reach codex in thread/start's config, one mcp_servers.NAME key a server
// (the peer checks the frame whole, so a server dropped or malformed fails
// the session's close), and neither secret is in the raw-frame log. codex
// asks whether the tool may run (an MCP elicitation): a permission
// request, accepted with the elicitation's accept. The tool call is named
// by server and tool. Each model call's token usage gives the turn's usage
// so far, naming the thread's model.
func TestMCPServersAndUsage(t *testing.T) {
	p := plugintest.Start(t, plugintest.Build(t, "."))
	ws := t.TempDir()
	frames := filepath.Join(t.TempDir(), "frames.ndjson")
	s := openWith(t, p, sdk.OpenSessionRequest{Cwd: ws, RawFrameLog: frames, MCPServers: mcpServersIn(ws),
		Command: plugintest.PeerCommand(filepath.Join(testdata, "mcp_usage.ndjson"), ws, "")}, "",
		func(sdk.RuntimeEvent) (sdk.Decision, map[string]string) { return sdk.DecisionAccept, nil })
	root := s.Open.ProviderThreadRef
	turn := s.StartTurn(t, "Call the probe").TurnRef
	evs := s.WaitTurnRef(t, turn)
	if term := evs[len(evs)-1]; term.Status != sdk.TurnCompleted {
		t.Fatalf("turn ended %+v", term)
	}
	const call = "call_000000000000000000000001"
	started := plugintest.Find(t, evs, func(ev sdk.RuntimeEvent) bool { return ev.Kind == sdk.EventItemStarted && ev.ItemRef == call })
	var item struct{ Server, Tool string }
	if started.ItemKind != sdk.ItemToolCall || started.Title != "probe/baton_probe" ||
		json.Unmarshal(started.Detail, &item) != nil || item.Server != "probe" || item.Tool != "baton_probe" {
		t.Errorf("the MCP tool call started as %+v; want a tool call probe/baton_probe whose detail names server and tool", started)
	}
	asked := plugintest.Find(t, evs, func(ev sdk.RuntimeEvent) bool { return ev.Kind == sdk.EventRequestOpened })
	if asked.RequestKind != sdk.RequestPermission || asked.Title != "probe/baton_probe" ||
		asked.Text != `Allow the probe MCP server to run tool "baton_probe"?` {
		t.Errorf("the tool's approval opened as %+v; want a permission request for probe/baton_probe", asked)
	}
	if done := plugintest.Find(t, evs, func(ev sdk.RuntimeEvent) bool {
		return ev.Kind == sdk.EventItemCompleted && ev.ItemRef == call
	}); done.Status != sdk.ItemDone || !strings.Contains(string(done.Detail), "probe: hello from codex") {
		t.Errorf("the MCP tool call ended %+v; want done with the probe's answer", done)
	}

	const model = "baton-scripted" // thread/start's answer
	tokens := func(last, total string) json.RawMessage {
		return json.RawMessage(`{"last":` + last + `,"modelContextWindow":258400,"total":` + total + `}`)
	}
	call1 := `{"cacheWriteInputTokens":0,"cachedInputTokens":0,"inputTokens":12421,"outputTokens":7,"reasoningOutputTokens":0,"totalTokens":12428}`
	call2 := `{"cacheWriteInputTokens":0,"cachedInputTokens":0,"inputTokens":12538,"outputTokens":5,"reasoningOutputTokens":0,"totalTokens":12543}`
	total2 := `{"cacheWriteInputTokens":0,"cachedInputTokens":0,"inputTokens":24959,"outputTokens":12,"reasoningOutputTokens":0,"totalTokens":24971}`
	want := []sdk.RuntimeEvent{
		{Kind: sdk.EventUsage, ThreadRef: root, TurnRef: turn, Detail: tokens(call1, call1),
			Usage: &sdk.Usage{InputTokens: 12421, OutputTokens: 7, TotalTokens: 12428, Model: model}},
		{Kind: sdk.EventUsage, ThreadRef: root, TurnRef: turn, Detail: tokens(call2, total2),
			Usage: &sdk.Usage{InputTokens: 24959, OutputTokens: 12, TotalTokens: 24971, Model: model}},
	}
	if diff := cmp.Diff(want, plugintest.Filter(evs, func(ev sdk.RuntimeEvent) bool { return ev.Kind == sdk.EventUsage }), ignoreIDs, jsonEqual); diff != "" {
		t.Errorf("usage events (-want +got):\n%s", diff)
	}
	s.Close(t) // the peer checked thread/start's config and the elicitation's answer

	log, err := os.ReadFile(frames)
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{stdioSecret, httpSecret} {
		if bytes.Contains(log, []byte(secret)) {
			t.Errorf("the raw-frame log holds the secret %q", secret)
		}
	}
	if !bytes.Contains(log, []byte(`"MCPTOOL_TOKEN":"***"`)) || !bytes.Contains(log, []byte(`"X-Baton-Token":"***"`)) {
		t.Errorf("the raw-frame log lacks thread/start with the secrets shown as ***")
	}
}

// TestUsageAndRateLimits (usage_rate_limits, derived by hand from simple,
// where codex's custom model provider reports no windows): the usage
// names the thread's model and counts cached and reasoning tokens; a
// rate-limit snapshot with both windows set gives one rate_limit event a
// window, scoped by limit id and window, with its use and its reset.
func TestUsageAndRateLimits(t *testing.T) {
	p := plugintest.Start(t, plugintest.Build(t, "."))
	ws := t.TempDir()
	s := openWith(t, p, sdk.OpenSessionRequest{Cwd: ws, MCPServers: mcpServersIn(ws),
		Command: plugintest.PeerCommand(filepath.Join(testdata, "usage_rate_limits.ndjson"), ws, "")}, "", nil)
	root := s.Open.ProviderThreadRef
	turn := s.StartTurn(t, "Call the probe").TurnRef
	evs := s.WaitTurnRef(t, turn)
	if term := evs[len(evs)-1]; term.Status != sdk.TurnCompleted {
		t.Fatalf("turn ended %+v", term)
	}
	started := plugintest.Find(t, evs, func(ev sdk.RuntimeEvent) bool {
		return ev.Kind == sdk.EventItemStarted && ev.ItemRef == "call_probe_1"
	})
	want := sdk.RuntimeEvent{Kind: sdk.EventItemStarted, ThreadRef: root, TurnRef: turn, ItemRef: "call_probe_1",
		ItemKind: sdk.ItemToolCall, Title: "probe/baton_probe", Status: sdk.ItemInProgress,
		Detail: json.RawMessage(`{"arguments":{"text":"hello from codex"},"durationMs":null,"error":null,"id":"call_probe_1",` +
			`"result":null,"server":"probe","status":"inProgress","tool":"baton_probe","type":"mcpToolCall"}`)}
	if diff := cmp.Diff(want, started, ignoreIDs, jsonEqual); diff != "" {
		t.Errorf("the MCP tool call's item_started (-want +got):\n%s", diff)
	}
	const model = "baton-scripted"
	tokens := func(last, total string) json.RawMessage {
		return json.RawMessage(`{"last":` + last + `,"modelContextWindow":258400,"total":` + total + `}`)
	}
	call1 := `{"cacheWriteInputTokens":0,"cachedInputTokens":0,"inputTokens":11860,"outputTokens":30,"reasoningOutputTokens":4,"totalTokens":11890}`
	call2 := `{"cacheWriteInputTokens":0,"cachedInputTokens":11776,"inputTokens":11950,"outputTokens":12,"reasoningOutputTokens":0,"totalTokens":11962}`
	total2 := `{"cacheWriteInputTokens":0,"cachedInputTokens":11776,"inputTokens":23810,"outputTokens":42,"reasoningOutputTokens":4,"totalTokens":23852}`
	wantUsage := []sdk.RuntimeEvent{
		{Kind: sdk.EventUsage, ThreadRef: root, TurnRef: turn, Detail: tokens(call1, call1),
			Usage: &sdk.Usage{InputTokens: 11860, OutputTokens: 30, ReasoningTokens: 4, TotalTokens: 11890, Model: model}},
		{Kind: sdk.EventUsage, ThreadRef: root, TurnRef: turn, Detail: tokens(call2, total2),
			Usage: &sdk.Usage{InputTokens: 23810, CachedInputTokens: 11776, OutputTokens: 42, ReasoningTokens: 4, TotalTokens: 23852, Model: model}},
	}
	if diff := cmp.Diff(wantUsage, plugintest.Filter(evs, func(ev sdk.RuntimeEvent) bool { return ev.Kind == sdk.EventUsage }), ignoreIDs, jsonEqual); diff != "" {
		t.Errorf("usage events (-want +got):\n%s", diff)
	}
	snapshot := json.RawMessage(`{"rateLimits":{"credits":null,"individualLimit":null,"limitId":"codex","limitName":null,` +
		`"normalModelSlug":null,"planType":"plus","primary":{"resetsAt":1800000000,"usedPercent":42,"windowDurationMins":300},` +
		`"rateLimitReachedType":null,"secondary":{"resetsAt":1800500000,"usedPercent":7.5,"windowDurationMins":10080},"spendControlReached":null}}`)
	wantLimits := []sdk.RuntimeEvent{
		{Kind: sdk.EventRateLimit, Detail: snapshot, RateLimit: &sdk.RateLimit{Scope: "codex/primary", UsedPercent: 42, ResetsAt: sdk.UnixSeconds(1800000000)}},
		{Kind: sdk.EventRateLimit, Detail: snapshot, RateLimit: &sdk.RateLimit{Scope: "codex/secondary", UsedPercent: 7.5, ResetsAt: sdk.UnixSeconds(1800500000)}},
	}
	if diff := cmp.Diff(wantLimits, plugintest.Filter(evs, func(ev sdk.RuntimeEvent) bool { return ev.Kind == sdk.EventRateLimit }), ignoreIDs, jsonEqual); diff != "" {
		t.Errorf("rate_limit events (-want +got):\n%s", diff)
	}
	s.Close(t)
}

// TestMCPServerRefused: a server codex cannot take (here one of a
// transport the sdk does not know) is refused before codex starts, naming
// the server and its transport.
func TestMCPServerRefused(t *testing.T) {
	p := plugintest.Start(t, plugintest.Build(t, "."))
	ws := t.TempDir()
	_, err := p.OpenSession(t.Context(), sdk.OpenSessionRequest{SessionID: "refused", Cwd: ws,
		Command:    plugintest.PeerCommand(filepath.Join(testdata, "simple.ndjson"), ws, ""),
		MCPServers: []sdk.MCPServer{{Name: "old", Transport: "sse", URL: "http://127.0.0.1:9/sse"}}})
	if err == nil || !strings.Contains(err.Error(), `"old"`) || !strings.Contains(err.Error(), "sse") {
		t.Fatalf("open session with an sse server = %v; want it refused, naming the server and its transport", err)
	}
}
