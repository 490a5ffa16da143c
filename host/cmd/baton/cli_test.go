package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/baton-run/baton/host/internal/domain"
	"github.com/baton-run/baton/host/internal/orchestrator"
)

// batonEnv runs baton with exactly these BATON_* variables (the test's
// own are dropped) and stdin holding input.
func batonEnv(t *testing.T, env []string, input string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var all []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "BATON_") {
			all = append(all, kv)
		}
	}
	return execBaton(t, append(all, env...), input, args...)
}

// threadsJSON is `baton threads --json`, decoded.
func threadsJSON(t *testing.T, out string) []domain.ThreadSummary {
	t.Helper()
	var list []domain.ThreadSummary
	dec := json.NewDecoder(strings.NewReader(out))
	for dec.More() {
		var s domain.ThreadSummary
		if err := dec.Decode(&s); err != nil {
			t.Fatalf("threads --json: %v\n%s", err, out)
		}
		s.Sequence = 0 // where the log is: not this test's business
		list = append(list, s)
	}
	return list
}

var threadIDRe = regexp.MustCompile(`■ thread (\S+):`)

func threadOf(t *testing.T, out string) string {
	t.Helper()
	m := threadIDRe.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no thread id in:\n%s", out)
	}
	return m[1]
}

// Every flag can come from its BATON_* variable; the command line wins.
func TestEnvironmentSetsFlags(t *testing.T) {
	data, other, ws := t.TempDir(), t.TempDir(), t.TempDir()
	msgs := lines(t, "acp/simple.messages")
	out, errOut, code := batonEnv(t, []string{"BATON_DATA=" + data, "BATON_PROVIDER=acp", "BATON_CWD=" + ws,
		"BATON_PROVIDER_COMMAND=" + peerCommand(t, "acp/simple.ndjson")}, "", append([]string{"run"}, msgs...)...)
	if code != exitOK {
		t.Fatalf("run from the environment: exit %d\n%s\n%s", code, out, errOut)
	}
	thread := threadOf(t, out)
	want := []domain.ThreadSummary{{ID: thread, Provider: "acp", Cwd: ws, Runs: len(msgs), Status: domain.ThreadIdle, LastRun: domain.RunStatusCompleted,
		Title: domain.TitleOf(msgs[0])}}
	ignoreTimes := cmpopts.IgnoreFields(domain.ThreadSummary{}, "CreatedAt", "UpdatedAt")
	// The same data dir by flag, by variable, and by flag over another
	// variable.
	for _, c := range []struct {
		name string
		env  []string
		args []string
	}{
		{"--data", nil, []string{"--data", data}},
		{"BATON_DATA", []string{"BATON_DATA=" + data}, nil},
		{"--data over BATON_DATA", []string{"BATON_DATA=" + other}, []string{"--data", data}},
		{"BATON_JSON", []string{"BATON_DATA=" + data, "BATON_JSON=true"}, []string{"threads"}},
	} {
		args := append([]string{"threads", "--json"}, c.args...)
		if c.name == "BATON_JSON" {
			args = c.args
		}
		out, errOut, code := batonEnv(t, c.env, "", args...)
		if code != exitOK {
			t.Fatalf("%s: exit %d\n%s", c.name, code, errOut)
		}
		if diff := cmp.Diff(want, threadsJSON(t, out), ignoreTimes); diff != "" {
			t.Errorf("%s: threads (-want +got):\n%s", c.name, diff)
		}
	}
	if out, _, code := batonEnv(t, []string{"BATON_DATA=" + other}, "", "threads", "--json"); code != exitOK || out != "" {
		t.Errorf("threads of another data dir: exit %d\n%s", code, out)
	}
	if _, errOut, code := batonEnv(t, []string{"BATON_DATA=" + data, "BATON_LIMIT=many"}, "", "threads"); code != exitUsage ||
		!strings.Contains(errOut, "BATON_LIMIT") {
		t.Errorf("a bad value in the environment: exit %d, %s", code, errOut)
	}
}

// A provider that is not installed is refused before anything is written,
// naming the installed ones.
func TestUnknownProviderRefused(t *testing.T) {
	for name, extra := range map[string][]string{
		"as typed":              nil, // no default command to fall back on either
		"with a command of its": {"--provider-command", "x"},
	} {
		t.Run(name, func(t *testing.T) {
			data := t.TempDir()
			os.Chmod(data, 0o700) // else the one line is a warning of a data dir others may reach
			args := append([]string{"run", "--data", data, "--cwd", t.TempDir(), "--provider", "nope"}, extra...)
			out, errOut, code := baton(t, append(args, "hi")...)
			const want = `provider "nope" is not installed; installed: acp, claude, codex, cursor, opencode`
			if code != exitUsage || out != "" || !strings.HasPrefix(errOut, "baton: ") || strings.Count(errOut, "\n") != 1 ||
				!strings.Contains(errOut, want) {
				t.Errorf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
			}
			h, err := orchestrator.Open(orchestrator.Config{DataDir: data, PluginDirs: []string{binDir}})
			if err != nil {
				t.Fatal(err)
			}
			defer h.Close()
			if seq := h.LastSequence(); seq != 0 {
				recs, _ := h.ThreadEvents("", 0)
				t.Errorf("the log holds %d events after a refused run: %v", seq, recs)
			}
		})
	}
}

// Help is complete: every verb has its usage, examples and each flag's
// variable; completion scripts are generated.
func TestHelpAndCompletion(t *testing.T) {
	out, _, code := baton(t, "--help")
	if code != exitOK {
		t.Fatalf("baton --help: exit %d", code)
	}
	verbs := []string{"run", "threads", "show", "watch", "send", "interrupt", "approve", "decline", "diff", "rollback", "switch", "plugin", "serve", "version", "completion", "doctor", "status"}
	for _, v := range verbs {
		if !regexp.MustCompile(`(?m)^  ` + v + ` `).MatchString(out) {
			t.Errorf("baton --help does not list %s:\n%s", v, out)
		}
	}
	for _, want := range []string{"--data directory", "[$BATON_DATA]", "[$BATON_SERVER]", "[$BATON_TOKEN_FILE]", "Examples:", "Exit codes"} {
		if !strings.Contains(out, want) {
			t.Errorf("baton --help lacks %q:\n%s", want, out)
		}
	}
	flags := map[string][]string{
		"run":       {"--provider name", "[$BATON_PROVIDER]", "--approve", "--detach", "[$BATON_PROVIDER_COMMAND]", "--handoff-max-bytes n"},
		"threads":   {"--status", "--provider", "--json", "-o, --output format", "table, json", "[$BATON_OUTPUT]"},
		"show":      {"--json", "--handoff id"},
		"watch":     {"--after sequence"},
		"send":      {"--mode", "queue, steer, restart or now", "--provider name", "--handoff-max-bytes n", "--run ordinal", "--file file", "[$BATON_RUN]"},
		"switch":    {"--provider name", "--model model", "--provider-command", "--handoff-max-bytes n"},
		"interrupt": {"--run ordinal", "--force", "[$BATON_RUN]"},
		"doctor":    {"--rebuild"},
		"approve":   {"--for-session", "--answer text"},
		"status":    {"--json", "[$BATON_JSON]"},
		"decline":   {"--cancel"},
		"diff":      {"--run ordinal", "--max-bytes"},
		"rollback":  {"--run ordinal"},
		"serve": {"--listen", "--tls-cert", "--tls-key", "--idle-timeout", "--log-format", "[$BATON_IDLE_TIMEOUT]",
			"--max-connections n", "--max-streams n", "--connection-idle-timeout duration", "--keepalive duration", "--keepalive-timeout duration",
			"--max-subscribers n", "--max-thread-subscribers n", "--subscriber-buffer n", "--slow-subscriber duration", "[$BATON_MAX_SUBSCRIBERS]"},
	}
	for verb, want := range flags {
		out, _, code := baton(t, verb, "--help")
		if code != exitOK {
			t.Errorf("baton %s --help: exit %d", verb, code)
		}
		for _, w := range append(want, "Usage:", "Examples:", "[$BATON_DATA]", "[$BATON_SERVER]") {
			if !strings.Contains(out, w) {
				t.Errorf("baton %s --help lacks %q:\n%s", verb, w, out)
			}
		}
	}
	for shell, want := range map[string]string{"bash": "__start_baton", "zsh": "#compdef baton", "fish": "complete -c baton"} {
		out, errOut, code := baton(t, "completion", shell)
		if code != exitOK || !strings.Contains(out, want) {
			t.Errorf("baton completion %s: exit %d, %s\n%.300s", shell, code, errOut, out)
		}
	}
	// Completion of a flag's values.
	out, _, _ = baton(t, "__complete", "run", "--approve", "")
	if !strings.HasPrefix(out, "ask\naccept\ndecline\n") {
		t.Errorf("completion of --approve:\n%s", out)
	}
	for _, args := range [][]string{{"frobnicate"}, {"threads", "--frobnicate"}, {"show"}, {"send", "thr_x"}, {"approve"}, {"send", "--mode", "sideways", "thr_x", "hi"}} {
		if _, errOut, code := baton(t, args...); code != exitUsage || !strings.HasPrefix(errOut, "baton: ") {
			t.Errorf("baton %v: exit %d, %s", args, code, errOut)
		}
	}
}

// The verbs against an embedded host: threads, show (human and --json),
// approve and interrupt on a thread whose run has ended, send.
func TestVerbsOnEmbeddedHost(t *testing.T) {
	data, ws := t.TempDir(), t.TempDir()
	out, errOut, code := batonIn(t, "a\n", "run", "--data", data, "--provider", "acp", "--approve", "ask", "--cwd", ws,
		"--provider-command", peerCommand(t, "acp/approval_accept.ndjson"), "Write allowed.txt")
	if code != exitOK {
		t.Fatalf("run: exit %d\n%s\n%s", code, out, errOut)
	}
	thread := threadOf(t, out)

	out, errOut, code = baton(t, "show", "--json", "--data", data, thread)
	th, err := readThreadJSON([]byte(out))
	if code != exitOK || err != nil {
		t.Fatalf("show --json: exit %d, %v\n%s\n%s", code, err, out, errOut)
	}
	type run struct {
		Ordinal int
		Status  domain.RunStatus
		Input   string
	}
	type request struct {
		Kind       domain.RequestKind
		Status     domain.RequestStatus
		Decision   domain.RequestDecision
		AnsweredBy domain.Answerer
	}
	var runs []run
	for _, r := range th.Runs {
		runs = append(runs, run{r.Ordinal, r.Status, r.Input})
	}
	var reqs []request
	for _, q := range th.Requests {
		reqs = append(reqs, request{q.Kind, q.Status, q.Decision, q.AnsweredBy})
	}
	if diff := cmp.Diff([]run{{1, domain.RunStatusCompleted, "Write allowed.txt"}}, runs); diff != "" {
		t.Errorf("show --json: runs (-want +got):\n%s", diff)
	}
	if len(th.Requests) != 1 {
		t.Fatalf("show --json: requests %+v", th.Requests)
	}
	reqID := th.Requests[0].ID
	if diff := cmp.Diff([]request{{domain.RequestPermission, domain.RequestStatusResolved, domain.DecisionAccept, domain.AnsweredByClient}}, reqs); diff != "" {
		t.Errorf("show --json: requests (-want +got):\n%s", diff)
	}
	if th.ID != thread || th.Provider != "acp" || th.Cwd != ws || th.ApprovalPolicy != domain.ApproveAsk {
		t.Errorf("show --json: thread %s %s %s %s", th.ID, th.Provider, th.Cwd, th.ApprovalPolicy)
	}

	out, _, code = baton(t, "show", "--data", data, thread)
	for _, want := range []string{"thread " + thread + " · acp · " + ws, "runs (1):\n  1  " + th.Runs[0].ID + "  completed", "Write allowed.txt",
		"requests (1):\n  " + reqID, "accept by client", "\n  idle, last run completed; approvals: "} {
		if code != exitOK || !strings.Contains(out, want) {
			t.Errorf("show: exit %d, lacks %q:\n%s", code, want, out)
		}
	}

	// What no longer waits is refused, saying why.
	if _, errOut, code := baton(t, "approve", "--data", data, reqID); code != exitUsage || !strings.HasPrefix(errOut, "baton: ") ||
		!strings.Contains(errOut, reqID) {
		t.Errorf("approve an answered request: exit %d, %s", code, errOut)
	}
	if _, errOut, code := baton(t, "approve", "--data", data, "req_nope"); code != exitUsage || !strings.Contains(errOut, "req_nope") {
		t.Errorf("approve an unknown request: exit %d, %s", code, errOut)
	}
	if _, errOut, code := baton(t, "interrupt", "--data", data, thread); code != exitFailed || !strings.Contains(errOut, "no active run") {
		t.Errorf("interrupt an idle thread: exit %d, %s", code, errOut)
	}
	if _, errOut, code := baton(t, "show", "--data", data, "thr_nope"); code != exitUsage || !strings.Contains(errOut, "thr_nope") {
		t.Errorf("show an unknown thread: exit %d, %s", code, errOut)
	}

	// send with no service: it follows the run it makes to its end.
	groups := lines(t, "acp/resume.messages")
	cmd := peerCommand(t, "acp/resume.ndjson") + " --state '" + filepath.Join(t.TempDir(), "cursor") + "'"
	out, errOut, code = baton(t, "run", "--data", data, "--cwd", ws, "--provider", "acp", "--provider-command", cmd, groups[0])
	if code != exitOK {
		t.Fatalf("run: exit %d\n%s\n%s", code, out, errOut)
	}
	second := threadOf(t, out)
	out, errOut, code = baton(t, "send", "--data", data, second, groups[2])
	if code != exitOK || !strings.Contains(out, "✔ run 2 completed") || !strings.Contains(out, "The word was pineapple.") {
		t.Fatalf("send: exit %d\n%s\n%s", code, out, errOut)
	}

	// Both threads, then filtered.
	out, errOut, code = baton(t, "threads", "--json", "--data", data)
	got := threadsJSON(t, out)
	want := []domain.ThreadSummary{ // newest first
		{ID: second, Provider: "acp", Cwd: ws, Runs: 2, Status: domain.ThreadIdle, LastRun: domain.RunStatusCompleted, Title: domain.TitleOf(groups[0])},
		{ID: thread, Provider: "acp", Cwd: ws, Runs: 1, Status: domain.ThreadIdle, LastRun: domain.RunStatusCompleted, Title: "Write allowed.txt"},
	}
	ignoreTimes := cmpopts.IgnoreFields(domain.ThreadSummary{}, "CreatedAt", "UpdatedAt")
	if diff := cmp.Diff(want, got, ignoreTimes); code != exitOK || diff != "" {
		t.Errorf("threads: exit %d %s (-want +got):\n%s", code, errOut, diff)
	}
	out, _, _ = baton(t, "threads", "--json", "--data", data, "--limit", "1")
	if diff := cmp.Diff(want[:1], threadsJSON(t, out), ignoreTimes); diff != "" {
		t.Errorf("threads --limit 1 (-want +got):\n%s", diff)
	}
	out, _, _ = baton(t, "threads", "--json", "--data", data, "--provider", "codex")
	if diff := cmp.Diff([]domain.ThreadSummary(nil), threadsJSON(t, out), ignoreTimes); diff != "" {
		t.Errorf("threads --provider codex (-want +got):\n%s", diff)
	}
	out, _, _ = baton(t, "threads", "--json", "--data", data, "--status", "idle", "--provider", "acp")
	if diff := cmp.Diff(want, threadsJSON(t, out), ignoreTimes); diff != "" {
		t.Errorf("threads --status idle --provider acp (-want +got):\n%s", diff)
	}
}

// watch prints a thread's events as run does, from the sequence asked,
// until Ctrl-C, which only stops the watching (exit 0).
func TestWatchFollowsUntilCtrlC(t *testing.T) {
	data, ws := t.TempDir(), t.TempDir()
	out, errOut, code := batonIn(t, "a\n", "run", "--data", data, "--provider", "acp", "--approve", "ask", "--cwd", ws,
		"--provider-command", peerCommand(t, "acp/approval_accept.ndjson"), "Write allowed.txt")
	if code != exitOK {
		t.Fatalf("run: exit %d\n%s\n%s", code, out, errOut)
	}
	thread := threadOf(t, out)
	cmd := exec.Command(filepath.Join(binDir, "baton"), "watch", "--data", data, "--after", "0", thread)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var errb bytes.Buffer
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	seen := make(chan string)
	go func() {
		defer close(seen)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			seen <- sc.Text()
		}
	}()
	var got []string
	timeout := time.After(60 * time.Second)
wait:
	for {
		select {
		case l, ok := <-seen:
			if !ok {
				t.Fatalf("watch ended by itself: %v\n%s\n%s", cmd.Wait(), strings.Join(got, "\n"), errb.String())
			}
			got = append(got, l)
			if strings.HasPrefix(l, "✔ run 1 completed") {
				break wait
			}
		case <-timeout:
			cmd.Process.Kill()
			t.Fatalf("watch never showed the run's end:\n%s\n%s", strings.Join(got, "\n"), errb.String())
		}
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	for range seen {
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("watch after Ctrl-C: %v\n%s", err, errb.String())
	}
	// The whole thread, as baton run showed it (less its prompts and its
	// closing line).
	var want []string
	for _, l := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		l = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(l), "? [a]ccept, accept for [s]ession, [d]ecline, [c]ancel the turn:"))
		if l != "" && !strings.HasPrefix(l, "■") {
			want = append(want, l)
		}
	}
	var gotTrim []string
	for _, l := range got {
		if l = strings.TrimSpace(l); l != "" {
			gotTrim = append(gotTrim, l)
		}
	}
	if diff := cmp.Diff(want, gotTrim); diff != "" {
		t.Errorf("watch --after 0 (-run's lines +watch's):\n%s", diff)
	}
}
