package main

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// --approve ask: the request is put to the user, who answers on stdin.
func TestRunAsksForApproval(t *testing.T) {
	ws := t.TempDir()
	out, errOut, code := batonIn(t, "maybe\na\n", "run", "--provider", "acp", "--approve", "ask", "--cwd", ws,
		"--provider-command", peerCommand(t, "acp/approval_accept.ndjson"), "Write allowed.txt")
	if code != exitOK {
		t.Fatalf("baton run: exit %d\n%s\n%s", code, out, errOut)
	}
	for _, want := range []string{"[a]ccept", "please type a, s, d or c", "accept (by client)", "✔ run 1 completed"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if b, err := os.ReadFile(filepath.Join(ws, "allowed.txt")); err != nil || string(b) != "written with permission\n" {
		t.Errorf("allowed.txt = %q, %v", b, err)
	}
}

// Two requests in one turn are asked one after the other; end of input
// would decline the rest.
func TestRunAsksTwice(t *testing.T) {
	ws := t.TempDir()
	out, errOut, code := batonIn(t, "a\na\n", "run", "--provider", "codex", "--approve", "ask", "--cwd", ws,
		"--provider-command", peerCommand(t, "codex/approval_accept.ndjson"), "Create made.txt with a command, then hello.txt with a patch")
	if code != exitOK {
		t.Fatalf("baton run: exit %d\n%s\n%s", code, out, errOut)
	}
	if n := strings.Count(out, "accept (by client)"); n != 2 {
		t.Errorf("%d requests accepted, want 2:\n%s", n, out)
	}
	for _, f := range []string{"made.txt", "hello.txt"} {
		if _, err := os.Stat(filepath.Join(ws, f)); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}

// Without a terminal, nothing waits for an answer that cannot come: the
// policy declines the question, and baton run itself declines a request of
// a kind no policy answers, saying so.
func TestRunUnattendedDeclinesUnknownRequests(t *testing.T) {
	out, errOut, code := baton(t, "run", "--provider", "codex", "--cwd", t.TempDir(),
		"--provider-command", peerCommand(t, "codex/unknown_request_unattended.ndjson"), "Pick a colour for the button")
	if code != exitOK {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	if !strings.Contains(errOut, "declining future/unknownRequest request") || !strings.Contains(out, "Keeping the default colour.") {
		t.Errorf("output:\n%s\n%s", out, errOut)
	}
}

// --script plays a scenario: here a message that steers by restart.
func TestRunScript(t *testing.T) {
	script, _ := filepath.Abs(filepath.Join(root, "testdata", "acp", "steering_restart_fallback.steps.json"))
	out, errOut, code := baton(t, "run", "--provider", "acp", "--cwd", t.TempDir(), "--script", script,
		"--provider-command", peerCommand(t, "acp/steering_restart_fallback.ndjson"))
	if code != exitOK {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	for _, want := range []string{"new attempt (steering restart)", "Hi! Keeping it short.", "✔ run 1 completed"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if _, errOut, code := baton(t, "run", "--provider", "acp", "--script", script, "hello"); code != exitUsage ||
		!strings.Contains(errOut, "not both") {
		t.Errorf("--script with messages: exit %d, %s", code, errOut)
	}
}

// Ctrl-C interrupts the run: it ends interrupted when the provider says
// so, the final projection is printed, and baton exits 130.
func TestCtrlCInterruptsTheRun(t *testing.T) {
	cmd := exec.Command(filepath.Join(binDir, "baton"), "run", "--provider", "acp", "--cwd", t.TempDir(),
		"--provider-command", peerCommand(t, "acp/turn_interrupt.ndjson"), "Write a very long essay about rivers.")
	cmd.Env = append(os.Environ(), "BATON_DATA="+t.TempDir())
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var errb bytes.Buffer
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	sc := bufio.NewScanner(stdout)
	sent := false
	for sc.Scan() {
		out.WriteString(sc.Text() + "\n")
		// The session is open: the run's turn is being started. The
		// interrupt, decided now, is an effect queued behind that start
		// (a thread's effects are performed in order), so the prompt goes
		// out before the cancel, as the transcript expects.
		if !sent && strings.Contains(sc.Text(), "provider session") {
			if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
				t.Fatal(err)
			}
			sent = true
		}
	}
	err = cmd.Wait()
	ee, _ := err.(*exec.ExitError)
	if ee == nil || ee.ExitCode() != exitInterrupted {
		t.Fatalf("exit: %v\n%s\n%s", err, out.String(), errb.String())
	}
	for _, want := range []string{"interrupt sent", "⏹ run 1 interrupted", "run 1 interrupted (continue it"} {
		if !strings.Contains(out.String()+errb.String(), want) {
			t.Errorf("output lacks %q:\n%s\n%s", want, out.String(), errb.String())
		}
	}
}
