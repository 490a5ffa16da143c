package worktree

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Create makes a worktree on a new branch at the base, copies the files
// the globs name (ignored ones too, modes kept) and runs the setup in it,
// leaving the user's worktree as it was.
func TestCreate(t *testing.T) {
	root := newRepo(t, map[string]string{
		".gitignore":     ".env\n*.local\n",
		"tracked.txt":    "tracked\n",
		"sub/deep.txt":   "deep\n",
		"config/app.yml": "app\n",
	})
	write(t, root, map[string]string{
		".env":                "SECRET=1\n",
		"config/db.local":     "db\n",
		"config/sub/x.local":  "not matched: * stops at a slash\n",
		"top.txt":             "untracked, matched\n",
		"sub/nested.txt":      "not matched: a glob without a slash is top level only\n",
		"tracked.txt":         "the user's uncommitted edit\n",
		"config/cache.local~": "not matched\n",
	})
	if err := os.Chmod(filepath.Join(root, "config/db.local"), 0o777); err != nil {
		t.Fatal(err)
	}
	before := userState(t, root)
	base := gitT(t, root, "rev-parse", "HEAD")
	path := filepath.Join(filepath.Dir(root), "data", "worktrees", "t1")

	got, err := Create(t.Context(), Spec{
		Root: root, Path: path, Branch: "baton/t1", Base: base,
		Copy:  []string{".env", "config/*.local", "*.txt", "missing/*", ".git/*"},
		Setup: `echo "setting up in $(basename "$PWD")"; echo to stderr >&2; touch made-by-setup`,
	})
	if err != nil {
		t.Fatal(err)
	}
	want := Created{
		Copied:      []string{".env", "config/db.local", "top.txt", "tracked.txt"},
		SetupOutput: "setting up in t1\nto stderr\n",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("created (-want +got):\n%s", diff)
	}
	if head := gitT(t, path, "rev-parse", "HEAD"); head != base {
		t.Errorf("worktree HEAD %s, want the base %s", head, base)
	}
	if b := gitT(t, path, "symbolic-ref", "--short", "HEAD"); b != "baton/t1" {
		t.Errorf("worktree on %q, want baton/t1", b)
	}
	for name, want := range map[string]string{
		".env": "SECRET=1\n", "config/db.local": "db\n", "sub/deep.txt": "deep\n",
		"tracked.txt": "the user's uncommitted edit\n", "config/sub/x.local": "<missing>",
		"sub/nested.txt": "<missing>", "made-by-setup": "",
	} {
		if got := read(t, path, name); got != want {
			t.Errorf("%s in the worktree: %q, want %q", name, got, want)
		}
	}
	if fi, err := os.Stat(filepath.Join(path, "config/db.local")); err != nil || fi.Mode().Perm() != 0o777 {
		t.Errorf("config/db.local copied with mode %v (%v), want -rwxrwxrwx", fi.Mode(), err)
	}
	if diff := cmp.Diff(before, userState(t, root)); diff != "" {
		t.Errorf("the user's worktree changed (-before +after):\n%s", diff)
	}
}

// A setup that fails is reported, not an error; its output is kept to
// its last 64 KiB, with a line saying it was cut.
func TestCreateSetupFails(t *testing.T) {
	root := newRepo(t, map[string]string{"a": "a"})
	base := gitT(t, root, "rev-parse", "HEAD")
	for _, c := range []struct {
		name, setup string
		exit        int
		check       func(t *testing.T, out string)
	}{
		{"exit status", "echo broken; exit 3", 3, func(t *testing.T, out string) {
			if out != "broken\n" {
				t.Errorf("output %q, want %q", out, "broken\n")
			}
		}},
		{"killed", "kill -9 $$", -1, func(t *testing.T, out string) {}},
		{"long output", "yes 0123456789abcde | head -c 100000; echo END; exit 1", 1, func(t *testing.T, out string) {
			notice := "[setup output cut: the first 34468 bytes are not shown]\n"
			if !strings.HasPrefix(out, notice) || !strings.HasSuffix(out, "\nEND\n") || len(out) != len(notice)+MaxSetupOutput {
				t.Errorf("output of %d bytes starting %q, want the notice and the last %d bytes", len(out), out[:min(80, len(out))], MaxSetupOutput)
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "wt")
			got, err := Create(t.Context(), Spec{Root: root, Path: path, Branch: "b-" + strings.ReplaceAll(c.name, " ", "-"), Base: base, Setup: c.setup})
			if err != nil {
				t.Fatalf("a failing setup is not an error: %v", err)
			}
			if got.SetupExit != c.exit {
				t.Errorf("setup exit %d, want %d", got.SetupExit, c.exit)
			}
			c.check(t, got.SetupOutput)
		})
	}
}

// Create called again after a crash part way through clears what the
// earlier attempt left and makes the worktree again.
func TestCreateRecovers(t *testing.T) {
	for _, c := range []struct {
		name  string
		crash func(t *testing.T, root, path, base string)
	}{
		{"a directory no worktree owns", func(t *testing.T, root, path, base string) {
			write(t, path, map[string]string{"junk": "half made", "a": "stale"})
		}},
		{"a registered worktree deleted", func(t *testing.T, root, path, base string) {
			gitT(t, root, "worktree", "add", "-q", "-b", "thread", path, base)
			os.RemoveAll(path)
		}},
		{"a registered worktree missing files", func(t *testing.T, root, path, base string) {
			gitT(t, root, "worktree", "add", "-q", "-b", "thread", path, base)
			os.Remove(filepath.Join(path, "a"))
			os.Remove(filepath.Join(path, ".git"))
			write(t, path, map[string]string{"junk": "half made"})
		}},
		{"a complete worktree", func(t *testing.T, root, path, base string) {
			gitT(t, root, "worktree", "add", "-q", "-b", "thread", path, base)
			write(t, path, map[string]string{"junk": "left by an earlier setup"})
		}},
		{"the branch alone, at the base", func(t *testing.T, root, path, base string) {
			gitT(t, root, "branch", "thread", base)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			root := newRepo(t, map[string]string{"a": "a\n"})
			base := gitT(t, root, "rev-parse", "HEAD")
			path := filepath.Join(filepath.Dir(root), "wt", "thread")
			c.crash(t, root, path, base)
			before := userState(t, root)

			if _, err := Create(t.Context(), Spec{Root: root, Path: path, Branch: "thread", Base: base}); err != nil {
				t.Fatalf("Create after a crash: %v", err)
			}
			if got := read(t, path, "a"); got != "a\n" {
				t.Errorf("a in the worktree: %q, want %q", got, "a\n")
			}
			if got := read(t, path, "junk"); got != "<missing>" {
				t.Errorf("the earlier attempt's junk is still there: %q", got)
			}
			if s := status(t, path); s != "" {
				t.Errorf("git status in the new worktree:\n%s\nwant clean", s)
			}
			if b := gitT(t, path, "symbolic-ref", "--short", "HEAD"); b != "thread" {
				t.Errorf("worktree on %q, want thread", b)
			}
			if n := strings.Count(gitT(t, root, "worktree", "list", "--porcelain"), "worktree "); n != 2 {
				t.Errorf("%d worktrees registered, want 2 (the user's and the thread's)", n)
			}
			if diff := cmp.Diff(before, userState(t, root)); diff != "" {
				t.Errorf("the user's worktree changed (-before +after):\n%s", diff)
			}
		})
	}
}

// Create refuses what is not its own leftover: a branch at another
// commit, a branch checked out elsewhere, another branch's worktree at
// the path, a path holding the user's worktree.
func TestCreateRefuses(t *testing.T) {
	root := newRepo(t, map[string]string{"a": "a\n"})
	base := gitT(t, root, "rev-parse", "HEAD")
	other := commitFiles(t, root, "second", map[string]string{"b": "b\n"})
	gitT(t, root, "branch", "moved", other)
	gitT(t, root, "branch", "elsewhere", base)
	dir := filepath.Dir(root)
	gitT(t, root, "worktree", "add", "-q", filepath.Join(dir, "elsewhere"), "elsewhere")
	gitT(t, root, "worktree", "add", "-q", "-b", "someone", filepath.Join(dir, "someone"), base)
	ran := filepath.Join(dir, "ran")
	gitT(t, root, "worktree", "add", "-q", "-b", "ran", ran, base)
	ranHead := commitFiles(t, ran, "a run", map[string]string{"work.txt": "the agent's work\n"})

	for _, c := range []struct {
		name string
		spec Spec
		want string
	}{
		{"a branch at another commit", Spec{Path: filepath.Join(dir, "x"), Branch: "moved"},
			`branch "moved" already exists in ` + root + ", at " + other[:12] + ", not at the base " + base[:12]},
		{"a thread that has runs, at the path", Spec{Path: ran, Branch: "ran"},
			`branch "ran" already exists in ` + root + ", at " + ranHead[:12] + ", not at the base " + base[:12]},
		{"a branch checked out elsewhere", Spec{Path: filepath.Join(dir, "x"), Branch: "elsewhere"},
			`branch "elsewhere" is checked out in ` + filepath.Join(dir, "elsewhere")},
		{"another branch's worktree", Spec{Path: filepath.Join(dir, "someone"), Branch: "mine"},
			filepath.Join(dir, "someone") + " is already a worktree, on branch someone, not on branch mine"},
		{"the user's worktree", Spec{Path: dir, Branch: "mine"},
			dir + " would hold the worktree " + root},
		{"a relative path", Spec{Path: "rel", Branch: "mine"}, "need a root, an absolute path"},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.spec.Root, c.spec.Base = root, base
			before := snapshot(t, dir)
			_, err := Create(t.Context(), c.spec)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Create = %v, want an error saying %q", err, c.want)
			}
			if diff := cmp.Diff(before, snapshot(t, dir)); diff != "" {
				t.Errorf("a refused Create changed files (-before +after):\n%s", diff)
			}
		})
	}
}
