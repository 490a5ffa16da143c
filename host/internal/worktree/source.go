package worktree

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/baton-run/baton/host/internal/gitexec"
)

// Source is where a thread's worktree comes from, found before anything
// is written.
type Source struct {
	Root       string // top level of the worktree the given directory is in (the user's worktree)
	CommonDir  string // the repository's common git dir, absolute
	Base       string // full commit id the base resolves to
	BaseBranch string // short name of the branch the base names or HEAD is on; "" when detached or a commit id
	Author     string // "Name <email>" from git config in Root; "" when unset
}

// Inspect finds the repository dir is in and resolves base ("" means
// HEAD) to a commit in it. It writes nothing. It fails, saying so, when
// dir is not in a git work tree, when base names no commit, and when the
// repository has no commits yet.
func Inspect(ctx context.Context, dir, base string) (Source, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return Source{}, err
	}
	out, err := gitRead(ctx, abs, "rev-parse", "--path-format=absolute", "--show-toplevel", "--git-common-dir")
	if err != nil {
		return Source{}, notARepository(abs, err)
	}
	root, common, ok := strings.Cut(out, "\n")
	if !ok {
		return Source{}, fmt.Errorf("git rev-parse in %s: unexpected output %q", abs, out)
	}
	src := Source{Root: root, CommonDir: common}

	rev := base
	if rev == "" {
		rev = "HEAD"
	}
	if src.Base, err = resolve(ctx, root, rev+"^{commit}"); err != nil {
		return Source{}, err
	}
	if src.Base == "" {
		if base == "" {
			return Source{}, fmt.Errorf("%s has no commits yet: a worktree needs a commit to start from", root)
		}
		return Source{}, fmt.Errorf("base %q does not name a commit in %s", base, root)
	}
	if src.BaseBranch, err = branchNamed(ctx, root, rev); err != nil {
		return Source{}, err
	}
	if src.Author, err = configAuthor(ctx, root); err != nil {
		return Source{}, err
	}
	return src, nil
}

// notARepository turns the failure of git rev-parse in dir into a
// sentence, when it is a known one.
func notARepository(dir string, err error) error {
	var ge *gitexec.Error
	if errors.As(err, &ge) && ge.ExitCode() > 0 {
		switch {
		case strings.Contains(ge.Stderr, "not a git repository"):
			return fmt.Errorf("%s is not in a git repository", dir)
		case strings.Contains(ge.Stderr, "must be run in a work tree"):
			return fmt.Errorf("%s is not in a git work tree", dir)
		}
	}
	if errors.As(err, &ge) && ge.ExitCode() == -1 {
		return fmt.Errorf("%s cannot be read: %w", dir, err)
	}
	return fmt.Errorf("find the repository of %s: %w", dir, err)
}

// branchNamed returns the short name of the local branch rev names (HEAD:
// the branch it is on), or "" when it names none.
func branchNamed(ctx context.Context, root, rev string) (string, error) {
	if strings.HasPrefix(rev, "-") {
		return "", nil
	}
	out, err := gitRead(ctx, root, "rev-parse", "--symbolic-full-name", rev, "--")
	out = strings.TrimSuffix(out, "\n--")
	if err != nil {
		return "", fmt.Errorf("find the branch %s names: %w", rev, err)
	}
	name, ok := strings.CutPrefix(out, "refs/heads/")
	if !ok || strings.Contains(name, "\n") {
		return "", nil
	}
	return name, nil
}

// CheckBranch returns nil when branch is a valid name for a new branch in
// root's repository and no branch has it yet, and an error saying which
// is not so otherwise.
func CheckBranch(ctx context.Context, root, branch string) error {
	out, err := gitRead(ctx, root, "check-ref-format", "--branch", branch)
	if err != nil || out != branch || branch == "" || strings.HasPrefix(branch, "-") {
		// check-ref-format expands @{-1} and the like: a name it changes
		// is not a plain branch name.
		return fmt.Errorf("%q is not a valid branch name", branch)
	}
	head, err := branchHead(ctx, root, branch)
	if err != nil {
		return err
	}
	if head != "" {
		return fmt.Errorf("branch %q already exists in %s", branch, root)
	}
	return nil
}
