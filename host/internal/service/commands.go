package service

import (
	"context"
	"errors"
	"path/filepath"
	"slices"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	batonv1 "github.com/baton-run/baton/host/api/baton/v1"
	"github.com/baton-run/baton/host/internal/domain"
)

// The commands. Each RPC checks its request (errors name the proto field),
// makes the domain command with its command id (allocated when the client
// sends none) and dispatches it; a command id seen before returns the
// first receipt and changes nothing.

// commandID is the request's command id, or a new one.
func (s *Server) commandID(id string) (string, error) {
	if id == "" {
		return s.host.NewID("cmd"), nil
	}
	return id, checkID("command_id", id)
}

// dispatch dispatches a command and maps its error to a status.
func (s *Server) dispatch(ctx context.Context, rpc string, cmd domain.Command) (domain.Receipt, error) {
	rc, err := s.host.Dispatch(ctx, cmd)
	return rc, s.toStatus(rpc, err)
}

// prior is the receipt a command id already has, if it has one.
func (s *Server) prior(rpc, cmdID string) (domain.Receipt, bool, error) {
	rc, ok, err := s.host.Receipt(cmdID)
	return rc, ok, s.toStatus(rpc, err)
}

// CreateThread starts a conversation.
func (s *Server) CreateThread(ctx context.Context, req *batonv1.CreateThreadRequest) (*batonv1.Receipt, error) {
	id, err := s.commandID(req.GetCommandId())
	if err != nil {
		return nil, err
	}
	if err := checkID("thread_id", req.GetThreadId()); err != nil {
		return nil, err
	}
	if err := required("provider", req.GetProvider()); err != nil {
		return nil, err
	}
	if on, here := req.GetOnHost(), s.host.HostName(); on != "" && on != here {
		if here == "" {
			return nil, status.Errorf(codes.FailedPrecondition, "on_host %q: this service's event log is not shared with other hosts (serve --store nats://...)", on)
		}
		return nil, status.Errorf(codes.FailedPrecondition, "on_host %q: the call reached host %q, which does not carry it to another", on, here)
	}
	if req.GetCwd() == "" {
		return nil, invalid("cwd", "required")
	}
	if !filepath.IsAbs(req.GetCwd()) {
		return nil, invalid("cwd", "must be an absolute path, got %q", req.GetCwd())
	}
	policy := domain.ApprovalPolicy(req.GetApprovalPolicy())
	if policy != "" && !slices.Contains(domain.ApprovalPolicies, policy) {
		return nil, invalid("approval_policy", "unknown policy %q; want %s", policy, domain.OneOf(domain.ApprovalPolicies...))
	}
	cont, err := policyOf("policy", req.GetPolicy())
	if err != nil {
		return nil, err
	}
	pc := req.GetProviderCommand()
	if err := checkCommand("provider_command", pc); err != nil {
		return nil, err
	}
	var wt *domain.WorktreeSpec
	if o := req.GetWorktree(); o != nil {
		if o.GetDir() != "" && !filepath.IsAbs(o.GetDir()) {
			return nil, invalid("worktree.dir", "must be an absolute path, got %q", o.GetDir())
		}
		wt = &domain.WorktreeSpec{Branch: o.GetBranch(), Base: o.GetBase(), Dir: o.GetDir(), Copy: o.GetCopy(),
			Setup: o.GetSetup(), Author: o.GetAuthor()}
	}
	rc, err := s.dispatch(ctx, "CreateThread", domain.Command{ID: id, ThreadID: req.GetThreadId(), Payload: domain.CreateThread{
		Provider: req.GetProvider(), Cwd: req.GetCwd(), Model: req.GetModel(), ApprovalPolicy: policy,
		ProviderCommand: commandOf(pc), Worktree: wt, SharedCwd: req.GetSharedCwd()}})
	if err != nil {
		return nil, err
	}
	if req.GetPolicy() != nil {
		// The thread's policy, once it is there: the receipt stays the
		// create's, at the sequence after both.
		prc, err := s.setPolicy(ctx, "CreateThread", policyCommandID(id), rc.ThreadID, cont)
		if err != nil {
			return nil, err
		}
		rc.Sequence = max(rc.Sequence, prc.Sequence)
	}
	return receiptPB(rc, ""), nil
}

// SendMessage sends a user message. A message with no id gets one made
// from the command id, so that a retried command is the same command.
func (s *Server) SendMessage(ctx context.Context, req *batonv1.SendMessageRequest) (*batonv1.Receipt, error) {
	id, err := s.commandID(req.GetCommandId())
	if err != nil {
		return nil, err
	}
	if err := required("thread_id", req.GetThreadId()); err != nil {
		return nil, err
	}
	if req.GetText() == "" {
		return nil, invalid("text", "required")
	}
	if problem := domain.CheckText(req.GetText()); problem != "" {
		return nil, invalid("text", "the message %s", problem)
	}
	mode, ok := modes[req.GetMode()]
	if !ok {
		return nil, invalid("mode", "unknown mode %q; want queue, steer, restart or now", req.GetMode())
	}
	for _, f := range []struct{ name, v string }{{"message_id", req.GetMessageId()}, {"target_run_id", req.GetTargetRunId()}} {
		if err := checkID(f.name, f.v); err != nil {
			return nil, err
		}
	}
	cont, err := policyOf("policy", req.GetPolicy())
	if err != nil {
		return nil, err
	}
	msgID := req.GetMessageId()
	if msgID == "" {
		msgID = "msg_" + id
	}
	if req.GetPolicy() != nil {
		// The policy first, so that the message's run follows it.
		if _, err := s.setPolicy(ctx, "SendMessage", policyCommandID(id), req.GetThreadId(), cont); err != nil {
			return nil, err
		}
	}
	rc, err := s.dispatch(ctx, "SendMessage", domain.Command{ID: id, ThreadID: req.GetThreadId(), Payload: domain.DispatchMessage{
		MessageID: msgID, Text: req.GetText(), Mode: mode, TargetRunID: req.GetTargetRunId(), MCP: mcpChoice(req)}})
	if err != nil {
		return nil, err
	}
	return receiptPB(rc, s.runOf(rc.ThreadID, msgID)), nil
}

// runOf is the run a message started or joined, as the thread shows it
// now ("" when it shows none).
func (s *Server) runOf(threadID, msgID string) string {
	t, err := s.host.Thread(threadID)
	if err != nil {
		return ""
	}
	for _, m := range t.Messages {
		if m.ID == msgID {
			return m.RunID
		}
	}
	return ""
}

// AnswerRequest answers a provider's request. With no thread id it is the
// thread the request is on (a repeat: the thread of its first receipt).
func (s *Server) AnswerRequest(ctx context.Context, req *batonv1.AnswerRequestRequest) (*batonv1.Receipt, error) {
	id, err := s.commandID(req.GetCommandId())
	if err != nil {
		return nil, err
	}
	if err := required("request_id", req.GetRequestId()); err != nil {
		return nil, err
	}
	if err := checkID("thread_id", req.GetThreadId()); err != nil {
		return nil, err
	}
	decision := req.GetDecision()
	if decision == "" && len(req.GetAnswers()) > 0 {
		decision = string(domain.DecisionAnswer)
	}
	if decision == "" {
		return nil, invalid("decision", "required")
	}
	if !slices.Contains(domain.RequestDecisions, domain.RequestDecision(decision)) {
		return nil, invalid("decision", "unknown decision %q; want %s", decision, domain.OneOf(domain.RequestDecisions...))
	}
	threadID := req.GetThreadId()
	if threadID == "" {
		rc, ok, err := s.prior("AnswerRequest", id)
		if err != nil {
			return nil, err
		}
		if ok {
			threadID = rc.ThreadID // Dispatch tells a repeat from a reuse
		} else if threadID, err = s.host.RequestThread(req.GetRequestId()); err != nil {
			return nil, s.toStatus("AnswerRequest", err)
		}
	}
	rc, err := s.dispatch(ctx, "AnswerRequest", domain.Command{ID: id, ThreadID: threadID, Payload: domain.RespondToRequest{
		RequestID: req.GetRequestId(), Decision: domain.RequestDecision(decision), Answers: req.GetAnswers()}})
	if err != nil {
		return nil, err
	}
	return receiptPB(rc, ""), nil
}

// Interrupt asks the provider to stop a run: the one named, or the
// thread's active run.
func (s *Server) Interrupt(ctx context.Context, req *batonv1.InterruptRequest) (*batonv1.Receipt, error) {
	id, err := s.commandID(req.GetCommandId())
	if err != nil {
		return nil, err
	}
	if err := required("thread_id", req.GetThreadId()); err != nil {
		return nil, err
	}
	if err := checkID("run_id", req.GetRunId()); err != nil {
		return nil, err
	}
	runID := req.GetRunId()
	if runID == "" {
		// Which run was meant is known only at the first try: a repeat
		// returns the first receipt without looking again.
		rc, ok, err := s.prior("Interrupt", id)
		if err != nil {
			return nil, err
		}
		if ok {
			if rc.Type != (domain.InterruptRun{}).CommandType() || rc.ThreadID != req.GetThreadId() {
				return nil, status.Errorf(codes.AlreadyExists, "command id %s already exists: it was used for another %s command on thread %s",
					id, rc.Type, rc.ThreadID)
			}
			return receiptPB(rc, ""), nil
		}
		t, err := s.host.Thread(req.GetThreadId())
		if err != nil {
			return nil, s.toStatus("Interrupt", err)
		}
		r := t.ActiveRun()
		if r == nil {
			return nil, status.Errorf(codes.FailedPrecondition, "thread %s has no active run to interrupt", t.ID)
		}
		runID = r.ID
	}
	rc, err := s.dispatch(ctx, "Interrupt", domain.Command{ID: id, ThreadID: req.GetThreadId(),
		Payload: domain.InterruptRun{RunID: runID, Force: req.GetForce()}})
	if err != nil {
		return nil, err
	}
	// The run the request named: a repeat returns the same receipt (one
	// that named none found the active run only at its first try).
	return receiptPB(rc, req.GetRunId()), nil
}

// maxReason bounds a client's stop reason.
const maxReason = 1024

// CancelQueued cancels a thread's queued runs: those named, or every one.
func (s *Server) CancelQueued(ctx context.Context, req *batonv1.CancelQueuedRequest) (*batonv1.Receipt, error) {
	id, err := s.commandID(req.GetCommandId())
	if err != nil {
		return nil, err
	}
	if err := required("thread_id", req.GetThreadId()); err != nil {
		return nil, err
	}
	for _, r := range req.GetRunIds() {
		if err := required("run_ids", r); err != nil {
			return nil, err
		}
	}
	if len(req.GetReason()) > maxReason {
		return nil, invalid("reason", "longer than %d bytes", maxReason)
	}
	rc, err := s.dispatch(ctx, "CancelQueued", domain.Command{ID: id, ThreadID: req.GetThreadId(), Payload: domain.CancelQueued{
		RunIDs: req.GetRunIds(), Reason: req.GetReason()}})
	if err != nil {
		return nil, err
	}
	return receiptPB(rc, ""), nil
}

// Rollback puts a thread back to a run's checkpoint (or the checkpoint
// named).
func (s *Server) Rollback(ctx context.Context, req *batonv1.RollbackRequest) (*batonv1.Receipt, error) {
	id, err := s.commandID(req.GetCommandId())
	if err != nil {
		return nil, err
	}
	if err := required("thread_id", req.GetThreadId()); err != nil {
		return nil, err
	}
	if err := checkID("checkpoint_id", req.GetCheckpointId()); err != nil {
		return nil, err
	}
	p := domain.RollbackToCheckpoint{CheckpointID: req.GetCheckpointId()}
	if p.CheckpointID == "" {
		if p.ScopeID, err = s.host.RunScope(req.GetThreadId(), int(req.GetRun())); err != nil {
			return nil, s.toStatus("Rollback", err)
		}
	}
	rc, err := s.dispatch(ctx, "Rollback", domain.Command{ID: id, ThreadID: req.GetThreadId(), Payload: p})
	if err != nil {
		return nil, err
	}
	return receiptPB(rc, ""), nil
}

// Merge brings a worktree thread's branch into another branch; how it
// came out is the thread's thread.merged event.
func (s *Server) Merge(ctx context.Context, req *batonv1.MergeRequest) (*batonv1.Receipt, error) {
	id, err := s.commandID(req.GetCommandId())
	if err != nil {
		return nil, err
	}
	if err := required("thread_id", req.GetThreadId()); err != nil {
		return nil, err
	}
	if err := checkID("merge_id", req.GetMergeId()); err != nil {
		return nil, err
	}
	rc, err := s.dispatch(ctx, "Merge", domain.Command{ID: id, ThreadID: req.GetThreadId(), Payload: domain.MergeThread{
		MergeID: req.GetMergeId(), Into: req.GetInto(), Squash: req.GetSquash()}})
	if err != nil {
		return nil, err
	}
	return receiptPB(rc, ""), nil
}

// Archive puts a thread away, removing its worktree.
func (s *Server) Archive(ctx context.Context, req *batonv1.ArchiveRequest) (*batonv1.Receipt, error) {
	id, err := s.commandID(req.GetCommandId())
	if err != nil {
		return nil, err
	}
	if err := required("thread_id", req.GetThreadId()); err != nil {
		return nil, err
	}
	rc, err := s.dispatch(ctx, "Archive", domain.Command{ID: id, ThreadID: req.GetThreadId(), Payload: domain.ArchiveThread{
		DeleteBranch: req.GetDeleteBranch()}})
	if err != nil {
		return nil, err
	}
	return receiptPB(rc, ""), nil
}

// SwitchProvider changes the provider (or model) the thread's next runs
// start on. What the request alone cannot say is checked against the
// thread before the first try (a repeat returns its first receipt without
// looking again): a provider the thread has not used needs its command.
func (s *Server) SwitchProvider(ctx context.Context, req *batonv1.SwitchProviderRequest) (*batonv1.Receipt, error) {
	id, err := s.commandID(req.GetCommandId())
	if err != nil {
		return nil, err
	}
	if err := required("thread_id", req.GetThreadId()); err != nil {
		return nil, err
	}
	if err := required("provider", req.GetProvider()); err != nil {
		return nil, err
	}
	if err := checkID("model", req.GetModel()); err != nil {
		return nil, err
	}
	maxBytes := req.GetHandoffMaxBytes()
	if maxBytes != 0 && maxBytes < domain.MinHandoffMaxBytes {
		return nil, invalid("handoff_max_bytes", "%d is below the least, %d (0 keeps the thread's bound)", maxBytes, domain.MinHandoffMaxBytes)
	}
	pc := req.GetProviderCommand()
	if err := checkCommand("provider_command", pc); err != nil {
		return nil, err
	}
	rc, err := s.host.Dispatch(ctx, domain.Command{ID: id, ThreadID: req.GetThreadId(), Payload: domain.SwitchProvider{
		Provider: req.GetProvider(), Model: req.GetModel(), ProviderCommand: commandOf(pc),
		HandoffMaxBytes: int(maxBytes)}})
	if errors.Is(err, domain.ErrNoProviderCommand) {
		// The domain knows which providers the thread has used; the field
		// is the API's.
		return nil, invalid("provider_command", "required: thread %s has not used %s, so there is no command of it to keep",
			req.GetThreadId(), req.GetProvider())
	}
	if err != nil {
		return nil, s.toStatus("SwitchProvider", err)
	}
	return receiptPB(rc, ""), nil
}

// mcpChoice is the run's own choice of MCP servers a message names (nil:
// it names none, and the configured ones are the run's).
func mcpChoice(req *batonv1.SendMessageRequest) *domain.MCPChoice {
	if len(req.GetMcp()) == 0 && !req.GetNoMcp() {
		return nil
	}
	return &domain.MCPChoice{Names: req.GetMcp(), None: req.GetNoMcp()}
}
