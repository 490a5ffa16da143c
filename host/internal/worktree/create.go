package worktree

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Spec says what worktree Create makes.
type Spec struct {
	Root   string // the user's worktree (Source.Root); files are copied from it
	Path   string // absolute path of the new worktree; parent directories are created
	Branch string // the new branch
	Base   string // the full id of the commit the branch starts at (Source.Base)

	// Copy lists globs (filepath.Match syntax, where * does not cross a
	// slash) matched against slash-separated paths relative to Root; a
	// glob without a slash matches at the top level only. Matching
	// regular files and symlinks, ignored and untracked ones included
	// (.env), are copied from Root to the same relative paths, mode kept.
	// Directories that match are not copied; nothing under .git is.
	Copy []string

	// Setup is a shell command run with sh -c in Path after copying; ""
	// runs nothing.
	Setup string
}

// Created is what Create did besides making the worktree.
type Created struct {
	Copied      []string // slash-separated relative paths copied, sorted
	SetupExit   int      // Setup's exit status: -1 when it could not start or was killed; 0 when there was none
	SetupOutput string   // Setup's stdout and stderr together; only the last MaxSetupOutput bytes, after a line that says so, if longer
}

// Create makes the worktree s describes: git worktree add of a new branch
// at Base (checkout hooks do not run), then the copies, then Setup. A
// failing Setup is no error: it is reported in Created.
//
// Create can be called again after a crash part way through. A worktree
// left at Path on Branch (complete or not, or registered but deleted),
// or a directory at Path that is no worktree, is removed and made again;
// a Branch left at Base and checked out nowhere is reused. A Branch at
// another commit, or a worktree at Path on another branch, is an error.
// Root's files, index and HEAD are never touched.
func Create(ctx context.Context, s Spec) (Created, error) {
	if !filepath.IsAbs(s.Path) || s.Branch == "" || s.Base == "" || s.Root == "" {
		return Created{}, fmt.Errorf("create worktree: need a root, an absolute path, a branch and a base (got %+v)", s)
	}
	s.Path = filepath.Clean(s.Path)
	if within(s.Path, s.Root) {
		return Created{}, fmt.Errorf("create worktree: %s would hold the worktree %s it is made from", s.Path, s.Root)
	}
	// Made again from what it left when it tripped over another worktree
	// being made at the same time (racedWorktree).
	err := retryRaced(ctx, func() error {
		existing, err := clearPath(ctx, s)
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Dir(s.Path), 0o777); err != nil {
			return fmt.Errorf("create worktree: %w", err)
		}
		args := []string{"worktree", "add", "--quiet", "--no-track", "-b", s.Branch, s.Path, s.Base}
		if existing {
			args = []string{"worktree", "add", "--quiet", s.Path, s.Branch}
		}
		if _, err := git(ctx, s.Root, args...); err != nil {
			return fmt.Errorf("create worktree %s on branch %s: %w", s.Path, s.Branch, err)
		}
		return nil
	})
	if err != nil {
		return Created{}, err
	}
	var c Created
	if c.Copied, err = copyFiles(s.Root, s.Path, s.Copy); err != nil {
		return c, fmt.Errorf("create worktree %s: %w", s.Path, err)
	}
	if s.Setup != "" {
		c.SetupExit, c.SetupOutput = setup(ctx, s.Path, s.Setup)
		if ctx.Err() != nil {
			return c, fmt.Errorf("create worktree %s: setup: %w", s.Path, context.Cause(ctx))
		}
	}
	return c, nil
}

// clearPath removes what an earlier attempt to make s left at s.Path and
// says whether s.Branch exists (at s.Base) to be checked out again. It
// checks everything before it removes anything.
func clearPath(ctx context.Context, s Spec) (branchExists bool, err error) {
	list, err := listWorktrees(ctx, s.Root)
	if err != nil {
		return false, fmt.Errorf("create worktree: %w", err)
	}
	registered := false
	for _, w := range list {
		switch {
		case samePath(w.Path, s.Path) && w.Branch != s.Branch:
			return false, fmt.Errorf("create worktree: %s is already a worktree, on %s, not on branch %s", s.Path, describeBranch(w.Branch), s.Branch)
		case samePath(w.Path, s.Path):
			registered = true
		case w.Branch == s.Branch:
			return false, fmt.Errorf("create worktree: branch %q is checked out in %s", s.Branch, w.Path)
		}
	}
	head, err := branchHead(ctx, s.Root, s.Branch)
	if err != nil {
		return false, fmt.Errorf("create worktree: %w", err)
	}
	if head != "" && head != s.Base {
		return false, fmt.Errorf("create worktree: branch %q already exists in %s, at %s, not at the base %s", s.Branch, s.Root, short(head), short(s.Base))
	}

	if registered {
		if err := removeWorktree(ctx, s.Root, s.Path); err != nil {
			return false, fmt.Errorf("create worktree: remove what a previous attempt left: %w", err)
		}
	}
	// A directory no worktree owns: a leftover of an add that did not
	// get as far as registering it.
	if err := os.RemoveAll(s.Path); err != nil {
		return false, fmt.Errorf("create worktree: remove what a previous attempt left: %w", err)
	}
	return head != "", nil
}

// removeWorktree removes the registered worktree at path and its
// directory, or, when the directory is already gone, prunes the worktrees
// whose directories are gone.
func removeWorktree(ctx context.Context, root, path string) error {
	if within(path, root) || samePath(path, root) {
		return fmt.Errorf("%s holds the worktree %s: not removing it", path, root)
	}
	if _, err := os.Lstat(path); errors.Is(err, fs.ErrNotExist) {
		return Prune(ctx, root)
	}
	if err := retryRaced(ctx, func() error {
		_, err := git(ctx, root, "worktree", "remove", "--force", "--force", path)
		return err
	}); err != nil {
		// Not a valid worktree any more (its .git file is gone, say):
		// remove the directory and let prune forget it.
		if err := os.RemoveAll(path); err != nil {
			return err
		}
		return Prune(ctx, root)
	}
	return nil
}

// samePath says whether a and b name the same directory, following
// symlinks in what exists of them.
func samePath(a, b string) bool {
	return filepath.Clean(a) == filepath.Clean(b) || realPath(a) == realPath(b)
}

// realPath is p with symlinks resolved in its longest existing prefix.
func realPath(p string) string {
	p = filepath.Clean(p)
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	parent := filepath.Dir(p)
	if parent == p {
		return p
	}
	return filepath.Join(realPath(parent), filepath.Base(p))
}

// within says whether p is dir or a path under it (lexically).
func within(dir, p string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

func describeBranch(b string) string {
	if b == "" {
		return "a detached HEAD"
	}
	return "branch " + b
}

// copyFiles copies the files under root that globs match to the same
// relative paths under dst and returns those paths, sorted.
func copyFiles(root, dst string, globs []string) ([]string, error) {
	var copied []string
	for _, g := range globs {
		if strings.HasPrefix(g, "/") {
			return nil, fmt.Errorf("copy %q: a glob is relative to the worktree", g)
		}
		matches, err := filepath.Glob(filepath.Join(globEscape(root), filepath.FromSlash(g)))
		if err != nil {
			return nil, fmt.Errorf("copy %q: %w", g, err)
		}
		for _, m := range matches {
			rel, err := filepath.Rel(root, m)
			if err != nil || !within(root, m) || within(filepath.Join(root, ".git"), m) {
				continue
			}
			done, err := copyFile(m, filepath.Join(dst, rel))
			if err != nil {
				return nil, fmt.Errorf("copy %s: %w", rel, err)
			}
			if done {
				copied = append(copied, filepath.ToSlash(rel))
			}
		}
	}
	slices.Sort(copied)
	return slices.Compact(copied), nil
}

// globEscape escapes the characters filepath.Match treats specially, so
// that a root containing them is matched literally.
func globEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// copyFile copies the regular file or symlink src to dst, creating dst's
// parents, and says whether it did: anything else is skipped.
func copyFile(src, dst string) (bool, error) {
	fi, err := os.Lstat(src)
	if err != nil {
		return false, err
	}
	if !fi.Mode().IsRegular() && fi.Mode().Type() != fs.ModeSymlink {
		return false, nil
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o777); err != nil {
		return false, err
	}
	if err := os.Remove(dst); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false, err
	}
	if fi.Mode().Type() == fs.ModeSymlink {
		target, err := os.Readlink(src)
		if err != nil {
			return false, err
		}
		return true, os.Symlink(target, dst)
	}
	in, err := os.Open(src)
	if err != nil {
		return false, err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, fi.Mode().Perm())
	if err != nil {
		return false, err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return false, err
	}
	if err := out.Close(); err != nil {
		return false, err
	}
	return true, os.Chmod(dst, fi.Mode().Perm()) // the umask cut the mode OpenFile was given
}
