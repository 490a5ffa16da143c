package service_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/testing/protocmp"

	batonv1 "github.com/baton-run/baton/host/api/baton/v1"
	"github.com/baton-run/baton/host/internal/domain"
	"github.com/baton-run/baton/host/internal/service"
)

// GetThread of a thread of 20 runs: asked nothing, the runs the service
// holds (the newest 8) and what left, and it says what it leaves out; asked
// for runs, a page of them, its messages paged too; pages from run 1 on,
// end to end, are every run, message and checkpoint once. A rollback by
// run ordinal reaches a run that left.
func TestGetThreadPages(t *testing.T) {
	e := newEnv(t, service.Options{})
	ctx := t.Context()
	for _, args := range [][]string{{"init", "-q"}, {"-c", "user.name=t", "-c", "user.email=t@example.invalid", "commit", "-q", "--allow-empty", "-m", "init"}} {
		cmd := exec.Command("git", args...)
		cmd.Dir = e.ws
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	th := e.create("create", "", "acp", "acp/long_thread.ndjson", "").GetThreadId()
	msgs := messages(t, "acp/long_thread.messages")
	for i, m := range msgs {
		if _, err := e.client.SendMessage(ctx, &batonv1.SendMessageRequest{CommandId: fmt.Sprintf("send-%d", i), ThreadId: th, Text: m, Mode: "queue"}); err != nil {
			t.Fatal(err)
		}
	}
	e.waitFor(th, "every run to end", allRunsEnded(len(msgs)))

	get := func(req *batonv1.GetThreadRequest) (*batonv1.ThreadPage, domain.Thread) {
		t.Helper()
		req.ThreadId = th
		got, err := e.client.GetThread(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if got.GetSummary().GetRuns() != 20 {
			t.Fatalf("summary: %d runs, want 20", got.GetSummary().GetRuns())
		}
		return got.GetPage(), decodeThread(t, got)
	}
	ordinals := func(d domain.Thread) (out []int) {
		for _, r := range d.Runs {
			out = append(out, r.Ordinal)
		}
		return out
	}
	for _, tc := range []struct {
		req  *batonv1.GetThreadRequest
		want *batonv1.ThreadPage
		runs string
	}{
		{&batonv1.GetThreadRequest{}, &batonv1.ThreadPage{FirstRun: 13, LastRun: 20, Runs: 20, Messages: 16,
			LeftOut: "left out: runs 1-12 (ask from_run 1)"}, "[13 14 15 16 17 18 19 20]"},
		{&batonv1.GetThreadRequest{FromRun: 1, MaxRuns: 5}, &batonv1.ThreadPage{FirstRun: 1, LastRun: 5, Runs: 20, Messages: 10,
			LeftOut: "left out: runs 6-20 (ask from_run 6)"}, "[1 2 3 4 5]"},
		{&batonv1.GetThreadRequest{FromRun: 2, ToRun: 4, MaxMessages: 4}, &batonv1.ThreadPage{FirstRun: 2, LastRun: 4, Runs: 20, Messages: 6,
			NextMessagesAfter: 4, LeftOut: "left out: run 1 (ask from_run 1); runs 5-20 (ask from_run 5); their messages from the 5th on (ask messages_after 4)"}, "[2 3 4]"},
		{&batonv1.GetThreadRequest{FromRun: 2, ToRun: 4, MessagesAfter: 4}, &batonv1.ThreadPage{FirstRun: 2, LastRun: 4, Runs: 20, Messages: 6,
			MessagesAfter: 4, LeftOut: "left out: run 1 (ask from_run 1); runs 5-20 (ask from_run 5); the first 4 of their 6 messages (ask messages_after 0)"}, "[2 3 4]"},
		{&batonv1.GetThreadRequest{ToRun: 20, MaxRuns: 1000}, &batonv1.ThreadPage{FirstRun: 1, LastRun: 20, Runs: 20, Messages: 40, Complete: true}, fmt.Sprint(seq(1, 20))},
	} {
		page, d := get(tc.req)
		if diff := cmp.Diff(tc.want, page, protocmp.Transform()); diff != "" || fmt.Sprint(ordinals(d)) != tc.runs {
			t.Errorf("%v: runs %v (want %s); page (-want +got):\n%s", tc.req, ordinals(d), tc.runs, diff)
		}
	}
	// The default page's earlier says what left.
	if _, d := get(&batonv1.GetThreadRequest{}); d.Earlier == nil || d.Earlier.Runs != 12 || d.Earlier.Messages != 24 {
		t.Errorf("earlier: %+v", d.Earlier)
	}
	// Pages of 6 runs end to end: every run, message and checkpoint once.
	var all domain.Thread
	for from := uint32(1); ; {
		page, d := get(&batonv1.GetThreadRequest{FromRun: from, MaxRuns: 6})
		all.AddPage(d)
		if page.GetLastRun() >= page.GetRuns() {
			break
		}
		from = page.GetLastRun() + 1
	}
	_, whole := get(&batonv1.GetThreadRequest{FromRun: 1, MaxRuns: 1000})
	// The baseline checkpoint (and its scope) is in the first page, after
	// the runs' that left: where depends on where the page ends.
	byRun := func(a, b domain.Checkpoint) int { return a.RunOrdinal - b.RunOrdinal }
	slices.SortStableFunc(whole.Checkpoints, byRun)
	slices.SortStableFunc(all.Checkpoints, byRun)
	scopeByRun := func(a, b domain.CheckpointScope) int { return a.Ordinal - b.Ordinal }
	slices.SortStableFunc(whole.CheckpointScopes, scopeByRun)
	slices.SortStableFunc(all.CheckpointScopes, scopeByRun)
	if diff := cmp.Diff(whole, all, cmp.Comparer(func(a, b domain.Text) bool { return a.Equal(b) }), cmp.AllowUnexported(domain.Thread{}, domain.Run{})); diff != "" {
		t.Errorf("pages of 6 runs end to end (-one page +pages):\n%s", diff)
	}
	if len(whole.Runs) != 20 || len(whole.Messages) != 40 || len(whole.Checkpoints) != 21 {
		t.Errorf("the whole thread: %d runs, %d messages, %d checkpoints", len(whole.Runs), len(whole.Messages), len(whole.Checkpoints))
	}
	if _, err := e.client.GetThread(ctx, &batonv1.GetThreadRequest{ThreadId: th, FromRun: 5, ToRun: 2}); status.Code(err) != codes.InvalidArgument ||
		status.Convert(err).Message() != "to_run: run 2 is before from_run 5; give to_run 0 for every run from from_run on" {
		t.Errorf("to_run before from_run: %v", err)
	}

	// Back to run 3, which left the projection long ago.
	if _, err := e.client.Rollback(ctx, &batonv1.RollbackRequest{CommandId: "rollback", ThreadId: th, Run: 3}); err != nil {
		t.Fatal(err)
	}
	e.waitFor(th, "the rollback to end", func(d domain.Thread) bool { return len(d.Rollbacks) > 0 && !d.RollingBack() })
	_, after := get(&batonv1.GetThreadRequest{FromRun: 1, MaxRuns: 5})
	var statuses []string
	for _, r := range after.Runs {
		statuses = append(statuses, string(r.Status))
	}
	if fmt.Sprint(statuses) != "[completed completed completed rolled_back rolled_back]" {
		t.Errorf("runs 1-5 after the rollback to run 3: %v", statuses)
	}
	if _, err := os.Stat(filepath.Join(e.ws, "log", "step-4.txt")); !os.IsNotExist(err) {
		t.Errorf("run 4's file after the rollback to run 3: %v", err)
	}
}

func seq(from, to int) []int {
	var out []int
	for i := from; i <= to; i++ {
		out = append(out, i)
	}
	return out
}
