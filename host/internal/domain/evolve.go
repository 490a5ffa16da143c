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
			CheckpointScopes: []CheckpointScope{}, Checkpoints: []Checkpoint{}}
	case MessageAdded:
		t.write(partMessages)
		t.Messages = append(t.Messages, Message{ID: p.MessageID, RunID: p.RunID, NodeID: p.NodeID, Role: p.Role,
			Text: NewText(p.Text), Status: p.Status})
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
			Input: p.Input, QueuedAt: e.At, Attempts: []Attempt{}, Nodes: []Node{}})
		if m := t.message(p.MessageID); m != nil {
			m.RunID = p.RunID // a steering message the provider refused, queued as a run
		}
	case RunStarted:
		if r := t.runW(p.RunID); r != nil {
			r.Status = RunStatusStarting
			at := e.At
			r.StartedAt = &at
		}
	case AttemptStarted:
		if r := t.runW(p.RunID); r != nil {
			r.Attempts = append(r.Attempts, Attempt{ID: p.AttemptID, Reason: p.Reason, Status: AttemptInProgress,
				StartedAt: e.At, RootNode: p.RootNode})
			r.ActiveAttempt = p.AttemptID
			if p.Reason != AttemptInitial {
				r.Status = RunStatusStarting
				r.PendingRestart = nil
			}
		}
	case NodeStarted:
		if r := t.runW(p.RunID); r != nil {
			r.Nodes = append(r.Nodes, Node{ID: p.NodeID, ParentID: p.ParentID, AttemptID: p.AttemptID, Kind: p.Kind,
				Status: StatusInProgress, ProviderRef: p.ProviderRef, Title: p.Title})
			if p.Kind != NodeRootTurn && p.Kind != ItemAssistantMessage {
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
		t.ProviderSessions = append(t.ProviderSessions, ProviderSession{ID: p.SessionID, Status: SessionStatusOpen,
			ProviderRef: p.ProviderRef, PluginPid: p.PluginPid, ProviderPid: p.ProviderPid, OpenedAt: e.At})
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
		t.ProviderThreads = append(t.ProviderThreads, ProviderThread{ID: p.ProviderThreadID, SessionID: p.SessionID,
			ProviderRef: p.ProviderRef, ParentID: p.ParentID})
	case ProviderTurnBound:
		t.write(partProviderTurns)
		t.ProviderTurns = append(t.ProviderTurns, ProviderTurn{ID: p.ProviderTurnID, ProviderThreadID: p.ProviderThreadID,
			ProviderRef: p.ProviderRef, RunID: p.RunID, AttemptID: p.AttemptID, NodeID: p.NodeID, Status: StatusInProgress})
		if r := t.run(p.RunID); r != nil && r.Status.Active() && r.ActiveAttempt == p.AttemptID && r.attempt(p.AttemptID).RootNode == p.NodeID {
			r = t.runW(p.RunID)
			r.Status = RunStatusRunning
			r.attempt(p.AttemptID).SessionID = p.SessionID
		}
	case RequestOpened:
		t.write(partRequests)
		t.Requests = append(t.Requests, RuntimeRequest{ID: p.RequestID, RunID: p.RunID, NodeID: p.NodeID,
			SessionID: p.SessionID, ProviderRef: p.ProviderRef, Kind: p.Kind, Title: p.Title, Options: p.Options,
			Status: RequestStatusPending, Delivery: DeliveryLive})
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
			u := p.Usage
			r.Usage = &u
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
		}
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
		t.write(partRateLimits)
		i := slices.IndexFunc(t.RateLimits, func(l RateLimit) bool { return l.Scope == p.Scope })
		if i < 0 {
			t.RateLimits = append(t.RateLimits, p.RateLimit)
		} else {
			t.RateLimits[i] = p.RateLimit
		}
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
		}
	case RollbackStarted:
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
				h.Status = HandoffSuperseded
			}
		}
		for i := range t.ProviderThreads {
			if slices.Contains(p.Detached, t.ProviderThreads[i].ID) {
				t.ProviderThreads[i].Detached = true
			}
		}
	case HandoffCreated:
		t.write(partHandoffs)
		t.Handoffs = append(t.Handoffs, ContextHandoff{ID: p.HandoffID, RollbackID: p.RollbackID, Strategy: p.Strategy,
			FromRun: p.FromRun, ToRun: p.ToRun, Status: HandoffReady, Text: p.Text})
	case HandoffConsumed:
		t.write(partHandoffs)
		for i := range t.Handoffs {
			if h := &t.Handoffs[i]; h.ID == p.HandoffID {
				h.Status, h.RunID = HandoffStatusConsumed, p.RunID
			}
		}
	}
}

// end ends an attempt with its run's status.
func (a *Attempt) end(status RunStatus, at time.Time) {
	a.Status = AttemptStatus(status)
	a.EndedAt = &at
}
