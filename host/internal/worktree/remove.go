package worktree

import (
	"context"
	"fmt"
	"os"
	"slices"
)

// Remove removes the worktree at path, local changes and all, and then,
// when deleteBranch, its branch. Anything already gone is not an error: a
// directory already deleted is pruned from git's list, a branch already
// deleted is left so.
func Remove(ctx context.Context, root, path, branch string, deleteBranch bool) error {
	if err := removeWorktree(ctx, root, path); err != nil {
		return fmt.Errorf("remove worktree %s: %w", path, err)
	}
	if !deleteBranch {
		return nil
	}
	head, err := branchHead(ctx, root, branch)
	if err != nil || head == "" {
		return err
	}
	if _, err := git(ctx, root, "branch", "-D", "--", branch); err != nil {
		return fmt.Errorf("delete branch %s: %w", branch, err)
	}
	return nil
}

// Missing lists, sorted, the worktrees registered in root's repository
// whose directories are gone.
func Missing(ctx context.Context, root string) ([]string, error) {
	list, err := listWorktrees(ctx, root)
	if err != nil {
		return nil, err
	}
	var gone []string
	for _, w := range list {
		if _, err := os.Stat(w.Path); os.IsNotExist(err) {
			gone = append(gone, w.Path)
		}
	}
	slices.Sort(gone)
	return gone, nil
}

// Prune makes git forget the worktrees whose directories are gone.
func Prune(ctx context.Context, root string) error {
	if err := retryRaced(ctx, func() error { _, err := git(ctx, root, "worktree", "prune"); return err }); err != nil {
		return fmt.Errorf("prune worktrees: %w", err)
	}
	return nil
}
