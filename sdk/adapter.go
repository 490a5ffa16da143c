package sdk

import (
	"context"
	"errors"
	"fmt"
)

// Adapter is what every provider plugin implements. Requests name their
// session; an adapter serves any number of sessions at once.
//
// Everything else a provider may or may not do is an optional interface
// below ([Steerer], [Interrupter], [Responder], [Rollbacker], [Resumer],
// [SnapshotReader]). The plugin declares its capabilities in
// [Description.Capabilities] and implements the matching interfaces;
// [CheckCapabilities] (run by Serve before it serves anything) refuses a
// plugin whose declaration and methods disagree.
type Adapter interface {
	// Describe names the plugin and declares its capabilities.
	Describe() Description
	// OpenSession starts the provider process for a session and returns
	// once it can take a turn. Events go to emit until the provider process
	// exits (the adapter emits EventRuntimeExited last) or CloseSession.
	// OpenSession is never given a ResumeThreadRef: that is [Resumer]'s.
	OpenSession(ctx context.Context, req OpenSessionRequest, emit Emitter) (OpenSessionResponse, error)
	// StartTurn sends user input and returns once the provider took it.
	// The turn's turn_started event echoes req.ClientTurnID.
	StartTurn(ctx context.Context, req StartTurnRequest) (StartTurnResponse, error)
	// CloseSession stops the provider process. Its runtime_exited event
	// (status closed) is the session's last.
	CloseSession(ctx context.Context, sessionID string) error
}

// Steerer is the native steering capability: the provider accepts input
// into a running turn. Without it the host interrupts the turn and starts
// a new attempt with the input.
type Steerer interface {
	SteerTurn(ctx context.Context, req SteerTurnRequest) error
}

// Interrupter is the interrupt capability: the provider can be asked to
// stop a turn. Returning is an acknowledgement only; the turn ends when its
// turn_terminal (status interrupted) arrives. req.TurnRef empty means the
// running turn. A turn that already ended, or no turn running, is nothing
// to stop: return nil (the interrupt may cross the turn's terminal; the host
// only logs an error, and waits for the terminal either way).
type Interrupter interface {
	InterruptTurn(ctx context.Context, req InterruptTurnRequest) error
}

// Responder is the approvals capability: the provider opens requests
// (request_opened) and takes their answers.
type Responder interface {
	RespondToRequest(ctx context.Context, req RespondToRequestRequest) error
}

// Rollbacker is the native rollback capability: the provider can drop
// turns from a thread. Without it the host starts a fresh provider thread
// with a handoff.
type Rollbacker interface {
	RollbackThread(ctx context.Context, req RollbackThreadRequest) (RollbackThreadResponse, error)
}

// Resumer is the resume capability: a session can continue a provider
// thread from an earlier session (req.ResumeThreadRef). It reports
// Resumed false when the provider could not, and a fresh conversation
// started. Without it the sdk opens a fresh session and says so.
type Resumer interface {
	ResumeSession(ctx context.Context, req OpenSessionRequest, emit Emitter) (OpenSessionResponse, error)
}

// SnapshotReader is the thread snapshot capability: the adapter can read
// the provider's view of a thread.
type SnapshotReader interface {
	ReadThreadSnapshot(ctx context.Context, req ReadThreadSnapshotRequest) (ThreadSnapshot, error)
}

// Emitter takes a session's events in order. Emit never blocks on the host.
type Emitter interface {
	Emit(ev RuntimeEvent)
}

// Implemented is the capabilities a's methods give it: one field a
// method-backed capability (all but Subagents, which is a property of the
// event stream the conformance suite checks).
func Implemented(a Adapter) Capabilities {
	var c Capabilities
	_, c.NativeSteering = a.(Steerer)
	_, c.Interrupt = a.(Interrupter)
	_, c.Approvals = a.(Responder)
	_, c.NativeRollback = a.(Rollbacker)
	_, c.Resume = a.(Resumer)
	_, c.ThreadSnapshot = a.(SnapshotReader)
	return c
}

// ErrCapabilityMismatch says a plugin declares a capability it does not
// implement, or implements one it does not declare.
var ErrCapabilityMismatch = errors.New("capabilities declared and implemented differ")

// CheckCapabilities says whether what a declares (Describe) and what it
// implements (the optional interfaces) agree, naming every difference.
func CheckCapabilities(a Adapter) error {
	d := a.Describe()
	declared, has := d.Capabilities, Implemented(a)
	var errs []error
	for _, c := range methodCapabilities {
		d, h := c.field(&declared), c.field(&has)
		switch {
		case *d && !*h:
			errs = append(errs, fmt.Errorf("declares %s but does not implement sdk.%s (%s)", c.name, c.iface, c.method))
		case *h && !*d:
			errs = append(errs, fmt.Errorf("implements sdk.%s (%s) but does not declare %s", c.iface, c.method, c.name))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("plugin %s: %w: %w", d.Name, ErrCapabilityMismatch, errors.Join(errs...))
	}
	return nil
}

// methodCapabilities are the capabilities a method gives, with the
// interface that has it.
var methodCapabilities = []struct {
	name, iface, method string
	field               func(*Capabilities) *bool
}{
	{NoteSteering, "Steerer", "SteerTurn", func(c *Capabilities) *bool { return &c.NativeSteering }},
	{NoteInterrupt, "Interrupter", "InterruptTurn", func(c *Capabilities) *bool { return &c.Interrupt }},
	{NoteApprovals, "Responder", "RespondToRequest", func(c *Capabilities) *bool { return &c.Approvals }},
	{NoteRollback, "Rollbacker", "RollbackThread", func(c *Capabilities) *bool { return &c.NativeRollback }},
	{NoteResume, "Resumer", "ResumeSession", func(c *Capabilities) *bool { return &c.Resume }},
	{NoteSnapshot, "SnapshotReader", "ReadThreadSnapshot", func(c *Capabilities) *bool { return &c.ThreadSnapshot }},
}
