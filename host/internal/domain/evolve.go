package domain

import (
	"cmp"
	"slices"
	"time"
)

// Event is a payload with its place in the log.
type Event struct {
	Sequence uint64
	ThreadID string
	At       time.Time
	Payload  Payload
}

// Evolve applies one event to a thread. A ThreadCreated event fills a zero
// Thread. Evolve trusts the log: Decide made every event against the state
// it applies to, so a reference that does not resolve is ignored rather
// than invented.
func Evolve(t *Thread, e Event) {
	t.Sequence = e.Sequence
	t.UpdatedAt = e.At
	switch p := e.Payload.(type) {
	case ThreadCreated:
		*t = Thread{ID: e.ThreadID, Provider: p.Provider, Cwd: p.Cwd, Model: p.Model, ProviderCommand: p.ProviderCommand,
			ApprovalPolicy: cmp.Or(p.ApprovalPolicy, ApproveDecline),
			CreatedAt:      e.At, UpdatedAt: e.At, Sequence: e.Sequence,
			Runs: []Run{}, Messages: []Message{}, TurnItems: []TurnItem{}, ProviderSessions: []ProviderSession{},
			ProviderThreads: []ProviderThread{}, ProviderTurns: []ProviderTurn{}, Requests: []RuntimeRequest{},
			CheckpointScopes: []CheckpointScope{}, Checkpoints: []Checkpoint{},
			ProviderBindings: []ProviderBinding{{Provider: p.Provider, Model: p.Model, Command: p.ProviderCommand}},
			Worktree:         p.Worktree, Host: p.Host, SharedCwd: p.SharedCwd,
			keepAll: t.keepAll}
	case MessageAdded:
		t.write(partMessages)
		t.Messages = append(t.Messages, Message{ID: p.MessageID, RunID: p.RunID, NodeID: p.NodeID, Role: p.Role,
			Text: NewText(p.Text), Status: p.Status})
		if t.Title == "" && p.Role == RoleUser {
			t.Title = TitleOf(p.Text)
		}
	case MessageDelta:
		t.write(partMessages)
		if m := t.message(p.MessageID); m != nil {
			m.Text.Append(p.Text)
		}
	case MessageCompleted:
		t.write(partMessages)
		if m := t.message(p.MessageID); m != nil {
			m.Status = StatusCompleted
		}
	case RunQueued:
		t.write(partRuns | partMessages)
		t.Runs = append(t.Runs, Run{ID: p.RunID, Ordinal: p.Ordinal, Status: RunStatusQueued, MessageID: p.MessageID,
			Input: p.Input, QueuedAt: e.At, Attempts: []Attempt{}, Nodes: []Node{}, MCP: p.MCP})
		if m := t.message(p.MessageID); m != nil {
			m.RunID = p.RunID // a steering message the provider refused, queued as a run
		}
	case RunStarted:
		if t.loopActive() {
			t.loopW().Runs++
		}
		if r := t.runW(p.RunID); r != nil {
			r.Status = RunStatusStarting
			at := e.At
			r.StartedAt = &at
			r.Provider, r.Model, r.Host = p.Provider, p.Model, p.Host
			if p.Provider == "" { // a log from before switches: the thread's
				r.Provider, r.Model = t.Provider, t.Model
			}
			b := t.bindingW(r.Provider)
			b.Runs = append(slices.Clip(b.Runs), r.Ordinal)
		}
	case AttemptStarted:
		if r := t.runW(p.RunID); r != nil {
			r.Attempts = append(r.Attempts, Attempt{ID: p.AttemptID, Reason: p.Reason, Status: AttemptInProgress,
				StartedAt: e.At, RootNode: p.RootNode, Provider: p.Provider})
			r.ActiveAttempt = p.AttemptID
			if p.Provider != "" && p.Provider != r.Provider {
				// A limit moved the run: the provider it ends on runs it.
				r.Provider, r.Model = p.Provider, p.Model
				b := t.bindingW(p.Provider)
				b.Runs = append(slices.Clip(b.Runs), r.Ordinal)
			}
			if p.Reason != AttemptInitial {
				r.Status = RunStatusStarting
				r.PendingRestart = nil
			}
		}
	case NodeStarted:
		if r := t.runW(p.RunID); r != nil {
			r.Nodes = append(r.Nodes, Node{ID: p.NodeID, ParentID: p.ParentID, AttemptID: p.AttemptID, Kind: p.Kind,
				Status: StatusInProgress, ProviderRef: p.ProviderRef, Title: p.Title})
			if p.Kind != NodeRootTurn && p.Kind != NodeAssistantMessage {
				t.write(partTurnItems)
				t.TurnItems = append(t.TurnItems, TurnItem{ID: p.NodeID, RunID: p.RunID, NodeID: p.NodeID, Kind: p.Kind,
					Title: p.Title, Status: StatusInProgress, Detail: p.Detail})
			}
		}
	case NodeUpdated:
		if n := t.nodeW(p.RunID, p.NodeID); n != nil {
			if p.Status != "" {
				n.Status = p.Status
			}
			if p.Title != "" {
				n.Title = p.Title
			}
		}
		if it := t.itemW(p.NodeID); it != nil {
			if p.Status != "" {
				it.Status = p.Status
			}
			if p.Title != "" {
				it.Title = p.Title
			}
			if len(p.Detail) > 0 {
				it.Detail = p.Detail
			}
		}
	case NodeDelta:
		if it := t.itemW(p.NodeID); it != nil {
			it.Text.Append(p.Text)
		}
	case NodeCompleted:
		if n := t.nodeW(p.RunID, p.NodeID); n != nil {
			n.Status = p.Status
		}
		// A provider turn ends with its node.
		for i := len(t.ProviderTurns) - 1; i >= 0; i-- {
			if pt := &t.ProviderTurns[i]; pt.NodeID == p.NodeID && pt.Status == StatusInProgress {
				t.write(partProviderTurns)
				t.ProviderTurns[i].Status = p.Status
			}
		}
		if it := t.itemW(p.NodeID); it != nil {
			it.Status = p.Status
		}
	case SessionOpened:
		t.write(partSessions)
		provider, model := p.Provider, p.Model
		if provider == "" { // a log from before switches: the thread's
			provider, model = t.Provider, t.Model
		}
		var resumed string
		if p.Resumed {
			resumed = p.ResumeRequested
		}
		t.ProviderSessions = append(t.ProviderSessions, ProviderSession{ID: p.SessionID, Provider: provider, Model: model, MCP: p.MCP,
			Resumed: resumed, Status: SessionStatusOpen, ProviderRef: p.ProviderRef, PluginPid: p.PluginPid, ProviderPid: p.ProviderPid, OpenedAt: e.At})
		t.bindingW(provider).SessionID = p.SessionID
	case SessionEnded:
		t.write(partSessions)
		if s := t.session(p.SessionID); s != nil {
			s.Status = SessionStatusEnded
			s.EndReason = p.Reason
			at := e.At
			s.EndedAt = &at
		}
	case ProviderThreadBound:
		t.write(partProviderThreads)
		var provider string
		if s := t.session(p.SessionID); s != nil {
			provider = s.Provider
		}
		t.ProviderThreads = append(t.ProviderThreads, ProviderThread{ID: p.ProviderThreadID, Provider: provider,
			SessionID: p.SessionID, ProviderRef: p.ProviderRef, ParentID: p.ParentID})
		if p.ParentID == "" && provider != "" {
			// A new root conversation: it has seen nothing of the thread yet,
			// unless a native rollback continues the conversation in it (a
			// fork cut at the rollback's run, named before or after).
			b := t.bindingW(provider)
			if b.ThreadRef != p.ProviderRef && !t.RollingBack() {
				b.SeenThrough = 0
			}
			b.ProviderThreadID, b.ThreadRef = p.ProviderThreadID, p.ProviderRef
		}
	case ProviderTurnBound:
		t.write(partProviderTurns)
		t.ProviderTurns = append(t.ProviderTurns, ProviderTurn{ID: p.ProviderTurnID, ProviderThreadID: p.ProviderThreadID,
			ProviderRef: p.ProviderRef, RunID: p.RunID, AttemptID: p.AttemptID, NodeID: p.NodeID, Status: StatusInProgress})
		r := t.run(p.RunID)
		if r == nil {
			return
		}
		if a := r.attempt(p.AttemptID); a == nil || a.RootNode != p.NodeID {
			return // a subagent's turn
		}
		// The conversation has now seen the run (and what its handoff
		// carried of the runs before it).
		if pt := t.providerThread(p.ProviderThreadID); pt != nil {
			if b := t.binding(pt.Provider); b != nil && b.ProviderThreadID == pt.ID && b.SeenThrough < r.Ordinal {
				t.bindingW(pt.Provider).SeenThrough = r.Ordinal
			}
		}
		if r.Status.Active() && r.ActiveAttempt == p.AttemptID {
			r = t.runW(p.RunID)
			r.Status = RunStatusRunning
			r.attempt(p.AttemptID).SessionID = p.SessionID
		}
	case RequestOpened:
		t.write(partRequests)
		t.Requests = append(t.Requests, RuntimeRequest{ID: p.RequestID, RunID: p.RunID, NodeID: p.NodeID,
			SessionID: p.SessionID, ProviderRef: p.ProviderRef, Kind: p.Kind, Title: p.Title, Options: p.Options,
			Status: RequestStatusPending, Delivery: DeliveryLive, OpenedAt: e.At})
		if r := t.run(p.RunID); r != nil && r.Status == RunStatusRunning {
			t.runW(p.RunID).Status = RunStatusWaiting
		}
	case RequestResolved:
		t.write(partRequests)
		if q := t.request(p.RequestID); q != nil {
			q.Status = p.Status
			q.Decision = p.Decision
			if p.Delivery != "" {
				q.Delivery = p.Delivery
			}
			if r := t.run(q.RunID); r != nil && r.Status == RunStatusWaiting && !t.hasPending(r.ID) {
				t.runW(q.RunID).Status = RunStatusRunning
			}
		}
	case UsageReported:
		if r := t.runW(p.RunID); r != nil {
			t.usageReported(r, p, e.At)
		}
	case RunEnded:
		if r := t.runW(p.RunID); r != nil {
			r.Status = p.Status
			r.StopReason = p.StopReason
			r.Failure = p.Failure
			at := e.At
			r.EndedAt = &at
			if a := r.attempt(p.AttemptID); a != nil {
				a.end(p.Status, at)
				r.FinalAttempt = a.ID
			}
			r.ActiveAttempt = ""
			r.PendingRestart = nil // requeued as runs of their own
			r.Ending = nil
			if r.Usage != nil && t.loopActive() {
				l := t.loopW()
				used := Usage{TotalTokens: l.Tokens}
				used.Add(Usage{TotalTokens: r.Usage.TotalTokens})
				l.Tokens = used.TotalTokens
			}
			t.compact()
		}
	case DiagnosticRecorded:
		t.write(partDiagnostics)
		t.Diagnostics = append(t.Diagnostics, Diagnostic{RunID: p.RunID, Title: p.Title, Text: p.Text})
	case RunSteered:
		// The message is already the run's; the event records that it
		// went to the provider's active turn.
	case RestartRequested:
		if r := t.runW(p.RunID); r != nil {
			r.PendingRestart = append(r.PendingRestart, SteeringMessage{MessageID: p.MessageID, Text: p.Text})
		}
	case InterruptRequested:
		if r := t.runW(p.RunID); r != nil {
			r.InterruptRequested = true
			if p.Grace > 0 {
				r.Stop = RunStop{Deadline: e.At.Add(p.Grace), Grace: p.Grace}
			}
		}
	case StopForced:
		t.forced(p.RunID, p.SessionID, p.Reason, false)
	case TurnStalled:
		t.forced(p.RunID, p.SessionID, p.Reason, true)
	case AttemptEnded:
		if r := t.runW(p.RunID); r != nil {
			if a := r.attempt(p.AttemptID); a != nil {
				a.end(p.Status, e.At)
			}
		}
	case RequestAnswered:
		t.write(partRequests)
		if q := t.request(p.RequestID); q != nil {
			q.Decision = p.Decision
			q.Answers = p.Answers
			q.AnsweredBy = p.By
		}
	case AttemptDispatched:
		if r := t.runW(p.RunID); r != nil {
			if a := r.attempt(p.AttemptID); a != nil {
				a.SessionID = p.SessionID
			}
		}
	case RequestAnswerFailed:
		t.write(partRequests | partDiagnostics)
		if q := t.request(p.RequestID); q != nil {
			q.Decision, q.Answers, q.AnsweredBy = "", nil, ""
			q.AnswerFailures++
		}
		t.Diagnostics = append(t.Diagnostics, Diagnostic{Title: "an answer did not reach the provider; answer again", Text: p.Reason})
	case RateLimitReported:
		t.RateLimits = t.rateLimitReported(p.RateLimit, e.At)
	case EffectCancelled:
		t.write(partDiagnostics)
		t.Diagnostics = append(t.Diagnostics, Diagnostic{RunID: p.RunID, Title: "a " + string(p.Type) + " action was not performed",
			Text: p.Reason})
	case RunCompleting:
		if r := t.runW(p.RunID); r != nil {
			o := p.RunOutcome
			r.Ending = &o
			if a := r.attempt(p.AttemptID); a != nil {
				a.end(p.Status, e.At)
			}
		}
	case CheckpointScopeOpened:
		t.write(partScopes)
		t.CheckpointScopes = append(t.CheckpointScopes, CheckpointScope{ID: p.ScopeID, Kind: p.Kind, RunID: p.RunID,
			NodeID: p.NodeID, ParentID: p.ParentID, Ordinal: p.Ordinal, AdvancesRunCount: p.AdvancesRunCount})
	case CheckpointRequested:
		t.write(partCheckpoints)
		t.Checkpoints = append(t.Checkpoints, Checkpoint{ID: p.CheckpointID, ScopeID: p.ScopeID, RunID: p.RunID, NodeID: p.NodeID,
			RunOrdinal: p.RunOrdinal, BaseID: p.BaseID, Ref: p.Ref, Status: CheckpointCapturing, RequestedAt: e.At})
		if sc := t.scope(p.ScopeID); sc != nil && sc.Kind == ScopeRootRun {
			if r := t.runW(p.RunID); r != nil {
				r.CheckpointID = p.CheckpointID
			}
		}
	case CheckpointRecorded:
		t.write(partCheckpoints)
		if c := t.checkpoint(p.CheckpointID); c != nil {
			c.Status, c.Commit, c.Files, c.Reason = p.Status, p.Commit, p.Files, p.Reason
			at := e.At
			c.CapturedAt = &at
			if t.Worktree != nil && p.Status == CheckpointReady {
				c.BranchHead = cmp.Or(p.BranchCommit, t.Worktree.Head)
				if p.BranchCommit != "" {
					if r := t.runW(c.RunID); r != nil {
						r.Commit = p.BranchCommit
					}
					t.worktreeW().Head = p.BranchCommit
				}
			}
		}
	case RollbackStarted:
		if p.Target != nil && t.checkpoint(p.Target.ID) == nil {
			t.write(partCheckpoints)
			t.Checkpoints = append(t.Checkpoints, *p.Target)
		}
		t.write(partRollbacks)
		t.Rollbacks = append(t.Rollbacks, Rollback{ID: p.RollbackID, CheckpointID: p.CheckpointID,
			TargetRunOrdinal: p.TargetRunOrdinal, Status: RollbackRestoringFiles, Runs: p.Runs, Checkpoints: p.Checkpoints,
			RequestedAt: e.At})
	case RollbackFilesRestored:
		t.write(partRollbacks)
		if rb := t.rollback(p.RollbackID); rb != nil {
			rb.Status = RollbackReconciling
			rb.FilesWritten, rb.FilesRemoved = p.Written, p.Removed
			rb.SavedRef, rb.SavedCommit = p.SavedRef, p.SavedCommit
			if p.BranchHead != "" && t.Worktree != nil {
				t.worktreeW().Head = p.BranchHead // the branch went back with the files
			}
		}
	case WorktreeReady:
		w := t.worktreeW()
		w.Status, w.Copied, w.SetupResult = WorktreeStatusReady, p.Copied, p.Setup
	case WorktreeFailed:
		w := t.worktreeW()
		w.Status, w.Failure = WorktreeStatusFailed, p.Failure
	case MergeRequested:
		t.Merges = append(slices.Clip(t.Merges), Merge{ID: p.MergeID, Into: p.Into, Squash: p.Squash, Status: MergePending})
	case Merged:
		t.Merges = slices.Clone(t.Merges)
		if m := t.merge(p.ID); m != nil {
			*m = p.Merge
		}
	case ThreadArchived:
		t.Archived = true
	case ThreadMoved:
		t.Host, t.HostLost = p.To, nil
	case ThreadHostLost:
		t.HostLost = &HostLost{Host: p.Host, At: e.At}
	case WorktreeRemoved:
		if t.Worktree != nil {
			w := t.worktreeW()
			if p.Failure != "" {
				w.Failure = p.Failure
			} else {
				w.Status, w.BranchDeleted = WorktreeStatusRemoved, p.BranchDeleted
			}
		}
	case RollbackFailed:
		t.write(partRollbacks)
		if rb := t.rollback(p.RollbackID); rb != nil {
			rb.Status, rb.FailedStage = RollbackStatusFailed, p.Stage
			f := p.Failure
			rb.Failure = &f
			at := e.At
			rb.EndedAt = &at
		}
	case RollbackCompleted:
		t.write(partRollbacks | partCheckpoints | partHandoffs | partProviderThreads)
		rb := t.rollback(p.RollbackID)
		if rb == nil {
			return
		}
		rb.Status, rb.Reconciliation, rb.ProviderThreadRef = RollbackDone, p.Reconciliation, p.ProviderThreadRef
		rb.TurnsDropped, rb.Note = p.TurnsDropped, p.Note
		at := e.At
		rb.EndedAt = &at
		for _, id := range rb.Runs {
			if r := t.runW(id); r != nil {
				r.Status = RunStatusRolledBack
			}
		}
		for _, id := range rb.Checkpoints {
			if c := t.checkpoint(id); c != nil {
				c.Status = CheckpointStale
			}
		}
		// Context that covers a rolled-back run no longer holds.
		for i := range t.Handoffs {
			if h := &t.Handoffs[i]; h.ToRun > rb.TargetRunOrdinal {
				h.Status = HandoffStatusSuperseded
			}
		}
		for _, id := range p.Detached {
			t.detach(id)
		}
		if b := t.binding(t.Provider); p.Reconciliation == ReconcileNative && b != nil && b.ProviderThreadID != "" {
			// The conversation dropped the rolled-back runs' turns, and with
			// them the handoffs they carried: it has seen what its kept
			// turns saw. It goes on under the ref the provider gave (a fork,
			// for some).
			seen := p.KeptThrough
			if seen == nil { // a log from before
				k := t.keptThrough(t.Provider, rb.TargetRunOrdinal)
				seen = &k
			}
			b = t.bindingW(t.Provider)
			b.SeenThrough = *seen
			b.ThreadRef = cmp.Or(p.ProviderThreadRef, b.ThreadRef)
			if pt := t.providerThreadByRef(b.ThreadRef); pt != nil {
				b.ProviderThreadID = pt.ID
			}
		}
		if target := rb.TargetRunOrdinal; target < t.earlierRuns() {
			// It reached back among the runs that left: the parts that
			// left before it read with it applied.
			e := t.earlierW()
			e.Rollbacks = append(e.Rollbacks, EarlierRollback{Target: target, Parts: e.Parts})
		}
		t.compact()
	case ProviderThreadDetached:
		t.detach(p.ProviderThreadID)
	case PolicySet:
		l := &Loop{Policy: p.Policy, Since: e.At, Status: LoopActive}
		if p.Policy.Off() {
			l.Status, l.Reason = LoopStopped, "the policy was turned off"
		}
		if t.Loop != nil {
			// Armed waits are kept, and a check still running: its
			// result is recorded when it comes, and runs queued behind
			// it start then.
			l.Wait, l.Return, l.CheckPending = t.Loop.Wait, t.Loop.Return, t.Loop.CheckPending
		}
		t.Loop = l
	case LimitReached:
		if r := t.runW(p.RunID); r != nil {
			l := p.Limit
			r.Limit = &l
			// The provider has not seen the run through: a return to it
			// tells it how the run went on.
			if b := t.binding(p.Provider); b != nil && b.SeenThrough >= r.Ordinal {
				t.bindingW(p.Provider).SeenThrough = r.Ordinal - 1
			}
		}
	case WaitArmed:
		l := t.loopW()
		w := p.Wait
		if w.Kind == WaitReturn {
			l.Return = &w
			return
		}
		l.Wait = &w
		if r := t.runW(w.RunID); r != nil {
			r.Status, r.WaitID, r.Waits, r.WaitSince = RunStatusWaiting, w.ID, w.Probe, w.Since
		}
	case WaitEnded:
		l := t.loopW()
		for _, w := range []**Wait{&l.Wait, &l.Return} {
			if *w != nil && (*w).ID == p.WaitID {
				if r := t.runW((*w).RunID); r != nil {
					r.WaitID = ""
				}
				*w = nil
			}
		}
	case CheckRequested:
		t.loopW().CheckPending = true
	case CheckRecorded:
		l := t.loopW()
		c := p.CheckResult
		l.Check, l.CheckPending = &c, false
	case LoopEnded:
		l := t.loopW()
		l.Status, l.Reason = p.Status, p.Reason
	case ProviderSwitched:
		t.Provider, t.Model, t.ProviderCommand = p.To, p.ToModel, p.Command
		b := t.bindingW(p.To)
		b.Model, b.Command = p.ToModel, p.Command
		if p.HandoffMaxBytes > 0 {
			t.HandoffMaxBytes = p.HandoffMaxBytes
		}
	case HandoffCreated:
		t.write(partHandoffs)
		t.Handoffs = append(t.Handoffs, ContextHandoff{ID: p.HandoffID, RollbackID: p.RollbackID, Strategy: p.Strategy,
			Version: p.Version, FromProvider: p.FromProvider, ToProvider: p.ToProvider, FromRun: p.FromRun, ToRun: p.ToRun,
			Runs: p.Runs, Bytes: p.Bytes, Truncated: p.Truncated, Cut: p.Cut, Fallback: p.Fallback,
			Status: HandoffReady, Text: p.Text})
		t.compact() // the handoffs it superseded
	case HandoffSuperseded:
		t.write(partHandoffs)
		for i := range t.Handoffs {
			if h := &t.Handoffs[i]; h.ID == p.HandoffID {
				h.Status, h.SupersededBy = HandoffStatusSuperseded, p.By
			}
		}
	case HandoffConsumed:
		t.write(partHandoffs)
		for i := range t.Handoffs {
			if h := &t.Handoffs[i]; h.ID == p.HandoffID {
				h.Status, h.RunID = HandoffStatusConsumed, p.RunID
			}
		}
	}
}

// forced records that the host ends a run's provider process (its
// session's, when it has one), and why.
func (t *Thread) forced(runID, sessionID, reason string, stalled bool) {
	if r := t.runW(runID); r != nil {
		r.Stop.Forced, r.Stop.Stalled = reason, stalled
	}
	if sessionID != "" {
		t.write(partSessions)
		if s := t.session(sessionID); s != nil {
			s.Forced = reason
		}
	}
}

// end ends an attempt with its run's status.
func (a *Attempt) end(status RunStatus, at time.Time) {
	a.Status = AttemptStatus(status)
	a.EndedAt = &at
}

// bindingW is the thread's binding of provider, made if there is none, to
// write to.
func (t *Thread) bindingW(provider string) *ProviderBinding {
	t.write(partBindings)
	if b := t.binding(provider); b != nil {
		return b
	}
	t.ProviderBindings = append(t.ProviderBindings, ProviderBinding{Provider: provider})
	return &t.ProviderBindings[len(t.ProviderBindings)-1]
}

// detach leaves a provider conversation behind: it is never resumed, and
// its provider's next run starts a fresh one.
func (t *Thread) detach(providerThreadID string) {
	t.write(partProviderThreads)
	pt := t.providerThread(providerThreadID)
	if pt == nil {
		return
	}
	pt.Detached = true
	for i := range t.ProviderBindings {
		if t.ProviderBindings[i].ProviderThreadID == providerThreadID {
			t.write(partBindings)
			b := &t.ProviderBindings[i]
			b.ProviderThreadID, b.ThreadRef, b.SeenThrough = "", "", 0
		}
	}
}

// keptThrough is the newest run, up to ordinal upTo and not rolled back,
// whose root turn ran in a conversation of provider's that is not left
// behind (0: none): after a native rollback, the conversation and the fork
// it may go on in.
func (t *Thread) keptThrough(provider string, upTo int) int {
	seen := 0
	for _, pt := range t.ProviderTurns {
		if c := t.providerThread(pt.ProviderThreadID); c == nil || c.Provider != provider || c.Detached || c.ParentID != "" {
			continue
		}
		// A run an earlier rollback dropped is not kept, whatever its ordinal.
		if r := t.run(pt.RunID); r != nil && r.Status != RunStatusRolledBack && r.Ordinal <= upTo && r.Ordinal > seen &&
			r.attempt(pt.AttemptID).RootNode == pt.NodeID {
			seen = r.Ordinal
		}
	}
	return seen
}
