package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/types/known/timestamppb"

	batonv1 "github.com/baton-run/baton/host/api/baton/v1"
	"github.com/baton-run/baton/host/internal/domain"
	"github.com/baton-run/baton/host/internal/service"
)

// baton show's line for a thread whose host was lost: when (HH:MM in the
// local zone), and what becomes of it, by whether its cwd is shared.
func TestShowHostLost(t *testing.T) {
	now := time.Date(2026, 12, 1, 14, 30, 0, 0, time.UTC)
	zone := time.FixedZone("CET", 3600)
	th := domain.Thread{ID: "thr", Provider: "codex", Cwd: "/w", Host: "b",
		HostLost: &domain.HostLost{Host: "b", At: time.Date(2026, 12, 1, 13, 2, 0, 0, time.UTC)}}
	for _, tc := range []struct {
		shared bool
		want   string
	}{
		{false, "  host b lost its lease at 14:02; the thread's cwd is on b\n"},
		{true, "  host b lost its lease at 14:02; another host takes it over\n"},
	} {
		th.SharedCwd = tc.shared
		var b bytes.Buffer
		showHostLost(&b, service.ThreadMessage(th), now, zone)
		if d := cmp.Diff(tc.want, b.String()); d != "" {
			t.Errorf("shared cwd %t (-want +got):\n%s", tc.shared, d)
		}
	}
	th.HostLost = nil
	var b bytes.Buffer
	showHostLost(&b, service.ThreadMessage(th), now, zone)
	if b.Len() != 0 {
		t.Errorf("a thread whose host is not lost: %q, want nothing", b.String())
	}
}

// A thread's moves and its host's loss, as the history prints them.
func TestPrintThreadMoves(t *testing.T) {
	var b strings.Builder
	p := newPrinter(&b, false, &batonv1.Thread{Id: "thr"})
	for _, e := range []domain.Payload{
		domain.ThreadHostLost{Host: "a"},
		domain.ThreadMoved{From: "a", To: "b", Reason: domain.ClaimHostLost},
		domain.ThreadMoved{To: "c"},
	} {
		p.event(apiEvent(t, 0, "thr", e))
	}
	want := "⚠ host a lost its lease\n▶ thread moved from host a to host b (host_lost)\n▶ thread moved to host c\n"
	if d := cmp.Diff(want, b.String()); d != "" {
		t.Errorf("lines (-want +got):\n%s", d)
	}
}

// baton threads says "host lost" for a thread whose host was lost, and
// every other status as before; -o json carries the loss.
func TestThreadsHostLost(t *testing.T) {
	at := timestamppb.New(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))
	list := []*batonv1.ThreadSummary{
		{Id: "t3", Provider: "codex", Cwd: "/w", Status: "running", Host: "a", HostLost: &batonv1.HostLost{Host: "a", At: at},
			CreatedAt: at, UpdatedAt: at, Runs: 1},
		{Id: "t2", Provider: "codex", Cwd: "/w", Status: "running", Host: "b", CreatedAt: at, UpdatedAt: at, Runs: 1},
		{Id: "t1", Provider: "codex", Cwd: "/w", Status: "idle", LastRun: "completed", Host: "b", CreatedAt: at, UpdatedAt: at, Runs: 2},
	}
	var b bytes.Buffer
	if err := printThreads(&b, list, outputTable, time.Now); err != nil {
		t.Fatal(err)
	}
	want := `THREAD  PROVIDER  STATUS                    HOST  RUNS  CREATED               UPDATED               CWD
t3      codex     host lost                 a     1     2026-12-01T09:00:00Z  2026-12-01T09:00:00Z  /w
t2      codex     running                   b     1     2026-12-01T09:00:00Z  2026-12-01T09:00:00Z  /w
t1      codex     idle, last run completed  b     2     2026-12-01T09:00:00Z  2026-12-01T09:00:00Z  /w
`
	if d := cmp.Diff(want, b.String()); d != "" {
		t.Errorf("table (-want +got):\n%s", d)
	}
	b.Reset()
	if err := printThreads(&b, list[:1], outputJSON, time.Now); err != nil {
		t.Fatal(err)
	}
	var got struct {
		HostLost *hostLostJSON `json:"hostLost"`
	}
	if err := json.Unmarshal(b.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(&hostLostJSON{Host: "a", At: at.AsTime()}, got.HostLost); d != "" {
		t.Errorf("-o json's hostLost (-want +got):\n%s", d)
	}
}

// baton run --shared-cwd makes a thread that says so; --shared-cwd and
// --on-host are a new thread's, refused with --thread.
func TestRunSharedCwd(t *testing.T) {
	data, ws := t.TempDir(), t.TempDir()
	out, errOut, code := baton(t, "run", "--data", data, "--cwd", ws, "--provider", "acp", "--provider-command",
		peerCommand(t, "acp/simple.ndjson"), "--shared-cwd", lines(t, "acp/simple.messages")[0])
	if code != exitOK {
		t.Fatalf("run: exit %d\n%s\n%s", code, out, errOut)
	}
	thread := threadOf(t, out)
	js, errOut, code := baton(t, "show", "--json", "--data", data, thread)
	if code != exitOK {
		t.Fatalf("show: exit %d\n%s", code, errOut)
	}
	var th struct {
		SharedCwd bool `json:"sharedCwd"`
	}
	if err := json.Unmarshal([]byte(js), &th); err != nil || !th.SharedCwd {
		t.Errorf("show --json: shared_cwd %t (%v), want true", th.SharedCwd, err)
	}
	for _, flag := range [][]string{{"--shared-cwd"}, {"--on-host", "b"}} {
		_, errOut, code := baton(t, append([]string{"run", "--data", data, "--thread", thread}, append(flag, "more")...)...)
		want := "baton: run: --shared-cwd and --on-host are for a new thread; --thread continues one where it is\n"
		if code != exitUsage || errOut != want {
			t.Errorf("run --thread %s: exit %d, stderr %q; want %d, %q", flag[0], code, errOut, exitUsage, want)
		}
	}
}
