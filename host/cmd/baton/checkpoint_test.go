package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// baton run shows each run's checkpoint and the files it changed; baton
// diff prints a run's changes; baton rollback puts the files back.
func TestCheckpointCommands(t *testing.T) {
	// The workspace the transcript was recorded in: a repository whose
	// README is committed.
	ws, data := t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(ws, "README.md"), []byte("# Replay workspace\n\nA throwaway repository for recording transcripts.\n"), 0o644)
	for _, args := range [][]string{{"init", "-q"}, {"add", "README.md"},
		{"-c", "user.name=t", "-c", "user.email=t@example.invalid", "-c", "commit.gpgsign=false", "commit", "-q", "-m", "init"}} {
		cmd := exec.Command("git", args...)
		cmd.Dir = ws
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	script, _ := filepath.Abs(filepath.Join(root, "testdata", "acp", "thread_rollback.steps.json"))
	peer := peerCommand(t, "acp/thread_rollback.ndjson") + " --state '" + filepath.Join(t.TempDir(), "cursor") + "'"
	out, errOut, code := baton(t, "run", "--data", data, "--provider", "acp", "--cwd", ws, "--script", script, "--provider-command", peer)
	if code != exitOK {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	for _, want := range []string{"⛁ checkpoint of run 1: 1 file changed", "added a.txt (+1 -0)", "⛁ checkpoint of run 2: 2 files changed",
		"↺ files restored: 1 written, 2 removed (as they were before: git checkout refs/baton/checkpoints/", "↺ rolled back; the next run starts a fresh provider conversation",
		"ⓘ handoff to acp (after the rollback): run 1, ", "run 2 rolled_back, run 3 rolled_back, run 4 completed"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	m := regexp.MustCompile(`■ thread (\S+):`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no thread id in:\n%s", out)
	}
	thread := m[1]

	diff, errOut, code := baton(t, "diff", thread, "--data", data, "--run", "1")
	if code != exitOK || !strings.Contains(diff, "+++ b/a.txt") || !strings.Contains(diff, "+one") || !strings.Contains(errOut, "1 file changed") {
		t.Errorf("diff of run 1: exit %d\n%s\n%s", code, diff, errOut)
	}
	if _, errOut, code := baton(t, "diff", "--data", data, "--run", "2", thread); code != exitFailed || !strings.Contains(errOut, "stale") {
		t.Errorf("diff of a rolled-back run: exit %d, %s", code, errOut)
	}
	if _, errOut, code := baton(t, "diff", "--data", data); code != exitUsage || !strings.Contains(errOut, "THREAD") {
		t.Errorf("diff without a thread: exit %d, %s", code, errOut)
	}
	if _, errOut, code := baton(t, "rollback", thread, "--data", data); code != exitUsage || !strings.Contains(errOut, "--run") {
		t.Errorf("rollback without --run: exit %d, %s", code, errOut)
	}
	if _, errOut, code := baton(t, "rollback", thread, "--data", data, "--run", "9"); code != exitUsage || !strings.Contains(errOut, "no checkpoint of run 9") {
		t.Errorf("rollback to a run that never was: exit %d, %s", code, errOut)
	}

	// Back to before the first run: a.txt goes.
	out, errOut, code = baton(t, "rollback", thread, "--data", data, "--run", "0")
	if code != exitOK || !strings.Contains(out, "↺ rolled back") {
		t.Fatalf("rollback to the baseline: exit %d\n%s\n%s", code, out, errOut)
	}
	if _, err := os.Stat(filepath.Join(ws, "a.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a.txt after the rollback to the baseline: %v", err)
	}
}
