package main

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/baton-run/baton/sdk"
	"github.com/baton-run/baton/sdk/plugintest"
)

// TestRecordMCPUsage records testdata/claude/mcp_usage.ndjson from the
// real CLI, driving the plugin itself (the host does not pass MCP servers
// yet, so make record cannot): BATON_RECORD_MCP=DIR, where DIR/bin holds
// replaypeer, baton-modelserver and mcptool, and BATON_RECORD_CLAUDE the
// pinned CLI. The raw transcript is written to DIR/transcript.ndjson.
func TestRecordMCPUsage(t *testing.T) {
	dir := os.Getenv("BATON_RECORD_MCP")
	claude := os.Getenv("BATON_RECORD_CLAUDE")
	if dir == "" || claude == "" {
		t.Skip("BATON_RECORD_MCP and BATON_RECORD_CLAUDE not set")
	}
	bin := filepath.Join(dir, "bin")
	ws := filepath.Join(dir, "ws")
	home := filepath.Join(dir, "home")
	for _, d := range []string{ws, home} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, args := range [][]string{{"init", "-q"}, {"add", "README.md"},
		{"-c", "user.name=recorder", "-c", "user.email=recorder@example.invalid", "commit", "-q", "-m", "init"}} {
		if args[0] == "add" {
			_ = os.WriteFile(filepath.Join(ws, "README.md"), []byte("# Replay workspace\n\nA throwaway repository for recording transcripts.\n"), 0o644)
		}
		if out, err := exec.Command("git", append([]string{"-C", ws}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	ms := exec.Command(filepath.Join(bin, "baton-modelserver"), "--api", "anthropic", "--script",
		"../../testdata/claude/scenarios/mcp_usage.json", "--addr", "127.0.0.1:0", "--log", filepath.Join(dir, "model-requests.jsonl"))
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
	argv := []string{"env", "HOME=" + home, filepath.Join(bin, "replaypeer"), "record", "--invocation",
		"--out", filepath.Join(dir, "transcript.ndjson"), "--provider", "claude", "--protocol", "claude-code/stream-json",
		"--meta", "transport=ndjson stdio", "--scenario", "mcp_usage", "--workspace", ws,
		"--meta", "agent=@anthropic-ai/claude-code", "--meta", "agentVersion=2.1.332",
		"--meta", "model=baton-modelserver --api anthropic (scripted)", "--meta", "modelScript=testdata/claude/scenarios/mcp_usage.json",
		"--meta", "auth=ANTHROPIC_API_KEY (made up)", "--meta", "capturedBy=plugins/claude/record_mcp_test.go",
		"--", "env", "-i", "PATH=" + os.Getenv("PATH"), "HOME=" + home, "ANTHROPIC_BASE_URL=" + url,
		"ANTHROPIC_API_KEY=sk-test-redacted", "DISABLE_TELEMETRY=1", "DISABLE_ERROR_REPORTING=1", "DISABLE_AUTOUPDATER=1",
		"DISABLE_BUG_COMMAND=1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "CLAUDE_CODE_DISABLE_TERMINAL_TITLE=1",
		"CLAUDE_CODE_DISABLE_FAST_MODE=1", claude, "--"}
	servers := []sdk.MCPServer{
		{Name: "probe", Transport: sdk.MCPStdio, Command: filepath.Join(bin, "mcptool"),
			Env: []sdk.NameValue{{Name: "MCPTOOL_EVIDENCE", Value: filepath.Join(dir, "evidence")}, {Name: "MCPTOOL_TOKEN", Value: stdioSecret}}},
		{Name: "remote", Transport: sdk.MCPHTTP, URL: "http://127.0.0.1:9/mcp",
			Headers: []sdk.NameValue{{Name: "Authorization", Value: httpSecret}}},
	}
	p := plugintest.Start(t, plugintest.Build(t, "."))
	s := openWith(t, p, sdk.OpenSessionRequest{Cwd: ws, Command: sdk.ProviderCommand{Argv: argv},
		MCPServers: servers}, "", func(sdk.RuntimeEvent) (sdk.Decision, map[string]string) { return sdk.DecisionAccept, nil })
	for _, text := range []string{"Call the probe", "Say hello"} {
		evs := s.WaitTurnRef(t, s.StartTurn(t, text).TurnRef)
		t.Logf("%s: %s", text, plugintest.Kinds(evs))
	}
	time.Sleep(500 * time.Millisecond)
	s.Close(t)
}
