package checkpoint

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/baton-run/baton/host/internal/gitexec"
)

// cacheIndex is the name, in the state dir, of the index a Service keeps
// per worktree. Its stat data lets `git add` skip the files that did not
// change since the last capture, where a fresh index would hash them all.
const cacheIndex = "checkpoint-index"

// writeTree writes the tree of dir's files as `git add -A` would take them
// and returns its id. It must be called with the worktree locked.
//
// It works on a copy of the cached index (the first time, of the user's
// index), then renames the copy over the cache. If a cached index does not
// work, it is dropped and the capture is tried once more from the user's.
func writeTree(ctx context.Context, r repo) (string, error) {
	tree, fromCache, err := writeTreeWith(ctx, r, true)
	if err != nil && fromCache && ctx.Err() == nil {
		if rmErr := os.Remove(filepath.Join(r.stateDir(), cacheIndex)); rmErr == nil || errors.Is(rmErr, fs.ErrNotExist) {
			tree, _, err = writeTreeWith(ctx, r, false)
		}
	}
	return tree, err
}

func writeTreeWith(ctx context.Context, r repo, useCache bool) (tree string, fromCache bool, err error) {
	tmp, err := os.MkdirTemp(r.stateDir(), "capture-")
	if err != nil {
		return "", false, err
	}
	defer os.RemoveAll(tmp)
	idx := filepath.Join(tmp, "index")
	cache := filepath.Join(r.stateDir(), cacheIndex)
	userIndex := filepath.Join(r.gitDir, "index")

	if useCache {
		if fromCache, err = copyIndex(cache, idx); err != nil {
			return "", true, err // the cache is what does not work
		}
	}
	g := gitexec.Cmd{Dir: r.dir, Env: []string{"GIT_INDEX_FILE=" + idx}}
	if !fromCache {
		seeded, err := copyIndex(userIndex, idx)
		if err != nil {
			return "", false, err
		}
		if seeded {
			if err := dropUnmerged(ctx, r, g); err != nil {
				return "", false, err
			}
			if err := clearFlags(ctx, r, g); err != nil {
				return "", false, err
			}
		}
	}

	// While git add runs, list the ignored files the user's index tracks
	// (`git add -A` takes those, and only those, of the ignored files) and
	// those the capture index tracks. The capture index is read before or
	// after git add replaces it: add takes no ignored file, so either way
	// its list holds all the ignored files that should go.
	lsIgnored := []string{"ls-files", "-z", "-c", "-i", "--exclude-standard", "--", "."}
	waitUser := async(func() ([]byte, error) {
		if _, err := os.Stat(userIndex); err != nil {
			return nil, nil
		}
		return gitexec.Cmd{Dir: r.dir, Read: true}.Run(ctx, lsIgnored...)
	})
	waitOurs := async(func() ([]byte, error) {
		if _, err := os.Stat(idx); err != nil {
			return nil, nil
		}
		return gitexec.Cmd{Dir: r.dir, Env: g.Env, Read: true}.Run(ctx, lsIgnored...)
	})
	_, addErr := g.Run(ctx, "add", "-A", "--", ".")
	userIgnored, userErr := waitUser()
	ourIgnored, oursErr := waitOurs()
	if err := cmp.Or(ignoreDirIgnored(addErr), userErr, oursErr); err != nil {
		return "", fromCache, err
	}
	if err := syncIgnored(ctx, r, g, ourIgnored, userIgnored); err != nil {
		return "", fromCache, err
	}

	args := []string{"write-tree"}
	if r.prefix != "" {
		args = append(args, "--prefix="+r.prefix)
	}
	out, err := g.Run(ctx, args...)
	var ge *gitexec.Error
	switch {
	case errors.As(err, &ge) && r.prefix != "" && strings.Contains(ge.Stderr, "prefix "+r.prefix+" not found"):
		// Nothing under dir is in the index: the tree is empty.
		if out, err = g.Run(ctx, "mktree", "-z"); err != nil {
			return "", fromCache, err
		}
	case err != nil:
		return "", fromCache, err
	}
	if err := os.Rename(idx, cache); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", fromCache, err
	}
	return string(bytes.TrimSpace(out)), fromCache, nil
}

// ignoreDirIgnored returns err unless git add failed only because dir
// itself is ignored: then it has still updated the tracked files under dir.
func ignoreDirIgnored(err error) error {
	var ge *gitexec.Error
	if errors.As(err, &ge) && ge.ExitCode() == 1 && strings.Contains(ge.Stderr, "ignored by one of your .gitignore files") {
		return nil
	}
	return err
}

// async runs f in a goroutine; the returned func waits for its result and
// must be called.
func async[T any](f func() (T, error)) func() (T, error) {
	var v T
	var err error
	done := make(chan struct{})
	go func() {
		defer close(done)
		v, err = f()
	}()
	return func() (T, error) {
		<-done
		return v, err
	}
}

// copyIndex copies the index file src to dst, keeping its modification
// time: git compares file times with the index's own to find entries it
// cannot trust by stat alone, and a newer copy would hide those. It reports
// false if src does not exist.
func copyIndex(src, dst string) (bool, error) {
	in, err := os.Open(src)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil {
		return false, err
	}
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o666)
	if err != nil {
		return false, err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return false, fmt.Errorf("copy %s: %w", src, err)
	}
	if err := out.Close(); err != nil {
		return false, err
	}
	return true, os.Chtimes(dst, fi.ModTime(), fi.ModTime())
}

// dropUnmerged removes the conflicted entries a copy of the user's index
// may have: write-tree refuses them. Those under dir come back from the
// work tree with the next `git add`.
func dropUnmerged(ctx context.Context, r repo, g gitexec.Cmd) error {
	g.Dir = r.top
	out, err := g.Run(ctx, "ls-files", "-z", "-u")
	if err != nil || len(out) == 0 {
		return err
	}
	var paths []string
	for rec := range strings.SplitSeq(strings.TrimSuffix(string(out), "\x00"), "\x00") {
		if _, path, ok := strings.Cut(rec, "\t"); ok && !slices.Contains(paths, path) {
			paths = append(paths, path)
		}
	}
	g.Stdin = []byte(strings.Join(paths, "\x00") + "\x00")
	_, err = g.Run(ctx, "update-index", "-z", "--force-remove", "--stdin")
	return err
}

// clearFlags clears the skip-worktree and assume-unchanged bits the user's
// index may carry: `git add` does not look at such files, and a checkpoint
// must see every file the agent may change.
func clearFlags(ctx context.Context, r repo, g gitexec.Cmd) error {
	g.Dir = r.top
	out, err := g.Run(ctx, "ls-files", "-z", "-v")
	if err != nil || len(out) == 0 {
		return err
	}
	// One update-index call per flag: it takes one flag change per call.
	flagged := map[string][]string{}
	for rec := range strings.SplitSeq(strings.TrimSuffix(string(out), "\x00"), "\x00") {
		tag, path, ok := strings.Cut(rec, " ")
		if !ok { // unreachable: ls-files -v writes "<tag> <path>"
			continue
		}
		if tag == "S" || tag == "s" {
			flagged["--no-skip-worktree"] = append(flagged["--no-skip-worktree"], path)
		}
		if strings.ToLower(tag) == tag { // lower case: assume-unchanged
			flagged["--no-assume-unchanged"] = append(flagged["--no-assume-unchanged"], path)
		}
	}
	for flag, paths := range flagged {
		g.Stdin = []byte(strings.Join(paths, "\x00") + "\x00")
		if _, err := g.Run(ctx, "update-index", flag, "-z", "--stdin"); err != nil {
			return err
		}
	}
	return nil
}

// syncIgnored makes the ignored files in the capture index those the user
// tracks: a file that became ignored after an earlier capture took it
// leaves the index, and one the user has added with `git add -f` since the
// cache was made joins it. Both lists are NUL-separated paths.
func syncIgnored(ctx context.Context, r repo, g gitexec.Cmd, ourIgnored, userIgnored []byte) error {
	if len(ourIgnored) == 0 && len(userIgnored) == 0 {
		return nil
	}
	have, want := nulSet(ourIgnored), nulSet(userIgnored)
	var drop, add []string
	for p := range have {
		if !want[p] {
			drop = append(drop, p)
		}
	}
	for p := range want {
		if _, err := os.Lstat(filepath.Join(r.dir, filepath.FromSlash(p))); !have[p] && err == nil {
			add = append(add, p)
		}
	}
	if len(drop) > 0 {
		g := g
		g.Stdin = []byte(strings.Join(drop, "\x00") + "\x00")
		if _, err := g.Run(ctx, "update-index", "-z", "--force-remove", "--stdin"); err != nil {
			return err
		}
	}
	if len(add) > 0 {
		g := g
		g.Env = append(slices.Clip(g.Env), "GIT_LITERAL_PATHSPECS=1")
		g.Stdin = []byte(strings.Join(add, "\x00") + "\x00")
		if _, err := g.Run(ctx, "add", "-f", "--pathspec-from-file=-", "--pathspec-file-nul"); err != nil {
			return err
		}
	}
	return nil
}

func nulSet(b []byte) map[string]bool {
	set := map[string]bool{}
	for p := range strings.SplitSeq(string(b), "\x00") {
		if p != "" {
			set[p] = true
		}
	}
	return set
}
