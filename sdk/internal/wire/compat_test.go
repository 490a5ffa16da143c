package wire_test

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/baton-run/baton/sdk"
	"github.com/baton-run/baton/sdk/pluginclient"
)

// The wire stays compatible across sdk releases: fields are only added.
// These tests run, through go-plugin's real handshake, programs built from
// the protocol as it was before sdk v1 (testdata/v0: its generated code,
// frozen from commit 7612ad0, which had no DescribeResponse.sdk_version
// and still had Capabilities.fork) against the sdk of today, both ways.

// build builds a main package of the sdk module into the test's temp dir.
func build(t *testing.T, pkg string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), filepath.Base(pkg))
	cmd := exec.Command("go", "build", "-o", out, pkg)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build %s: %v\n%s", pkg, err, b)
	}
	return out
}

// A plugin built before sdk v1 works with today's host: its description
// reads with no sdk version (and its fork capability, which sdk v1
// dropped, ignored), and a session's events arrive whole.
func TestOldPluginNewHost(t *testing.T) {
	p, err := pluginclient.Launch(pluginclient.LaunchConfig{Path: build(t, "./testdata/v0/oldplugin")})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Kill()
	ctx := t.Context()
	d, err := p.Describe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := sdk.Description{Name: "oldplugin", Version: "0.9.0", WireProtocol: "none",
		Capabilities: sdk.Capabilities{Interrupt: true, Resume: true}, Notes: map[string]string{"interrupt": "asks nicely"}}
	if diff := cmp.Diff(want, d); diff != "" {
		t.Errorf("the old plugin's description (-want +got):\n%s", diff)
	}
	open, err := p.OpenSession(ctx, sdk.OpenSessionRequest{SessionID: "s1", Cwd: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if w := (sdk.OpenSessionResponse{ProviderSessionRef: "old-s1", ProviderThreadRef: "old-thread"}); open != w {
		t.Errorf("open session: %+v, want %+v", open, w)
	}
	turn, err := p.StartTurn(ctx, sdk.StartTurnRequest{SessionID: "s1", Input: sdk.TurnInput{Text: "hi"}, ClientTurnID: "ct1"})
	if err != nil || turn.TurnRef != "t1" {
		t.Fatalf("start turn: %+v, %v", turn, err)
	}
	var got []sdk.RuntimeEvent
	for ev, err := range p.Events(ctx, "s1", 0) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, ev)
		if ev.Kind == sdk.EventTurnTerminal {
			if err := p.CloseSession(ctx, "s1"); err != nil {
				t.Fatal(err)
			}
		}
	}
	wantEvents := []sdk.RuntimeEvent{
		{SessionID: "s1", Sequence: 1, Kind: sdk.EventTurnStarted, ThreadRef: "old-thread", TurnRef: "t1", ClientTurnID: "ct1"},
		{SessionID: "s1", Sequence: 2, Kind: sdk.EventContentDelta, TurnRef: "t1", ItemRef: "m1", ItemKind: sdk.ItemAssistantMessage, Text: "you said: hi"},
		{SessionID: "s1", Sequence: 3, Kind: sdk.EventTurnTerminal, TurnRef: "t1", Status: sdk.TurnCompleted, Usage: &sdk.Usage{InputTokens: 3, OutputTokens: 4}},
		{SessionID: "s1", Sequence: 4, Kind: sdk.EventRuntimeExited, Status: sdk.ExitClosed},
	}
	if diff := cmp.Diff(wantEvents, got); diff != "" {
		t.Errorf("the old plugin's events (-want +got):\n%s", diff)
	}
}

// oldRead is what the old host printed: the v0 messages in encoding/json's
// form of the generated structs.
type oldRead struct {
	Describe struct {
		Name         string          `json:"name"`
		Version      string          `json:"version"`
		WireProtocol string          `json:"wire_protocol"`
		Capabilities map[string]bool `json:"capabilities"`
		Notes        map[string]string
	}
	DescribeUnknown []byte
	Open            map[string]any
	Turn            map[string]any
	Events          []map[string]any
}

// A plugin built with today's sdk works with a host built before sdk v1:
// the host reads its description (the sdk version, a field it does not
// know, arrives and is left alone) and its events.
func TestNewPluginOldHost(t *testing.T) {
	host, plugin := build(t, "./testdata/v0/oldhost"), build(t, "./testdata/newplugin")
	out, err := exec.Command(host, plugin).Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("the old host: %v\n%s", err, stderr)
	}
	var got oldRead
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("the old host printed %s: %v", out, err)
	}
	var want oldRead
	want.Describe.Name, want.Describe.Version, want.Describe.WireProtocol = "newplugin", "1.2.3", "none"
	want.Describe.Capabilities = map[string]bool{"interrupt": true}
	want.Describe.Notes = map[string]string{"interrupt": "asks nicely"}
	// DescribeResponse.sdk_version (6), which the old protocol has not.
	want.DescribeUnknown = protowire.AppendString(protowire.AppendTag(nil, 6, protowire.BytesType), sdk.Version)
	want.Open = map[string]any{"provider_session_ref": "new-s1", "provider_thread_ref": "new-thread"}
	want.Turn = map[string]any{"turn_ref": "t1"}
	want.Events = []map[string]any{ // kinds are the v0 enum's numbers
		{"session_id": "s1", "sequence": 1.0, "kind": 3.0, "thread_ref": "new-thread", "turn_ref": "t1", "client_turn_id": "ct1"},
		{"session_id": "s1", "sequence": 2.0, "kind": 7.0, "turn_ref": "t1", "item_ref": "m1", "item_kind": "assistant_message", "text": "you said: hi"},
		{"session_id": "s1", "sequence": 3.0, "kind": 13.0, "turn_ref": "t1", "status": "completed",
			"usage": map[string]any{"input_tokens": 3.0, "output_tokens": 4.0}},
		{"session_id": "s1", "sequence": 4.0, "kind": 14.0, "status": "closed"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("what the old host read (-want +got):\n%s", diff)
	}
}
