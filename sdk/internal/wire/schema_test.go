package wire

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"pgregory.net/rapid"

	"github.com/baton-run/baton/sdk"
	pb "github.com/baton-run/baton/sdk/internal/pluginpb"
)

func fullEvent() sdk.RuntimeEvent {
	return sdk.RuntimeEvent{SessionID: "s", Sequence: 7, Kind: sdk.EventRequestOpened, RawFrame: 3, ThreadRef: "t", ParentThreadRef: "p",
		TurnRef: "u", ItemRef: "i", ParentItemRef: "pi", ClientTurnID: "att", ItemKind: sdk.ItemToolCall, Title: "T", Text: "x", Status: sdk.StatusOf(sdk.EventRequestOpened, "s"),
		RequestRef: "r", RequestKind: "permission", Options: []sdk.RequestOption{{ID: "a", Label: "Allow", Kind: "allow_once"}},
		Usage:     &sdk.Usage{InputTokens: 1, OutputTokens: 2, CachedInputTokens: 3, ReasoningTokens: 4, TotalTokens: 10},
		RateLimit: &sdk.RateLimit{ResetsAt: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC), UsedPercent: 50, Scope: "5h"},
		Failure:   &sdk.Failure{Code: "c", Message: "m"}, ThreadUsable: true, Detail: json.RawMessage(`{"k":1}`)}
}

// Level 1: the wire messages and their JSON forms round-trip.
func TestRuntimeEventRoundTrips(t *testing.T) {
	ev := fullEvent()
	if diff := cmp.Diff(ev, EventFromWire(EventToWire(ev))); diff != "" {
		t.Errorf("Go -> wire -> Go changed the event:\n%s", diff)
	}
	w := EventToWire(ev)
	js, err := protojson.Marshal(w)
	if err != nil {
		t.Fatal(err)
	}
	var back pb.RuntimeEvent
	if err := protojson.Unmarshal(js, &back); err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(w, &back) {
		t.Errorf("protojson round trip changed the message: %s", js)
	}
	b, _ := json.Marshal(ev)
	var ev2 sdk.RuntimeEvent
	if err := json.Unmarshal(b, &ev2); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(ev, ev2); diff != "" {
		t.Errorf("the Go JSON form does not round-trip:\n%s", diff)
	}
	for kind := range eventKindToWire {
		if EventFromWire(EventToWire(sdk.RuntimeEvent{Kind: kind})).Kind != kind {
			t.Errorf("kind %s does not round-trip", kind)
		}
	}
}

// Each status is of its kind's vocabulary, a type of its own, and its
// wire forms are its word as they always were: the same "failed" ends a
// turn, an item or a process, and the three are not one status.
func TestStatusesKeepTheirVocabulary(t *testing.T) {
	for _, c := range []struct {
		kind   sdk.EventKind
		status sdk.Status
		json   string
	}{
		{sdk.EventTurnTerminal, sdk.TurnFailed, `{"sessionId":"s","sequence":1,"kind":"turn_terminal","status":"failed"}`},
		{sdk.EventRuntimeExited, sdk.ExitFailed, `{"sessionId":"s","sequence":1,"kind":"runtime_exited","status":"failed"}`},
		{sdk.EventItemCompleted, sdk.ItemFailed, `{"sessionId":"s","sequence":1,"kind":"item_completed","status":"failed"}`},
		{sdk.EventItemUpdated, sdk.ItemStatus("pending"), `{"sessionId":"s","sequence":1,"kind":"item_updated","status":"pending"}`},
		{sdk.EventRequestResolved, sdk.DecisionDecline, `{"sessionId":"s","sequence":1,"kind":"request_resolved","status":"decline"}`},
		{sdk.EventTurnStarted, nil, `{"sessionId":"s","sequence":1,"kind":"turn_started"}`},
	} {
		ev := sdk.RuntimeEvent{SessionID: "s", Sequence: 1, Kind: c.kind, Status: c.status}
		w := EventToWire(ev)
		if w.GetStatus() != sdk.StatusWord(c.status) {
			t.Errorf("%s: the wire carries status %q; want %q", c.kind, w.GetStatus(), sdk.StatusWord(c.status))
		}
		if got := EventFromWire(w).Status; got != c.status {
			t.Errorf("%s: %T %q off the wire; want %T %q", c.kind, got, sdk.StatusWord(got), c.status, sdk.StatusWord(c.status))
		}
		b, err := json.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != c.json {
			t.Errorf("%s: JSON %s; want %s", c.kind, b, c.json)
		}
		var back sdk.RuntimeEvent
		if err := json.Unmarshal([]byte(c.json), &back); err != nil {
			t.Fatalf("%s: %v", c.kind, err)
		}
		if diff := cmp.Diff(ev, back); diff != "" {
			t.Errorf("%s: the JSON form read back:\n%s", c.kind, diff)
		}
	}
	// JSON without a status leaves the event's, as it leaves any field.
	ev := sdk.RuntimeEvent{Kind: sdk.EventTurnTerminal, Status: sdk.TurnInterrupted}
	if err := json.Unmarshal([]byte(`{"title":"t"}`), &ev); err != nil || ev.Status != sdk.Status(sdk.TurnInterrupted) || ev.Title != "t" {
		t.Errorf("JSON with no status read into a turn_terminal interrupted: %+v, %v; want it interrupted, titled t", ev, err)
	}
	if sdk.Status(sdk.TurnFailed) == sdk.Status(sdk.ItemFailed) || sdk.Status(sdk.TurnFailed) == sdk.Status(sdk.ExitFailed) ||
		sdk.Status(sdk.ItemFailed) == sdk.Status(sdk.ExitFailed) {
		t.Error(`a turn's, an item's and a process's "failed" are one status`)
	}
}

// A field added by a newer plugin does not break an older host, and an
// event kind it does not know arrives as "unknown", not as garbage.
func TestNewFieldsDoNotBreakOldReaders(t *testing.T) {
	b, err := proto.Marshal(EventToWire(fullEvent()))
	if err != nil {
		t.Fatal(err)
	}
	b = protowire.AppendTag(b, 999, protowire.BytesType)
	b = protowire.AppendString(b, "from the future")
	var got pb.RuntimeEvent
	if err := proto.Unmarshal(b, &got); err != nil {
		t.Fatalf("an unknown field broke decoding: %v", err)
	}
	if got.GetText() != "x" || got.GetSequence() != 7 {
		t.Errorf("known fields lost: %v", &got)
	}
	got.Kind = pb.EventKind(99)
	if k := EventFromWire(&got).Kind; k != unknownEventKind {
		t.Errorf("unknown kind decoded as %q", k)
	}
}

func TestCapabilitiesAndOpenRequestRoundTrip(t *testing.T) {
	c := sdk.Capabilities{NativeSteering: true, Interrupt: true, Approvals: true, Subagents: true, NativeRollback: true, Resume: true, ThreadSnapshot: true}
	if CapsFromWire(CapsToWire(c)) != c {
		t.Error("capabilities do not round-trip")
	}
	r := sdk.OpenSessionRequest{SessionID: "s", Cwd: "/w", Model: "m", RuntimePolicy: "p",
		Command: sdk.ProviderCommand{Argv: []string{"a", "b"}, Env: []string{"K=V"}}, ResumeThreadRef: "t", RawFrameLog: "/l",
		MCPServers: []sdk.MCPServer{{Name: "fs", Transport: sdk.MCPStdio, Command: "mcp-fs", Args: []string{"--root", "/w"},
			Env: []sdk.NameValue{{Name: "TOKEN", Value: "s3cret"}}},
			{Name: "web", Transport: sdk.MCPHTTP, URL: "https://127.0.0.1:9/mcp", Headers: []sdk.NameValue{{Name: "Authorization", Value: "Bearer x"}}}}}
	if diff := cmp.Diff(r, OpenFromWire(OpenToWire(r))); diff != "" {
		t.Errorf("open request:\n%s", diff)
	}
}

// The rollback request keeps every field through the wire message, its
// protojson form and its Go JSON form; the turn check is omitted from JSON
// when the host does not know the turn.
func TestRollbackRequestRoundTrips(t *testing.T) {
	r := sdk.RollbackThreadRequest{SessionID: "s", ThreadRef: "t", Turns: 2, BeforeTurnRef: "u2"}
	if diff := cmp.Diff(r, RollbackFromWire(RollbackToWire(r))); diff != "" {
		t.Errorf("Go -> wire -> Go changed the rollback request:\n%s", diff)
	}
	w := RollbackToWire(r)
	js, err := protojson.Marshal(w)
	if err != nil {
		t.Fatal(err)
	}
	var back pb.RollbackThreadRequest
	if err := protojson.Unmarshal(js, &back); err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(w, &back) || back.GetBeforeTurnRef() != "u2" {
		t.Errorf("protojson round trip changed the message: %s", js)
	}
	b, _ := json.Marshal(r)
	var r2 sdk.RollbackThreadRequest
	if err := json.Unmarshal(b, &r2); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(r, r2); diff != "" {
		t.Errorf("the Go JSON form does not round-trip:\n%s", diff)
	}
	if want := `"beforeTurnRef":"u2"`; !strings.Contains(string(b), want) {
		t.Errorf("JSON form %s; want %s", b, want)
	}
	b, _ = json.Marshal(sdk.RollbackThreadRequest{SessionID: "s", ThreadRef: "t", Turns: 1})
	if strings.Contains(string(b), "beforeTurnRef") {
		t.Errorf("JSON form %s names beforeTurnRef though it is empty", b)
	}
}

// Every instant UnixSeconds gives crosses the wire as it is.
func TestResetInstantsCrossTheWire(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		got := sdk.UnixSeconds(rapid.Int64Range(0, sdk.MaxUnixSeconds).Draw(t, "sec"))
		ev := sdk.RuntimeEvent{Kind: sdk.EventRateLimit, RateLimit: &sdk.RateLimit{ResetsAt: got}}
		if w := EventFromWire(EventToWire(ev)); !w.RateLimit.ResetsAt.Equal(got) {
			t.Fatalf("wire: %v back as %v", got, w.RateLimit.ResetsAt)
		}
	})
}
