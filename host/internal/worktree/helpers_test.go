package worktree

import (
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestMain keeps the tests' git away from the user's and the system's
// git config, so they read the same everywhere.
func TestMain(m *testing.M) {
	os.Setenv("GIT_CONFIG_GLOBAL", os.DevNull)
	os.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	os.Exit(m.Run())
}

// at is the date tests commit at.
var at = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// gitT runs git in dir as a user would, and returns its output trimmed.
func gitT(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{
		"-c", "user.name=Test", "-c", "user.email=test@example.com",
		"-c", "commit.gpgSign=false", "-c", "init.defaultBranch=main",
	}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "LC_ALL=C", "GIT_COMMITTER_DATE=2026-01-01T00:00:00Z", "GIT_AUTHOR_DATE=2026-01-01T00:00:00Z")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s in %s: %v\n%s", strings.Join(args, " "), dir, err, out)
	}
	return strings.TrimSpace(string(out))
}

// write writes files (relative slash path to content) under dir.
func write(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o777); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// read returns the content of dir/name, or "<missing>".
func read(t testing.TB, dir, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(name)))
	if err != nil {
		return "<missing>"
	}
	return string(b)
}

// newRepo makes a repository on main with one commit of files, user.name
// and user.email set in its config, and returns its directory.
func newRepo(t testing.TB, files map[string]string) string {
	t.Helper()
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	dir = filepath.Join(dir, "repo")
	if err := os.Mkdir(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	gitT(t, dir, "init", "-q")
	gitT(t, dir, "config", "user.name", "Repo User")
	gitT(t, dir, "config", "user.email", "repo@example.com")
	write(t, dir, files)
	gitT(t, dir, "add", "-A")
	gitT(t, dir, "commit", "-q", "-m", "initial")
	return dir
}

// commitFiles commits files on top of dir's HEAD and returns the commit.
func commitFiles(t testing.TB, dir, msg string, files map[string]string) string {
	t.Helper()
	write(t, dir, files)
	gitT(t, dir, "add", "-A")
	gitT(t, dir, "commit", "-q", "-m", msg)
	return gitT(t, dir, "rev-parse", "HEAD")
}

// thread makes a thread worktree of root on branch at root's HEAD, under
// a temp dir, and returns its path and the base commit.
func thread(t testing.TB, root, branch string) (path, base string) {
	t.Helper()
	base = gitT(t, root, "rev-parse", "HEAD")
	path = filepath.Join(filepath.Dir(root), "threads", branch)
	if _, err := Create(t.Context(), Spec{Root: root, Path: path, Branch: branch, Base: base}); err != nil {
		t.Fatal(err)
	}
	return path, base
}

// snapshot hashes every file under dir (the .git directory included):
// path to content hash, with symlinks by target and modes noted.
func snapshot(t testing.TB, dir string) map[string]string {
	t.Helper()
	files := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if d.Type()&fs.ModeSymlink != 0 {
			target, err := os.Readlink(p)
			files[rel] = "symlink " + target
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		files[rel] = fi.Mode().String() + " " + hex.EncodeToString(sum[:])
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// refs lists every ref of root's repository with its value.
func refs(t testing.TB, root string) string {
	t.Helper()
	return gitT(t, root, "for-each-ref", "--format=%(refname) %(objectname)")
}

// status is git status --porcelain in dir.
func status(t testing.TB, dir string) string {
	t.Helper()
	return gitT(t, dir, "status", "--porcelain", "--untracked-files=all")
}

// userState is what of the user's worktree root must never change: every
// file in it outside .git, its index and HEAD, and the branch it is on.
func userState(t testing.TB, root string) map[string]string {
	t.Helper()
	state := map[string]string{}
	for name, hash := range snapshot(t, root) {
		if !strings.HasPrefix(name, ".git"+string(filepath.Separator)) || name == filepath.Join(".git", "index") || name == filepath.Join(".git", "HEAD") {
			state[name] = hash
		}
	}
	state["branch main"] = gitT(t, root, "rev-parse", "refs/heads/main")
	return state
}
