package domain

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"
)

// Payload is the data of one event; its EventType names it in the log.
type Payload interface{ EventType() string }

// Event types and their payloads. A stored event is never changed: new
// needs get new types or new optional fields.
type (
	ThreadCreated struct {
		Provider        string          `json:"provider"`
		Cwd             string          `json:"cwd"`
		Model           string          `json:"model,omitempty"`
		ProviderCommand ProviderCommand `json:"providerCommand"`
		ApprovalPolicy  ApprovalPolicy  `json:"approvalPolicy,omitempty"`
		// Worktree is the thread's own worktree, being made (nil: the
		// thread works in the directory it was given).
		Worktree *Worktree `json:"worktree,omitempty"`
		// Host is the host that created it, its first owner (Env.Host; "":
		// a host alone on its log); SharedCwd is CreateThread's.
		Host      string `json:"host,omitempty"`
		SharedCwd bool   `json:"sharedCwd,omitempty"`
	}
	MessageAdded struct {
		MessageID string     `json:"messageId"`
		RunID     string     `json:"runId"`
		NodeID    string     `json:"nodeId,omitempty"`
		Role      Role       `json:"role"`
		Text      string     `json:"text,omitempty"`
		Status    ItemStatus `json:"status"`
	}
	MessageDelta struct {
		MessageID string `json:"messageId"`
		Text      string `json:"text"`
	}
	MessageCompleted struct {
		MessageID string `json:"messageId"`
	}
	RunQueued struct {
		RunID     string `json:"runId"`
		Ordinal   int    `json:"ordinal"`
		MessageID string `json:"messageId"`
		Input     string `json:"input"`
		// MCP is the run's own choice of MCP servers (nil: the configured
		// ones).
		MCP *MCPChoice `json:"mcp,omitempty"`
	}
	RunStarted struct {
		RunID    string `json:"runId"`
		Provider string `json:"provider,omitempty"`
		Model    string `json:"model,omitempty"`
		// Host is the host that runs it (Env.Host).
		Host string `json:"host,omitempty"`
	}
	AttemptStarted struct {
		RunID     string        `json:"runId"`
		AttemptID string        `json:"attemptId"`
		Reason    AttemptReason `json:"reason"`
		RootNode  string        `json:"rootNode"`
		// Provider and Model are where the attempt runs ("" in logs from
		// before: the run's); a limit may move a run to another provider.
		Provider string `json:"provider,omitempty"`
		Model    string `json:"model,omitempty"`
	}
	NodeStarted struct {
		RunID       string          `json:"runId"`
		NodeID      string          `json:"nodeId"`
		ParentID    string          `json:"parentId,omitempty"`
		AttemptID   string          `json:"attemptId"`
		Kind        NodeKind        `json:"kind"`
		ProviderRef string          `json:"providerRef,omitempty"`
		Title       string          `json:"title,omitempty"`
		Detail      json.RawMessage `json:"detail,omitempty"`
	}
	NodeUpdated struct {
		RunID  string          `json:"runId"`
		NodeID string          `json:"nodeId"`
		Status ItemStatus      `json:"status,omitempty"`
		Title  string          `json:"title,omitempty"`
		Detail json.RawMessage `json:"detail,omitempty"`
	}
	NodeDelta struct {
		RunID  string `json:"runId"`
		NodeID string `json:"nodeId"`
		Text   string `json:"text"`
	}
	NodeCompleted struct {
		RunID  string     `json:"runId"`
		NodeID string     `json:"nodeId"`
		Status ItemStatus `json:"status"`
	}
	SessionOpened struct {
		SessionID   string `json:"sessionId"`
		Provider    string `json:"provider,omitempty"`
		Model       string `json:"model,omitempty"`
		ProviderRef string `json:"providerRef,omitempty"`
		PluginPid   int    `json:"pluginPid,omitempty"`
		ProviderPid int    `json:"providerPid,omitempty"`
		// ResumeRequested is the provider thread the host asked the
		// session to resume; Resumed says whether the provider did.
		ResumeRequested string `json:"resumeRequested,omitempty"`
		Resumed         bool   `json:"resumed,omitempty"`
		// MCP are the MCP servers the session was given.
		MCP []MCPServerRef `json:"mcp,omitempty"`
	}
	SessionEnded struct {
		SessionID string `json:"sessionId"`
		Reason    string `json:"reason"`
	}
	ProviderThreadBound struct {
		ProviderThreadID string `json:"providerThreadId"`
		SessionID        string `json:"sessionId"`
		ProviderRef      string `json:"providerRef"`
		ParentID         string `json:"parentId,omitempty"`
	}
	ProviderTurnBound struct {
		ProviderTurnID   string `json:"providerTurnId"`
		ProviderThreadID string `json:"providerThreadId"`
		SessionID        string `json:"sessionId"`
		ProviderRef      string `json:"providerRef"`
		RunID            string `json:"runId"`
		AttemptID        string `json:"attemptId"`
		NodeID           string `json:"nodeId"`
	}
	RequestOpened struct {
		RequestID   string          `json:"requestId"`
		RunID       string          `json:"runId,omitempty"`
		NodeID      string          `json:"nodeId,omitempty"`
		SessionID   string          `json:"sessionId"`
		ProviderRef string          `json:"providerRef"`
		Kind        RequestKind     `json:"kind"`
		Title       string          `json:"title,omitempty"`
		Options     []RequestOption `json:"options,omitempty"`
	}
	RequestResolved struct {
		RequestID string          `json:"requestId"`
		Status    RequestStatus   `json:"status"`
		Decision  RequestDecision `json:"decision,omitempty"`
		Delivery  Delivery        `json:"delivery,omitempty"`
	}
	// UsageReported: the usage of a run's attempt so far, as its provider
	// reports it (AttemptID "" in logs from before: the run's).
	UsageReported struct {
		RunID     string `json:"runId"`
		AttemptID string `json:"attemptId,omitempty"`
		Usage     Usage  `json:"usage"`
		// Models breaks Usage down by model, where the provider does
		// (nil: it did not).
		Models []Usage `json:"models,omitempty"`
	}
	RunEnded struct {
		RunID      string    `json:"runId"`
		AttemptID  string    `json:"attemptId,omitempty"`
		Status     RunStatus `json:"status"`
		StopReason string    `json:"stopReason,omitempty"`
		Failure    *Failure  `json:"failure,omitempty"`
	}
	DiagnosticRecorded struct {
		RunID string `json:"runId,omitempty"`
		Title string `json:"title"`
		Text  string `json:"text,omitempty"`
	}
	// RunSteered: a user message was added to the active turn.
	RunSteered struct {
		RunID     string `json:"runId"`
		AttemptID string `json:"attemptId"`
		MessageID string `json:"messageId"`
	}
	// RestartRequested: a steering message waits for the active attempt
	// to stop; a replacement attempt will carry it.
	RestartRequested struct {
		RunID     string `json:"runId"`
		AttemptID string `json:"attemptId"`
		MessageID string `json:"messageId"`
		Text      string `json:"text"`
	}
	// InterruptRequested: the provider was asked to stop the run's turn.
	// Grace is how long it has to end the turn before the host ends its
	// process (Run.Stop); 0, in logs from before there was one, or for a
	// forced interrupt (StopForced follows at once): no deadline.
	InterruptRequested struct {
		RunID     string        `json:"runId"`
		AttemptID string        `json:"attemptId"`
		Grace     time.Duration `json:"grace,omitempty"`
	}
	// StopForced: the host ends the provider process of a run that did
	// not stop when asked (its grace passed, or the interrupt was forced);
	// the run ends interrupted, with Reason, when the session's end comes.
	StopForced struct {
		RunID     string `json:"runId"`
		AttemptID string `json:"attemptId"`
		SessionID string `json:"sessionId"`
		Reason    string `json:"reason"`
	}
	// TurnStalled: the provider said nothing of the run's turn for the
	// host's stall timeout (nothing was recorded of the thread since
	// Since); the host ends its process, and the run fails with Reason
	// (FailureStalled) when the session's end comes.
	TurnStalled struct {
		RunID     string    `json:"runId"`
		AttemptID string    `json:"attemptId"`
		SessionID string    `json:"sessionId"`
		Since     time.Time `json:"since"`
		Reason    string    `json:"reason"`
	}
	// AttemptEnded: an attempt ended without ending its run (it was
	// replaced).
	AttemptEnded struct {
		RunID     string    `json:"runId"`
		AttemptID string    `json:"attemptId"`
		Status    RunStatus `json:"status"`
	}
	// RequestAnswered: an answer to a request is on its way to the
	// provider, from the thread's policy or a client.
	RequestAnswered struct {
		RequestID string            `json:"requestId"`
		Decision  RequestDecision   `json:"decision"`
		Answers   map[string]string `json:"answers,omitempty"`
		By        Answerer          `json:"by"`
	}
	// AttemptDispatched: the provider took the attempt's turn in a session.
	AttemptDispatched struct {
		RunID     string `json:"runId"`
		AttemptID string `json:"attemptId"`
		SessionID string `json:"sessionId"`
	}
	// RequestAnswerFailed: an answer did not reach the provider; the
	// request can be answered again.
	RequestAnswerFailed struct {
		RequestID string `json:"requestId"`
		Reason    string `json:"reason"`
	}
	// RateLimitReported: a provider limit changed.
	RateLimitReported struct {
		RateLimit
	}
	// EffectCancelled: a provider action left in the outbox by a host
	// that stopped was not performed, because the process it was bound to
	// is gone.
	EffectCancelled struct {
		EffectID string     `json:"effectId"`
		Type     EffectType `json:"type"`
		RunID    string     `json:"runId,omitempty"`
		Reason   string     `json:"reason"`
	}
	// RunCompleting: the run's provider turn ended and its attempt is
	// closed; the run ends with this outcome once its checkpoint is
	// recorded.
	RunCompleting struct {
		RunID string `json:"runId"`
		RunOutcome
	}
	// CheckpointScopeOpened: a run's, or a subagent turn's, checkpoint
	// scope.
	CheckpointScopeOpened struct {
		ScopeID          string    `json:"scopeId"`
		Kind             ScopeKind `json:"kind"`
		RunID            string    `json:"runId,omitempty"`
		NodeID           string    `json:"nodeId,omitempty"`
		ParentID         string    `json:"parentId,omitempty"`
		Ordinal          int       `json:"ordinal"`
		AdvancesRunCount bool      `json:"advancesRunCount"`
	}
	// CheckpointRequested: the worktree is to be captured under Ref.
	CheckpointRequested struct {
		CheckpointID string `json:"checkpointId"`
		ScopeID      string `json:"scopeId"`
		RunID        string `json:"runId,omitempty"`
		NodeID       string `json:"nodeId,omitempty"`
		RunOrdinal   int    `json:"runOrdinal"`
		BaseID       string `json:"baseId,omitempty"`
		Ref          string `json:"ref"`
	}
	// CheckpointRecorded: what the capture found.
	CheckpointRecorded struct {
		CheckpointID string           `json:"checkpointId"`
		Status       CheckpointStatus `json:"status"`
		Commit       string           `json:"commit,omitempty"`
		Files        []FileChange     `json:"files,omitempty"`
		Reason       string           `json:"reason,omitempty"`
		// BranchCommit is the run's commit on the thread's branch ("":
		// none, or the run changed nothing); BranchError why it could not
		// be made.
		BranchCommit string `json:"branchCommit,omitempty"`
		BranchError  string `json:"branchError,omitempty"`
	}
	// RollbackStarted: files are being restored to a checkpoint.
	RollbackStarted struct {
		RollbackID       string   `json:"rollbackId"`
		CheckpointID     string   `json:"checkpointId"`
		TargetRunOrdinal int      `json:"targetRunOrdinal"`
		Runs             []string `json:"runs"`
		Checkpoints      []string `json:"checkpoints"`
		// Target is the checkpoint, when it had left the projection with
		// its run: it is back in it (the next capture's base).
		Target *Checkpoint `json:"target,omitempty"`
	}
	// RollbackFilesRestored: the worktree is the checkpoint's again; the
	// provider's conversation is next.
	RollbackFilesRestored struct {
		RollbackID  string `json:"rollbackId"`
		Written     int    `json:"written"`
		Removed     int    `json:"removed"`
		SavedRef    string `json:"savedRef,omitempty"`
		SavedCommit string `json:"savedCommit,omitempty"`
		// BranchHead is the commit the thread's branch was moved back to
		// ("": it was not moved).
		BranchHead string `json:"branchHead,omitempty"`
	}
	// RollbackCompleted: the provider was reconciled; the rollback's runs
	// are rolled back and its checkpoints stale.
	RollbackCompleted struct {
		RollbackID        string         `json:"rollbackId"`
		Reconciliation    Reconciliation `json:"reconciliation"`
		ProviderThreadRef string         `json:"providerThreadRef,omitempty"`
		TurnsDropped      int            `json:"turnsDropped,omitempty"`
		Note              string         `json:"note,omitempty"`
		// Detached are the provider threads left behind for a fresh one.
		Detached []string `json:"detached,omitempty"`
		// KeptThrough, for a native rollback, is the last run the kept
		// conversation has seen (absent in logs from before: worked out
		// from the projection).
		KeptThrough *int `json:"keptThrough,omitempty"`
	}
	// RollbackFailed: a rollback stopped at a stage.
	RollbackFailed struct {
		RollbackID string  `json:"rollbackId"`
		Stage      string  `json:"stage"`
		Failure    Failure `json:"failure"`
	}
	// HandoffCreated: context for a fresh provider conversation.
	HandoffCreated struct {
		HandoffID    string          `json:"handoffId"`
		RollbackID   string          `json:"rollbackId,omitempty"`
		Strategy     HandoffStrategy `json:"strategy"`
		Version      int             `json:"version,omitempty"`
		FromProvider string          `json:"fromProvider,omitempty"`
		ToProvider   string          `json:"toProvider,omitempty"`
		FromRun      int             `json:"fromRun"`
		ToRun        int             `json:"toRun"`
		Runs         []HandoffRun    `json:"runs,omitempty"`
		Bytes        int             `json:"bytes,omitempty"`
		Truncated    bool            `json:"truncated,omitempty"`
		Cut          string          `json:"cut,omitempty"`
		Fallback     string          `json:"fallback,omitempty"`
		Text         string          `json:"text"`
	}
	// HandoffConsumed: a run's first turn carried the handoff.
	HandoffConsumed struct {
		HandoffID string `json:"handoffId"`
		RunID     string `json:"runId"`
	}
	// HandoffStatusSuperseded: a ready handoff will not be given (a later switch,
	// or what the next run needs changed); By names what replaced it.
	HandoffSuperseded struct {
		HandoffID string `json:"handoffId"`
		By        string `json:"by,omitempty"`
	}
	// ProviderSwitched: the thread's next runs start on another provider
	// or model. Command is the process the provider runs.
	ProviderSwitched struct {
		From            string          `json:"from"`
		To              string          `json:"to"`
		FromModel       string          `json:"fromModel,omitempty"`
		ToModel         string          `json:"toModel,omitempty"`
		Command         ProviderCommand `json:"command"`
		HandoffMaxBytes int             `json:"handoffMaxBytes,omitempty"`
	}
	// PolicySet: the thread's continuation policy (defaults filled in;
	// Off: none).
	PolicySet struct {
		Policy ContinuationPolicy `json:"policy"`
	}
	// LimitReached: a run's attempt ended on a provider limit.
	LimitReached struct {
		RunID     string `json:"runId"`
		AttemptID string `json:"attemptId"`
		Provider  string `json:"provider"`
		Limit     Limit  `json:"limit"`
	}
	// WaitArmed: a wait is armed until its instant.
	WaitArmed struct {
		Wait
	}
	// WaitEnded: a wait fired, or was cancelled (Reason says why).
	WaitEnded struct {
		WaitID  string      `json:"waitId"`
		Outcome WaitOutcome `json:"outcome"`
		Reason  string      `json:"reason,omitempty"`
	}
	// CheckRequested: a loop's check is to run after a completed run.
	CheckRequested struct {
		RunID   string `json:"runId"`
		Command string `json:"command"`
	}
	// CheckRecorded: what the check found.
	CheckRecorded struct {
		CheckResult
	}
	// LoopEnded: the continuation loop ended, and why.
	LoopEnded struct {
		Status LoopStatus `json:"status"`
		Reason string     `json:"reason"`
	}
	// QueuedRunsResumed: runs that were queued when the last host stopped
	// are being sent to the provider, oldest first, before anything queued
	// after them; the first of Runs starts with this event. Said once, as
	// they start, so that a client can tell its user (and how to drop
	// those still queued).
	QueuedRunsResumed struct {
		Reason string      `json:"reason"`
		Runs   []QueuedRun `json:"runs"`
	}
	// ProviderThreadDetached: a provider's conversation will not be
	// resumed (its resume failed); its next run starts a fresh one.
	ProviderThreadDetached struct {
		ProviderThreadID string `json:"providerThreadId"`
		Reason           string `json:"reason"`
	}
)

func (ThreadCreated) EventType() string       { return "thread.created" }
func (MessageAdded) EventType() string        { return "message.added" }
func (MessageDelta) EventType() string        { return "message.delta" }
func (MessageCompleted) EventType() string    { return "message.completed" }
func (RunQueued) EventType() string           { return "run.queued" }
func (RunStarted) EventType() string          { return "run.started" }
func (AttemptStarted) EventType() string      { return "attempt.started" }
func (NodeStarted) EventType() string         { return "node.started" }
func (NodeUpdated) EventType() string         { return "node.updated" }
func (NodeDelta) EventType() string           { return "node.delta" }
func (NodeCompleted) EventType() string       { return "node.completed" }
func (SessionOpened) EventType() string       { return "provider.session.opened" }
func (SessionEnded) EventType() string        { return "provider.session.ended" }
func (ProviderThreadBound) EventType() string { return "provider.thread.bound" }
func (ProviderTurnBound) EventType() string   { return "provider.turn.bound" }
func (RequestOpened) EventType() string       { return "request.opened" }
func (RequestResolved) EventType() string     { return "request.resolved" }
func (UsageReported) EventType() string       { return "usage.reported" }
func (RunEnded) EventType() string            { return "run.ended" }
func (DiagnosticRecorded) EventType() string  { return "diagnostic.recorded" }
func (RunSteered) EventType() string          { return "run.steered" }
func (RestartRequested) EventType() string    { return "run.restart.requested" }
func (InterruptRequested) EventType() string  { return "run.interrupt.requested" }
func (StopForced) EventType() string          { return "run.stop.forced" }
func (TurnStalled) EventType() string         { return "run.stalled" }
func (AttemptEnded) EventType() string        { return "attempt.ended" }
func (RequestAnswered) EventType() string     { return "request.answered" }
func (EffectCancelled) EventType() string     { return "effect.cancelled" }
func (AttemptDispatched) EventType() string   { return "attempt.dispatched" }
func (RequestAnswerFailed) EventType() string { return "request.answer.failed" }
func (RateLimitReported) EventType() string   { return "rate_limit.reported" }
func (RunCompleting) EventType() string       { return "run.completing" }
func (CheckpointScopeOpened) EventType() string {
	return "checkpoint.scope.opened"
}
func (CheckpointRequested) EventType() string   { return "checkpoint.requested" }
func (CheckpointRecorded) EventType() string    { return "checkpoint.recorded" }
func (RollbackStarted) EventType() string       { return "rollback.started" }
func (RollbackFilesRestored) EventType() string { return "rollback.files.restored" }
func (RollbackCompleted) EventType() string     { return "rollback.completed" }
func (RollbackFailed) EventType() string        { return "rollback.failed" }
func (HandoffCreated) EventType() string        { return "handoff.created" }
func (HandoffConsumed) EventType() string       { return "handoff.consumed" }
func (HandoffSuperseded) EventType() string     { return "handoff.superseded" }
func (ProviderSwitched) EventType() string      { return "thread.provider_switched" }
func (ProviderThreadDetached) EventType() string {
	return "provider_thread.detached"
}
func (PolicySet) EventType() string      { return "thread.policy_set" }
func (LimitReached) EventType() string   { return "run.limit_reached" }
func (WaitArmed) EventType() string      { return "wait.armed" }
func (WaitEnded) EventType() string      { return "wait.ended" }
func (CheckRequested) EventType() string { return "loop.check_requested" }
func (CheckRecorded) EventType() string  { return "loop.check_recorded" }
func (LoopEnded) EventType() string      { return "loop.ended" }
func (QueuedRunsResumed) EventType() string {
	return "run.queue.resumed"
}

// QueuedRun names a queued run in an event: its id, ordinal and the start
// of its input (QueuedInputBytes at most).
type QueuedRun struct {
	RunID   string `json:"runId"`
	Ordinal int    `json:"ordinal"`
	Input   string `json:"input"`
}

// QueuedInputBytes bounds a QueuedRun's input: enough to recognize the
// message, the run itself holds all of it.
const QueuedInputBytes = 200

// decoders maps each event type to the decoder of its payload.
var decoders = map[string]func([]byte) (Payload, error){}

func register[T Payload]() {
	var zero T
	decoders[zero.EventType()] = func(data []byte) (Payload, error) {
		var v T
		err := json.Unmarshal(data, &v)
		return v, err
	}
}

func init() {
	register[ThreadCreated]()
	register[MessageAdded]()
	register[MessageDelta]()
	register[MessageCompleted]()
	register[RunQueued]()
	register[RunStarted]()
	register[AttemptStarted]()
	register[NodeStarted]()
	register[NodeUpdated]()
	register[NodeDelta]()
	register[NodeCompleted]()
	register[SessionOpened]()
	register[SessionEnded]()
	register[ProviderThreadBound]()
	register[ProviderTurnBound]()
	register[RequestOpened]()
	register[RequestResolved]()
	register[UsageReported]()
	register[RunEnded]()
	register[DiagnosticRecorded]()
	register[RunSteered]()
	register[RestartRequested]()
	register[InterruptRequested]()
	register[StopForced]()
	register[TurnStalled]()
	register[AttemptEnded]()
	register[RequestAnswered]()
	register[EffectCancelled]()
	register[AttemptDispatched]()
	register[RequestAnswerFailed]()
	register[RateLimitReported]()
	register[RunCompleting]()
	register[CheckpointScopeOpened]()
	register[CheckpointRequested]()
	register[CheckpointRecorded]()
	register[RollbackStarted]()
	register[RollbackFilesRestored]()
	register[RollbackCompleted]()
	register[RollbackFailed]()
	register[HandoffCreated]()
	register[HandoffConsumed]()
	register[HandoffSuperseded]()
	register[ProviderSwitched]()
	register[ProviderThreadDetached]()
	register[PolicySet]()
	register[LimitReached]()
	register[WaitArmed]()
	register[WaitEnded]()
	register[CheckRequested]()
	register[CheckRecorded]()
	register[LoopEnded]()
	register[QueuedRunsResumed]()
	register[WorktreeReady]()
	register[WorktreeFailed]()
	register[MergeRequested]()
	register[Merged]()
	register[ThreadArchived]()
	register[WorktreeRemoved]()
	register[ThreadMoved]()
	register[ThreadHostLost]()
}

// EventTypes are the types of every event the domain records, sorted: the
// registry DecodePayload reads. A converter that must have a case for each
// (the API's) tests itself against it, so that a new type cannot be left
// out unnoticed.
func EventTypes() []string { return slices.Sorted(maps.Keys(decoders)) }

// DecodePayload decodes an event's data by its type. An unknown type is an
// error that names it: a log written by a newer Baton is refused, not
// misread.
func DecodePayload(eventType string, data []byte) (Payload, error) {
	dec, ok := decoders[eventType]
	if !ok {
		return nil, fmt.Errorf("unknown event type %q", eventType)
	}
	p, err := dec(data)
	if err != nil {
		return nil, fmt.Errorf("event %s: %w", eventType, err)
	}
	return p, nil
}
