package domain

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/baton-run/baton/sdk"
)

// Command is a request to change a thread. Every command carries an id; a
// command seen before returns its original receipt.
type Command struct {
	ID       string
	ThreadID string
	Payload  CommandPayload
}

// CommandPayload is the body of a command.
type CommandPayload interface{ CommandType() string }

// Client commands.
type (
	// CreateThread starts a conversation.
	CreateThread struct {
		Provider        string          `json:"provider"`
		Cwd             string          `json:"cwd"`
		Model           string          `json:"model,omitempty"`
		ProviderCommand ProviderCommand `json:"providerCommand"`
		// ApprovalPolicy is how the provider's requests are answered:
		// "decline" (the default), "accept" or "ask".
		ApprovalPolicy ApprovalPolicy `json:"approvalPolicy,omitempty"`
		// Worktree, when set, puts the thread on a git worktree of its own,
		// on a new branch, of the repository Cwd is in.
		Worktree *WorktreeSpec `json:"worktree,omitempty"`
		// SharedCwd says the thread's cwd is the same directory on every
		// host (a network file system): another host can take the thread
		// over when its own is lost.
		SharedCwd bool `json:"sharedCwd,omitempty"`
	}
	// DispatchMessage sends a user message. Mode says what happens when a
	// run is active (see the Mode constants); empty chooses by the
	// provider's capabilities: steer when it steers natively, else
	// restart the active attempt; an idle thread starts a run at once.
	DispatchMessage struct {
		MessageID string       `json:"messageId,omitempty"`
		Text      string       `json:"text"`
		Mode      DispatchMode `json:"mode,omitempty"`
		// TargetRunID, for steer_active and restart_active, is the run the
		// client means; the command is refused when it is not the active
		// one.
		TargetRunID string `json:"targetRunId,omitempty"`
		// MCP chooses the MCP servers of the run the message starts (nil:
		// those configured for every thread and for this one).
		MCP *MCPChoice `json:"mcp,omitempty"`
	}
	// InterruptRun asks the provider to stop a run's turn. The run ends
	// when the provider says the turn ended; if it has not within the
	// host's grace (Env.InterruptGrace), the host ends the provider's
	// process and the run ends interrupted, saying it was forced. Force
	// does that at once. A queued run is cancelled (as CancelQueued
	// would).
	InterruptRun struct {
		RunID string `json:"runId"`
		Force bool   `json:"force,omitempty"`
	}
	// RespondToRequest answers a provider's approval or question.
	RespondToRequest struct {
		RequestID string            `json:"requestId"`
		Decision  RequestDecision   `json:"decision"`
		Answers   map[string]string `json:"answers,omitempty"`
	}
	// SwitchProvider changes the provider (or model) the thread's next
	// runs start on; a run already going goes on where it is. Switching to
	// a provider the thread has used resumes that provider's conversation;
	// the first run on the new provider carries a handoff of the runs it
	// has not seen. ProviderCommand may be left empty for a provider the
	// thread has used (its command is kept). HandoffMaxBytes, when set,
	// bounds the thread's handoffs from now on.
	SwitchProvider struct {
		Provider        string          `json:"provider"`
		Model           string          `json:"model,omitempty"`
		ProviderCommand ProviderCommand `json:"providerCommand,omitzero"`
		HandoffMaxBytes int             `json:"handoffMaxBytes,omitempty"`
	}
	// RollbackToCheckpoint puts the worktree back to a run's checkpoint
	// and the provider's conversation back to the end of that run. The
	// checkpoint is named by id, or by its scope (the scope's checkpoint);
	// when both are given they must agree.
	RollbackToCheckpoint struct {
		ScopeID      string `json:"scopeId,omitempty"`
		CheckpointID string `json:"checkpointId,omitempty"`
	}
	// CancelQueued cancels queued runs, which have sent nothing to the
	// provider: the ones RunIDs names (each must still be queued), or
	// every one when it names none (a thread with none changes nothing).
	// Each ends cancelled with Reason (default StopCancelledQueued).
	CancelQueued struct {
		RunIDs []string `json:"runIds,omitempty"`
		Reason string   `json:"reason,omitempty"`
	}
	// SetPolicy sets the thread's continuation policy (a zero one turns it
	// off). Its budgets count from now; a wait already armed is kept and
	// follows the new policy when it fires.
	SetPolicy struct {
		Policy ContinuationPolicy `json:"policy"`
	}
)

// Internal commands: the host's own observations, decided like any other
// command so that nothing reaches the log from the side.
type (
	// IngestProviderEvent is one normalized event from a provider session.
	IngestProviderEvent struct {
		SessionID string           `json:"sessionId"`
		Event     sdk.RuntimeEvent `json:"event"`
	}
	// RecordSessionOpened says a provider session is open.
	RecordSessionOpened struct {
		SessionID   string `json:"sessionId"`
		Provider    string `json:"provider,omitempty"`
		Model       string `json:"model,omitempty"`
		ProviderRef string `json:"providerRef,omitempty"`
		ThreadRef   string `json:"threadRef,omitempty"`
		PluginPid   int    `json:"pluginPid,omitempty"`
		ProviderPid int    `json:"providerPid,omitempty"`
		// ResumeRequested is the provider thread the host asked to resume;
		// Resumed says whether the provider did.
		ResumeRequested string `json:"resumeRequested,omitempty"`
		Resumed         bool   `json:"resumed,omitempty"`
		// MCP are the MCP servers the host passed to the session.
		MCP []MCPServerRef `json:"mcp,omitempty"`
	}
	// FailRun ends a run that could not be started or continued.
	FailRun struct {
		RunID   string  `json:"runId"`
		Failure Failure `json:"failure"`
	}
	// Recover reconciles a thread after a host start: sessions that were
	// open belong to processes that are gone, and so do the provider
	// actions still in the outbox.
	Recover struct {
		Reason  string          `json:"reason"`
		Effects []PendingEffect `json:"effects,omitempty"`
		// HostLost says the last host to write the log was another one,
		// whose lease this host took over when it stopped renewing it (it
		// died, or lost the servers): a run in flight fails host_lost,
		// not host_restarted.
		HostLost bool `json:"hostLost,omitempty"`
		// After is the log's last sequence when the host looked (its id's;
		// not in its content).
		After uint64 `json:"-"`
	}
	// SteerFailed says the provider refused a steering message (the turn
	// had ended, say); the message becomes a queued run of its own.
	SteerFailed struct {
		RunID     string `json:"runId"`
		MessageID string `json:"messageId"`
		Reason    string `json:"reason"`
	}
	// RecordTurnDispatched says the provider took an attempt's turn
	// (StartTurn returned) in a session, before the turn's own events.
	RecordTurnDispatched struct {
		RunID     string `json:"runId"`
		AttemptID string `json:"attemptId"`
		SessionID string `json:"sessionId"`
	}
	// RespondFailed says an answer did not reach the provider, for a
	// reason other than the provider being gone: it can be answered again.
	RespondFailed struct {
		RequestID string `json:"requestId"`
		Reason    string `json:"reason"`
	}
	// MarkRequestUnreachable says a pending request's provider process is
	// gone, found when a client tried to answer it.
	MarkRequestUnreachable struct {
		RequestID string `json:"requestId"`
		Reason    string `json:"reason"`
	}
	// StartQueued starts the thread's oldest queued run when nothing holds
	// it: a host that opened sends it after its recovery, so that runs a
	// restart left queued go on with no new message. When it starts one,
	// QueuedRunsResumed says so first, naming every queued run.
	StartQueued struct {
		// After is the log's last sequence when the host looked (its id's;
		// not in its content).
		After uint64 `json:"-"`
	}
	// CloseIdleSession ends a provider session that nothing uses: no run
	// active or queued, no request pending, no rollback in progress. The
	// host closes the session's process once it is recorded.
	CloseIdleSession struct {
		SessionID string `json:"sessionId"`
	}
	// FireWait says an armed wait's instant has passed (the host's timer);
	// a wait no longer armed is left alone. Its command id derives from
	// the wait's id, so a wait fires once whatever restarts between.
	FireWait struct {
		WaitID string `json:"waitId"`
	}
	// ForceStop says an interrupted run's grace has passed (the host's
	// timer, at Run.Stop.Deadline): if the attempt's turn still has not
	// ended, the host ends its provider's process. An attempt no longer
	// active, or a run that ended meanwhile, is left alone.
	ForceStop struct {
		RunID     string `json:"runId"`
		AttemptID string `json:"attemptId"`
	}
	// StallTurn says the thread's active run has had no word from its
	// provider since Since for Timeout, the host's stall timeout (the
	// host's timer, at Thread.StallDeadline): if nothing of the thread was
	// recorded since, and the provider is not waiting for an answer, the
	// host ends its provider's process and the run fails
	// (FailureStalled). Otherwise it is left alone.
	StallTurn struct {
		RunID     string        `json:"runId"`
		AttemptID string        `json:"attemptId"`
		Since     time.Time     `json:"since"`
		Timeout   time.Duration `json:"timeout"`
	}
	// ExpireRequest says a request has waited for an answer for the
	// host's request timeout (the host's timer, at
	// Thread.RequestDeadline): if it still waits, the timeout answers it,
	// an approval declined and anything else cancelled. Failures is how
	// many answers to it had failed to reach the provider when the timer
	// was armed (each gives the timeout another go).
	ExpireRequest struct {
		RequestID string `json:"requestId"`
		Failures  int    `json:"failures,omitempty"`
	}
	// RecordCheck is what a loop's --until check found.
	RecordCheck struct {
		CheckResult
	}
	// RestartTurn says a turn could not start in the thread's live
	// session because the session had ended (StartTurn's outcome): the
	// turn starts again in a new session.
	RestartTurn struct {
		RunID     string `json:"runId"`
		AttemptID string `json:"attemptId"`
		Text      string `json:"text,omitempty"`
		// Reason is why the session could not take it.
		Reason string `json:"reason"`
	}
	// ShutDown ends the thread's active run as the host shuts down, when
	// its provider did not end it in time: a run whose turn had ended ends
	// as it would have, one in flight is interrupted with the reason.
	ShutDown struct {
		Reason string `json:"reason"`
		// After is the thread's sequence when the host looked (its id's;
		// not in its content).
		After uint64 `json:"-"`
	}
	// HostStopping says the host is stopping while a run's attempt has a
	// live provider turn: the turn is asked to stop (as InterruptRun
	// would), so that its own terminal ends it, checkpoint and all.
	HostStopping struct {
		RunID     string `json:"runId"`
		AttemptID string `json:"attemptId"`
	}
	// ProviderExited says a session's event stream ended with no word of
	// its end from the plugin (the plugin is gone): the session ends as if
	// its provider had exited with Message, and its run fails.
	ProviderExited struct {
		SessionID string `json:"sessionId"`
		Message   string `json:"message"`
	}
	// RecordCheckpoint is what a capture found.
	RecordCheckpoint struct {
		CheckpointID string           `json:"checkpointId"`
		Status       CheckpointStatus `json:"status"`
		Commit       string           `json:"commit,omitempty"`
		Files        []FileChange     `json:"files,omitempty"`
		Reason       string           `json:"reason,omitempty"`
		BranchCommit string           `json:"branchCommit,omitempty"`
		BranchError  string           `json:"branchError,omitempty"`
	}
	// RecordFilesRestored says a rollback's files were restored, or how
	// restoring them failed.
	RecordFilesRestored struct {
		RollbackID string   `json:"rollbackId"`
		Written    int      `json:"written"`
		Removed    int      `json:"removed"`
		Failure    *Failure `json:"failure,omitempty"`
		// SavedRef and SavedCommit keep the files as they were before.
		SavedRef    string `json:"savedRef,omitempty"`
		SavedCommit string `json:"savedCommit,omitempty"`
		// BranchHead is the commit the thread's branch was moved back to.
		BranchHead string `json:"branchHead,omitempty"`
		// Replayed: a host that restarted restored them.
		Replayed bool `json:"replayed,omitempty"`
	}
	// RecordProviderReconciled says how a rollback brought the provider's
	// conversation back (a Reconcile constant).
	RecordProviderReconciled struct {
		RollbackID        string         `json:"rollbackId"`
		Reconciliation    Reconciliation `json:"reconciliation"`
		ProviderThreadRef string         `json:"providerThreadRef,omitempty"`
		TurnsDropped      int            `json:"turnsDropped,omitempty"`
		Note              string         `json:"note,omitempty"`
		// Replayed: a host that restarted finished the rollback; queued
		// runs wait for the thread's next message.
		Replayed bool `json:"replayed,omitempty"`
	}
)

// PendingEffect names an effect left in the outbox.
type PendingEffect struct {
	ID        string     `json:"id"`
	Type      EffectType `json:"type"`
	RunID     string     `json:"runId,omitempty"`
	MessageID string     `json:"messageId,omitempty"`
}

func (CreateThread) CommandType() string         { return "thread.create" }
func (DispatchMessage) CommandType() string      { return "message.dispatch" }
func (IngestProviderEvent) CommandType() string  { return "provider.event" }
func (RecordSessionOpened) CommandType() string  { return "provider.session.opened" }
func (FailRun) CommandType() string              { return "run.fail" }
func (Recover) CommandType() string              { return "thread.recover" }
func (InterruptRun) CommandType() string         { return "run.interrupt" }
func (RespondToRequest) CommandType() string     { return "runtime-request.respond" }
func (SteerFailed) CommandType() string          { return "run.steer.failed" }
func (RecordTurnDispatched) CommandType() string { return "run.turn.dispatched" }
func (RespondFailed) CommandType() string        { return "runtime-request.respond.failed" }
func (MarkRequestUnreachable) CommandType() string {
	return "runtime-request.unreachable"
}
func (StartQueued) CommandType() string              { return "thread.queue.start" }
func (CloseIdleSession) CommandType() string         { return "provider.session.close" }
func (ShutDown) CommandType() string                 { return "thread.shutdown" }
func (HostStopping) CommandType() string             { return "run.host_stopping" }
func (ProviderExited) CommandType() string           { return "provider.exited" }
func (SwitchProvider) CommandType() string           { return "thread.switch_provider" }
func (RestartTurn) CommandType() string              { return "provider.turn.restart" }
func (SetPolicy) CommandType() string                { return "thread.set_policy" }
func (CancelQueued) CommandType() string             { return "thread.queue.cancel" }
func (FireWait) CommandType() string                 { return "wait.fire" }
func (ForceStop) CommandType() string                { return "run.force_stop" }
func (StallTurn) CommandType() string                { return "run.stall" }
func (ExpireRequest) CommandType() string            { return "runtime-request.expire" }
func (RecordCheck) CommandType() string              { return "loop.check.record" }
func (RollbackToCheckpoint) CommandType() string     { return "checkpoint.rollback" }
func (RecordCheckpoint) CommandType() string         { return "checkpoint.record" }
func (RecordFilesRestored) CommandType() string      { return "rollback.files.record" }
func (RecordProviderReconciled) CommandType() string { return "rollback.provider.record" }

// Receipt is what a command returns, and what a duplicate returns again.
type Receipt struct {
	CommandID string `json:"commandId"`
	Type      string `json:"type"`
	ThreadID  string `json:"threadId"`
	// Sequence is the log sequence after the command's events (the last
	// of them, or the log's head when the command changed nothing).
	Sequence    uint64    `json:"sequence"`
	PayloadHash string    `json:"payloadHash"`
	At          time.Time `json:"at"`
}

// Errors Decide returns. Callers test them with errors.Is.
var (
	ErrInvalid  = errors.New("invalid command")
	ErrNotFound = errors.New("not found")
	ErrConflict = errors.New("conflict")
	// ErrExists: an id the command names for something new is taken (a
	// thread id, a message id, a command id used for another command).
	// It always comes with ErrConflict, so errors.Is(err, ErrConflict)
	// holds for it too.
	ErrExists = errors.New("already exists")
	// ErrNoProviderCommand: a switch to a provider the thread has not used
	// gives no command to run it. It always comes with ErrInvalid.
	ErrNoProviderCommand = errors.New("no provider command")
	// ErrUnsupported: the thread's provider cannot do what was asked.
	ErrUnsupported = errors.New("unsupported by the provider")
)

// Decide returns sdk.ErrNotResumable too (see NotResumable): a request's
// provider process is gone, so no answer can reach it. It is the error a
// plugin returns for an answer to a session that is gone: one meaning, one
// error, whichever side finds it.

// Hash is the fingerprint of a command's content, to tell a true duplicate
// from a command id reused with other content.
func Hash(c Command) string {
	body, _ := json.Marshal(struct {
		Type     string         `json:"type"`
		ThreadID string         `json:"threadId"`
		Payload  CommandPayload `json:"payload"`
	}{c.Payload.CommandType(), c.ThreadID, c.Payload})
	sum := sha256.Sum256(body)
	return hex.EncodeToString(sum[:])
}

// wireCommand is a command's JSON form as clients send it.
type wireCommand struct {
	Type      string          `json:"type"`
	CommandID string          `json:"commandId"`
	ThreadID  string          `json:"threadId,omitempty"`
	Payload   json.RawMessage `json:"payload"`
}

// clientCommands are the commands a client may send.
var clientCommands = map[string]func(json.RawMessage) (CommandPayload, error){
	CreateThread{}.CommandType():         decodeCmd[CreateThread],
	DispatchMessage{}.CommandType():      decodeCmd[DispatchMessage],
	InterruptRun{}.CommandType():         decodeCmd[InterruptRun],
	RespondToRequest{}.CommandType():     decodeCmd[RespondToRequest],
	RollbackToCheckpoint{}.CommandType(): decodeCmd[RollbackToCheckpoint],
	SwitchProvider{}.CommandType():       decodeCmd[SwitchProvider],
	SetPolicy{}.CommandType():            decodeCmd[SetPolicy],
	CancelQueued{}.CommandType():         decodeCmd[CancelQueued],
}

func decodeCmd[T CommandPayload](b json.RawMessage) (CommandPayload, error) {
	var v T
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return v, nil
}

// DecodeCommand reads a client command:
//
//	{"type":"message.dispatch","commandId":"c1","threadId":"t1","payload":{"text":"hi"}}
//
// Errors name what is wrong.
func DecodeCommand(b []byte) (Command, error) {
	var w wireCommand
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&w); err != nil {
		return Command{}, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if w.CommandID == "" {
		return Command{}, fmt.Errorf("%w: no commandId", ErrInvalid)
	}
	f, ok := clientCommands[w.Type]
	if !ok {
		return Command{}, fmt.Errorf("%w: unknown command type %q", ErrInvalid, w.Type)
	}
	if len(w.Payload) == 0 {
		w.Payload = json.RawMessage("{}")
	}
	p, err := f(w.Payload)
	if err != nil {
		return Command{}, fmt.Errorf("%w: %s payload: %v", ErrInvalid, w.Type, err)
	}
	return Command{ID: w.CommandID, ThreadID: w.ThreadID, Payload: p}, nil
}
