package domain

import "cmp"

// Lookups. Each returns a pointer into the thread (nil when not found),
// valid until the next event is applied to it. Most search from the
// newest entry, which is the one wanted most, so that their cost follows
// what is recent rather than the thread's whole history.
//
// Runs start in ordinal order and only when none is active, which bounds
// the searches for the active and the queued runs: the active run, if
// any, is the newest run that has started, and every queued run comes
// after it.

// Exists says whether the thread has been created.
func (t *Thread) Exists() bool { return t.ID != "" }

func (t *Thread) run(id string) *Run {
	for i := len(t.Runs) - 1; i >= 0; i-- {
		if t.Runs[i].ID == id {
			return &t.Runs[i]
		}
	}
	return nil
}

// ActiveRun is the run that holds the thread, if any: the newest run that
// has started, while it is starting, running or waiting (runs queued
// behind it are not active). Every reader of a thread, the service and
// the CLI among them, asks this one.
func (t *Thread) ActiveRun() *Run {
	for i := len(t.Runs) - 1; i >= 0; i-- {
		if r := &t.Runs[i]; r.StartedAt != nil {
			if r.Status.Active() {
				return r
			}
			return nil
		}
	}
	return nil
}

// hasQueued says whether a run waits to start.
func (t *Thread) hasQueued() bool {
	for i := len(t.Runs) - 1; i >= 0 && t.Runs[i].StartedAt == nil; i-- {
		if t.Runs[i].Status == RunStatusQueued {
			return true
		}
	}
	return false
}

// oldestQueued is the queued run to start next, if any.
func (t *Thread) oldestQueued() *Run {
	var q *Run
	for i := len(t.Runs) - 1; i >= 0 && t.Runs[i].StartedAt == nil; i-- {
		if t.Runs[i].Status == RunStatusQueued {
			q = &t.Runs[i]
		}
	}
	return q
}

func (r *Run) attempt(id string) *Attempt {
	for i := len(r.Attempts) - 1; i >= 0; i-- {
		if r.Attempts[i].ID == id {
			return &r.Attempts[i]
		}
	}
	return nil
}

// settled says whether a run takes no more provider work: it has ended,
// or its turn has and its checkpoint is being captured.
func (r *Run) settled() bool { return r.Status.Terminal() || r.Ending != nil || r.WaitID != "" }

// live says whether a run is active and its provider turn not over.
func (r *Run) live() bool { return r.Status.Active() && r.Ending == nil && r.WaitID == "" }

// carriesHandoff says whether an attempt is the one that carries the
// ready handoff: the run's first, or a continuation a limit moved to
// another provider.
func (r *Run) carriesHandoff(attemptID string) bool {
	for i, a := range r.Attempts {
		if a.ID == attemptID {
			return i == 0 || a.Reason == AttemptUsageLimitContinuation && a.Provider != "" && a.Provider != r.Attempts[i-1].provider(r)
		}
	}
	return false
}

// provider is where an attempt ran ("" in logs from before: the run's
// first provider, which a log without moved runs never changes).
func (a Attempt) provider(r *Run) string { return cmp.Or(a.Provider, r.Provider) }

// attemptByID finds an attempt and its run.
func (t *Thread) attemptByID(id string) (*Run, *Attempt) {
	for i := len(t.Runs) - 1; i >= 0; i-- {
		if a := t.Runs[i].attempt(id); a != nil {
			return &t.Runs[i], a
		}
	}
	return nil, nil
}

func (t *Thread) node(runID, id string) *Node {
	if r := t.run(runID); r != nil {
		for i := len(r.Nodes) - 1; i >= 0; i-- {
			if r.Nodes[i].ID == id {
				return &r.Nodes[i]
			}
		}
	}
	return nil
}

// nodeByRef is the run's node for a provider item.
func (r *Run) nodeByRef(ref string) *Node {
	for i := len(r.Nodes) - 1; i >= 0; i-- {
		if r.Nodes[i].ProviderRef == ref && r.Nodes[i].Kind != NodeRootTurn {
			return &r.Nodes[i]
		}
	}
	return nil
}

func (t *Thread) item(id string) *TurnItem {
	for i := len(t.TurnItems) - 1; i >= 0; i-- {
		if t.TurnItems[i].ID == id {
			return &t.TurnItems[i]
		}
	}
	return nil
}

func (t *Thread) message(id string) *Message {
	for i := len(t.Messages) - 1; i >= 0; i-- {
		if t.Messages[i].ID == id {
			return &t.Messages[i]
		}
	}
	return nil
}

func (t *Thread) session(id string) *ProviderSession {
	for i := len(t.ProviderSessions) - 1; i >= 0; i-- {
		if t.ProviderSessions[i].ID == id {
			return &t.ProviderSessions[i]
		}
	}
	return nil
}

func (t *Thread) request(id string) *RuntimeRequest {
	for i := len(t.Requests) - 1; i >= 0; i-- {
		if t.Requests[i].ID == id {
			return &t.Requests[i]
		}
	}
	return nil
}

func (t *Thread) requestByRef(sessionID, ref string) *RuntimeRequest {
	for i := len(t.Requests) - 1; i >= 0; i-- {
		if q := &t.Requests[i]; q.ProviderRef == ref && q.SessionID == sessionID {
			return q
		}
	}
	return nil
}

// hasPending says whether a run waits for an answer to a request.
func (t *Thread) hasPending(runID string) bool {
	for i := len(t.Requests) - 1; i >= 0; i-- {
		if q := &t.Requests[i]; q.RunID == runID && q.Status == RequestStatusPending {
			return true
		}
	}
	return false
}

func (t *Thread) scope(id string) *CheckpointScope {
	for i := len(t.CheckpointScopes) - 1; i >= 0; i-- {
		if t.CheckpointScopes[i].ID == id {
			return &t.CheckpointScopes[i]
		}
	}
	return nil
}

func (t *Thread) checkpoint(id string) *Checkpoint {
	for i := len(t.Checkpoints) - 1; i >= 0; i-- {
		if t.Checkpoints[i].ID == id {
			return &t.Checkpoints[i]
		}
	}
	return nil
}

func (t *Thread) rollback(id string) *Rollback {
	for i := len(t.Rollbacks) - 1; i >= 0; i-- {
		if t.Rollbacks[i].ID == id {
			return &t.Rollbacks[i]
		}
	}
	return nil
}

func (t *Thread) providerThreadByRef(ref string) *ProviderThread {
	for i := len(t.ProviderThreads) - 1; i >= 0; i-- {
		if t.ProviderThreads[i].ProviderRef == ref {
			return &t.ProviderThreads[i]
		}
	}
	return nil
}

func (t *Thread) providerTurnByRef(ref string) *ProviderTurn {
	for i := len(t.ProviderTurns) - 1; i >= 0; i-- {
		if t.ProviderTurns[i].ProviderRef == ref {
			return &t.ProviderTurns[i]
		}
	}
	return nil
}

// rootTurn is the provider turn bound to the root node of the run's
// active attempt, if it has started.
func (t *Thread) rootTurn(r *Run) *ProviderTurn {
	a := r.attempt(r.ActiveAttempt) // an active run always has one
	for i := len(t.ProviderTurns) - 1; i >= 0; i-- {
		if pt := &t.ProviderTurns[i]; pt.AttemptID == a.ID && pt.NodeID == a.RootNode {
			return pt
		}
	}
	return nil
}

// parentTurnNode is the node of the in-progress turn of a subagent's
// parent provider thread in this attempt, else the attempt's root.
func (t *Thread) parentTurnNode(runID string, a Attempt, parentThreadID string) string {
	for i := len(t.ProviderTurns) - 1; i >= 0; i-- {
		pt := &t.ProviderTurns[i]
		if pt.ProviderThreadID == parentThreadID && pt.RunID == runID && pt.AttemptID == a.ID && pt.Status == StatusInProgress {
			return pt.NodeID
		}
	}
	return a.RootNode
}

// runFor finds the run a provider event belongs to: the run bound to its
// turn (pt), or else the active run.
func (t *Thread) runFor(pt *ProviderTurn) *Run {
	if pt != nil {
		return t.run(pt.RunID)
	}
	return t.ActiveRun()
}

// replaced says whether an event is of a turn bound to an attempt of the
// run that is no longer its active one.
func (t *Thread) replaced(r *Run, pt *ProviderTurn) bool {
	return pt != nil && pt.RunID == r.ID && pt.AttemptID != r.ActiveAttempt
}

// bindThread returns the app id of a provider thread, binding it first
// when it is new.
func (t *Thread) bindThread(pthr *ProviderThread, sessionID, ref string, env Env, d *Decision) string {
	if pthr != nil {
		return pthr.ID
	}
	id := env.NewID("pthr")
	d.emit(ProviderThreadBound{ProviderThreadID: id, SessionID: sessionID, ProviderRef: ref})
	return id
}

// readyHandoff is a handoff waiting for the next run, if any.
func (t *Thread) readyHandoff() *ContextHandoff {
	for i := range t.Handoffs {
		if t.Handoffs[i].Status == HandoffReady {
			return &t.Handoffs[i]
		}
	}
	return nil
}

// rootProviderThread is the conversation the next run continues: the
// thread's provider's own, unless it has none (never started, or left
// behind).
func (t *Thread) rootProviderThread() *ProviderThread {
	if b := t.binding(t.Provider); b != nil && b.ProviderThreadID != "" {
		return t.providerThread(b.ProviderThreadID)
	}
	return nil
}

// providerThread is the provider thread with the app id, or nil.
func (t *Thread) providerThread(id string) *ProviderThread {
	for i := range t.ProviderThreads {
		if t.ProviderThreads[i].ID == id {
			return &t.ProviderThreads[i]
		}
	}
	return nil
}

// rollbackHolds says whether a rollback keeps runs from starting: one in
// progress, or one whose files failed to restore.
func (t *Thread) rollbackHolds() bool {
	if n := len(t.Rollbacks); n > 0 {
		return t.Rollbacks[n-1].Status != RollbackDone
	}
	return false
}

// InUse says whether the thread has work for a provider session: a run
// active or queued, a request pending, or a rollback in progress. A session
// of a thread not in use may be closed as idle.
func (t *Thread) InUse() bool {
	if r := t.ActiveRun(); r != nil {
		// A run waiting for a limit holds the thread, not its session:
		// the continuation resumes the conversation in a new one.
		return r.WaitID == "" || t.rollbackInProgress() || t.hasPendingRequest()
	}
	return t.hasQueued() || t.rollbackInProgress() || t.hasPendingRequest()
}

// rollbackInProgress says whether a rollback is restoring files or the
// provider's conversation (one that failed holds runs, but is not going on).
func (t *Thread) rollbackInProgress() bool {
	if n := len(t.Rollbacks); n > 0 {
		st := t.Rollbacks[n-1].Status
		return st == RollbackRestoringFiles || st == RollbackReconciling
	}
	return false
}

// hasPendingRequest says whether any request waits for an answer.
func (t *Thread) hasPendingRequest() bool {
	for _, q := range t.Requests {
		if q.Status == RequestStatusPending {
			return true
		}
	}
	return false
}
