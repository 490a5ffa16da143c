package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-run/baton/host/internal/orchestrator"
)

// providerPath is a PATH (transcripts relative to testdata, or absolute) whose codex, claude and opencode (the providers'
// usual commands) are replay peers of each one's transcript, ahead of the
// test's own.
func providerPath(t *testing.T, transcripts map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for provider, transcript := range transcripts {
		abs := transcript
		if !filepath.IsAbs(abs) {
			abs, _ = filepath.Abs(filepath.Join(root, "testdata", transcript))
		}
		peer := filepath.Join(binDir, "replaypeer")
		tail, err := exec.Command(peer, "peer-args", abs).Output() // "--" when it checks the arguments it is given
		if err != nil {
			t.Fatalf("replaypeer peer-args %s: %v", abs, err)
		}
		args := strings.TrimSpace(string(tail))
		if strings.HasSuffix(args, "--") {
			args += ` "$@"`
		}
		script := fmt.Sprintf("#!/bin/sh\nexec '%s' --transcript '%s' --speed 0 %s\n", peer, abs, args)
		if err := os.WriteFile(filepath.Join(dir, provider), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir + string(os.PathListSeparator) + os.Getenv("PATH")
}

// batonPath runs baton with PATH set to path (and a data dir of its own
// unless args give one).
func batonPath(t *testing.T, path string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PATH=") && !strings.HasPrefix(kv, "BATON_") {
			env = append(env, kv)
		}
	}
	data := t.TempDir()
	os.Chmod(data, 0o700)
	return execBaton(t, append(env, "PATH="+path, "BATON_DATA="+data), "", args...)
}

var simpleTranscripts = map[string]string{"codex": "codex/simple.ndjson", "claude": "claude/simple.ndjson", "opencode": "opencode/simple.ndjson"}

// anyThread and anySession are a thread's and a provider session's id,
// as they are replaced to compare two runs' lines.
var anyThread, anySession = regexp.MustCompile(`thr_[0-9A-Za-z]+`), regexp.MustCompile(`ses_[0-9a-f]+`)

// normalized is a line with its ids replaced.
func normalized(line string) string {
	return anySession.ReplaceAllString(anyThread.ReplaceAllString(line, "THREAD"), "SESSION")
}

// byPrefix splits lines begun with "[provider shortid] " into each
// provider's lines, in order, with the thread's id made THREAD. A line
// with no such prefix is an error.
func byPrefix(t *testing.T, out string) map[string][]string {
	t.Helper()
	prefix := regexp.MustCompile(`^\[(\w+) ([0-9A-Za-z]{8})\] (.*)$`)
	got := map[string][]string{}
	for _, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		m := prefix.FindStringSubmatch(l)
		if m == nil {
			t.Fatalf("a line without its thread's prefix: %q in\n%s", l, out)
		}
		got[m[1]] = append(got[m[1]], normalized(m[3]))
	}
	return got
}

// Several providers at once: a thread each, run in parallel, each line
// whole and begun with its thread's provider and short id; each thread's
// lines, in order, are what a run of that provider alone prints.
func TestRunSeveralProviders(t *testing.T) {
	path, ws := providerPath(t, simpleTranscripts), t.TempDir()
	want := map[string][]string{}
	for provider := range simpleTranscripts {
		out, errOut, code := batonPath(t, path, "run", "--cwd", ws, "--provider", provider, "Say hello")
		if code != exitOK {
			t.Fatalf("%s alone: exit %d\n%s\n%s", provider, code, out, errOut)
		}
		for _, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
			want[provider] = append(want[provider], normalized(l))
		}
	}
	out, errOut, code := batonPath(t, path, "run", "--cwd", ws, "--provider", "codex,claude,opencode", "Say hello")
	if code != exitOK {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	if diff := cmp.Diff(want, byPrefix(t, out)); diff != "" {
		t.Errorf("each thread's lines (-alone +together):\n%s\nall:\n%s", diff, out)
	}
	// --json: one object per line, each with its thread's id.
	out, errOut, code = batonPath(t, path, "run", "--json", "--cwd", t.TempDir(), "--provider", "codex,claude", "Say hello")
	if code != exitOK {
		t.Fatalf("--json: exit %d\n%s\n%s", code, out, errOut)
	}
	threads := map[string]int{}
	for _, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		ev := jsonObject(t, l)
		id, _ := ev["threadId"].(string)
		if ev["kind"] == "thread" {
			id, _ = ev["id"].(string)
		}
		if id == "" {
			t.Fatalf("--json: a line without its thread's id: %s", l)
		}
		threads[id]++
	}
	if len(threads) != 2 {
		t.Errorf("--json: lines of %d threads, want 2: %v", len(threads), threads)
	}
}

// A failed thread among several makes the exit 1; the others still run
// to their end.
func TestRunSeveralProvidersOneFails(t *testing.T) {
	path := providerPath(t, map[string]string{"codex": "codex/simple.ndjson", "claude": "claude/exit_at_start.ndjson"})
	out, errOut, code := batonPath(t, path, "run", "--cwd", t.TempDir(), "--provider", "codex,claude", "Say hello")
	if code != exitFailed {
		t.Fatalf("exit %d, want 1\n%s\n%s", code, out, errOut)
	}
	lines := byPrefix(t, out)
	if got := lines["codex"]; len(got) == 0 || !strings.Contains(got[len(got)-1], "run 1 completed") {
		t.Errorf("codex's thread: %q", got)
	}
	if got := lines["claude"]; len(got) == 0 || !strings.Contains(got[len(got)-1], "run 1 failed") {
		t.Errorf("claude's thread: %q", got)
	}
}

// What cannot apply is refused before anything is written.
func TestRunWorktreeAndProvidersRefusals(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--thread", "thr_x", "--worktree"}, "--worktree is a new thread's"},
		{[]string{"--thread", "thr_x", "--branch", "b"}, "--branch is a new thread's"},
		{[]string{"--provider", "acp", "--branch", "b"}, "--branch needs --worktree"},
		{[]string{"--provider", "acp", "--copy", ".env"}, "--copy needs --worktree"},
		{[]string{"--provider", "acp", "--setup", "make"}, "--setup needs --worktree"},
		{[]string{"--provider", "acp", "--base", "main"}, "--base needs --worktree"},
		{[]string{"--provider", "acp", "--worktree-dir", "x"}, "--worktree-dir needs --worktree"},
		{[]string{"--provider", "acp", "--author", "A <a@b>"}, "--author needs --worktree"},
		{[]string{"--provider", "codex,codex"}, "names codex twice"},
		{[]string{"--provider", "codex,"}, "an empty provider name"},
		{[]string{"--thread", "thr_x", "--provider", "codex,claude"}, "has one"},
		{[]string{"--provider", "codex,claude", "--approve", "ask"}, "cannot ask for several threads"},
		{[]string{"--provider", "codex,claude", "--provider-command", "x"}, "each runs its usual command"},
		{[]string{"--provider", "codex,nope"}, `provider "nope" is not installed`},
		{[]string{"--provider", "codex,claude", "--model", "m"}, "--model is one provider's"},
	} {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			data := t.TempDir()
			args := append(append([]string{"run", "--data", data, "--cwd", t.TempDir()}, c.args...), "hi")
			out, errOut, code := baton(t, args...)
			if code != exitUsage || out != "" || !strings.Contains(errOut, c.want) {
				t.Errorf("exit %d, want 2 saying %q\nstdout:\n%s\nstderr:\n%s", code, c.want, out, errOut)
			}
			assertNothingWritten(t, data)
		})
	}
}

// assertNothingWritten fails when the data dir's log holds an event.
func assertNothingWritten(t *testing.T, data string) {
	t.Helper()
	h, err := orchestrator.Open(orchestrator.Config{DataDir: data, PluginDirs: []string{binDir}})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if seq := h.LastSequence(); seq != 0 {
		t.Errorf("the log holds %d events after a refusal", seq)
	}
}

// jsonObject decodes one line of --json.
func jsonObject(t *testing.T, line string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(line), &m); err != nil {
		t.Fatalf("not one JSON object: %v\n%s", err, line)
	}
	return m
}

// The branch names of a run on several providers are --branch's and the
// provider's.
func TestWorktreeOptionsPerProvider(t *testing.T) {
	f := worktreeFlags{on: true, branch: "try", dir: "rel"}
	o, err := f.options("codex", true)
	if err != nil {
		t.Fatal(err)
	}
	abs, _ := filepath.Abs("rel")
	if o.GetBranch() != "try-codex" || o.GetDir() != abs {
		t.Errorf("options = %v; want branch try-codex in %s", o, abs)
	}
	if o, _ := f.options("codex", false); o.GetBranch() != "try" {
		t.Errorf("one provider: branch %q, want try", o.GetBranch())
	}
	if o, _ := (&worktreeFlags{}).options("codex", true); o != nil {
		t.Errorf("no --worktree: %v, want none", o)
	}
	if !slices.Contains(worktreeFlagNames, "copy") {
		t.Error("--copy is not a worktree flag")
	}
}

// Ctrl-C interrupts every thread's runs, and the exit is 130.
func TestRunSeveralProvidersCtrlC(t *testing.T) {
	path := providerPath(t, map[string]string{"codex": "codex/turn_interrupt.ndjson", "claude": "claude/turn_interrupt.ndjson"})
	data := t.TempDir()
	os.Chmod(data, 0o700)
	cmd := exec.Command(filepath.Join(binDir, "baton"), "run", "--data", data, "--provider", "codex,claude", "--cwd", t.TempDir(),
		"Count to a million, slowly")
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PATH=") && !strings.HasPrefix(kv, "BATON_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "PATH="+path)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var errb bytes.Buffer
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// A thread left running would keep baton going: it is ended, and the
	// exit is not 130.
	stop := time.AfterFunc(20*time.Second, func() { cmd.Process.Kill() })
	defer stop.Stop()
	var out strings.Builder
	sc := bufio.NewScanner(stdout)
	open := map[string]bool{}
	for sc.Scan() {
		out.WriteString(sc.Text() + "\n")
		// Both sessions open: each run's turn is being started, and the
		// interrupts queue behind the starts.
		if strings.Contains(sc.Text(), "provider session") && len(open) < 2 {
			open[strings.Fields(sc.Text())[0]] = true
			if len(open) == 2 {
				if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	err = cmd.Wait()
	if ee, _ := err.(*exec.ExitError); ee == nil || ee.ExitCode() != exitInterrupted {
		t.Fatalf("exit: %v, want 130\n%s\n%s", err, out.String(), errb.String())
	}
	for provider, lines := range byPrefix(t, out.String()) {
		if last := lines[len(lines)-1]; !strings.Contains(last, "run 1 interrupted") {
			t.Errorf("%s's thread ends %q, want its run interrupted", provider, last)
		}
	}
}

// Through a service, as on an embedded host: the threads are the
// service's, each on its worktree, run in parallel.
func TestRunSeveralProvidersThroughService(t *testing.T) {
	path := providerPath(t, map[string]string{"codex": "codex/simple.ndjson", "claude": "claude/simple.ndjson"})
	t.Setenv("PATH", path) // the service starts the providers
	data, repo := t.TempDir(), userRepo(t)
	startService(t, data)
	out, errOut, code := batonPath(t, path, "run", "--data", data, "--worktree", "--cwd", repo, "--provider", "codex,claude", "Say hello")
	if code != exitOK {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	for provider, lines := range byPrefix(t, out) {
		if n := len(lines); n < 2 || !strings.Contains(lines[n-2], "run 1 completed") || !strings.HasPrefix(lines[n-1], "  branch baton/") {
			t.Errorf("%s's thread ends %q; want its run completed, then its branch", provider, lines)
		}
	}
	out, _, _ = batonPath(t, path, "threads", "--data", data, "-o", "json")
	if n := strings.Count(out, `"branch":"baton/`); n != 2 {
		t.Errorf("the service holds %d threads on branches, want 2:\n%s", n, out)
	}
}
