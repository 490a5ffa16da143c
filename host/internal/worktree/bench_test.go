package worktree

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/baton-run/baton/host/internal/gitexec"
)

const benchFiles = 10_000

// benchRepo makes a repository of benchFiles small files in nested
// directories, committed, and returns it with its head.
func benchRepo(b *testing.B) (root, head string) {
	b.Helper()
	files := make(map[string]string, benchFiles)
	for i := range benchFiles {
		files[fmt.Sprintf("d%02d/e%d/f%04d.txt", i%20, i/20%5, i)] = fmt.Sprintf("file %d\nline two\n", i)
	}
	root = newRepo(b, files)
	return root, gitT(b, root, "rev-parse", "HEAD")
}

// BenchmarkCreate makes a worktree of a repository of 10,000 files; the
// baseline is git worktree add alone, which Create runs among its checks.
// The goal: Create within 1.2 times the baseline.
func BenchmarkCreate(b *testing.B) {
	root, base := benchRepo(b)
	dir := filepath.Join(filepath.Dir(root), "wt")
	for _, c := range []struct {
		name string
		make func(b *testing.B, path, branch string)
	}{
		{"git-worktree-add", func(b *testing.B, path, branch string) {
			if _, err := (gitexec.Cmd{Dir: root}).Run(b.Context(), "worktree", "add", "--quiet", "--no-track", "-b", branch, path, base); err != nil {
				b.Fatal(err)
			}
		}},
		{"Create", func(b *testing.B, path, branch string) {
			if _, err := Create(b.Context(), Spec{Root: root, Path: path, Branch: branch, Base: base}); err != nil {
				b.Fatal(err)
			}
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			i := 0
			for b.Loop() {
				path, branch := filepath.Join(dir, fmt.Sprint(i)), fmt.Sprintf("%s-%d", c.name, i)
				c.make(b, path, branch)
				b.StopTimer()
				if err := Remove(b.Context(), root, path, branch, true); err != nil {
					b.Fatal(err)
				}
				i++
				b.StartTimer()
			}
		})
	}
}

// BenchmarkCommitRun records runs, each changing one file, on a thread of
// a repository of 10,000 files; the baseline is git commit-tree alone.
// CommitRun adds resolving its inputs, the compare-and-swap of the branch
// and the reset of the worktree's index.
func BenchmarkCommitRun(b *testing.B) {
	root, base := benchRepo(b)
	path := filepath.Join(filepath.Dir(root), "thread")
	if _, err := Create(b.Context(), Spec{Root: root, Path: path, Branch: "thread", Base: base}); err != nil {
		b.Fatal(err)
	}
	// Two trees that differ in one file: runs alternate between them.
	write(b, path, map[string]string{"d00/e0/f0000.txt": "changed\n"})
	changed := checkpoint(b, path)
	trees := [2]string{changed, base}
	for _, c := range []struct {
		name   string
		commit func(b *testing.B, parent, tree string, i int) string
	}{
		{"git-commit-tree", func(b *testing.B, parent, tree string, i int) string {
			out, err := gitexec.Cmd{Dir: path, Env: []string{"GIT_AUTHOR_NAME=a", "GIT_AUTHOR_EMAIL=a@b", "GIT_COMMITTER_NAME=a", "GIT_COMMITTER_EMAIL=a@b"}}.
				Run(b.Context(), "commit-tree", tree+"^{tree}", "-p", parent, "-m", fmt.Sprintf("run %d", i))
			if err != nil {
				b.Fatal(err)
			}
			return string(out[:len(out)-1])
		}},
		{"CommitRun", func(b *testing.B, parent, tree string, i int) string {
			trailer := fmt.Sprintf("Baton-Run: run_%d", i)
			c, err := CommitRun(b.Context(), Commit{Dir: path, Branch: "thread", Parent: parent, Tree: tree, Message: "run\n\n" + trailer, Trailer: trailer, Author: "a <a@b>", At: at})
			if err != nil || c == "" {
				b.Fatalf("CommitRun = %q, %v", c, err)
			}
			return c
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			parent := gitT(b, path, "rev-parse", "thread")
			i := 0
			for b.Loop() {
				parent = c.commit(b, parent, trees[i%2], i)
				i++
			}
		})
	}
}
