package orchestrator

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/baton-run/baton/host/internal/domain"
	"github.com/baton-run/baton/host/internal/worktree"
)

// WorktreesDir is where worktree threads' worktrees go when the thread
// names no directory: DATA/worktrees.
func (h *Host) WorktreesDir() string { return filepath.Join(h.cfg.DataDir, "worktrees") }

// worktreeFact finds out, before anything is written, what a worktree
// thread needs of its repository: where the user's worktree is, the commit
// the base names, that the branch can be made, and who authors the
// commits. What is wrong is the fact's Problem, which the decision refuses
// the thread with.
func (h *Host) worktreeFact(threadID, cwd string, spec *domain.WorktreeSpec) *domain.WorktreeFact {
	ctx, cancel := context.WithTimeout(h.ctx, gitTimeout)
	defer cancel()
	src, err := worktree.Inspect(ctx, cwd, spec.Base)
	if err != nil {
		return &domain.WorktreeFact{Problem: err.Error()}
	}
	branch := cmp.Or(spec.Branch, domain.DefaultBranch(threadID))
	if err := worktree.CheckBranch(ctx, src.Root, branch); err != nil {
		return &domain.WorktreeFact{Problem: err.Error()}
	}
	dir := cmp.Or(spec.Dir, h.WorktreesDir())
	path := domain.WorktreePath(dir, src.Root, threadID)
	if _, err := os.Lstat(path); err == nil {
		return &domain.WorktreeFact{Problem: fmt.Sprintf("%s already exists; give another --worktree-dir", path)}
	}
	return &domain.WorktreeFact{Repository: src.Root, Path: path, Branch: branch, Base: src.Base, BaseBranch: src.BaseBranch,
		Author: cmp.Or(spec.Author, src.Author)}
}

// createWorktree makes a thread's worktree, copies its files in and runs
// its setup. A host that stopped in the middle makes it again from
// scratch (worktree.Create removes what it finds half-made).
func (h *Host) createWorktree(e domain.CreateWorktree) (domain.Result, bool) {
	ctx, cancel := context.WithTimeout(h.ctx, gitTimeout)
	defer cancel()
	made, err := worktree.Create(ctx, worktree.Spec{Root: e.Repository, Path: e.Path, Branch: e.Branch, Base: e.Base,
		Copy: e.Copy, Setup: e.Setup})
	if err != nil {
		if h.closingNow() {
			return domain.Result{}, false
		}
		h.log.Warn("worktree: making it failed", "thread", e.ThreadID, "path", e.Path, "error", err)
		return domain.Result{Err: err}, true
	}
	r := domain.RecordWorktree{Copied: made.Copied}
	if e.Setup != "" {
		r.Setup = &domain.SetupResult{Command: e.Setup, ExitCode: made.SetupExit, Output: made.SetupOutput}
	}
	return domain.Result{Worktree: r}, true
}

// commitRun makes a completed run's commit on its thread's branch from
// the checkpoint just captured (nothing when the run changed nothing).
func (h *Host) commitRun(ctx context.Context, threadID string, c *domain.BranchCommit, rec *domain.RecordCheckpoint) {
	cwd, _, _ := h.checkpointInfo(threadID, "")
	var trailer string // the run's: it tells this commit from another
	for _, t := range c.Trailers {
		if strings.HasPrefix(t, "Baton-Run:") {
			trailer = t
		}
	}
	commit, err := worktree.CommitRun(ctx, worktree.Commit{Dir: cwd, Branch: c.Branch, Parent: c.Parent, Tree: rec.Commit,
		Message: domain.CommitMessage(*c, rec.Files), Author: c.Author, Trailer: trailer, At: h.cfg.Clock.Now()})
	if err != nil {
		h.log.Warn("worktree: the run's commit failed", "thread", threadID, "branch", c.Branch, "error", err)
		rec.BranchError = err.Error()
		return
	}
	rec.BranchCommit = commit
}

// moveBranch moves a worktree thread's branch back with its files.
func (h *Host) moveBranch(ctx context.Context, threadID string, m *domain.BranchMove) error {
	cwd, _, _ := h.checkpointInfo(threadID, "")
	return worktree.MoveBranch(ctx, cwd, m.Branch, m.To, m.From, m.SaveRef)
}

// mergeBranch merges a thread's branch, checking first.
func (h *Host) mergeBranch(e domain.MergeBranch) (domain.Result, bool) {
	ctx, cancel := context.WithTimeout(h.ctx, gitTimeout)
	defer cancel()
	m, err := worktree.Merge(ctx, e.Repository, e.Branch, e.Into, e.Squash, e.Message, e.Author, h.cfg.Clock.Now())
	if err != nil {
		if h.closingNow() {
			return domain.Result{}, false
		}
		return domain.Result{Err: err}, true
	}
	return domain.Result{Merged: domain.Merge{Status: domain.MergeStatus(m.Status), From: m.From, Commit: m.Commit,
		Commits: m.Commits, Conflicts: m.Conflicts, Dirty: m.Dirty, Worktree: m.Worktree}}, true
}

// removeWorktree removes an archived thread's worktree.
func (h *Host) removeWorktree(e domain.RemoveWorktree) (domain.Result, bool) {
	ctx, cancel := context.WithTimeout(h.ctx, gitTimeout)
	defer cancel()
	if err := worktree.Remove(ctx, e.Repository, e.Path, e.Branch, e.DeleteBranch); err != nil {
		if h.closingNow() {
			return domain.Result{}, false
		}
		return domain.Result{Err: err}, true
	}
	return domain.Result{BranchDeleted: e.DeleteBranch}, true
}

// worktreeGone says, for a thread whose worktree is no longer there
// (removed by hand), what happened and what to do; "" when it is there or
// the thread has none.
func worktreeGone(t *domain.Thread) string {
	w := t.Worktree
	if w == nil || w.Status != domain.WorktreeStatusReady {
		return ""
	}
	if _, err := os.Stat(w.Path); !errors.Is(err, fs.ErrNotExist) {
		return ""
	}
	return fmt.Sprintf("the thread's worktree %s is gone (removed by hand?); its branch %s and checkpoints are kept: "+
		"`baton archive %s` tidies the thread, `baton doctor --prune` the repository's worktree list", w.Path, w.Branch, t.ID)
}
