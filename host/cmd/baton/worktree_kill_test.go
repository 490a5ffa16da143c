//go:build linux

package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	batonv1 "github.com/baton-run/baton/host/api/baton/v1"
	"github.com/baton-run/baton/host/internal/domain"
	"github.com/baton-run/baton/host/internal/domain/domaintest"
	"github.com/baton-run/baton/host/internal/orchestrator"
)

// These tests kill `baton serve` with SIGKILL at the steps of a worktree
// thread where git has written something the log does not know yet: while
// the repository is looked at (before the thread is created), while the
// worktree is made, and while a run is committed on the thread's branch.
// A git shim on the service's PATH stops git at the chosen step; the test
// waits until the service is there, kills its whole process group, and
// opens a host on the same data dir: the thread is whole or absent, and a
// retry works.

// readme is README.md as the replayed transcripts' workspaces have it, so
// that the write they begin with changes nothing.
const readme = "# Replay workspace\n\nA throwaway repository for recording transcripts.\n"

// The service killed while it looks at the repository, before the thread
// is created: no thread, no branch, no worktree; creating it again (with
// the same command id) works.
func TestWorktreeSIGKILLBeforeTheThread(t *testing.T) {
	repo, base := newRepo(t)
	data, shim := t.TempDir(), newGitShim(t)
	s := startKillable(t, data, shim)
	shim.arm(t, "*rev-parse --path-format=absolute --show-toplevel*") // worktree.Inspect
	created := make(chan error, 1)
	go func() {
		_, err := s.client().CreateThread(context.Background(), &batonv1.CreateThreadRequest{CommandId: "create", Provider: "acp",
			Cwd: repo, ApprovalPolicy: "accept", ProviderCommand: &batonv1.ProviderCommand{Argv: peerArgv("acp/simple.ndjson")},
			Worktree: &batonv1.WorktreeOptions{}})
		created <- err
	}()
	shim.waitReached(t, s)
	s.killGroup()
	if err := <-created; err == nil {
		t.Fatal("the thread was created, though the service was killed while it looked at the repository")
	}

	h := reopen(t, data)
	if ts, err := h.Threads("", 0); err != nil || len(ts) != 0 {
		t.Fatalf("threads after the kill: %v, %v; want none", ts, err)
	}
	if got, want := gitC(t, repo, "for-each-ref", "--format=%(refname) %(objectname)", "refs/heads/"), "refs/heads/main "+base+"\n"; got != want {
		t.Errorf("branches after the kill:\n%s\nwant only\n%s", got, want)
	}
	if got := worktreeList(t, repo); !slices.Equal(got, []string{repo}) {
		t.Errorf("worktrees after the kill: %q; want only the user's", got)
	}
	if left, _ := os.ReadDir(filepath.Join(data, "worktrees")); len(left) != 0 {
		t.Errorf("left under DATA/worktrees: %v", left)
	}

	rc, err := h.Dispatch(t.Context(), domain.Command{ID: "create", Payload: domain.CreateThread{Provider: "acp", Cwd: repo,
		ProviderCommand: domain.ProviderCommand{Argv: peerArgv("acp/simple.ndjson")}, ApprovalPolicy: domain.ApproveAccept,
		Worktree: &domain.WorktreeSpec{}}})
	if err != nil {
		t.Fatalf("create the thread again: %v", err)
	}
	send(t, h, rc.ThreadID, "Say hello.")
	th := waitHost(t, h, rc.ThreadID, "the run's end", domaintest.Settled(1))
	if r := th.Runs[0]; r.Status != domain.RunStatusCompleted || r.Commit != "" {
		t.Fatalf("the run after the retry: %s %+v, commit %q; want completed, no commit (it changed nothing)", r.Status, r.Failure, r.Commit)
	}
	checkWorktree(t, data, th, base)
}

// The service killed while it makes the thread's worktree (git worktree
// add done; its files not copied yet, its setup not run): the next host
// makes it again from scratch, and the thread's runs commit on it.
func TestWorktreeSIGKILLWhileMakingTheWorktree(t *testing.T) {
	repo, base := newRepo(t)
	data, shim := t.TempDir(), newGitShim(t)
	s := startKillable(t, data, shim)
	shim.arm(t, "*worktree add*")
	r, err := s.client().CreateThread(t.Context(), &batonv1.CreateThreadRequest{CommandId: "create", Provider: "acp", Cwd: repo,
		ApprovalPolicy: "accept", ProviderCommand: &batonv1.ProviderCommand{Argv: peerArgv("acp/multi_turn.ndjson")},
		Worktree: &batonv1.WorktreeOptions{Copy: []string{".env"}, Setup: "echo set up"}})
	if err != nil {
		t.Fatal(err)
	}
	id := r.GetThreadId()
	shim.waitReached(t, s)
	s.killGroup()
	path := domain.WorktreePath(filepath.Join(data, "worktrees"), repo, id)
	if _, err := os.Stat(filepath.Join(path, "README.md")); err != nil {
		t.Fatalf("the service was killed before git made the worktree: %v", err)
	}
	if _, err := os.Stat(filepath.Join(path, ".env")); err == nil {
		t.Fatal("the service was killed after the worktree's files were copied")
	}

	h := reopen(t, data)
	th := waitHost(t, h, id, "the worktree made", func(th domain.Thread) bool {
		return th.Worktree != nil && th.Worktree.Status != domain.WorktreeStatusCreating
	})
	w := th.Worktree
	if w.Status != domain.WorktreeStatusReady || w.Path != path || th.Cwd != path {
		t.Fatalf("the worktree after the kill: cwd %s, %+v", th.Cwd, w)
	}
	if !slices.Equal(w.Copied, []string{".env"}) || w.SetupResult == nil || w.SetupResult.ExitCode != 0 || w.SetupResult.Output != "set up\n" {
		t.Errorf("the worktree was not made whole again: copied %q, setup %+v", w.Copied, w.SetupResult)
	}
	checkWorktree(t, data, th, base)

	msgs := lines(t, "acp/multi_turn.messages")
	for _, m := range msgs {
		send(t, h, id, m)
	}
	th = waitHost(t, h, id, "the runs' end", domaintest.Settled(len(msgs)))
	var commits []string
	for _, r := range th.Runs {
		if r.Status != domain.RunStatusCompleted {
			t.Fatalf("run %d: %s %+v", r.Ordinal, r.Status, r.Failure)
		}
		commits = append(commits, r.Commit)
	}
	if commits[0] != "" || commits[1] == "" || commits[2] != "" { // only the second run writes a file
		t.Fatalf("the runs' commits: %q", commits)
	}
	checkHistory(t, th, base)
}

// The service killed while it commits a run on the thread's branch (the
// branch moved, the log not told): the next host's capture of the run
// finds the commit it made, by the run's trailer, and records it; the
// branch holds that one commit, and the thread's next run commits on it.
func TestWorktreeSIGKILLWhileCommittingARun(t *testing.T) {
	repo, base := newRepo(t)
	data, shim := t.TempDir(), newGitShim(t)
	s := startKillable(t, data, shim)
	argv := append(peerArgv("acp/worktree_restart.ndjson"), "--state", filepath.Join(t.TempDir(), "cursor"))
	c := s.client()
	r, err := c.CreateThread(t.Context(), &batonv1.CreateThreadRequest{CommandId: "create", Provider: "acp", Cwd: repo,
		ApprovalPolicy: "accept", ProviderCommand: &batonv1.ProviderCommand{Argv: argv}, Worktree: &batonv1.WorktreeOptions{}})
	if err != nil {
		t.Fatal(err)
	}
	id := r.GetThreadId()
	shim.arm(t, "*update-ref*refs/heads/*") // the last step of worktree.CommitRun
	if _, err := c.SendMessage(t.Context(), &batonv1.SendMessageRequest{ThreadId: id, Text: "Write notes.txt"}); err != nil {
		t.Fatal(err)
	}
	shim.waitReached(t, s)
	s.killGroup()

	h := reopen(t, data)
	th := waitHost(t, h, id, "the first run's end", domaintest.Settled(1))
	run := th.Runs[0]
	branch := th.Worktree.Branch
	head := strings.TrimSpace(gitC(t, repo, "rev-parse", branch))
	if run.Status != domain.RunStatusCompleted || run.Commit != head {
		t.Fatalf("the run committed as the service was killed: %s %+v, commit %q; want completed with the branch's head %s",
			run.Status, run.Failure, run.Commit, head)
	}
	if msg := gitC(t, repo, "log", "-1", "--format=%B", head); !strings.Contains(msg, "\nBaton-Run: "+run.ID+"\n") {
		t.Errorf("the branch's head is not the run's commit:\n%s", msg)
	}
	checkHistory(t, th, base)

	// The provider process of the killed service ends before the retry's
	// starts (it keeps the transcript's cursor).
	for _, s := range th.ProviderSessions {
		for _, pid := range []int{s.PluginPid, s.ProviderPid} {
			if !waitGone(pid, time.Now().Add(30*time.Second)) {
				t.Errorf("process %d outlived the killed service", pid)
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}
	send(t, h, id, "Write todo.txt")
	th = waitHost(t, h, id, "the retry's end", domaintest.Settled(2))
	if r := th.Runs[1]; r.Status != domain.RunStatusCompleted || r.Commit == "" {
		t.Fatalf("the run after the restart: %s %+v, commit %q; want completed with a commit", r.Status, r.Failure, r.Commit)
	}
	checkHistory(t, th, base)
}

// gitShim is a git program for a service's PATH: it runs the real git,
// then, while armed, stops at a command whose arguments match the armed
// pattern: it makes the reached file and sleeps until it is killed.
type gitShim struct {
	dir     string // holds the program, named git
	armed   string // holds a shell case pattern while armed
	reached string // made when a command matched
}

func newGitShim(t *testing.T) *gitShim {
	t.Helper()
	real, err := exec.LookPath("git")
	if err == nil {
		real, err = filepath.Abs(real)
	}
	if err != nil {
		t.Fatalf("find git: %v", err)
	}
	tmp := t.TempDir()
	g := &gitShim{dir: filepath.Join(tmp, "bin"), armed: filepath.Join(tmp, "armed"), reached: filepath.Join(tmp, "reached")}
	script := fmt.Sprintf(`#!/bin/sh
%s "$@"
status=$?
if [ -f %s ]; then
	pattern=$(cat %[2]s)
	case "$*" in
	$pattern) : >%s; exec sleep 60 ;;
	esac
fi
exit $status
`, shellQuote(real), shellQuote(g.armed), shellQuote(g.reached))
	if err := os.Mkdir(g.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(g.dir, "git"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return g
}

// arm makes the shim stop at the next git command whose arguments (joined
// with spaces) match pattern, a shell case pattern.
func (g *gitShim) arm(t *testing.T, pattern string) {
	t.Helper()
	if err := os.WriteFile(g.armed, []byte(pattern), 0o644); err != nil {
		t.Fatal(err)
	}
}

// waitReached waits until the shim stopped at the armed command, polling
// the file system; the service ending first fails the test.
func (g *gitShim) waitReached(t *testing.T, s *batonService) {
	t.Helper()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(60 * time.Second)
	for {
		if _, err := os.Stat(g.reached); err == nil {
			return
		}
		select {
		case <-tick.C:
		case <-s.done:
			t.Fatalf("baton serve ended before git reached %s: %v\n%s", g.pattern(), s.err, s.stderr)
		case <-deadline:
			t.Fatalf("git never reached %s in a minute\n%s", g.pattern(), s.stderr)
		}
	}
}

func (g *gitShim) pattern() string {
	b, _ := os.ReadFile(g.armed)
	return string(b)
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// startKillable starts `baton serve` with the shim first on its PATH, in a
// process group of its own, so that killGroup ends it with its git
// commands, plugins and providers.
func startKillable(t *testing.T, data string, shim *gitShim) *batonService {
	t.Helper()
	s := startServiceCmd(t, data, io.Discard, func(cmd *exec.Cmd) {
		cmd.Env = append(os.Environ(), "PATH="+shim.dir+string(os.PathListSeparator)+os.Getenv("PATH"))
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	})
	t.Cleanup(func() { syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL) })
	return s
}

// killGroup kills the service's process group with SIGKILL and waits for
// the service to end.
func (s *batonService) killGroup() {
	s.t.Helper()
	if err := syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL); err != nil {
		s.t.Fatal(err)
	}
	<-s.done
}

// reopen opens a host on the data dir of a killed service, until the test
// ends.
func reopen(t *testing.T, data string) *orchestrator.Host {
	t.Helper()
	h, err := orchestrator.Open(orchestrator.Config{DataDir: data, PluginDirs: []string{binDir}})
	if err != nil {
		t.Fatalf("a host on the killed service's data dir: %v", err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

// waitHost waits until a thread's projection, read after each event,
// satisfies ok.
func waitHost(t *testing.T, h *orchestrator.Host, id, what string, ok func(domain.Thread) bool) domain.Thread {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	th, seq, err := h.Snapshot(id)
	if err != nil {
		t.Fatal(err)
	}
	if ok(th) {
		return th
	}
	for _, err := range h.Events(ctx, seq) {
		if err != nil {
			t.Fatal(err)
		}
		if th, _ = h.Thread(id); ok(th) {
			return th
		}
	}
	t.Fatalf("no %s in a minute; the thread: %+v", what, th)
	return th
}

func send(t *testing.T, h *orchestrator.Host, thread, text string) {
	t.Helper()
	if _, err := h.Dispatch(t.Context(), domain.Command{ID: "send-" + text, ThreadID: thread,
		Payload: domain.DispatchMessage{Text: text, Mode: domain.ModeQueueAfterActive}}); err != nil {
		t.Fatalf("send %q: %v", text, err)
	}
}

// checkWorktree checks that a thread's worktree is whole: a valid git
// worktree on the thread's branch, at base and clean, listed once by
// git, and alone under DATA/worktrees.
func checkWorktree(t *testing.T, data string, th domain.Thread, base string) {
	t.Helper()
	w := th.Worktree
	if w == nil || w.Status != domain.WorktreeStatusReady {
		t.Fatalf("the thread's worktree: %+v", w)
	}
	got := map[string]string{
		"branch": gitC(t, w.Path, "rev-parse", "--abbrev-ref", "HEAD"),
		"head":   gitC(t, w.Path, "rev-parse", "HEAD"),
		"status": gitC(t, w.Path, "status", "--porcelain", "--untracked-files=all"),
	}
	want := map[string]string{"branch": w.Branch + "\n", "head": base + "\n", "status": ""}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the worktree %s (-want +got):\n%s", w.Path, diff)
	}
	if got := worktreeList(t, w.Repository); !slices.Equal(got, []string{w.Repository, w.Path}) {
		t.Errorf("git worktree list: %q; want the user's and the thread's, once", got)
	}
	entries, err := os.ReadDir(filepath.Join(data, "worktrees"))
	if err != nil || len(entries) != 1 || entries[0].Name() != filepath.Base(w.Path) {
		t.Errorf("DATA/worktrees holds %v (%v); want only %s", entries, err, filepath.Base(w.Path))
	}
}

// checkHistory checks that a worktree thread's branch is, from base, the
// commits of its completed runs that changed something, in order, and
// that the thread's head is the branch's.
func checkHistory(t *testing.T, th domain.Thread, base string) {
	t.Helper()
	w := th.Worktree
	var want []string
	for _, r := range th.Runs {
		if r.Status == domain.RunStatusCompleted && r.Commit != "" {
			want = append(want, r.Commit)
		}
	}
	got := strings.Fields(gitC(t, w.Repository, "rev-list", "--reverse", "--first-parent", base+".."+w.Branch))
	if !slices.Equal(got, want) {
		t.Errorf("the branch %s from the base: %q; its runs' commits are %q", w.Branch, got, want)
	}
	if head := strings.TrimSpace(gitC(t, w.Repository, "rev-parse", w.Branch)); w.Head != head {
		t.Errorf("the thread's head is %s, the branch's %s", w.Head, head)
	}
}

// newRepo makes a git repository on branch main with one commit (README.md
// as the replayed workspaces have it, a .gitignore that ignores .env) and
// an .env to copy, and returns its path and the commit.
func newRepo(t *testing.T) (dir, base string) {
	t.Helper()
	dir = t.TempDir()
	for name, content := range map[string]string{"README.md": readme, ".gitignore": ".env\n", ".env": "TOKEN=local\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	gitC(t, dir, "init", "-q", "-b", "main")
	gitC(t, dir, "config", "user.name", "Tester")
	gitC(t, dir, "config", "user.email", "tester@example.invalid")
	gitC(t, dir, "add", "README.md", ".gitignore")
	gitC(t, dir, "commit", "-q", "--no-gpg-sign", "-m", "init")
	return dir, strings.TrimSpace(gitC(t, dir, "rev-parse", "HEAD"))
}

// worktreeList is the paths git worktree list gives for repo, the user's
// first.
func worktreeList(t *testing.T, repo string) []string {
	t.Helper()
	var paths []string
	for l := range strings.SplitSeq(gitC(t, repo, "worktree", "list", "--porcelain"), "\n") {
		if p, ok := strings.CutPrefix(l, "worktree "); ok {
			paths = append(paths, p)
		}
	}
	return paths
}

// peerArgv runs the replay peer on a transcript under testdata.
func peerArgv(transcript string) []string {
	return []string{filepath.Join(binDir, "replaypeer"), "--transcript", testdataPath(transcript), "--speed", "0"}
}
