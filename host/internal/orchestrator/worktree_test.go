package orchestrator_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/baton-run/baton/host/internal/domain"
)

// editedTranscript is acp/multi_turn with the file its second turn writes
// changed to path and content: the same conversation, another change.
func (e *env) editedTranscript(path, content string) domain.ProviderCommand {
	e.t.Helper()
	src, err := os.ReadFile(filepath.Join(root, "testdata", "acp", "multi_turn.ndjson"))
	if err != nil {
		e.t.Fatal(err)
	}
	var out []string
	edited := 0
	for _, line := range strings.Split(strings.TrimRight(string(src), "\n"), "\n") {
		var op struct {
			Type string `json:"type"`
			Op   string `json:"op"`
			Path string `json:"path"`
		}
		if json.Unmarshal([]byte(line), &op) == nil && op.Type == "workspace" && op.Path == "notes.txt" {
			b, _ := json.Marshal(map[string]string{"type": "workspace", "op": "write", "path": path, "content": content})
			line = string(b)
			edited++
		}
		out = append(out, line)
	}
	if edited != 1 {
		e.t.Fatalf("acp/multi_turn writes notes.txt %d times, not once", edited)
	}
	dst := filepath.Join(e.t.TempDir(), "multi_turn.ndjson")
	if err := os.WriteFile(dst, []byte(strings.Join(out, "\n")+"\n"), 0o644); err != nil {
		e.t.Fatal(err)
	}
	abs, err := filepath.Abs(filepath.Join(root, "testdata"))
	if err != nil {
		e.t.Fatal(err)
	}
	rel, err := filepath.Rel(abs, dst)
	if err != nil {
		e.t.Fatal(err)
	}
	return e.peer("acp", rel)
}

// worktreeThread creates a thread on a worktree of the workspace.
func (e *env) worktreeThread(name string, cmd domain.ProviderCommand, spec domain.WorktreeSpec) string {
	e.t.Helper()
	rc := e.dispatch(domain.Command{ID: "create-" + name, Payload: domain.CreateThread{Provider: "acp", Cwd: e.ws,
		ProviderCommand: cmd, ApprovalPolicy: domain.ApproveAccept, Worktree: &spec}})
	return rc.ThreadID
}

// userTree is what a thread must never touch of the user's worktree: its
// files (with .git's index and HEAD) by hash, and git status.
func (e *env) userTree() map[string]string {
	e.t.Helper()
	out := map[string]string{"status": e.git("status", "--porcelain", "--untracked-files=all")}
	err := filepath.WalkDir(e.ws, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(e.ws, p)
		if d.IsDir() {
			if rel == ".git" {
				return filepath.SkipDir
			}
			return nil
		}
		b, err := os.ReadFile(p)
		sum := sha256.Sum256(b)
		out[rel] = hex.EncodeToString(sum[:])
		return err
	})
	if err != nil {
		e.t.Fatal(err)
	}
	for _, f := range []string{".git/index", ".git/HEAD"} {
		b, err := os.ReadFile(filepath.Join(e.ws, f))
		if err != nil {
			e.t.Fatal(err)
		}
		sum := sha256.Sum256(b)
		out[f] = hex.EncodeToString(sum[:])
	}
	return out
}

// refs is every branch and the commit it is at.
func (e *env) refs() string {
	return e.git("for-each-ref", "--format=%(refname) %(objectname)", "refs/heads/")
}

// merge merges a thread's branch and waits for how it came out.
func (e *env) merge(threadID, id, into string) domain.Merge {
	e.t.Helper()
	e.dispatch(domain.Command{ID: "merge-" + id, ThreadID: threadID, Payload: domain.MergeThread{MergeID: id, Into: into}})
	th := e.waitFor(threadID, "merge "+id, func(t domain.Thread) bool {
		return len(t.Merges) > 0 && t.Merges[len(t.Merges)-1].ID == id && t.Merges[len(t.Merges)-1].Status != domain.MergePending
	})
	return th.Merges[len(th.Merges)-1]
}

// Three threads on worktrees of one repository run at once, each on its
// own branch; the one run of each that changed files is a commit on it,
// with the user's message and trailers. Two merge cleanly into a branch;
// the third changes the line the first did, and its merge names the path
// and changes nothing. The user's worktree is byte for byte as it was.
func TestWorktreeThreadsInParallel(t *testing.T) {
	e := newEnv(t)
	e.gitWorkspace()
	e.git("branch", "integration")
	base := strings.TrimSpace(e.git("rev-parse", "HEAD"))
	before := e.userTree()
	changes := []struct{ name, path, content string }{
		{"alpha", "README.md", "# Alpha workspace\n\nA throwaway repository for recording transcripts.\n"},
		{"beta", "beta.txt", "beta\n"},
		{"gamma", "README.md", "# Gamma workspace\n\nA throwaway repository for recording transcripts.\n"},
	}
	var threads []string
	for _, c := range changes {
		threads = append(threads, e.worktreeThread(c.name, e.editedTranscript(c.path, c.content), domain.WorktreeSpec{}))
	}
	msgs := messages(t, "acp/multi_turn.messages")
	for i, id := range threads {
		for j, m := range msgs {
			e.dispatch(domain.Command{ID: fmt.Sprintf("send-%d-%d", i, j), ThreadID: id,
				Payload: domain.DispatchMessage{Text: m, Mode: domain.ModeQueueAfterActive}})
		}
	}
	heads := map[string]string{}
	for i, id := range threads {
		th := e.waitFor(id, "three runs", allRunsEnded(3))
		w := th.Worktree
		if w == nil || w.Status != domain.WorktreeStatusReady || th.Cwd != w.Path || w.Repository != e.ws || w.Base != base ||
			w.BaseBranch != "master" && w.BaseBranch != "main" || w.Branch != domain.DefaultBranch(id) {
			t.Fatalf("thread %d's worktree: cwd %s, %+v", i, th.Cwd, w)
		}
		var commits []string
		for _, r := range th.Runs {
			if r.Status != domain.RunStatusCompleted {
				t.Fatalf("thread %d run %d: %s %+v", i, r.Ordinal, r.Status, r.Failure)
			}
			commits = append(commits, r.Commit)
		}
		// Only the second run changed files: one commit, on the base.
		if commits[0] != "" || commits[1] == "" || commits[2] != "" || w.Head != commits[1] {
			t.Fatalf("thread %d's run commits %q, head %s", i, commits, w.Head)
		}
		heads[changes[i].name] = commits[1]
		if got := strings.TrimSpace(e.git("rev-parse", w.Branch)); got != commits[1] {
			t.Errorf("thread %d's branch is at %s, want %s", i, got, commits[1])
		}
		if got := strings.TrimSpace(e.git("rev-parse", commits[1]+"^")); got != base {
			t.Errorf("thread %d's commit's parent is %s, want the base %s", i, got, base)
		}
		msg := e.git("log", "-1", "--format=%B", commits[1])
		// The ACP plugin writes notes.txt for the agent (fs/write_text_file);
		// the transcript's workspace step writes the thread's own change.
		files := []string{"A " + changes[i].path, "A notes.txt"}
		if changes[i].path == "README.md" {
			files[0] = "M README.md"
		}
		slices.SortFunc(files, func(a, b string) int { return strings.Compare(a[2:], b[2:]) })
		want := domain.Subject(msgs[1]) + "\n\n" + strings.Join(files, "\n") + "\n\nBaton-Thread: " + id + "\nBaton-Run: " + th.Runs[1].ID +
			"\nBaton-Provider: acp\n\n"
		if msg != want {
			t.Errorf("thread %d's commit message:\n%q\nwant\n%q", i, msg, want)
		}
		if got := e.git("show", commits[1]+":"+changes[i].path); got != changes[i].content {
			t.Errorf("thread %d's commit holds %q", i, got)
		}
		// The thread's worktree is clean against its branch.
		if st := gitIn(t, w.Path, "status", "--porcelain"); st != "" {
			t.Errorf("thread %d's worktree is not clean after its runs:\n%s", i, st)
		}
	}
	if after := e.userTree(); !maps.Equal(after, before) {
		t.Fatalf("the threads touched the user's worktree:\nbefore %v\nafter  %v", before, after)
	}

	// Alpha fast-forwards the integration branch; beta merges on it.
	if m := e.merge(threads[0], "m-alpha", "integration"); m.Status != domain.MergeFastForward || m.Commit != heads["alpha"] ||
		m.From != base || !slices.Equal(m.Commits, []string{heads["alpha"]}) {
		t.Fatalf("alpha's merge: %+v", m)
	}
	m := e.merge(threads[1], "m-beta", "integration")
	if m.Status != domain.MergeMerged || m.From != heads["alpha"] || !slices.Equal(m.Commits, []string{heads["beta"]}) {
		t.Fatalf("beta's merge: %+v", m)
	}
	if parents := strings.Fields(e.git("rev-list", "--parents", "-n1", m.Commit)); !slices.Equal(parents, []string{m.Commit, heads["alpha"], heads["beta"]}) {
		t.Fatalf("beta's merge commit's parents: %v", parents)
	}
	graph := strings.Split(strings.TrimSuffix(e.git("log", "--format=%H %P", "integration"), "\n"), "\n")
	wantGraph := []string{m.Commit + " " + heads["alpha"] + " " + heads["beta"], heads["alpha"] + " " + base, heads["beta"] + " " + base, base + " "}
	slices.Sort(graph)
	slices.Sort(wantGraph)
	if !slices.Equal(graph, wantGraph) {
		t.Fatalf("integration's history:\n%s\nwant\n%s", strings.Join(graph, "\n"), strings.Join(wantGraph, "\n"))
	}
	// Gamma conflicts with alpha: refused, naming the path, nothing moved.
	refs, wt := e.refs(), e.userTree()
	gammaTree := map[string]string{}
	th, _ := e.host.Thread(threads[2])
	for _, f := range []string{"README.md", ".git"} {
		b, _ := os.ReadFile(filepath.Join(th.Worktree.Path, f))
		gammaTree[f] = string(b)
	}
	if m := e.merge(threads[2], "m-gamma", "integration"); m.Status != domain.MergeConflict || !slices.Equal(m.Conflicts, []string{"README.md"}) ||
		m.Commit != "" {
		t.Fatalf("gamma's merge: %+v", m)
	}
	if got := e.refs(); got != refs {
		t.Fatalf("a conflicting merge moved branches:\n%s\nwas\n%s", got, refs)
	}
	if got := e.userTree(); !maps.Equal(got, wt) || !maps.Equal(got, before) {
		t.Fatalf("a conflicting merge touched the user's worktree")
	}
	for f, want := range gammaTree {
		if b, _ := os.ReadFile(filepath.Join(th.Worktree.Path, f)); string(b) != want {
			t.Fatalf("a conflicting merge changed gamma's %s", f)
		}
	}
}

func gitIn(t *testing.T, dir string, args ...string) string {
	t.Helper()
	e := &env{t: t, ws: dir}
	return e.git(args...)
}

// A worktree thread is refused before anything is written when its
// repository cannot give it one: not a repository, a base that does not
// resolve, a branch that exists.
func TestWorktreeThreadRefusals(t *testing.T) {
	e := newEnv(t)
	plain := t.TempDir()
	e.gitWorkspace()
	e.git("branch", "taken")
	cmd := e.peer("acp", "acp/simple.ndjson")
	for _, tc := range []struct {
		name, cwd string
		spec      domain.WorktreeSpec
		want      string
	}{
		{"not a repository", plain, domain.WorktreeSpec{}, plain + " is not in a git repository"},
		{"bad base", e.ws, domain.WorktreeSpec{Base: "nope"}, `"nope"`},
		{"branch exists", e.ws, domain.WorktreeSpec{Branch: "taken"}, `"taken" already exists`},
		{"bad branch", e.ws, domain.WorktreeSpec{Branch: "a..b"}, `"a..b"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := tc.spec
			_, err := e.host.Dispatch(t.Context(), domain.Command{ID: "c-" + tc.name, Payload: domain.CreateThread{Provider: "acp",
				Cwd: tc.cwd, ProviderCommand: cmd, Worktree: &spec}})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error saying %s", err, tc.want)
			}
		})
	}
	if list, err := e.host.Threads("", 10); err != nil || len(list) != 0 {
		t.Fatalf("threads after refusals: %+v %v", list, err)
	}
	if _, err := os.Stat(e.host.WorktreesDir()); !os.IsNotExist(err) {
		t.Fatalf("a refused thread made the worktree directory: %v", err)
	}
	if got := e.git("branch", "--format=%(refname:short)"); got != "master\ntaken\n" && got != "main\ntaken\n" {
		t.Fatalf("branches after refusals:\n%s", got)
	}
}

// --copy brings files a fresh worktree lacks; --setup runs before the
// first run, and one that fails fails that run with its output.
func TestWorktreeCopyAndSetup(t *testing.T) {
	e := newEnv(t)
	e.gitWorkspace()
	e.write(".env", "KEY=1\n")
	e.write(".gitignore", "*.log\n.env\n")
	e.git("commit", "-qam", "ignore .env", "--author", "t <t@example.invalid>")
	before := e.userTree()
	ok := e.worktreeThread("ok", e.peer("acp", "acp/simple.ndjson"), domain.WorktreeSpec{Copy: []string{".env", "*.log"},
		Setup: "cat .env > setup.out; echo prepared"})
	fail := e.worktreeThread("fail", e.peer("acp", "acp/simple.ndjson"), domain.WorktreeSpec{Setup: "echo no deps >&2; exit 3"})
	for _, id := range []string{ok, fail} {
		e.dispatch(domain.Command{ID: "send-" + id, ThreadID: id, Payload: domain.DispatchMessage{Text: "Say hello."}})
	}
	th := e.waitFor(ok, "run 1", allRunsEnded(1))
	w := th.Worktree
	if !slices.Equal(w.Copied, []string{".env", "build.log"}) || w.SetupResult == nil || w.SetupResult.ExitCode != 0 ||
		w.SetupResult.Output != "prepared\n" || th.Runs[0].Status != domain.RunStatusCompleted {
		t.Fatalf("copy and setup: %+v, run %s %+v", w, th.Runs[0].Status, th.Runs[0].Failure)
	}
	if b, err := os.ReadFile(filepath.Join(w.Path, "setup.out")); err != nil || string(b) != "KEY=1\n" {
		t.Fatalf("the setup did not see the copied .env: %q %v", b, err)
	}
	th = e.waitFor(fail, "run 1", allRunsEnded(1))
	r := th.Runs[0]
	if r.Status != domain.RunStatusFailed || r.Failure == nil || r.Failure.Code != domain.SetupFailure ||
		r.Failure.Message != "the worktree's setup \"echo no deps >&2; exit 3\" exited 3:\nno deps" {
		t.Fatalf("a failing setup's run: %s %+v", r.Status, r.Failure)
	}
	// The next run goes on in the worktree as it is.
	e.dispatch(domain.Command{ID: "send-again", ThreadID: fail, Payload: domain.DispatchMessage{Text: "Say hello."}})
	if th := e.waitFor(fail, "run 2", allRunsEnded(2)); th.Runs[1].Status != domain.RunStatusCompleted {
		t.Fatalf("run 2 after a failed setup: %s %+v", th.Runs[1].Status, th.Runs[1].Failure)
	}
	if after := e.userTree(); !maps.Equal(after, before) {
		t.Fatalf("the threads touched the user's worktree")
	}
}

// Archiving removes the worktree and keeps the branch (or deletes it when
// asked); a worktree removed by hand is named at the thread's next run.
func TestWorktreeArchiveAndRemovedByHand(t *testing.T) {
	e := newEnv(t)
	e.gitWorkspace()
	keep := e.worktreeThread("keep", e.peer("acp", "acp/simple.ndjson"), domain.WorktreeSpec{Branch: "feature/keep"})
	drop := e.worktreeThread("drop", e.peer("acp", "acp/simple.ndjson"), domain.WorktreeSpec{})
	gone := e.worktreeThread("gone", e.peer("acp", "acp/simple.ndjson"), domain.WorktreeSpec{})
	var paths []string
	for _, id := range []string{keep, drop, gone} {
		th := e.waitFor(id, "its worktree", func(t domain.Thread) bool { return t.Worktree.Status == domain.WorktreeStatusReady })
		paths = append(paths, th.Worktree.Path)
	}
	e.dispatch(domain.Command{ID: "a-keep", ThreadID: keep, Payload: domain.ArchiveThread{}})
	e.dispatch(domain.Command{ID: "a-drop", ThreadID: drop, Payload: domain.ArchiveThread{DeleteBranch: true}})
	for _, id := range []string{keep, drop} {
		th := e.waitFor(id, "its worktree removed", func(t domain.Thread) bool { return t.Worktree.Status == domain.WorktreeStatusRemoved })
		if !th.Archived {
			t.Fatalf("thread %s is not archived", id)
		}
	}
	for _, p := range paths[:2] {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Fatalf("archived worktree %s is still there: %v", p, err)
		}
	}
	branches := e.git("branch", "--format=%(refname:short)")
	if !strings.Contains(branches, "feature/keep\n") || strings.Contains(branches, domain.DefaultBranch(drop)) {
		t.Fatalf("branches after archiving:\n%s", branches)
	}
	if list := e.git("worktree", "list", "--porcelain"); strings.Contains(list, paths[0]) || strings.Contains(list, paths[1]) {
		t.Fatalf("git still lists an archived worktree:\n%s", list)
	}
	if _, err := e.host.Dispatch(t.Context(), domain.Command{ID: "late", ThreadID: keep,
		Payload: domain.DispatchMessage{Text: "more"}}); err == nil || !strings.Contains(err.Error(), "archived") {
		t.Fatalf("a message to an archived thread: %v", err)
	}
	// Removed by hand: the next run says so, naming the way out.
	if err := os.RemoveAll(paths[2]); err != nil {
		t.Fatal(err)
	}
	e.dispatch(domain.Command{ID: "send-gone", ThreadID: gone, Payload: domain.DispatchMessage{Text: "Say hello."}})
	th := e.waitFor(gone, "run 1", allRunsEnded(1))
	if r := th.Runs[0]; r.Status != domain.RunStatusFailed || r.Failure == nil ||
		!strings.Contains(r.Failure.Message, "the thread's worktree "+paths[2]+" is gone") ||
		!strings.Contains(r.Failure.Message, "baton archive "+gone) {
		t.Fatalf("a run in a worktree removed by hand: %s %+v", r.Status, r.Failure)
	}
}

// A rollback moves the branch back with the files; the next run commits
// on the run it went back to, and the dropped commit stays reachable.
func TestWorktreeRollbackMovesTheBranch(t *testing.T) {
	e := newEnv(t)
	e.gitWorkspace()
	id := e.worktreeThread("rb", e.peer("acp", "acp/thread_rollback.ndjson"), domain.WorktreeSpec{})
	th := e.play(id, "acp/thread_rollback.steps.json")
	w := th.Worktree
	var kept []string
	for _, r := range th.Runs {
		if r.Status == domain.RunStatusCompleted && r.Commit != "" {
			kept = append(kept, r.Commit)
		}
	}
	if len(kept) == 0 || w.Head != kept[len(kept)-1] {
		t.Fatalf("the thread's branch is at %s; its completed runs' commits are %v", w.Head, kept)
	}
	history := strings.Fields(e.git("rev-list", "--reverse", w.Base+".."+w.Branch))
	if !slices.Equal(history, kept) {
		t.Fatalf("branch %s is %v; the completed, kept runs' commits are %v", w.Branch, history, kept)
	}
	rb := th.Rollbacks[0]
	saved := strings.TrimSpace(e.git("for-each-ref", "--format=%(objectname)", rb.SavedRef+"-branch"))
	var dropped []string
	for _, r := range th.Runs {
		if r.Status == domain.RunStatusRolledBack && r.Commit != "" {
			dropped = append(dropped, r.Commit)
		}
	}
	if len(dropped) == 0 || saved != dropped[len(dropped)-1] {
		t.Fatalf("the branch before the rollback is kept at %q; the rolled-back runs' commits are %v", saved, dropped)
	}
	if st := gitIn(t, w.Path, "status", "--porcelain"); st != "" {
		t.Fatalf("the thread's worktree is not clean against its branch:\n%s", st)
	}
}
