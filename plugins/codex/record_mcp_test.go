package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/baton-run/baton/sdk"
	"github.com/baton-run/baton/sdk/plugintest"
)

// TestRecordMCPUsage records testdata/codex/mcp_usage.ndjson from the
// real codex app-server, driving the plugin itself (the host does not pass
// MCP servers yet, so make record cannot), as testdata/record.sh's
// record_codex sets codex up: BATON_RECORD_MCP=DIR, where DIR/bin holds
// replaypeer, baton-modelserver and mcptool, and BATON_RECORD_CODEX the
// pinned codex. The raw transcript is written to DIR/transcript.ndjson.
func TestRecordMCPUsage(t *testing.T) {
	dir := os.Getenv("BATON_RECORD_MCP")
	codex := os.Getenv("BATON_RECORD_CODEX")
	if dir == "" || codex == "" {
		t.Skip("BATON_RECORD_MCP and BATON_RECORD_CODEX not set")
	}
	script := os.Getenv("BATON_RECORD_SCRIPT")
	if script == "" {
		script = "../../testdata/codex/scenarios/mcp_usage.json"
	}
	bin := filepath.Join(dir, "bin")
	ws := filepath.Join(dir, "ws")
	home := filepath.Join(dir, "home")
	codexHome := filepath.Join(home, ".codex")
	for _, d := range []string{ws, codexHome} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	_ = os.WriteFile(filepath.Join(ws, "README.md"), []byte("# Replay workspace\n\nA throwaway repository for recording transcripts.\n"), 0o644)
	for _, args := range [][]string{{"init", "-q"}, {"add", "README.md"},
		{"-c", "user.name=recorder", "-c", "user.email=recorder@example.invalid", "commit", "-q", "-m", "init"}} {
		if out, err := exec.Command("git", append([]string{"-C", ws}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	env := []string{"env", "-i", "PATH=" + os.Getenv("PATH"), "HOME=" + home, "CODEX_HOME=" + codexHome,
		"BATON_FAKE_KEY=sk-test-redacted", "LANG=C.UTF-8", "TERM=dumb", "RUST_LOG=warn",
		"HTTPS_PROXY=http://127.0.0.1:9", "HTTP_PROXY=http://127.0.0.1:9", "ALL_PROXY=http://127.0.0.1:9", "NO_PROXY=127.0.0.1,localhost"}

	// The one-model catalog: codex's bundled gpt-5.5 entry as baton-scripted.
	out, err := exec.Command(env[0], append(env[1:], codex, "debug", "models", "--bundled")...).Output()
	if err != nil {
		t.Fatalf("codex debug models: %v", err)
	}
	var bundled struct {
		Models []map[string]any `json:"models"`
	}
	if err := json.Unmarshal(out, &bundled); err != nil {
		t.Fatal(err)
	}
	var entry map[string]any
	for _, m := range bundled.Models {
		if m["slug"] == "gpt-5.5" {
			entry = m
		}
	}
	if entry == nil {
		t.Fatal("codex has no bundled gpt-5.5")
	}
	for k, v := range map[string]any{"slug": "baton-scripted", "display_name": "Baton scripted", "description": "Scripted stand-in model",
		"priority": 1, "supports_search_tool": false, "upgrade": nil, "service_tiers": []any{}, "additional_speed_tiers": []any{}} {
		entry[k] = v
	}
	catalog, _ := json.Marshal(map[string]any{"models": []any{entry}})
	catalogFile := filepath.Join(dir, "catalog.json")
	if err := os.WriteFile(catalogFile, catalog, 0o644); err != nil {
		t.Fatal(err)
	}

	ms := exec.Command(filepath.Join(bin, "baton-modelserver"), "--api", "openai-responses", "--script", script,
		"--addr", "127.0.0.1:0", "--log", filepath.Join(dir, "model-requests.jsonl"))
	stdout, _ := ms.StdoutPipe()
	ms.Stderr, _ = os.Create(filepath.Join(dir, "modelserver.err"))
	if err := ms.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ms.Process.Signal(os.Interrupt); _ = ms.Wait() })
	line, _ := bufio.NewReader(stdout).ReadString('\n')
	url := strings.TrimSpace(strings.TrimPrefix(line, "listening on "))
	if !strings.HasPrefix(url, "http://127.0.0.1:") {
		t.Fatalf("model server says %q", line)
	}
	config := fmt.Sprintf(`model = "baton-scripted"
model_catalog_json = %q
model_provider = "baton"
check_for_update_on_startup = false

[model_providers.baton]
name = "Baton scripted"
base_url = "%s/v1"
wire_api = "responses"
env_key = "BATON_FAKE_KEY"
request_max_retries = 0
stream_max_retries = 0

[analytics]
enabled = false

[feedback]
enabled = false

[otel]
exporter = "none"
log_user_prompt = false

[features]
plugins = false
remote_plugin = false
`, catalogFile, url)
	if err := os.WriteFile(filepath.Join(codexHome, "config.toml"), []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}

	argv := append([]string{"env", "HOME=" + home, filepath.Join(bin, "replaypeer"), "record",
		"--out", filepath.Join(dir, "transcript.ndjson"), "--provider", "codex", "--protocol", "codex-app-server/v2",
		"--meta", "transport=json-rpc ndjson stdio", "--scenario", "mcp_usage", "--workspace", ws,
		"--meta", "agent=@openai/codex", "--meta", "agentVersion=0.171.0",
		"--meta", "model=baton-scripted: baton-modelserver --api openai-responses (scripted)",
		"--meta", "modelScript=testdata/codex/scenarios/mcp_usage.json",
		"--meta", "capturedBy=plugins/codex/record_mcp_test.go", "--"}, env...)
	argv = append(argv, codex, "app-server")
	servers := []sdk.MCPServer{
		{Name: "probe", Transport: sdk.MCPStdio, Command: filepath.Join(bin, "mcptool"),
			Env: []sdk.NameValue{{Name: "MCPTOOL_EVIDENCE", Value: filepath.Join(dir, "evidence")}, {Name: "MCPTOOL_TOKEN", Value: stdioSecret}}},
		{Name: "remote", Transport: sdk.MCPHTTP, URL: "http://127.0.0.1:9/mcp",
			Headers: []sdk.NameValue{{Name: "Authorization", Value: httpSecret}}},
	}
	p := plugintest.Start(t, plugintest.Build(t, "."))
	s := openWith(t, p, sdk.OpenSessionRequest{Cwd: ws, RuntimePolicy: os.Getenv("BATON_RECORD_POLICY"),
		Command: sdk.ProviderCommand{Argv: argv}, MCPServers: servers}, "",
		func(sdk.RuntimeEvent) (sdk.Decision, map[string]string) { return sdk.DecisionAccept, nil })
	for _, text := range strings.Split(cmpOr(os.Getenv("BATON_RECORD_INPUTS"), "Call the probe"), "|") {
		evs := s.WaitTurnRef(t, s.StartTurn(t, text).TurnRef)
		t.Logf("%s: %s", text, plugintest.Kinds(evs))
	}
	s.Close(t)
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
