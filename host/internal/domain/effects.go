package domain

import (
	"encoding/json"
	"fmt"
	"time"
)

// Effects. An effect is work for the host to do after a command's events
// are stored; it is stored in the outbox in the same batch as those
// events. Each kind is a type of its own holding only what its work
// needs, and the set is closed (Effect has an unexported method), so a
// switch over the kinds is checked against this file.
//
// The stored form is a JSON object: "type", its EffectType, then the
// kind's fields. It is the form the one struct of every field had before
// the kinds had types, byte for byte (the fields in that struct's order):
// an effect stored by an older host decodes (DecodeEffect) to its kind,
// the fields of other kinds it never set left out.

// Effect is one effect: OpenSession, RetireSession, StartTurn, Respond,
// Steer, Interrupt, EndSession, CaptureCheckpoint, RestoreFiles,
// ReconcileThread or RunCheck.
type Effect interface {
	// EffectType is the kind's name in the outbox and in the events that
	// name an effect (effect.cancelled).
	EffectType() EffectType
	// Head is the effect's outbox key and thread.
	Head() EffectHead
	// stored is the effect under its outbox key, in its thread.
	stored(threadID, id string) Effect
}

// EffectHead is what every effect carries.
type EffectHead struct {
	// ID is the effect's outbox key, given by the store.
	ID       string `json:"id,omitempty"`
	ThreadID string `json:"threadId"`
}

// Head is the effect's outbox key and thread.
func (h EffectHead) Head() EffectHead { return h }

type (
	// OpenSession opens a provider session (SessionID, chosen here) for a
	// run's attempt: the plugin of Provider runs Command on Model in the
	// thread's cwd, resuming the provider's own conversation Resume where
	// the plugin can resume one (ResumeRef). The host records it opened
	// (RecordSessionOpened), and starts ingesting its events.
	OpenSession struct {
		EffectHead
		RunID     string          `json:"runId,omitempty"`
		AttemptID string          `json:"attemptId,omitempty"`
		SessionID string          `json:"sessionId"`
		Provider  string          `json:"provider"`
		Model     string          `json:"model,omitempty"`
		Command   ProviderCommand `json:"command,omitzero"`
		Resume    string          `json:"resume,omitempty"`
		// MCP are the MCP servers the session is to have, by name: the host
		// passes them on as it has them configured.
		MCP []MCPServerRef `json:"mcp,omitempty"`
	}
	// RetireSession closes the process of a session the thread no longer
	// uses (its end is recorded with the decision that retired it, saying
	// why): the host asks its plugin to close it and waits for its last
	// events.
	RetireSession struct {
		EffectHead
		SessionID string `json:"sessionId"`
	}
	// StartTurn sends a run's attempt to the provider, as one turn in the
	// session SessionID (opened by the OpenSession before it, unless
	// Reused: the thread's live session takes it). A turn the session
	// could not take because it had ended (its provider exited after the
	// last run, or as the turn started) is started again in a new session
	// (RestartTurn), once: that start is Restarted.
	StartTurn struct {
		EffectHead
		RunID     string `json:"runId"`
		AttemptID string `json:"attemptId"`
		Text      string `json:"text,omitempty"`
		SessionID string `json:"sessionId,omitempty"`
		Reused    bool   `json:"reused,omitempty"`
		Restarted bool   `json:"restarted,omitempty"`
	}
	// Respond answers a provider's request (RequestRef, the provider's
	// id of it) through the session that asked.
	Respond struct {
		EffectHead
		RunID      string            `json:"runId,omitempty"`
		SessionID  string            `json:"sessionId,omitempty"`
		RequestRef string            `json:"requestRef,omitempty"`
		Decision   RequestDecision   `json:"decision,omitempty"`
		Answers    map[string]string `json:"answers,omitempty"`
	}
	// Steer adds a message to the provider's active turn.
	Steer struct {
		EffectHead
		RunID     string `json:"runId"`
		AttemptID string `json:"attemptId"`
		MessageID string `json:"messageId"`
		Text      string `json:"text,omitempty"`
		SessionID string `json:"sessionId,omitempty"`
		TurnRef   string `json:"turnRef,omitempty"`
	}
	// Interrupt asks the provider to stop a turn. One decided before the
	// turn started names no session or turn: the thread's session is the
	// one (the start went first).
	Interrupt struct {
		EffectHead
		RunID     string `json:"runId,omitempty"`
		AttemptID string `json:"attemptId,omitempty"`
		SessionID string `json:"sessionId,omitempty"`
		TurnRef   string `json:"turnRef,omitempty"`
	}
	// EndSession ends a provider session by force (SessionID; empty: the
	// thread's current one): the provider did not stop a turn when asked,
	// so its process is ended (SIGTERM, then SIGKILL), through its
	// plugin. The host performs it at once, not behind the thread's other
	// effects: an interrupt the provider does not answer must not hold it.
	EndSession struct {
		EffectHead
		RunID     string `json:"runId,omitempty"`
		AttemptID string `json:"attemptId,omitempty"`
		SessionID string `json:"sessionId,omitempty"`
	}
	// CaptureCheckpoint records the worktree in a checkpoint under Ref,
	// its files summarized against BaseID's ("": the first).
	CaptureCheckpoint struct {
		EffectHead
		RunID        string `json:"runId,omitempty"`
		CheckpointID string `json:"checkpointId"`
		Ref          string `json:"ref"`
		BaseID       string `json:"baseId,omitempty"`
		// Commit, for a worktree thread's completed run, also commits the
		// checkpoint's tree on the thread's branch.
		Commit *BranchCommit `json:"commit,omitempty"`
	}
	// RestoreFiles is a rollback's first stage: the worktree is kept as it
	// is under Ref, then put back to Commit, the checkpoint's.
	RestoreFiles struct {
		EffectHead
		CheckpointID string `json:"checkpointId,omitempty"`
		Ref          string `json:"ref,omitempty"`
		Commit       string `json:"commit,omitempty"`
		RollbackID   string `json:"rollbackId"`
		// Branch, for a worktree thread, moves its branch back too.
		Branch *BranchMove `json:"branch,omitempty"`
		// Replayed: a host that restarted performs it again (not stored).
		Replayed bool `json:"-"`
	}
	// ReconcileThread is a rollback's second stage: the provider's
	// conversation ThreadRef drops its last Turns turns (TurnRef is the
	// oldest of them), in the session SessionID ("": its plugin cannot
	// drop turns), and the refs of stale checkpoints go.
	ReconcileThread struct {
		EffectHead
		SessionID  string   `json:"sessionId,omitempty"`
		TurnRef    string   `json:"turnRef,omitempty"`
		RollbackID string   `json:"rollbackId"`
		ThreadRef  string   `json:"threadRef,omitempty"`
		Turns      int      `json:"turns,omitempty"`
		Refs       []string `json:"refs,omitempty"`
		// Hold: it follows a stage a host that restarted performed again;
		// when the rollback is done, queued runs wait for the thread's
		// next message. Replayed: it is performed again itself (not
		// stored).
		Hold     bool `json:"hold,omitempty"`
		Replayed bool `json:"-"`
	}
	// RunCheck runs a loop's --until check (Command) in the thread's cwd,
	// bounded by Timeout.
	RunCheck struct {
		EffectHead
		RunID   string        `json:"runId,omitempty"`
		Command string        `json:"text"`
		Timeout time.Duration `json:"timeout,omitempty"`
	}
)

func (OpenSession) EffectType() EffectType       { return EffectOpenSession }
func (RetireSession) EffectType() EffectType     { return EffectRetireSession }
func (StartTurn) EffectType() EffectType         { return EffectStartTurn }
func (Respond) EffectType() EffectType           { return EffectRespond }
func (Steer) EffectType() EffectType             { return EffectSteer }
func (Interrupt) EffectType() EffectType         { return EffectInterrupt }
func (EndSession) EffectType() EffectType        { return EffectEndSession }
func (CaptureCheckpoint) EffectType() EffectType { return EffectCapture }
func (RestoreFiles) EffectType() EffectType      { return EffectRestoreFiles }
func (ReconcileThread) EffectType() EffectType   { return EffectReconcileThread }
func (RunCheck) EffectType() EffectType          { return EffectRunCheck }
func (CreateWorktree) EffectType() EffectType    { return EffectCreateWorktree }
func (MergeBranch) EffectType() EffectType       { return EffectMergeBranch }
func (RemoveWorktree) EffectType() EffectType    { return EffectRemoveWorktree }

func (e OpenSession) stored(threadID, id string) Effect {
	e.ThreadID, e.ID = threadID, id
	return e
}
func (e RetireSession) stored(threadID, id string) Effect {
	e.ThreadID, e.ID = threadID, id
	return e
}
func (e StartTurn) stored(threadID, id string) Effect  { e.ThreadID, e.ID = threadID, id; return e }
func (e Respond) stored(threadID, id string) Effect    { e.ThreadID, e.ID = threadID, id; return e }
func (e Steer) stored(threadID, id string) Effect      { e.ThreadID, e.ID = threadID, id; return e }
func (e Interrupt) stored(threadID, id string) Effect  { e.ThreadID, e.ID = threadID, id; return e }
func (e EndSession) stored(threadID, id string) Effect { e.ThreadID, e.ID = threadID, id; return e }
func (e CaptureCheckpoint) stored(threadID, id string) Effect {
	e.ThreadID, e.ID = threadID, id
	return e
}
func (e RestoreFiles) stored(threadID, id string) Effect { e.ThreadID, e.ID = threadID, id; return e }
func (e ReconcileThread) stored(threadID, id string) Effect {
	e.ThreadID, e.ID = threadID, id
	return e
}
func (e RunCheck) stored(threadID, id string) Effect { e.ThreadID, e.ID = threadID, id; return e }
func (e CreateWorktree) stored(threadID, id string) Effect {
	e.ThreadID, e.ID = threadID, id
	return e
}
func (e MergeBranch) stored(threadID, id string) Effect { e.ThreadID, e.ID = threadID, id; return e }
func (e RemoveWorktree) stored(threadID, id string) Effect {
	e.ThreadID, e.ID = threadID, id
	return e
}

// The stored form: each kind's fields and its type. (An alias of the kind
// has its fields and not this method.)
func (e OpenSession) MarshalJSON() ([]byte, error) {
	type plain OpenSession
	return typed(e, plain(e))
}
func (e RetireSession) MarshalJSON() ([]byte, error) {
	type plain RetireSession
	return typed(e, plain(e))
}
func (e StartTurn) MarshalJSON() ([]byte, error) { type plain StartTurn; return typed(e, plain(e)) }
func (e Respond) MarshalJSON() ([]byte, error)   { type plain Respond; return typed(e, plain(e)) }
func (e Steer) MarshalJSON() ([]byte, error)     { type plain Steer; return typed(e, plain(e)) }
func (e Interrupt) MarshalJSON() ([]byte, error) { type plain Interrupt; return typed(e, plain(e)) }
func (e EndSession) MarshalJSON() ([]byte, error) {
	type plain EndSession
	return typed(e, plain(e))
}
func (e CaptureCheckpoint) MarshalJSON() ([]byte, error) {
	type plain CaptureCheckpoint
	return typed(e, plain(e))
}
func (e RestoreFiles) MarshalJSON() ([]byte, error) {
	type plain RestoreFiles
	return typed(e, plain(e))
}
func (e ReconcileThread) MarshalJSON() ([]byte, error) {
	type plain ReconcileThread
	return typed(e, plain(e))
}
func (e RunCheck) MarshalJSON() ([]byte, error) { type plain RunCheck; return typed(e, plain(e)) }
func (e CreateWorktree) MarshalJSON() ([]byte, error) {
	type plain CreateWorktree
	return typed(e, plain(e))
}
func (e MergeBranch) MarshalJSON() ([]byte, error) { type plain MergeBranch; return typed(e, plain(e)) }
func (e RemoveWorktree) MarshalJSON() ([]byte, error) {
	type plain RemoveWorktree
	return typed(e, plain(e))
}

// typed is the JSON object of fields with "type" first.
func typed(e Effect, fields any) ([]byte, error) {
	body, _ := json.Marshal(fields)         // every kind's fields encode
	kind, _ := json.Marshal(e.EffectType()) // a string always encodes
	out := make([]byte, 0, len(body)+len(kind)+9)
	out = append(append(append(out, `{"type":`...), kind...), ',')
	return append(out, body[1:]...), nil // body is an object holding threadId at least
}

// effectKinds decodes each kind's stored form.
var effectKinds = map[EffectType]func([]byte) (Effect, error){
	EffectOpenSession:     decodeEffect[OpenSession],
	EffectRetireSession:   decodeEffect[RetireSession],
	EffectStartTurn:       decodeEffect[StartTurn],
	EffectRespond:         decodeEffect[Respond],
	EffectSteer:           decodeEffect[Steer],
	EffectInterrupt:       decodeEffect[Interrupt],
	EffectEndSession:      decodeEffect[EndSession],
	EffectCapture:         decodeEffect[CaptureCheckpoint],
	EffectRestoreFiles:    decodeEffect[RestoreFiles],
	EffectReconcileThread: decodeEffect[ReconcileThread],
	EffectRunCheck:        decodeEffect[RunCheck],
	EffectCreateWorktree:  decodeEffect[CreateWorktree],
	EffectMergeBranch:     decodeEffect[MergeBranch],
	EffectRemoveWorktree:  decodeEffect[RemoveWorktree],
}

func decodeEffect[T Effect](b []byte) (Effect, error) {
	var e T
	err := json.Unmarshal(b, &e)
	return e, err
}

// DecodeEffect reads an effect's stored form, as this host or an older
// one stored it. A type this host does not know (a newer host's) decodes
// to an effect that only names it: it is never performed, and a recovery
// cancels it.
func DecodeEffect(b []byte) (Effect, error) {
	var head struct {
		Type EffectType `json:"type"`
		EffectHead
	}
	if err := json.Unmarshal(b, &head); err != nil {
		return nil, err // the caller says which effect it was reading
	}
	decode, ok := effectKinds[head.Type]
	if !ok {
		var u unknownEffect
		_ = json.Unmarshal(b, &u) // read above: only its strings are taken
		return u, nil
	}
	e, err := decode(b)
	if err != nil {
		return nil, fmt.Errorf("%s effect: %w", head.Type, err)
	}
	return e, nil
}

// unknownEffect is an effect of a type this host does not know.
type unknownEffect struct {
	EffectHead
	Type EffectType `json:"type"`
	// The run and message it was of, as every kind stored them: its
	// cancellation names them.
	RunID     string `json:"runId,omitempty"`
	MessageID string `json:"messageId,omitempty"`
}

func (e unknownEffect) EffectType() EffectType            { return e.Type }
func (e unknownEffect) stored(threadID, id string) Effect { e.ThreadID, e.ID = threadID, id; return e }

// Stored is e under its outbox key, in its thread (which an entry's
// stored form may lack).
func Stored(e Effect, threadID, id string) Effect { return e.stored(threadID, id) }

// Replay is e as a host that restarted performs it again, and whether it
// is performed again at all: the host's own work is (its Type is
// Replayable); a provider action bound to a process that is gone is not
// (the recovery cancels it: Pending).
func Replay(e Effect) (Effect, bool) {
	switch e := e.(type) {
	case CaptureCheckpoint, RunCheck, CreateWorktree, MergeBranch, RemoveWorktree:
		return e, true
	case RestoreFiles:
		e.Replayed = true
		return e, true
	case ReconcileThread:
		e.Replayed = true
		return e, true
	}
	return e, false
}

// Pending names an effect left in the outbox, for the recovery that
// cancels it.
func Pending(e Effect) PendingEffect {
	p := PendingEffect{ID: e.Head().ID, Type: e.EffectType()}
	switch e := e.(type) {
	case OpenSession:
		p.RunID = e.RunID
	case StartTurn:
		p.RunID = e.RunID
	case Respond:
		p.RunID = e.RunID
	case Steer:
		p.RunID, p.MessageID = e.RunID, e.MessageID
	case Interrupt:
		p.RunID = e.RunID
	case EndSession:
		p.RunID = e.RunID
	case unknownEffect:
		p.RunID, p.MessageID = e.RunID, e.MessageID
	}
	return p
}
