package domain

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"

	"github.com/baton-run/baton/sdk"
)

// What the host feeds back. The host decides nothing: it carries effects
// out and reports what it saw, and what it saw becomes a command here,
// with an id derived from what it carries. An observation made again
// (a timer that fires again after a restart, an effect performed again by
// the next host) is then the same command, which a receipt answers
// without deciding it twice.
//
// Two kinds of input come back: an effect's Result, which Outcome turns
// into the one command its kind declares; and an Observation (a timer
// firing, the host starting or stopping, a session idle or opened, a
// provider exiting), which Observed names.

// Result is what the host saw of performing an effect.
type Result struct {
	// Err is why the effect could not be done; nil when it was. (For a
	// ReconcileThread, why the provider could not drop the turns:
	// sdk.ErrUnsupported when its plugin cannot.)
	Err error
	// Skipped: the effect was not performed: its attempt was no longer
	// its run's active one (Current).
	Skipped bool
	// Opened is what the plugin said of a session it opened
	// (OpenSession): its refs and pids, the conversation the host asked
	// it to resume (ResumeRequested, given the plugin's capability:
	// OpenSession.ResumeRef) and whether it did. Outcome names the
	// session, provider and model.
	Opened RecordSessionOpened
	// ThreadRef is the conversation a ReconcileThread's provider goes on
	// in once it dropped the turns; RefsErr, why the refs of its stale
	// checkpoints could not be deleted.
	ThreadRef string
	RefsErr   error
	// What the host's own work found (when Err is nil): a capture's
	// checkpoint, the files a restore wrote, removed and saved, a check's
	// result. Outcome names the checkpoint, rollback or run (from the
	// effect); the host gives the rest.
	Captured RecordCheckpoint
	Restored RecordFilesRestored
	Checked  CheckResult
	// Worktree is what making a worktree found (CreateWorktree); Merged
	// how a merge came out (MergeBranch); BranchDeleted that removing a
	// worktree deleted its branch (RemoveWorktree).
	Worktree      RecordWorktree
	Merged        Merge
	BranchDeleted bool
}

// Outcome is the command that records what came of performing e, nil when
// nothing is to be recorded. Each kind has one outcome command type:
//
//	OpenSession        RecordSessionOpened, or FailRun when it failed
//	RetireSession      none: its end was recorded with the decision
//	StartTurn          RecordTurnDispatched, or FailRun when it failed, or
//	                   RestartTurn when its session had ended (once)
//	Steer              SteerFailed when it failed or was skipped
//	Respond            RespondFailed when it failed, MarkRequestUnreachable
//	                   when the provider's process is gone
//	Interrupt          none: the provider's terminal event ends the turn,
//	EndSession         and the session's end the run
//	CaptureCheckpoint  RecordCheckpoint
//	RestoreFiles       RecordFilesRestored
//	ReconcileThread    RecordProviderReconciled
//	RunCheck           RecordCheck
//	CreateWorktree     RecordWorktree
//	MergeBranch        RecordMerge
//	RemoveWorktree     RecordWorktreeRemoved
//
// t is the effect's thread as it is now (nil: not found); an answer's
// failure names the request it finds there.
func Outcome(t *Thread, e Effect, r Result) *Command {
	thread := e.Head().ThreadID
	cmd := func(id string, p CommandPayload) *Command {
		return &Command{ID: id, ThreadID: thread, Payload: asStored(p)}
	}
	switch e := e.(type) {
	case OpenSession:
		switch {
		case r.Skipped, r.Err != nil && e.RunID == "":
			return nil // a rollback's: the rollback's own outcome says what failed
		case r.Err != nil:
			return startFailed(thread, e.RunID, e.AttemptID, r.Err)
		}
		p := r.Opened
		p.SessionID, p.Provider, p.Model, p.ResumeRequested = e.SessionID, e.Provider, e.Model, e.Resume
		return cmd(p.observedID(thread), p)
	case StartTurn:
		switch {
		case r.Skipped:
			return nil
		case r.Err != nil && !e.Restarted && ended(r.Err):
			return cmd("restart:"+e.ID, RestartTurn{RunID: e.RunID, AttemptID: e.AttemptID, Text: e.Text, Reason: r.Err.Error()})
		case r.Err != nil:
			return startFailed(thread, e.RunID, e.AttemptID, r.Err)
		}
		return cmd("dispatched:"+e.AttemptID, RecordTurnDispatched{RunID: e.RunID, AttemptID: e.AttemptID, SessionID: e.SessionID})
	case Steer:
		switch {
		case r.Skipped:
			return cmd("steerfail:"+e.ID, SteerFailed{RunID: e.RunID, MessageID: e.MessageID,
				Reason: "its turn had ended before the message could be sent"})
		case r.Err != nil:
			return cmd("steerfail:"+e.ID, SteerFailed{RunID: e.RunID, MessageID: e.MessageID, Reason: r.Err.Error()})
		}
	case Respond:
		if r.Err == nil || t == nil {
			return nil
		}
		q := t.requestByRef(e.SessionID, e.RequestRef)
		switch {
		case q == nil:
			return nil
		case Gone(r.Err):
			c := Unreachable(thread, q.ID)
			return &c
		}
		// The answer did not get through (refused, timed out): the request
		// can be answered again.
		return cmd("respondfail:"+e.ID, RespondFailed{RequestID: q.ID, Reason: r.Err.Error()})
	case CaptureCheckpoint:
		p := r.Captured
		if r.Err != nil {
			// An error checkpoint: the run ends, saying so.
			p = RecordCheckpoint{Status: CheckpointError, Reason: r.Err.Error()}
		}
		p.CheckpointID = e.CheckpointID
		return cmd("capture:"+e.CheckpointID, p)
	case RestoreFiles:
		p := r.Restored
		if r.Err != nil {
			p = RecordFilesRestored{Failure: &Failure{Code: "restore_failed", Message: r.Err.Error()}}
		} else {
			p.SavedRef = e.Ref // the files as they were, kept under the rollback's own ref
			if e.Branch != nil {
				p.BranchHead = e.Branch.To
			}
		}
		p.RollbackID, p.Replayed = e.RollbackID, e.Replayed
		return cmd("restored:"+e.RollbackID, p)
	case ReconcileThread:
		return cmd("reconciled:"+e.RollbackID, reconciled(t, e, r))
	case RunCheck:
		p := r.Checked
		p.RunID, p.Command = e.RunID, e.Command
		return cmd("check:"+e.ID, RecordCheck{CheckResult: p})
	case CreateWorktree:
		p := r.Worktree
		if r.Err != nil {
			p = RecordWorktree{Failure: r.Err.Error()}
		}
		return cmd("worktree:"+thread, p)
	case MergeBranch:
		p := RecordMerge{Merge: r.Merged}
		if r.Err != nil {
			p = RecordMerge{Merge: Merge{Status: MergeFailed, Error: r.Err.Error()}}
		}
		p.ID = e.MergeID
		return cmd("merged:"+e.MergeID, p)
	case RemoveWorktree:
		p := RecordWorktreeRemoved{BranchDeleted: r.BranchDeleted}
		if r.Err != nil {
			p = RecordWorktreeRemoved{Failure: r.Err.Error()}
		}
		return cmd("unworktree:"+e.ID, p)
	}
	return nil // RetireSession, Interrupt, EndSession and a kind this host does not know record nothing
}

// startFailed ends a run whose turn could not be started.
func startFailed(threadID, runID, attemptID string, err error) *Command {
	return &Command{ID: "fail:" + runID + ":" + attemptID, ThreadID: threadID,
		Payload: asStored(FailRun{RunID: runID, Failure: Failure{Code: "start_failed", Message: err.Error()}})}
}

// ended says whether an error means the session had ended, its provider
// gone, while its plugin lives: a new session can take the turn.
func ended(err error) bool {
	return errors.Is(err, sdk.ErrNotResumable) || errors.Is(err, sdk.ErrUnknownSession) || errors.Is(err, sdk.ErrProviderExited)
}

// reconciled is how a rollback brought the provider's conversation back:
// natively where the provider dropped the turns, else by leaving the
// conversation for a fresh one, which the next run starts with a handoff
// (the host closed its session). A note says why, and what of the stale
// checkpoints' refs could not be deleted.
func reconciled(t *Thread, e ReconcileThread, r Result) RecordProviderReconciled {
	p := RecordProviderReconciled{RollbackID: e.RollbackID, Reconciliation: ReconcileNone, Replayed: e.Replayed || e.Hold}
	var notes []string
	if e.Turns > 0 {
		p.Reconciliation = ReconcileFreshThread
		provider := ""
		if t != nil {
			provider = t.Provider
		}
		switch {
		case r.Err == nil:
			p.Reconciliation, p.ProviderThreadRef, p.TurnsDropped = ReconcileNative, r.ThreadRef, e.Turns
		case errors.Is(r.Err, sdk.ErrUnsupported):
			notes = append(notes, fmt.Sprintf("the %s provider cannot drop turns; the next run starts a fresh conversation with a summary of the earlier one", provider))
		default:
			notes = append(notes, fmt.Sprintf("the provider's rollback failed (%v); the next run starts a fresh conversation with a summary of the earlier one", r.Err))
		}
	}
	if r.RefsErr != nil {
		notes = append(notes, "the refs of stale checkpoints could not be deleted: "+r.RefsErr.Error())
	}
	p.Note = strings.Join(notes, "; ")
	return p
}

// Current says whether a provider action is still wanted: a start or a
// steering message decided for an attempt that has since been replaced,
// or whose run ended, would start work nobody follows. The host asks
// before it performs one (its thread as it is now; nil: not found), and
// reports a skipped one to Outcome.
func Current(t *Thread, e Effect) bool {
	var runID, attemptID string
	switch e := e.(type) {
	case OpenSession:
		if e.RunID == "" {
			return true
		}
		runID, attemptID = e.RunID, e.AttemptID
	case StartTurn:
		runID, attemptID = e.RunID, e.AttemptID
	case Steer:
		runID, attemptID = e.RunID, e.AttemptID
	default:
		return true
	}
	if t == nil {
		return false
	}
	for i := len(t.Runs) - 1; i >= 0; i-- {
		if r := &t.Runs[i]; r.ID == runID {
			return r.Status.Active() && r.ActiveAttempt == attemptID
		}
	}
	return false
}

// Gone says whether an error means the provider session cannot be
// reached: its process, or its plugin's, is gone.
func Gone(err error) bool {
	return errors.Is(err, sdk.ErrNotResumable) || errors.Is(err, sdk.ErrUnknownSession) ||
		errors.Is(err, sdk.ErrProviderExited) || errors.Is(err, sdk.ErrPluginUnavailable)
}

// Observation is something the host saw that is not an effect's result.
type Observation interface {
	CommandPayload
	// observedID is the command's id, from what it carries.
	observedID(threadID string) string
}

// Observed is the command of an observation in a thread.
func Observed(threadID string, o Observation) Command {
	return Command{ID: o.observedID(threadID), ThreadID: threadID, Payload: o}
}

// Unreachable marks a request whose provider process is gone. Both paths
// that find it (a client's answer, a failed delivery) give the same
// command, so the second is a duplicate, not a conflict.
func Unreachable(threadID, requestID string) Command {
	return Observed(threadID, MarkRequestUnreachable{RequestID: requestID, Reason: "its provider process is gone"})
}

// ProviderEventsID is the command id of a batch of a session's events
// (first to last, in order). A plugin numbers a session's events once (a
// stream resumed after sequence N sends the same events again), so these
// name the events.
func ProviderEventsID(sessionID string, first, last uint64) string {
	id := "pev:" + sessionID + ":" + strconv.FormatUint(first, 10)
	if last != first {
		id += "-" + strconv.FormatUint(last, 10)
	}
	return id
}

func (p FireWait) observedID(string) string         { return "wait:" + p.WaitID }
func (p ForceStop) observedID(string) string        { return "force:" + p.AttemptID }
func (p CloseIdleSession) observedID(string) string { return "idle:" + p.SessionID }
func (p RecordSessionOpened) observedID(string) string {
	return "open:" + p.SessionID
}
func (p MarkRequestUnreachable) observedID(string) string { return "unreachable:" + p.RequestID }
func (p HostStopping) observedID(string) string           { return "drain:" + p.RunID + ":" + p.AttemptID }
func (p ProviderExited) observedID(string) string         { return "pexit:" + p.SessionID }

func (p StallTurn) observedID(string) string {
	return "stall:" + p.AttemptID + ":" + strconv.FormatInt(p.Since.UnixNano(), 10)
}

func (p ExpireRequest) observedID(string) string {
	return "expire:" + p.RequestID + ":" + strconv.Itoa(p.Failures)
}

// A host start's and stop's observations are of the log as it stood
// (After): one made again against the same log is the same command.
func (p Recover) observedID(threadID string) string {
	return "recover:" + threadID + ":" + strconv.FormatUint(p.After, 10)
}

func (p StartQueued) observedID(threadID string) string {
	return "startqueued:" + threadID + ":" + strconv.FormatUint(p.After, 10)
}

func (p ShutDown) observedID(threadID string) string {
	return "shutdown:" + threadID + ":" + strconv.FormatUint(p.After, 10)
}

// asStored is p as the log gives it back: what the host's own work found
// (git's paths and messages, an error's text) may hold bytes that are not
// UTF-8, which the log's JSON stores as U+FFFD. The projection that
// applies it live holds the same, so that it reads as a reloaded one does
// and the API (whose strings are UTF-8) can carry it.
func asStored(p CommandPayload) CommandPayload {
	b, err := json.Marshal(p)
	if err != nil {
		return p // not a value the log would store either; Decide refuses it
	}
	v := reflect.New(reflect.TypeOf(p))
	if json.Unmarshal(b, v.Interface()) != nil {
		return p
	}
	return v.Elem().Interface().(CommandPayload)
}
