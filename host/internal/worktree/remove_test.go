package worktree

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Remove deletes the thread's worktree, local changes and all, and its
// branch when asked; called again it has nothing to do and says nothing.
func TestRemove(t *testing.T) {
	root := newRepo(t, map[string]string{"a.txt": "a\n"})
	path, _ := thread(t, root, "thread")
	write(t, path, map[string]string{"a.txt": "uncommitted\n", "untracked": "x"})
	before := userState(t, root)

	for range 2 {
		if err := Remove(t.Context(), root, path, "thread", true); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("the worktree directory is still there: %v", err)
	}
	if got := gitT(t, root, "branch", "--list", "thread"); got != "" {
		t.Errorf("branch thread still exists: %q", got)
	}
	if n := strings.Count(gitT(t, root, "worktree", "list", "--porcelain"), "worktree "); n != 1 {
		t.Errorf("%d worktrees registered, want only the user's", n)
	}
	if diff := cmp.Diff(before, userState(t, root)); diff != "" {
		t.Errorf("the user's worktree changed (-before +after):\n%s", diff)
	}
}

// Remove never removes the user's worktree, nor a directory holding it.
func TestRemoveRefusesRoot(t *testing.T) {
	root := newRepo(t, map[string]string{"a.txt": "a\n"})
	for _, path := range []string{root, filepath.Dir(root)} {
		if err := Remove(t.Context(), root, path, "main", false); err == nil || !strings.Contains(err.Error(), "not removing it") {
			t.Errorf("Remove(%s) = %v, want a refusal", path, err)
		}
	}
	if got := read(t, root, "a.txt"); got != "a\n" {
		t.Errorf("a.txt in the user's worktree: %q", got)
	}
}

// A worktree whose directory was deleted is Missing until pruned, and
// Remove of it prunes it, keeping the branch unless asked.
func TestMissingAndPrune(t *testing.T) {
	root := newRepo(t, map[string]string{"a.txt": "a\n"})
	one, _ := thread(t, root, "one")
	two, _ := thread(t, root, "two")
	thread(t, root, "kept")
	os.RemoveAll(one)
	os.RemoveAll(two)

	got, err := Missing(t.Context(), root)
	if diff := cmp.Diff([]string{one, two}, got); err != nil || diff != "" {
		t.Fatalf("Missing = %v (-want +got):\n%s", err, diff)
	}
	if err := Remove(t.Context(), root, one, "one", false); err != nil {
		t.Fatal(err)
	}
	if got := gitT(t, root, "branch", "--list", "one"); got == "" {
		t.Errorf("Remove without deleteBranch deleted the branch")
	}
	if err := Prune(t.Context(), root); err != nil {
		t.Fatal(err)
	}
	if got, err := Missing(t.Context(), root); err != nil || len(got) != 0 {
		t.Errorf("Missing after Prune = %v, %v; want none", got, err)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(root), "threads", "kept", "a.txt")); err != nil {
		t.Errorf("Prune touched a worktree that is there: %v", err)
	}
}

// DiffStat counts lines and files between two commits, a binary file as
// a changed file with no lines; DiffText is the unified diff, cut at max.
func TestDiff(t *testing.T) {
	root := newRepo(t, map[string]string{"a.txt": "1\n2\n3\n", "gone.txt": "x\n", "bin": "\x00\x01"})
	from := gitT(t, root, "rev-parse", "HEAD")
	os.Remove(filepath.Join(root, "gone.txt"))
	to := commitFiles(t, root, "change", map[string]string{"a.txt": "1\ntwo\n3\n4\n", "bin": "\x00\x02", "dir/new file.txt": "n\n"})

	s, err := DiffStat(t.Context(), root, from, to)
	want := Stat{Files: 4, Added: 3, Removed: 2, Paths: []string{"a.txt", "bin", "dir/new file.txt", "gone.txt"}}
	if diff := cmp.Diff(want, s); err != nil || diff != "" {
		t.Errorf("DiffStat = %v (-want +got):\n%s", err, diff)
	}
	if s, err := DiffStat(t.Context(), root, to, to); err != nil || s.Files != 0 || s.Paths != nil {
		t.Errorf("DiffStat of no change = %+v, %v", s, err)
	}

	full, cut, err := DiffText(t.Context(), root, from, to, 0)
	if err != nil || cut || !strings.Contains(full, "--- a/a.txt\n+++ b/a.txt\n@@ -1,3 +1,4 @@\n 1\n-2\n+two\n 3\n+4\n") {
		t.Fatalf("DiffText = %v, cut %v:\n%s", err, cut, full)
	}
	part, cut, err := DiffText(t.Context(), root, from, to, 50)
	if err != nil || !cut || part != full[:50] {
		t.Errorf("DiffText cut at 50 = %q, cut %v, %v; want the first 50 bytes, cut", part, cut, err)
	}
	if _, _, err := DiffText(t.Context(), root, from, "nope", 0); err == nil {
		t.Errorf("DiffText to a commit that does not exist: no error")
	}
}
