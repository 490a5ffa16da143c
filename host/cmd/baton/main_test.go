package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/baton-run/baton/host/internal/testbin"
	"github.com/baton-run/baton/sdk/plugintest"
)

const root = "../../.."

var binDir string // baton, baton-plugin-acp, replaypeer and plugins.lock

func TestMain(m *testing.M) {
	plugintest.CoverChildren()
	bins, err := testbin.Build(root, true)
	if err != nil {
		fmt.Fprintln(os.Stderr, "setup:", err)
		os.Exit(1)
	}
	binDir = bins.Dir
	code := m.Run()
	bins.Remove()
	if pristineDir != "" {
		os.RemoveAll(filepath.Dir(pristineDir))
	}
	os.Exit(code)
}

func baton(t testing.TB, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	return batonIn(t, "", args...)
}

// batonIn runs baton with stdin (not a terminal) holding input.
func batonIn(t testing.TB, input string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	return execBaton(t, append(os.Environ(), "BATON_DATA="+t.TempDir()), input, args...)
}

// execBaton runs baton with exactly this environment and stdin holding
// input.
func execBaton(t testing.TB, env []string, input string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(filepath.Join(binDir, "baton"), args...)
	cmd.Env = env
	cmd.Stdin = strings.NewReader(input)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errb.String(), code
}

func lines(t *testing.T, name string) []string {
	b, err := os.ReadFile(filepath.Join(root, "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimRight(string(b), "\n"), "\n")
}

func peerCommand(t *testing.T, transcript string) string {
	abs, _ := filepath.Abs(filepath.Join(root, "testdata", transcript))
	return fmt.Sprintf("'%s' --transcript '%s' --speed 0", filepath.Join(binDir, "replaypeer"), abs)
}

// The --json contract: one JSON object per line, the last the final thread
// projection with lowerCamelCase fields.
func TestRunJSON(t *testing.T) {
	msgs := lines(t, "acp/multi_turn.messages")
	args := append([]string{"run", "--json", "--data", t.TempDir(), "--cwd", t.TempDir(), "--provider", "acp",
		"--provider-command", peerCommand(t, "acp/multi_turn.ndjson")}, msgs...)
	out, stderr, code := baton(t, args...)
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, stderr)
	}
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(nil, 16<<20)
	var last map[string]any
	n := 0
	for sc.Scan() {
		last = nil
		if err := json.Unmarshal(sc.Bytes(), &last); err != nil {
			t.Fatalf("line %d is not one JSON object: %v\n%s", n+1, err, sc.Text())
		}
		n++
	}
	var final struct {
		Kind string `json:"kind"`
		Runs []struct {
			Ordinal int    `json:"ordinal"`
			Status  string `json:"status"`
		} `json:"runs"`
		Messages []struct {
			Role string `json:"role"`
			Text string `json:"text"`
		} `json:"messages"`
	}
	b, _ := json.Marshal(last)
	json.Unmarshal(b, &final)
	if final.Kind != "thread" || len(final.Runs) != len(msgs) {
		t.Fatalf("last line = %s; want the thread with %d runs", b, len(msgs))
	}
	for i, r := range final.Runs {
		if r.Ordinal != i+1 || r.Status != "completed" {
			t.Errorf("runs[%d] = %+v", i, r)
		}
	}
	var users, assistants int
	for _, m := range final.Messages {
		switch m.Role {
		case "user":
			users++
		case "assistant":
			if m.Text != "" {
				assistants++
			}
		}
	}
	if users != len(msgs) || assistants < len(msgs) {
		t.Errorf("messages: %d user, %d assistant with text; want %d each", users, assistants, len(msgs))
	}
}

// The readable stream shows the assistant's text and each run's end, and a
// thread continued with --thread resumes the provider's conversation in a
// new provider process (the replay peer continues its transcript).
func TestRunReadableAndContinue(t *testing.T) {
	data, ws := t.TempDir(), t.TempDir()
	groups := lines(t, "acp/resume.messages") // message, "---", message
	cmd := peerCommand(t, "acp/resume.ndjson") + " --state '" + filepath.Join(t.TempDir(), "cursor") + "'"
	out, stderr, code := baton(t, "run", "--data", data, "--cwd", ws, "--provider", "acp", "--provider-command", cmd, groups[0])
	if code != 0 || !strings.Contains(out, "✔ run 1 completed") || !strings.Contains(out, "I will remember: pineapple.") {
		t.Fatalf("exit %d\n%s\n%s", code, out, stderr)
	}
	var threadID string
	for _, l := range strings.Split(out, "\n") {
		if i := strings.Index(l, "--thread "); i >= 0 {
			threadID = strings.TrimSuffix(l[i+len("--thread "):], ")")
		}
	}
	if threadID == "" {
		t.Fatalf("no thread id to continue in:\n%s", out)
	}
	out, stderr, code = baton(t, "run", "--data", data, "--thread", threadID, groups[2])
	if code != 0 || !strings.Contains(out, "✔ run 2 completed") || !strings.Contains(out, "The word was pineapple.") {
		t.Fatalf("continue: exit %d\n%s\n%s", code, out, stderr)
	}
	if _, stderr, code := baton(t, "run", "--data", data, "--thread", "thr_nope", "hi"); code != 2 || !strings.Contains(stderr, "thr_nope") {
		t.Errorf("unknown thread: exit %d, %s", code, stderr)
	}
	// The thread list, from the thread index.
	out, stderr, code = baton(t, "threads", "--data", data, "--json")
	var got map[string]any
	if err := json.Unmarshal([]byte(out), &got); code != 0 || err != nil {
		t.Fatalf("threads --json: exit %d, %v\n%s\n%s", code, err, out, stderr)
	}
	delete(got, "createdAt")
	delete(got, "updatedAt")
	want := map[string]any{"id": threadID, "provider": "acp", "cwd": ws, "runs": 2.0, "status": "idle", "lastRun": "completed",
		"sequence": got["sequence"], "title": "Remember the word: pineapple."}
	if seq, _ := got["sequence"].(float64); seq < 10 || !reflect.DeepEqual(got, want) {
		t.Errorf("threads --json:\n got %v\nwant %v", got, want)
	}
	out, _, code = baton(t, "threads", "--data", data)
	if code != 0 || !strings.Contains(out, threadID+"  acp       idle, last run completed  2") {
		t.Errorf("threads: exit %d\n%s", code, out)
	}
	if out, _, code = baton(t, "threads", "--data", data, "--after", threadID); code != 0 || strings.Contains(out, threadID) {
		t.Errorf("threads after the only thread: exit %d\n%s", code, out)
	}
}

func TestUsageAndFailures(t *testing.T) {
	if _, stderr, code := baton(t, "run", "hello"); code != 2 || !strings.Contains(stderr, "--provider is required") {
		t.Errorf("no provider: exit %d, %s", code, stderr)
	}
	if _, stderr, code := baton(t, "run", "--provider", "acp"); code != 2 || !strings.Contains(stderr, "MESSAGE") {
		t.Errorf("no message: exit %d, %s", code, stderr)
	}
	if _, stderr, code := baton(t, "run", "--provider", "acp", "--provider-command", `"unclosed`, "hi"); code != 2 || !strings.Contains(stderr, "cannot split") {
		t.Errorf("bad command: exit %d, %s", code, stderr)
	}
	if _, _, code := baton(t, "frobnicate"); code != 2 {
		t.Errorf("unknown command: exit %d", code)
	}
	// Refused before anything is written, naming what is installed.
	_, stderr, code := baton(t, "run", "--data", t.TempDir(), "--cwd", t.TempDir(), "--provider", "nosuch", "--provider-command", "x", "hi")
	if code != 2 || !strings.Contains(stderr, `provider "nosuch" is not installed; installed: acp, claude, codex, cursor, opencode`) {
		t.Errorf("missing plugin: exit %d\n%s", code, stderr)
	}
}
