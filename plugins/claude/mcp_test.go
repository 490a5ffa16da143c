package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	gocmp "github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/baton-run/baton/sdk"
	"github.com/baton-run/baton/sdk/plugintest"
)

// The secrets of the two MCP servers the tests configure: the stdio
// server's env value and the http server's header.
const (
	stdioSecret = "stdio-secret-9a41"
	httpSecret  = "Bearer http-secret-5f2c"
)

// mcpServers are one stdio server with a secret in its env and one http
// server with a secret header.
var mcpServers = []sdk.MCPServer{
	{Name: "probe", Transport: sdk.MCPStdio, Command: "/opt/baton/mcptool", Args: []string{"--quiet"},
		Env: []sdk.NameValue{{Name: "MCPTOOL_EVIDENCE", Value: "/tmp/evidence"}, {Name: "MCPTOOL_TOKEN", Value: stdioSecret}}},
	{Name: "remote", Transport: sdk.MCPHTTP, URL: "http://127.0.0.1:9/mcp",
		Headers: []sdk.NameValue{{Name: "Authorization", Value: httpSecret}}},
}

// wantMCPConfig is the file --mcp-config names: the servers in Claude
// Code's mcpServers form, in the order given.
const wantMCPConfig = `{"mcpServers":{` +
	`"probe":{"type":"stdio","command":"/opt/baton/mcptool","args":["--quiet"],"env":{"MCPTOOL_EVIDENCE":"/tmp/evidence","MCPTOOL_TOKEN":"stdio-secret-9a41"}},` +
	`"remote":{"type":"http","url":"http://127.0.0.1:9/mcp","headers":{"Authorization":"Bearer http-secret-5f2c"}}}}`

// TestMCPServersAndUsage (mcp_usage, recorded from 2.1.332 by make
// record, its servers added with baton mcp add (mcp_usage.mcp), the stdio
// one host/internal/testbin/mcptool): the host's MCP servers
// reach the CLI in a file of the session's own, named by --mcp-config,
// which only its owner can read and which is gone once the session closed;
// neither secret is in the raw-frame log. The first turn calls the stdio
// server's tool (the host accepts its permission request): a tool call
// named by server and tool. Each turn's usage is its result's usage, with
// what the conversation's running cost and usage by model grew by.
func TestMCPServersAndUsage(t *testing.T) {
	bin := plugintest.Build(t, ".") // (built once, into the test's own TMPDIR)
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp) // where the plugin makes its private directory
	p := plugintest.Start(t, bin)
	ws := t.TempDir()
	frames := filepath.Join(t.TempDir(), "frames.ndjson")
	s := openWith(t, p, sdk.OpenSessionRequest{Cwd: ws, RawFrameLog: frames, MCPServers: mcpServers,
		Command: plugintest.PeerCommand(filepath.Join(testdata, "mcp_usage.ndjson"), ws, "")}, "",
		func(sdk.RuntimeEvent) (sdk.Decision, map[string]string) { return sdk.DecisionAccept, nil })

	files, _ := filepath.Glob(filepath.Join(tmp, "*", "mcp.json"))
	if len(files) != 1 {
		t.Fatalf("MCP configuration files under TMPDIR: %v; want one", files)
	}
	got, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != wantMCPConfig {
		t.Errorf("--mcp-config file:\n got  %s\n want %s", got, wantMCPConfig)
	}
	for path, want := range map[string]os.FileMode{files[0]: 0o600, filepath.Dir(files[0]): 0o700 | os.ModeDir} {
		if fi, err := os.Stat(path); err != nil || fi.Mode() != want {
			t.Errorf("%s: mode %v (%v); want %v", path, fi.Mode(), err, want)
		}
	}

	ignore := cmpopts.IgnoreFields(sdk.RuntimeEvent{}, "SessionID", "Sequence", "RawFrame")
	first := s.StartTurn(t, "Call the probe").TurnRef
	evs := s.WaitTurnRef(t, first)
	root := evs[0].ThreadRef
	const toolUse = "toolu_000000000000000000000001"
	call := plugintest.Find(t, evs, func(ev sdk.RuntimeEvent) bool {
		return ev.Kind == sdk.EventItemStarted && ev.ItemRef == toolUse
	})
	wantCall := sdk.RuntimeEvent{Kind: sdk.EventItemStarted, ThreadRef: root, TurnRef: first, ItemRef: toolUse,
		ItemKind: sdk.ItemToolCall, Title: "probe/baton_probe", Status: sdk.ItemInProgress,
		Detail: json.RawMessage(`{"input":{"text":"hello from claude"},"mcpServer":"probe","mcpTool":"baton_probe","tool":"mcp__probe__baton_probe"}`)}
	if diff := gocmp.Diff(wantCall, call, ignore); diff != "" {
		t.Errorf("the MCP tool call's item_started (-want +got):\n%s", diff)
	}
	asked := plugintest.Find(t, evs, func(ev sdk.RuntimeEvent) bool { return ev.Kind == sdk.EventRequestOpened })
	if asked.RequestKind != sdk.RequestPermission || asked.Title != "probe/baton_probe" || asked.ItemRef != toolUse {
		t.Errorf("the tool's permission request opened as %+v; want a permission request for probe/baton_probe", asked)
	}
	if done := evs[plugintest.Index(evs, func(ev sdk.RuntimeEvent) bool {
		return ev.Kind == sdk.EventItemCompleted && ev.ItemRef == toolUse
	})]; done.Status != sdk.ItemDone || !strings.Contains(string(done.Detail), "probe: hello from claude") {
		t.Errorf("the MCP tool call ended %+v; want done with the probe's answer", done)
	}
	const opus = "claude-opus-5-5"
	// The first result: the conversation's totals are the turn's.
	turn1 := sdk.Usage{InputTokens: 27608, OutputTokens: 13, TotalTokens: 27621, CostMicros: 110692, Model: opus}
	want := sdk.RuntimeEvent{Kind: sdk.EventUsage, ThreadRef: root, TurnRef: first, Usage: &turn1, ModelUsage: []sdk.Usage{turn1}}
	if diff := gocmp.Diff(want, usageOf(t, evs), ignore); diff != "" {
		t.Errorf("first turn's usage (-want +got):\n%s", diff)
	}
	second := s.StartTurn(t, "Say hello").TurnRef
	evs = s.WaitTurnRef(t, second)
	// The second: its own usage; the cost (0.166236 - 0.110692 dollars)
	// and the model's usage (41484 - 27608 input tokens) are what the
	// totals grew by.
	turn2 := sdk.Usage{InputTokens: 13876, OutputTokens: 2, TotalTokens: 13878, CostMicros: 55544, Model: opus}
	want = sdk.RuntimeEvent{Kind: sdk.EventUsage, ThreadRef: root, TurnRef: second, Usage: &turn2, ModelUsage: []sdk.Usage{turn2}}
	if diff := gocmp.Diff(want, usageOf(t, evs), ignore); diff != "" {
		t.Errorf("second turn's usage (-want +got):\n%s", diff)
	}
	s.Close(t)

	if left, _ := filepath.Glob(filepath.Join(tmp, "baton-claude-mcp-*")); len(left) != 0 {
		t.Errorf("left in TMPDIR after close: %v", left)
	}
	checkNoSecrets(t, tmp)
	checkNoSecrets(t, filepath.Dir(frames))
}

// TestUsageByModelAndStrict (usage_by_model, derived by hand from simple):
// BATON_MCP_STRICT=1 adds --strict-mcp-config. A turn whose running totals
// grew for two models (a subagent's calls add a second) has a usage by
// model for each and names no one model. The CLI's stderr quoted the http
// server's header: the raw-frame log shows it as ***.
func TestUsageByModelAndStrict(t *testing.T) {
	p := plugintest.Start(t, plugintest.Build(t, "."))
	ws := t.TempDir()
	frames := filepath.Join(t.TempDir(), "frames.ndjson")
	cmd := plugintest.PeerCommand(filepath.Join(testdata, "usage_by_model.ndjson"), ws, "")
	cmd.Env = append(cmd.Env, "BATON_MCP_STRICT=1")
	s := openWith(t, p, sdk.OpenSessionRequest{Cwd: ws, RawFrameLog: frames, RuntimePolicy: "bypassPermissions",
		Command: cmd, MCPServers: mcpServers}, "", nil)
	ignore := cmpopts.IgnoreFields(sdk.RuntimeEvent{}, "SessionID", "Sequence", "RawFrame")
	first := s.StartTurn(t, "Call the probe").TurnRef
	evs := s.WaitTurnRef(t, first)
	root := evs[0].ThreadRef
	opus, haiku := "claude-opus-5-5", "claude-haiku-4-5"
	turn1 := sdk.Usage{InputTokens: 13750, CachedInputTokens: 100, OutputTokens: 20, TotalTokens: 13770, CostMicros: 61234, Model: opus}
	want := sdk.RuntimeEvent{Kind: sdk.EventUsage, ThreadRef: root, TurnRef: first, Usage: &turn1, ModelUsage: []sdk.Usage{turn1}}
	if diff := gocmp.Diff(want, usageOf(t, evs), ignore); diff != "" {
		t.Errorf("first turn's usage (-want +got):\n%s", diff)
	}
	second := s.StartTurn(t, "Say hello").TurnRef
	evs = s.WaitTurnRef(t, second)
	// 0.1154 - 0.061234 dollars in all; the second model's entry is new.
	want = sdk.RuntimeEvent{Kind: sdk.EventUsage, ThreadRef: root, TurnRef: second,
		Usage: &sdk.Usage{InputTokens: 26700, CachedInputTokens: 13000, OutputTokens: 5, TotalTokens: 26705, CostMicros: 54166},
		ModelUsage: []sdk.Usage{
			{InputTokens: 300, OutputTokens: 10, TotalTokens: 310, CostMicros: 400, Model: haiku},
			{InputTokens: 26700, CachedInputTokens: 13000, OutputTokens: 5, TotalTokens: 26705, CostMicros: 53766, Model: opus},
		}}
	if diff := gocmp.Diff(want, usageOf(t, evs), ignore); diff != "" {
		t.Errorf("second turn's usage (-want +got):\n%s", diff)
	}
	s.Close(t) // the peer checked --strict-mcp-config

	log, err := os.ReadFile(frames)
	if err != nil {
		t.Fatal(err)
	}
	checkNoSecrets(t, filepath.Dir(frames))
	if !strings.Contains(string(log), `Authorization: ***`) {
		t.Errorf("the raw-frame log lacks the CLI's stderr line quoting the header, redacted (Authorization: ***)")
	}
}

// TestMCPServerRefused: a server the CLI cannot take (here one the sdk
// does not know) is refused before the CLI starts, naming it.
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

// checkNoSecrets fails the test if a file under dir holds a secret.
func checkNoSecrets(t *testing.T, dir string) {
	t.Helper()
	_ = filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return nil
		}
		b, _ := os.ReadFile(path)
		for _, secret := range []string{stdioSecret, "http-secret-5f2c"} {
			if strings.Contains(string(b), secret) {
				t.Errorf("%s holds the secret %q after close", path, secret)
			}
		}
		return nil
	})
}

// usageOf is the one usage event of a turn's events.
func usageOf(t *testing.T, evs []sdk.RuntimeEvent) sdk.RuntimeEvent {
	t.Helper()
	if n := plugintest.Count(evs, func(ev sdk.RuntimeEvent) bool { return ev.Kind == sdk.EventUsage }); n != 1 {
		t.Fatalf("%d usage events in the turn; want 1: %s", n, plugintest.Kinds(evs))
	}
	return plugintest.Find(t, evs, func(ev sdk.RuntimeEvent) bool { return ev.Kind == sdk.EventUsage })
}
