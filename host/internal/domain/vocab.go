package domain

// The domain's vocabularies, declared once. Each is a string type so that
// its JSON form is the word itself, and a value from outside (a provider
// event, a client's command) is converted where it enters.

// RunStatus is where a run is in its life.
type RunStatus string

// Run statuses.
const (
	RunStatusQueued      RunStatus = "queued"
	RunStatusStarting    RunStatus = "starting"
	RunStatusRunning     RunStatus = "running"
	RunStatusWaiting     RunStatus = "waiting"
	RunStatusCompleted   RunStatus = "completed"
	RunStatusInterrupted RunStatus = "interrupted"
	RunStatusFailed      RunStatus = "failed"
	RunStatusCancelled   RunStatus = "cancelled"
	RunStatusRolledBack  RunStatus = "rolled_back"
	// RunStatusBlocked: a provider limit (or the agent itself) stopped
	// the run, and nothing continues it.
	RunStatusBlocked RunStatus = "blocked"
)

// Terminal says whether a run status is final.
func (s RunStatus) Terminal() bool {
	switch s {
	case RunStatusCompleted, RunStatusInterrupted, RunStatusFailed, RunStatusCancelled, RunStatusRolledBack, RunStatusBlocked:
		return true
	}
	return false
}

// Active says whether a run status holds the thread.
func (s RunStatus) Active() bool {
	switch s {
	case RunStatusStarting, RunStatusRunning, RunStatusWaiting:
		return true
	}
	return false
}

// AttemptReason says why an attempt at a run was made.
type AttemptReason string

// Attempt reasons.
const (
	AttemptInitial                AttemptReason = "initial"
	AttemptSteeringRestart        AttemptReason = "steering_restart"
	AttemptRetry                  AttemptReason = "retry"
	AttemptProviderRecovery       AttemptReason = "provider_recovery"
	AttemptUsageLimitContinuation AttemptReason = "usage_limit_continuation"
)

// AttemptStatus is in_progress while an attempt runs, then how it ended
// (a run status).
type AttemptStatus string

// AttemptInProgress is an attempt that has not ended.
const AttemptInProgress AttemptStatus = "in_progress"

// NodeKind is what an execution node is. Provider item kinds
// (assistant_message, reasoning, tool_call, command_execution,
// file_change, plan, subagent) are node kinds as they are.
type NodeKind string

// Node kinds the domain makes or treats specially.
const (
	NodeRootTurn         NodeKind = "root_turn"
	NodeSubagent         NodeKind = "subagent"
	NodeApprovalRequest  NodeKind = "approval_request"
	NodePlan             NodeKind = "plan"
	NodeToolCall         NodeKind = "tool_call" // an item whose kind the provider did not say
	ItemAssistantMessage NodeKind = "assistant_message"
	ItemReasoning        NodeKind = "reasoning"
)

// ItemStatus is the status of a node, a message, a turn item or a provider
// turn. A provider may report statuses of its own for an item in progress.
type ItemStatus string

// Item statuses.
const (
	StatusInProgress ItemStatus = "in_progress"
	StatusCompleted  ItemStatus = "completed"
	StatusFailed     ItemStatus = "failed"
	StatusCancelled  ItemStatus = "cancelled"
)

// TurnStatus is how a provider says its turn ended.
type TurnStatus string

// Turn statuses.
const (
	TurnCompleted   TurnStatus = "completed"
	TurnInterrupted TurnStatus = "interrupted"
	TurnFailed      TurnStatus = "failed"
)

// RunStatus maps a provider turn status to a run status (anything else
// is a completed turn).
func (s TurnStatus) RunStatus() RunStatus {
	switch s {
	case TurnInterrupted:
		return RunStatusInterrupted
	case TurnFailed:
		return RunStatusFailed
	}
	return RunStatusCompleted
}

// ItemStatus maps a provider turn status to the status of its node.
func (s TurnStatus) ItemStatus() ItemStatus {
	switch s {
	case TurnFailed:
		return StatusFailed
	case TurnInterrupted:
		return StatusCancelled
	}
	return StatusCompleted
}

// Role says who wrote a message.
type Role string

// Message roles.
const (
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
)

// SessionStatus says whether a provider session is open.
type SessionStatus string

// Session statuses.
const (
	SessionStatusOpen  SessionStatus = "open"
	SessionStatusEnded SessionStatus = "ended"
)

// RequestKind is what a provider asks. Approvals are answered by the
// thread's policy; questions need answers a policy cannot invent, so a
// policy declines them; a generic (unknown) request is never answered by
// policy.
type RequestKind string

// Request kinds the sdk's adapters report.
const (
	RequestPermission         RequestKind = "permission"
	RequestCommandApproval    RequestKind = "command_approval"
	RequestFileChangeApproval RequestKind = "file_change_approval"
	RequestPermissions        RequestKind = "permissions"
	RequestUserInput          RequestKind = "user_input"
	RequestGeneric            RequestKind = "generic"
)

// RequestStatus is where a runtime request is.
type RequestStatus string

// Request statuses.
const (
	RequestStatusPending   RequestStatus = "pending"
	RequestStatusResolved  RequestStatus = "resolved"
	RequestStatusExpired   RequestStatus = "expired"
	RequestStatusCancelled RequestStatus = "cancelled"
)

// Delivery says whether an answer can still reach the provider.
type Delivery string

// Request deliveries.
const (
	DeliveryLive         Delivery = "live"
	DeliveryNotResumable Delivery = "not_resumable"
)

// Verdict is an answer to a runtime request.
type Verdict string

// Verdicts. The provider reports a request withdrawn unanswered as
// cancel.
const (
	VerdictAccept           Verdict = "accept"
	VerdictAcceptForSession Verdict = "accept_for_session"
	VerdictDecline          Verdict = "decline"
	VerdictCancel           Verdict = "cancel"
	VerdictAnswer           Verdict = "answer"
)

// Answerer says who answered a request.
type Answerer string

// Who answers.
const (
	AnsweredByPolicy Answerer = "policy"
	AnsweredByClient Answerer = "client"
)

// ApprovalPolicy is how the host answers the provider's requests.
type ApprovalPolicy string

// Approval policies.
const (
	ApproveDecline ApprovalPolicy = "decline" // answer every approval "decline" (the default)
	ApproveAccept  ApprovalPolicy = "accept"  // answer every approval "accept"
	ApproveAsk     ApprovalPolicy = "ask"     // leave every request to a client
)

// DispatchMode says what message.dispatch does when a run is active.
type DispatchMode string

// Dispatch modes.
const (
	ModeStartImmediately DispatchMode = "start_immediately"  // start a run now; refused while one is active
	ModeQueueAfterActive DispatchMode = "queue_after_active" // a new run, started when the runs before it end
	ModeSteerActive      DispatchMode = "steer_active"       // add the message to the active turn (native steering)
	ModeRestartActive    DispatchMode = "restart_active"     // interrupt the active attempt; a new attempt carries the message
)

// EventKind is the kind of a normalized provider event (the sdk's kinds).
type EventKind string

// Provider event kinds.
const (
	EvThreadStarted   EventKind = "thread_started"
	EvTurnStarted     EventKind = "turn_started"
	EvItemStarted     EventKind = "item_started"
	EvItemUpdated     EventKind = "item_updated"
	EvItemCompleted   EventKind = "item_completed"
	EvContentDelta    EventKind = "content_delta"
	EvPlanUpdated     EventKind = "plan_updated"
	EvRequestOpened   EventKind = "request_opened"
	EvRequestResolved EventKind = "request_resolved"
	EvUsage           EventKind = "usage"
	EvTurnTerminal    EventKind = "turn_terminal"
	EvRuntimeExited   EventKind = "runtime_exited"
	EvDiagnostic      EventKind = "diagnostic"
	EvSessionState    EventKind = "session_state"
	EvRateLimit       EventKind = "rate_limit"
)

// EffectType names work for the host to do after a commit.
type EffectType string

// Effect types.
const (
	// EffectStartTurn sends a run's input to the provider (opening a
	// session first when the thread has none).
	EffectStartTurn EffectType = "start_turn"
	// EffectRespond answers a provider's request through its session.
	EffectRespond EffectType = "respond"
	// EffectSteer adds a message to the provider's active turn.
	EffectSteer EffectType = "steer"
	// EffectInterrupt asks the provider to stop a turn.
	EffectInterrupt EffectType = "interrupt"
	// EffectCapture, EffectRestoreFiles and EffectReconcileThread are the
	// host's own work (git, and a provider rollback checked against the
	// turn it expects), so a host that stopped with one in its outbox
	// performs it again; see Replayable.
	EffectCapture         EffectType = "checkpoint_capture"
	EffectRestoreFiles    EffectType = "rollback_files"
	EffectReconcileThread EffectType = "rollback_provider"
	// EffectRunCheck runs a loop's --until check (Text) in the thread's
	// cwd, bounded by Timeout; RecordCheck says what it found.
	EffectRunCheck EffectType = "run_check"
)

// Replayable says whether an effect left in the outbox by a host that
// stopped is performed again by the next one. Provider actions bound to a
// process that is gone are not: recovery cancels them.
func (e EffectType) Replayable() bool {
	switch e {
	case EffectCapture, EffectRestoreFiles, EffectReconcileThread, EffectRunCheck:
		return true
	}
	return false
}

// ScopeKind is what a checkpoint scope belongs to.
type ScopeKind string

// Checkpoint scope kinds.
const (
	// ScopeRootRun is a run's scope (ordinal 0: the baseline before the
	// first run); it advances the app run count.
	ScopeRootRun ScopeKind = "root_run"
	// ScopeSubagent is a subagent turn's scope, nested under its run's;
	// it does not advance the app run count.
	ScopeSubagent ScopeKind = "subagent"
)

// CheckpointStatus is where a checkpoint is.
type CheckpointStatus string

// Checkpoint statuses.
const (
	CheckpointCapturing CheckpointStatus = "capturing"
	CheckpointReady     CheckpointStatus = "ready"
	CheckpointMissing   CheckpointStatus = "missing" // the cwd is not in a git repository
	CheckpointError     CheckpointStatus = "error"
	CheckpointStale     CheckpointStatus = "stale" // a rollback went back past it; its ref is deleted
)

// RollbackStatus is where a rollback is.
type RollbackStatus string

// Rollback statuses.
const (
	RollbackRestoringFiles RollbackStatus = "restoring_files"
	RollbackReconciling    RollbackStatus = "reconciling_provider"
	RollbackDone           RollbackStatus = "completed"
	RollbackStatusFailed   RollbackStatus = "failed"
)

// Reconciliation is how a rollback brought the provider's conversation
// back.
type Reconciliation string

// Reconciliations.
const (
	ReconcileNone        Reconciliation = "none"            // the provider had no turns to drop
	ReconcileNative      Reconciliation = "native_rollback" // the provider dropped the turns itself
	ReconcileFreshThread Reconciliation = "fresh_thread"    // the next run starts a new conversation, with a handoff
)

// HandoffStatus is where a context handoff is.
type HandoffStatus string

// Handoff statuses.
const (
	HandoffReady            HandoffStatus = "ready"
	HandoffStatusConsumed   HandoffStatus = "consumed"
	HandoffStatusSuperseded HandoffStatus = "superseded"
)

// HandoffStrategy is what a handoff covers.
type HandoffStrategy string

// Handoff strategies.
const (
	// HandoffFullThreadSummary: a conversation that has seen none of the
	// thread (or lost what it saw) is told every run.
	HandoffFullThreadSummary HandoffStrategy = "full_thread_summary"
	// HandoffDeltaSinceLastSeen: a provider's own conversation, resumed, is
	// told only the runs since it last saw the thread.
	HandoffDeltaSinceLastSeen HandoffStrategy = "delta_since_target_last_seen"
)
