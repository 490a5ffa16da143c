package checkpoint

import (
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/baton-run/baton/host/internal/gitexec"
)

// tb is what the helpers need of a *testing.T, *testing.B or *rapid.T.
type tb interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
}

// gitT runs git in dir the way a user would, with an identity for commits,
// and returns its trimmed stdout.
func gitT(t tb, dir string, args ...string) string {
	t.Helper()
	return strings.TrimSpace(gitRaw(t, dir, args...))
}

// gitRaw is gitT without trimming the output.
func gitRaw(t tb, dir string, args ...string) string {
	t.Helper()
	out, err := gitTErr(dir, args...)
	if err != nil {
		t.Fatalf("git %s in %s: %v", strings.Join(args, " "), dir, err)
	}
	return out
}

func gitTErr(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", append([]string{
		"-c", "user.name=Test", "-c", "user.email=test@example.com",
		"-c", "commit.gpgSign=false", "-c", "init.defaultBranch=main",
	}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_OPTIONAL_LOCKS=0", "LC_ALL=C")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", &gitexec.Error{Cmd: "git " + args[0], Err: err, Stderr: stderr.String()}
	}
	return string(out), nil
}

// newRepo makes an empty repository in a temp dir.
func newRepo(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	gitT(t, dir, "init", "-q")
	return dir
}

// writeFiles writes name -> content under dir, making parent directories.
func writeFiles(t tb, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// file is what a path holds on disk or in a tree.
type file struct {
	Content string // file content or symlink target
	Exec    bool
	Link    bool
}

// diskFiles walks dir, skipping .git, and returns its files and symlinks by
// slash-separated path relative to dir.
func diskFiles(t tb, dir string) map[string]file {
	t.Helper()
	files := map[string]file{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		rel = filepath.ToSlash(rel)
		switch {
		case d.IsDir() && rel == ".git":
			return filepath.SkipDir
		case d.IsDir():
			return nil
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			files[rel] = file{Content: target, Link: true}
			return err
		default:
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			fi, err := d.Info()
			if err != nil {
				return err
			}
			files[rel] = file{Content: string(b), Exec: fi.Mode()&0o100 != 0}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// treeFiles returns the files of commit's tree, read with git.
func treeFiles(t tb, dir, commit string) map[string]file {
	t.Helper()
	files := map[string]file{}
	out := gitRaw(t, dir, "ls-tree", "-r", "-z", commit)
	for rec := range strings.SplitSeq(out, "\x00") {
		if rec == "" {
			continue
		}
		meta, path, _ := strings.Cut(rec, "\t")
		f := strings.Fields(meta) // mode type id
		content := gitRaw(t, dir, "cat-file", "blob", f[2])
		files[path] = file{Content: content, Exec: f[0] == "100755", Link: f[0] == "120000"}
	}
	return files
}

// userState is what a checkpoint must leave alone: the index's bytes, HEAD,
// the stash and the refs outside refs/baton.
type userState struct {
	index, head, stash, refs string
}

func readUserState(t testing.TB, dir string) userState {
	t.Helper()
	gitDir := gitT(t, dir, "rev-parse", "--absolute-git-dir")
	index, err := os.ReadFile(filepath.Join(gitDir, "index"))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	head, err := os.ReadFile(filepath.Join(gitDir, "HEAD"))
	if err != nil {
		t.Fatal(err)
	}
	var refs []string
	for line := range strings.SplitSeq(gitT(t, dir, "for-each-ref", "--format=%(refname) %(objectname)"), "\n") {
		if !strings.HasPrefix(line, "refs/baton/") {
			refs = append(refs, line)
		}
	}
	return userState{
		index: string(index), head: string(head),
		stash: gitT(t, dir, "stash", "list"), refs: strings.Join(refs, "\n"),
	}
}

func checkUserState(t testing.TB, dir string, before userState) {
	t.Helper()
	after := readUserState(t, dir)
	if after.index != before.index {
		t.Errorf("the user's index changed (%d bytes before, %d after)", len(before.index), len(after.index))
	}
	if after.head != before.head {
		t.Errorf("HEAD changed: %q, was %q", after.head, before.head)
	}
	if after.stash != before.stash {
		t.Errorf("stash list changed: %q, was %q", after.stash, before.stash)
	}
	if after.refs != before.refs {
		t.Errorf("refs changed:\n%s\nwere:\n%s", after.refs, before.refs)
	}
}
