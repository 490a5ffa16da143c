package plugintest

import (
	"context"
	"errors"
	"fmt"

	"github.com/baton-run/baton/sdk"
)

// A capability a plugin does not declare is missing explicitly: its RPC
// answers sdk.ErrUnsupported (the host's policy takes over), whatever
// session it names, and does nothing. A plugin served by sdk.Serve cannot
// do otherwise (the sdk answers for a method the adapter lacks); one that
// speaks the plugin protocol by other means is held to it here.

// Caller is the client half CheckUndeclared calls: a started Plugin, or
// InProcess's client.
type Caller interface {
	SteerTurn(ctx context.Context, req sdk.SteerTurnRequest) error
	InterruptTurn(ctx context.Context, req sdk.InterruptTurnRequest) error
	RespondToRequest(ctx context.Context, req sdk.RespondToRequestRequest) error
	RollbackThread(ctx context.Context, req sdk.RollbackThreadRequest) (sdk.RollbackThreadResponse, error)
	ReadThreadSnapshot(ctx context.Context, req sdk.ReadThreadSnapshotRequest) (sdk.ThreadSnapshot, error)
}

// undeclaredCalls are the RPCs of the capabilities a method gives, each
// made as a host would make it of a plugin that declared the capability.
// (Subagents is a property of the event stream, not an RPC; a plugin
// without Resume opens a fresh session when asked to resume one, saying
// Resumed false, which the conformance suite's resume scenario and the
// sdk's server see to.)
var undeclaredCalls = []struct {
	capability, rpc string
	declared        func(sdk.Capabilities) bool
	call            func(ctx context.Context, c Caller, session string) error
}{
	{sdk.NoteSteering, "SteerTurn", func(c sdk.Capabilities) bool { return c.NativeSteering },
		func(ctx context.Context, c Caller, session string) error {
			return c.SteerTurn(ctx, sdk.SteerTurnRequest{SessionID: session, Input: sdk.TurnInput{Text: "conformance: steer the running turn"}})
		}},
	{sdk.NoteInterrupt, "InterruptTurn", func(c sdk.Capabilities) bool { return c.Interrupt },
		func(ctx context.Context, c Caller, session string) error {
			return c.InterruptTurn(ctx, sdk.InterruptTurnRequest{SessionID: session})
		}},
	{sdk.NoteApprovals, "RespondToRequest", func(c sdk.Capabilities) bool { return c.Approvals },
		func(ctx context.Context, c Caller, session string) error {
			return c.RespondToRequest(ctx, sdk.RespondToRequestRequest{SessionID: session, RequestRef: "conformance-request",
				Decision: sdk.DecisionAccept})
		}},
	{sdk.NoteRollback, "RollbackThread", func(c sdk.Capabilities) bool { return c.NativeRollback },
		func(ctx context.Context, c Caller, session string) error {
			_, err := c.RollbackThread(ctx, sdk.RollbackThreadRequest{SessionID: session, Turns: 1})
			return err
		}},
	{sdk.NoteSnapshot, "ReadThreadSnapshot", func(c sdk.Capabilities) bool { return c.ThreadSnapshot },
		func(ctx context.Context, c Caller, session string) error {
			_, err := c.ReadThreadSnapshot(ctx, sdk.ReadThreadSnapshotRequest{SessionID: session})
			return err
		}},
}

// CheckUndeclared calls, naming the session sessionID, the RPC of each
// capability caps does not declare, and returns a violation for each
// that did not answer sdk.ErrUnsupported, in the order of
// sdk.Capabilities' fields. Conformance calls it in the simple scenario's
// live session, once its turns ended; the provider's replay peer then
// checks that none of the calls reached it.
func CheckUndeclared(ctx context.Context, c Caller, caps sdk.Capabilities, sessionID string) []Violation {
	var vs []Violation
	for _, u := range undeclaredCalls {
		if u.declared(caps) {
			continue
		}
		err := u.call(ctx, c, sessionID)
		if errors.Is(err, sdk.ErrUnsupported) {
			continue
		}
		got := "it succeeded"
		if err != nil {
			got = fmt.Sprintf("the error %q", err)
		}
		vs = append(vs, Violation{Rule: "an undeclared capability's RPC answers unsupported",
			Want: fmt.Sprintf("%s (%s not declared) to fail with sdk.ErrUnsupported", u.rpc, u.capability), Got: got})
	}
	return vs
}
