package main

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-run/baton/sdk"
	"github.com/baton-run/baton/sdk/plugintest"
)

// TestMCPServersRefused: the plugin passes on no MCP server (see the
// "mcp" note), so a session given one is refused before anything runs,
// naming the server, and nothing is written into the workspace.
func TestMCPServersRefused(t *testing.T) {
	p := start(t)
	if len(p.Description.MCPTransports) != 0 || !strings.Contains(p.Description.Notes["mcp"], ".cursor/mcp.json") {
		t.Fatalf("description: transports %v, mcp note %q; want none, and the note saying why", p.Description.MCPTransports,
			p.Description.Notes["mcp"])
	}
	ws := t.TempDir()
	for _, tc := range []struct {
		server sdk.MCPServer
		want   string
	}{
		{sdk.MCPServer{Name: "probe", Transport: sdk.MCPStdio, Command: "/opt/mcptool",
			Env: []sdk.NameValue{{Name: "TOKEN", Value: "tok-7f3a"}}},
			`cursor cannot take MCP server "probe" over stdio (it takes no MCP server at all)`},
		{sdk.MCPServer{Name: "docs", Transport: sdk.MCPHTTP, URL: "http://127.0.0.1:9/mcp"},
			`cursor cannot take MCP server "docs" over http (it takes no MCP server at all)`},
	} {
		_, err := p.OpenSession(context.Background(), sdk.OpenSessionRequest{SessionID: "mcp-" + tc.server.Name, Cwd: ws,
			MCPServers: []sdk.MCPServer{tc.server}, Command: sdk.ProviderCommand{Argv: []string{"cursor-agent"}}})
		if !errors.Is(err, sdk.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("open with %s: %v; want invalid, saying %s", tc.server.Name, err, tc.want)
		}
	}
	if entries, _ := os.ReadDir(ws); len(entries) != 0 {
		t.Errorf("the workspace holds %d entries after refused sessions; want none", len(entries))
	}
}

// TestUsageEvents: each turn's result frame gives one usage event, with
// the tokens it states and the model its process's init named (cursor
// states no cost). The transcript is written by hand (no cursor-agent
// runs here).
func TestUsageEvents(t *testing.T) {
	p := start(t)
	s, _ := open(t, p, "multi_turn")
	var got []sdk.RuntimeEvent
	for _, text := range []string{"Remember the word: pineapple.", "What was the word?"} {
		s.StartTurn(t, text)
		for _, ev := range plugintest.Filter(s.WaitTurn(t), func(ev sdk.RuntimeEvent) bool { return ev.Kind == sdk.EventUsage }) {
			ev.SessionID, ev.Sequence, ev.RawFrame = "", 0, 0 // where it is in the stream
			got = append(got, ev)
		}
	}
	s.Close(t)
	chat := "8d2c4b6a-0e1f-4a3b-8c5d-7e9f1a2b3c4d"
	want := []sdk.RuntimeEvent{
		{Kind: sdk.EventUsage, ThreadRef: chat,
			Usage:  &sdk.Usage{InputTokens: 1210, OutputTokens: 12, TotalTokens: 1222, Model: "Claude 4 Sonnet"},
			Detail: json.RawMessage(`{"inputTokens":1210,"outputTokens":12,"cacheReadTokens":0,"cacheWriteTokens":0}`)},
		{Kind: sdk.EventUsage, ThreadRef: chat,
			Usage:  &sdk.Usage{InputTokens: 1260, OutputTokens: 10, CachedInputTokens: 1100, TotalTokens: 2370, Model: "Claude 4 Sonnet"},
			Detail: json.RawMessage(`{"inputTokens":1260,"outputTokens":10,"cacheReadTokens":1100,"cacheWriteTokens":0}`)},
	}
	for i := range min(len(got), len(want)) {
		if got[i].TurnRef == "" || i > 0 && got[i].TurnRef == got[i-1].TurnRef {
			t.Errorf("usage event %d names turn %q; want its own turn", i, got[i].TurnRef)
		}
		want[i].TurnRef = got[i].TurnRef
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("usage events (-want +got):\n%s", d)
	}
}
