package service_test

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	batonv1 "github.com/baton-run/baton/host/api/baton/v1"
	"github.com/baton-run/baton/host/internal/domain"
	"github.com/baton-run/baton/host/internal/service"
)

// A policy the service refuses names the field at fault, whichever request
// carries it, and writes nothing.
func TestSetPolicyErrors(t *testing.T) {
	e := newEnv(t, service.Options{})
	ctx := t.Context()
	idle := e.create("c-idle", "idle", "acp", "acp/simple.ndjson", "").GetThreadId()
	before := e.host.LastSequence()
	for _, tc := range []struct {
		name   string
		policy *batonv1.ContinuationPolicy
		msg    string
	}{
		{"unknown on_limit", &batonv1.ContinuationPolicy{OnLimit: "sleep"}, `policy.on_limit: unknown "sleep"; want wait or switch`},
		{"switch with no target", &batonv1.ContinuationPolicy{OnLimit: "switch"}, "policy.switch_to: required"},
		{"switch target not a provider name", &batonv1.ContinuationPolicy{OnLimit: "switch", SwitchTo: "Claude Code"},
			`policy: on-limit switch needs a provider name ([a-z0-9][a-z0-9-]*), got "Claude Code"`},
		{"target without switch", &batonv1.ContinuationPolicy{OnLimit: "wait", SwitchTo: "claude"}, "policy.switch_to: only with on_limit switch"},
		{"return without switch", &batonv1.ContinuationPolicy{Return: true}, "policy.return: only with on_limit switch"},
		{"model without switch", &batonv1.ContinuationPolicy{SwitchModel: "m"}, "policy.switch_model: only with on_limit switch"},
		{"command without switch", &batonv1.ContinuationPolicy{SwitchProviderCommand: &batonv1.ProviderCommand{Argv: []string{"claude"}}},
			"policy.switch_provider_command: only with on_limit switch"},
		{"command env without argv", &batonv1.ContinuationPolicy{OnLimit: "switch", SwitchTo: "claude",
			SwitchProviderCommand: &batonv1.ProviderCommand{Env: []string{"A=1"}}}, "policy.switch_provider_command: env without argv"},
		{"blank until", &batonv1.ContinuationPolicy{Until: "  "}, "policy.until: blank"},
		{"blank continue text", &batonv1.ContinuationPolicy{OnLimit: "wait", ContinueText: "\n"}, "policy.continue_text: blank"},
		{"negative probe interval", &batonv1.ContinuationPolicy{OnLimit: "wait", ProbeInterval: durationpb.New(-time.Minute)},
			"policy.probe_interval: must not be negative, got -1m0s"},
		{"invalid max wait", &batonv1.ContinuationPolicy{OnLimit: "wait", MaxWait: &durationpb.Duration{Seconds: 1, Nanos: -1}},
			"policy.max_wait: "},
		{"negative check timeout", &batonv1.ContinuationPolicy{Until: "true", CheckTimeout: durationpb.New(-time.Second)},
			"policy.check_timeout: must not be negative"},
		{"negative max duration", &batonv1.ContinuationPolicy{MaxDuration: durationpb.New(-time.Hour)}, "policy.max_duration: must not be negative"},
		{"factor below 1", &batonv1.ContinuationPolicy{OnLimit: "wait", ProbeFactor: 0.5}, "policy.probe_factor: must be at least 1 (0: the default, 2), got 0.5"},
		{"ceiling below interval", &batonv1.ContinuationPolicy{OnLimit: "wait", ProbeInterval: durationpb.New(time.Hour),
			ProbeCeiling: durationpb.New(time.Minute)}, "policy.probe_ceiling: 1m0s is below probe_interval 1h0m0s"},
		{"negative max tokens", &batonv1.ContinuationPolicy{MaxTokens: -1}, "policy.max_tokens: must not be negative, got -1"},
	} {
		calls := map[string]func() error{
			"SetPolicy": func() error {
				_, err := e.client.SetPolicy(ctx, &batonv1.SetPolicyRequest{ThreadId: idle, Policy: tc.policy})
				return err
			},
			"CreateThread": func() error {
				_, err := e.client.CreateThread(ctx, &batonv1.CreateThreadRequest{Provider: "acp", Cwd: e.ws, Policy: tc.policy})
				return err
			},
			"SendMessage": func() error {
				_, err := e.client.SendMessage(ctx, &batonv1.SendMessageRequest{ThreadId: idle, Text: "hi", Policy: tc.policy})
				return err
			},
		}
		for rpc, call := range calls {
			err := call()
			if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), tc.msg) {
				t.Errorf("%s: %s: %v; want InvalidArgument with %q", tc.name, rpc, err, tc.msg)
			}
		}
	}
	if _, err := e.client.SetPolicy(ctx, &batonv1.SetPolicyRequest{Policy: &batonv1.ContinuationPolicy{OnLimit: "wait"}}); status.Code(err) != codes.InvalidArgument ||
		status.Convert(err).Message() != "thread_id: required" {
		t.Errorf("SetPolicy with no thread: %v; want InvalidArgument thread_id: required", err)
	}
	if _, err := e.client.SetPolicy(ctx, &batonv1.SetPolicyRequest{ThreadId: idle, Policy: &batonv1.ContinuationPolicy{OnLimit: "switch",
		SwitchTo: "codex"}}); status.Code(err) != codes.InvalidArgument ||
		status.Convert(err).Message() != "policy.switch_provider_command: required: thread idle has not used codex, so there is no command of it to keep" {
		t.Errorf("SetPolicy switching to a provider the thread has not used, with no command: %v", err)
	}
	if _, err := e.client.SetPolicy(ctx, &batonv1.SetPolicyRequest{ThreadId: "nope"}); status.Code(err) != codes.NotFound {
		t.Errorf("SetPolicy of an unknown thread: %v; want NotFound", err)
	}
	if got := e.host.LastSequence(); got != before {
		t.Errorf("refused policies wrote events: sequence %d, was %d", got, before)
	}
}

// fullPolicy is a policy with every field set, and the domain's copy.
func fullPolicy() (*batonv1.ContinuationPolicy, domain.ContinuationPolicy) {
	pb := &batonv1.ContinuationPolicy{OnLimit: "switch", SwitchTo: "codex", SwitchModel: "gpt-test",
		SwitchProviderCommand: &batonv1.ProviderCommand{Argv: []string{"codex", "app-server"}, Env: []string{"A=1"}}, Return: true,
		ContinueText: "go on", ProbeInterval: durationpb.New(time.Minute), ProbeFactor: 3, ProbeCeiling: durationpb.New(2 * time.Hour),
		MaxProbes: 4, MaxWait: durationpb.New(48 * time.Hour), Until: "go test ./...", CheckTimeout: durationpb.New(5 * time.Minute),
		MaxRuns: 5, MaxDuration: durationpb.New(8 * time.Hour), MaxTokens: 1_000_000}
	d := domain.ContinuationPolicy{OnLimit: domain.OnLimitSwitch, SwitchTo: "codex", SwitchModel: "gpt-test",
		SwitchCommand: domain.ProviderCommand{Argv: []string{"codex", "app-server"}, Env: []string{"A=1"}}, Return: true,
		ContinueText: "go on", Probe: domain.Backoff{Interval: time.Minute, Factor: 3, Ceiling: 2 * time.Hour},
		MaxProbes: 4, MaxWait: 48 * time.Hour, Until: "go test ./...", CheckTimeout: 5 * time.Minute,
		MaxRuns: 5, MaxDuration: 8 * time.Hour, MaxTokens: 1_000_000}
	return pb, d
}

// SetPolicy records the policy (every field, defaults filled in) and the
// projection shows the thread's loop; a repeat returns the first receipt
// and writes nothing.
func TestSetPolicy(t *testing.T) {
	e := newEnv(t, service.Options{})
	ctx := t.Context()
	threadID := e.create("create", "", "acp", "acp/simple.ndjson", "").GetThreadId()
	pb, want := fullPolicy()
	req := &batonv1.SetPolicyRequest{CommandId: "policy", ThreadId: threadID, Policy: pb}
	rc, err := e.client.SetPolicy(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	wantRC := &batonv1.Receipt{CommandId: "policy", Type: "thread.set_policy", ThreadId: threadID, Sequence: e.host.LastSequence(),
		At: timestamppb.New(epoch)}
	if d := cmp.Diff(wantRC, rc, protocmp.Transform()); d != "" {
		t.Errorf("receipt (-want +got):\n%s", d)
	}
	again, err := e.client.SetPolicy(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(rc, again, protocmp.Transform()); d != "" || e.host.LastSequence() != rc.GetSequence() {
		t.Errorf("a repeat: (-first +repeat):\n%s", d)
	}
	got, err := e.client.GetThread(ctx, &batonv1.GetThreadRequest{ThreadId: threadID})
	if err != nil {
		t.Fatal(err)
	}
	wantLoop := &domain.Loop{Policy: want.WithDefaults(), Since: epoch, Status: domain.LoopActive}
	if d := cmp.Diff(wantLoop, decodeThread(t, got).Loop); d != "" {
		t.Errorf("the thread's loop (-want +got):\n%s", d)
	}

	// An empty policy turns it off.
	if _, err := e.client.SetPolicy(ctx, &batonv1.SetPolicyRequest{CommandId: "off", ThreadId: threadID}); err != nil {
		t.Fatal(err)
	}
	th, err := e.host.Thread(threadID)
	if err != nil {
		t.Fatal(err)
	}
	if th.Loop != nil && !th.Loop.Policy.Off() {
		t.Errorf("after an empty policy, the loop is %+v; want its policy off", th.Loop)
	}
}

// A create or a message that carries a policy sets it (once, whatever the
// retries): the create after the thread is made, the message before its
// run is queued.
func TestPolicyWithCreateAndSend(t *testing.T) {
	e := newEnv(t, service.Options{})
	ctx := t.Context()
	pb := &batonv1.ContinuationPolicy{OnLimit: "wait", MaxRuns: 3}
	create := &batonv1.CreateThreadRequest{CommandId: "create", ThreadId: "thr", Provider: "acp", Cwd: e.ws,
		ProviderCommand: e.peer("acp/simple.ndjson"), Policy: pb}
	rc, err := e.client.CreateThread(ctx, create)
	if err != nil {
		t.Fatal(err)
	}
	if rc.GetType() != "thread.create" || rc.GetSequence() != e.host.LastSequence() {
		t.Errorf("create receipt %v: want the create's, at the sequence after the policy (%d)", rc, e.host.LastSequence())
	}
	if again, err := e.client.CreateThread(ctx, create); err != nil || !cmp.Equal(rc, again, protocmp.Transform()) {
		t.Errorf("a repeated create: %v, %v; want the first receipt %v", again, err, rc)
	}
	th, err := e.host.Thread("thr")
	if err != nil {
		t.Fatal(err)
	}
	wantLoop := &domain.Loop{Policy: domain.ContinuationPolicy{OnLimit: domain.OnLimitWait, MaxRuns: 3}.WithDefaults(),
		Since: epoch, Status: domain.LoopActive}
	if d := cmp.Diff(wantLoop, th.Loop); d != "" {
		t.Errorf("the new thread's loop (-want +got):\n%s", d)
	}

	before := e.host.LastSequence()
	send := &batonv1.SendMessageRequest{CommandId: "send", ThreadId: "thr", Text: messages(t, "acp/simple.messages")[0],
		Policy: &batonv1.ContinuationPolicy{Until: "true"}}
	if _, err := e.client.SendMessage(ctx, send); err != nil {
		t.Fatal(err)
	}
	if _, err := e.client.SendMessage(ctx, send); err != nil {
		t.Fatal(err)
	}
	evs, err := e.host.ThreadEvents("thr", before)
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, ev := range evs[:min(2, len(evs))] {
		types = append(types, ev.Type)
	}
	if d := cmp.Diff([]string{"thread.policy_set", "message.added"}, types); d != "" {
		t.Errorf("the send's first events (-want +got):\n%s", d)
	}
	var policies int
	for _, ev := range evs {
		if ev.Type == "thread.policy_set" {
			policies++
		}
	}
	if policies != 1 {
		t.Errorf("a retried send set its policy %d times, want once", policies)
	}
}
