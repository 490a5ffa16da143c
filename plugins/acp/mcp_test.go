package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/baton-run/baton/sdk"
	"github.com/baton-run/baton/sdk/plugintest"
)

// The secrets of the MCP servers the tests configure: they may reach the
// agent (session/new) and nothing else.
const (
	envSecret    = "env-secret-5f0c9a1e"
	headerSecret = "header-secret-8b27d4c3" // not "Bearer …": the recorder would redact it
)

// mcpServers are the host's MCP servers for a session in ws: one stdio
// server (host/internal/testbin/mcptool, found on PATH when recording)
// and one http server nobody listens at. mcp_tools.ndjson was recorded
// with exactly these.
func mcpServers(ws string) []sdk.MCPServer {
	return []sdk.MCPServer{
		{Name: "baton", Transport: sdk.MCPStdio, Command: "mcptool", Args: []string{"--quiet"},
			Env: []sdk.NameValue{{Name: "BATON_PROBE_TOKEN", Value: envSecret}, {Name: "MCPTOOL_EVIDENCE", Value: filepath.Join(ws, "mcp-evidence.txt")}}},
		{Name: "docs", Transport: sdk.MCPHTTP, URL: "http://127.0.0.1:9/mcp",
			Headers: []sdk.NameValue{{Name: "X-Baton-Token", Value: headerSecret}}},
	}
}

// mcpPrompt is the one turn of mcp_tools.ndjson.
const mcpPrompt = "Call the baton_probe tool with the text: hello from the model"

// TestMCPServersReachTheAgent: the host's servers are in session/new in
// ACP's form (the transcript's expected frame is matched strictly: a
// server dropped or malformed fails), the model's call of the stdio
// server's tool is a tool-call item named by server and tool, and no
// secret reaches the raw-frame log.
func TestMCPServersReachTheAgent(t *testing.T) {
	p := plugintest.Start(t, plugintest.Build(t, "."))
	ws, logDir := t.TempDir(), t.TempDir()
	frames := filepath.Join(logDir, "frames.ndjson")
	file := filepath.Join(testdata, "mcp_tools.ndjson")
	s := p.OpenWith(t, sdk.OpenSessionRequest{Cwd: ws, RawFrameLog: frames, MCPServers: mcpServers(ws),
		Command: plugintest.PeerCommand(file, ws, filepath.Join(t.TempDir(), "cursor"))})
	s.Answer = sdk.DecisionAccept // the agent asks before it calls an MCP tool
	s.StartTurn(t, mcpPrompt)
	evs := s.WaitTurn(t)
	if term := evs[len(evs)-1]; term.Status != sdk.TurnCompleted || !term.ThreadUsable {
		t.Fatalf("the turn ended %s (%+v); want completed and usable", sdk.StatusWord(term.Status), term.Failure)
	}
	var call *sdk.RuntimeEvent
	for i, ev := range evs {
		if ev.Kind == sdk.EventItemStarted && ev.ItemKind == sdk.ItemToolCall {
			call = &evs[i]
			break
		}
	}
	if call == nil {
		t.Fatalf("no tool-call item in the turn (events: %s)", plugintest.Kinds(evs))
	}
	if call.Title != "baton/baton_probe" {
		t.Errorf("the MCP tool call is titled %q; want %q", call.Title, "baton/baton_probe")
	}
	var d struct {
		Server string `json:"mcpServer"`
		Tool   string `json:"mcpTool"`
	}
	if err := json.Unmarshal(call.Detail, &d); err != nil || d.Server != "baton" || d.Tool != "baton_probe" {
		t.Errorf("the MCP tool call's detail %s names server %q and tool %q; want baton and baton_probe", call.Detail, d.Server, d.Tool)
	}
	if got := plugintest.ItemText(evs, "", sdk.ItemAssistantMessage); !strings.Contains(got, "probe: hello from the model") {
		t.Errorf("assistant text = %q; want the probe's answer", got)
	}
	plugintest.CheckItemsClosed(t, evs)
	s.Close(t)
	checkNoSecrets(t, frames, "session/new")
}

// TestMCPHTTPServerRefusedWithoutCapability: an agent whose initialize
// answer does not say it takes http MCP servers is not asked to open a
// session with one: OpenSession fails naming the agent, the server and the
// transport, and no session/new reaches the agent (the transcript ends
// after initialize; the raw-frame log shows no session/new).
func TestMCPHTTPServerRefusedWithoutCapability(t *testing.T) {
	p := plugintest.Start(t, plugintest.Build(t, "."))
	ws, logDir := t.TempDir(), t.TempDir()
	frames := filepath.Join(logDir, "frames.ndjson")
	file := filepath.Join(testdata, "mcp_http_refused.ndjson")
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	_, err := p.OpenSession(ctx, sdk.OpenSessionRequest{SessionID: "refused", Cwd: ws, RawFrameLog: frames,
		MCPServers: mcpServers(ws), Command: plugintest.PeerCommand(file, ws, filepath.Join(t.TempDir(), "cursor"))})
	if err == nil {
		t.Fatal("the session opened with an http MCP server the agent does not take")
	}
	for _, want := range []string{`"stdio-only-agent"`, `"docs"`, "over http"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal %q does not name %s", err, want)
		}
	}
	log := checkNoSecrets(t, frames, "initialize")
	if strings.Contains(log, "session/new") {
		t.Errorf("session/new reached the agent after all:\n%s", log)
	}
}

// checkNoSecrets reads the raw-frame log, which must hold want (it is
// the log of the session, not an empty one) and no secret.
func checkNoSecrets(t *testing.T, path, want string) string {
	t.Helper()
	var all strings.Builder
	matches, _ := filepath.Glob(path + "*") // the log and its rotated file
	for _, m := range matches {
		b, err := os.ReadFile(m)
		if err != nil {
			t.Fatal(err)
		}
		all.Write(b)
	}
	log := all.String()
	if !strings.Contains(log, want) {
		t.Fatalf("the raw-frame log has no %s:\n%s", want, log)
	}
	for _, secret := range []string{envSecret, headerSecret} {
		if strings.Contains(log, secret) {
			t.Errorf("the raw-frame log holds the secret %q", secret)
		}
	}
	return log
}
