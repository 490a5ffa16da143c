package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/baton-run/baton/host/internal/gitexec"
)

// Empty tree ids by object format: the base of a first checkpoint.
const (
	emptyTreeSHA1   = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
	emptyTreeSHA256 = "6ef19b41225c5369f1c104d45d8d85efa9b057b53b14b4b9b939dd74decc5321"
)

// repo is a checkpointed directory and the git work tree it is in.
type repo struct {
	dir       string // absolute; the directory checkpointed
	top       string // the work tree's top level
	gitDir    string // absolute git dir (per worktree for `git worktree` dirs)
	prefix    string // dir relative to top: "" or slash-separated ending in "/"
	emptyTree string
}

// stateDir holds Baton's files in the git dir: the lock, the cached index
// and temporary indexes.
func (r repo) stateDir() string { return filepath.Join(r.gitDir, "baton") }

// open is the package's open, remembered per directory while its git dir
// is there: a thread checkpoints the same directory again and again.
func (s *Service) open(ctx context.Context, dir string) (repo, string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return repo{}, "", err
	}
	s.mu.Lock()
	r, ok := s.repos[abs]
	s.mu.Unlock()
	if ok {
		if fi, err := os.Stat(r.gitDir); err == nil && fi.IsDir() {
			if fi, err := os.Stat(abs); err == nil && fi.IsDir() {
				return r, "", nil
			}
		}
	}
	r, missing, err := open(ctx, abs)
	if err == nil && missing == "" {
		s.mu.Lock()
		s.repos[abs] = r
		s.mu.Unlock()
	}
	return r, missing, err
}

// open finds the work tree dir is in. If there is none (or no dir), or git
// is not installed, it returns the reason and no error.
func open(ctx context.Context, dir string) (r repo, missing string, err error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return repo{}, "", err
	}
	fi, err := os.Stat(abs)
	switch {
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ENOTDIR): // gone, or a file took a parent's place
		return repo{}, abs + " does not exist", nil
	case err != nil:
		return repo{}, "", err
	case !fi.IsDir():
		return repo{}, abs + " is not a directory", nil
	}
	if !gitBelow(abs) {
		// No .git in dir or above it: not a repository, found without
		// starting git (a thread outside git checkpoints every run).
		return repo{}, abs + " is not in a git repository", nil
	}
	out, err := gitexec.Cmd{Dir: abs, Read: true}.Run(ctx, "rev-parse",
		"--is-inside-work-tree", "--show-toplevel", "--absolute-git-dir", "--show-prefix", "--show-object-format")
	var ge *gitexec.Error
	switch {
	case errors.Is(err, gitexec.ErrNotInstalled):
		return repo{}, err.Error(), nil
	case errors.As(err, &ge) && ge.ExitCode() > 0:
		switch {
		case strings.Contains(ge.Stderr, "not a git repository"):
			return repo{}, abs + " is not in a git repository", nil
		case strings.Contains(ge.Stderr, "must be run in a work tree"):
			return repo{}, abs + " is not in a git work tree", nil
		}
		return repo{}, abs + ": " + ge.Error(), nil
	case err != nil:
		return repo{}, "", err
	}
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(lines) != 5 {
		return repo{}, "", fmt.Errorf("git rev-parse: unexpected output %q", out)
	}
	if lines[0] != "true" {
		// Unreachable with git 2.25 or later: outside a work tree
		// --show-toplevel fails (handled above); older git printed false.
		return repo{}, abs + " is not in a git work tree", nil
	}
	r = repo{dir: abs, top: lines[1], gitDir: lines[2], prefix: lines[3], emptyTree: emptyTreeSHA1}
	if lines[4] == "sha256" {
		r.emptyTree = emptyTreeSHA256
	}
	return r, "", nil
}

// gitBelow says whether dir or a directory above it holds a .git entry,
// or git is pointed elsewhere by the environment: only then can dir be in
// a work tree.
func gitBelow(dir string) bool {
	if os.Getenv("GIT_DIR") != "" || os.Getenv("GIT_WORK_TREE") != "" {
		return true
	}
	for {
		if _, err := os.Lstat(filepath.Join(dir, ".git")); err == nil {
			return true
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return false
		}
		dir = parent
	}
}
