package domain

import (
	"strings"

	"github.com/baton-run/baton/sdk"
)

// The domain's vocabularies, declared once. Each is a string type so that
// its JSON form is the word itself. A provider's vocabularies (event and
// item kinds, statuses) are the sdk's, read where its events are ingested;
// what the domain stores of them is its own: a request's kind and
// decision and a limit's kind are the domain's types (providerterms.go,
// converted in sdkconv.go), and where a provider's word becomes the
// domain's (an item's kind a node's, a turn's status a run's and its
// node's, an item's status a node's), it is converted here, in one
// function each (runStatus, itemStatus, nodeStatus), and nowhere else.

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

// NodeKind is what an execution node is. A node made from a provider's
// item is of the item's kind (sdk.ItemKind) as it is.
type NodeKind string

// Node kinds the domain makes or treats specially.
const (
	NodeRootTurn         NodeKind = "root_turn"
	NodeApprovalRequest  NodeKind = "approval_request"
	NodeSubagent                  = NodeKind(sdk.ItemSubagent)
	NodePlan                      = NodeKind(sdk.ItemPlan)
	NodeToolCall                  = NodeKind(sdk.ItemToolCall) // an item whose kind the provider did not say
	NodeAssistantMessage          = NodeKind(sdk.ItemAssistantMessage)
	NodeReasoning                 = NodeKind(sdk.ItemReasoning)
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

// runStatus maps a provider turn's status (turn_terminal's) to a run
// status (anything else is a completed turn).
func runStatus(s sdk.TurnStatus) RunStatus {
	switch s {
	case sdk.TurnInterrupted:
		return RunStatusInterrupted
	case sdk.TurnFailed:
		return RunStatusFailed
	}
	return RunStatusCompleted
}

// itemStatus maps a provider turn's status to the status of its node.
func itemStatus(s sdk.TurnStatus) ItemStatus {
	switch s {
	case sdk.TurnFailed:
		return StatusFailed
	case sdk.TurnInterrupted:
		return StatusCancelled
	}
	return StatusCompleted
}

// nodeStatus is an item event's status as its node's: the provider's word
// as it is (sdk.ItemStatus: in_progress, completed, failed, declined, or
// a provider's own word for an item in progress); "" for none.
func nodeStatus(s sdk.Status) ItemStatus {
	is, _ := s.(sdk.ItemStatus)
	return ItemStatus(is)
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

// Answerer says who answered a request.
type Answerer string

// Who answers.
const (
	AnsweredByPolicy Answerer = "policy"
	AnsweredByClient Answerer = "client"
	// AnsweredByTimeout: no one answered within the host's request
	// timeout, so the host did (ExpireRequest).
	AnsweredByTimeout Answerer = "timeout"
)

// ApprovalPolicy is how the host answers the provider's requests.
type ApprovalPolicy string

// Approval policies.
const (
	ApproveDecline ApprovalPolicy = "decline" // answer every approval "decline" (the default)
	ApproveAccept  ApprovalPolicy = "accept"  // answer every approval "accept"
	ApproveAsk     ApprovalPolicy = "ask"     // leave every request to a client
)

// ApprovalPolicies are the approval policies, in the order a person is
// offered them (the CLI's --approve, its completion, the API's errors).
var ApprovalPolicies = []ApprovalPolicy{ApproveAsk, ApproveAccept, ApproveDecline}

// OneOf offers words as a choice, as a message says it: "a, b or c".
func OneOf[W ~string](words ...W) string {
	if len(words) < 2 {
		return strings.Join(Strings(words...), "")
	}
	return strings.Join(Strings(words[:len(words)-1]...), ", ") + " or " + string(words[len(words)-1])
}

// Strings is words as strings: a vocabulary where a flag's completion or a
// wire field takes plain strings.
func Strings[W ~string](words ...W) []string {
	out := make([]string, len(words))
	for i, w := range words {
		out[i] = string(w)
	}
	return out
}

// DispatchMode says what message.dispatch does when a run is active.
type DispatchMode string

// Dispatch modes.
const (
	ModeStartImmediately DispatchMode = "start_immediately"  // start a run now; refused while one is active
	ModeQueueAfterActive DispatchMode = "queue_after_active" // a new run, started when the runs before it end
	ModeSteerActive      DispatchMode = "steer_active"       // add the message to the active turn (native steering)
	ModeRestartActive    DispatchMode = "restart_active"     // interrupt the active attempt; a new attempt carries the message
)

// ModeWords are the dispatch modes by their short names: what the CLI's
// --mode takes, and the API's mode besides the long names.
var ModeWords = map[string]DispatchMode{
	"queue":   ModeQueueAfterActive,
	"steer":   ModeSteerActive,
	"restart": ModeRestartActive,
	"now":     ModeStartImmediately,
}

// EffectType names a kind of Effect (effects.go, where each kind says
// what it does): its name in the outbox and in effect.cancelled.
type EffectType string

// Effect types.
const (
	EffectOpenSession   EffectType = "open_session"
	EffectRetireSession EffectType = "retire_session"
	EffectStartTurn     EffectType = "start_turn"
	EffectRespond       EffectType = "respond"
	EffectSteer         EffectType = "steer"
	EffectInterrupt     EffectType = "interrupt"
	EffectEndSession    EffectType = "end_session"
	// EffectCapture, EffectRestoreFiles and EffectReconcileThread are the
	// host's own work (git, and a provider rollback checked against the
	// turn it expects), so a host that stopped with one in its outbox
	// performs it again; see Replayable. So is EffectRunCheck.
	EffectCapture         EffectType = "checkpoint_capture"
	EffectRestoreFiles    EffectType = "rollback_files"
	EffectReconcileThread EffectType = "rollback_provider"
	EffectRunCheck        EffectType = "run_check"
	// EffectCreateWorktree, EffectMergeBranch and EffectRemoveWorktree are
	// git work on a thread's worktree and branch, replayable likewise.
	EffectCreateWorktree EffectType = "worktree_create"
	EffectMergeBranch    EffectType = "branch_merge"
	EffectRemoveWorktree EffectType = "worktree_remove"
)

// Replayable says whether an effect left in the outbox by a host that
// stopped is performed again by the next one. Provider actions bound to a
// process that is gone are not: recovery cancels them.
func (e EffectType) Replayable() bool {
	switch e {
	case EffectCapture, EffectRestoreFiles, EffectReconcileThread, EffectRunCheck,
		EffectCreateWorktree, EffectMergeBranch, EffectRemoveWorktree:
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
