package service

import (
	"fmt"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	batonv1 "github.com/baton-run/baton/host/api/baton/v1"
	"github.com/baton-run/baton/host/internal/domain"
	"github.com/baton-run/baton/host/internal/eventlog"
	"github.com/baton-run/baton/host/internal/orchestrator"
)

// Conversions between the host's types and baton.v1's. Every domain type
// a client reads (a thread's projection, an event's payload) has one
// function here that copies it field by field, so that the API's schema
// is its own messages, never the domain's JSON: a field the domain adds
// reaches a client only when a proto field and a line here carry it.

// modes are the dispatch modes by the names a client may use: the short
// ones (domain.ModeWords) and the domain's.
var modes = func() map[string]domain.DispatchMode {
	m := map[string]domain.DispatchMode{"": ""}
	for word, mode := range domain.ModeWords {
		m[word], m[string(mode)] = mode, mode
	}
	return m
}()

func receiptPB(rc domain.Receipt, runID string) *batonv1.Receipt {
	return &batonv1.Receipt{CommandId: rc.CommandID, Type: rc.Type, ThreadId: rc.ThreadID, Sequence: rc.Sequence,
		At: timestamppb.New(rc.At), RunId: runID}
}

func summaryPB(s domain.ThreadSummary) *batonv1.ThreadSummary {
	return &batonv1.ThreadSummary{Id: s.ID, Provider: s.Provider, Cwd: s.Cwd, Model: s.Model,
		CreatedAt: timestamppb.New(s.CreatedAt), UpdatedAt: timestamppb.New(s.UpdatedAt),
		Runs: uint32(s.Runs), Queued: uint32(s.Queued), Status: string(s.Status), LastRun: string(s.LastRun), Sequence: s.Sequence,
		Archived: s.Archived, Branch: s.Branch, Title: s.Title, Pending: uint32(s.Pending), Worktree: s.Worktree, Wait: summaryWaitPB(s.Wait),
		Repository: s.Repository, Host: s.Host, HostLost: hostLostPB(s.HostLost), Usage: summaryUsagePB(s.Usage)}
}

func hostLostPB(l *domain.HostLost) *batonv1.HostLost {
	if l == nil {
		return nil
	}
	return &batonv1.HostLost{Host: l.Host, At: ts(l.At)}
}

func summaryWaitPB(w *domain.SummaryWait) *batonv1.SummaryWait {
	if w == nil {
		return nil
	}
	return &batonv1.SummaryWait{At: timestamppb.New(w.At), Kind: string(w.Kind), Provider: w.Provider, RunId: w.RunID}
}

// pagePB says what a page holds, and in words what it leaves out.
func pagePB(pg orchestrator.Page) *batonv1.ThreadPage {
	out := &batonv1.ThreadPage{FirstRun: uint32(pg.FirstRun), LastRun: uint32(pg.LastRun), Runs: uint32(pg.Runs),
		Messages: uint32(pg.Messages), MessagesAfter: uint32(pg.MessagesAfter), NextMessagesAfter: uint32(pg.NextMessagesAfter),
		Complete: pg.Complete()}
	var left []string
	runs := func(from, to int) string {
		if from == to {
			return fmt.Sprintf("run %d", from)
		}
		return fmt.Sprintf("runs %d-%d", from, to)
	}
	switch {
	case pg.Runs > 0 && pg.FirstRun == 0:
		left = append(left, runs(1, pg.Runs)+" (ask from_run 1)")
	case pg.FirstRun > 1:
		left = append(left, runs(1, pg.FirstRun-1)+" (ask from_run 1)")
	}
	if pg.LastRun > 0 && pg.LastRun < pg.Runs {
		left = append(left, fmt.Sprintf("%s (ask from_run %d)", runs(pg.LastRun+1, pg.Runs), pg.LastRun+1))
	}
	if pg.MessagesAfter > 0 {
		left = append(left, fmt.Sprintf("the first %d of their %d messages (ask messages_after 0)", pg.MessagesAfter, pg.Messages))
	}
	if pg.NextMessagesAfter > 0 {
		left = append(left, fmt.Sprintf("their messages from the %d%s on (ask messages_after %d)", pg.NextMessagesAfter+1, ordinalSuffix(pg.NextMessagesAfter+1),
			pg.NextMessagesAfter))
	}
	if len(left) > 0 {
		out.LeftOut = "left out: " + strings.Join(left, "; ")
	}
	return out
}

// ordinalSuffix is n's English ordinal suffix ("st" for 1, "th" for 11).
func ordinalSuffix(n int) string {
	switch {
	case n%100 >= 11 && n%100 <= 13:
		return "th"
	case n%10 == 1:
		return "st"
	case n%10 == 2:
		return "nd"
	case n%10 == 3:
		return "rd"
	}
	return "th"
}

// ts is an instant as a Timestamp (nil for the zero instant: a field the
// domain has not set is left out, not "0001-01-01").
func ts(t time.Time) *timestamppb.Timestamp {
	if t.IsZero() {
		return nil
	}
	return timestamppb.New(t)
}

// tsp is an optional instant as a Timestamp.
func tsp(t *time.Time) *timestamppb.Timestamp {
	if t == nil {
		return nil
	}
	return ts(*t)
}

// dur is a duration as a Duration (nil for none).
func dur(d time.Duration) *durationpb.Duration {
	if d == 0 {
		return nil
	}
	return durationpb.New(d)
}

// list converts each of xs with f.
func list[T, P any](xs []T, f func(T) P) []P {
	if len(xs) == 0 {
		return nil
	}
	out := make([]P, len(xs))
	for i, x := range xs {
		out[i] = f(x)
	}
	return out
}

// u32 is a count or an ordinal, which the domain keeps as an int and
// never makes negative.
func u32(n int) uint32 { return uint32(max(n, 0)) }

// threadPB is a thread's projection (or a page of it) as the API's Thread.
func threadPB(t domain.Thread, pg orchestrator.Page) *batonv1.Thread {
	out := &batonv1.Thread{Summary: summaryPB(pg.Summary), Sequence: t.Sequence, Page: pagePB(pg),
		Id: t.ID, Provider: t.Provider, Cwd: t.Cwd, Model: t.Model, ProviderCommand: commandPB(t.ProviderCommand),
		ApprovalPolicy: string(t.ApprovalPolicy), CreatedAt: ts(t.CreatedAt), UpdatedAt: ts(t.UpdatedAt),
		Runs: list(t.Runs, runPB), Messages: list(t.Messages, messagePB), TurnItems: list(t.TurnItems, turnItemPB),
		ProviderSessions: list(t.ProviderSessions, sessionPB), ProviderThreads: list(t.ProviderThreads, providerThreadPB),
		ProviderTurns: list(t.ProviderTurns, providerTurnPB), Requests: list(t.Requests, requestPB),
		Diagnostics: list(t.Diagnostics, diagnosticPB), RateLimits: list(t.RateLimits, rateLimitPB),
		CheckpointScopes: list(t.CheckpointScopes, scopePB), Checkpoints: list(t.Checkpoints, checkpointPB),
		Rollbacks: list(t.Rollbacks, rollbackPB), Handoffs: list(t.Handoffs, handoffPB),
		ProviderBindings: list(t.ProviderBindings, bindingPB), HandoffMaxBytes: u32(t.HandoffMaxBytes),
		Unattended: t.Unattended(), Worktree: worktreePB(t.Worktree), Merges: list(t.Merges, mergePB), Archived: t.Archived,
		Title: t.Title, Host: t.Host, SharedCwd: t.SharedCwd, HostLost: hostLostPB(t.HostLost)}
	if r := t.ActiveRun(); r != nil {
		out.ActiveRunId = r.ID
	}
	if t.Loop != nil {
		out.Loop = loopPB(*t.Loop)
	}
	if t.Earlier != nil {
		out.Earlier = earlierPB(*t.Earlier)
	}
	return out
}

func worktreePB(w *domain.Worktree) *batonv1.Worktree {
	if w == nil {
		return nil
	}
	return &batonv1.Worktree{Repository: w.Repository, Path: w.Path, Branch: w.Branch, Base: w.Base, BaseBranch: w.BaseBranch,
		Author: w.Author, Copy: w.Copy, Setup: w.Setup, Status: string(w.Status), Failure: w.Failure, Copied: w.Copied,
		SetupResult: setupPB(w.SetupResult), Head: w.Head, BranchDeleted: w.BranchDeleted}
}

func setupPB(s *domain.SetupResult) *batonv1.SetupResult {
	if s == nil {
		return nil
	}
	return &batonv1.SetupResult{Command: s.Command, ExitCode: int32(s.ExitCode), Output: s.Output}
}

func mergePB(m domain.Merge) *batonv1.Merge {
	return &batonv1.Merge{Id: m.ID, Into: m.Into, Squash: m.Squash, Status: string(m.Status), From: m.From, Commit: m.Commit,
		Commits: m.Commits, Conflicts: m.Conflicts, Dirty: m.Dirty, Worktree: m.Worktree, Error: m.Error}
}

func commandPB(c domain.ProviderCommand) *batonv1.ProviderCommand {
	if len(c.Argv) == 0 && len(c.Env) == 0 {
		return nil
	}
	return &batonv1.ProviderCommand{Argv: c.Argv, Env: c.Env, Agent: c.Agent, AgentVersion: c.AgentVersion}
}

func runPB(r domain.Run) *batonv1.Run {
	out := &batonv1.Run{Id: r.ID, Ordinal: u32(r.Ordinal), Status: string(r.Status), MessageId: r.MessageID, Input: r.Input,
		QueuedAt: ts(r.QueuedAt), StartedAt: tsp(r.StartedAt), EndedAt: tsp(r.EndedAt), ActiveAttempt: r.ActiveAttempt,
		Provider: r.Provider, Model: r.Model, FinalAttempt: r.FinalAttempt, Attempts: list(r.Attempts, attemptPB),
		Nodes: list(r.Nodes, nodePB), StopReason: r.StopReason, Failure: failurePB(r.Failure), Usage: usagePB(r.Usage),
		InterruptRequested: r.InterruptRequested, PendingRestart: list(r.PendingRestart, steeringPB),
		CheckpointId: r.CheckpointID, Commit: r.Commit, WaitId: r.WaitID, Waits: u32(r.Waits), WaitSince: ts(r.WaitSince), Host: r.Host,
		Mcp: mcpChoicePB(r.MCP)}
	if s := r.Stop; s != (domain.RunStop{}) {
		out.Stop = &batonv1.RunStop{Deadline: ts(s.Deadline), Grace: dur(s.Grace), Forced: s.Forced, Stalled: s.Stalled}
	}
	if r.Ending != nil {
		out.Ending = outcomePB(*r.Ending)
	}
	if r.Limit != nil {
		out.Limit = limitPB(*r.Limit)
	}
	return out
}

func outcomePB(o domain.RunOutcome) *batonv1.RunOutcome {
	return &batonv1.RunOutcome{AttemptId: o.AttemptID, Status: string(o.Status), StopReason: o.StopReason, Failure: failurePB(o.Failure)}
}

func steeringPB(m domain.SteeringMessage) *batonv1.SteeringMessage {
	return &batonv1.SteeringMessage{MessageId: m.MessageID, Text: m.Text}
}

func attemptPB(a domain.Attempt) *batonv1.Attempt {
	return &batonv1.Attempt{Id: a.ID, Reason: string(a.Reason), Status: string(a.Status), SessionId: a.SessionID,
		StartedAt: ts(a.StartedAt), EndedAt: tsp(a.EndedAt), RootNode: a.RootNode, Usage: usagePB(a.Usage), Provider: a.Provider}
}

func nodePB(n domain.Node) *batonv1.Node {
	return &batonv1.Node{Id: n.ID, ParentId: n.ParentID, AttemptId: n.AttemptID, Kind: string(n.Kind), Status: string(n.Status),
		ProviderRef: n.ProviderRef, Title: n.Title}
}

func messagePB(m domain.Message) *batonv1.Message {
	return &batonv1.Message{Id: m.ID, RunId: m.RunID, NodeId: m.NodeID, Role: string(m.Role), Text: m.Text.String(),
		Status: string(m.Status)}
}

func turnItemPB(it domain.TurnItem) *batonv1.TurnItem {
	return &batonv1.TurnItem{Id: it.ID, RunId: it.RunID, NodeId: it.NodeID, Kind: string(it.Kind), Title: it.Title,
		Status: string(it.Status), Text: it.Text.String(), Detail: string(it.Detail)}
}

func sessionPB(s domain.ProviderSession) *batonv1.ProviderSession {
	return &batonv1.ProviderSession{Id: s.ID, Provider: s.Provider, Model: s.Model, Resumed: s.Resumed, Status: string(s.Status),
		ProviderRef: s.ProviderRef, PluginPid: int32(s.PluginPid), ProviderPid: int32(s.ProviderPid), OpenedAt: ts(s.OpenedAt),
		EndedAt: tsp(s.EndedAt), EndReason: s.EndReason, Forced: s.Forced, Mcp: list(s.MCP, mcpRefPB)}
}

func mcpRefPB(r domain.MCPServerRef) *batonv1.McpServerRef {
	return &batonv1.McpServerRef{Name: r.Name, Transport: r.Transport, Thread: r.Thread, Revision: int32(r.Revision)}
}

func mcpChoicePB(c *domain.MCPChoice) *batonv1.McpChoice {
	if c == nil {
		return nil
	}
	return &batonv1.McpChoice{Names: c.Names, None: c.None}
}

func providerThreadPB(pt domain.ProviderThread) *batonv1.ProviderThread {
	return &batonv1.ProviderThread{Id: pt.ID, Provider: pt.Provider, SessionId: pt.SessionID, ProviderRef: pt.ProviderRef,
		ParentId: pt.ParentID, Detached: pt.Detached}
}

func providerTurnPB(pt domain.ProviderTurn) *batonv1.ProviderTurn {
	return &batonv1.ProviderTurn{Id: pt.ID, ProviderThreadId: pt.ProviderThreadID, ProviderRef: pt.ProviderRef, RunId: pt.RunID,
		AttemptId: pt.AttemptID, NodeId: pt.NodeID, Status: string(pt.Status)}
}

func requestPB(r domain.RuntimeRequest) *batonv1.RuntimeRequest {
	return &batonv1.RuntimeRequest{Id: r.ID, RunId: r.RunID, NodeId: r.NodeID, SessionId: r.SessionID, ProviderRef: r.ProviderRef,
		Kind: string(r.Kind), Title: r.Title, Options: list(r.Options, optionPB), Status: string(r.Status),
		Decision: string(r.Decision), Answers: r.Answers, AnsweredBy: string(r.AnsweredBy), AnswerFailures: u32(r.AnswerFailures),
		Delivery: string(r.Delivery), OpenedAt: ts(r.OpenedAt)}
}

func optionPB(o domain.RequestOption) *batonv1.RequestOption {
	return &batonv1.RequestOption{Id: o.ID, Label: o.Label, Kind: string(o.Kind)}
}

func diagnosticPB(d domain.Diagnostic) *batonv1.Diagnostic {
	return &batonv1.Diagnostic{RunId: d.RunID, Title: d.Title, Text: d.Text}
}

func failurePB(f *domain.Failure) *batonv1.Failure {
	if f == nil {
		return nil
	}
	return &batonv1.Failure{Code: f.Code, Message: f.Message}
}

func usagePB(u *domain.Usage) *batonv1.Usage {
	if u == nil {
		return nil
	}
	return &batonv1.Usage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, CachedInputTokens: u.CachedInputTokens,
		ReasoningTokens: u.ReasoningTokens, TotalTokens: u.TotalTokens, CostMicros: u.CostMicros, Model: u.Model}
}

func rateLimitPB(l domain.RateLimit) *batonv1.RateLimit {
	return &batonv1.RateLimit{ResetsAt: ts(l.ResetsAt), UsedPercent: l.UsedPercent, Scope: l.Scope, Provider: l.Provider, At: ts(l.At)}
}

func limitPB(l domain.Limit) *batonv1.Limit {
	return &batonv1.Limit{Kind: string(l.Kind), ResetsAt: ts(l.ResetsAt), Scope: l.Scope, Message: l.Message, Evidence: l.Evidence,
		Description: domain.DescribeLimit(l, "")}
}

func scopePB(sc domain.CheckpointScope) *batonv1.CheckpointScope {
	return &batonv1.CheckpointScope{Id: sc.ID, Kind: string(sc.Kind), RunId: sc.RunID, NodeId: sc.NodeID, ParentId: sc.ParentID,
		Ordinal: u32(sc.Ordinal), AdvancesRunCount: sc.AdvancesRunCount}
}

func checkpointPB(c domain.Checkpoint) *batonv1.Checkpoint {
	return &batonv1.Checkpoint{Id: c.ID, ScopeId: c.ScopeID, RunId: c.RunID, NodeId: c.NodeID, RunOrdinal: u32(c.RunOrdinal),
		BaseId: c.BaseID, Ref: c.Ref, Commit: c.Commit, Status: string(c.Status), Files: list(c.Files, fileChangePB),
		Reason: c.Reason, RequestedAt: ts(c.RequestedAt), CapturedAt: tsp(c.CapturedAt), BranchHead: c.BranchHead}
}

func fileChangePB(f domain.FileChange) *batonv1.FileChange {
	return &batonv1.FileChange{Path: f.Path, Kind: f.Kind, Additions: int64(f.Additions), Deletions: int64(f.Deletions), Binary: f.Binary}
}

func rollbackPB(rb domain.Rollback) *batonv1.Rollback {
	return &batonv1.Rollback{Id: rb.ID, CheckpointId: rb.CheckpointID, TargetRunOrdinal: u32(rb.TargetRunOrdinal),
		Status: string(rb.Status), Runs: rb.Runs, Checkpoints: rb.Checkpoints, FilesWritten: u32(rb.FilesWritten),
		FilesRemoved: u32(rb.FilesRemoved), SavedRef: rb.SavedRef, SavedCommit: rb.SavedCommit,
		Reconciliation: string(rb.Reconciliation), ProviderThreadRef: rb.ProviderThreadRef, TurnsDropped: u32(rb.TurnsDropped),
		Note: rb.Note, FailedStage: rb.FailedStage, Failure: failurePB(rb.Failure), RequestedAt: ts(rb.RequestedAt),
		EndedAt: tsp(rb.EndedAt)}
}

func handoffPB(h domain.ContextHandoff) *batonv1.ContextHandoff {
	return &batonv1.ContextHandoff{Id: h.ID, RollbackId: h.RollbackID, Strategy: string(h.Strategy), Version: u32(h.Version),
		FromProvider: h.FromProvider, ToProvider: h.ToProvider, FromRun: u32(h.FromRun), ToRun: u32(h.ToRun),
		Runs: list(h.Runs, handoffRunPB), Bytes: u32(h.Bytes), Truncated: h.Truncated, Cut: h.Cut, Fallback: h.Fallback,
		Status: string(h.Status), SupersededBy: h.SupersededBy, RunId: h.RunID, Text: h.Text,
		CoveredRuns: list(domain.HandoffOrdinals(h.Runs, h.FromRun, h.ToRun), u32)}
}

func handoffRunPB(r domain.HandoffRun) *batonv1.HandoffRun {
	return &batonv1.HandoffRun{Ordinal: u32(r.Ordinal), RunId: r.RunID, Provider: r.Provider, MessageIds: r.MessageIDs,
		Shortened: r.Shortened}
}

func bindingPB(b domain.ProviderBinding) *batonv1.ProviderBinding {
	return &batonv1.ProviderBinding{Provider: b.Provider, Model: b.Model, Command: commandPB(b.Command), SessionId: b.SessionID,
		ProviderThreadId: b.ProviderThreadID, ThreadRef: b.ThreadRef, SeenThrough: u32(b.SeenThrough), Runs: list(b.Runs, u32),
		RunsBefore: u32(b.RunsBefore)}
}

func loopPB(l domain.Loop) *batonv1.Loop {
	out := &batonv1.Loop{Policy: policyPB(l.Policy), Since: ts(l.Since), Status: string(l.Status), Reason: l.Reason,
		Runs: u32(l.Runs), Tokens: l.Tokens, CheckPending: l.CheckPending}
	if l.Wait != nil {
		out.Wait = waitPB(*l.Wait)
	}
	if l.Return != nil {
		out.Return = waitPB(*l.Return)
	}
	if l.Check != nil {
		out.Check = checkPB(*l.Check)
	}
	return out
}

// policyPB is a continuation policy as the API's (the form SetPolicy
// takes), with the policy it applies (none when it is off).
func policyPB(p domain.ContinuationPolicy) *batonv1.ContinuationPolicy {
	out := policyFieldsPB(p)
	if !p.Off() {
		out.Applied = policyFieldsPB(p.WithDefaults())
	}
	return out
}

// policyFieldsPB is a continuation policy's own fields as the API's.
func policyFieldsPB(p domain.ContinuationPolicy) *batonv1.ContinuationPolicy {
	return &batonv1.ContinuationPolicy{OnLimit: string(p.OnLimit), SwitchTo: p.SwitchTo, SwitchModel: p.SwitchModel,
		SwitchProviderCommand: commandPB(p.SwitchCommand), Return: p.Return, ContinueText: p.ContinueText,
		ProbeInterval: dur(p.Probe.Interval), ProbeFactor: p.Probe.Factor, ProbeCeiling: dur(p.Probe.Ceiling),
		MaxProbes: u32(p.MaxProbes), MaxWait: dur(p.MaxWait), Until: p.Until, CheckTimeout: dur(p.CheckTimeout),
		MaxRuns: u32(p.MaxRuns), MaxDuration: dur(p.MaxDuration), MaxTokens: p.MaxTokens}
}

func waitPB(w domain.Wait) *batonv1.Wait {
	return &batonv1.Wait{Id: w.ID, Kind: string(w.Kind), RunId: w.RunID, Provider: w.Provider, Limit: limitPB(w.Limit), At: ts(w.At),
		Probe: u32(w.Probe), MaxProbes: u32(w.MaxProbes), Since: ts(w.Since), ArmedAt: ts(w.ArmedAt), AtReset: atReset(w)}
}

// atReset says whether a wait fires at its limit's reset (plus a jitter);
// else it is a probe.
func atReset(w domain.Wait) bool {
	r := w.Limit.ResetsAt
	return !r.IsZero() && !w.At.Before(r) && w.At.Sub(r) <= domain.MaxJitter
}

func checkPB(c domain.CheckResult) *batonv1.CheckResult {
	return &batonv1.CheckResult{RunId: c.RunID, Command: c.Command, ExitCode: int32(c.ExitCode), Output: c.Output,
		Truncated: c.Truncated, TimedOut: c.TimedOut, Error: c.Error, At: ts(c.At), Passed: c.Passed()}
}

func earlierPB(e domain.Earlier) *batonv1.Earlier {
	return &batonv1.Earlier{Runs: u32(e.Runs), Messages: u32(e.Messages), Parts: u32(e.Parts), RootScopes: u32(e.RootScopes),
		Rollbacks: list(e.Rollbacks, func(r domain.EarlierRollback) *batonv1.EarlierRollback {
			return &batonv1.EarlierRollback{Target: u32(r.Target), Parts: u32(r.Parts)}
		})}
}

// eventPB is a stored event as the API's Event: its payload decoded by
// the domain and copied into the oneof case of its type.
func eventPB(r eventlog.Record) (*batonv1.Event, error) {
	pl, err := domain.DecodePayload(r.Type, r.Data)
	if err != nil {
		return nil, fmt.Errorf("event %d: %w", r.Sequence, err)
	}
	ev := &batonv1.Event{Sequence: r.Sequence, ThreadId: r.ThreadID, Type: r.Type, At: timestamppb.New(r.At)}
	if err := setPayload(ev, pl); err != nil {
		return nil, fmt.Errorf("event %d: %w", r.Sequence, err)
	}
	return ev, nil
}

// setPayload sets ev's payload to pl's case. A payload with no case is an
// error naming its type (TestEveryEventTypeHasACase keeps there being
// none).
func setPayload(ev *batonv1.Event, pl domain.Payload) error {
	switch e := pl.(type) {
	case domain.ThreadCreated:
		ev.Payload = &batonv1.Event_ThreadCreated{ThreadCreated: &batonv1.ThreadCreated{Provider: e.Provider, Cwd: e.Cwd,
			Model: e.Model, ProviderCommand: commandPB(e.ProviderCommand), ApprovalPolicy: string(e.ApprovalPolicy),
			Worktree: worktreePB(e.Worktree), Host: e.Host, SharedCwd: e.SharedCwd}}
	case domain.MessageAdded:
		ev.Payload = &batonv1.Event_MessageAdded{MessageAdded: &batonv1.MessageAdded{MessageId: e.MessageID, RunId: e.RunID,
			NodeId: e.NodeID, Role: string(e.Role), Text: e.Text, Status: string(e.Status)}}
	case domain.MessageDelta:
		ev.Payload = &batonv1.Event_MessageDelta{MessageDelta: &batonv1.MessageDelta{MessageId: e.MessageID, Text: e.Text}}
	case domain.MessageCompleted:
		ev.Payload = &batonv1.Event_MessageCompleted{MessageCompleted: &batonv1.MessageCompleted{MessageId: e.MessageID}}
	case domain.RunQueued:
		ev.Payload = &batonv1.Event_RunQueued{RunQueued: &batonv1.RunQueued{RunId: e.RunID, Ordinal: u32(e.Ordinal),
			MessageId: e.MessageID, Input: e.Input, Mcp: mcpChoicePB(e.MCP)}}
	case domain.RunStarted:
		ev.Payload = &batonv1.Event_RunStarted{RunStarted: &batonv1.RunStarted{RunId: e.RunID, Provider: e.Provider, Model: e.Model, Host: e.Host}}
	case domain.AttemptStarted:
		ev.Payload = &batonv1.Event_AttemptStarted{AttemptStarted: &batonv1.AttemptStarted{RunId: e.RunID, AttemptId: e.AttemptID,
			Reason: string(e.Reason), RootNode: e.RootNode, Provider: e.Provider, Model: e.Model}}
	case domain.NodeStarted:
		ev.Payload = &batonv1.Event_NodeStarted{NodeStarted: &batonv1.NodeStarted{RunId: e.RunID, NodeId: e.NodeID,
			ParentId: e.ParentID, AttemptId: e.AttemptID, Kind: string(e.Kind), ProviderRef: e.ProviderRef, Title: e.Title,
			Detail: string(e.Detail)}}
	case domain.NodeUpdated:
		ev.Payload = &batonv1.Event_NodeUpdated{NodeUpdated: &batonv1.NodeUpdated{RunId: e.RunID, NodeId: e.NodeID,
			Status: string(e.Status), Title: e.Title, Detail: string(e.Detail)}}
	case domain.NodeDelta:
		ev.Payload = &batonv1.Event_NodeDelta{NodeDelta: &batonv1.NodeDelta{RunId: e.RunID, NodeId: e.NodeID, Text: e.Text}}
	case domain.NodeCompleted:
		ev.Payload = &batonv1.Event_NodeCompleted{NodeCompleted: &batonv1.NodeCompleted{RunId: e.RunID, NodeId: e.NodeID,
			Status: string(e.Status)}}
	case domain.SessionOpened:
		ev.Payload = &batonv1.Event_ProviderSessionOpened{ProviderSessionOpened: &batonv1.SessionOpened{SessionId: e.SessionID,
			Provider: e.Provider, Model: e.Model, ProviderRef: e.ProviderRef, PluginPid: int32(e.PluginPid),
			ProviderPid: int32(e.ProviderPid), ResumeRequested: e.ResumeRequested, Resumed: e.Resumed, Mcp: list(e.MCP, mcpRefPB)}}
	case domain.SessionEnded:
		ev.Payload = &batonv1.Event_ProviderSessionEnded{ProviderSessionEnded: &batonv1.SessionEnded{SessionId: e.SessionID,
			Reason: e.Reason}}
	case domain.ProviderThreadBound:
		ev.Payload = &batonv1.Event_ProviderThreadBound{ProviderThreadBound: &batonv1.ProviderThreadBound{
			ProviderThreadId: e.ProviderThreadID, SessionId: e.SessionID, ProviderRef: e.ProviderRef, ParentId: e.ParentID}}
	case domain.ProviderTurnBound:
		ev.Payload = &batonv1.Event_ProviderTurnBound{ProviderTurnBound: &batonv1.ProviderTurnBound{ProviderTurnId: e.ProviderTurnID,
			ProviderThreadId: e.ProviderThreadID, SessionId: e.SessionID, ProviderRef: e.ProviderRef, RunId: e.RunID,
			AttemptId: e.AttemptID, NodeId: e.NodeID}}
	case domain.RequestOpened:
		ev.Payload = &batonv1.Event_RequestOpened{RequestOpened: &batonv1.RequestOpened{RequestId: e.RequestID, RunId: e.RunID,
			NodeId: e.NodeID, SessionId: e.SessionID, ProviderRef: e.ProviderRef, Kind: string(e.Kind), Title: e.Title,
			Options: list(e.Options, optionPB)}}
	case domain.RequestResolved:
		ev.Payload = &batonv1.Event_RequestResolved{RequestResolved: &batonv1.RequestResolved{RequestId: e.RequestID,
			Status: string(e.Status), Decision: string(e.Decision), Delivery: string(e.Delivery)}}
	case domain.UsageReported:
		ev.Payload = &batonv1.Event_UsageReported{UsageReported: &batonv1.UsageReported{RunId: e.RunID, AttemptId: e.AttemptID,
			Usage: usagePB(&e.Usage), Models: usagesPB(e.Models)}}
	case domain.RunEnded:
		ev.Payload = &batonv1.Event_RunEnded{RunEnded: &batonv1.RunEnded{RunId: e.RunID, AttemptId: e.AttemptID,
			Status: string(e.Status), StopReason: e.StopReason, Failure: failurePB(e.Failure)}}
	case domain.DiagnosticRecorded:
		ev.Payload = &batonv1.Event_DiagnosticRecorded{DiagnosticRecorded: &batonv1.DiagnosticRecorded{RunId: e.RunID,
			Title: e.Title, Text: e.Text}}
	case domain.RunSteered:
		ev.Payload = &batonv1.Event_RunSteered{RunSteered: &batonv1.RunSteered{RunId: e.RunID, AttemptId: e.AttemptID,
			MessageId: e.MessageID}}
	case domain.RestartRequested:
		ev.Payload = &batonv1.Event_RunRestartRequested{RunRestartRequested: &batonv1.RestartRequested{RunId: e.RunID,
			AttemptId: e.AttemptID, MessageId: e.MessageID, Text: e.Text}}
	case domain.InterruptRequested:
		ev.Payload = &batonv1.Event_RunInterruptRequested{RunInterruptRequested: &batonv1.InterruptRequested{RunId: e.RunID,
			AttemptId: e.AttemptID, Grace: dur(e.Grace)}}
	case domain.StopForced:
		ev.Payload = &batonv1.Event_RunStopForced{RunStopForced: &batonv1.StopForced{RunId: e.RunID, AttemptId: e.AttemptID,
			SessionId: e.SessionID, Reason: e.Reason}}
	case domain.TurnStalled:
		ev.Payload = &batonv1.Event_RunStalled{RunStalled: &batonv1.TurnStalled{RunId: e.RunID, AttemptId: e.AttemptID,
			SessionId: e.SessionID, Since: ts(e.Since), Reason: e.Reason}}
	case domain.AttemptEnded:
		ev.Payload = &batonv1.Event_AttemptEnded{AttemptEnded: &batonv1.AttemptEnded{RunId: e.RunID, AttemptId: e.AttemptID,
			Status: string(e.Status)}}
	case domain.RequestAnswered:
		ev.Payload = &batonv1.Event_RequestAnswered{RequestAnswered: &batonv1.RequestAnswered{RequestId: e.RequestID,
			Decision: string(e.Decision), Answers: e.Answers, By: string(e.By)}}
	case domain.EffectCancelled:
		ev.Payload = &batonv1.Event_EffectCancelled{EffectCancelled: &batonv1.EffectCancelled{EffectId: e.EffectID,
			Type: string(e.Type), RunId: e.RunID, Reason: e.Reason}}
	case domain.AttemptDispatched:
		ev.Payload = &batonv1.Event_AttemptDispatched{AttemptDispatched: &batonv1.AttemptDispatched{RunId: e.RunID,
			AttemptId: e.AttemptID, SessionId: e.SessionID}}
	case domain.RequestAnswerFailed:
		ev.Payload = &batonv1.Event_RequestAnswerFailed{RequestAnswerFailed: &batonv1.RequestAnswerFailed{RequestId: e.RequestID,
			Reason: e.Reason}}
	case domain.RateLimitReported:
		ev.Payload = &batonv1.Event_RateLimitReported{RateLimitReported: rateLimitPB(e.RateLimit)}
	case domain.RunCompleting:
		ev.Payload = &batonv1.Event_RunCompleting{RunCompleting: &batonv1.RunCompleting{RunId: e.RunID,
			Outcome: outcomePB(e.RunOutcome)}}
	case domain.CheckpointScopeOpened:
		ev.Payload = &batonv1.Event_CheckpointScopeOpened{CheckpointScopeOpened: &batonv1.CheckpointScopeOpened{ScopeId: e.ScopeID,
			Kind: string(e.Kind), RunId: e.RunID, NodeId: e.NodeID, ParentId: e.ParentID, Ordinal: u32(e.Ordinal),
			AdvancesRunCount: e.AdvancesRunCount}}
	case domain.CheckpointRequested:
		ev.Payload = &batonv1.Event_CheckpointRequested{CheckpointRequested: &batonv1.CheckpointRequested{
			CheckpointId: e.CheckpointID, ScopeId: e.ScopeID, RunId: e.RunID, NodeId: e.NodeID, RunOrdinal: u32(e.RunOrdinal),
			BaseId: e.BaseID, Ref: e.Ref}}
	case domain.CheckpointRecorded:
		ev.Payload = &batonv1.Event_CheckpointRecorded{CheckpointRecorded: &batonv1.CheckpointRecorded{CheckpointId: e.CheckpointID,
			Status: string(e.Status), Commit: e.Commit, Files: list(e.Files, fileChangePB), Reason: e.Reason,
			BranchCommit: e.BranchCommit, BranchError: e.BranchError}}
	case domain.RollbackStarted:
		rs := &batonv1.RollbackStarted{RollbackId: e.RollbackID, CheckpointId: e.CheckpointID,
			TargetRunOrdinal: u32(e.TargetRunOrdinal), Runs: e.Runs, Checkpoints: e.Checkpoints}
		if e.Target != nil {
			rs.Target = checkpointPB(*e.Target)
		}
		ev.Payload = &batonv1.Event_RollbackStarted{RollbackStarted: rs}
	case domain.RollbackFilesRestored:
		ev.Payload = &batonv1.Event_RollbackFilesRestored{RollbackFilesRestored: &batonv1.RollbackFilesRestored{
			RollbackId: e.RollbackID, Written: u32(e.Written), Removed: u32(e.Removed), SavedRef: e.SavedRef,
			SavedCommit: e.SavedCommit, BranchHead: e.BranchHead}}
	case domain.RollbackCompleted:
		rc := &batonv1.RollbackCompleted{RollbackId: e.RollbackID, Reconciliation: string(e.Reconciliation),
			ProviderThreadRef: e.ProviderThreadRef, TurnsDropped: u32(e.TurnsDropped), Note: e.Note, Detached: e.Detached}
		if e.KeptThrough != nil {
			kept := u32(*e.KeptThrough)
			rc.KeptThrough = &kept
		}
		ev.Payload = &batonv1.Event_RollbackCompleted{RollbackCompleted: rc}
	case domain.RollbackFailed:
		ev.Payload = &batonv1.Event_RollbackFailed{RollbackFailed: &batonv1.RollbackFailed{RollbackId: e.RollbackID, Stage: e.Stage,
			Failure: failurePB(&e.Failure)}}
	case domain.HandoffCreated:
		ev.Payload = &batonv1.Event_HandoffCreated{HandoffCreated: &batonv1.HandoffCreated{HandoffId: e.HandoffID,
			RollbackId: e.RollbackID, Strategy: string(e.Strategy), Version: u32(e.Version), FromProvider: e.FromProvider,
			ToProvider: e.ToProvider, FromRun: u32(e.FromRun), ToRun: u32(e.ToRun), Runs: list(e.Runs, handoffRunPB),
			Bytes: u32(e.Bytes), Truncated: e.Truncated, Cut: e.Cut, Fallback: e.Fallback, Text: e.Text,
			CoveredRuns: list(domain.HandoffOrdinals(e.Runs, e.FromRun, e.ToRun), u32)}}
	case domain.HandoffConsumed:
		ev.Payload = &batonv1.Event_HandoffConsumed{HandoffConsumed: &batonv1.HandoffConsumed{HandoffId: e.HandoffID, RunId: e.RunID}}
	case domain.HandoffSuperseded:
		ev.Payload = &batonv1.Event_HandoffSuperseded{HandoffSuperseded: &batonv1.HandoffSuperseded{HandoffId: e.HandoffID, By: e.By}}
	case domain.ProviderSwitched:
		ev.Payload = &batonv1.Event_ThreadProviderSwitched{ThreadProviderSwitched: &batonv1.ProviderSwitched{From: e.From, To: e.To,
			FromModel: e.FromModel, ToModel: e.ToModel, Command: commandPB(e.Command), HandoffMaxBytes: u32(e.HandoffMaxBytes)}}
	case domain.ProviderThreadDetached:
		ev.Payload = &batonv1.Event_ProviderThreadDetached{ProviderThreadDetached: &batonv1.ProviderThreadDetached{
			ProviderThreadId: e.ProviderThreadID, Reason: e.Reason}}
	case domain.PolicySet:
		ev.Payload = &batonv1.Event_ThreadPolicySet{ThreadPolicySet: &batonv1.PolicySet{Policy: policyPB(e.Policy)}}
	case domain.LimitReached:
		ev.Payload = &batonv1.Event_RunLimitReached{RunLimitReached: &batonv1.LimitReached{RunId: e.RunID, AttemptId: e.AttemptID,
			Provider: e.Provider, Limit: limitPB(e.Limit)}}
	case domain.WaitArmed:
		ev.Payload = &batonv1.Event_WaitArmed{WaitArmed: waitPB(e.Wait)}
	case domain.WaitEnded:
		ev.Payload = &batonv1.Event_WaitEnded{WaitEnded: &batonv1.WaitEnded{WaitId: e.WaitID, Outcome: string(e.Outcome),
			Reason: e.Reason}}
	case domain.CheckRequested:
		ev.Payload = &batonv1.Event_LoopCheckRequested{LoopCheckRequested: &batonv1.CheckRequested{RunId: e.RunID, Command: e.Command}}
	case domain.CheckRecorded:
		ev.Payload = &batonv1.Event_LoopCheckRecorded{LoopCheckRecorded: checkPB(e.CheckResult)}
	case domain.LoopEnded:
		ev.Payload = &batonv1.Event_LoopEnded{LoopEnded: &batonv1.LoopEnded{Status: string(e.Status), Reason: e.Reason}}
	case domain.QueuedRunsResumed:
		ev.Payload = &batonv1.Event_RunQueueResumed{RunQueueResumed: &batonv1.QueuedRunsResumed{Reason: e.Reason,
			Runs: list(e.Runs, func(r domain.QueuedRun) *batonv1.QueuedRun {
				return &batonv1.QueuedRun{RunId: r.RunID, Ordinal: u32(r.Ordinal), Input: r.Input}
			})}}
	case domain.WorktreeReady:
		ev.Payload = &batonv1.Event_WorktreeReady{WorktreeReady: &batonv1.WorktreeReady{Copied: e.Copied, Setup: setupPB(e.Setup)}}
	case domain.WorktreeFailed:
		ev.Payload = &batonv1.Event_WorktreeFailed{WorktreeFailed: &batonv1.WorktreeFailed{Failure: e.Failure}}
	case domain.MergeRequested:
		ev.Payload = &batonv1.Event_ThreadMergeRequested{ThreadMergeRequested: &batonv1.MergeRequested{MergeId: e.MergeID,
			Into: e.Into, Squash: e.Squash}}
	case domain.Merged:
		ev.Payload = &batonv1.Event_ThreadMerged{ThreadMerged: mergePB(e.Merge)}
	case domain.ThreadArchived:
		ev.Payload = &batonv1.Event_ThreadArchived{ThreadArchived: &batonv1.ThreadArchived{DeleteBranch: e.DeleteBranch}}
	case domain.ThreadMoved:
		ev.Payload = &batonv1.Event_ThreadMoved{ThreadMoved: &batonv1.ThreadMoved{From: e.From, To: e.To, Reason: e.Reason}}
	case domain.ThreadHostLost:
		ev.Payload = &batonv1.Event_ThreadHostLost{ThreadHostLost: &batonv1.ThreadHostLost{Host: e.Host}}
	case domain.WorktreeRemoved:
		ev.Payload = &batonv1.Event_WorktreeRemoved{WorktreeRemoved: &batonv1.WorktreeRemoved{Failure: e.Failure,
			BranchDeleted: e.BranchDeleted}}
	default:
		return fmt.Errorf("event type %s has no case in baton.v1's Event", pl.EventType())
	}
	return nil
}
