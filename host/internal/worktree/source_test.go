package worktree

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Inspect finds the repository from any directory in it and resolves the
// base: HEAD and the branch it is on, a branch by name, or a commit.
func TestInspect(t *testing.T) {
	root := newRepo(t, map[string]string{"sub/a.txt": "a\n"})
	first := gitT(t, root, "rev-parse", "HEAD")
	gitT(t, root, "branch", "feature")
	second := commitFiles(t, root, "second", map[string]string{"b.txt": "b\n"})
	common := filepath.Join(root, ".git")

	for _, c := range []struct {
		name, dir, base string
		want            Source
	}{
		{"HEAD from a subdirectory", "sub", "", Source{Base: second, BaseBranch: "main"}},
		{"a branch", "", "feature", Source{Base: first, BaseBranch: "feature"}},
		{"a commit", "", first, Source{Base: first}},
		{"an expression", "", "main~1", Source{Base: first}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := Inspect(t.Context(), filepath.Join(root, c.dir), c.base)
			if err != nil {
				t.Fatal(err)
			}
			c.want.Root, c.want.CommonDir, c.want.Author = root, common, "Repo User <repo@example.com>"
			if diff := cmp.Diff(c.want, got); diff != "" {
				t.Errorf("source (-want +got):\n%s", diff)
			}
		})
	}

	t.Run("from a linked worktree, detached", func(t *testing.T) {
		linked := filepath.Join(filepath.Dir(root), "linked")
		gitT(t, root, "worktree", "add", "-q", "--detach", linked, first)
		gitT(t, root, "config", "--unset", "user.email")
		got, err := Inspect(t.Context(), linked, "")
		if err != nil {
			t.Fatal(err)
		}
		want := Source{Root: linked, CommonDir: common, Base: first}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("source (-want +got):\n%s", diff)
		}
	})
}

// Inspect says plainly what is wrong: no repository, no such base, no
// commits yet.
func TestInspectRefuses(t *testing.T) {
	root := newRepo(t, map[string]string{"a": "a"})
	outside := t.TempDir()
	empty := filepath.Join(t.TempDir(), "empty")
	os.Mkdir(empty, 0o777)
	gitT(t, empty, "init", "-q")
	for _, c := range []struct{ name, dir, base, want string }{
		{"not a repository", outside, "", outside + " is not in a git repository"},
		{"no such base", root, "nope", `base "nope" does not name a commit in ` + root},
		{"a tree is no commit", root, "HEAD^{tree}", `base "HEAD^{tree}" does not name a commit in ` + root},
		{"no commits", empty, "", empty + " has no commits yet"},
		{"no directory", filepath.Join(outside, "gone"), "", filepath.Join(outside, "gone") + " cannot be read"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Inspect(t.Context(), c.dir, c.base)
			if err == nil || !strings.HasPrefix(err.Error(), c.want) {
				t.Errorf("Inspect(%s, %q) = %v, want an error starting %q", c.dir, c.base, err, c.want)
			}
		})
	}
}

// A new branch name must be valid and free.
func TestCheckBranch(t *testing.T) {
	root := newRepo(t, map[string]string{"a": "a"})
	if err := CheckBranch(t.Context(), root, "baton/thread-1"); err != nil {
		t.Errorf("a free, valid name: %v", err)
	}
	for _, c := range []struct{ branch, want string }{
		{"main", `branch "main" already exists in ` + root},
		{"", `"" is not a valid branch name`},
		{"a..b", `"a..b" is not a valid branch name`},
		{"@{-1}", `"@{-1}" is not a valid branch name`},
		{"-x", `"-x" is not a valid branch name`},
		{"x.lock", `"x.lock" is not a valid branch name`},
	} {
		if err := CheckBranch(t.Context(), root, c.branch); err == nil || err.Error() != c.want {
			t.Errorf("CheckBranch(%q) = %v, want %q", c.branch, err, c.want)
		}
	}
}
