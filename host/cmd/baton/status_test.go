//go:build linux

package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	batonv1 "github.com/baton-run/baton/host/api/baton/v1"
)

// baton status: with no service, it says so (exit 1); against a service,
// on its socket or over TCP with the token, it says the service's version,
// process, listeners, active threads and plugins, the running one with its
// process; a wrong or missing token is refused in words that say what to
// give, by status and by every verb; health answers over TCP without the
// token, nothing else does.
func TestStatus(t *testing.T) {
	data := privateDir(t)
	sock := filepath.Join(data, "baton.sock")
	type result struct {
		Stdout, Stderr string
		Code           int
	}
	run := func(args ...string) result {
		out, errOut, code := baton(t, args...)
		return result{out, errOut, code}
	}
	if diff := cmp.Diff(result{Stderr: "baton: no service answers on " + sock + " (start one with baton serve)\n", Code: exitFailed},
		run("status", "--data", data)); diff != "" {
		t.Errorf("status with no service (-want +got):\n%s", diff)
	}

	s := startService(t, data, "--listen", "tcp://127.0.0.1:0")
	c := s.client()
	id := createThread(t, c, "acp/stall.ndjson", "decline")
	ev, _ := subscribe(t.Context(), t, c, id, 0)
	if _, err := c.SendMessage(t.Context(), &batonv1.SendMessageRequest{ThreadId: id, Text: "Take your time"}); err != nil {
		t.Fatal(err)
	}
	until(t, ev, "the provider's thinking", ofType("node.delta")) // then it stalls
	th, err := c.GetThread(t.Context(), &batonv1.GetThreadRequest{ThreadId: id})
	if err != nil {
		t.Fatal(err)
	}

	got := run("status", "--json", "--data", data)
	var st serviceStatus
	if err := json.Unmarshal([]byte(got.Stdout), &st); err != nil || got.Code != exitOK || got.Stderr != "" {
		t.Fatalf("status --json: %v %+v", err, got)
	}
	if st.StartedAt.IsZero() || st.UptimeSeconds < 0 {
		t.Errorf("status --json: started %v, up %ds", st.StartedAt, st.UptimeSeconds)
	}
	// What the process holds changes from one call to the next: each is
	// there, and of its kind.
	if rt := st.Runtime; rt.Goroutines < 10 || rt.HeapBytes < 1<<20 || rt.ResidentBytes < rt.HeapBytes || rt.OpenFiles < 5 {
		t.Errorf("status --json: runtime %+v; want goroutines, heap, resident memory and open files", rt)
	}
	tcp := ""
	if len(st.Listeners) == 2 {
		tcp = st.Listeners[1].Address
	}
	want := serviceStatus{Version: version, PID: s.cmd.Process.Pid, DataDir: data, StartedAt: st.StartedAt, UptimeSeconds: st.UptimeSeconds,
		Listeners:     []listenerStatus{{Address: "unix://" + sock}, {Address: tcp, Token: true}},
		ActiveThreads: []summaryJSON{summaryJSONOf(th.GetSummary())},
		Plugins: []pluginStatus{
			{Name: "acp", Path: filepath.Join(binDir, "baton-plugin-acp"), PID: int(th.GetProviderSessions()[0].GetPluginPid()), Version: "0.1.0"},
			{Name: "claude", Path: filepath.Join(binDir, "baton-plugin-claude")},
			{Name: "codex", Path: filepath.Join(binDir, "baton-plugin-codex")},
			{Name: "cursor", Path: filepath.Join(binDir, "baton-plugin-cursor")},
			{Name: "opencode", Path: filepath.Join(binDir, "baton-plugin-opencode")},
		},
		Runtime: st.Runtime, Store: storeStatus{Kind: "pebble"}}
	if diff := cmp.Diff(want, st); diff != "" || !strings.HasPrefix(tcp, "tcp://127.0.0.1:") {
		t.Errorf("status --json (-want +got):\n%s", diff)
	}

	// For people; the uptime is the clock's.
	got = run("status", "--data", data)
	got.Stdout = regexp.MustCompile(`up \S+ \(since [^)]+\)`).ReplaceAllString(got.Stdout, "up UPTIME (since START)")
	got.Stdout = regexp.MustCompile(`(?m)^runtime    \d+ goroutines, heap \d+\.\d [KMG]iB, \d+\.\d [KMG]iB resident, \d+ open files$`).
		ReplaceAllString(got.Stdout, "runtime    RUNTIME")
	text := "service    baton " + version + ", pid " + strconv.Itoa(s.cmd.Process.Pid) + ", up UPTIME (since START)\n" +
		"data       " + data + "\n" +
		"listening  unix://" + sock + "\n" +
		"           " + tcp + " (token)\n" +
		"threads    1 active\n" +
		"           " + id + "  acp  running, 1 run  " + th.GetCwd() + "\n" +
		"plugins    acp 0.1.0 (pid " + strconv.Itoa(int(th.GetProviderSessions()[0].GetPluginPid())) + "), claude, codex, cursor, opencode\n" +
		"runtime    RUNTIME\n"
	if diff := cmp.Diff(result{Stdout: text}, got); diff != "" {
		t.Errorf("status (-want +got):\n%s", diff)
	}

	// Over TCP: the data dir's token by default, or --token-file.
	got = run("status", "--json", "--data", data, "--server", tcp)
	var overTCP serviceStatus
	json.Unmarshal([]byte(got.Stdout), &overTCP)
	overTCP.UptimeSeconds, overTCP.Runtime = st.UptimeSeconds, st.Runtime
	if diff := cmp.Diff(st, overTCP); diff != "" || got.Code != exitOK {
		t.Errorf("status over TCP: exit %d %s (-on the socket +over TCP):\n%s", got.Code, got.Stderr, diff)
	}
	wrong := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(wrong, []byte("not-the-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	refusal := result{Stderr: "baton: server " + tcp + " refused: wrong or missing token (give --token-file or BATON_TOKEN_FILE)\n", Code: exitFailed}
	for name, args := range map[string][]string{
		"status, a wrong token":  {"status", "--data", data, "--server", tcp, "--token-file", wrong},
		"status, no token":       {"status", "--data", t.TempDir(), "--server", tcp},
		"threads, a wrong token": {"threads", "--data", data, "--server", tcp, "--token-file", wrong},
		"show, no token":         {"show", "--data", t.TempDir(), "--server", tcp, id},
		"send, a wrong token":    {"send", "--data", data, "--server", tcp, "--token-file", wrong, id, "more"},
	} {
		if diff := cmp.Diff(refusal, run(args...)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", name, diff)
		}
	}

	// Health alone answers without the token.
	conn, err := grpc.NewClient("passthrough:///"+strings.TrimPrefix(tcp, "tcp://"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if resp, err := healthpb.NewHealthClient(conn).Check(t.Context(), &healthpb.HealthCheckRequest{}); err != nil ||
		resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("health over TCP without the token: %v %v, want SERVING", resp, err)
	}
	if _, err := batonv1.NewBatonClient(conn).GetStatus(t.Context(), &batonv1.GetStatusRequest{}); status.Code(err) != codes.Unauthenticated {
		t.Errorf("status over TCP without the token: %v, want Unauthenticated", err)
	}
}
