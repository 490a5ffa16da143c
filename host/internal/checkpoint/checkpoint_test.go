package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-run/baton/sdk/clock"
)

var now = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func capture(t *testing.T, s *Service, dir, ref, base string) Result {
	t.Helper()
	res, err := s.Capture(t.Context(), dir, ref, base, now)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != StatusReady {
		t.Fatalf("capture %s: status %q (%s), want ready", dir, res.Status, res.Reason)
	}
	return res
}

func TestCaptureFreshRepo(t *testing.T) {
	dir := newRepo(t)
	writeFiles(t, dir, map[string]string{
		"a.txt":      "one\ntwo\n",
		"sub/b.txt":  "b\n",
		".gitignore": "*.log\n",
		"debug.log":  "noise\n",
	})
	gitT(t, dir, "add", "a.txt") // an index, but no commit yet
	gitT(t, dir, "stash", "list")
	before := readUserState(t, dir)

	res := capture(t, New(), dir, "refs/baton/t/1", "")

	if got := gitT(t, dir, "rev-parse", "refs/baton/t/1"); got != res.Commit {
		t.Errorf("refs/baton/t/1 is %s, want the checkpoint %s", got, res.Commit)
	}
	obj := gitT(t, dir, "cat-file", "commit", res.Commit)
	if strings.Contains(obj, "\nparent ") {
		t.Errorf("checkpoint commit has a parent:\n%s", obj)
	}
	wantAuthor := fmt.Sprintf("author Baton <baton@localhost> %d +0000", now.Unix())
	if !strings.Contains(obj, wantAuthor) || !strings.Contains(obj, "committer Baton <baton@localhost>") {
		t.Errorf("checkpoint commit:\n%s\nwant %q and the same committer", obj, wantAuthor)
	}
	want := map[string]file{".gitignore": {Content: "*.log\n"}, "a.txt": {Content: "one\ntwo\n"}, "sub/b.txt": {Content: "b\n"}}
	if diff := cmp.Diff(want, treeFiles(t, dir, res.Commit)); diff != "" {
		t.Errorf("checkpoint tree (-want +got):\n%s", diff)
	}
	wantFiles := []FileChange{
		{Path: ".gitignore", Kind: KindAdded, Additions: 1},
		{Path: "a.txt", Kind: KindAdded, Additions: 2},
		{Path: "sub/b.txt", Kind: KindAdded, Additions: 1},
	}
	if diff := cmp.Diff(wantFiles, res.Files); diff != "" {
		t.Errorf("summary against the empty tree (-want +got):\n%s", diff)
	}
	checkUserState(t, dir, before)

	// The same files at the same time give the same commit.
	if again := capture(t, New(), dir, "refs/baton/t/2", ""); again.Commit != res.Commit {
		t.Errorf("second capture of unchanged files is %s, want %s", again.Commit, res.Commit)
	}
	// A first checkpoint asks for no summary.
	if first := capture(t, New(), dir, "refs/baton/t/3", NoSummary); first.Commit != res.Commit || first.Files != nil {
		t.Errorf("capture without a summary: %+v", first)
	}
}

func TestCaptureSummaryKinds(t *testing.T) {
	dir := newRepo(t)
	writeFiles(t, dir, map[string]string{
		"mod.txt":   "a\nb\nc\n",
		"del.txt":   "x\ny\n",
		"run.sh":    "echo hi\n",
		"kind":      "was a file\n",
		"same.txt":  "same\n",
		"image.bin": "\x00\x01\x02",
	})
	s := New()
	c1 := capture(t, s, dir, "refs/baton/t/1", "")

	writeFiles(t, dir, map[string]string{
		"mod.txt":   "a\nB\nc\nd\n",
		"new/n.txt": "1\n2\n3\n",
		"image.bin": "\x00\x03",
	})
	for _, err := range []error{
		os.Remove(filepath.Join(dir, "del.txt")),
		os.Chmod(filepath.Join(dir, "run.sh"), 0o755),
		os.Remove(filepath.Join(dir, "kind")),
		os.Symlink("same.txt", filepath.Join(dir, "kind")),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	c2 := capture(t, s, dir, "refs/baton/t/2", c1.Commit)

	want := []FileChange{
		{Path: "del.txt", Kind: KindDeleted, Deletions: 2},
		{Path: "image.bin", Kind: KindModified, Binary: true},
		{Path: "kind", Kind: KindTypeChanged, Additions: 1, Deletions: 1},
		{Path: "mod.txt", Kind: KindModified, Additions: 2, Deletions: 1},
		{Path: "new/n.txt", Kind: KindAdded, Additions: 3},
		{Path: "run.sh", Kind: KindModified},
	}
	if diff := cmp.Diff(want, c2.Files); diff != "" {
		t.Errorf("summary against the first checkpoint (-want +got):\n%s", diff)
	}
}

func TestCaptureMissing(t *testing.T) {
	plain := t.TempDir()
	t.Setenv("GIT_CEILING_DIRECTORIES", filepath.Dir(plain)) // even if the temp dir is in a repo

	res, err := New().Capture(t.Context(), plain, "refs/baton/t/1", "", now)
	if err != nil {
		t.Fatalf("capture outside git: %v, want no error", err)
	}
	if res.Status != StatusMissing || !strings.Contains(res.Reason, "not in a git repository") {
		t.Errorf("capture outside git: %+v, want missing because it is not in a git repository", res)
	}

	res, err = New().Capture(t.Context(), filepath.Join(plain, "gone"), "refs/baton/t/1", "", now)
	if err != nil || res.Status != StatusMissing || !strings.Contains(res.Reason, "does not exist") {
		t.Errorf("capture of a dir that does not exist: %+v, %v; want missing", res, err)
	}

	t.Run("git not installed", func(t *testing.T) {
		repo := newRepo(t)
		t.Setenv("PATH", t.TempDir())
		res, err := New().Capture(t.Context(), repo, "refs/baton/t/1", "", now)
		if err != nil || res.Status != StatusMissing || res.Reason != "git is not installed" {
			t.Errorf("capture without git: %+v, %v; want missing because git is not installed", res, err)
		}
	})
}

func TestRestore(t *testing.T) {
	dir := newRepo(t)
	writeFiles(t, dir, map[string]string{
		".gitignore":     "*.log\n",
		"keep.txt":       "unchanged\n",
		"edit.txt":       "first\n",
		"gone/deep.txt":  "deleted later\n",
		"tool.sh":        "#!/bin/sh\n",
		"build.log":      "ignored v1\n",
		"dir/other.txt":  "stays\n",
		"untracked.txt":  "not committed\n",
		"staged/new.txt": "staged\n",
	})
	if err := os.Chmod(filepath.Join(dir, "tool.sh"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("keep.txt", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	gitT(t, dir, "add", ".gitignore", "keep.txt", "edit.txt", "gone", "tool.sh", "link", "dir")
	gitT(t, dir, "commit", "-q", "-m", "init")
	gitT(t, dir, "add", "staged")
	s := New()
	c1 := capture(t, s, dir, "refs/baton/t/1", "")
	want := diskFiles(t, dir)
	delete(want, "build.log")

	// An old mtime on the unchanged file shows whether restore rewrites it.
	keep := filepath.Join(dir, "keep.txt")
	old := time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC)
	if err := os.Chtimes(keep, old, old); err != nil {
		t.Fatal(err)
	}
	keepBefore := stat(t, keep)

	if err := os.Remove(filepath.Join(dir, "gone", "deep.txt")); err != nil {
		t.Fatal(err)
	}
	writeFiles(t, dir, map[string]string{
		"edit.txt":          "second\n",
		"build.log":         "ignored v2\n",
		"later/a/b.txt":     "created later\n",
		"later/a/c.txt":     "created later\n",
		"dir/later.txt":     "created later\n",
		"gone/deep.txt/x":   "a file where a file was",
		"untracked.txt.bak": "backup\n",
	})
	for _, err := range []error{
		os.Remove(filepath.Join(dir, "link")),
		os.WriteFile(filepath.Join(dir, "link"), []byte("now a file\n"), 0o644),
		os.Chmod(filepath.Join(dir, "tool.sh"), 0o644),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	capture(t, s, dir, "refs/baton/t/2", c1.Commit)
	before := readUserState(t, dir)

	got, err := s.Restore(t.Context(), dir, c1.Commit)
	if err != nil {
		t.Fatal(err)
	}

	wantRestored := Restored{
		Written: []string{"edit.txt", "gone/deep.txt", "link", "tool.sh"},
		Removed: []string{"dir/later.txt", "gone/deep.txt/x", "later/a/b.txt", "later/a/c.txt", "untracked.txt.bak"},
	}
	if diff := cmp.Diff(wantRestored, got); diff != "" {
		t.Errorf("restored paths (-want +got):\n%s", diff)
	}
	disk := diskFiles(t, dir)
	if b := disk["build.log"]; b.Content != "ignored v2\n" {
		t.Errorf("ignored build.log is %q after restore, want it left alone (%q)", b.Content, "ignored v2\n")
	}
	delete(disk, "build.log")
	if diff := cmp.Diff(want, disk); diff != "" {
		t.Errorf("files after restore (-checkpoint +disk):\n%s", diff)
	}
	if _, err := os.Lstat(filepath.Join(dir, "later")); !os.IsNotExist(err) {
		t.Errorf("later/ still exists after its files were removed (%v)", err)
	}
	if _, err := os.Lstat(filepath.Join(dir, "dir")); err != nil {
		t.Errorf("dir/ is gone, but it still has a checkpointed file: %v", err)
	}
	if keepAfter := stat(t, keep); keepAfter != keepBefore {
		t.Errorf("unchanged keep.txt was rewritten: %+v, was %+v", keepAfter, keepBefore)
	}
	checkUserState(t, dir, before)

	// Restoring again finds nothing to do.
	again, err := s.Restore(t.Context(), dir, c1.Commit)
	if err != nil {
		t.Fatal(err)
	}
	if len(again.Written)+len(again.Removed) != 0 {
		t.Errorf("second restore touched %+v, want nothing", again)
	}
}

type fileStat struct {
	ino   uint64
	mtime time.Time
}

func stat(t *testing.T, name string) fileStat {
	t.Helper()
	fi, err := os.Lstat(name)
	if err != nil {
		t.Fatal(err)
	}
	return fileStat{ino: fi.Sys().(*syscall.Stat_t).Ino, mtime: fi.ModTime()}
}

func TestSubdirectory(t *testing.T) {
	top := newRepo(t)
	writeFiles(t, top, map[string]string{
		"outside.txt":   "outside v1\n",
		"w/a.txt":       "a v1\n",
		"w/deep/b.txt":  "b v1\n",
		"other/c.txt":   "c v1\n",
		"w/.gitignore":  "tmp/\n",
		"w/tmp/scratch": "ignored\n",
	})
	gitT(t, top, "add", ".")
	gitT(t, top, "commit", "-q", "-m", "init")
	dir := filepath.Join(top, "w")
	s := New()
	c1 := capture(t, s, dir, "refs/baton/t/1", "")

	want := map[string]file{".gitignore": {Content: "tmp/\n"}, "a.txt": {Content: "a v1\n"}, "deep/b.txt": {Content: "b v1\n"}}
	if diff := cmp.Diff(want, treeFiles(t, top, c1.Commit)); diff != "" {
		t.Errorf("subdirectory checkpoint tree (-want +got):\n%s", diff)
	}
	if len(c1.Files) != 3 || c1.Files[1].Path != "a.txt" {
		t.Errorf("summary %+v, want the three files of w/ by paths relative to it", c1.Files)
	}

	writeFiles(t, top, map[string]string{
		"outside.txt":   "outside v2\n",
		"new-outside":   "x\n",
		"other/c.txt":   "c v2\n",
		"w/a.txt":       "a v2\n",
		"w/new/n.txt":   "n\n",
		"w/tmp/scratch": "ignored v2\n",
	})
	before := readUserState(t, top)
	got, err := s.Restore(t.Context(), dir, c1.Commit)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(Restored{Written: []string{"a.txt"}, Removed: []string{"new/n.txt"}}, got); diff != "" {
		t.Errorf("restored paths (-want +got):\n%s", diff)
	}
	disk := diskFiles(t, top)
	for path, content := range map[string]string{
		"outside.txt": "outside v2\n", "new-outside": "x\n", "other/c.txt": "c v2\n",
		"w/a.txt": "a v1\n", "w/deep/b.txt": "b v1\n", "w/tmp/scratch": "ignored v2\n",
	} {
		if disk[path].Content != content {
			t.Errorf("%s is %q after restoring w/, want %q", path, disk[path].Content, content)
		}
	}
	if _, ok := disk["w/new/n.txt"]; ok {
		t.Errorf("w/new/n.txt survived the restore")
	}
	checkUserState(t, top, before)

	t.Run("nothing checkpointable", func(t *testing.T) {
		empty := filepath.Join(top, "w", "tmp") // only ignored files
		res := capture(t, s, empty, "refs/baton/t/empty", "")
		if tree := gitT(t, top, "rev-parse", res.Commit+"^{tree}"); tree != emptyTreeSHA1 || len(res.Files) != 0 {
			t.Errorf("checkpoint of an ignored dir: tree %s, files %+v; want the empty tree", tree, res.Files)
		}
	})
}

func TestDiff(t *testing.T) {
	dir := newRepo(t)
	writeFiles(t, dir, map[string]string{"a.txt": "old line\n", "big.txt": strings.Repeat("x\n", 100)})
	s := New()
	c1 := capture(t, s, dir, "refs/baton/t/1", "")
	writeFiles(t, dir, map[string]string{"a.txt": "new line\n", "big.txt": strings.Repeat("y\n", 100)})
	c2 := capture(t, s, dir, "refs/baton/t/2", c1.Commit)

	d, err := s.Diff(t.Context(), dir, c1.Commit, c2.Commit, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(d.Text, "--- a/a.txt\n+++ b/a.txt\n") || !strings.Contains(d.Text, "-old line\n+new line\n") {
		t.Errorf("diff does not show the change to a.txt:\n%s", d.Text)
	}
	if d.Truncated || d.Size != int64(len(d.Text)) {
		t.Errorf("whole diff: truncated %v, size %d for %d bytes of text", d.Truncated, d.Size, len(d.Text))
	}

	cut, err := s.Diff(t.Context(), dir, c1.Commit, c2.Commit, 100)
	if err != nil {
		t.Fatal(err)
	}
	body, marker, ok := strings.Cut(cut.Text, "[baton: diff cut at ")
	if !cut.Truncated || cut.Size != d.Size || !ok || len(body) > 100 || !strings.HasPrefix(d.Text, body) {
		t.Errorf("diff cut at 100 bytes: truncated %v, size %d (want %d), text:\n%s", cut.Truncated, cut.Size, d.Size, cut.Text)
	}
	if want := fmt.Sprintf("%d of %d bytes]\n", len(body), d.Size); marker != want {
		t.Errorf("marker ends %q, want %q", marker, want)
	}

	first, err := s.Diff(t.Context(), dir, "", c1.Commit, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(first.Text, "new file mode 100644") || !strings.Contains(first.Text, "+old line\n") {
		t.Errorf("diff from the empty tree:\n%s", first.Text)
	}
}

func TestDeleteRefs(t *testing.T) {
	dir := newRepo(t)
	writeFiles(t, dir, map[string]string{"a.txt": "a\n"})
	s := New()
	capture(t, s, dir, "refs/baton/t/1", "")
	capture(t, s, dir, "refs/baton/t/2", "")

	if err := s.DeleteRefs(t.Context(), dir, "refs/baton/t/1", "refs/baton/t/2", "refs/baton/t/never"); err != nil {
		t.Fatal(err)
	}
	if refs := gitT(t, dir, "for-each-ref", "refs/baton"); refs != "" {
		t.Errorf("refs left after delete:\n%s", refs)
	}
	if err := s.DeleteRefs(t.Context(), dir, "refs/baton/t/1"); err != nil {
		t.Errorf("deleting a deleted ref: %v", err)
	}
}

// Services in one process stand in for two processes: each has its own
// in-process locks, so only the file lock keeps them apart.
func TestConcurrentCaptures(t *testing.T) {
	dir := newRepo(t)
	writeFiles(t, dir, map[string]string{"a.txt": "a\n", "b/c.txt": "c\n"})
	services := []*Service{New(), New()}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := range 8 {
		wg.Go(func() {
			ref := fmt.Sprintf("refs/baton/t/%d", i)
			res, err := services[i%2].Capture(t.Context(), dir, ref, "", now)
			if err == nil && res.Status != StatusReady {
				err = fmt.Errorf("%s: status %s", ref, res.Status)
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if n := len(strings.Fields(gitT(t, dir, "for-each-ref", "--format=%(objectname)", "refs/baton"))); n != 8 {
		t.Errorf("%d checkpoint refs, want 8", n)
	}
}

// A capture that finds the worktree's file lock held by another process
// (another Service here: only the file lock keeps two apart) tries it
// again every lockPoll of its clock until it is free, and gives up when its
// context ends, not later.
func TestLockWaitPollsOnTheClock(t *testing.T) {
	dir := newRepo(t)
	writeFiles(t, dir, map[string]string{"a.txt": "a\n"})
	r, _, err := open(t.Context(), dir)
	if err != nil {
		t.Fatal(err)
	}
	holder := New()
	unlock, err := holder.lock(t.Context(), r)
	if err != nil {
		t.Fatal(err)
	}
	f := clock.NewFake(now)
	waiter := New(WithClock(f))
	guard, cancelGuard := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancelGuard()

	type result struct {
		res Result
		err error
	}
	done := make(chan result, 1)
	go func() {
		res, err := waiter.Capture(t.Context(), dir, "refs/baton/t/1", "", now)
		done <- result{res, err}
	}()
	for range 3 { // held: each try finds it so and waits for the next
		if err := f.WaitTimers(guard, 1); err != nil {
			t.Fatalf("the capture does not wait on its clock: %v", err)
		}
		if diff := cmp.Diff([]time.Duration{lockPoll}, f.Pending()); diff != "" {
			t.Fatalf("pending timers (-want +got):\n%s", diff)
		}
		select {
		case got := <-done:
			t.Fatalf("capture while the lock is held returned %+v, %v", got.res, got.err)
		default:
		}
		f.Advance(lockPoll)
	}
	if err := f.WaitTimers(guard, 1); err != nil {
		t.Fatal(err)
	}
	unlock()
	f.Advance(lockPoll)
	select {
	case got := <-done:
		if got.err != nil || got.res.Status != StatusReady {
			t.Fatalf("capture once the lock is free = %+v, %v", got.res, got.err)
		}
		if ref := gitT(t, dir, "rev-parse", "refs/baton/t/1"); ref != got.res.Commit {
			t.Errorf("ref at %s, want %s", ref, got.res.Commit)
		}
	case <-guard.Done():
		t.Fatal("capture still waits once the lock is free")
	}

	// Given up when the context ends, with its cause.
	unlock, err = holder.lock(t.Context(), r)
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	stop := errors.New("the run was cancelled")
	ctx, cancel := context.WithCancelCause(t.Context())
	go func() {
		res, err := waiter.Capture(ctx, dir, "refs/baton/t/2", "", now)
		done <- result{res, err}
	}()
	if err := f.WaitTimers(guard, 1); err != nil {
		t.Fatal(err)
	}
	cancel(stop)
	select {
	case got := <-done:
		if !errors.Is(got.err, stop) || !strings.Contains(got.err.Error(), "wait for lock") {
			t.Errorf("capture whose context ends while it waits = %v; want it to give up waiting with %v", got.err, stop)
		}
	case <-guard.Done():
		t.Fatal("capture still waits after its context ended")
	}
	if p := f.Pending(); len(p) != 0 {
		t.Errorf("timers left pending: %v", p)
	}
}

func TestLinkedWorktree(t *testing.T) {
	main := newRepo(t)
	writeFiles(t, main, map[string]string{"a.txt": "a\n"})
	gitT(t, main, "add", ".")
	gitT(t, main, "commit", "-q", "-m", "init")
	wt := filepath.Join(t.TempDir(), "wt")
	gitT(t, main, "worktree", "add", "-q", wt)
	writeFiles(t, wt, map[string]string{"b.txt": "b\n"})

	res := capture(t, New(), wt, "refs/baton/t/1", "")
	if diff := cmp.Diff([]FileChange{{Path: "a.txt", Kind: KindAdded, Additions: 1}, {Path: "b.txt", Kind: KindAdded, Additions: 1}}, res.Files); diff != "" {
		t.Errorf("worktree checkpoint (-want +got):\n%s", diff)
	}
	gitDir := gitT(t, wt, "rev-parse", "--absolute-git-dir")
	if _, err := os.Stat(filepath.Join(gitDir, "baton", cacheIndex)); err != nil {
		t.Errorf("no cached index in the worktree's git dir: %v", err)
	}
}

func TestIgnoredFilesFollowUserIndex(t *testing.T) {
	dir := newRepo(t)
	writeFiles(t, dir, map[string]string{"a.txt": "a\n", "out/gen.txt": "generated\n"})
	s := New()
	c1 := capture(t, s, dir, "refs/baton/t/1", "")
	if _, ok := treeFiles(t, dir, c1.Commit)["out/gen.txt"]; !ok {
		t.Fatal("out/gen.txt not in the first checkpoint")
	}

	// Ignored now: git add -A would not take it any more.
	writeFiles(t, dir, map[string]string{".gitignore": "out/\nforced.txt\n", "forced.txt": "forced\n"})
	// Ignored but tracked by the user: git add -A takes it.
	gitT(t, dir, "add", "-f", "forced.txt")
	c2 := capture(t, s, dir, "refs/baton/t/2", c1.Commit)
	want := map[string]file{".gitignore": {Content: "out/\nforced.txt\n"}, "a.txt": {Content: "a\n"}, "forced.txt": {Content: "forced\n"}}
	if diff := cmp.Diff(want, treeFiles(t, dir, c2.Commit)); diff != "" {
		t.Errorf("checkpoint after ignore rules changed (-want +got):\n%s", diff)
	}
}

func TestCaptureErrors(t *testing.T) {
	dir := newRepo(t)
	writeFiles(t, dir, map[string]string{"a.txt": "a\n"})
	_, err := New().Capture(t.Context(), dir, "refs/baton/t/1", "0123456789012345678901234567890123456789", now)
	if err == nil || !strings.HasPrefix(err.Error(), "checkpoint: capture "+dir+": git diff-tree: exit status 128: fatal: ") {
		t.Errorf("capture against a base that does not exist: %v", err)
	}
	if _, err := New().Restore(t.Context(), dir, "nope"); err == nil || !strings.Contains(err.Error(), "git diff-tree") {
		t.Errorf("restore to a commit that does not exist: %v", err)
	}
}

// A file changed in the same second as the capture before, keeping its
// size, has the stat data the cached index recorded (git compares whole
// seconds unless built with USE_NSEC). Git still notices because the index
// is no older than the file ("racily clean"), so the copy of the cached
// index a capture works on must keep the cache's time. The instants are
// set, not waited for: the file, before and after, and the cached index
// get one modification time, and the change time, which a test cannot
// set, is kept out of git's comparison (core.trustctime).
func TestCaptureSeesSameSecondChange(t *testing.T) {
	dir := newRepo(t)
	gitT(t, dir, "config", "core.trustctime", "false")
	name := filepath.Join(dir, "f.txt")
	at := time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC) // before any real index is written
	touch := func(path string) {
		t.Helper()
		if err := os.Chtimes(path, at, at); err != nil {
			t.Fatal(err)
		}
	}
	s := New()
	writeFiles(t, dir, map[string]string{"f.txt": "aaaa"})
	touch(name)
	capture(t, s, dir, "refs/baton/t/1", "")
	writeFiles(t, dir, map[string]string{"f.txt": "bbbb"})
	touch(name)
	r, _, err := open(t.Context(), dir)
	if err != nil {
		t.Fatal(err)
	}
	touch(filepath.Join(r.stateDir(), cacheIndex)) // written in the second f.txt changed
	res := capture(t, s, dir, "refs/baton/t/2", "")
	if got := treeFiles(t, dir, res.Commit)["f.txt"].Content; got != "bbbb" {
		b, _ := os.ReadFile(name)
		t.Errorf("checkpoint has f.txt %q, want %q (on disk %q)", got, "bbbb", b)
	}
}

func TestCaptureEmptyRepo(t *testing.T) {
	dir := newRepo(t)
	res := capture(t, New(), dir, "refs/baton/t/1", "")
	if tree := gitT(t, dir, "rev-parse", res.Commit+"^{tree}"); tree != emptyTreeSHA1 || len(res.Files) != 0 {
		t.Errorf("checkpoint of an empty repo: tree %s, files %+v; want the empty tree", tree, res.Files)
	}
}

// A merge conflict leaves unmerged entries in the user's index, which
// write-tree refuses; the checkpoint takes the file as it is on disk.
func TestCaptureDuringMergeConflict(t *testing.T) {
	dir := newRepo(t)
	writeFiles(t, dir, map[string]string{"f.txt": "base\n", "other/g.txt": "g\n"})
	gitT(t, dir, "add", ".")
	gitT(t, dir, "commit", "-q", "-m", "base")
	gitT(t, dir, "checkout", "-q", "-b", "side")
	writeFiles(t, dir, map[string]string{"f.txt": "side\n"})
	gitT(t, dir, "commit", "-q", "-am", "side")
	gitT(t, dir, "checkout", "-q", "main")
	writeFiles(t, dir, map[string]string{"f.txt": "main\n"})
	gitT(t, dir, "commit", "-q", "-am", "main")
	if _, err := gitTErr(dir, "merge", "-q", "side"); err == nil {
		t.Fatal("merge did not conflict")
	}
	before := readUserState(t, dir)

	for _, sub := range []string{"other", ""} { // the conflict is outside "other"
		res := capture(t, New(), filepath.Join(dir, sub), "refs/baton/t/"+sub+"x", "")
		files := treeFiles(t, dir, res.Commit)
		if sub == "" && !strings.Contains(files["f.txt"].Content, "<<<<<<<") {
			t.Errorf("checkpoint has f.txt %q, want it with conflict markers as on disk", files["f.txt"].Content)
		}
		if sub == "other" && len(files) != 1 {
			t.Errorf("checkpoint of other/ has %v, want g.txt only", files)
		}
	}
	checkUserState(t, dir, before)
}

func TestCanceled(t *testing.T) {
	dir := newRepo(t)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := New().Capture(ctx, dir, "refs/baton/t/1", "", now); !errors.Is(err, context.Canceled) {
		t.Errorf("capture with a canceled context: %v, want context.Canceled", err)
	}
}

// Files the user flagged skip-worktree or assume-unchanged are still seen:
// an agent's change to them is kept, and a rollback undoes it.
func TestFlaggedFilesAreSeen(t *testing.T) {
	dir := newRepo(t)
	writeFiles(t, dir, map[string]string{"local.cfg": "mine\n", "other.cfg": "theirs\n"})
	gitT(t, dir, "add", ".")
	gitT(t, dir, "update-index", "--skip-worktree", "local.cfg")
	gitT(t, dir, "update-index", "--assume-unchanged", "other.cfg")
	s := New()
	c1 := capture(t, s, dir, "refs/baton/t/1", NoSummary)
	writeFiles(t, dir, map[string]string{"local.cfg": "agent\n", "other.cfg": "agent too\n"})
	c2 := capture(t, s, dir, "refs/baton/t/2", c1.Commit)
	if len(c2.Files) != 2 {
		t.Fatalf("summary: %+v", c2.Files)
	}
	if _, err := s.Restore(t.Context(), dir, c1.Commit); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"local.cfg": "mine\n", "other.cfg": "theirs\n"} {
		if b, _ := os.ReadFile(filepath.Join(dir, name)); string(b) != want {
			t.Errorf("%s after the rollback = %q, want %q", name, b, want)
		}
	}
	if got := gitT(t, dir, "ls-files", "-v", "local.cfg", "other.cfg"); got != "S local.cfg\nh other.cfg" {
		t.Errorf("the user's flags changed: %q", got)
	}
}

// A Service remembers where a directory is in git only while that git dir
// is there.
func TestRepoRememberedWhileItExists(t *testing.T) {
	dir := newRepo(t)
	writeFiles(t, dir, map[string]string{"a.txt": "a\n"})
	s := New()
	capture(t, s, dir, "refs/baton/t/1", NoSummary)
	if err := os.RemoveAll(filepath.Join(dir, ".git")); err != nil {
		t.Fatal(err)
	}
	res, err := s.Capture(t.Context(), dir, "refs/baton/t/2", "", now)
	if err != nil || res.Status != StatusMissing {
		t.Fatalf("capture after the repository went: %+v %v", res, err)
	}
}

// Outside git no git process is needed to say so; the environment can
// still point git at a repository.
func TestGitBelow(t *testing.T) {
	plain := t.TempDir()
	if gitBelow(plain) {
		t.Skip("the temp dir is inside a repository here")
	}
	repoDir := newRepo(t)
	sub := filepath.Join(repoDir, "a", "b")
	os.MkdirAll(sub, 0o755)
	if !gitBelow(sub) {
		t.Error("a subdirectory of a repository")
	}
	t.Setenv("GIT_DIR", filepath.Join(repoDir, ".git"))
	if !gitBelow(plain) {
		t.Error("GIT_DIR set")
	}
}

// SaveAndRestore keeps the files as they were before it restores.
func TestSaveAndRestore(t *testing.T) {
	dir := newRepo(t)
	writeFiles(t, dir, map[string]string{"a.txt": "one\n"})
	s := New()
	c1 := capture(t, s, dir, "refs/baton/t/1", NoSummary)
	writeFiles(t, dir, map[string]string{"a.txt": "two\n", "b.txt": "new\n"})
	res, err := s.SaveAndRestore(t.Context(), dir, c1.Commit, "refs/baton/t/pre", now)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]file{"a.txt": {Content: "two\n"}, "b.txt": {Content: "new\n"}}
	if diff := cmp.Diff(want, treeFiles(t, dir, res.Saved)); diff != "" || gitT(t, dir, "rev-parse", "refs/baton/t/pre") != res.Saved {
		t.Errorf("saved files (-want +got):\n%s", diff)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "a.txt")); string(b) != "one\n" || len(res.Removed) != 1 {
		t.Errorf("restored a.txt = %q, removed %q", b, res.Removed)
	}
}
