package sdk

import "context"

// Adapter is what every provider plugin implements. Requests name their
// session; an adapter serves any number of sessions at once.
type Adapter interface {
	// Describe names the plugin. Capabilities that are methods (steering,
	// rollback, snapshots) are filled in by the sdk from the optional
	// interfaces the adapter implements.
	Describe() Description
	// OpenSession starts the provider process for a session and returns
	// once it can take a turn. Events go to emit until the provider process
	// exits (the adapter emits EventRuntimeExited last) or CloseSession.
	OpenSession(ctx context.Context, req OpenSessionRequest, emit Emitter) (OpenSessionResponse, error)
	// StartTurn sends user input and returns once the provider took it.
	StartTurn(ctx context.Context, req StartTurnRequest) (StartTurnResponse, error)
	// InterruptTurn asks the provider to stop; it returns an acknowledgement.
	InterruptTurn(ctx context.Context, req InterruptTurnRequest) error
	// RespondToRequest delivers an answer to an opened request.
	RespondToRequest(ctx context.Context, req RespondToRequestRequest) error
	// CloseSession stops the provider process.
	CloseSession(ctx context.Context, sessionID string) error
}

// Steerer is implemented by adapters whose provider accepts input into a
// running turn.
type Steerer interface {
	SteerTurn(ctx context.Context, req SteerTurnRequest) error
}

// Rollbacker is implemented by adapters whose provider can drop turns from a
// thread.
type Rollbacker interface {
	RollbackThread(ctx context.Context, req RollbackThreadRequest) (RollbackThreadResponse, error)
}

// SnapshotReader is implemented by adapters that can read the provider's
// view of a thread.
type SnapshotReader interface {
	ReadThreadSnapshot(ctx context.Context, req ReadThreadSnapshotRequest) (ThreadSnapshot, error)
}

// Emitter takes a session's events in order. Emit never blocks on the host.
type Emitter interface {
	Emit(ev RuntimeEvent)
}

// describe returns the adapter's description with the method capabilities
// set from what it implements.
func describe(a Adapter) Description {
	d := a.Describe()
	_, d.Capabilities.NativeSteering = a.(Steerer)
	_, d.Capabilities.NativeRollback = a.(Rollbacker)
	_, d.Capabilities.ThreadSnapshot = a.(SnapshotReader)
	return d
}
