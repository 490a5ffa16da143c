package worktree

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// checkpoint commits the worktree's files as they are now to a parentless
// commit, as the checkpoint package does, and returns it: what a run
// hands CommitRun.
func checkpoint(t testing.TB, dir string) string {
	t.Helper()
	gitT(t, dir, "add", "-A")
	tree := gitT(t, dir, "write-tree")
	gitT(t, dir, "reset", "-q") // the thread's index is CommitRun's to set
	return gitT(t, dir, "commit-tree", "-m", "baton checkpoint", tree)
}

// Each run that changed files is a commit on the thread's branch, parent
// the previous run's commit, tree the run's checkpoint; the worktree's git
// status is clean after, its files untouched.
func TestCommitRunChain(t *testing.T) {
	root := newRepo(t, map[string]string{"a.txt": "a\n", "keep.txt": "keep\n"})
	path, base := thread(t, root, "thread")
	before := userState(t, root)

	write(t, path, map[string]string{"a.txt": "a, run 1\n", "new.txt": "new\n"})
	run1, err := CommitRun(t.Context(), Commit{
		Dir: path, Branch: "thread", Parent: base, Tree: checkpoint(t, path),
		Message: "Run 1\n\nBody.\n\nBaton-Run: run_1", Trailer: "Baton-Run: run_1", At: at,
	})
	if err != nil || run1 == "" {
		t.Fatalf("CommitRun run 1 = %q, %v", run1, err)
	}
	write(t, path, map[string]string{"a.txt": "a, run 2\n"})
	later := at.Add(time.Hour)
	run2, err := CommitRun(t.Context(), Commit{
		Dir: path, Branch: "thread", Parent: run1, Tree: checkpoint(t, path),
		Message: "Run 2\n\nBaton-Run: run_2\n", Author: "Agent Smith <agent@example.com>",
		Trailer: "Baton-Run: run_2", At: later,
	})
	if err != nil || run2 == "" {
		t.Fatalf("CommitRun run 2 = %q, %v", run2, err)
	}

	log := gitT(t, root, "log", "--format=%H %P|%an <%ae>|%cn|%ad|%B", "--date=raw", base+"..thread")
	want := strings.Join([]string{
		run2 + " " + run1 + "|Agent Smith <agent@example.com>|Agent Smith|" + unix(later) + "|Run 2\n\nBaton-Run: run_2\n",
		run1 + " " + base + "|Repo User <repo@example.com>|Repo User|" + unix(at) + "|Run 1\n\nBody.\n\nBaton-Run: run_1",
	}, "\n")
	if diff := cmp.Diff(want, log); diff != "" {
		t.Errorf("the thread's history (-want +got):\n%s", diff)
	}
	if got := gitT(t, root, "show", "thread:a.txt"); got != "a, run 2" {
		t.Errorf("a.txt at the branch head: %q", got)
	}
	if s := status(t, path); s != "" {
		t.Errorf("git status in the thread's worktree:\n%s\nwant clean", s)
	}
	if diff := cmp.Diff(before, userState(t, root)); diff != "" {
		t.Errorf("the user's worktree changed (-before +after):\n%s", diff)
	}
}

func unix(t time.Time) string { return strconv.FormatInt(t.Unix(), 10) + " +0000" }

// A run that changed nothing makes no commit and writes nothing.
func TestCommitRunNoChange(t *testing.T) {
	root := newRepo(t, map[string]string{"a.txt": "a\n"})
	path, base := thread(t, root, "thread")
	cp := checkpoint(t, path)
	before := refs(t, root)
	got, err := CommitRun(t.Context(), Commit{Dir: path, Branch: "thread", Parent: base, Tree: cp, Message: "Run", Trailer: "Baton-Run: r", At: at})
	if err != nil || got != "" {
		t.Fatalf("CommitRun of an unchanged tree = %q, %v; want no commit", got, err)
	}
	if after := refs(t, root); after != before {
		t.Errorf("refs changed:\n%s\nwant\n%s", after, before)
	}
}

// CommitRun called again (after a crash past the branch's move) returns the
// commit it made; a branch moved by anything else is refused.
func TestCommitRunReplayAndRefusals(t *testing.T) {
	root := newRepo(t, map[string]string{"a.txt": "a\n"})
	path, base := thread(t, root, "thread")
	write(t, path, map[string]string{"a.txt": "changed\n"})
	c := Commit{Dir: path, Branch: "thread", Parent: base, Tree: checkpoint(t, path), Message: "Run\n\nBaton-Run: run_1\n", Trailer: "Baton-Run: run_1", At: at}
	first, err := CommitRun(t.Context(), c)
	if err != nil {
		t.Fatal(err)
	}
	gitT(t, path, "read-tree", base) // as if it crashed before resetting the index
	again, err := CommitRun(t.Context(), c)
	if err != nil || again != first {
		t.Fatalf("CommitRun again = %q, %v; want the first call's %s", again, err, first)
	}
	if s := status(t, path); s != "" {
		t.Errorf("git status after the replay:\n%s\nwant clean (the index reset again)", s)
	}

	other := c
	other.Trailer, other.Message = "Baton-Run: run_2", "Run\n\nBaton-Run: run_2\n"
	if _, err := CommitRun(t.Context(), other); err == nil || !strings.Contains(err.Error(), "branch thread is at "+first[:12]+", not at the parent "+base[:12]) {
		t.Errorf("another run on the same parent: %v, want a refusal naming both commits", err)
	}
	write(t, path, map[string]string{"a.txt": "changed again\n"})
	sameTrailer := c
	sameTrailer.Tree = checkpoint(t, path)
	if _, err := CommitRun(t.Context(), sameTrailer); err == nil || !strings.Contains(err.Error(), "not at the parent") {
		t.Errorf("the same run with another tree: %v, want a refusal", err)
	}
	missing := c
	missing.Branch = "gone"
	if _, err := CommitRun(t.Context(), missing); err == nil || !strings.Contains(err.Error(), "refs/heads/gone^{commit} names nothing") {
		t.Errorf("a branch that does not exist: %v", err)
	}
	bad := c
	bad.Parent = "nope"
	if _, err := CommitRun(t.Context(), bad); err == nil || !strings.Contains(err.Error(), "nope^{tree} names nothing") {
		t.Errorf("a parent that does not exist: %v", err)
	}
	if got := gitT(t, root, "rev-parse", "thread"); got != first {
		t.Errorf("refused calls moved the branch to %s", got)
	}
}

// A rollback moves the branch back, keeps the old head under saveRef,
// and resets the worktree's index, not its files; called again it does
// nothing more.
func TestMoveBranch(t *testing.T) {
	root := newRepo(t, map[string]string{"a.txt": "a\n"})
	path, base := thread(t, root, "thread")
	write(t, path, map[string]string{"a.txt": "run 1\n"})
	run1, err := CommitRun(t.Context(), Commit{Dir: path, Branch: "thread", Parent: base, Tree: checkpoint(t, path), Message: "1", Trailer: "1", At: at})
	if err != nil {
		t.Fatal(err)
	}
	write(t, path, map[string]string{"a.txt": "run 2\n"})
	run2, err := CommitRun(t.Context(), Commit{Dir: path, Branch: "thread", Parent: run1, Tree: checkpoint(t, path), Message: "2", Trailer: "2", At: at})
	if err != nil {
		t.Fatal(err)
	}
	before := userState(t, root)

	for range 2 { // the second call is a replay
		if err := MoveBranch(t.Context(), path, "thread", run1, run2, "refs/baton/rolled-back/1"); err != nil {
			t.Fatal(err)
		}
	}
	if got := gitT(t, root, "rev-parse", "thread", "refs/baton/rolled-back/1"); got != run1+"\n"+run2 {
		t.Errorf("branch and saved ref:\n%s\nwant %s and %s", got, run1, run2)
	}
	if got := read(t, path, "a.txt"); got != "run 2\n" {
		t.Errorf("a.txt is %q: MoveBranch touched the files", got)
	}
	if got := gitT(t, path, "diff", "--cached", "--name-only", "HEAD"); got != "" {
		t.Errorf("the index differs from the new head in %q", got)
	}
	if got := status(t, path); got != "M a.txt" {
		t.Errorf("git status %q, want a.txt modified (the run rolled back, its file not yet restored)", got)
	}
	if err := MoveBranch(t.Context(), path, "thread", base, run2, ""); err == nil || !strings.Contains(err.Error(), "it is at "+run1[:12]+", neither at "+run2[:12]+" nor at "+base[:12]) {
		t.Errorf("a branch elsewhere: %v, want a refusal naming the commits", err)
	}
	if diff := cmp.Diff(before, userState(t, root)); diff != "" {
		t.Errorf("the user's worktree changed (-before +after):\n%s", diff)
	}
}

// With no author given and none in git config, Baton signs the commit.
func TestCommitRunDefaultAuthor(t *testing.T) {
	root := newRepo(t, map[string]string{"a.txt": "a\n"})
	path, base := thread(t, root, "thread")
	gitT(t, root, "config", "--unset", "user.name")
	write(t, path, map[string]string{"a.txt": "changed\n"})
	c, err := CommitRun(t.Context(), Commit{Dir: path, Branch: "thread", Parent: base, Tree: checkpoint(t, path), Message: "Run", Trailer: "Run", At: at})
	if err != nil {
		t.Fatal(err)
	}
	if got := gitT(t, root, "log", "-1", "--format=%an <%ae>|%cn <%ce>", c); got != "Baton <baton@localhost>|Baton <baton@localhost>" {
		t.Errorf("author and committer %q, want Baton's", got)
	}
}
