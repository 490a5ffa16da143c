// Package domain is Baton's pure core: the thread model, the commands that
// change it and the events that record each change. Decide turns a command
// into events and effects; Evolve applies an event. Neither does I/O: time
// and ids come in through Env, and effects go out as values for the caller
// to perform. The JSON forms of these types are the projection clients read.
package domain

import (
	"encoding/json"
	"time"
)

// Thread is one user-visible conversation and everything under it.
type Thread struct {
	ID               string            `json:"id"`
	Provider         string            `json:"provider"`
	Cwd              string            `json:"cwd"`
	Model            string            `json:"model,omitempty"`
	ProviderCommand  ProviderCommand   `json:"providerCommand"`
	ApprovalPolicy   ApprovalPolicy    `json:"approvalPolicy"`
	CreatedAt        time.Time         `json:"createdAt"`
	UpdatedAt        time.Time         `json:"updatedAt"`
	Runs             []Run             `json:"runs"`
	Messages         []Message         `json:"messages"`
	TurnItems        []TurnItem        `json:"turnItems"`
	ProviderSessions []ProviderSession `json:"providerSessions"`
	ProviderThreads  []ProviderThread  `json:"providerThreads"`
	ProviderTurns    []ProviderTurn    `json:"providerTurns"`
	Requests         []RuntimeRequest  `json:"requests"`
	Diagnostics      []Diagnostic      `json:"diagnostics,omitempty"`
	// RateLimits is each provider's latest word on each of its limits.
	RateLimits []RateLimit `json:"rateLimits,omitempty"`
	// Ledger is what the thread's runs used, by hour, provider and model
	// (see ledger.go): kept when runs leave the projection.
	Ledger []LedgerRow `json:"ledger,omitempty"`
	// CheckpointScopes and Checkpoints are the worktree's recorded
	// states: a baseline before the first run, one per run, and one per
	// subagent turn nested under its run's.
	CheckpointScopes []CheckpointScope `json:"checkpointScopes"`
	Checkpoints      []Checkpoint      `json:"checkpoints"`
	Rollbacks        []Rollback        `json:"rollbacks,omitempty"`
	Handoffs         []ContextHandoff  `json:"handoffs,omitempty"`
	// ProviderBindings are the providers the thread has used, the current
	// one (Provider) among them: what each keeps of the thread.
	ProviderBindings []ProviderBinding `json:"providerBindings,omitempty"`
	// HandoffMaxBytes bounds a handoff's text (0: DefaultHandoffMaxBytes).
	HandoffMaxBytes int `json:"handoffMaxBytes,omitempty"`
	// Loop is the thread's continuation policy and what its unattended
	// loop has used (nil: none set).
	Loop *Loop `json:"loop,omitempty"`
	// Earlier says what has left the projection: the oldest ended runs
	// and what was theirs, read from the store a page at a time (nil:
	// nothing has; see earlier.go).
	Earlier *Earlier `json:"earlier,omitempty"`
	// Worktree is the thread's own git worktree and branch (nil: it
	// works in the directory it was given).
	Worktree *Worktree `json:"worktree,omitempty"`
	// Merges are the merges of its branch, oldest first.
	Merges []Merge `json:"merges,omitempty"`
	// Archived: the thread is put away and takes no more messages.
	Archived bool `json:"archived,omitempty"`
	// Title is the thread's first user message, shortened (TitleOf): what
	// a list calls it, kept when that message leaves the projection.
	Title string `json:"title,omitempty"`
	// Host is the thread's owner on a log several hosts share: the host
	// that created it, then each it moved to ("": none recorded; see
	// Owner). SharedCwd says its cwd is the same on every host.
	Host      string `json:"host,omitempty"`
	SharedCwd bool   `json:"sharedCwd,omitempty"`
	// HostLost says its owner stopped renewing its lease (nil: it has
	// not, or the thread was claimed since).
	HostLost *HostLost `json:"hostLost,omitempty"`
	// Sequence is the last event applied to this thread.
	Sequence uint64 `json:"sequence"`

	// shared are the collections this value shares with the thread it was
	// copied from (see Scratch).
	shared part
	// archived are the parts that left since this copy was made, for the
	// host to store (TakeArchived); keepAll says nothing leaves (KeepAll).
	archived []Archived
	keepAll  bool
}

// Run is one counted user-visible turn.
type Run struct {
	ID            string     `json:"id"`
	Ordinal       int        `json:"ordinal"`
	Status        RunStatus  `json:"status"`
	MessageID     string     `json:"messageId"`
	Input         string     `json:"input"`
	QueuedAt      time.Time  `json:"queuedAt"`
	StartedAt     *time.Time `json:"startedAt,omitempty"`
	EndedAt       *time.Time `json:"endedAt,omitempty"`
	ActiveAttempt string     `json:"activeAttempt,omitempty"`
	// Provider and Model are what the run started on (the thread's at the
	// time); a switch applies to the runs that start after it.
	Provider string `json:"provider,omitempty"`
	Model    string `json:"model,omitempty"`
	// MCP is the run's own choice of MCP servers (nil: the configured
	// ones).
	MCP *MCPChoice `json:"mcp,omitempty"`
	// Host is the host that ran it, on a log several hosts share ("":
	// one host alone on its log).
	Host         string    `json:"host,omitempty"`
	FinalAttempt string    `json:"finalAttempt,omitempty"`
	Attempts     []Attempt `json:"attempts"`
	Nodes        []Node    `json:"nodes"`
	StopReason   string    `json:"stopReason,omitempty"`
	Failure      *Failure  `json:"failure,omitempty"`
	Usage        *Usage    `json:"usage,omitempty"`
	// InterruptRequested says run.interrupt was sent to the provider; the
	// run ends when the provider's terminal event arrives.
	InterruptRequested bool `json:"interruptRequested,omitempty"`
	// Stop is when the host ends the provider's process if the
	// interrupted turn has not ended, and, once it has, why.
	Stop RunStop `json:"stop,omitzero"`
	// PendingRestart holds steering messages waiting for the active attempt
	// to stop, so that a replacement attempt can carry them.
	PendingRestart []SteeringMessage `json:"pendingRestart,omitempty"`
	// Ending is how the run ends, once its provider turn has ended and
	// its checkpoint is being captured: the run ends when it is recorded.
	Ending *RunOutcome `json:"ending,omitempty"`
	// CheckpointID is the run's root checkpoint.
	CheckpointID string `json:"checkpointId,omitempty"`
	// Commit is the run's commit on the thread's branch (a worktree
	// thread's completed run that changed files).
	Commit string `json:"commit,omitempty"`
	// Limit is the last provider limit the run hit; WaitID the armed wait
	// that will continue it (the run is waiting, its attempt ended);
	// Waits how many waits it has had, the first from WaitSince.
	Limit     *Limit    `json:"limit,omitempty"`
	WaitID    string    `json:"waitId,omitempty"`
	Waits     int       `json:"waits,omitempty"`
	WaitSince time.Time `json:"waitSince,omitzero"`

	// shared says the run's attempts, nodes and pending messages are
	// shared with the thread the run's was copied from (see Scratch).
	shared bool
}

// RunStop is an interrupt's deadline: a provider that has not ended the
// turn by then has its process ended by the host (through its plugin).
type RunStop struct {
	// Deadline is the interrupt's time plus Grace (zero: no deadline, as
	// for a forced interrupt, which needs none).
	Deadline time.Time     `json:"deadline,omitzero"`
	Grace    time.Duration `json:"grace,omitempty"`
	// Forced says why the host ended the provider's process (empty: it
	// has not).
	Forced string `json:"forced,omitempty"`
	// Stalled says the host ended it because the provider went silent
	// mid-turn (TurnStalled): the run fails, where an interrupt's forced
	// stop ends it interrupted.
	Stalled bool `json:"stalled,omitempty"`
}

// RunOutcome is how a run ends.
type RunOutcome struct {
	AttemptID  string    `json:"attemptId,omitempty"`
	Status     RunStatus `json:"status"`
	StopReason string    `json:"stopReason,omitempty"`
	Failure    *Failure  `json:"failure,omitempty"`
}

// SteeringMessage is a user message sent into an active run.
type SteeringMessage struct {
	MessageID string `json:"messageId"`
	Text      string `json:"text"`
}

// Attempt is one try at a run.
type Attempt struct {
	ID        string        `json:"id"`
	Reason    AttemptReason `json:"reason"`
	Status    AttemptStatus `json:"status"`
	SessionID string        `json:"sessionId,omitempty"`
	StartedAt time.Time     `json:"startedAt"`
	EndedAt   *time.Time    `json:"endedAt,omitempty"`
	RootNode  string        `json:"rootNode"`
	// Usage is what the attempt's turn used, as last reported; Ledger is
	// that report as the thread's ledger counts it (see ledger.go).
	Usage  *Usage      `json:"usage,omitempty"`
	Ledger []LedgerRow `json:"ledger,omitempty"`
	// Provider is where the attempt ran, when not the run's (a limit
	// moved the run to another provider).
	Provider string `json:"provider,omitempty"`
}

// Node is one part of a run's execution tree.
type Node struct {
	ID          string     `json:"id"`
	ParentID    string     `json:"parentId,omitempty"`
	AttemptID   string     `json:"attemptId"`
	Kind        NodeKind   `json:"kind"`
	Status      ItemStatus `json:"status"`
	ProviderRef string     `json:"providerRef,omitempty"`
	Title       string     `json:"title,omitempty"`
}

// Message is what the user reads: their input and the assistant's replies.
type Message struct {
	ID     string     `json:"id"`
	RunID  string     `json:"runId"`
	NodeID string     `json:"nodeId,omitempty"`
	Role   Role       `json:"role"`
	Text   Text       `json:"text"`
	Status ItemStatus `json:"status"`
}

// TurnItem is one visible step of a run, in order: reasoning, tool calls,
// commands, file changes, plans.
type TurnItem struct {
	ID     string          `json:"id"`
	RunID  string          `json:"runId"`
	NodeID string          `json:"nodeId"`
	Kind   NodeKind        `json:"kind"`
	Title  string          `json:"title,omitempty"`
	Status ItemStatus      `json:"status"`
	Text   Text            `json:"text,omitzero"`
	Detail json.RawMessage `json:"detail,omitempty"`
}

// ProviderSession is a durable record of one provider session (never a
// process handle).
type ProviderSession struct {
	ID       string `json:"id"`
	Provider string `json:"provider,omitempty"`
	Model    string `json:"model,omitempty"`
	// MCP are the MCP servers it was given.
	MCP []MCPServerRef `json:"mcp,omitempty"`
	// Resumed is the provider thread it resumed ("": it started afresh).
	Resumed     string        `json:"resumed,omitempty"`
	Status      SessionStatus `json:"status"`
	ProviderRef string        `json:"providerRef,omitempty"`
	PluginPid   int           `json:"pluginPid,omitempty"`
	ProviderPid int           `json:"providerPid,omitempty"`
	OpenedAt    time.Time     `json:"openedAt"`
	EndedAt     *time.Time    `json:"endedAt,omitempty"`
	EndReason   string        `json:"endReason,omitempty"`
	// Forced says why the host is ending the session's process by force
	// (a run that did not stop when asked); empty: it is not.
	Forced string `json:"forced,omitempty"`
}

// ProviderThread binds a provider's conversation id to the app.
type ProviderThread struct {
	ID          string `json:"id"`
	Provider    string `json:"provider,omitempty"`
	SessionID   string `json:"sessionId"`
	ProviderRef string `json:"providerRef"`
	ParentID    string `json:"parentId,omitempty"`
	// Detached says a rollback left this conversation behind: it is
	// never resumed, and the next run starts a fresh one.
	Detached bool `json:"detached,omitempty"`
}

// ProviderTurn binds a provider's turn id to a run attempt.
type ProviderTurn struct {
	ID               string     `json:"id"`
	ProviderThreadID string     `json:"providerThreadId"`
	ProviderRef      string     `json:"providerRef"`
	RunID            string     `json:"runId"`
	AttemptID        string     `json:"attemptId"`
	NodeID           string     `json:"nodeId"`
	Status           ItemStatus `json:"status"`
}

// RuntimeRequest is an approval or question from the provider.
type RuntimeRequest struct {
	ID          string          `json:"id"`
	RunID       string          `json:"runId,omitempty"`
	NodeID      string          `json:"nodeId,omitempty"`
	SessionID   string          `json:"sessionId"`
	ProviderRef string          `json:"providerRef"`
	Kind        RequestKind     `json:"kind"`
	Title       string          `json:"title,omitempty"`
	Options     []RequestOption `json:"options,omitempty"`
	Status      RequestStatus   `json:"status"`
	Decision    RequestDecision `json:"decision,omitempty"`
	// Answers are the answers to a question, when it was answered.
	Answers map[string]string `json:"answers,omitempty"`
	// AnsweredBy is "policy", "client" or "timeout" once an answer was
	// sent.
	AnsweredBy Answerer `json:"answeredBy,omitempty"`
	// AnswerFailures counts answers that did not reach the provider.
	AnswerFailures int `json:"answerFailures,omitempty"`
	// Delivery is "live" while the provider can still receive an answer,
	// "not_resumable" after its process is gone.
	Delivery Delivery `json:"delivery"`
	// OpenedAt is when the provider asked: the host's request timeout
	// counts from it.
	OpenedAt time.Time `json:"openedAt,omitzero"`
}

// Diagnostic is something a provider said that the model has no place for.
type Diagnostic struct {
	RunID string `json:"runId,omitempty"`
	Title string `json:"title"`
	Text  string `json:"text,omitempty"`
}

// Capabilities is what the domain needs to know about a thread's
// provider to choose a dispatch mode.
type Capabilities struct {
	NativeSteering bool
	// NativeRollback: the plugin can drop a conversation's last turns.
	NativeRollback bool
}

// CheckpointScope is what a checkpoint belongs to: a run, or a subagent
// turn within one.
type CheckpointScope struct {
	ID       string    `json:"id"`
	Kind     ScopeKind `json:"kind"`
	RunID    string    `json:"runId,omitempty"`
	NodeID   string    `json:"nodeId,omitempty"`
	ParentID string    `json:"parentId,omitempty"`
	// Ordinal is the run's ordinal for a root_run scope (0 for the
	// baseline), the subagent's number within its run for a subagent one.
	Ordinal          int  `json:"ordinal"`
	AdvancesRunCount bool `json:"advancesRunCount"`
}

// Checkpoint is the worktree as it was at one point, kept as a git commit
// under a hidden ref.
type Checkpoint struct {
	ID         string `json:"id"`
	ScopeID    string `json:"scopeId"`
	RunID      string `json:"runId,omitempty"`
	NodeID     string `json:"nodeId,omitempty"`
	RunOrdinal int    `json:"runOrdinal"`
	// BaseID is the checkpoint its file summary is against.
	BaseID string           `json:"baseId,omitempty"`
	Ref    string           `json:"ref"`
	Commit string           `json:"commit,omitempty"`
	Status CheckpointStatus `json:"status"`
	Files  []FileChange     `json:"files,omitempty"`
	Reason string           `json:"reason,omitempty"`
	// BranchHead, for a worktree thread's ready checkpoint, is its
	// branch's commit when it was captured: where a rollback to it moves
	// the branch.
	BranchHead  string     `json:"branchHead,omitempty"`
	RequestedAt time.Time  `json:"requestedAt"`
	CapturedAt  *time.Time `json:"capturedAt,omitempty"`
}

// FileChange is one file a checkpoint changed against its base.
type FileChange struct {
	Path      string `json:"path"`
	Kind      string `json:"kind"` // added, modified, deleted, type_changed
	Additions int    `json:"additions"`
	Deletions int    `json:"deletions"`
	Binary    bool   `json:"binary,omitempty"`
}

// Rollback puts the files back to a checkpoint and the provider's
// conversation back to the same point.
type Rollback struct {
	ID               string         `json:"id"`
	CheckpointID     string         `json:"checkpointId"`
	TargetRunOrdinal int            `json:"targetRunOrdinal"`
	Status           RollbackStatus `json:"status"`
	// Runs are the runs it rolls back; Checkpoints the ones it makes stale.
	Runs         []string `json:"runs"`
	Checkpoints  []string `json:"checkpoints"`
	FilesWritten int      `json:"filesWritten,omitempty"`
	FilesRemoved int      `json:"filesRemoved,omitempty"`
	// SavedRef holds the files as they were before the rollback (commit
	// SavedCommit): `git checkout SavedCommit -- .` undoes it by hand.
	SavedRef    string `json:"savedRef,omitempty"`
	SavedCommit string `json:"savedCommit,omitempty"`
	// Reconciliation is how the provider was brought back (see the
	// Reconcile constants), with what it dropped and any note.
	Reconciliation    Reconciliation `json:"reconciliation,omitempty"`
	ProviderThreadRef string         `json:"providerThreadRef,omitempty"`
	TurnsDropped      int            `json:"turnsDropped,omitempty"`
	Note              string         `json:"note,omitempty"`
	FailedStage       string         `json:"failedStage,omitempty"`
	Failure           *Failure       `json:"failure,omitempty"`
	RequestedAt       time.Time      `json:"requestedAt"`
	EndedAt           *time.Time     `json:"endedAt,omitempty"`
}

// InProgress says whether a rollback is still restoring files or
// reconciling the provider.
func (rb Rollback) InProgress() bool {
	return rb.Status == RollbackRestoringFiles || rb.Status == RollbackReconciling
}

// RollingBack says whether the thread's latest rollback is in progress.
func (t *Thread) RollingBack() bool {
	n := len(t.Rollbacks)
	return n > 0 && t.Rollbacks[n-1].InProgress()
}

// ContextHandoff is the portable context a provider's conversation gets
// of runs it has not seen: what they asked, answered, ran and changed.
type ContextHandoff struct {
	ID         string          `json:"id"`
	RollbackID string          `json:"rollbackId,omitempty"`
	Strategy   HandoffStrategy `json:"strategy"`
	// Version is the version of the text's format (HandoffVersion when it
	// was made).
	Version int `json:"version,omitempty"`
	// FromProvider is the provider of the newest run it covers; ToProvider
	// the provider whose conversation it is for.
	FromProvider string `json:"fromProvider,omitempty"`
	ToProvider   string `json:"toProvider,omitempty"`
	// FromRun and ToRun are the first and last ordinals it covers; Runs
	// each covered run.
	FromRun int          `json:"fromRun"`
	ToRun   int          `json:"toRun"`
	Runs    []HandoffRun `json:"runs,omitempty"`
	// Bytes is the text's length; Truncated says runs were shortened to
	// fit HandoffMaxBytes, and Cut says which and how.
	Bytes     int    `json:"bytes,omitempty"`
	Truncated bool   `json:"truncated,omitempty"`
	Cut       string `json:"cut,omitempty"`
	// Fallback says why a provider that had seen the thread gets a full
	// summary in a fresh conversation instead of a delta (its resume
	// failed, or it cannot resume).
	Fallback string        `json:"fallback,omitempty"`
	Status   HandoffStatus `json:"status"`
	// SupersededBy says what replaced a superseded handoff.
	SupersededBy string `json:"supersededBy,omitempty"`
	// RunID is the run whose first turn carried it.
	RunID string `json:"runId,omitempty"`
	Text  string `json:"text"`
}

// HandoffRun is one run a handoff covers.
type HandoffRun struct {
	Ordinal    int      `json:"ordinal"`
	RunID      string   `json:"runId"`
	Provider   string   `json:"provider,omitempty"`
	MessageIDs []string `json:"messageIds,omitempty"`
	// Shortened says the run's part of the text was cut to fit.
	Shortened bool `json:"shortened,omitempty"`
}

// ProviderBinding is what a thread keeps of one provider it has used: the
// process to run, and its own conversation of the thread, which a return
// to the provider resumes.
type ProviderBinding struct {
	Provider string          `json:"provider"`
	Model    string          `json:"model,omitempty"`
	Command  ProviderCommand `json:"command"`
	// SessionID is the provider's latest session on the thread.
	SessionID string `json:"sessionId,omitempty"`
	// ProviderThreadID and ThreadRef are its root conversation, the one a
	// return resumes: empty when it has none (never started, or left behind
	// by a rollback or a resume that failed).
	ProviderThreadID string `json:"providerThreadId,omitempty"`
	ThreadRef        string `json:"threadRef,omitempty"`
	// SeenThrough is the ordinal of the last run that conversation has
	// seen: run on it, or carried to it by a handoff (0: none).
	SeenThrough int `json:"seenThrough,omitempty"`
	// Runs are the ordinals of the runs that ran on the provider and are
	// in the projection; RunsBefore counts those that have left it.
	Runs       []int `json:"runs,omitempty"`
	RunsBefore int   `json:"runsBefore,omitempty"`
}
