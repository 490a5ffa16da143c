package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// writing is a copy of a testdata transcript (in a temp dir) whose
// workspace entry writes path with content instead: the replayed
// provider's work.
func writing(t *testing.T, transcript, path, content string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "testdata", transcript))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	n := 0
	for l := range bytes.Lines(b) {
		if bytes.Contains(l, []byte(`"type":"workspace"`)) {
			e, _ := json.Marshal(map[string]any{"type": "workspace", "op": "write", "path": path, "content": content})
			l = append(e, '\n')
			n++
		}
		out.Write(l)
	}
	if n != 1 {
		t.Fatalf("%s has %d workspace entries, want 1", transcript, n)
	}
	dst := filepath.Join(t.TempDir(), filepath.Base(transcript))
	if err := os.WriteFile(dst, out.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return dst
}

// gitIn runs git in dir and returns its output, trimmed.
func gitIn(t *testing.T, dir string, args ...string) string {
	t.Helper()
	return strings.TrimSpace(gitC(t, dir, args...))
}

// gitC runs git in dir and returns its output as git printed it.
func gitC(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=T", "GIT_AUTHOR_EMAIL=t@x", "GIT_COMMITTER_NAME=T", "GIT_COMMITTER_EMAIL=t@x")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s in %s: %v\n%s", strings.Join(args, " "), dir, err, out)
	}
	return string(out)
}

// userRepo is a git repository on branch main with README.md committed.
func userRepo(t *testing.T) string {
	t.Helper()
	repo := filepath.Join(t.TempDir(), "app")
	gitInit(t, repo)
	gitIn(t, repo, "checkout", "-q", "-b", "main")
	gitIn(t, repo, "config", "user.name", "User")
	gitIn(t, repo, "config", "user.email", "user@example.com")
	if err := os.WriteFile(filepath.Join(repo, "README.md"), []byte("# App\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	gitIn(t, repo, "add", "README.md")
	gitIn(t, repo, "commit", "-q", "-m", "first")
	return repo
}

// tree is every file under dir (but .git) with its content's hash.
func tree(t *testing.T, dir string) map[string]string {
	t.Helper()
	files := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == ".git" {
			return filepath.SkipDir
		}
		if d.Type().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			files[strings.TrimPrefix(p, dir)] = fmt.Sprintf("%x", sha256.Sum256(b))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

var branchLine = regexp.MustCompile(`(?m)^\[(\w+) \w{8}\] ■ thread (thr_\w+):`)

// Three providers on worktrees of one repository, in parallel: two write
// files of their own, one changes the line another changed. Both clean
// merges land on main; the conflicting one exits 1 naming the path and
// changes nothing; the user's worktree is untouched until the merges.
func TestWorktreesThreeProvidersMergeArchiveDoctor(t *testing.T) {
	path := providerPath(t, map[string]string{
		"codex":    writing(t, "codex/simple.ndjson", "README.md", "# App, by codex\n"),
		"claude":   writing(t, "claude/simple.ndjson", "claude.txt", "claude was here\n"),
		"opencode": writing(t, "opencode/simple.ndjson", "README.md", "# App, by opencode\n"),
	})
	repo, data := userRepo(t), t.TempDir()
	os.Chmod(data, 0o700)
	before, statusBefore, headBefore := tree(t, repo), gitIn(t, repo, "status", "--porcelain"), gitIn(t, repo, "rev-parse", "HEAD")
	baton := func(args ...string) (string, string, int) {
		t.Helper()
		return batonPath(t, path, append([]string{"--data", data}, args...)...)
	}

	out, errOut, code := baton("run", "--worktree", "--branch", "try", "--cwd", repo, "--provider", "codex,claude,opencode", "Say hello")
	if code != exitOK {
		t.Fatalf("run: exit %d\n%s\n%s", code, out, errOut)
	}
	threads := map[string]string{}
	for _, m := range branchLine.FindAllStringSubmatch(out, -1) {
		threads[m[1]] = m[2]
	}
	for _, p := range []string{"codex", "claude", "opencode"} {
		if threads[p] == "" || !strings.Contains(out, "branch try-"+p+" from main") {
			t.Fatalf("run: no thread on branch try-%s in:\n%s", p, out)
		}
	}
	if got := tree(t, repo); fmt.Sprint(got) != fmt.Sprint(before) || gitIn(t, repo, "status", "--porcelain") != statusBefore ||
		gitIn(t, repo, "rev-parse", "HEAD") != headBefore {
		t.Fatalf("the user's worktree changed: %v, want %v", got, before)
	}

	// The list shows the branches; compare counts each branch's changes.
	out, _, _ = baton("threads")
	if !strings.Contains(out, "BRANCH") || !strings.Contains(out, "try-claude") {
		t.Errorf("threads: no branch column:\n%s", out)
	}
	out, errOut, code = baton("compare", "--json", threads["codex"], threads["claude"])
	if code != exitOK {
		t.Fatalf("compare: exit %d\n%s", code, errOut)
	}
	for i, l := range strings.Split(strings.TrimSpace(out), "\n") {
		c := jsonObject(t, l)
		if c["changesFrom"] != "branch" || c["files"] != 1.0 || c["runs"] != 1.0 || c["added"] != 1.0 {
			t.Errorf("compare line %d: %v; want 1 file, +1, from the branch", i+1, c)
		}
	}
	out, _, _ = baton("compare", threads["codex"], threads["claude"])
	if want := regexp.MustCompile(`(?m)^` + threads["claude"] + ` +claude +idle, last run completed +try-claude +1 +1 +\+1 +-0 +\d+ +\d+s$`); !want.MatchString(out) {
		t.Errorf("compare's table: no line for claude's thread like %s in:\n%s", want, out)
	}
	out, errOut, code = baton("diff", threads["codex"], threads["claude"])
	if code != exitOK || !strings.Contains(out, "+++ b/claude.txt") || !strings.Contains(out, "-# App, by codex") {
		t.Errorf("diff of two threads: exit %d\n%s\n%s", code, out, errOut)
	}

	// codex's fast-forwards main; claude's merges; opencode's conflicts.
	out, errOut, code = baton("merge", threads["codex"])
	if code != exitOK || !strings.Contains(out, "fast-forwarded main") {
		t.Fatalf("merge codex: exit %d\n%s\n%s", code, out, errOut)
	}
	// Local changes where main is checked out: refused, naming them.
	if err := os.WriteFile(filepath.Join(repo, "README.md"), []byte("# App, edited\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errOut, code = baton("merge", threads["claude"])
	if code != exitFailed || !strings.Contains(out, "local changes") || !strings.Contains(out, "    README.md") {
		t.Errorf("merge into a dirty worktree: exit %d, want 1 naming README.md\n%s\n%s", code, out, errOut)
	}
	gitIn(t, repo, "checkout", "--", "README.md")
	out, errOut, code = baton("merge", threads["claude"])
	if code != exitOK || !strings.Contains(out, "merged branch try-claude into main") {
		t.Fatalf("merge claude: exit %d\n%s\n%s", code, out, errOut)
	}
	if b, _ := os.ReadFile(filepath.Join(repo, "claude.txt")); string(b) != "claude was here\n" || gitIn(t, repo, "status", "--porcelain") != "" {
		t.Errorf("the user's worktree after the merges: claude.txt %q, status %q", b, gitIn(t, repo, "status", "--porcelain"))
	}
	refs, files := gitIn(t, repo, "for-each-ref"), tree(t, repo)
	out, errOut, code = baton("merge", threads["opencode"])
	if code != exitFailed || !strings.Contains(out, "conflict") || !strings.Contains(out, "    README.md") {
		t.Errorf("merge opencode: exit %d, want 1 naming README.md\n%s\n%s", code, out, errOut)
	}
	if gitIn(t, repo, "for-each-ref") != refs || fmt.Sprint(tree(t, repo)) != fmt.Sprint(files) {
		t.Errorf("a conflicting merge changed the repository")
	}
	out, _, code = baton("merge", "--json", threads["opencode"])
	if m := jsonObject(t, strings.TrimSpace(out)); code != exitFailed || m["status"] != "conflict" {
		t.Errorf("merge --json: exit %d, %v", code, m)
	}

	out, _, _ = baton("show", threads["opencode"])
	if !strings.Contains(out, "  branch try-opencode at ") || !strings.Contains(out, "  ✖ conflict: branch try-opencode and main") {
		t.Errorf("show: no branch or merge in:\n%s", out)
	}

	// Archive removes the worktree and keeps the branch; threads hides it.
	var w struct{ Path string }
	worktreeOf(t, baton, threads["claude"], &w)
	out, errOut, code = baton("archive", threads["claude"])
	if code != exitOK || !strings.Contains(out, "removed: its worktree "+w.Path) || !strings.Contains(out, "kept: its branch try-claude") {
		t.Errorf("archive: exit %d\n%s\n%s", code, out, errOut)
	}
	if isDir(w.Path) || gitIn(t, repo, "rev-parse", "--verify", "-q", "try-claude") == "" {
		t.Errorf("after archive: worktree %s there: %v; the branch must stay", w.Path, isDir(w.Path))
	}
	if out, _, _ = baton("threads", "-o", "ids"); strings.Contains(out, threads["claude"]) {
		t.Errorf("threads lists the archived thread:\n%s", out)
	}
	if out, _, _ = baton("threads", "-o", "ids", "--all"); !strings.Contains(out, threads["claude"]) {
		t.Errorf("threads --all leaves out the archived thread:\n%s", out)
	}

	// A removal that fails (the repository moved away meanwhile) is said,
	// exit 1.
	if err := os.Rename(repo, repo+".away"); err != nil {
		t.Fatal(err)
	}
	out, errOut, code = baton("archive", threads["codex"])
	if err := os.Rename(repo+".away", repo); err != nil {
		t.Fatal(err)
	}
	if code != exitFailed || !strings.Contains(out, "could not be removed") {
		t.Errorf("archive whose removal fails: exit %d, want 1\n%s\n%s", code, out, errOut)
	}

	// A worktree deleted by hand: doctor names it, --prune makes git forget it.
	worktreeOf(t, baton, threads["opencode"], &w)
	if err := os.RemoveAll(w.Path); err != nil {
		t.Fatal(err)
	}
	out, errOut, code = baton("doctor")
	if code != exitFailed || !strings.Contains(out, threads["opencode"]+" (branch try-opencode): "+w.Path) {
		t.Errorf("doctor: exit %d, want 1 naming %s\n%s\n%s", code, w.Path, out, errOut)
	}
	out, errOut, code = baton("doctor", "--prune")
	if code != exitOK || !strings.Contains(out, "pruned: git worktree prune in "+repo) || strings.Contains(gitIn(t, repo, "worktree", "list"), w.Path) {
		t.Errorf("doctor --prune: exit %d\n%s\n%s\n%s", code, out, errOut, gitIn(t, repo, "worktree", "list"))
	}
}

// worktreeOf reads a thread's worktree from baton show --json.
func worktreeOf(t *testing.T, baton func(...string) (string, string, int), thread string, w any) {
	t.Helper()
	out, errOut, code := baton("show", "--json", thread)
	if code != exitOK {
		t.Fatalf("show: exit %d\n%s", code, errOut)
	}
	var th struct{ Worktree json.RawMessage }
	if err := json.Unmarshal([]byte(out), &th); err != nil {
		t.Fatalf("show --json: %v\n%s", err, out)
	}
	if err := json.Unmarshal(th.Worktree, w); err != nil {
		t.Fatalf("show --json: worktree: %v\n%s", err, out)
	}
}

// What the host refuses a worktree thread for is said, exit 2, and
// nothing is written: not a repository, a base that does not resolve, a
// branch that exists (on one provider, and on one of several: none of
// them is made).
func TestWorktreeRefusals(t *testing.T) {
	path := providerPath(t, simpleTranscripts)
	repo := userRepo(t)
	gitIn(t, repo, "branch", "taken")
	gitIn(t, repo, "branch", "try-claude")
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"not a repository", []string{"--cwd", t.TempDir(), "--provider", "codex"}, "not in a git repository"},
		{"a base that does not resolve", []string{"--cwd", repo, "--base", "nope", "--provider", "codex"}, "nope"},
		{"a branch that exists", []string{"--cwd", repo, "--branch", "taken", "--provider", "codex"}, `branch "taken" already exists`},
		{"not a repository, several", []string{"--cwd", t.TempDir(), "--provider", "codex,claude"}, "not in a git repository"},
		{"a branch that exists, several", []string{"--cwd", repo, "--branch", "try", "--provider", "codex,claude"}, `branch "try-claude" already exists`},
	} {
		t.Run(c.name, func(t *testing.T) {
			data := t.TempDir()
			os.Chmod(data, 0o700)
			args := append(append([]string{"run", "--data", data, "--worktree"}, c.args...), "Say hello")
			out, errOut, code := batonPath(t, path, args...)
			if code != exitUsage || out != "" || !strings.Contains(errOut, c.want) || strings.Count(errOut, "\n") != 1 {
				t.Errorf("exit %d, want 2 saying %q\nstdout:\n%s\nstderr:\n%s", code, c.want, out, errOut)
			}
			assertNothingWritten(t, data)
		})
	}
	if got := gitIn(t, repo, "branch", "--list"); got != "  main\n  taken\n  try-claude" && got != "* main\n  taken\n  try-claude" {
		t.Errorf("branches after the refusals:\n%s", got)
	}
}

// --copy brings files a fresh worktree lacks; a --setup that fails fails
// the first run with its output, and the exit is 1.
func TestWorktreeCopyAndSetup(t *testing.T) {
	path := providerPath(t, map[string]string{"codex": "codex/simple.ndjson"})
	repo := userRepo(t)
	if err := os.WriteFile(filepath.Join(repo, ".env"), []byte("SECRET=1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := batonPath(t, path, "run", "--worktree", "--cwd", repo, "--provider", "codex", "--copy", ".env",
		"--setup", "test -f .env && echo set up && exit 3", "Say hello")
	if code != exitFailed {
		t.Fatalf("exit %d, want 1\n%s\n%s", code, out, errOut)
	}
	for _, want := range []string{"⎇ worktree ready: 1 file copied in; setup `test -f .env && echo set up && exit 3` exited 3",
		"✖ run 1 failed: the worktree's setup", "set up"} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in:\n%s", want, out)
		}
	}
}
