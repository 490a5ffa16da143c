package domain

import (
	"cmp"
	"fmt"
	"time"

	"github.com/baton-run/baton/sdk"
)

// Deciding. Decide turns one command into events and effects against a
// thread. Each event it emits is applied to the thread at once (with
// Evolve), so every later step of the same decision sees it: a run queued
// earlier in the decision is in t.Runs, a run that ended is no longer
// active. The thread Decide is given is the caller's scratch copy: it is
// the thread after the decision when Decide succeeds, and must be dropped
// when it fails.
//
// The code is split by concern: this file holds the commands; messages.go
// messages and steering; provider.go provider events; lifecycle.go how a
// run starts, ends and is recovered; checkpoints.go checkpoints and
// rollback; lookups.go the finders every part uses.
//
// A pointer into a thread's slices (a *Run, a *Node) is valid only until
// the next emit: an event may append to the slice it points into. Code
// below reads what it needs before it emits, or looks up again after.

// Env is what Decide may use from the world: the time of the command, an
// id allocator (seeded in tests), and what the thread's provider can do.
type Env struct {
	Now   time.Time
	NewID func(prefix string) string
	Caps  Capabilities
	// Live is the thread's open provider session as the host holds it
	// (nil: none, or its stream has ended).
	Live *LiveSession
	// ShuttingDown: the host is draining; no queued run starts (the next
	// host starts them).
	ShuttingDown bool
	// InterruptGrace is how long a provider asked to stop a turn has to
	// end it before the host ends its process (0: DefaultInterruptGrace).
	InterruptGrace time.Duration
	// Past is what the host gathered of the runs that left the thread's
	// projection, when the decision asked for it (see NeedPast).
	Past *Past
	// Facts is what the host found out, before it took the thread's lock,
	// of the providers and directory the command names (FactsFor).
	Facts *Facts
	// Host names the host deciding, on a log several hosts share: the
	// runs it starts record it ("": a host alone on its log).
	Host string
	// MCP gives the MCP servers configured on the host, sorted by name,
	// when a decision needs them (nil: none is configured).
	MCP func() []MCPServerRef
}

// DefaultInterruptGrace is Env.InterruptGrace's default: long enough for
// a provider to wind a turn down (a tool call to end, its last message
// to flush), short enough that a stop is felt to stop.
const DefaultInterruptGrace = 10 * time.Second

// interruptGrace is the grace the environment gives.
func (env Env) interruptGrace() time.Duration {
	return cmp.Or(env.InterruptGrace, DefaultInterruptGrace)
}

// Decision is what Decide returns: the events it emitted (already applied
// to the thread it was given) and the effects they call for.
type Decision struct {
	Events  []Payload
	Effects []Effect

	t  *Thread
	ev Event // the thread id and time every emitted event gets
	// need is what the decision needs of the thread's past and lacks.
	need *NeedPast
}

// emit records events and applies each to the thread.
func (d *Decision) emit(ps ...Payload) {
	for _, p := range ps {
		d.Events = append(d.Events, p)
		e := d.ev
		e.Payload = p
		Evolve(d.t, e)
	}
}

func (d *Decision) effect(e ...Effect) { d.Effects = append(d.Effects, e...) }

// Decide decides a command against t, which it changes: see the comment
// at the top of this file. A thread that does not exist yet is the zero
// Thread; only CreateThread is decided against it.
func Decide(t *Thread, cmd Command, env Env) (Decision, error) {
	d := Decision{t: t, ev: Event{ThreadID: cmd.ThreadID, At: env.Now.UTC()}}
	if cmd.Payload == nil {
		return d, fmt.Errorf("%w: command %q has no payload", ErrInvalid, cmd.ID)
	}
	if _, create := cmd.Payload.(CreateThread); !create && !t.Exists() {
		return d, fmt.Errorf("%w: thread %q", ErrNotFound, cmd.ThreadID)
	}
	var err error
	switch p := cmd.Payload.(type) {
	case CreateThread:
		err = decideCreate(t, cmd.ThreadID, p, env, &d)
	case DispatchMessage:
		err = decideDispatch(t, p, env, &d)
	case InterruptRun:
		err = decideInterrupt(t, p, env, &d)
	case ForceStop:
		decideForceStop(t, p, env, &d)
	case StallTurn:
		decideStallTurn(t, p, &d)
	case ExpireRequest:
		decideExpireRequest(t, p, &d)
	case RespondToRequest:
		err = decideRespond(t, p, &d)
	case RollbackToCheckpoint:
		err = decideRollback(t, p, env, &d)
	case RecordCheckpoint:
		err = decideRecordCheckpoint(t, p, env, &d)
	case RecordFilesRestored:
		err = decideFilesRestored(t, p, env, &d)
	case RecordProviderReconciled:
		err = decideProviderReconciled(t, p, env, &d)
	case SteerFailed:
		err = decideSteerFailed(t, p, env, &d)
	case RecordTurnDispatched:
		err = decideTurnDispatched(t, p, env, &d)
	case RespondFailed:
		err = decideRespondFailed(t, p, &d)
	case MarkRequestUnreachable:
		err = decideUnreachable(t, p, &d)
	case IngestProviderEvent:
		decideProviderEvent(t, p, env, &d)
	case RecordSessionOpened:
		decideSessionOpened(t, p, env, &d)
	case FailRun:
		err = decideFailRun(t, p, env, &d)
	case Recover:
		decideRecover(t, p, env, &d)
	case StartQueued:
		decideStartQueued(t, env, &d)
	case CancelQueued:
		err = decideCancelQueued(t, p, &d)
	case CloseIdleSession:
		err = decideCloseIdleSession(t, p, &d)
	case ShutDown:
		decideShutDown(t, p, env, &d)
	case HostStopping:
		err = decideInterrupt(t, InterruptRun{RunID: p.RunID}, env, &d)
	case ProviderExited:
		decideProviderEvent(t, IngestProviderEvent{SessionID: p.SessionID, Event: sdk.RuntimeEvent{Kind: sdk.EventRuntimeExited,
			Status: sdk.ExitFailed, Failure: &sdk.Failure{Code: "plugin_exited", Message: p.Message}}}, env, &d)
	case SwitchProvider:
		if l := t.Loop; l != nil && l.Return != nil {
			// A person chose where the thread goes: no return overrides it.
			d.emit(WaitEnded{WaitID: l.Return.ID, Outcome: WaitCancelled, Reason: "the thread was switched by hand"})
		}
		err = decideSwitchProvider(t, p, env, &d)
	case RestartTurn:
		decideRestartTurn(t, p, env, &d)
	case SetPolicy:
		err = decideSetPolicy(t, p, &d)
	case FireWait:
		err = decideFireWait(t, p, env, &d)
	case RecordCheck:
		err = decideRecordCheck(t, p, env, &d)
	case RecordWorktree:
		err = decideRecordWorktree(t, p, env, &d)
	case MergeThread:
		err = decideMerge(t, p, env, &d)
	case RecordMerge:
		err = decideRecordMerge(t, p, &d)
	case ArchiveThread:
		err = decideArchive(t, p, &d)
	case RecordWorktreeRemoved:
		err = decideWorktreeRemoved(t, p, &d)
	case ClaimThread:
		err = decideClaim(t, p, env, &d)
	case MarkHostLost:
		decideMarkHostLost(t, p, &d)
	default:
		err = fmt.Errorf("%w: unknown command type %q", ErrInvalid, cmd.Payload.CommandType())
	}
	if err == nil {
		err = env.Facts.check(cmd.Payload)
	}
	if err == nil && d.need != nil {
		err = d.need
	}
	return d, err
}

func decideCreate(t *Thread, id string, p CreateThread, env Env, d *Decision) error {
	if t.Exists() {
		return fmt.Errorf("%w: thread %q %w", ErrConflict, id, ErrExists)
	}
	if p.Provider == "" {
		return fmt.Errorf("%w: thread.create needs a provider", ErrInvalid)
	}
	if p.Cwd == "" || p.Cwd[0] != '/' {
		return fmt.Errorf("%w: thread.create needs an absolute cwd, got %q", ErrInvalid, p.Cwd)
	}
	switch p.ApprovalPolicy {
	case "", ApproveDecline, ApproveAccept, ApproveAsk:
	default:
		return fmt.Errorf("%w: approval policy must be %q, %q or %q, got %q", ErrInvalid,
			ApproveDecline, ApproveAccept, ApproveAsk, p.ApprovalPolicy)
	}
	if p.Worktree != nil {
		var f *WorktreeFact
		if env.Facts != nil {
			f = env.Facts.Worktree
		}
		return createWorktree(id, p, f, env, d)
	}
	d.emit(ThreadCreated{Provider: p.Provider, Cwd: p.Cwd, Model: p.Model, ProviderCommand: p.ProviderCommand,
		ApprovalPolicy: p.ApprovalPolicy, Host: env.Host, SharedCwd: p.SharedCwd})
	return nil
}

func decideTurnDispatched(t *Thread, p RecordTurnDispatched, env Env, d *Decision) error {
	r, a := t.attemptByID(p.AttemptID)
	if a == nil {
		return fmt.Errorf("%w: attempt %q", ErrNotFound, p.AttemptID)
	}
	if !r.live() || r.ActiveAttempt != a.ID || a.SessionID != "" {
		return nil // stale, or its turn has already started
	}
	if s := t.session(p.SessionID); s == nil || s.Status != SessionStatusOpen {
		endRun(t, r.ID, RunStatusFailed, "", &Failure{Code: "provider_exited",
			Message: "the provider exited before the turn started"}, env, d)
		return nil
	}
	d.emit(AttemptDispatched{RunID: r.ID, AttemptID: a.ID, SessionID: p.SessionID})
	return nil
}

func decideSessionOpened(t *Thread, p RecordSessionOpened, env Env, d *Decision) {
	provider := cmp.Or(p.Provider, t.Provider)
	d.emit(SessionOpened{SessionID: p.SessionID, Provider: p.Provider, Model: p.Model, ProviderRef: p.ProviderRef,
		PluginPid: p.PluginPid, ProviderPid: p.ProviderPid, ResumeRequested: p.ResumeRequested, Resumed: p.Resumed,
		MCP: p.MCP})
	if p.ResumeRequested != "" && !p.Resumed {
		// The conversation is gone (or the plugin cannot resume one): it is
		// left behind, and the next run's handoff tells the fresh one the
		// whole thread.
		why := fmt.Sprintf("%s could not resume its conversation %s", provider, p.ResumeRequested)
		d.emit(DiagnosticRecorded{Title: "the provider could not resume its conversation",
			Text: fmt.Sprintf("asked to resume provider thread %s; a fresh conversation starts, told the thread so far", p.ResumeRequested)})
		if b := t.binding(provider); b != nil && b.ThreadRef == p.ResumeRequested {
			d.emit(ProviderThreadDetached{ProviderThreadID: b.ProviderThreadID, Reason: why})
		}
		// The fresh conversation's first turn is the active run's (which
		// may have started before a switch), else the next run's.
		to := t.Provider
		if r := t.ActiveRun(); r != nil {
			to = r.Provider
		}
		if provider == to {
			planHandoff(t, env, d, handoffSpec{To: to, Fallback: why})
		}
	}
	if p.ThreadRef != "" && t.providerThreadByRef(p.ThreadRef) == nil {
		d.emit(ProviderThreadBound{ProviderThreadID: env.NewID("pthr"), SessionID: p.SessionID, ProviderRef: p.ThreadRef})
	}
}

func decideFailRun(t *Thread, p FailRun, env Env, d *Decision) error {
	r := t.run(p.RunID)
	if r == nil {
		return fmt.Errorf("%w: run %q", ErrNotFound, p.RunID)
	}
	if !r.live() {
		return nil // already ended, ending, or never started: nothing to do
	}
	f := p.Failure
	endRun(t, r.ID, RunStatusFailed, "", &f, env, d)
	return nil
}
