package worktree

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// mergeSetup makes a repository whose main is checked out in the user's
// worktree, and a thread worktree on branch thread with one run committed
// that writes files. It returns root, the thread's path, the base and the
// thread's head.
func mergeSetup(t *testing.T, files map[string]string) (root, path, base, head string) {
	t.Helper()
	root = newRepo(t, map[string]string{"a.txt": "a\n", "b.txt": "b\n"})
	path, base = thread(t, root, "thread")
	write(t, path, files)
	head, err := CommitRun(t.Context(), Commit{Dir: path, Branch: "thread", Parent: base, Tree: checkpoint(t, path), Message: "Run 1", Trailer: "Run 1", At: at})
	if err != nil {
		t.Fatal(err)
	}
	return root, path, base, head
}

func merge(t *testing.T, root, branch, into string, squash bool) MergeResult {
	t.Helper()
	res, err := Merge(t.Context(), root, branch, into, squash, "Merge "+branch, "", at)
	if err != nil {
		t.Fatalf("Merge %s into %s: %v", branch, into, err)
	}
	return res
}

// Two branches that touched different files merge into a commit with both
// as parents; main, checked out in the user's clean worktree, is updated
// there as git merge would, leaving git status empty.
func TestMergeClean(t *testing.T) {
	root, _, base, head := mergeSetup(t, map[string]string{"b.txt": "b from the thread\n"})
	mainHead := commitFiles(t, root, "user's work", map[string]string{"a.txt": "a from the user\n"})
	later := at.Add(time.Hour)
	if err := os.Chtimes(filepath.Join(root, "b.txt"), later, later); err != nil { // touched, not changed
		t.Fatal(err)
	}

	res := merge(t, root, "thread", "main", false)
	want := MergeResult{Status: Merged, Into: "main", From: mainHead, Commit: res.Commit, Commits: []string{head}, Worktree: root}
	if diff := cmp.Diff(want, res); diff != "" || res.Commit == "" {
		t.Errorf("merge (-want +got):\n%s", diff)
	}
	if got := gitT(t, root, "log", "--format=%H %P %s|%an", "-1", "main"); got != res.Commit+" "+mainHead+" "+head+" Merge thread|Repo User" {
		t.Errorf("main's head: %s; want the merge of %s and %s", got, mainHead, head)
	}
	if got := read(t, root, "a.txt") + read(t, root, "b.txt"); got != "a from the user\nb from the thread\n" {
		t.Errorf("the user's worktree has %q, want both sides", got)
	}
	if s := status(t, root); s != "" {
		t.Errorf("git status in the user's worktree:\n%s\nwant clean", s)
	}
	_ = base

	again := merge(t, root, "thread", "main", false)
	if diff := cmp.Diff(MergeResult{Status: UpToDate, Into: "main", From: res.Commit}, again); diff != "" {
		t.Errorf("merging again (-want +got):\n%s", diff)
	}
}

// A branch ahead of the one merged into fast-forwards it, files and all.
func TestMergeFastForward(t *testing.T) {
	root, _, base, head := mergeSetup(t, map[string]string{"c.txt": "new\n"})
	res := merge(t, root, "thread", "main", false)
	want := MergeResult{Status: FastForward, Into: "main", From: base, Commit: head, Commits: []string{head}, Worktree: root}
	if diff := cmp.Diff(want, res); diff != "" {
		t.Errorf("merge (-want +got):\n%s", diff)
	}
	if got := read(t, root, "c.txt"); got != "new\n" {
		t.Errorf("c.txt in the user's worktree: %q", got)
	}
	if s := status(t, root); s != "" {
		t.Errorf("git status in the user's worktree:\n%s\nwant clean", s)
	}
}

// A squash makes one commit with one parent even where a fast-forward
// would do; a branch checked out nowhere just moves.
func TestMergeSquash(t *testing.T) {
	root, _, base, head := mergeSetup(t, map[string]string{"c.txt": "new\n"})
	gitT(t, root, "branch", "release", base)
	before := userState(t, root)
	res := merge(t, root, "thread", "release", true)
	want := MergeResult{Status: Merged, Into: "release", From: base, Commit: res.Commit, Commits: []string{head}}
	if diff := cmp.Diff(want, res); diff != "" {
		t.Errorf("merge (-want +got):\n%s", diff)
	}
	if got := gitT(t, root, "log", "--format=%P %T", "-1", "release"); got != base+" "+gitT(t, root, "rev-parse", head+"^{tree}") {
		t.Errorf("release's head has parents and tree %q, want the base alone and the thread's tree", got)
	}
	if diff := cmp.Diff(before, userState(t, root)); diff != "" {
		t.Errorf("the user's worktree changed (-before +after):\n%s", diff)
	}
}

// A conflict names every conflicted path and changes nothing: no ref, no
// file.
func TestMergeConflict(t *testing.T) {
	root, path, base, head := mergeSetup(t, map[string]string{"a.txt": "a from the thread\n", "b.txt": "b from the thread\n", "c.txt": "c\n"})
	commitFiles(t, root, "user's work", map[string]string{"a.txt": "a from the user\n", "b.txt": "b from the user\n"})
	refsBefore, rootBefore, threadBefore := refs(t, root), userState(t, root), snapshot(t, path)

	res := merge(t, root, "thread", "main", false)
	want := MergeResult{Status: Conflict, Into: "main", From: gitT(t, root, "rev-parse", "main"), Commits: []string{head}, Conflicts: []string{"a.txt", "b.txt"}}
	if diff := cmp.Diff(want, res); diff != "" {
		t.Errorf("merge (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(refsBefore, refs(t, root)); diff != "" {
		t.Errorf("refs changed (-before +after):\n%s", diff)
	}
	if diff := cmp.Diff(rootBefore, userState(t, root)); diff != "" {
		t.Errorf("the user's worktree changed (-before +after):\n%s", diff)
	}
	if diff := cmp.Diff(threadBefore, snapshot(t, path)); diff != "" {
		t.Errorf("the thread's worktree changed (-before +after):\n%s", diff)
	}
	_ = base
}

// A target worktree with local changes, untracked files included, is
// refused, naming them; nothing changes.
func TestMergeDirtyTarget(t *testing.T) {
	root, _, base, head := mergeSetup(t, map[string]string{"c.txt": "new\n"})
	write(t, root, map[string]string{"a.txt": "edited\n", "notes/u.txt": "untracked\n"})
	gitT(t, root, "mv", "b.txt", "b2.txt")
	refsBefore, rootBefore := refs(t, root), userState(t, root)

	res := merge(t, root, "thread", "main", false)
	want := MergeResult{Status: Dirty, Into: "main", From: base, Commits: []string{head}, Dirty: []string{"a.txt", "b.txt", "b2.txt", "notes/u.txt"}, Worktree: root}
	if diff := cmp.Diff(want, res); diff != "" {
		t.Errorf("merge (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(refsBefore, refs(t, root)); diff != "" {
		t.Errorf("refs changed (-before +after):\n%s", diff)
	}
	if diff := cmp.Diff(rootBefore, userState(t, root)); diff != "" {
		t.Errorf("the user's worktree changed (-before +after):\n%s", diff)
	}
}

// Merge refuses branches that do not exist and a branch into itself.
func TestMergeRefuses(t *testing.T) {
	root, _, _, _ := mergeSetup(t, map[string]string{"c.txt": "new\n"})
	for _, c := range []struct{ branch, into, want string }{
		{"nope", "main", "refs/heads/nope^{commit} names nothing"},
		{"thread", "nope", "refs/heads/nope^{commit} names nothing"},
		{"main", "main", "merge main into itself"},
	} {
		_, err := Merge(t.Context(), root, c.branch, c.into, false, "m", "", at)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Merge %s into %s = %v, want an error saying %q", c.branch, c.into, err, c.want)
		}
	}
}
