package server_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-run/baton/sdk"
	"github.com/baton-run/baton/sdk/plugintest"
	"github.com/baton-run/baton/sdk/server"
)

// plain is an adapter with no optional capability that remembers the
// requests it opened sessions with.
type plain struct {
	mu     sync.Mutex
	opened []sdk.OpenSessionRequest
	resp   sdk.OpenSessionResponse
}

func (*plain) Describe() sdk.Description {
	return sdk.Description{Name: "plain", Version: "0.1.0", WireProtocol: "none", Notes: map[string]string{sdk.NoteResume: "no"}}
}
func (a *plain) OpenSession(_ context.Context, req sdk.OpenSessionRequest, _ sdk.Emitter) (sdk.OpenSessionResponse, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.opened = append(a.opened, req)
	return a.resp, nil
}
func (*plain) StartTurn(context.Context, sdk.StartTurnRequest) (sdk.StartTurnResponse, error) {
	return sdk.StartTurnResponse{}, nil
}
func (*plain) CloseSession(context.Context, string) error { return nil }

// resuming is plain with the resume capability.
type resuming struct {
	plain
	resumed []string
}

func (*resuming) Describe() sdk.Description {
	return sdk.Description{Name: "resuming", Version: "0.1.0", WireProtocol: "none", Capabilities: sdk.Capabilities{Resume: true}}
}
func (a *resuming) ResumeSession(_ context.Context, req sdk.OpenSessionRequest, _ sdk.Emitter) (sdk.OpenSessionResponse, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.resumed = append(a.resumed, req.ResumeThreadRef)
	return sdk.OpenSessionResponse{ProviderThreadRef: req.ResumeThreadRef, Resumed: true}, nil
}

// A plugin without resume is never given a thread to resume: it opens a
// fresh session, and the host is told it did not resume, whatever the
// adapter answered. A Resumer is asked to resume; a fresh open of a
// Resumer goes to OpenSession.
func TestResumeGoesToResumersOnly(t *testing.T) {
	ctx := t.Context()
	p := &plain{resp: sdk.OpenSessionResponse{ProviderThreadRef: "fresh", Resumed: true}}
	c := plugintest.InProcess(t, p)
	got, err := c.OpenSession(ctx, sdk.OpenSessionRequest{SessionID: "s1", Cwd: "/w", ResumeThreadRef: "T1"})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(sdk.OpenSessionResponse{ProviderThreadRef: "fresh"}, got); diff != "" {
		t.Errorf("response of a plugin without resume (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]sdk.OpenSessionRequest{{SessionID: "s1", Cwd: "/w"}}, p.opened); diff != "" {
		t.Errorf("what OpenSession was given (-want +got):\n%s", diff)
	}

	r := &resuming{}
	c = plugintest.InProcess(t, r)
	got, err = c.OpenSession(ctx, sdk.OpenSessionRequest{SessionID: "s1", ResumeThreadRef: "T1"})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(sdk.OpenSessionResponse{ProviderThreadRef: "T1", Resumed: true}, got); diff != "" {
		t.Errorf("response of a Resumer (-want +got):\n%s", diff)
	}
	if _, err := c.OpenSession(ctx, sdk.OpenSessionRequest{SessionID: "s2"}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"T1"}, r.resumed); diff != "" {
		t.Errorf("resumed (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]sdk.OpenSessionRequest{{SessionID: "s2"}}, r.opened); diff != "" {
		t.Errorf("opened fresh (-want +got):\n%s", diff)
	}
}

// Asking a plugin for a capability it lacks is ErrUnsupported, naming
// what was asked; its description carries the sdk's version.
func TestMissingCapabilitiesAreUnsupported(t *testing.T) {
	ctx := t.Context()
	c := plugintest.InProcess(t, &plain{})
	d, err := c.Describe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := sdk.Description{Name: "plain", Version: "0.1.0", WireProtocol: "none", Notes: map[string]string{sdk.NoteResume: "no"}, SDKVersion: sdk.Version}
	if diff := cmp.Diff(want, d); diff != "" {
		t.Errorf("Describe (-want +got):\n%s", diff)
	}
	_, rollback := c.RollbackThread(ctx, sdk.RollbackThreadRequest{SessionID: "s", Turns: 1})
	_, snapshot := c.ReadThreadSnapshot(ctx, sdk.ReadThreadSnapshotRequest{SessionID: "s"})
	for what, err := range map[string]error{
		"steer turn: unsupported":           c.SteerTurn(ctx, sdk.SteerTurnRequest{SessionID: "s"}),
		"interrupt turn: unsupported":       c.InterruptTurn(ctx, sdk.InterruptTurnRequest{SessionID: "s"}),
		"respond to request r: unsupported": c.RespondToRequest(ctx, sdk.RespondToRequestRequest{SessionID: "s", RequestRef: "r"}),
		"rollback thread: unsupported":      rollback,
		"read thread snapshot: unsupported": snapshot,
	} {
		if !errors.Is(err, sdk.ErrUnsupported) || err.Error() != what {
			t.Errorf("%s: got %v", what, err)
		}
	}
}

// Serve refuses, before it serves anything, a plugin whose capabilities
// disagree with its methods or whose description is incomplete.
func TestServeRefuses(t *testing.T) {
	for _, tc := range []struct {
		a    sdk.Adapter
		want string
	}{
		{&lying{}, "serve plugin: plugin lying: capabilities declared and implemented differ: declares interrupt but does not implement sdk.Interrupter (InterruptTurn)"},
		{&nameless{}, `serve plugin: its description must name it, its version and its wire protocol, got name "", version "1", wire protocol "w"`},
	} {
		err := server.Serve(tc.a)
		if err == nil || err.Error() != tc.want {
			t.Errorf("Serve:\n got %v\nwant %s", err, tc.want)
		}
	}
}

type lying struct{ plain }

func (*lying) Describe() sdk.Description {
	return sdk.Description{Name: "lying", Version: "1", WireProtocol: "w", Capabilities: sdk.Capabilities{Interrupt: true}}
}

type nameless struct{ plain }

func (*nameless) Describe() sdk.Description { return sdk.Description{Version: "1", WireProtocol: "w"} }
