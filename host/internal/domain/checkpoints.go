package domain

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Checkpoints and rollback.
//
// A run's root checkpoint is captured after its completion barrier (the
// provider's terminal event, streams flushed, items closed) and the run
// ends when it is recorded, so the next run never starts before the files
// it found are kept. A baseline is captured before the first run starts,
// and a subagent turn's end captures a checkpoint in a scope nested under
// its run's. A rollback restores the files first, then reconciles the
// provider; until both are done no run starts, and a rollback whose files
// failed to restore keeps runs from starting until one succeeds.

// RefPrefix is the hidden ref namespace checkpoints live under.
const RefPrefix = "refs/baton/checkpoints/"

var refSafe = regexp.MustCompile(`^[A-Za-z0-9_-][A-Za-z0-9_.-]*$`)

// refComponent is a thread id as a ref path component: as it is when git
// allows it, else a digest of it.
func refComponent(id string) string {
	if refSafe.MatchString(id) && !strings.Contains(id, "..") && !strings.HasSuffix(id, ".lock") && !strings.HasSuffix(id, ".") {
		return id
	}
	sum := sha256.Sum256([]byte(id))
	return "x" + hex.EncodeToString(sum[:16])
}

// lastReadyRoot is the newest ready root checkpoint: what the worktree was
// when the next run began.
func (t *Thread) lastReadyRoot() *Checkpoint {
	for i := len(t.Checkpoints) - 1; i >= 0; i-- {
		if c := &t.Checkpoints[i]; c.Status == CheckpointReady && c.NodeID == "" { // a subagent's names its node
			return c
		}
	}
	return nil
}

func (t *Thread) hasRootCheckpoint() bool {
	if t.Earlier != nil && t.Earlier.RootScopes > 0 {
		return true
	}
	for _, sc := range t.CheckpointScopes {
		if sc.Kind == ScopeRootRun {
			return true
		}
	}
	return false
}

// rootScope is a run's root scope (the baseline's for runID "").
func (t *Thread) rootScope(runID string) *CheckpointScope {
	for i := range t.CheckpointScopes {
		if sc := &t.CheckpointScopes[i]; sc.Kind == ScopeRootRun && sc.RunID == runID {
			return sc
		}
	}
	return nil
}

// requestCheckpoint opens a scope for a run (runID "": the baseline), or for a
// subagent node of it, and asks for the worktree to be captured in it.
func requestCheckpoint(t *Thread, runID, subagentNode string, env Env, d *Decision) {
	ordinal := 0
	if r := t.run(runID); r != nil {
		ordinal = r.Ordinal
	}
	thr := RefPrefix + refComponent(t.ID)
	scopeID := ""
	if sc := t.rootScope(runID); sc != nil {
		scopeID = sc.ID
	} else {
		scopeID = env.NewID("cps")
		d.emit(CheckpointScopeOpened{ScopeID: scopeID, Kind: ScopeRootRun, RunID: runID, Ordinal: ordinal, AdvancesRunCount: true})
	}
	ref := thr + "/root/" + strconv.Itoa(ordinal)
	nodeID := ""
	if subagentNode != "" {
		k := 1
		for _, sc := range t.CheckpointScopes {
			if sc.Kind == ScopeSubagent && sc.RunID == runID {
				k++
			}
		}
		parent := scopeID
		scopeID = env.NewID("cps")
		nodeID = subagentNode
		d.emit(CheckpointScopeOpened{ScopeID: scopeID, Kind: ScopeSubagent, RunID: runID, NodeID: nodeID, ParentID: parent, Ordinal: k})
		ref = thr + "/subagent/" + strconv.Itoa(ordinal) + "-" + strconv.Itoa(k)
	}
	var base string
	if c := t.lastReadyRoot(); c != nil {
		base = c.ID
	}
	id := env.NewID("cp")
	d.emit(CheckpointRequested{CheckpointID: id, ScopeID: scopeID, RunID: runID, NodeID: nodeID, RunOrdinal: ordinal,
		BaseID: base, Ref: ref})
	e := CaptureCheckpoint{EffectHead: EffectHead{ThreadID: t.ID}, RunID: runID, CheckpointID: id, Ref: ref, BaseID: base}
	if subagentNode == "" {
		e.Commit = t.branchCommit(t.run(runID))
	}
	d.effect(e)
}

func decideRecordCheckpoint(t *Thread, p RecordCheckpoint, env Env, d *Decision) error {
	c := t.checkpoint(p.CheckpointID)
	if c == nil {
		return fmt.Errorf("%w: checkpoint %q", ErrNotFound, p.CheckpointID)
	}
	switch p.Status {
	case CheckpointReady, CheckpointMissing, CheckpointError:
	default:
		return fmt.Errorf("%w: a capture is %s, %s or %s, not %q", ErrInvalid, CheckpointReady, CheckpointMissing, CheckpointError, p.Status)
	}
	if c.Status != CheckpointCapturing {
		return nil // recorded before
	}
	d.emit(CheckpointRecorded(p))
	if r := t.run(c.RunID); r != nil && r.Ending != nil && r.CheckpointID == c.ID {
		finishRun(t, r.ID, *r.Ending, env, d)
		startNextQueued(t, env, d)
	}
	return nil
}

func decideRollback(t *Thread, p RollbackToCheckpoint, env Env, d *Decision) error {
	// v is the thread with the runs that left it and were gathered (when
	// the target is among them) before its own.
	v, left := t.withPast(env.Past), t.earlierRuns() > 0
	var c *Checkpoint
	switch {
	case p.CheckpointID != "":
		if c = v.checkpoint(p.CheckpointID); c == nil {
			if left && !env.Past.looked(p.CheckpointID) {
				d.needPast(NeedPast{Checkpoint: p.CheckpointID})
				return nil
			}
			return fmt.Errorf("%w: checkpoint %q", ErrNotFound, p.CheckpointID)
		}
		if p.ScopeID != "" && c.ScopeID != p.ScopeID {
			return fmt.Errorf("%w: checkpoint %s is not in scope %s", ErrInvalid, c.ID, p.ScopeID)
		}
	case p.ScopeID != "":
		if v.scope(p.ScopeID) == nil {
			if left && !env.Past.looked(p.ScopeID) {
				d.needPast(NeedPast{Scope: p.ScopeID})
				return nil
			}
			return fmt.Errorf("%w: checkpoint scope %q", ErrNotFound, p.ScopeID)
		}
		for i := range v.Checkpoints {
			if v.Checkpoints[i].ScopeID == p.ScopeID {
				c = &v.Checkpoints[i]
			}
		}
		if c == nil {
			return fmt.Errorf("%w: checkpoint scope %s has no checkpoint yet", ErrNotFound, p.ScopeID)
		}
	default:
		return fmt.Errorf("%w: checkpoint.rollback needs a checkpointId or a scopeId", ErrInvalid)
	}
	if c.NodeID != "" {
		return fmt.Errorf("%w: checkpoint %s is a subagent's, taken in the middle of run %d; roll back to a run's checkpoint (scope kind %s)",
			ErrUnsupported, c.ID, c.RunOrdinal, ScopeRootRun)
	}
	if c.Status != CheckpointReady {
		why := ""
		if c.Reason != "" {
			why = ": " + c.Reason
		}
		return fmt.Errorf("%w: checkpoint %s is %s%s; only a ready checkpoint can be restored", ErrConflict, c.ID, c.Status, why)
	}
	if r := t.ActiveRun(); r != nil {
		if r.Ending != nil {
			return fmt.Errorf("%w: run %d is ending (its checkpoint is being captured); roll back once it has ended", ErrConflict, r.Ordinal)
		}
		return fmt.Errorf("%w: run %d is %s; interrupt it (run.interrupt) or let it end before rolling back", ErrConflict, r.Ordinal, r.Status)
	}
	if t.RollingBack() {
		return fmt.Errorf("%w: rollback %s is in progress", ErrConflict, t.Rollbacks[len(t.Rollbacks)-1].ID)
	}
	if c.RunOrdinal < t.earlierRuns() && !env.Past.holds(c.RunOrdinal+1) {
		// Runs after it have left: their ids, checkpoints and turns are
		// the rollback's.
		d.needPast(NeedPast{From: c.RunOrdinal + 1})
		return nil
	}
	runs, stale := []string{}, []string{}
	for _, r := range v.Runs {
		if r.Ordinal > c.RunOrdinal && r.Status.Terminal() && r.Status != RunStatusCancelled && r.Status != RunStatusRolledBack {
			runs = append(runs, r.ID)
		}
	}
	for _, k := range v.Checkpoints {
		if k.RunOrdinal > c.RunOrdinal && k.Status != CheckpointStale {
			stale = append(stale, k.ID)
		}
	}
	id := env.NewID("rb")
	started := RollbackStarted{RollbackID: id, CheckpointID: c.ID, TargetRunOrdinal: c.RunOrdinal, Runs: runs, Checkpoints: stale}
	if t.checkpoint(c.ID) == nil {
		target := *c
		started.Target = &target // back in the projection: the next capture's base
	}
	commit := c.Commit
	d.emit(started)
	// The files as they are now are kept first, under a ref of their own,
	// so that a rollback can be undone by hand.
	d.effect(RestoreFiles{EffectHead: EffectHead{ThreadID: t.ID}, RollbackID: id, CheckpointID: started.CheckpointID, Commit: commit,
		Ref: RefPrefix + refComponent(t.ID) + "/pre-rollback/" + refComponent(id), Branch: t.branchMove(c, id)})
	return nil
}

func decideFilesRestored(t *Thread, p RecordFilesRestored, env Env, d *Decision) error {
	rb := t.rollback(p.RollbackID)
	if rb == nil {
		return fmt.Errorf("%w: rollback %q", ErrNotFound, p.RollbackID)
	}
	if rb.Status != RollbackRestoringFiles {
		return nil // recorded before
	}
	if p.Failure != nil {
		d.emit(RollbackFailed{RollbackID: rb.ID, Stage: "files", Failure: *p.Failure})
		return nil
	}
	if target := rb.TargetRunOrdinal; target < t.earlierRuns() && !env.Past.holds(target+1) {
		d.needPast(NeedPast{From: target + 1}) // the dropped runs' turns and checkpoints that left
		return nil
	}
	v := t.withPast(env.Past)
	d.emit(RollbackFilesRestored{RollbackID: rb.ID, Written: p.Written, Removed: p.Removed, SavedRef: p.SavedRef, SavedCommit: p.SavedCommit,
		BranchHead: p.BranchHead})
	rb = t.rollback(p.RollbackID)
	// The provider's conversation goes back to the same point: the turns
	// of the rolled-back runs on the root conversation are dropped.
	e := ReconcileThread{EffectHead: EffectHead{ThreadID: t.ID}, RollbackID: rb.ID, Hold: p.Replayed}
	if root := t.rootProviderThread(); root != nil {
		e.ThreadRef = root.ProviderRef
		for _, pt := range v.ProviderTurns {
			if pt.ProviderThreadID == root.ID && slices.Contains(rb.Runs, pt.RunID) {
				if e.Turns == 0 {
					e.TurnRef = pt.ProviderRef // the oldest one dropped
				}
				e.Turns++
			}
		}
	}
	for _, id := range rb.Checkpoints {
		if c := v.checkpoint(id); c.Commit != "" {
			e.Refs = append(e.Refs, c.Ref)
		}
	}
	if e.Turns > 0 && env.Facts.capabilities().NativeRollback {
		// The provider drops the turns itself, in the session the thread's
		// next run would take (opened, resuming the conversation, when the
		// live one cannot). Where its plugin cannot, none is named: the
		// conversation is left for a fresh one.
		e.SessionID, _ = t.useSession(env.Live, "", "", "", "", env, d)
	}
	d.effect(e)
	return nil
}

func decideProviderReconciled(t *Thread, p RecordProviderReconciled, env Env, d *Decision) error {
	rb := t.rollback(p.RollbackID)
	if rb == nil {
		return fmt.Errorf("%w: rollback %q", ErrNotFound, p.RollbackID)
	}
	switch p.Reconciliation {
	case ReconcileNone, ReconcileNative, ReconcileFreshThread:
	default:
		return fmt.Errorf("%w: reconciliation must be %s, %s or %s, got %q", ErrInvalid,
			ReconcileNone, ReconcileNative, ReconcileFreshThread, p.Reconciliation)
	}
	if rb.Status != RollbackReconciling {
		return nil // recorded before
	}
	done := RollbackCompleted{RollbackID: rb.ID, Reconciliation: p.Reconciliation, ProviderThreadRef: p.ProviderThreadRef,
		TurnsDropped: p.TurnsDropped, Note: p.Note}
	if b := t.binding(t.Provider); p.Reconciliation == ReconcileNative && b != nil && b.ProviderThreadID != "" {
		// The kept conversation has seen what its kept turns saw: the
		// newest run up to the target whose root turn it took.
		kept := t.keptThrough(t.Provider, rb.TargetRunOrdinal)
		if upTo := min(rb.TargetRunOrdinal, t.earlierRuns()); kept == 0 && upTo > 0 {
			if !env.Past.knowsKept(upTo) {
				var convs []string
				for _, c := range t.ProviderThreads {
					if c.Provider == t.Provider && !c.Detached && c.ParentID == "" {
						convs = append(convs, c.ID)
					}
				}
				d.needPast(NeedPast{KeptIn: convs, KeptUpTo: upTo})
				return nil
			}
			kept = env.Past.kept
		}
		done.KeptThrough = &kept
	}
	if p.Reconciliation == ReconcileFreshThread {
		// The provider's root conversations are left behind: its next run
		// resumes none of them. (Other providers' are left below if they
		// saw a dropped run; "" is a log's from before switches.)
		for _, pt := range t.ProviderThreads {
			if pt.ParentID == "" && !pt.Detached && (pt.Provider == t.Provider || pt.Provider == "") {
				done.Detached = append(done.Detached, pt.ID)
			}
		}
	}
	d.emit(done)
	// The other providers' conversations that saw a dropped run are left
	// behind: a return to one starts afresh, told the thread as it is.
	for _, b := range t.ProviderBindings {
		if b.Provider != t.Provider && b.ProviderThreadID != "" && b.SeenThrough > rb.TargetRunOrdinal {
			d.emit(ProviderThreadDetached{ProviderThreadID: b.ProviderThreadID,
				Reason: fmt.Sprintf("it saw runs that rollback %s dropped", rb.ID)})
		}
	}
	// A next run that starts a conversation afresh (this rollback left the
	// old one, or an earlier one did) is told what came before.
	if t.rootProviderThread() == nil && rb.TargetRunOrdinal > 0 {
		planHandoff(t, env, d, handoffSpec{RollbackTo: rb.TargetRunOrdinal, RollbackID: rb.ID})
	}
	// Messages sent while the rollback ran were queued; they go now,
	// unless a host that restarted is finishing it (recovery starts no
	// work).
	if !p.Replayed {
		startNextQueued(t, env, d)
	}
	return nil
}
