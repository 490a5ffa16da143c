package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// A directory that is not in a git work tree is missing for a capture,
// with the reason, an error for a restore or a diff, and nothing to do for
// DeleteRefs.
func TestDirNotInWorkTree(t *testing.T) {
	base := t.TempDir()
	t.Setenv("GIT_CEILING_DIRECTORIES", base) // even if the temp dir is in a repo
	writeFiles(t, base, map[string]string{"file": "x"})
	if err := os.MkdirAll(filepath.Join(base, "fake", ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	badConfig := newRepo(t)
	f, err := os.OpenFile(filepath.Join(badConfig, ".git", "config"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintln(f, "[[[not config")
	f.Close()
	repo := newRepo(t)

	for _, c := range []struct {
		name, dir, reason string
		prefix            bool // reason is a prefix of the reason given
	}{
		{"a file", filepath.Join(base, "file"), filepath.Join(base, "file") + " is not a directory", false},
		{"gone", filepath.Join(base, "gone"), filepath.Join(base, "gone") + " does not exist", false},
		{"under a file", filepath.Join(base, "file", "sub"), filepath.Join(base, "file", "sub") + " does not exist", false},
		{"an empty .git", filepath.Join(base, "fake"), filepath.Join(base, "fake") + " is not in a git repository", false},
		{"the git dir", filepath.Join(repo, ".git"), filepath.Join(repo, ".git") + " is not in a git work tree", false},
		{"a config git refuses", badConfig, badConfig + ": git rev-parse: exit status 128: fatal: bad config line", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := New()
			res, err := s.Capture(t.Context(), c.dir, "refs/baton/t/1", "", now)
			if err != nil {
				t.Fatalf("capture: %v, want missing and no error", err)
			}
			if c.prefix && strings.HasPrefix(res.Reason, c.reason) {
				c.reason = res.Reason
			}
			if diff := cmp.Diff(Result{Status: StatusMissing, Reason: c.reason}, res); diff != "" {
				t.Errorf("capture (-want +got):\n%s", diff)
			}
			if _, err := s.Restore(t.Context(), c.dir, emptyTreeSHA1); err == nil || err.Error() != "checkpoint: restore "+c.dir+": "+c.reason {
				t.Errorf("restore: %v, want the reason", err)
			}
			if _, err := s.Diff(t.Context(), c.dir, "", emptyTreeSHA1, 0); err == nil || err.Error() != "checkpoint: diff "+c.dir+": "+c.reason {
				t.Errorf("diff: %v, want the reason", err)
			}
			if err := s.DeleteRefs(t.Context(), c.dir, "refs/baton/t/1"); err != nil {
				t.Errorf("delete refs: %v, want nothing to do", err)
			}
		})
	}

	t.Run("relative to a working directory outside git", func(t *testing.T) {
		t.Chdir(base)
		res, err := New().Capture(t.Context(), ".", "refs/baton/t/1", "", now)
		if want := (Result{Status: StatusMissing, Reason: base + " is not in a git repository"}); err != nil || !cmp.Equal(res, want) {
			t.Errorf("capture of .: %+v, %v; want %+v", res, err, want)
		}
		if _, err := New().Diff(t.Context(), ".", "", emptyTreeSHA1, 0); err == nil || err.Error() != "checkpoint: diff .: "+base+" is not in a git repository" {
			t.Errorf("diff of .: %v, want the reason naming %s", err, base)
		}
	})
}

// A directory whose place cannot be told is an error for every call that
// looks for it; DeleteRefs with no refs does not look.
func TestDirUnknowable(t *testing.T) {
	base := t.TempDir()
	loop := filepath.Join(base, "loop")
	if err := os.Symlink("loop", loop); err != nil {
		t.Fatal(err)
	}
	newline := filepath.Join(base, "new\nline")
	if err := os.Mkdir(newline, 0o755); err != nil {
		t.Fatal(err)
	}
	gitT(t, newline, "init", "-q")
	gone := filepath.Join(base, "cwd")
	if err := os.Mkdir(gone, 0o755); err != nil {
		t.Fatal(err)
	}

	for _, c := range []struct {
		name, dir, want string
		setup           func(t *testing.T)
	}{
		{"a symlink loop", loop, "too many levels of symbolic links", nil},
		// rev-parse's answer has a line more than it should: it is not
		// read as some other repository.
		{"a newline in the work tree's path", newline, "git rev-parse: unexpected output", nil},
		// "." cannot be made absolute once the working directory is gone.
		{"relative to a removed working directory", ".", "no such file or directory", func(t *testing.T) {
			t.Chdir(gone)
			if err := os.Remove(gone); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.setup != nil {
				c.setup(t)
			}
			s := New()
			check := func(what string, err error) {
				t.Helper()
				if err == nil || !strings.Contains(err.Error(), c.want) {
					t.Errorf("%s: %v, want an error saying %q", what, err, c.want)
				}
			}
			_, err := s.Capture(t.Context(), c.dir, "refs/baton/t/1", "", now)
			check("capture", err)
			_, err = s.Restore(t.Context(), c.dir, emptyTreeSHA1)
			check("restore", err)
			_, err = s.Diff(t.Context(), c.dir, "", emptyTreeSHA1, 0)
			check("diff", err)
			check("delete refs", s.DeleteRefs(t.Context(), c.dir, "refs/baton/t/1"))
			if err := s.DeleteRefs(t.Context(), c.dir); err != nil {
				t.Errorf("delete no refs: %v", err)
			}
		})
	}
}

// A capture refuses a ref git would not take and a date git cannot write,
// and leaves no ref behind.
func TestCaptureRefusesBadInput(t *testing.T) {
	dir := newRepo(t)
	writeFiles(t, dir, map[string]string{"a.txt": "a\n"})
	s := New()
	for _, c := range []struct {
		name, ref, base string
		at              time.Time
		want            string
	}{
		{"no ref", "", "", now, "checkpoint: capture " + dir + ": no ref to point at the checkpoint"},
		{"a ref git refuses, no summary", "refs/baton/a..b", NoSummary, now,
			"checkpoint: capture " + dir + ": git update-ref: exit status 128: fatal: update_ref failed for ref 'refs/baton/a..b'"},
		{"a ref git refuses, with a summary", "refs/baton/a..b", "", now,
			"checkpoint: capture " + dir + ": git update-ref: exit status 128: fatal: update_ref failed for ref 'refs/baton/a..b'"},
		{"a date before 1970", "refs/baton/t/1", "", time.Date(1969, 12, 31, 0, 0, 0, 0, time.UTC),
			"checkpoint: capture " + dir + ": git commit-tree: exit status 128: fatal: invalid date format"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := s.Capture(t.Context(), dir, c.ref, c.base, c.at)
			if err == nil || !strings.HasPrefix(err.Error(), c.want) {
				t.Errorf("capture: %v, want %q", err, c.want)
			}
			if refs := gitT(t, dir, "for-each-ref", "refs/baton"); refs != "" {
				t.Errorf("refs after a failed capture:\n%s", refs)
			}
		})
	}
}

// isIndex says whether name holds a git index (its signature is DIRC).
func isIndex(t *testing.T, name string) bool {
	t.Helper()
	b, err := os.ReadFile(name)
	return err == nil && strings.HasPrefix(string(b), "DIRC")
}

// A cached index that does not work is dropped and the capture made again
// from the user's index: one git cannot read, one that is not a file, and
// one naming objects that were pruned since (its stat data says the files
// are unchanged, so git add would not write them again).
func TestCaptureRecoversFromBadCache(t *testing.T) {
	for _, c := range []struct {
		name   string
		damage func(t *testing.T, s *Service, dir, cache string)
	}{
		{"not an index", func(t *testing.T, _ *Service, _, cache string) {
			if err := os.WriteFile(cache, []byte("not an index"), 0o644); err != nil {
				t.Fatal(err)
			}
		}},
		{"a directory", func(t *testing.T, _ *Service, _, cache string) {
			if err := os.Remove(cache); err != nil {
				t.Fatal(err)
			}
			if err := os.Mkdir(cache, 0o755); err != nil {
				t.Fatal(err)
			}
		}},
		{"objects pruned", func(t *testing.T, s *Service, dir, _ string) {
			if err := s.DeleteRefs(t.Context(), dir, "refs/baton/t/1"); err != nil {
				t.Fatal(err)
			}
			gitT(t, dir, "prune", "--expire=now")
			if _, err := gitTErr(dir, "cat-file", "-e", "HEAD:old.txt"); err != nil {
				t.Fatal(err) // committed by the user: kept
			}
			blob := gitT(t, dir, "hash-object", "untracked.txt")
			if _, err := gitTErr(dir, "cat-file", "-e", blob); err == nil {
				t.Fatal("the blob of untracked.txt survived the prune")
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := newRepo(t)
			writeFiles(t, dir, map[string]string{"old.txt": "committed\n"})
			gitT(t, dir, "add", ".")
			gitT(t, dir, "commit", "-q", "-m", "init")
			writeFiles(t, dir, map[string]string{"untracked.txt": "only in checkpoints\n"})
			// Old times: git trusts the cached stat data rather than
			// hashing a file changed in the same second as the index.
			old := time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC)
			for _, name := range []string{"old.txt", "untracked.txt"} {
				if err := os.Chtimes(filepath.Join(dir, name), old, old); err != nil {
					t.Fatal(err)
				}
			}
			s := New()
			capture(t, s, dir, "refs/baton/t/1", NoSummary)
			cache := filepath.Join(gitT(t, dir, "rev-parse", "--absolute-git-dir"), "baton", cacheIndex)
			if !isIndex(t, cache) {
				t.Fatal("no cached index after a capture")
			}
			c.damage(t, s, dir, cache)
			writeFiles(t, dir, map[string]string{"new.txt": "new\n"})

			res := capture(t, s, dir, "refs/baton/t/2", NoSummary)
			want := map[string]file{"old.txt": {Content: "committed\n"}, "untracked.txt": {Content: "only in checkpoints\n"}, "new.txt": {Content: "new\n"}}
			if diff := cmp.Diff(want, treeFiles(t, dir, res.Commit)); diff != "" {
				t.Errorf("checkpoint after the cache went bad (-want +got):\n%s", diff)
			}
			if !isIndex(t, cache) {
				t.Error("the bad cache was not replaced by an index")
			}
		})
	}
}

// A user's index git cannot read makes captures and restores fail with
// git's complaint, and they change nothing; once the user removes it they
// work again.
func TestDamagedUserIndex(t *testing.T) {
	dir := newRepo(t)
	writeFiles(t, dir, map[string]string{"a.txt": "one\n"})
	gitT(t, dir, "add", ".")
	s := New()
	c1 := capture(t, s, dir, "refs/baton/t/1", NoSummary)
	writeFiles(t, dir, map[string]string{"a.txt": "two\n"})
	index := filepath.Join(dir, ".git", "index")
	if err := os.WriteFile(index, []byte("garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	const want = "index file smaller than expected"
	// With a cached index, git add works; the list of the user's ignored
	// files does not, nor, the cache dropped, does the copy of the index.
	if _, err := s.Capture(t.Context(), dir, "refs/baton/t/2", "", now); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("capture: %v, want git's complaint about the index", err)
	}
	if _, err := s.Restore(t.Context(), dir, c1.Commit); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("restore: %v, want git's complaint about the index", err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "a.txt")); string(b) != "two\n" {
		t.Errorf("a.txt is %q after the failed restore, want it untouched", b)
	}
	if refs := gitT(t, dir, "for-each-ref", "--format=%(refname)", "refs/baton"); refs != "refs/baton/t/1" {
		t.Errorf("refs after the failed capture: %q", refs)
	}
	if err := os.Remove(index); err != nil {
		t.Fatal(err)
	}
	res := capture(t, s, dir, "refs/baton/t/2", c1.Commit)
	if diff := cmp.Diff([]FileChange{{Path: "a.txt", Kind: KindModified, Additions: 1, Deletions: 1}}, res.Files); diff != "" {
		t.Errorf("capture without a user index (-want +got):\n%s", diff)
	}
}

// Renames (a deletion and an addition: checkpoints do not look for
// renames), deletions, binary content and paths git would quote are
// captured and restored as they are, both ways.
func TestRestoreOddPaths(t *testing.T) {
	dir := newRepo(t)
	files := map[string]string{
		"space dir/file name.txt": "spaces\n",
		"tab\there.txt":           "tab\n",
		"new\nline.txt":           "newline\n",
		"ünïcödé.txt":             "unicode\n",
		`"quoted".txt`:            "quotes\n",
		"-dash.txt":               "dash\n",
		"bin/blob.bin":            "\x00\xff\xfe binary\x00",
		"old name.txt":            "renamed later\n",
		"deleted.txt":             "deleted later\n",
	}
	writeFiles(t, dir, files)
	s := New()
	c1 := capture(t, s, dir, "refs/baton/t/1", "")
	var added []FileChange
	for p := range files {
		if p == "bin/blob.bin" {
			added = append(added, FileChange{Path: p, Kind: KindAdded, Binary: true})
			continue
		}
		added = append(added, FileChange{Path: p, Kind: KindAdded, Additions: 1})
	}
	slices.SortFunc(added, func(a, b FileChange) int { return strings.Compare(a.Path, b.Path) })
	if diff := cmp.Diff(added, c1.Files); diff != "" {
		t.Errorf("summary of the first checkpoint (-want +got):\n%s", diff)
	}
	atC1 := diskFiles(t, dir)

	for _, err := range []error{
		os.MkdirAll(filepath.Join(dir, "moved"), 0o755),
		os.Rename(filepath.Join(dir, "old name.txt"), filepath.Join(dir, "moved", "new name.txt")),
		os.Remove(filepath.Join(dir, "deleted.txt")),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	writeFiles(t, dir, map[string]string{"bin/blob.bin": "\x00\x01", "space dir/file name.txt": "changed\n", "tab\there.txt": "tab\nmore\n"})
	c2 := capture(t, s, dir, "refs/baton/t/2", c1.Commit)
	want := []FileChange{
		{Path: "bin/blob.bin", Kind: KindModified, Binary: true},
		{Path: "deleted.txt", Kind: KindDeleted, Deletions: 1},
		{Path: "moved/new name.txt", Kind: KindAdded, Additions: 1},
		{Path: "old name.txt", Kind: KindDeleted, Deletions: 1},
		{Path: "space dir/file name.txt", Kind: KindModified, Additions: 1, Deletions: 1},
		{Path: "tab\there.txt", Kind: KindModified, Additions: 1},
	}
	if diff := cmp.Diff(want, c2.Files); diff != "" {
		t.Errorf("summary of the second checkpoint (-want +got):\n%s", diff)
	}
	atC2 := diskFiles(t, dir)

	got, err := s.Restore(t.Context(), dir, c1.Commit)
	if err != nil {
		t.Fatal(err)
	}
	wantRestored := Restored{
		Written: []string{"bin/blob.bin", "deleted.txt", "old name.txt", "space dir/file name.txt", "tab\there.txt"},
		Removed: []string{"moved/new name.txt"},
	}
	if diff := cmp.Diff(wantRestored, got); diff != "" {
		t.Errorf("restore of the first checkpoint (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(atC1, diskFiles(t, dir)); diff != "" {
		t.Errorf("files after restoring the first checkpoint (-want +got):\n%s", diff)
	}
	if _, err := os.Lstat(filepath.Join(dir, "moved")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("moved/ is still there: %v", err)
	}

	got, err = s.Restore(t.Context(), dir, c2.Commit)
	if err != nil {
		t.Fatal(err)
	}
	wantRestored = Restored{
		Written: []string{"bin/blob.bin", "moved/new name.txt", "space dir/file name.txt", "tab\there.txt"},
		Removed: []string{"deleted.txt", "old name.txt"},
	}
	if diff := cmp.Diff(wantRestored, got); diff != "" {
		t.Errorf("restore of the second checkpoint (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(atC2, diskFiles(t, dir)); diff != "" {
		t.Errorf("files after restoring the second checkpoint (-want +got):\n%s", diff)
	}
}

// A restore that cannot finish says why: a save ref git refuses (nothing
// is touched), an object gone from the repository (git names the file),
// the lock held by another process until the context ends (nothing is
// touched).
func TestRestoreFailures(t *testing.T) {
	setup := func(t *testing.T) (s *Service, dir string, c1 Result) {
		dir = newRepo(t)
		writeFiles(t, dir, map[string]string{"a.txt": "one\n", "b.txt": "b\n"})
		s = New()
		c1 = capture(t, s, dir, "refs/baton/t/1", NoSummary)
		writeFiles(t, dir, map[string]string{"a.txt": "two\n", "c.txt": "c\n"})
		return s, dir, c1
	}
	untouched := func(t *testing.T, dir string) {
		t.Helper()
		want := map[string]file{"a.txt": {Content: "two\n"}, "b.txt": {Content: "b\n"}, "c.txt": {Content: "c\n"}}
		if diff := cmp.Diff(want, diskFiles(t, dir)); diff != "" {
			t.Errorf("files after the failed restore (-want +got):\n%s", diff)
		}
	}

	t.Run("a save ref git refuses", func(t *testing.T) {
		s, dir, c1 := setup(t)
		_, err := s.SaveAndRestore(t.Context(), dir, c1.Commit, "refs/baton/a..b", now)
		if err == nil || !strings.Contains(err.Error(), "git update-ref: exit status 128: fatal: update_ref failed for ref 'refs/baton/a..b'") {
			t.Errorf("restore: %v, want git's refusal of the ref", err)
		}
		untouched(t, dir)
	})

	t.Run("an object gone", func(t *testing.T) {
		s, dir, c1 := setup(t)
		blob := gitT(t, dir, "rev-parse", c1.Commit+":a.txt")
		if err := os.Remove(filepath.Join(dir, ".git", "objects", blob[:2], blob[2:])); err != nil {
			t.Fatal(err)
		}
		_, err := s.Restore(t.Context(), dir, c1.Commit)
		if want := "git checkout-index: exit status 1: error: unable to read sha1 file of a.txt (" + blob + ")"; err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("restore: %v, want %q", err, want)
		}
	})

	t.Run("lock held elsewhere", func(t *testing.T) {
		s, dir, c1 := setup(t)
		lock, err := os.OpenFile(filepath.Join(dir, ".git", "baton", "checkpoint.lock"), os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer lock.Close()
		if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		// The Service knows where dir is, so no git runs before the lock.
		_, err = s.Restore(ctx, dir, c1.Commit)
		if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "wait for lock") {
			t.Errorf("restore: %v, want it to give up waiting for the lock", err)
		}
		untouched(t, dir)
	})
}

// DeleteRefs refuses refs it cannot pass to git and refs git refuses, and
// then deletes none of them: the refs go in one transaction.
func TestDeleteRefsRefuses(t *testing.T) {
	dir := newRepo(t)
	writeFiles(t, dir, map[string]string{"a.txt": "a\n"})
	s := New()
	capture(t, s, dir, "refs/baton/t/1", NoSummary)
	for _, c := range []struct {
		ref, want string
	}{
		{"", `checkpoint: delete refs in ` + dir + `: invalid ref ""`},
		{"refs/baton/t/\x00x", `checkpoint: delete refs in ` + dir + `: invalid ref "refs/baton/t/\x00x"`},
		{"refs/baton/a..b", "checkpoint: delete refs in " + dir + ": git update-ref: exit status 128: fatal: invalid ref format: refs/baton/a..b"},
	} {
		if err := s.DeleteRefs(t.Context(), dir, "refs/baton/t/1", c.ref); err == nil || err.Error() != c.want {
			t.Errorf("delete %q: %v, want %q", c.ref, err, c.want)
		}
		if refs := gitT(t, dir, "for-each-ref", "--format=%(refname)", "refs/baton"); refs != "refs/baton/t/1" {
			t.Errorf("refs after deleting %q failed: %q, want refs/baton/t/1 kept", c.ref, refs)
		}
	}
}

// A diff cut inside its first line has no line to end at: it ends where it
// was cut, and the marker starts a line of its own. A diff of a commit
// that is not there is git's error.
func TestDiffEdges(t *testing.T) {
	dir := newRepo(t)
	writeFiles(t, dir, map[string]string{"a.txt": "a\n"})
	s := New()
	c1 := capture(t, s, dir, "refs/baton/t/1", NoSummary)
	whole, err := s.Diff(t.Context(), dir, "", c1.Commit, 0)
	if err != nil {
		t.Fatal(err)
	}
	cut, err := s.Diff(t.Context(), dir, "", c1.Commit, 5)
	if err != nil {
		t.Fatal(err)
	}
	want := Diff{Text: whole.Text[:5] + fmt.Sprintf("\n[baton: diff cut at 5 of %d bytes]\n", whole.Size), Truncated: true, Size: whole.Size}
	if diff := cmp.Diff(want, cut); diff != "" {
		t.Errorf("diff cut at 5 bytes (-want +got):\n%s", diff)
	}
	missing := strings.Repeat("1", 40)
	if _, err := s.Diff(t.Context(), dir, "", missing, 0); err == nil || !strings.HasPrefix(err.Error(), "checkpoint: diff "+dir+": git diff-tree: exit status 128: fatal: bad object "+missing) {
		t.Errorf("diff to a commit that is not there: %v", err)
	}
}

// In a repository of SHA-256 objects the empty tree is SHA-256's: a first
// summary and a diff from nothing are made against it.
func TestSHA256Repository(t *testing.T) {
	dir := t.TempDir()
	gitT(t, dir, "init", "-q", "--object-format=sha256")
	s := New()
	empty := capture(t, s, dir, "refs/baton/t/0", "")
	if tree := gitT(t, dir, "rev-parse", empty.Commit+"^{tree}"); tree != emptyTreeSHA256 {
		t.Errorf("tree of an empty checkpoint %s, want %s", tree, emptyTreeSHA256)
	}
	writeFiles(t, dir, map[string]string{"a.txt": "a\n"})
	res := capture(t, s, dir, "refs/baton/t/1", "")
	if diff := cmp.Diff([]FileChange{{Path: "a.txt", Kind: KindAdded, Additions: 1}}, res.Files); diff != "" {
		t.Errorf("summary against the empty tree (-want +got):\n%s", diff)
	}
	d, err := s.Diff(t.Context(), dir, "", res.Commit, 0)
	if err != nil || !strings.Contains(d.Text, "+++ b/a.txt\n@@ -0,0 +1 @@\n+a\n") {
		t.Errorf("diff from the empty tree: %v\n%s", err, d.Text)
	}
}

// Records git diff-tree would not write are refused, never half read.
func TestParseDiffTreeRefuses(t *testing.T) {
	for _, out := range []string{
		":100644 100644 abc def\x00a.txt\x00", // no status
		":100644 100644 abc def M\x00",        // no path
		"1\t2\x00",                            // numstat without a path
		"x\t1\ta.txt\x00",                     // numstat not a number
	} {
		if changes, stats, err := parseDiffTree([]byte(out)); err == nil {
			t.Errorf("parseDiffTree(%q) = %+v, %+v; want an error", out, changes, stats)
		}
	}
}

// copyIndex copies an index with its modification time, reports a missing
// one, and never writes over a file or copies what is not a file.
func TestCopyIndex(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	writeFiles(t, dir, map[string]string{"src": "DIRC index bytes", "taken": "mine"})
	mtime := time.Date(2020, 2, 2, 2, 2, 2, 0, time.UTC)
	if err := os.Chtimes(src, mtime, mtime); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(dir, "dst")
	if ok, err := copyIndex(src, dst); !ok || err != nil {
		t.Fatalf("copy: %v, %v", ok, err)
	}
	b, _ := os.ReadFile(dst)
	fi, err := os.Stat(dst)
	if err != nil || string(b) != "DIRC index bytes" || !fi.ModTime().Equal(mtime) {
		t.Errorf("copy holds %q modified %v (%v), want the source's bytes and time %v", b, fi.ModTime(), err, mtime)
	}

	if ok, err := copyIndex(filepath.Join(dir, "none"), filepath.Join(dir, "dst2")); ok || err != nil {
		t.Errorf("copy of a missing index: %v, %v; want false and no error", ok, err)
	}
	if _, err := os.Lstat(filepath.Join(dir, "dst2")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("copy of a missing index made a file: %v", err)
	}
	for name, c := range map[string]struct{ src, dst, want string }{
		"a source under a file": {filepath.Join(src, "x"), filepath.Join(dir, "d1"), "not a directory"},
		"a destination taken":   {src, filepath.Join(dir, "taken"), "file exists"},
		"a directory":           {dir, filepath.Join(dir, "d2"), "copy " + dir + ": "},
	} {
		if ok, err := copyIndex(c.src, c.dst); ok || err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, %v; want an error saying %q", name, ok, err, c.want)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "taken")); string(b) != "mine" {
		t.Errorf("a file in the way was written over: %q", b)
	}
}
