package service_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/timestamppb"

	batonv1 "github.com/baton-run/baton/host/api/baton/v1"
	"github.com/baton-run/baton/host/internal/domain"
	"github.com/baton-run/baton/host/internal/service"
)

// SwitchProvider records the switch (thread.provider_switched, then the
// handoff the next run will carry) and the projection shows both
// providers' bindings; a repeat returns the first receipt and writes
// nothing; a return to a provider that has seen everything keeps its
// command and needs no handoff.
func TestSwitchProvider(t *testing.T) {
	e := newEnv(t, service.Options{})
	ctx := t.Context()
	threadID := e.create("create", "", "acp", "acp/simple.ndjson", "").GetThreadId()
	if _, err := e.client.SendMessage(ctx, &batonv1.SendMessageRequest{CommandId: "send", ThreadId: threadID,
		Text: messages(t, "acp/simple.messages")[0]}); err != nil {
		t.Fatal(err)
	}
	ran := e.waitFor(threadID, "the run to end", allRunsEnded(1))
	before := e.host.LastSequence()
	acp := ran.ProviderCommand // the command the thread was created with

	codex := e.peer("codex/simple.ndjson")
	sw := &batonv1.SwitchProviderRequest{CommandId: "switch", ThreadId: threadID, Provider: "codex", Model: "gpt-test",
		ProviderCommand: codex, HandoffMaxBytes: 8192}
	rc, err := e.client.SwitchProvider(ctx, sw)
	if err != nil {
		t.Fatal(err)
	}
	want := &batonv1.Receipt{CommandId: "switch", Type: "thread.switch_provider", ThreadId: threadID, Sequence: rc.GetSequence(),
		At: timestamppb.New(epoch)}
	if d := cmp.Diff(want, rc, protocmp.Transform()); d != "" || rc.GetSequence() <= before {
		t.Errorf("switch receipt (-want +got):\n%s", d)
	}
	stream, err := e.client.Subscribe(ctx, &batonv1.SubscribeRequest{ThreadId: threadID, AfterSequence: before})
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for seq := before; seq < rc.GetSequence(); {
		ev, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		types, seq = append(types, ev.GetType()), ev.GetSequence()
	}
	if d := cmp.Diff([]string{"thread.provider_switched", "handoff.created"}, types); d != "" {
		t.Errorf("the switch's events (-want +got):\n%s", d)
	}

	got, err := e.client.GetThread(ctx, &batonv1.GetThreadRequest{ThreadId: threadID})
	if err != nil {
		t.Fatal(err)
	}
	if s := got.GetSummary(); s.GetProvider() != "codex" || s.GetModel() != "gpt-test" {
		t.Errorf("summary: provider %q model %q, want codex gpt-test", s.GetProvider(), s.GetModel())
	}
	th := decodeThread(t, got)
	run := ran.Runs[0]
	session := run.Attempts[0].SessionID
	pthread := ran.ProviderThreads[0]
	wantBindings := []domain.ProviderBinding{
		{Provider: "acp", Command: acp, SessionID: session,
			ProviderThreadID: pthread.ID, ThreadRef: pthread.ProviderRef, SeenThrough: 1, Runs: []int{1}},
		{Provider: "codex", Model: "gpt-test", Command: domain.ProviderCommand{Argv: codex.GetArgv()}},
	}
	if d := cmp.Diff(wantBindings, th.ProviderBindings); d != "" {
		t.Errorf("provider bindings (-want +got):\n%s", d)
	}
	if th.Provider != "codex" || th.Model != "gpt-test" || th.HandoffMaxBytes != 8192 {
		t.Errorf("thread provider %q model %q handoff bound %d; want codex gpt-test 8192", th.Provider, th.Model, th.HandoffMaxBytes)
	}
	if len(th.Handoffs) != 1 {
		t.Fatalf("handoffs %+v, want one", th.Handoffs)
	}
	h := th.Handoffs[0]
	var msgIDs []string
	for _, m := range th.Messages {
		msgIDs = append(msgIDs, m.ID)
	}
	wantHandoff := domain.ContextHandoff{ID: h.ID, Strategy: domain.HandoffFullThreadSummary, Version: domain.HandoffVersion,
		FromProvider: "acp", ToProvider: "codex", FromRun: 1, ToRun: 1,
		Runs:  []domain.HandoffRun{{Ordinal: 1, RunID: run.ID, Provider: "acp", MessageIDs: msgIDs}},
		Bytes: len(h.Text), Status: domain.HandoffReady, Text: h.Text}
	if d := cmp.Diff(wantHandoff, h); d != "" || !strings.Contains(h.Text, run.Input) {
		t.Errorf("handoff (-want +got):\n%s\ntext:\n%s", d, h.Text)
	}

	// A repeat: the first receipt, nothing written.
	head := e.host.LastSequence()
	again, err := e.client.SwitchProvider(ctx, sw)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(rc, again, protocmp.Transform()); d != "" {
		t.Errorf("repeated switch (-first +repeat):\n%s", d)
	}
	if got := e.host.LastSequence(); got != head {
		t.Errorf("the repeat wrote events: head %d -> %d", head, got)
	}

	// Back to acp, which saw run 1 and nothing since: its command is kept,
	// and the handoff made for codex is no longer needed.
	if _, err := e.client.SwitchProvider(ctx, &batonv1.SwitchProviderRequest{CommandId: "back", ThreadId: threadID, Provider: "acp"}); err != nil {
		t.Fatal(err)
	}
	back := e.waitFor(threadID, "the switch back", func(t domain.Thread) bool { return t.Provider == "acp" })
	wantBindings[1].Runs = nil
	if d := cmp.Diff(wantBindings, back.ProviderBindings); d != "" {
		t.Errorf("provider bindings after the return (-want +got):\n%s", d)
	}
	if d := cmp.Diff(acp, back.ProviderCommand); d != "" {
		t.Errorf("thread command after the return (-acp's +got):\n%s", d)
	}
	wantHandoff.Status = domain.HandoffStatusSuperseded
	if d := cmp.Diff([]domain.ContextHandoff{wantHandoff}, back.Handoffs, cmpopts.EquateEmpty()); d != "" {
		t.Errorf("handoffs after the return (-want +got):\n%s", d)
	}
}

// What SwitchProvider refuses, naming the field, the id or the state.
func TestSwitchProviderRefusals(t *testing.T) {
	e := newEnv(t, service.Options{})
	ctx := t.Context()
	idle := e.create("c-idle", "idle", "acp", "acp/simple.ndjson", "").GetThreadId()
	codex := e.peer("codex/simple.ndjson")
	head := e.host.LastSequence()
	for _, tc := range []struct {
		name string
		req  *batonv1.SwitchProviderRequest
		code codes.Code
		msg  string
	}{
		{"no thread", &batonv1.SwitchProviderRequest{Provider: "codex", ProviderCommand: codex}, codes.InvalidArgument, "thread_id: required"},
		{"no provider", &batonv1.SwitchProviderRequest{ThreadId: idle}, codes.InvalidArgument, "provider: required"},
		{"a new provider, no command", &batonv1.SwitchProviderRequest{ThreadId: idle, Provider: "codex"}, codes.InvalidArgument,
			"provider_command: required: thread idle has not used codex"},
		{"env without argv", &batonv1.SwitchProviderRequest{ThreadId: idle, Provider: "acp", ProviderCommand: &batonv1.ProviderCommand{Env: []string{"A=1"}}},
			codes.InvalidArgument, "provider_command: env without argv"},
		{"a bound too small", &batonv1.SwitchProviderRequest{ThreadId: idle, Provider: "codex", ProviderCommand: codex, HandoffMaxBytes: 100},
			codes.InvalidArgument, "handoff_max_bytes: 100 is below the least, 4096"},
		{"not a provider name", &batonv1.SwitchProviderRequest{ThreadId: idle, Provider: "Co dex", ProviderCommand: codex},
			codes.InvalidArgument, `provider: "Co dex" is not a provider name`},
		{"unknown thread", &batonv1.SwitchProviderRequest{ThreadId: "nope", Provider: "codex"}, codes.NotFound, `thread "nope"`},
		{"unknown thread, with a command", &batonv1.SwitchProviderRequest{ThreadId: "nope", Provider: "codex", ProviderCommand: codex},
			codes.NotFound, `thread "nope"`},
		{"command id in use", &batonv1.SwitchProviderRequest{CommandId: "c-idle", ThreadId: idle, Provider: "codex", ProviderCommand: codex},
			codes.AlreadyExists, "command id c-idle already exists"},
	} {
		_, err := e.client.SwitchProvider(ctx, tc.req)
		if status.Code(err) != tc.code || !strings.Contains(status.Convert(err).Message(), tc.msg) {
			t.Errorf("%s: %v; want %s with %q", tc.name, err, tc.code, tc.msg)
		}
	}
	if got := e.host.LastSequence(); got != head {
		t.Errorf("refused switches wrote events: head %d -> %d", head, got)
	}
}
