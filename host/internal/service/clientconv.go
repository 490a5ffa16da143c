package service

import (
	"encoding/json"
	"fmt"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	batonv1 "github.com/baton-run/baton/host/api/baton/v1"
	"github.com/baton-run/baton/host/internal/domain"
)

// The other way: baton.v1's messages back as the host's types, for code
// in this module that decides on the domain's thread over the API (a
// scenario script's driver, scenario.Client) and for tests that compare
// what the API gave with the log. A client that only shows a thread (the
// CLI) reads the messages themselves: what it says that takes a domain
// rule, the API carries. These read the API's typed fields, never a JSON
// form of the domain's, so the wire's schema stays baton.proto; each
// function undoes its counterpart in convert.go (TestConversionsRoundTrip
// holds them to it).

// SummaryOf is a thread's summary as the API gives it (a thread list's
// row, a thread's header).
func SummaryOf(t *batonv1.ThreadSummary) domain.ThreadSummary {
	return domain.ThreadSummary{ID: t.GetId(), Provider: t.GetProvider(), Cwd: t.GetCwd(), Model: t.GetModel(),
		CreatedAt: instant(t.GetCreatedAt()), UpdatedAt: instant(t.GetUpdatedAt()), Runs: int(t.GetRuns()), Queued: int(t.GetQueued()),
		Status: domain.ThreadStatus(t.GetStatus()), LastRun: domain.RunStatus(t.GetLastRun()), Sequence: t.GetSequence(),
		Archived: t.GetArchived(), Branch: t.GetBranch(), Title: t.GetTitle(), Pending: int(t.GetPending()), Worktree: t.GetWorktree(),
		Wait: summaryWaitOf(t.GetWait()), Repository: t.GetRepository(), Host: t.GetHost(), HostLost: hostLostOf(t.GetHostLost()),
		Usage: UsageOf(t.GetUsage())}
}

func hostLostOf(l *batonv1.HostLost) *domain.HostLost {
	if l == nil {
		return nil
	}
	return &domain.HostLost{Host: l.GetHost(), At: instant(l.GetAt())}
}

func summaryWaitOf(w *batonv1.SummaryWait) *domain.SummaryWait {
	if w == nil {
		return nil
	}
	return &domain.SummaryWait{At: instant(w.GetAt()), Kind: domain.WaitKind(w.GetKind()), Provider: w.GetProvider(), RunID: w.GetRunId()}
}

// ThreadOf is an API thread's projection as the domain's Thread.
func ThreadOf(t *batonv1.Thread) domain.Thread {
	out := domain.Thread{ID: t.GetId(), Provider: t.GetProvider(), Cwd: t.GetCwd(), Model: t.GetModel(),
		ProviderCommand: commandOf(t.GetProviderCommand()), ApprovalPolicy: domain.ApprovalPolicy(t.GetApprovalPolicy()),
		CreatedAt: instant(t.GetCreatedAt()), UpdatedAt: instant(t.GetUpdatedAt()),
		Runs: list(t.GetRuns(), runOf), Messages: list(t.GetMessages(), messageOf), TurnItems: list(t.GetTurnItems(), turnItemOf),
		ProviderSessions: list(t.GetProviderSessions(), sessionOf), ProviderThreads: list(t.GetProviderThreads(), providerThreadOf),
		ProviderTurns: list(t.GetProviderTurns(), providerTurnOf), Requests: list(t.GetRequests(), requestOf),
		Diagnostics: list(t.GetDiagnostics(), diagnosticOf), RateLimits: list(t.GetRateLimits(), rateLimitOf),
		CheckpointScopes: list(t.GetCheckpointScopes(), scopeOf), Checkpoints: list(t.GetCheckpoints(), checkpointOf),
		Rollbacks: list(t.GetRollbacks(), rollbackOf), Handoffs: list(t.GetHandoffs(), handoffOf),
		ProviderBindings: list(t.GetProviderBindings(), bindingOf), HandoffMaxBytes: int(t.GetHandoffMaxBytes()),
		Sequence: t.GetSequence(), Worktree: worktreeOf(t.GetWorktree()), Merges: list(t.GetMerges(), mergeOf), Archived: t.GetArchived(),
		Title: t.GetTitle(), Host: t.GetHost(), SharedCwd: t.GetSharedCwd(), HostLost: hostLostOf(t.GetHostLost())}
	if l := t.GetLoop(); l != nil {
		loop := loopOf(l)
		out.Loop = &loop
	}
	if e := t.GetEarlier(); e != nil {
		out.Earlier = &domain.Earlier{Runs: int(e.GetRuns()), Messages: int(e.GetMessages()), Parts: int(e.GetParts()),
			RootScopes: int(e.GetRootScopes()), Rollbacks: list(e.GetRollbacks(), func(r *batonv1.EarlierRollback) domain.EarlierRollback {
				return domain.EarlierRollback{Target: int(r.GetTarget()), Parts: int(r.GetParts())}
			})}
	}
	return out
}

// instant is a Timestamp as an instant (the zero instant for none).
func instant(t *timestamppb.Timestamp) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.AsTime()
}

// instantp is an optional Timestamp as an optional instant.
func instantp(t *timestamppb.Timestamp) *time.Time {
	if t == nil {
		return nil
	}
	at := t.AsTime()
	return &at
}

// durationOf is a Duration as a duration (0 for none).
func durationOf(d *durationpb.Duration) time.Duration {
	if d == nil {
		return 0
	}
	return d.AsDuration()
}

// detail is an item's detail as the JSON text it is (nil for none).
func detail(s string) json.RawMessage {
	if s == "" {
		return nil
	}
	return json.RawMessage(s)
}

// checkCommand says what is wrong with a provider command from a client
// (field names it): env or an agent without argv, an agent version
// without its agent.
func checkCommand(field string, c *batonv1.ProviderCommand) error {
	switch {
	case len(c.GetArgv()) == 0 && len(c.GetEnv()) > 0:
		return invalid(field, "env without argv")
	case len(c.GetArgv()) == 0 && c.GetAgent() != "":
		return invalid(field, "agent without argv")
	case c.GetAgent() == "" && c.GetAgentVersion() != "":
		return invalid(field, "agent_version without agent")
	}
	if err := checkID(field+".agent", c.GetAgent()); err != nil {
		return err
	}
	return checkID(field+".agent_version", c.GetAgentVersion())
}

// commandOf is a provider command from the API (nil: none).
func commandOf(c *batonv1.ProviderCommand) domain.ProviderCommand {
	return domain.ProviderCommand{Argv: c.GetArgv(), Env: c.GetEnv(), Agent: c.GetAgent(), AgentVersion: c.GetAgentVersion()}
}

func runOf(r *batonv1.Run) domain.Run {
	out := domain.Run{ID: r.GetId(), Ordinal: int(r.GetOrdinal()), Status: domain.RunStatus(r.GetStatus()), MessageID: r.GetMessageId(),
		Input: r.GetInput(), QueuedAt: instant(r.GetQueuedAt()), StartedAt: instantp(r.GetStartedAt()), EndedAt: instantp(r.GetEndedAt()),
		ActiveAttempt: r.GetActiveAttempt(), Provider: r.GetProvider(), Model: r.GetModel(), FinalAttempt: r.GetFinalAttempt(),
		Attempts: list(r.GetAttempts(), attemptOf), Nodes: list(r.GetNodes(), nodeOf), StopReason: r.GetStopReason(),
		Failure: failureOf(r.GetFailure()), Usage: usageOf(r.GetUsage()), InterruptRequested: r.GetInterruptRequested(),
		PendingRestart: list(r.GetPendingRestart(), func(m *batonv1.SteeringMessage) domain.SteeringMessage {
			return domain.SteeringMessage{MessageID: m.GetMessageId(), Text: m.GetText()}
		}),
		CheckpointID: r.GetCheckpointId(), Commit: r.GetCommit(), WaitID: r.GetWaitId(), Waits: int(r.GetWaits()), WaitSince: instant(r.GetWaitSince()), Host: r.GetHost(),
		MCP: mcpChoiceOf(r.GetMcp())}
	if s := r.GetStop(); s != nil {
		out.Stop = domain.RunStop{Deadline: instant(s.GetDeadline()), Grace: durationOf(s.GetGrace()), Forced: s.GetForced(),
			Stalled: s.GetStalled()}
	}
	if o := r.GetEnding(); o != nil {
		ending := outcomeOf(o)
		out.Ending = &ending
	}
	if l := r.GetLimit(); l != nil {
		limit := limitOf(l)
		out.Limit = &limit
	}
	return out
}

func worktreeOf(w *batonv1.Worktree) *domain.Worktree {
	if w == nil {
		return nil
	}
	return &domain.Worktree{Repository: w.GetRepository(), Path: w.GetPath(), Branch: w.GetBranch(), Base: w.GetBase(),
		BaseBranch: w.GetBaseBranch(), Author: w.GetAuthor(), Copy: w.GetCopy(), Setup: w.GetSetup(),
		Status: domain.WorktreeStatus(w.GetStatus()), Failure: w.GetFailure(), Copied: w.GetCopied(), SetupResult: setupOf(w.GetSetupResult()),
		Head: w.GetHead(), BranchDeleted: w.GetBranchDeleted()}
}

func setupOf(s *batonv1.SetupResult) *domain.SetupResult {
	if s == nil {
		return nil
	}
	return &domain.SetupResult{Command: s.GetCommand(), ExitCode: int(s.GetExitCode()), Output: s.GetOutput()}
}

func mergeOf(m *batonv1.Merge) domain.Merge {
	return domain.Merge{ID: m.GetId(), Into: m.GetInto(), Squash: m.GetSquash(), Status: domain.MergeStatus(m.GetStatus()),
		From: m.GetFrom(), Commit: m.GetCommit(), Commits: m.GetCommits(), Conflicts: m.GetConflicts(), Dirty: m.GetDirty(),
		Worktree: m.GetWorktree(), Error: m.GetError()}
}

func outcomeOf(o *batonv1.RunOutcome) domain.RunOutcome {
	return domain.RunOutcome{AttemptID: o.GetAttemptId(), Status: domain.RunStatus(o.GetStatus()), StopReason: o.GetStopReason(),
		Failure: failureOf(o.GetFailure())}
}

func attemptOf(a *batonv1.Attempt) domain.Attempt {
	return domain.Attempt{ID: a.GetId(), Reason: domain.AttemptReason(a.GetReason()), Status: domain.AttemptStatus(a.GetStatus()),
		SessionID: a.GetSessionId(), StartedAt: instant(a.GetStartedAt()), EndedAt: instantp(a.GetEndedAt()), RootNode: a.GetRootNode(),
		Usage: usageOf(a.GetUsage()), Provider: a.GetProvider()}
}

func nodeOf(n *batonv1.Node) domain.Node {
	return domain.Node{ID: n.GetId(), ParentID: n.GetParentId(), AttemptID: n.GetAttemptId(), Kind: domain.NodeKind(n.GetKind()),
		Status: domain.ItemStatus(n.GetStatus()), ProviderRef: n.GetProviderRef(), Title: n.GetTitle()}
}

func messageOf(m *batonv1.Message) domain.Message {
	return domain.Message{ID: m.GetId(), RunID: m.GetRunId(), NodeID: m.GetNodeId(), Role: domain.Role(m.GetRole()),
		Text: domain.NewText(m.GetText()), Status: domain.ItemStatus(m.GetStatus())}
}

func turnItemOf(it *batonv1.TurnItem) domain.TurnItem {
	return domain.TurnItem{ID: it.GetId(), RunID: it.GetRunId(), NodeID: it.GetNodeId(), Kind: domain.NodeKind(it.GetKind()),
		Title: it.GetTitle(), Status: domain.ItemStatus(it.GetStatus()), Text: domain.NewText(it.GetText()), Detail: detail(it.GetDetail())}
}

func sessionOf(s *batonv1.ProviderSession) domain.ProviderSession {
	return domain.ProviderSession{ID: s.GetId(), Provider: s.GetProvider(), Model: s.GetModel(), Resumed: s.GetResumed(),
		Status: domain.SessionStatus(s.GetStatus()), ProviderRef: s.GetProviderRef(), PluginPid: int(s.GetPluginPid()),
		ProviderPid: int(s.GetProviderPid()), OpenedAt: instant(s.GetOpenedAt()), EndedAt: instantp(s.GetEndedAt()),
		EndReason: s.GetEndReason(), Forced: s.GetForced(), MCP: list(s.GetMcp(), mcpRefOf)}
}

func mcpRefOf(r *batonv1.McpServerRef) domain.MCPServerRef {
	return domain.MCPServerRef{Name: r.GetName(), Transport: r.GetTransport(), Thread: r.GetThread(), Revision: int(r.GetRevision())}
}

func mcpChoiceOf(c *batonv1.McpChoice) *domain.MCPChoice {
	if c == nil {
		return nil
	}
	return &domain.MCPChoice{Names: c.GetNames(), None: c.GetNone()}
}

func providerThreadOf(pt *batonv1.ProviderThread) domain.ProviderThread {
	return domain.ProviderThread{ID: pt.GetId(), Provider: pt.GetProvider(), SessionID: pt.GetSessionId(), ProviderRef: pt.GetProviderRef(),
		ParentID: pt.GetParentId(), Detached: pt.GetDetached()}
}

func providerTurnOf(pt *batonv1.ProviderTurn) domain.ProviderTurn {
	return domain.ProviderTurn{ID: pt.GetId(), ProviderThreadID: pt.GetProviderThreadId(), ProviderRef: pt.GetProviderRef(),
		RunID: pt.GetRunId(), AttemptID: pt.GetAttemptId(), NodeID: pt.GetNodeId(), Status: domain.ItemStatus(pt.GetStatus())}
}

func requestOf(r *batonv1.RuntimeRequest) domain.RuntimeRequest {
	return domain.RuntimeRequest{ID: r.GetId(), RunID: r.GetRunId(), NodeID: r.GetNodeId(), SessionID: r.GetSessionId(),
		ProviderRef: r.GetProviderRef(), Kind: domain.RequestKind(r.GetKind()), Title: r.GetTitle(), Options: list(r.GetOptions(), optionOf),
		Status: domain.RequestStatus(r.GetStatus()), Decision: domain.RequestDecision(r.GetDecision()), Answers: r.GetAnswers(),
		AnsweredBy: domain.Answerer(r.GetAnsweredBy()), AnswerFailures: int(r.GetAnswerFailures()),
		Delivery: domain.Delivery(r.GetDelivery()), OpenedAt: instant(r.GetOpenedAt())}
}

func optionOf(o *batonv1.RequestOption) domain.RequestOption {
	return domain.RequestOption{ID: o.GetId(), Label: o.GetLabel(), Kind: domain.OptionKind(o.GetKind())}
}

func diagnosticOf(d *batonv1.Diagnostic) domain.Diagnostic {
	return domain.Diagnostic{RunID: d.GetRunId(), Title: d.GetTitle(), Text: d.GetText()}
}

func failureOf(f *batonv1.Failure) *domain.Failure {
	if f == nil {
		return nil
	}
	return &domain.Failure{Code: f.GetCode(), Message: f.GetMessage()}
}

func usageOf(u *batonv1.Usage) *domain.Usage {
	if u == nil {
		return nil
	}
	return &domain.Usage{InputTokens: u.GetInputTokens(), OutputTokens: u.GetOutputTokens(), CachedInputTokens: u.GetCachedInputTokens(),
		ReasoningTokens: u.GetReasoningTokens(), TotalTokens: u.GetTotalTokens(), CostMicros: u.GetCostMicros(), Model: u.GetModel()}
}

func rateLimitOf(l *batonv1.RateLimit) domain.RateLimit {
	return domain.RateLimit{ResetsAt: instant(l.GetResetsAt()), UsedPercent: l.GetUsedPercent(), Scope: l.GetScope(),
		Provider: l.GetProvider(), At: instant(l.GetAt())}
}

func limitOf(l *batonv1.Limit) domain.Limit {
	return domain.Limit{Kind: domain.LimitKind(l.GetKind()), ResetsAt: instant(l.GetResetsAt()), Scope: l.GetScope(), Message: l.GetMessage(),
		Evidence: l.GetEvidence()}
}

func scopeOf(sc *batonv1.CheckpointScope) domain.CheckpointScope {
	return domain.CheckpointScope{ID: sc.GetId(), Kind: domain.ScopeKind(sc.GetKind()), RunID: sc.GetRunId(), NodeID: sc.GetNodeId(),
		ParentID: sc.GetParentId(), Ordinal: int(sc.GetOrdinal()), AdvancesRunCount: sc.GetAdvancesRunCount()}
}

func checkpointOf(c *batonv1.Checkpoint) domain.Checkpoint {
	return domain.Checkpoint{ID: c.GetId(), ScopeID: c.GetScopeId(), RunID: c.GetRunId(), NodeID: c.GetNodeId(),
		RunOrdinal: int(c.GetRunOrdinal()), BaseID: c.GetBaseId(), Ref: c.GetRef(), Commit: c.GetCommit(),
		Status: domain.CheckpointStatus(c.GetStatus()), Files: list(c.GetFiles(), fileChangeOf), Reason: c.GetReason(),
		RequestedAt: instant(c.GetRequestedAt()), CapturedAt: instantp(c.GetCapturedAt()), BranchHead: c.GetBranchHead()}
}

func fileChangeOf(f *batonv1.FileChange) domain.FileChange {
	return domain.FileChange{Path: f.GetPath(), Kind: f.GetKind(), Additions: int(f.GetAdditions()), Deletions: int(f.GetDeletions()),
		Binary: f.GetBinary()}
}

func rollbackOf(rb *batonv1.Rollback) domain.Rollback {
	return domain.Rollback{ID: rb.GetId(), CheckpointID: rb.GetCheckpointId(), TargetRunOrdinal: int(rb.GetTargetRunOrdinal()),
		Status: domain.RollbackStatus(rb.GetStatus()), Runs: rb.GetRuns(), Checkpoints: rb.GetCheckpoints(),
		FilesWritten: int(rb.GetFilesWritten()), FilesRemoved: int(rb.GetFilesRemoved()), SavedRef: rb.GetSavedRef(),
		SavedCommit: rb.GetSavedCommit(), Reconciliation: domain.Reconciliation(rb.GetReconciliation()),
		ProviderThreadRef: rb.GetProviderThreadRef(), TurnsDropped: int(rb.GetTurnsDropped()), Note: rb.GetNote(),
		FailedStage: rb.GetFailedStage(), Failure: failureOf(rb.GetFailure()), RequestedAt: instant(rb.GetRequestedAt()),
		EndedAt: instantp(rb.GetEndedAt())}
}

func handoffOf(h *batonv1.ContextHandoff) domain.ContextHandoff {
	return domain.ContextHandoff{ID: h.GetId(), RollbackID: h.GetRollbackId(), Strategy: domain.HandoffStrategy(h.GetStrategy()),
		Version: int(h.GetVersion()), FromProvider: h.GetFromProvider(), ToProvider: h.GetToProvider(), FromRun: int(h.GetFromRun()),
		ToRun: int(h.GetToRun()), Runs: list(h.GetRuns(), handoffRunOf), Bytes: int(h.GetBytes()), Truncated: h.GetTruncated(),
		Cut: h.GetCut(), Fallback: h.GetFallback(), Status: domain.HandoffStatus(h.GetStatus()), SupersededBy: h.GetSupersededBy(),
		RunID: h.GetRunId(), Text: h.GetText()}
}

func handoffRunOf(r *batonv1.HandoffRun) domain.HandoffRun {
	return domain.HandoffRun{Ordinal: int(r.GetOrdinal()), RunID: r.GetRunId(), Provider: r.GetProvider(), MessageIDs: r.GetMessageIds(),
		Shortened: r.GetShortened()}
}

func bindingOf(b *batonv1.ProviderBinding) domain.ProviderBinding {
	return domain.ProviderBinding{Provider: b.GetProvider(), Model: b.GetModel(), Command: commandOf(b.GetCommand()),
		SessionID: b.GetSessionId(), ProviderThreadID: b.GetProviderThreadId(), ThreadRef: b.GetThreadRef(),
		SeenThrough: int(b.GetSeenThrough()), Runs: list(b.GetRuns(), func(n uint32) int { return int(n) }),
		RunsBefore: int(b.GetRunsBefore())}
}

func loopOf(l *batonv1.Loop) domain.Loop {
	out := domain.Loop{Policy: policyValueOf(l.GetPolicy()), Since: instant(l.GetSince()), Status: domain.LoopStatus(l.GetStatus()),
		Reason: l.GetReason(), Runs: int(l.GetRuns()), Tokens: l.GetTokens(), CheckPending: l.GetCheckPending()}
	if w := l.GetWait(); w != nil {
		wait := waitOf(w)
		out.Wait = &wait
	}
	if w := l.GetReturn(); w != nil {
		wait := waitOf(w)
		out.Return = &wait
	}
	if c := l.GetCheck(); c != nil {
		check := checkOf(c)
		out.Check = &check
	}
	return out
}

// policyValueOf is a recorded policy as the domain's, as it was recorded
// (policyOf is a client's, checked and with its words read).
func policyValueOf(p *batonv1.ContinuationPolicy) domain.ContinuationPolicy {
	return domain.ContinuationPolicy{OnLimit: domain.OnLimit(p.GetOnLimit()), SwitchTo: p.GetSwitchTo(), SwitchModel: p.GetSwitchModel(),
		SwitchCommand: commandOf(p.GetSwitchProviderCommand()), Return: p.GetReturn(), ContinueText: p.GetContinueText(),
		Probe:     domain.Backoff{Interval: durationOf(p.GetProbeInterval()), Factor: p.GetProbeFactor(), Ceiling: durationOf(p.GetProbeCeiling())},
		MaxProbes: int(p.GetMaxProbes()), MaxWait: durationOf(p.GetMaxWait()), Until: p.GetUntil(),
		CheckTimeout: durationOf(p.GetCheckTimeout()), MaxRuns: int(p.GetMaxRuns()), MaxDuration: durationOf(p.GetMaxDuration()),
		MaxTokens: p.GetMaxTokens()}
}

func waitOf(w *batonv1.Wait) domain.Wait {
	return domain.Wait{ID: w.GetId(), Kind: domain.WaitKind(w.GetKind()), RunID: w.GetRunId(), Provider: w.GetProvider(),
		Limit: limitOf(w.GetLimit()), At: instant(w.GetAt()), Probe: int(w.GetProbe()), MaxProbes: int(w.GetMaxProbes()),
		Since: instant(w.GetSince()), ArmedAt: instant(w.GetArmedAt())}
}

func checkOf(c *batonv1.CheckResult) domain.CheckResult {
	return domain.CheckResult{RunID: c.GetRunId(), Command: c.GetCommand(), ExitCode: int(c.GetExitCode()), Output: c.GetOutput(),
		Truncated: c.GetTruncated(), TimedOut: c.GetTimedOut(), Error: c.GetError(), At: instant(c.GetAt())}
}

// PayloadOf is an API event's payload as the domain's. An event whose
// payload this client does not know (a newer service's) is an error that
// names its type.
func PayloadOf(ev *batonv1.Event) (domain.Payload, error) {
	switch e := ev.GetPayload().(type) {
	case *batonv1.Event_ThreadCreated:
		p := e.ThreadCreated
		return domain.ThreadCreated{Provider: p.GetProvider(), Cwd: p.GetCwd(), Model: p.GetModel(),
			ProviderCommand: commandOf(p.GetProviderCommand()), ApprovalPolicy: domain.ApprovalPolicy(p.GetApprovalPolicy()),
			Worktree: worktreeOf(p.GetWorktree()), Host: p.GetHost(), SharedCwd: p.GetSharedCwd()}, nil
	case *batonv1.Event_MessageAdded:
		p := e.MessageAdded
		return domain.MessageAdded{MessageID: p.GetMessageId(), RunID: p.GetRunId(), NodeID: p.GetNodeId(), Role: domain.Role(p.GetRole()),
			Text: p.GetText(), Status: domain.ItemStatus(p.GetStatus())}, nil
	case *batonv1.Event_MessageDelta:
		return domain.MessageDelta{MessageID: e.MessageDelta.GetMessageId(), Text: e.MessageDelta.GetText()}, nil
	case *batonv1.Event_MessageCompleted:
		return domain.MessageCompleted{MessageID: e.MessageCompleted.GetMessageId()}, nil
	case *batonv1.Event_RunQueued:
		p := e.RunQueued
		return domain.RunQueued{RunID: p.GetRunId(), Ordinal: int(p.GetOrdinal()), MessageID: p.GetMessageId(), Input: p.GetInput(),
			MCP: mcpChoiceOf(p.GetMcp())}, nil
	case *batonv1.Event_RunStarted:
		p := e.RunStarted
		return domain.RunStarted{RunID: p.GetRunId(), Provider: p.GetProvider(), Model: p.GetModel(), Host: p.GetHost()}, nil
	case *batonv1.Event_AttemptStarted:
		p := e.AttemptStarted
		return domain.AttemptStarted{RunID: p.GetRunId(), AttemptID: p.GetAttemptId(), Reason: domain.AttemptReason(p.GetReason()),
			RootNode: p.GetRootNode(), Provider: p.GetProvider(), Model: p.GetModel()}, nil
	case *batonv1.Event_NodeStarted:
		p := e.NodeStarted
		return domain.NodeStarted{RunID: p.GetRunId(), NodeID: p.GetNodeId(), ParentID: p.GetParentId(), AttemptID: p.GetAttemptId(),
			Kind: domain.NodeKind(p.GetKind()), ProviderRef: p.GetProviderRef(), Title: p.GetTitle(), Detail: detail(p.GetDetail())}, nil
	case *batonv1.Event_NodeUpdated:
		p := e.NodeUpdated
		return domain.NodeUpdated{RunID: p.GetRunId(), NodeID: p.GetNodeId(), Status: domain.ItemStatus(p.GetStatus()), Title: p.GetTitle(),
			Detail: detail(p.GetDetail())}, nil
	case *batonv1.Event_NodeDelta:
		p := e.NodeDelta
		return domain.NodeDelta{RunID: p.GetRunId(), NodeID: p.GetNodeId(), Text: p.GetText()}, nil
	case *batonv1.Event_NodeCompleted:
		p := e.NodeCompleted
		return domain.NodeCompleted{RunID: p.GetRunId(), NodeID: p.GetNodeId(), Status: domain.ItemStatus(p.GetStatus())}, nil
	case *batonv1.Event_ProviderSessionOpened:
		p := e.ProviderSessionOpened
		return domain.SessionOpened{SessionID: p.GetSessionId(), Provider: p.GetProvider(), Model: p.GetModel(), ProviderRef: p.GetProviderRef(),
			PluginPid: int(p.GetPluginPid()), ProviderPid: int(p.GetProviderPid()), ResumeRequested: p.GetResumeRequested(),
			Resumed: p.GetResumed(), MCP: list(p.GetMcp(), mcpRefOf)}, nil
	case *batonv1.Event_ProviderSessionEnded:
		return domain.SessionEnded{SessionID: e.ProviderSessionEnded.GetSessionId(), Reason: e.ProviderSessionEnded.GetReason()}, nil
	case *batonv1.Event_ProviderThreadBound:
		p := e.ProviderThreadBound
		return domain.ProviderThreadBound{ProviderThreadID: p.GetProviderThreadId(), SessionID: p.GetSessionId(),
			ProviderRef: p.GetProviderRef(), ParentID: p.GetParentId()}, nil
	case *batonv1.Event_ProviderTurnBound:
		p := e.ProviderTurnBound
		return domain.ProviderTurnBound{ProviderTurnID: p.GetProviderTurnId(), ProviderThreadID: p.GetProviderThreadId(),
			SessionID: p.GetSessionId(), ProviderRef: p.GetProviderRef(), RunID: p.GetRunId(), AttemptID: p.GetAttemptId(),
			NodeID: p.GetNodeId()}, nil
	case *batonv1.Event_RequestOpened:
		p := e.RequestOpened
		return domain.RequestOpened{RequestID: p.GetRequestId(), RunID: p.GetRunId(), NodeID: p.GetNodeId(), SessionID: p.GetSessionId(),
			ProviderRef: p.GetProviderRef(), Kind: domain.RequestKind(p.GetKind()), Title: p.GetTitle(),
			Options: list(p.GetOptions(), optionOf)}, nil
	case *batonv1.Event_RequestResolved:
		p := e.RequestResolved
		return domain.RequestResolved{RequestID: p.GetRequestId(), Status: domain.RequestStatus(p.GetStatus()),
			Decision: domain.RequestDecision(p.GetDecision()), Delivery: domain.Delivery(p.GetDelivery())}, nil
	case *batonv1.Event_UsageReported:
		p := e.UsageReported
		var u domain.Usage
		if pu := usageOf(p.GetUsage()); pu != nil {
			u = *pu
		}
		return domain.UsageReported{RunID: p.GetRunId(), AttemptID: p.GetAttemptId(), Usage: u, Models: usagesOf(p.GetModels())}, nil
	case *batonv1.Event_RunEnded:
		p := e.RunEnded
		return domain.RunEnded{RunID: p.GetRunId(), AttemptID: p.GetAttemptId(), Status: domain.RunStatus(p.GetStatus()),
			StopReason: p.GetStopReason(), Failure: failureOf(p.GetFailure())}, nil
	case *batonv1.Event_DiagnosticRecorded:
		p := e.DiagnosticRecorded
		return domain.DiagnosticRecorded{RunID: p.GetRunId(), Title: p.GetTitle(), Text: p.GetText()}, nil
	case *batonv1.Event_RunSteered:
		p := e.RunSteered
		return domain.RunSteered{RunID: p.GetRunId(), AttemptID: p.GetAttemptId(), MessageID: p.GetMessageId()}, nil
	case *batonv1.Event_RunRestartRequested:
		p := e.RunRestartRequested
		return domain.RestartRequested{RunID: p.GetRunId(), AttemptID: p.GetAttemptId(), MessageID: p.GetMessageId(), Text: p.GetText()}, nil
	case *batonv1.Event_RunInterruptRequested:
		p := e.RunInterruptRequested
		return domain.InterruptRequested{RunID: p.GetRunId(), AttemptID: p.GetAttemptId(), Grace: durationOf(p.GetGrace())}, nil
	case *batonv1.Event_RunStopForced:
		p := e.RunStopForced
		return domain.StopForced{RunID: p.GetRunId(), AttemptID: p.GetAttemptId(), SessionID: p.GetSessionId(), Reason: p.GetReason()}, nil
	case *batonv1.Event_RunStalled:
		p := e.RunStalled
		return domain.TurnStalled{RunID: p.GetRunId(), AttemptID: p.GetAttemptId(), SessionID: p.GetSessionId(), Since: instant(p.GetSince()),
			Reason: p.GetReason()}, nil
	case *batonv1.Event_AttemptEnded:
		p := e.AttemptEnded
		return domain.AttemptEnded{RunID: p.GetRunId(), AttemptID: p.GetAttemptId(), Status: domain.RunStatus(p.GetStatus())}, nil
	case *batonv1.Event_RequestAnswered:
		p := e.RequestAnswered
		return domain.RequestAnswered{RequestID: p.GetRequestId(), Decision: domain.RequestDecision(p.GetDecision()), Answers: p.GetAnswers(),
			By: domain.Answerer(p.GetBy())}, nil
	case *batonv1.Event_EffectCancelled:
		p := e.EffectCancelled
		return domain.EffectCancelled{EffectID: p.GetEffectId(), Type: domain.EffectType(p.GetType()), RunID: p.GetRunId(),
			Reason: p.GetReason()}, nil
	case *batonv1.Event_AttemptDispatched:
		p := e.AttemptDispatched
		return domain.AttemptDispatched{RunID: p.GetRunId(), AttemptID: p.GetAttemptId(), SessionID: p.GetSessionId()}, nil
	case *batonv1.Event_RequestAnswerFailed:
		return domain.RequestAnswerFailed{RequestID: e.RequestAnswerFailed.GetRequestId(), Reason: e.RequestAnswerFailed.GetReason()}, nil
	case *batonv1.Event_RateLimitReported:
		return domain.RateLimitReported{RateLimit: rateLimitOf(e.RateLimitReported)}, nil
	case *batonv1.Event_RunCompleting:
		p := e.RunCompleting
		var o domain.RunOutcome
		if p.GetOutcome() != nil {
			o = outcomeOf(p.GetOutcome())
		}
		return domain.RunCompleting{RunID: p.GetRunId(), RunOutcome: o}, nil
	case *batonv1.Event_CheckpointScopeOpened:
		p := e.CheckpointScopeOpened
		return domain.CheckpointScopeOpened{ScopeID: p.GetScopeId(), Kind: domain.ScopeKind(p.GetKind()), RunID: p.GetRunId(),
			NodeID: p.GetNodeId(), ParentID: p.GetParentId(), Ordinal: int(p.GetOrdinal()), AdvancesRunCount: p.GetAdvancesRunCount()}, nil
	case *batonv1.Event_CheckpointRequested:
		p := e.CheckpointRequested
		return domain.CheckpointRequested{CheckpointID: p.GetCheckpointId(), ScopeID: p.GetScopeId(), RunID: p.GetRunId(),
			NodeID: p.GetNodeId(), RunOrdinal: int(p.GetRunOrdinal()), BaseID: p.GetBaseId(), Ref: p.GetRef()}, nil
	case *batonv1.Event_CheckpointRecorded:
		p := e.CheckpointRecorded
		return domain.CheckpointRecorded{CheckpointID: p.GetCheckpointId(), Status: domain.CheckpointStatus(p.GetStatus()),
			Commit: p.GetCommit(), Files: list(p.GetFiles(), fileChangeOf), Reason: p.GetReason(),
			BranchCommit: p.GetBranchCommit(), BranchError: p.GetBranchError()}, nil
	case *batonv1.Event_RollbackStarted:
		p := e.RollbackStarted
		out := domain.RollbackStarted{RollbackID: p.GetRollbackId(), CheckpointID: p.GetCheckpointId(),
			TargetRunOrdinal: int(p.GetTargetRunOrdinal()), Runs: p.GetRuns(), Checkpoints: p.GetCheckpoints()}
		if c := p.GetTarget(); c != nil {
			target := checkpointOf(c)
			out.Target = &target
		}
		return out, nil
	case *batonv1.Event_RollbackFilesRestored:
		p := e.RollbackFilesRestored
		return domain.RollbackFilesRestored{RollbackID: p.GetRollbackId(), Written: int(p.GetWritten()), Removed: int(p.GetRemoved()),
			SavedRef: p.GetSavedRef(), SavedCommit: p.GetSavedCommit(), BranchHead: p.GetBranchHead()}, nil
	case *batonv1.Event_RollbackCompleted:
		p := e.RollbackCompleted
		out := domain.RollbackCompleted{RollbackID: p.GetRollbackId(), Reconciliation: domain.Reconciliation(p.GetReconciliation()),
			ProviderThreadRef: p.GetProviderThreadRef(), TurnsDropped: int(p.GetTurnsDropped()), Note: p.GetNote(), Detached: p.GetDetached()}
		if p.KeptThrough != nil {
			kept := int(p.GetKeptThrough())
			out.KeptThrough = &kept
		}
		return out, nil
	case *batonv1.Event_RollbackFailed:
		p := e.RollbackFailed
		var f domain.Failure
		if pf := failureOf(p.GetFailure()); pf != nil {
			f = *pf
		}
		return domain.RollbackFailed{RollbackID: p.GetRollbackId(), Stage: p.GetStage(), Failure: f}, nil
	case *batonv1.Event_HandoffCreated:
		p := e.HandoffCreated
		return domain.HandoffCreated{HandoffID: p.GetHandoffId(), RollbackID: p.GetRollbackId(), Strategy: domain.HandoffStrategy(p.GetStrategy()),
			Version: int(p.GetVersion()), FromProvider: p.GetFromProvider(), ToProvider: p.GetToProvider(), FromRun: int(p.GetFromRun()),
			ToRun: int(p.GetToRun()), Runs: list(p.GetRuns(), handoffRunOf), Bytes: int(p.GetBytes()), Truncated: p.GetTruncated(),
			Cut: p.GetCut(), Fallback: p.GetFallback(), Text: p.GetText()}, nil
	case *batonv1.Event_HandoffConsumed:
		return domain.HandoffConsumed{HandoffID: e.HandoffConsumed.GetHandoffId(), RunID: e.HandoffConsumed.GetRunId()}, nil
	case *batonv1.Event_HandoffSuperseded:
		return domain.HandoffSuperseded{HandoffID: e.HandoffSuperseded.GetHandoffId(), By: e.HandoffSuperseded.GetBy()}, nil
	case *batonv1.Event_ThreadProviderSwitched:
		p := e.ThreadProviderSwitched
		return domain.ProviderSwitched{From: p.GetFrom(), To: p.GetTo(), FromModel: p.GetFromModel(), ToModel: p.GetToModel(),
			Command: commandOf(p.GetCommand()), HandoffMaxBytes: int(p.GetHandoffMaxBytes())}, nil
	case *batonv1.Event_ProviderThreadDetached:
		p := e.ProviderThreadDetached
		return domain.ProviderThreadDetached{ProviderThreadID: p.GetProviderThreadId(), Reason: p.GetReason()}, nil
	case *batonv1.Event_ThreadPolicySet:
		return domain.PolicySet{Policy: policyValueOf(e.ThreadPolicySet.GetPolicy())}, nil
	case *batonv1.Event_RunLimitReached:
		p := e.RunLimitReached
		return domain.LimitReached{RunID: p.GetRunId(), AttemptID: p.GetAttemptId(), Provider: p.GetProvider(), Limit: limitOf(p.GetLimit())}, nil
	case *batonv1.Event_WaitArmed:
		return domain.WaitArmed{Wait: waitOf(e.WaitArmed)}, nil
	case *batonv1.Event_WaitEnded:
		p := e.WaitEnded
		return domain.WaitEnded{WaitID: p.GetWaitId(), Outcome: domain.WaitOutcome(p.GetOutcome()), Reason: p.GetReason()}, nil
	case *batonv1.Event_LoopCheckRequested:
		return domain.CheckRequested{RunID: e.LoopCheckRequested.GetRunId(), Command: e.LoopCheckRequested.GetCommand()}, nil
	case *batonv1.Event_LoopCheckRecorded:
		return domain.CheckRecorded{CheckResult: checkOf(e.LoopCheckRecorded)}, nil
	case *batonv1.Event_LoopEnded:
		return domain.LoopEnded{Status: domain.LoopStatus(e.LoopEnded.GetStatus()), Reason: e.LoopEnded.GetReason()}, nil
	case *batonv1.Event_RunQueueResumed:
		p := e.RunQueueResumed
		return domain.QueuedRunsResumed{Reason: p.GetReason(), Runs: list(p.GetRuns(), func(r *batonv1.QueuedRun) domain.QueuedRun {
			return domain.QueuedRun{RunID: r.GetRunId(), Ordinal: int(r.GetOrdinal()), Input: r.GetInput()}
		})}, nil
	case *batonv1.Event_WorktreeReady:
		return domain.WorktreeReady{Copied: e.WorktreeReady.GetCopied(), Setup: setupOf(e.WorktreeReady.GetSetup())}, nil
	case *batonv1.Event_WorktreeFailed:
		return domain.WorktreeFailed{Failure: e.WorktreeFailed.GetFailure()}, nil
	case *batonv1.Event_ThreadMergeRequested:
		p := e.ThreadMergeRequested
		return domain.MergeRequested{MergeID: p.GetMergeId(), Into: p.GetInto(), Squash: p.GetSquash()}, nil
	case *batonv1.Event_ThreadMerged:
		return domain.Merged{Merge: mergeOf(e.ThreadMerged)}, nil
	case *batonv1.Event_ThreadArchived:
		return domain.ThreadArchived{DeleteBranch: e.ThreadArchived.GetDeleteBranch()}, nil
	case *batonv1.Event_ThreadMoved:
		p := e.ThreadMoved
		return domain.ThreadMoved{From: p.GetFrom(), To: p.GetTo(), Reason: p.GetReason()}, nil
	case *batonv1.Event_ThreadHostLost:
		return domain.ThreadHostLost{Host: e.ThreadHostLost.GetHost()}, nil
	case *batonv1.Event_WorktreeRemoved:
		return domain.WorktreeRemoved{Failure: e.WorktreeRemoved.GetFailure(), BranchDeleted: e.WorktreeRemoved.GetBranchDeleted()}, nil
	}
	return nil, fmt.Errorf("event %d (%s): a payload this client does not know", ev.GetSequence(), ev.GetType())
}
