package plugintest_test

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-run/baton/sdk"
	"github.com/baton-run/baton/sdk/plugintest"
)

// bare is an adapter with no optional capability.
type bare struct{ caps sdk.Capabilities }

func (a bare) Describe() sdk.Description {
	return sdk.Description{Name: "bare", Version: "0.1.0", WireProtocol: "none", Capabilities: a.caps}
}
func (bare) OpenSession(context.Context, sdk.OpenSessionRequest, sdk.Emitter) (sdk.OpenSessionResponse, error) {
	return sdk.OpenSessionResponse{}, nil
}
func (bare) StartTurn(context.Context, sdk.StartTurnRequest) (sdk.StartTurnResponse, error) {
	return sdk.StartTurnResponse{}, nil
}
func (bare) CloseSession(context.Context, string) error { return nil }

// pretending has every method-backed capability's method, each answering
// err, whatever it declares: a plugin served without sdk.Serve's check.
type pretending struct {
	bare
	err error
}

func (a pretending) SteerTurn(context.Context, sdk.SteerTurnRequest) error         { return a.err }
func (a pretending) InterruptTurn(context.Context, sdk.InterruptTurnRequest) error { return a.err }
func (a pretending) RespondToRequest(context.Context, sdk.RespondToRequestRequest) error {
	return a.err
}
func (a pretending) RollbackThread(context.Context, sdk.RollbackThreadRequest) (sdk.RollbackThreadResponse, error) {
	return sdk.RollbackThreadResponse{}, a.err
}
func (a pretending) ReadThreadSnapshot(context.Context, sdk.ReadThreadSnapshotRequest) (sdk.ThreadSnapshot, error) {
	return sdk.ThreadSnapshot{}, a.err
}

// An undeclared capability's RPC must answer unsupported, through the
// plugin protocol: the sdk's server does for a method the adapter lacks; a
// plugin that takes the call, or fails it another way, is named, call by
// call; what a plugin declares it is not asked.
func TestCheckUndeclared(t *testing.T) {
	all := sdk.Capabilities{NativeSteering: true, Interrupt: true, Approvals: true, Subagents: true, NativeRollback: true,
		Resume: true, ThreadSnapshot: true}
	violation := func(rpc, capability, got string) plugintest.Violation {
		return plugintest.Violation{Rule: "an undeclared capability's RPC answers unsupported",
			Want: rpc + " (" + capability + " not declared) to fail with sdk.ErrUnsupported", Got: got}
	}
	for _, tc := range []struct {
		name    string
		adapter sdk.Adapter
		want    []plugintest.Violation
	}{
		{"none declared, none implemented", bare{}, nil},
		{"all declared", pretending{bare: bare{caps: all}}, nil},
		{"interrupt declared, the rest unsupported", pretending{bare: bare{caps: sdk.Capabilities{Interrupt: true}},
			err: sdk.Errorf(sdk.ErrUnsupported, "not here")}, nil},
		{"none declared, all taken", pretending{}, []plugintest.Violation{
			violation("SteerTurn", "steering", "it succeeded"),
			violation("InterruptTurn", "interrupt", "it succeeded"),
			violation("RespondToRequest", "approvals", "it succeeded"),
			violation("RollbackThread", "rollback", "it succeeded"),
			violation("ReadThreadSnapshot", "thread_snapshot", "it succeeded"),
		}},
		{"approvals declared, the rest another error", pretending{bare: bare{caps: sdk.Capabilities{Approvals: true}},
			err: sdk.Errorf(sdk.ErrUnknownSession, "session s1")}, []plugintest.Violation{
			violation("SteerTurn", "steering", `the error "session s1: unknown session"`),
			violation("InterruptTurn", "interrupt", `the error "session s1: unknown session"`),
			violation("RollbackThread", "rollback", `the error "session s1: unknown session"`),
			violation("ReadThreadSnapshot", "thread_snapshot", `the error "session s1: unknown session"`),
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := plugintest.InProcess(t, tc.adapter)
			d, err := c.Describe(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			got := plugintest.CheckUndeclared(t.Context(), c, d.Capabilities, "s1")
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("violations (-want +got):\n%s", diff)
			}
		})
	}
}
