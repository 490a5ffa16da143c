package sdk_test

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-run/baton/sdk"
)

// base is an adapter with no optional capability.
type base struct{ caps sdk.Capabilities }

func (b base) Describe() sdk.Description {
	return sdk.Description{Name: "p", Version: "1", WireProtocol: "w", Capabilities: b.caps}
}
func (base) OpenSession(context.Context, sdk.OpenSessionRequest, sdk.Emitter) (sdk.OpenSessionResponse, error) {
	return sdk.OpenSessionResponse{}, nil
}
func (base) StartTurn(context.Context, sdk.StartTurnRequest) (sdk.StartTurnResponse, error) {
	return sdk.StartTurnResponse{}, nil
}
func (base) CloseSession(context.Context, string) error { return nil }

// full implements every optional capability.
type full struct{ base }

func (full) SteerTurn(context.Context, sdk.SteerTurnRequest) error         { return nil }
func (full) InterruptTurn(context.Context, sdk.InterruptTurnRequest) error { return nil }
func (full) RespondToRequest(context.Context, sdk.RespondToRequestRequest) error {
	return nil
}
func (full) RollbackThread(context.Context, sdk.RollbackThreadRequest) (sdk.RollbackThreadResponse, error) {
	return sdk.RollbackThreadResponse{}, nil
}
func (full) ResumeSession(context.Context, sdk.OpenSessionRequest, sdk.Emitter) (sdk.OpenSessionResponse, error) {
	return sdk.OpenSessionResponse{}, nil
}
func (full) ReadThreadSnapshot(context.Context, sdk.ReadThreadSnapshotRequest) (sdk.ThreadSnapshot, error) {
	return sdk.ThreadSnapshot{}, nil
}

// interrupting implements Interrupter only.
type interrupting struct{ base }

func (interrupting) InterruptTurn(context.Context, sdk.InterruptTurnRequest) error { return nil }

var all = sdk.Capabilities{NativeSteering: true, Interrupt: true, Approvals: true, NativeRollback: true, Resume: true, ThreadSnapshot: true}

// What a plugin implements is its capabilities; what it declares must be
// the same, and every difference is named.
func TestCheckCapabilities(t *testing.T) {
	for _, tc := range []struct {
		name    string
		a       sdk.Adapter
		has     sdk.Capabilities
		wantErr string
	}{
		{"none declared, none implemented", base{}, sdk.Capabilities{}, ""},
		{"subagents is declared only", base{sdk.Capabilities{Subagents: true}}, sdk.Capabilities{}, ""},
		{"all declared, all implemented", full{base{all}}, all, ""},
		{"declared, not implemented", base{sdk.Capabilities{Interrupt: true, Resume: true}}, sdk.Capabilities{},
			"plugin p: capabilities declared and implemented differ: declares interrupt but does not implement sdk.Interrupter (InterruptTurn)\n" +
				"declares resume but does not implement sdk.Resumer (ResumeSession)"},
		{"implemented, not declared", full{base{sdk.Capabilities{Interrupt: true}}}, all,
			"plugin p: capabilities declared and implemented differ: implements sdk.Steerer (SteerTurn) but does not declare steering\n" +
				"implements sdk.Responder (RespondToRequest) but does not declare approvals\n" +
				"implements sdk.Rollbacker (RollbackThread) but does not declare rollback\n" +
				"implements sdk.Resumer (ResumeSession) but does not declare resume\n" +
				"implements sdk.SnapshotReader (ReadThreadSnapshot) but does not declare thread_snapshot"},
		{"one of each", interrupting{base{sdk.Capabilities{Approvals: true}}}, sdk.Capabilities{Interrupt: true},
			"plugin p: capabilities declared and implemented differ: implements sdk.Interrupter (InterruptTurn) but does not declare interrupt\n" +
				"declares approvals but does not implement sdk.Responder (RespondToRequest)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.has, sdk.Implemented(tc.a)); diff != "" {
				t.Errorf("Implemented (-want +got):\n%s", diff)
			}
			err := sdk.CheckCapabilities(tc.a)
			got := ""
			if err != nil {
				got = err.Error()
				if !errors.Is(err, sdk.ErrCapabilityMismatch) {
					t.Errorf("%v is not ErrCapabilityMismatch", err)
				}
			}
			if got != tc.wantErr {
				t.Errorf("CheckCapabilities:\n got %q\nwant %q", got, tc.wantErr)
			}
		})
	}
}

// Every kind has its statuses, and a decision is a resolution's status.
func TestStatusesFor(t *testing.T) {
	got := map[sdk.EventKind][]sdk.Status{}
	for _, k := range []sdk.EventKind{sdk.EventTurnTerminal, sdk.EventRuntimeExited, sdk.EventItemStarted,
		sdk.EventItemCompleted, sdk.EventRequestResolved, sdk.EventItemUpdated, sdk.EventContentDelta} {
		got[k] = sdk.StatusesFor(k)
	}
	want := map[sdk.EventKind][]sdk.Status{
		sdk.EventTurnTerminal:    {sdk.TurnStatus("completed"), sdk.TurnStatus("interrupted"), sdk.TurnStatus("failed")},
		sdk.EventRuntimeExited:   {sdk.ExitStatus("exited"), sdk.ExitStatus("closed"), sdk.ExitStatus("failed")},
		sdk.EventItemStarted:     {sdk.ItemStatus("in_progress"), sdk.ItemStatus("completed"), sdk.ItemStatus("failed"), sdk.ItemStatus("declined")},
		sdk.EventItemCompleted:   {sdk.ItemStatus("completed"), sdk.ItemStatus("failed"), sdk.ItemStatus("declined")},
		sdk.EventRequestResolved: {sdk.Decision("accept"), sdk.Decision("accept_for_session"), sdk.Decision("decline"), sdk.Decision("cancel"), sdk.Decision("answer")},
		sdk.EventItemUpdated:     nil,
		sdk.EventContentDelta:    nil,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("StatusesFor (-want +got):\n%s", diff)
	}
}
