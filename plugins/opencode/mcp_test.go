package main

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-run/baton/sdk"
	"github.com/baton-run/baton/sdk/plugintest"
)

// The secrets of TestMCPUsage's servers. The recording's prompt quotes
// both, so that they are in what the plugin sends (the prompt's request
// frame) and in what opencode sends back (the tool call's input and
// output): the raw-frame log must show neither.
const (
	envSecret    = "tok-7f3a"
	headerSecret = "hdr-9c1e"
)

var mcpServers = []sdk.MCPServer{
	{Name: "probe", Transport: sdk.MCPStdio, Command: "/opt/mcptool", Args: []string{"--quiet"},
		Env: []sdk.NameValue{{Name: "MCPTOOL_EVIDENCE", Value: "/tmp/evidence"}, {Name: "PROBE_TOKEN", Value: envSecret}}},
	{Name: "docs", Transport: sdk.MCPHTTP, URL: "http://127.0.0.1:9/mcp",
		Headers: []sdk.NameValue{{Name: "X-Api-Key", Value: headerSecret}}},
}

// configCapture wraps a provider command so that the OPENCODE_CONFIG_CONTENT
// the plugin starts it with is written to file first: the replay peer
// checks the arguments, not the environment.
func configCapture(cmd sdk.ProviderCommand, file string) sdk.ProviderCommand {
	cmd.Argv = append([]string{"sh", "-c", `printf '%s' "$OPENCODE_CONFIG_CONTENT" >"$0" && exec "$@"`, file}, cmd.Argv...)
	return cmd
}

// TestMCPUsage replays mcp_usage, recorded from opencode-ai 1.18.33 with
// the host's testbin/mcptool as an MCP server: opencode starts with the
// session's servers in its own form, the tool call is named by server and
// tool, every step's usage comes with opencode's cost and model, and the
// raw-frame log holds no secret.
func TestMCPUsage(t *testing.T) {
	t.Setenv("OPENCODE_CONFIG_CONTENT", "") // only what the session gives
	ws, dir := t.TempDir(), t.TempDir()
	cfgFile, frames := filepath.Join(dir, "config.json"), filepath.Join(dir, "frames.log")
	p := start(t)
	s := p.OpenWith(t, sdk.OpenSessionRequest{Cwd: ws, RawFrameLog: frames, MCPServers: mcpServers,
		Command: configCapture(plugintest.PeerCommand(filepath.Join(testdata, "mcp_usage.ndjson"), ws, ""), cfgFile)})

	var cfg map[string]any
	if err := json.Unmarshal([]byte(readFile(t, cfgFile)), &cfg); err != nil {
		t.Fatalf("opencode's OPENCODE_CONFIG_CONTENT: %v", err)
	}
	want := map[string]any{
		"permission": map[string]any{"bash": "ask", "edit": "ask"},
		"mcp": map[string]any{
			"probe": map[string]any{"type": "local", "command": []any{"/opt/mcptool", "--quiet"}, "enabled": true,
				"environment": map[string]any{"MCPTOOL_EVIDENCE": "/tmp/evidence", "PROBE_TOKEN": envSecret}},
			"docs": map[string]any{"type": "remote", "url": "http://127.0.0.1:9/mcp", "enabled": true,
				"headers": map[string]any{"X-Api-Key": headerSecret}},
		},
	}
	if d := cmp.Diff(want, cfg); d != "" {
		t.Errorf("opencode started with OPENCODE_CONFIG_CONTENT other than the permissions and the session's MCP servers in opencode's form (-want +got):\n%s", d)
	}

	root := s.Open.ProviderThreadRef
	s.StartTurn(t, "Call the probe with the text "+envSecret+" "+headerSecret)
	evs := s.WaitTurn(t)
	if term := evs[len(evs)-1]; term.Kind != sdk.EventTurnTerminal || term.Status != sdk.TurnCompleted {
		t.Fatalf("turn ended %+v; want completed", term)
	}
	call := plugintest.Find(t, evs, func(ev sdk.RuntimeEvent) bool {
		return ev.Kind == sdk.EventItemCompleted && ev.ItemKind == sdk.ItemToolCall
	})
	var detail struct{ MCPServer, MCPTool, Tool string }
	_ = json.Unmarshal(call.Detail, &detail)
	if call.Title != "probe/baton_probe" || call.Status != sdk.ItemDone || call.Text != "probe: "+envSecret+" "+headerSecret ||
		detail != (struct{ MCPServer, MCPTool, Tool string }{"probe", "baton_probe", "probe_baton_probe"}) {
		t.Errorf("MCP tool call %q %s %q (detail %s); want probe/baton_probe done with the probe's answer, naming server and tool",
			call.Title, sdk.StatusWord(call.Status), call.Text, call.Detail)
	}

	// Each step-finish reports the turn's usage so far: opencode's tokens,
	// its cost (from the model's prices) and the assistant message's model.
	first := sdk.Usage{InputTokens: 8071, OutputTokens: 8, TotalTokens: 8079, CostMicros: 24333, Model: "baton/scripted"}
	both := sdk.Usage{InputTokens: 8071 + 8153, OutputTokens: 8 + 5, TotalTokens: 8079 + 8158, CostMicros: 24333 + 24534,
		Model: "baton/scripted"}
	wantUsage := []sdk.RuntimeEvent{
		{Kind: sdk.EventUsage, ThreadRef: root, TurnRef: call.TurnRef, Usage: &first, ModelUsage: []sdk.Usage{first}},
		{Kind: sdk.EventUsage, ThreadRef: root, TurnRef: call.TurnRef, Usage: &both, ModelUsage: []sdk.Usage{both}},
	}
	var gotUsage []sdk.RuntimeEvent
	for _, ev := range plugintest.Filter(evs, func(ev sdk.RuntimeEvent) bool { return ev.Kind == sdk.EventUsage }) {
		ev.SessionID, ev.Sequence, ev.RawFrame = "", 0, 0 // where it is in the stream
		gotUsage = append(gotUsage, ev)
	}
	if d := cmp.Diff(wantUsage, gotUsage); d != "" {
		t.Errorf("usage events (-want +got):\n%s", d)
	}
	s.Close(t)

	log := readFile(t, frames)
	for _, secret := range []string{envSecret, headerSecret} {
		if strings.Contains(log, secret) {
			t.Errorf("the raw-frame log holds the secret %q", secret)
		}
	}
	if !strings.Contains(log, "probe: *** ***") || !strings.Contains(log, "prompt_async") {
		t.Errorf("the raw-frame log lacks the prompt and the tool's answer with the secrets as ***:\n%s", log)
	}
}

// TestMCPServerRefused: a server the plugin cannot pass on is refused
// before opencode starts, naming it.
func TestMCPServerRefused(t *testing.T) {
	ws := t.TempDir()
	started := filepath.Join(t.TempDir(), "started")
	p := start(t)
	for _, tc := range []struct {
		server sdk.MCPServer
		want   string
	}{
		{sdk.MCPServer{Name: "nocmd", Transport: sdk.MCPStdio}, `MCP server "nocmd" (stdio) has no command`},
		{sdk.MCPServer{Name: "ws", Transport: "websocket", URL: "ws://127.0.0.1:9"}, `MCP server "ws": unknown transport "websocket"`},
	} {
		_, err := p.OpenSession(context.Background(), sdk.OpenSessionRequest{SessionID: "refused-" + tc.server.Name, Cwd: ws,
			MCPServers: []sdk.MCPServer{tc.server},
			Command:    sdk.ProviderCommand{Argv: []string{"sh", "-c", `touch "$0"`, started}}})
		if !errors.Is(err, sdk.ErrInvalid) || err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("open with %+v: %v; want invalid, saying %s", tc.server, err, tc.want)
		}
	}
	if _, err := os.Stat(started); err == nil {
		t.Error("opencode was started for a session whose MCP server was refused")
	}
}
