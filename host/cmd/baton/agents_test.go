package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-run/baton/host/internal/agents"
)

// An ACP Registry agent end to end: refused before it is installed, with
// nothing written; listed from a registry served on 127.0.0.1; installed
// from its archive (checked against its SHA-256); run with --agent through
// the real ACP plugin, the agent being the replay peer unpacked from the
// archive; its id and version on the thread's provider command and in
// show; removed, and refused again.
func TestAgentInstallAndRun(t *testing.T) {
	data := t.TempDir()
	os.Chmod(data, 0o700)
	env := append(os.Environ(), "BATON_DATA="+data)
	run := func(args ...string) (string, string, int) {
		t.Helper()
		return execBaton(t, env, "", args...)
	}
	msg := lines(t, "acp/simple.messages")[0]

	// The agent's archive: one executable, the replay peer playing the
	// simple ACP transcript.
	script := "#!/bin/sh\nexec " + peerCommand(t, "acp/simple.ndjson") + " \"$@\"\n"
	archive := tarGz(t, "replay-agent", script)
	sum := sha256.Sum256(archive)
	var registry atomic.Pointer[[]byte] // written once the server's address is known
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/registry.json":
			w.Write(*registry.Load())
		case "/replay-agent.tar.gz":
			w.Write(archive)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	reg := map[string]any{"version": "1.0.0", "extensions": []any{}, "agents": []any{
		map[string]any{"id": "replay", "name": "Replay Agent", "version": "1.2.3", "description": "the replay peer as an ACP agent",
			"distribution": map[string]any{"binary": map[string]any{agents.Platform(): map[string]any{
				"archive": srv.URL + "/replay-agent.tar.gz", "cmd": "./replay-agent", "sha256": hex.EncodeToString(sum[:])}}}},
		map[string]any{"id": "other", "name": "Other", "version": "0.1.0", "description": "an npm agent",
			"distribution": map[string]any{"npx": map[string]any{"package": "@example/other@0.1.0", "args": []string{"--acp"}}}},
	}}
	b, _ := json.Marshal(reg)
	registry.Store(&b)
	url := srv.URL + "/registry.json"

	// Not installed: refused before anything is written.
	_, errOut, code := run("run", "--agent", "replay", "--approve", "decline", msg)
	if want := "baton: run: agent replay is not installed: install it with 'baton agents install replay'\n"; code != 2 || errOut != want {
		t.Fatalf("run --agent before the install: exit %d, stderr %q, want 2 and %q", code, errOut, want)
	}
	if out, _, _ := run("threads", "--json"); out != "" {
		t.Fatalf("a refused run wrote a thread: %s", out)
	}

	out, errOut, code := run("agents", "list", "--registry", url)
	want := `ID      VERSION  DISTRIBUTION  INSTALLED  NAME
replay  1.2.3    binary        -          Replay Agent
other   0.1.0    npx           -          Other
`
	if code != 0 || out != want {
		t.Fatalf("agents list: exit %d\n%s%s\nwant\n%s", code, out, errOut, want)
	}
	out, errOut, code = run("agents", "install", "replay", "--registry", url)
	command := filepath.Join(data, "agents", "replay", "1.2.3", "replay-agent")
	if want := "installed replay 1.2.3: " + command + "\nrun it with: baton run --agent replay MESSAGE\n"; code != 0 || out != want {
		t.Fatalf("agents install: exit %d\n%s%s\nwant %s", code, out, errOut, want)
	}

	out, errOut, code = run("run", "--json", "--agent", "replay", "--approve", "decline", "--cwd", t.TempDir(), msg)
	if code != 0 {
		t.Fatalf("run --agent: exit %d\n%s", code, errOut)
	}
	outLines := strings.Split(strings.TrimSpace(out), "\n")
	var th struct {
		ID              string `json:"id"`
		Provider        string `json:"provider"`
		ProviderCommand any    `json:"providerCommand"`
		Runs            []struct {
			Status string `json:"status"`
		} `json:"runs"`
	}
	if err := json.Unmarshal([]byte(outLines[len(outLines)-1]), &th); err != nil {
		t.Fatal(err)
	}
	wantCommand := map[string]any{"argv": []any{command}, "agent": "replay", "agentVersion": "1.2.3"}
	if th.Provider != "acp" || len(th.Runs) != 1 || th.Runs[0].Status != "completed" || !cmp.Equal(th.ProviderCommand, any(wantCommand)) {
		t.Fatalf("the thread: provider %s, runs %+v, command %v; want acp, one completed run, %v", th.Provider, th.Runs, th.ProviderCommand, wantCommand)
	}
	out, _, _ = run("show", th.ID)
	if head := strings.SplitN(out, "\n", 2)[0]; !strings.HasPrefix(head, "thread "+th.ID+" · acp (agent replay 1.2.3) · ") {
		t.Errorf("show's first line: %q", head)
	}
	out, _, _ = run("agents", "list", "--registry", url)
	if !strings.Contains(out, "replay  1.2.3    binary        1.2.3      Replay Agent\n") {
		t.Errorf("agents list after the install:\n%s", out)
	}
	out, _, _ = run("agents", "show", "replay", "--registry", url)
	wantShow := "replay · Replay Agent 1.2.3\n  the replay peer as an ACP agent\n" +
		"  binary: " + srv.URL + "/replay-agent.tar.gz, runs ./replay-agent (what install takes here)\n" +
		"  installed 1.2.3 from " + srv.URL + "/replay-agent.tar.gz (sha256 " + hex.EncodeToString(sum[:]) + ")\n" +
		"  command " + command + "\n"
	if out != wantShow {
		t.Errorf("agents show:\n%s\nwant\n%s", out, wantShow)
	}
	// The registry gone: the kept copy, said so.
	srv.Close()
	out, errOut, code = run("agents", "list", "--registry", url)
	if code != 0 || !strings.Contains(out, "other   0.1.0    npx           -          Other\n") ||
		!strings.HasPrefix(errOut, "baton: the ACP Registry cannot be read (") || !strings.HasSuffix(errOut, "); using the copy fetched less than a minute ago\n") {
		t.Errorf("agents list offline: exit %d\n%s%s", code, out, errOut)
	}

	// An install whose command is gone is still removed.
	if err := os.Remove(command); err != nil {
		t.Fatal(err)
	}
	out, errOut, code = run("agents", "remove", "replay")
	if code != 0 || out != "removed replay 1.2.3\n" {
		t.Fatalf("agents remove: exit %d\n%s%s", code, out, errOut)
	}
	if _, err := os.Stat(filepath.Join(data, "agents", "replay")); !os.IsNotExist(err) {
		t.Errorf("the agent's files are still there: %v", err)
	}
	if _, errOut, code = run("run", "--agent", "replay", msg); code != 2 || !strings.Contains(errOut, "baton agents install replay") {
		t.Errorf("run --agent after the removal: exit %d, %s", code, errOut)
	}
	// --agent is the acp provider's.
	if _, errOut, code = run("run", "--agent", "replay", "--provider", "codex", msg); code != 2 ||
		errOut != "baton: run: --agent runs on the acp provider; drop --provider codex\n" {
		t.Errorf("run --agent --provider codex: exit %d, %q", code, errOut)
	}
}

// tarGz is a gzipped tar holding one executable file.
func tarGz(t *testing.T, name, content string) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o755, Size: int64(len(content)), Typeflag: tar.TypeReg}); err != nil {
		t.Fatal(err)
	}
	fmt.Fprint(tw, content)
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	gz.Close()
	return buf.Bytes()
}
