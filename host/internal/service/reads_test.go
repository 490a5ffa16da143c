package service_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/timestamppb"

	batonv1 "github.com/baton-run/baton/host/api/baton/v1"
	"github.com/baton-run/baton/host/internal/domain"
	"github.com/baton-run/baton/host/internal/eventlog"
	"github.com/baton-run/baton/host/internal/pluginhost"
	"github.com/baton-run/baton/host/internal/service"
)

// ListThreads pages by id and filters by provider and status.
func TestListThreadsPagesAndFilters(t *testing.T) {
	e := newEnv(t, service.Options{})
	ctx := t.Context()
	for i, p := range []string{"acp", "codex", "acp", "codex", "acp"} {
		if _, err := e.client.CreateThread(ctx, &batonv1.CreateThreadRequest{ThreadId: fmt.Sprintf("t%d", i+1), Provider: p, Cwd: e.ws}); err != nil {
			t.Fatal(err)
		}
	}
	list := func(req *batonv1.ListThreadsRequest) (pages [][]string) {
		t.Helper()
		for {
			resp, err := e.client.ListThreads(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, s := range resp.GetThreads() {
				ids = append(ids, s.GetId())
			}
			pages = append(pages, ids)
			if resp.GetNextPageToken() == "" {
				return pages
			}
			req.PageToken = resp.GetNextPageToken()
		}
	}
	for _, tc := range []struct {
		req  *batonv1.ListThreadsRequest
		want [][]string
	}{
		{&batonv1.ListThreadsRequest{}, [][]string{{"t1", "t2", "t3", "t4", "t5"}}},
		{&batonv1.ListThreadsRequest{PageSize: 2}, [][]string{{"t1", "t2"}, {"t3", "t4"}, {"t5"}}},
		{&batonv1.ListThreadsRequest{PageSize: 5}, [][]string{{"t1", "t2", "t3", "t4", "t5"}}},
		{&batonv1.ListThreadsRequest{PageSize: 1, Provider: "codex"}, [][]string{{"t2"}, {"t4"}}},
		{&batonv1.ListThreadsRequest{PageSize: 2, Provider: "acp", Status: "idle"}, [][]string{{"t1", "t3"}, {"t5"}}},
		{&batonv1.ListThreadsRequest{Status: "running"}, [][]string{nil}},
	} {
		if d := cmp.Diff(tc.want, list(tc.req)); d != "" {
			t.Errorf("%v: pages (-want +got):\n%s", tc.req, d)
		}
	}
	resp, err := e.client.ListThreads(ctx, &batonv1.ListThreadsRequest{PageSize: 1})
	if err != nil {
		t.Fatal(err)
	}
	want := &batonv1.ThreadSummary{Id: "t1", Provider: "acp", Cwd: e.ws, CreatedAt: timestamppb.New(epoch), UpdatedAt: timestamppb.New(epoch),
		Status: "idle", Sequence: 1}
	if d := cmp.Diff([]*batonv1.ThreadSummary{want}, resp.GetThreads(), protocmp.Transform()); d != "" {
		t.Errorf("summary (-want +got):\n%s", d)
	}
}

// ListPlugins lists every installed plugin with what it says of itself,
// and that its binary is the one its directory's lockfile records.
func TestListPlugins(t *testing.T) {
	e := newEnv(t, service.Options{})
	resp, err := e.client.ListPlugins(t.Context(), &batonv1.ListPluginsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	m := pluginhost.New(pluginhost.Config{Dirs: []string{pluginDir}})
	defer m.Close()
	// Every plugin but cursor's passes on stdio and HTTP servers.
	both := []string{"stdio", "http"}
	wantTransports := map[string][]string{"acp": both, "claude": both, "codex": both, "opencode": both}
	var want []*batonv1.Plugin
	for _, name := range m.Installed() {
		p, err := m.Get(t.Context(), name)
		if err != nil {
			t.Fatal(err)
		}
		d, c := p.Description, p.Description.Capabilities
		want = append(want, &batonv1.Plugin{Name: name, Version: d.Version, WireProtocol: d.WireProtocol, Notes: d.Notes, Path: p.Path,
			Capabilities: &batonv1.Capabilities{NativeSteering: c.NativeSteering, Interrupt: c.Interrupt, Approvals: c.Approvals,
				Subagents: c.Subagents, NativeRollback: c.NativeRollback, Resume: c.Resume, ThreadSnapshot: c.ThreadSnapshot},
			McpTransports: wantTransports[name], Verification: "verified"})
	}
	if len(want) < 2 {
		t.Fatalf("only %d plugins installed in %s", len(want), pluginDir)
	}
	if d := cmp.Diff(want, resp.GetPlugins(), protocmp.Transform()); d != "" {
		t.Errorf("plugins (-want +got):\n%s", d)
	}
}

// GetThread shows a projection and its sequence; a subscription after
// that sequence sees every later event of the thread once, in order,
// while the run goes on.
func TestGetThreadThenSubscribe(t *testing.T) {
	e := newEnv(t, service.Options{})
	ctx := t.Context()
	threadID := e.create("create", "", "acp", "acp/multi_turn.ndjson", "").GetThreadId()
	msgs := messages(t, "acp/multi_turn.messages")
	if _, err := e.client.SendMessage(ctx, &batonv1.SendMessageRequest{ThreadId: threadID, Text: msgs[0]}); err != nil {
		t.Fatal(err)
	}
	th, err := e.client.GetThread(ctx, &batonv1.GetThreadRequest{ThreadId: threadID})
	if err != nil {
		t.Fatal(err)
	}
	proj := decodeThread(t, th)
	host, _, err := e.host.Snapshot(threadID)
	if err != nil {
		t.Fatal(err)
	}
	if proj.Sequence != th.GetSequence() || th.GetSummary().GetId() != threadID || th.GetSummary().GetSequence() != th.GetSequence() {
		t.Errorf("thread at %d, projection at %d, summary %v", th.GetSequence(), proj.Sequence, th.GetSummary())
	}
	if proj.Sequence > host.Sequence {
		t.Errorf("projection at %d, past the host's %d", proj.Sequence, host.Sequence)
	}
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := e.client.Subscribe(sctx, &batonv1.SubscribeRequest{ThreadId: threadID, AfterSequence: th.GetSequence()})
	if err != nil {
		t.Fatal(err)
	}
	var got []*batonv1.Event
	for ended := 0; ended < len(msgs); {
		ev, err := stream.Recv()
		if err != nil {
			t.Fatalf("after %d events: %v", len(got), err)
		}
		got = append(got, ev)
		switch ev.GetType() {
		case "run.ended":
			ended++
			if ended < len(msgs) {
				if _, err := e.client.SendMessage(ctx, &batonv1.SendMessageRequest{ThreadId: threadID, Text: msgs[ended]}); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	recs, err := e.host.ThreadEvents(threadID, th.GetSequence())
	if err != nil {
		t.Fatal(err)
	}
	want := stored(t, recs)
	want = want[:min(len(want), len(got))] // events after the last run.ended may follow
	if d := cmp.Diff(want, streamed(t, got)); d != "" {
		t.Errorf("events after %d (-stored +streamed):\n%s", th.GetSequence(), d)
	}
	if len(got) == 0 || got[len(got)-1].GetType() != "run.ended" {
		t.Errorf("the stream ends with %v, want run.ended", got[len(got)-1])
	}
}

// gitWorkspace makes the workspace a git repository with one commit, as
// the recordings had.
func (e *env) gitWorkspace() {
	e.t.Helper()
	if err := os.WriteFile(filepath.Join(e.ws, "README.md"), []byte("# Replay workspace\n\nA throwaway repository for recording transcripts.\n"), 0o644); err != nil {
		e.t.Fatal(err)
	}
	for _, args := range [][]string{{"init", "-q"}, {"add", "README.md"},
		{"-c", "user.name=t", "-c", "user.email=t@example.invalid", "-c", "commit.gpgsign=false", "commit", "-q", "-m", "init"}} {
		cmd := exec.Command("git", args...)
		cmd.Dir = e.ws
		if out, err := cmd.CombinedOutput(); err != nil {
			e.t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// event is an event as a client reads it: where it is in the log, and
// its payload as the domain's.
type event struct {
	Sequence uint64
	ThreadID string
	Type     string
	At       time.Time
	Payload  domain.Payload
}

// stored are the log's records, their payloads decoded by the domain.
func stored(t *testing.T, recs []eventlog.Record) []event {
	t.Helper()
	var out []event
	for _, r := range recs {
		p, err := domain.DecodePayload(r.Type, r.Data)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, event{r.Sequence, r.ThreadID, r.Type, r.At, p})
	}
	return out
}

// streamed are baton.v1 events, their payloads read as the CLI reads them.
func streamed(t *testing.T, evs []*batonv1.Event) []event {
	t.Helper()
	var out []event
	for _, ev := range evs {
		p, err := service.PayloadOf(ev)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, event{ev.GetSequence(), ev.GetThreadId(), ev.GetType(), ev.GetAt().AsTime(), p})
	}
	return out
}

// A run's diff: its checkpoint's files and patch.
func TestDiff(t *testing.T) {
	e := newEnv(t, service.Options{})
	ctx := t.Context()
	e.gitWorkspace()
	threadID := e.create("create", "", "acp", "acp/approval_accept.ndjson", "accept").GetThreadId()
	if _, err := e.client.SendMessage(ctx, &batonv1.SendMessageRequest{ThreadId: threadID, Text: "Write allowed.txt"}); err != nil {
		t.Fatal(err)
	}
	th := e.waitFor(threadID, "the run to end", allRunsEnded(1))
	resp, err := e.client.Diff(ctx, &batonv1.DiffRequest{ThreadId: threadID})
	if status.Code(err) == codes.NotFound {
		t.Fatalf("diff: %v (checkpoints %+v)", err, th.Checkpoints)
	}
	if err != nil {
		t.Fatal(err)
	}
	c := th.Checkpoints[len(th.Checkpoints)-1]
	if resp.GetRun() != 1 || resp.GetCheckpointId() != th.Runs[0].CheckpointID || resp.GetCommit() != c.Commit ||
		!strings.Contains(resp.GetPatch(), "allowed.txt") || resp.GetSize() != int64(len(resp.GetPatch())) {
		t.Errorf("diff %v; want run 1's checkpoint %s with allowed.txt", resp, th.Runs[0].CheckpointID)
	}
	var files []string
	for _, f := range resp.GetFiles() {
		files = append(files, f.GetKind()+" "+f.GetPath())
	}
	if d := cmp.Diff([]string{"added allowed.txt"}, files); d != "" {
		t.Errorf("files (-want +got):\n%s", d)
	}
}
