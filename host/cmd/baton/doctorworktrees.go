package main

import (
	"context"
	"fmt"
	"slices"

	batonv1 "github.com/baton-run/baton/host/api/baton/v1"
	"github.com/baton-run/baton/host/internal/domain"
	"github.com/baton-run/baton/host/internal/eventlog"
	"github.com/baton-run/baton/host/internal/worktree"
)

// doctor's look at worktree threads: those, not archived, whose worktree
// directory is gone (deleted by hand), and, with --prune, git told to
// forget them in their repositories.

// goneWorktree is a thread whose worktree directory is gone.
type goneWorktree struct {
	thread string
	w      *batonv1.Worktree
}

// checkWorktrees reports the worktree threads whose worktree is gone, and
// with prune runs git worktree prune in their repositories. It reads the
// threads from the store doctor checked (read-only): it dials no service
// and starts no host.
func (g *globals) checkWorktrees(ctx context.Context, s *eventlog.Store, prune bool) error {
	gone, err := goneWorktrees(ctx, localReader{s: s})
	if err != nil {
		return failf(exitFailed, "doctor: read the threads: %v", err)
	}
	if len(gone) == 0 {
		return nil
	}
	out := g.stdout
	fmt.Fprintf(out, "%s whose worktree is gone (deleted by hand?):\n", plural(len(gone), "thread"))
	var repos []string
	for _, t := range gone {
		fmt.Fprintf(out, "  - %s (branch %s): %s\n", t.thread, t.w.GetBranch(), t.w.GetPath())
		if !slices.Contains(repos, t.w.GetRepository()) {
			repos = append(repos, t.w.GetRepository())
		}
	}
	if !prune {
		fmt.Fprintln(out, "their branches are kept; `baton doctor --prune` makes git forget the worktrees (git worktree prune), and baton archive THREAD puts a thread away")
		return silent(exitFailed)
	}
	failed := false
	for _, repo := range repos {
		if err := worktree.Prune(ctx, repo); err != nil {
			fmt.Fprintf(out, "✖ %s: %v\n", repo, err)
			failed = true
			continue
		}
		fmt.Fprintf(out, "pruned: git worktree prune in %s\n", repo)
	}
	if failed {
		return silent(exitFailed)
	}
	return nil
}

// goneWorktrees lists the threads, not archived, whose worktree was made
// and whose directory is gone.
func goneWorktrees(ctx context.Context, r reader) ([]goneWorktree, error) {
	list, err := r.threads(ctx)
	if err != nil {
		return nil, err
	}
	var gone []goneWorktree
	for _, s := range listed(list, nil, 0) {
		if s.GetBranch() == "" || s.GetArchived() {
			continue
		}
		t, err := r.thread(ctx, s.GetId())
		if err != nil {
			return nil, fmt.Errorf("thread %s: %w", s.GetId(), err)
		}
		if w := t.GetWorktree(); domain.WorktreeStatus(w.GetStatus()) == domain.WorktreeStatusReady && !isDir(w.GetPath()) {
			gone = append(gone, goneWorktree{thread: t.GetId(), w: w})
		}
	}
	return gone, nil
}
