package worktree

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// Commit is one completed run to record on a thread's branch.
type Commit struct {
	Dir     string    // the thread's worktree (Spec.Path)
	Branch  string    // the thread's branch
	Parent  string    // the commit the branch must be at now: the previous run's commit, or the base
	Tree    string    // the run's tree, or a commit (a checkpoint) whose tree it is
	Message string    // the whole message: subject, blank line, body, trailers; the caller builds it
	Author  string    // "Name <email>"; "" means git config in Dir, else Baton <baton@localhost>
	Trailer string    // a line in Message that only this run's commit has ("Baton-Run: run_123"), to recognize a replay
	At      time.Time // author and committer date
}

// CommitRun records a run as a commit on its branch and returns the
// commit, or "" when the run changed nothing (Tree is Parent's tree): then
// nothing is written. Branch must exist.
//
// The branch moves from Parent to the new commit by compare-and-swap, and
// then the worktree's index is made to match it without touching the
// worktree's files, so git status in Dir is clean when the files are
// those of the commit. Called again after it succeeded (or crashed after
// moving the branch), it finds the branch at a commit of Tree on Parent
// whose message holds Trailer, and returns that commit. A branch anywhere
// else is an error naming both commits.
func CommitRun(ctx context.Context, c Commit) (string, error) {
	ids, err := resolveAll(ctx, c.Dir, c.Tree+"^{tree}", c.Parent+"^{tree}", c.Parent+"^{commit}", "refs/heads/"+c.Branch+"^{commit}")
	if err != nil {
		return "", fmt.Errorf("commit run: %w", err)
	}
	tree, parentTree, parent, head := ids[0], ids[1], ids[2], ids[3]
	if tree == parentTree {
		return "", nil
	}
	if head != parent {
		if !isReplay(ctx, c.Dir, head, parent, tree, c.Trailer) {
			return "", fmt.Errorf("commit run: branch %s is at %s, not at the parent %s", c.Branch, describeHead(head), short(parent))
		}
		if err := resetIndex(ctx, c.Dir, head); err != nil {
			return "", fmt.Errorf("commit run: %w", err)
		}
		return head, nil
	}

	author := c.Author
	if author == "" {
		if author, err = configAuthor(ctx, c.Dir); err != nil {
			return "", fmt.Errorf("commit run: %w", err)
		}
		if author == "" {
			author = defaultAuthor
		}
	}
	commit, err := commitTree(ctx, c.Dir, tree, []string{parent}, c.Message, author, c.At)
	if err != nil {
		return "", fmt.Errorf("commit run: %w", err)
	}
	if err := casBranch(ctx, c.Dir, c.Branch, commit, parent, "baton: run"); err != nil {
		return "", fmt.Errorf("commit run: %w", err)
	}
	if err := resetIndex(ctx, c.Dir, commit); err != nil {
		return "", fmt.Errorf("commit run: %w", err)
	}
	return commit, nil
}

// isReplay says whether commit is the one CommitRun makes for tree on
// parent with trailer in its message: its only parent is parent, its tree
// is tree, and a line of its message is trailer.
func isReplay(ctx context.Context, dir, commit, parent, tree, trailer string) bool {
	if trailer == "" {
		return false
	}
	out, err := gitRead(ctx, dir, "cat-file", "commit", commit)
	if err != nil {
		return false
	}
	header, message, _ := strings.Cut(out, "\n\n")
	var parents []string
	var gotTree string
	for line := range strings.SplitSeq(header, "\n") {
		if t, ok := strings.CutPrefix(line, "tree "); ok {
			gotTree = t
		}
		if p, ok := strings.CutPrefix(line, "parent "); ok {
			parents = append(parents, p)
		}
	}
	if gotTree != tree || len(parents) != 1 || parents[0] != parent {
		return false
	}
	for line := range strings.SplitSeq(message, "\n") {
		if strings.TrimSpace(line) == strings.TrimSpace(trailer) {
			return true
		}
	}
	return false
}

func describeHead(head string) string {
	if head == "" {
		return "nothing (it does not exist)"
	}
	return short(head)
}

// MoveBranch moves branch from from to to, for a rollback, and makes the
// index of the worktree dir match to without touching its files (the
// caller restores those). When saveRef is not "", it is pointed at from
// in the same transaction, so the head rolled back from stays reachable.
// A branch already at to is left as it is (a replay); a branch anywhere
// else is an error naming both commits.
func MoveBranch(ctx context.Context, dir, branch, to, from, saveRef string) error {
	ids, err := resolveAll(ctx, dir, to+"^{commit}", from+"^{commit}")
	if err != nil {
		return fmt.Errorf("move branch %s: %w", branch, err)
	}
	to, from = ids[0], ids[1]
	head, err := branchHead(ctx, dir, branch)
	if err != nil {
		return fmt.Errorf("move branch %s: %w", branch, err)
	}
	switch head {
	case to:
	case from:
		var tx strings.Builder
		tx.WriteString("start\n")
		if saveRef != "" {
			fmt.Fprintf(&tx, "update %s %s\n", saveRef, from)
		}
		fmt.Fprintf(&tx, "update refs/heads/%s %s %s\nprepare\ncommit\n", branch, to, from)
		if _, err := gitStdin(ctx, dir, tx.String(), "update-ref", "-m", "baton: rollback", "--stdin"); err != nil {
			return fmt.Errorf("move branch %s from %s to %s: %w", branch, short(from), short(to), err)
		}
	default:
		return fmt.Errorf("move branch %s: it is at %s, neither at %s nor at %s", branch, describeHead(head), short(from), short(to))
	}
	if err := resetIndex(ctx, dir, to); err != nil {
		return fmt.Errorf("move branch %s: %w", branch, err)
	}
	return nil
}
