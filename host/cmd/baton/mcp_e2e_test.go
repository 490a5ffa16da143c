package main

import (
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The MCP servers baton mcp add saves reach the agent: the replay peer,
// playing claude-code-acp's recorded session, matches its session/new
// frame strictly, servers, env and headers included (a dropped, reordered
// or malformed server fails the run). The run's nodes show the tool call
// by server and tool; the thread records the session's servers by name,
// transport and revision; and no file in the data dir but mcp.json holds
// either secret (the event log, the raw-frame logs, the plugins' logs).
func TestMCPServersReachTheAgent(t *testing.T) {
	const envSecret, headerSecret = "env-secret-5f0c9a1e", "header-secret-8b27d4c3"
	data, ws := t.TempDir(), t.TempDir()
	env := append(os.Environ(), "BATON_DATA="+data)
	for _, args := range [][]string{
		{"mcp", "add", "baton", "--env", "BATON_PROBE_TOKEN=" + envSecret, "--env", "MCPTOOL_EVIDENCE=" + filepath.Join(ws, "mcp-evidence.txt"),
			"--", "mcptool", "--quiet"},
		{"mcp", "add", "docs", "--url", "http://127.0.0.1:9/mcp", "--header", "X-Baton-Token=" + headerSecret},
	} {
		if out, errOut, code := execBaton(t, env, "", args...); code != 0 {
			t.Fatalf("%v: exit %d\n%s%s", args, code, out, errOut)
		}
	}
	out, errOut, code := execBaton(t, env, "", "run", "--json", "--cwd", ws, "--provider", "acp", "--approve", "accept",
		"--provider-command", peerCommand(t, "acp/mcp_tools.ndjson"), "Call the baton_probe tool with the text: hello from the model")
	if code != 0 {
		t.Fatalf("run: exit %d\n%s\n%s", code, errOut, out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var thread struct {
		Runs []struct {
			Status string `json:"status"`
		} `json:"runs"`
		TurnItems []struct {
			Kind   string `json:"kind"`
			Title  string `json:"title"`
			Detail string `json:"detail"`
		} `json:"turnItems"`
		ProviderSessions []struct {
			MCP []map[string]any `json:"mcp"`
		} `json:"providerSessions"`
	}
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &thread); err != nil {
		t.Fatal(err)
	}
	if len(thread.Runs) != 1 || thread.Runs[0].Status != "completed" || len(thread.ProviderSessions) != 1 {
		t.Fatalf("thread: %s", lines[len(lines)-1])
	}
	wantMCP := []map[string]any{{"name": "baton", "transport": "stdio", "revision": float64(1)},
		{"name": "docs", "transport": "http", "revision": float64(2)}}
	if diff := cmp.Diff(wantMCP, thread.ProviderSessions[0].MCP); diff != "" {
		t.Errorf("the session's servers (-want +got):\n%s", diff)
	}
	var calls []string
	for _, n := range thread.TurnItems {
		if n.Kind == "tool_call" {
			var d struct {
				Server string `json:"mcpServer"`
				Tool   string `json:"mcpTool"`
				Output []struct {
					Text string `json:"text"`
				} `json:"rawOutput"`
			}
			json.Unmarshal([]byte(n.Detail), &d)
			call := n.Title + " | " + d.Server + " " + d.Tool
			for _, o := range d.Output {
				call += " -> " + o.Text
			}
			calls = append(calls, call)
		}
	}
	if diff := cmp.Diff([]string{"baton/baton_probe | baton baton_probe -> probe: hello from the model"}, calls); diff != "" {
		t.Errorf("the run's tool calls (-want +got):\n%s", diff)
	}
	show, _, _ := execBaton(t, env, "", "show", threadIDOf(t, lines[len(lines)-1]))
	if !strings.Contains(show, "MCP servers:\n  run 1  baton (stdio, rev 1), docs (http, rev 2)\n") {
		t.Errorf("show does not list the run's servers:\n%s", show)
	}
	// Every file but mcp.json, whole: none holds a secret.
	var files []string
	filepath.WalkDir(data, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		files = append(files, path)
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, s := range []string{envSecret, headerSecret} {
			if strings.Contains(string(b), s) && filepath.Base(path) != "mcp.json" {
				t.Errorf("%s holds secret %q", path, s)
			}
		}
		return nil
	})
	if !hasSuffix(files, "mcp.json") || !hasSuffix(files, ".ndjson") {
		t.Fatalf("walked too little of the data dir (no mcp.json, or no raw-frame log): %v", files)
	}
}

func hasSuffix(files []string, suffix string) bool {
	for _, f := range files {
		if strings.HasSuffix(f, suffix) {
			return true
		}
	}
	return false
}

func threadIDOf(t *testing.T, line string) string {
	var th struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal([]byte(line), &th); err != nil || th.ID == "" {
		t.Fatalf("no thread id in %s", line)
	}
	return th.ID
}

// A server the thread's provider cannot take fails the run before its
// session opens (the provider is never started), saying which provider,
// server and transport, and what to do; --no-mcp runs it without.
func TestMCPServerTheProviderCannotTake(t *testing.T) {
	data, ws := t.TempDir(), t.TempDir()
	env := append(os.Environ(), "BATON_DATA="+data)
	if out, errOut, code := execBaton(t, env, "", "mcp", "add", "fs", "--", "mcp-fs"); code != 0 {
		t.Fatalf("mcp add: %d %s%s", code, out, errOut)
	}
	msgs := lines(t, "cursor/multi_turn.messages")
	// Cursor starts a process a turn: the peer keeps its place in --state.
	var peer []string
	for _, a := range soakPeer(t, "cursor/multi_turn.ndjson", t.TempDir()) {
		peer = append(peer, "'"+a+"'")
	}
	args := []string{"run", "--json", "--cwd", ws, "--provider", "cursor", "--provider-command", strings.Join(peer, " ")}
	out, _, code := execBaton(t, env, "", append(args, msgs[0])...)
	outLines := strings.Split(strings.TrimSpace(out), "\n")
	var thread struct {
		Runs []struct {
			Status  string `json:"status"`
			Failure struct {
				Message string `json:"message"`
			} `json:"failure"`
		} `json:"runs"`
		ProviderSessions []any `json:"providerSessions"`
	}
	json.Unmarshal([]byte(outLines[len(outLines)-1]), &thread)
	want := `cursor cannot take MCP server "fs" over stdio (it takes no MCP server at all); choose other servers for the run (baton run --mcp, --no-mcp) or another provider`
	if code != 1 || len(thread.Runs) != 1 || thread.Runs[0].Status != "failed" || thread.Runs[0].Failure.Message != want ||
		len(thread.ProviderSessions) != 0 {
		t.Fatalf("exit %d; want 1, the run failed with %q and no session:\n%s", code, want, outLines[len(outLines)-1])
	}
	out, errOut, code := execBaton(t, env, "", append(append(args, "--no-mcp"), msgs...)...)
	if code != 0 {
		t.Fatalf("--no-mcp: exit %d\n%s\n%s", code, errOut, out)
	}

	// A server for this thread only: the thread is, so it is taken, and
	// listed for it.
	var last struct {
		ID string `json:"id"`
	}
	outLines = strings.Split(strings.TrimSpace(out), "\n")
	if err := json.Unmarshal([]byte(outLines[len(outLines)-1]), &last); err != nil || last.ID == "" {
		t.Fatalf("no thread in %s", outLines[len(outLines)-1])
	}
	id := last.ID
	if out, errOut, code := execBaton(t, env, "", "mcp", "add", "db", "--thread", id, "--", "db-mcp"); code != 0 ||
		out != "saved MCP server db (stdio, thread "+id+"); each thread's next run takes it\n" {
		t.Fatalf("mcp add --thread %s: exit %d\n%s%s", id, code, out, errOut)
	}
	out, _, _ = execBaton(t, env, "", "mcp", "list")
	wantList := "NAME  TRANSPORT  FOR" + strings.Repeat(" ", len(id)+6) + "COMMAND OR URL\n" +
		"db    stdio      thread " + id + "  db-mcp\n" +
		"fs    stdio      every thread" + strings.Repeat(" ", len(id)-3) + "mcp-fs\n"
	if d := cmp.Diff(wantList, out); d != "" {
		t.Errorf("mcp list (-want +got):\n%s", d)
	}
}
