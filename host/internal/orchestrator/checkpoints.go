package orchestrator

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/baton-run/baton/host/internal/checkpoint"
	"github.com/baton-run/baton/host/internal/domain"
	"github.com/baton-run/baton/sdk"
)

// gitTimeout bounds one checkpoint operation (a capture of a large
// worktree, a restore).
const gitTimeout = 10 * time.Minute

// checkpointInfo is what an effect needs from the projection: the thread's
// cwd and provider, and the commit of a checkpoint.
func (h *Host) checkpointInfo(threadID, checkpointID string) (cwd, provider, commit string) {
	t, err := h.view(threadID)
	if err != nil {
		return "", "", ""
	}
	for _, c := range t.Checkpoints {
		if c.ID == checkpointID {
			commit = c.Commit
		}
	}
	return t.Cwd, t.Provider, commit
}

// capture records the worktree in a checkpoint. A cwd outside git is a
// missing checkpoint; a failure is an error checkpoint: the run ends
// either way, saying so.
func (h *Host) capture(e domain.CaptureCheckpoint) (domain.Result, bool) {
	cwd, _, base := h.checkpointInfo(e.ThreadID, e.BaseID)
	if e.BaseID == "" {
		base = checkpoint.NoSummary // the first checkpoint: nothing to compare with
	}
	ctx, cancel := context.WithTimeout(h.ctx, gitTimeout)
	defer cancel()
	res, err := h.cps.Capture(ctx, cwd, e.Ref, base, h.cfg.Clock.Now())
	if err != nil {
		if h.closingNow() {
			return domain.Result{}, false
		}
		h.log.Warn("checkpoint capture failed", "thread", e.ThreadID, "checkpoint", e.CheckpointID, "error", err)
		return domain.Result{Err: err}, true
	}
	rec := domain.RecordCheckpoint{Status: domain.CheckpointStatus(res.Status), Commit: res.Commit, Reason: res.Reason}
	for _, f := range res.Files {
		rec.Files = append(rec.Files, domain.FileChange(f))
	}
	if e.Commit != nil && rec.Status == domain.CheckpointReady {
		h.commitRun(ctx, e.ThreadID, e.Commit, &rec)
		if rec.BranchError != "" && h.closingNow() {
			return domain.Result{}, false
		}
	}
	return domain.Result{Captured: rec}, true
}

// restoreFiles keeps the worktree as it is under the rollback's own ref,
// then puts it back to the checkpoint.
func (h *Host) restoreFiles(e domain.RestoreFiles) (domain.Result, bool) {
	cwd, _, _ := h.checkpointInfo(e.ThreadID, "")
	ctx, cancel := context.WithTimeout(h.ctx, gitTimeout)
	defer cancel()
	res, err := h.cps.SaveAndRestore(ctx, cwd, e.Commit, e.Ref, h.cfg.Clock.Now())
	if err == nil && e.Branch != nil {
		err = h.moveBranch(ctx, e.ThreadID, e.Branch)
	}
	if err != nil {
		if h.closingNow() {
			return domain.Result{}, false
		}
		h.log.Warn("rollback: restoring files failed", "thread", e.ThreadID, "rollback", e.RollbackID, "error", err)
		return domain.Result{Err: err}, true
	}
	return domain.Result{Restored: domain.RecordFilesRestored{Written: len(res.Written), Removed: len(res.Removed),
		SavedCommit: res.Saved}}, true
}

// reconcileThread brings the provider's conversation back to the rollback's
// point: natively where the plugin can drop turns (checked against the
// oldest turn the host expects to drop, so that a paginated Codex thread
// cannot lose more turns if this is done again after a restart), else by
// leaving the conversation for a fresh one, which the next run starts with
// a handoff. Then the stale checkpoints' refs go. Once the provider has
// dropped the turns, the outcome is recorded even if the host is closing.
func (h *Host) reconcileThread(e domain.ReconcileThread) (domain.Result, bool) {
	cwd, provider, _ := h.checkpointInfo(e.ThreadID, "")
	var r domain.Result
	if e.Turns > 0 {
		r.ThreadRef, r.Err = h.rollbackNative(e, provider)
		switch {
		case r.Err == nil:
		case h.closingNow() || errors.Is(r.Err, ErrClosed):
			return domain.Result{}, false // not done: the next host does it
		default:
			if !errors.Is(r.Err, sdk.ErrUnsupported) {
				h.log.Warn("rollback: the provider's rollback failed; falling back to a fresh conversation", "thread", e.ThreadID, "error", r.Err)
			}
			// The conversation is left for a fresh one (domain.Outcome):
			// the next run opens a new session.
			h.closeThreadSession(e.ThreadID)
		}
	}
	if len(e.Refs) > 0 {
		// Not cut short by the host closing: a leftover ref is harmless,
		// but this outcome must be recorded.
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		err := h.cps.DeleteRefs(ctx, cwd, e.Refs...)
		cancel()
		r.RefsErr = err
	}
	return r, true
}

// closingNow says whether the host has begun to close: an operation that
// failed then was cut short, not refused.
func (h *Host) closingNow() bool {
	h.smu.Lock()
	defer h.smu.Unlock()
	return h.closing || h.ctx.Err() != nil
}

// rollbackNative asks the plugin to drop the turns, in the session the
// domain named for it (none: the plugin cannot).
func (h *Host) rollbackNative(e domain.ReconcileThread, provider string) (string, error) {
	if e.SessionID == "" {
		return "", sdk.ErrUnsupported
	}
	var resp sdk.RollbackThreadResponse
	err := h.withSession(e.ThreadID, e.SessionID, "RollbackThread", func(ctx context.Context, s *liveSession) error {
		var err error
		resp, err = s.plugin.RollbackThread(ctx, sdk.RollbackThreadRequest{SessionID: s.id, ThreadRef: e.ThreadRef,
			Turns: uint32(e.Turns), BeforeTurnRef: e.TurnRef})
		return err
	})
	if err != nil {
		return "", fmt.Errorf("%s rollback of %d turns: %w", provider, e.Turns, err)
	}
	return resp.ThreadRef, nil
}

// closeThreadSession ends the thread's live session, so that the next run
// opens a new one on a fresh conversation.
func (h *Host) closeThreadSession(threadID string) {
	if s, _ := h.live(threadID); s != nil {
		s.close(h.cfg.Clock, h.log)
	}
}

// Diff is the unified diff of a run's checkpoint against the one before
// it (run 0: the thread's newest run checkpoint), cut at maxBytes (0: 1
// MiB) with a marker. A run that left the projection is read from its
// part.
func (h *Host) Diff(ctx context.Context, threadID string, run, maxBytes int) (checkpoint.Diff, domain.Checkpoint, error) {
	t, err := h.view(threadID)
	if err != nil {
		return checkpoint.Diff{}, domain.Checkpoint{}, err
	}
	var c *domain.Checkpoint
	if run == 0 {
		c = newestReady(t) // with no run named, the newest run whose files are kept
	} else {
		page, _, err := h.ThreadPage(threadID, PageQuery{FromRun: run, ToRun: run})
		if err != nil {
			return checkpoint.Diff{}, domain.Checkpoint{}, err
		}
		c = runCheckpoint(&page, run, false)
	}
	if c == nil {
		if run == 0 {
			return checkpoint.Diff{}, domain.Checkpoint{}, fmt.Errorf("%w: thread %s has no run with a ready checkpoint", domain.ErrNotFound, threadID)
		}
		return checkpoint.Diff{}, domain.Checkpoint{}, fmt.Errorf("%w: run %d of thread %s has no checkpoint", domain.ErrNotFound, run, threadID)
	}
	if c.Status != domain.CheckpointReady {
		why := map[domain.CheckpointStatus]string{domain.CheckpointStale: "the run was rolled back and its checkpoint deleted",
			domain.CheckpointCapturing: "it is still being captured"}[c.Status]
		return checkpoint.Diff{}, *c, fmt.Errorf("%w: the checkpoint of run %d is %s: %s", domain.ErrConflict, c.RunOrdinal, c.Status,
			cmp.Or(c.Reason, why))
	}
	var base string
	if c.BaseID != "" {
		b, err := h.findCheckpoint(threadID, t, c.BaseID)
		if err != nil {
			return checkpoint.Diff{}, *c, err
		}
		if b != nil {
			base = b.Commit
		}
	}
	d, err := h.cps.Diff(ctx, t.Cwd, base, c.Commit, maxBytes)
	return d, *c, err
}

// runCheckpoint is the checkpoint of run ordinal (any: the newest run's
// that is ready) among t's runs, or nil.
func runCheckpoint(t *domain.Thread, ordinal int, ready bool) *domain.Checkpoint {
	var c *domain.Checkpoint
	for _, r := range t.Runs {
		if r.CheckpointID == "" || (ordinal != 0 && r.Ordinal != ordinal) {
			continue
		}
		for j := range t.Checkpoints {
			if k := &t.Checkpoints[j]; k.ID == r.CheckpointID && (!ready || k.Status == domain.CheckpointReady) {
				c = k
			}
		}
	}
	return c
}

// newestReady is the checkpoint of the newest run whose files are kept:
// a run's in the projection, else the one it keeps of a run that left
// (the newest ready run checkpoint is the next capture's base, which the
// projection keeps).
func newestReady(t *domain.Thread) *domain.Checkpoint {
	if c := runCheckpoint(t, 0, true); c != nil {
		return c
	}
	for i := len(t.Checkpoints) - 1; i >= 0; i-- {
		if c := &t.Checkpoints[i]; c.Status == domain.CheckpointReady && c.NodeID == "" && c.RunOrdinal > 0 {
			return c
		}
	}
	return nil
}

// findCheckpoint is the checkpoint with the id: in the projection, else
// among the parts that left it (the newest that holds it), else nil.
func (h *Host) findCheckpoint(threadID string, t *domain.Thread, id string) (*domain.Checkpoint, error) {
	for i := range t.Checkpoints {
		if t.Checkpoints[i].ID == id {
			return &t.Checkpoints[i], nil
		}
	}
	for part, err := range h.pastParts(threadID, t) {
		if err != nil {
			return nil, err
		}
		for i := range part.Checkpoints {
			if part.Checkpoints[i].ID == id {
				return &part.Checkpoints[i], nil
			}
		}
	}
	return nil, nil
}

// RunScope is the root checkpoint scope of run ordinal run (0: the
// baseline, before the first run), what a rollback to that run names: in
// the projection, or in the part of a run that left it.
func (h *Host) RunScope(threadID string, run int) (string, error) {
	t, err := h.view(threadID)
	if err != nil {
		return "", err
	}
	scopes := t.CheckpointScopes
	if t.Earlier != nil && run > 0 && run <= t.Earlier.Runs {
		page, _, err := h.ThreadPage(threadID, PageQuery{FromRun: run, ToRun: run})
		if err != nil {
			return "", err
		}
		scopes = page.CheckpointScopes
	}
	for _, sc := range scopes {
		if sc.Kind == domain.ScopeRootRun && sc.Ordinal == run {
			return sc.ID, nil
		}
	}
	return "", fmt.Errorf("%w: thread %s has no checkpoint of run %d", domain.ErrNotFound, threadID, run)
}
