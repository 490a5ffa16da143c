package service_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/timestamppb"

	batonv1 "github.com/baton-run/baton/host/api/baton/v1"
	"github.com/baton-run/baton/host/internal/service"
)

// Usage and Limits through the API: codex's recorded turn's usage, its
// recorded usage limit's windows, and what the calls refuse.
func TestUsageAndLimitsRPCs(t *testing.T) {
	e := newEnv(t, service.Options{})
	ctx := t.Context()
	for _, c := range []struct{ transcript, text string }{
		{"codex/simple.ndjson", "Say hello"},
		{"codex/usage_limit.ndjson", messages(t, "codex/usage_limit.messages")[0]},
	} {
		threadID := e.create("create "+c.transcript, "", "codex", c.transcript, "").GetThreadId()
		if _, err := e.client.SendMessage(ctx, &batonv1.SendMessageRequest{ThreadId: threadID, Text: c.text}); err != nil {
			t.Fatal(err)
		}
		e.waitFor(threadID, "the run to end", allRunsEnded(1))
	}

	codex := &batonv1.Usage{InputTokens: 11860, OutputTokens: 16, TotalTokens: 11876}
	got, err := e.client.Usage(ctx, &batonv1.UsageRequest{By: "provider"})
	if err != nil {
		t.Fatal(err)
	}
	want := &batonv1.UsageResponse{Lines: []*batonv1.UsageLine{{Key: "codex", Usage: codex}}, Total: codex}
	if d := cmp.Diff(want, got, protocmp.Transform()); d != "" {
		t.Errorf("usage (-want +got):\n%s", d)
	}
	got, err = e.client.Usage(ctx, &batonv1.UsageRequest{Since: timestamppb.New(epoch.Add(time.Hour))})
	if err != nil || len(got.GetLines()) != 0 {
		t.Errorf("usage since an hour after it: %v, %v; want none", got, err)
	}

	limits, err := e.client.Limits(ctx, &batonv1.LimitsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	at := timestamppb.New(epoch)
	wantLimits := &batonv1.LimitsResponse{Limits: []*batonv1.RateLimit{
		{Provider: "codex", Scope: "codex/primary", UsedPercent: 100, ResetsAt: timestamppb.New(time.Date(2026, 12, 1, 19, 12, 45, 0, time.UTC)), At: at},
		{Provider: "codex", Scope: "codex/secondary", UsedPercent: 41, At: at},
	}}
	if d := cmp.Diff(wantLimits, limits, protocmp.Transform()); d != "" {
		t.Errorf("limits (-want +got):\n%s", d)
	}

	for _, c := range []struct {
		req  *batonv1.UsageRequest
		code codes.Code
		msg  string
	}{
		{&batonv1.UsageRequest{By: "week"}, codes.InvalidArgument, `by: unknown grouping "week"; want provider, thread, model or day`},
		{&batonv1.UsageRequest{ThreadId: "thr_none"}, codes.NotFound, `usage: not found: thread "thr_none"`},
	} {
		_, err := e.client.Usage(ctx, c.req)
		if st, _ := status.FromError(err); st.Code() != c.code || st.Message() != c.msg {
			t.Errorf("usage %v: %v; want %s %q", c.req, err, c.code, c.msg)
		}
	}
}
