package worktree

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/baton-run/baton/host/internal/gitexec"
)

// MergeStatus is how a merge ended.
type MergeStatus string

const (
	Merged      MergeStatus = "merged"       // a new commit on Into
	FastForward MergeStatus = "fast_forward" // Into moved to the branch's head
	UpToDate    MergeStatus = "up_to_date"   // the branch was already in Into: nothing changed
	Conflict    MergeStatus = "conflict"     // the branch conflicts with Into: nothing changed
	Dirty       MergeStatus = "dirty"        // Into is checked out in a worktree with local changes: nothing changed
)

// MergeResult is what Merge did.
type MergeResult struct {
	Status    MergeStatus
	Into      string   // the branch merged into
	From      string   // Into's commit before
	Commit    string   // Into's commit after; "" when nothing changed
	Commits   []string // the branch's commits not in Into before (oldest first)
	Conflicts []string // conflicted paths, sorted (Status Conflict)
	Dirty     []string // local changes in Worktree, sorted (Status Dirty)
	Worktree  string   // the worktree where Into is checked out: updated, or (Status Dirty) refused; "" when none
}

// Merge merges branch into the branch into, in root's repository.
//
// It checks the merge first without touching any worktree (git
// merge-tree --write-tree, git 2.38 or later): a conflict changes nothing
// and lists every conflicted path. A branch already in into is up to
// date; into behind branch, without squash, fast-forwards; otherwise a
// merge commit of the merged tree is made (parents into and branch; with
// squash, into alone) with message by author ("" means git config in
// root, else Baton) at at.
//
// When into is checked out in a worktree, that worktree must have no
// local changes (untracked files count), or nothing changes and the
// result lists them; a clean one is updated as git merge would, index and
// files. into moves by compare-and-swap from the commit checked first.
func Merge(ctx context.Context, root, branch, into string, squash bool, message, author string, at time.Time) (MergeResult, error) {
	if err := checkVersion(ctx); err != nil {
		return MergeResult{}, err
	}
	if branch == into {
		return MergeResult{}, fmt.Errorf("merge %s into itself", branch)
	}
	ids, err := resolveAll(ctx, root, "refs/heads/"+branch+"^{commit}", "refs/heads/"+into+"^{commit}")
	if err != nil {
		return MergeResult{}, fmt.Errorf("merge %s into %s: %w", branch, into, err)
	}
	head, from := ids[0], ids[1]
	res := MergeResult{Into: into, From: from}
	if res.Commits, err = commitsBetween(ctx, root, from, head); err != nil {
		return MergeResult{}, fmt.Errorf("merge %s into %s: %w", branch, into, err)
	}
	if len(res.Commits) == 0 {
		res.Status = UpToDate
		return res, nil
	}

	tree, conflicts, err := mergeTree(ctx, root, from, head)
	if err != nil {
		return MergeResult{}, fmt.Errorf("merge %s into %s: %w", branch, into, err)
	}
	if len(conflicts) > 0 {
		res.Status, res.Conflicts = Conflict, conflicts
		return res, nil
	}
	wt, err := checkedOut(ctx, root, into)
	if err != nil {
		return MergeResult{}, fmt.Errorf("merge %s into %s: %w", branch, into, err)
	}
	res.Worktree = wt
	if wt != "" {
		if res.Dirty, err = localChanges(ctx, wt); err != nil {
			return MergeResult{}, fmt.Errorf("merge %s into %s: %w", branch, into, err)
		}
		if len(res.Dirty) > 0 {
			res.Status = Dirty
			return res, nil
		}
	}
	to, status, err := mergeCommit(ctx, root, branch, into, from, head, tree, squash, message, author, at)
	if err != nil {
		return MergeResult{}, err
	}
	if err := casBranch(ctx, root, into, to, from, "baton: merge "+branch); err != nil {
		return MergeResult{}, fmt.Errorf("merge %s into %s: %w", branch, into, err)
	}
	if wt != "" {
		// As git merge would: refresh the index's stat information (a
		// file touched but not changed would stop read-tree), then a
		// two-tree read-tree carries the clean worktree from the old
		// commit to the new one.
		if _, err := git(ctx, wt, "update-index", "-q", "--refresh"); err != nil {
			return MergeResult{}, fmt.Errorf("merge %s into %s: refresh the index of %s: %w", branch, into, wt, err)
		}
		if _, err := git(ctx, wt, "read-tree", "-m", "-u", from, to); err != nil {
			return MergeResult{}, fmt.Errorf("merge %s into %s: update the worktree %s: %w", branch, into, wt, err)
		}
	}
	res.Status, res.Commit = status, to
	return res, nil
}

// commitsBetween lists the commits reachable from head but not from base,
// oldest first.
func commitsBetween(ctx context.Context, root, base, head string) ([]string, error) {
	out, err := gitRead(ctx, root, "rev-list", "--reverse", base+".."+head)
	if err != nil {
		return nil, fmt.Errorf("list commits: %w", err)
	}
	if out == "" {
		return nil, nil
	}
	return strings.Split(out, "\n"), nil
}

// mergeTree merges ours and theirs without a worktree and returns the
// tree, or the conflicted paths.
func mergeTree(ctx context.Context, root, ours, theirs string) (tree string, conflicts []string, err error) {
	var out bytes.Buffer // kept when git exits 1, for a conflict
	_, err = gitexec.Cmd{Dir: root, Read: true, Stdout: &out}.Run(ctx,
		"merge-tree", "--write-tree", "--name-only", "--no-messages", "-z", ours, theirs)
	conflict := false
	if code := gitexec.ExitCode(err); code == 1 {
		conflict, err = true, nil
	}
	if err != nil {
		return "", nil, fmt.Errorf("check the merge: %w", err)
	}
	return parseMergeTree(out.String(), conflict)
}

// mergeCommit returns the commit into moves to and how: head itself for a
// fast-forward, else a new commit of tree.
func mergeCommit(ctx context.Context, root, branch, into, from, head, tree string, squash bool, message, author string, at time.Time) (string, MergeStatus, error) {
	if !squash {
		if _, err := gitRead(ctx, root, "merge-base", "--is-ancestor", from, head); err == nil {
			return head, FastForward, nil
		} else if gitexec.ExitCode(err) != 1 {
			return "", "", fmt.Errorf("merge %s into %s: %w", branch, into, err)
		}
	}
	if author == "" {
		a, err := configAuthor(ctx, root)
		if err != nil {
			return "", "", fmt.Errorf("merge %s into %s: %w", branch, into, err)
		}
		author = cmp.Or(a, defaultAuthor)
	}
	parents := []string{from, head}
	if squash {
		parents = parents[:1]
	}
	c, err := commitTree(ctx, root, tree, parents, message, author, at)
	if err != nil {
		return "", "", fmt.Errorf("merge %s into %s: %w", branch, into, err)
	}
	return c, Merged, nil
}

// checkedOut returns the worktree where branch is checked out, or "" when
// it is checked out nowhere (or only in a worktree whose directory is
// gone).
func checkedOut(ctx context.Context, root, branch string) (string, error) {
	list, err := listWorktrees(ctx, root)
	if err != nil {
		return "", err
	}
	for _, w := range list {
		if w.Branch != branch || w.Bare {
			continue
		}
		if _, err := os.Stat(w.Path); err != nil {
			continue
		}
		return w.Path, nil
	}
	return "", nil
}

// localChanges lists the paths git status reports in the worktree dir:
// staged, unstaged and untracked.
func localChanges(ctx context.Context, dir string) ([]string, error) {
	out, err := gitReadRaw(ctx, dir, "status", "--porcelain=v1", "-z", "--untracked-files=all", "--ignore-submodules=none")
	if err != nil {
		return nil, fmt.Errorf("read the status of %s: %w", dir, err)
	}
	return parseStatus(out)
}
