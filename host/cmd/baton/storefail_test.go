//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	batonv1 "github.com/baton-run/baton/host/api/baton/v1"
)

// A disk that fills under a running `baton serve`, mid-turn: the shipped
// binary meets a real failure, the service's own file size limit
// (RLIMIT_FSIZE, lowered on the running process with prlimit), so that the
// write of its log fails with EFBIG and Pebble gives up. What a user sees:
// the command whose write failed is refused (Unavailable, saying the store
// failed and the service is stopping), health says NOT_SERVING, the
// subscription ends saying the same, the plugin and provider processes are
// gone, serve exits 1 with one line saying why; started again (as its
// supervisor would), it recovers: the run in flight ends with a reason,
// and the refused message was never recorded.
func TestServeStopsWhenItsDiskIsFull(t *testing.T) {
	data := t.TempDir()
	s := startService(t, data)
	c, id, ev, errc := s.startTurn(t, "acp/stall.ndjson", "Take your time")
	until(t, ev, "the provider's thinking", thinking)
	procs := pids(t, thread(t, c, id))
	conn := s.dial()
	wctx, stopWatching := context.WithCancel(t.Context())
	defer stopWatching()
	watch, err := healthpb.NewHealthClient(conn).Watch(wctx, &healthpb.HealthCheckRequest{Service: "baton.v1.Baton"})
	if err != nil {
		t.Fatal(err)
	}
	if h, err := watch.Recv(); err != nil || h.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health before the disk filled: %v %v", h, err)
	}

	// The disk is full: no file of the service's may grow past a byte.
	var old unix.Rlimit
	if err := unix.Prlimit(s.cmd.Process.Pid, unix.RLIMIT_FSIZE, &unix.Rlimit{Cur: 1, Max: unix.RLIM_INFINITY}, &old); err != nil {
		t.Fatalf("prlimit: %v", err)
	}
	_, err = c.SendMessage(t.Context(), &batonv1.SendMessageRequest{ThreadId: id, Text: "And then?"})
	// Pebble names the log it could not write: 000002.log, or another.
	wal := regexp.MustCompile(`write [^ ]+/events/\d+\.log: file too large`)
	norm := func(s string) string { return wal.ReplaceAllString(s, "write DATA/events/N.log: file too large") }
	const cause = "pebble: fatal commit error: write DATA/events/N.log: file too large"
	const refused = "the event store failed and the service is stopping (it exits 1, for its supervisor to start it again; " +
		"the next start recovers what was in flight): " + cause
	type statusOf struct{ Code, Message string }
	st, _ := status.FromError(err)
	if diff := cmp.Diff(statusOf{"Unavailable", refused}, statusOf{st.Code().String(), norm(st.Message())}); diff != "" {
		t.Errorf("the command whose write failed (-want +got):\n%s", diff)
	}
	if h, err := watch.Recv(); err != nil || h.GetStatus() != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Errorf("health once the disk filled: %v %v, want NOT_SERVING", h, err)
	}
	stopWatching() // the service's stop does not wait for it
	for range ev { // the events committed before the failure, then the end
	}
	st, _ = status.FromError(<-errc)
	want := statusOf{"Unavailable", refused + "; subscribe again after the last sequence you received once it is back"}
	if diff := cmp.Diff(want, statusOf{st.Code().String(), norm(st.Message())}); diff != "" {
		t.Errorf("the subscription's end (-want +got):\n%s", diff)
	}
	select {
	case <-s.done:
	case <-time.After(90 * time.Second):
		t.Fatalf("baton serve still runs 90s after its disk filled\n%s", s.stderr)
	}
	var exit *exec.ExitError
	if !errors.As(s.err, &exit) || exit.ExitCode() != 1 {
		t.Errorf("baton serve ended with %v, want exit status 1", s.err)
	}
	lines := strings.Split(strings.TrimRight(s.stderr.String(), "\n"), "\n")
	// A binary built with -cover (make test's) writes its counters as it
	// exits, under the same file size limit; that line is the runtime's.
	lines = slices.DeleteFunc(lines, func(l string) bool { return strings.HasPrefix(l, "error: coverage counter data emit failed") })
	last := "baton: serve: the event store failed: " + cause +
		"; the service stopped, for its supervisor to start it again (the next start recovers what was in flight)"
	if got := norm(lines[len(lines)-1]); got != last {
		t.Errorf("serve's last line:\n%s\nwant:\n%s\nstderr:\n%s", got, last, s.stderr)
	}
	for _, pid := range procs {
		if !waitGone(pid, time.Now().Add(30*time.Second)) {
			t.Errorf("process %d outlived the service whose disk filled", pid)
			unix.Kill(pid, unix.SIGKILL)
		}
	}

	// Started again with room on the disk, as a supervisor would.
	s = startService(t, data)
	p := thread(t, s.client(), id)
	runs := runStates(p)
	if diff := cmp.Diff([]runState{{"failed", "host_restarted"}}, runs); diff != "" {
		t.Errorf("runs after the restart (-want +got):\n%s", diff)
	}
	var texts []string
	for _, m := range p["messages"].([]any) {
		if m := m.(map[string]any); m["role"] == "user" {
			texts = append(texts, fmt.Sprint(m["text"]))
		}
	}
	if diff := cmp.Diff([]string{"Take your time"}, texts); diff != "" {
		t.Errorf("the user's messages after the restart (-want +got):\n%s", diff)
	}
}

// A read of the store meets damage under a running `baton serve` (a
// table's bytes overwritten on the disk while it runs): the service stops
// the same way. The read that met it fails with DataLoss naming the file;
// health says NOT_SERVING; the subscription to the turn in flight ends
// with Unavailable, saying the store failed; its providers are gone; serve
// exits 1, saying to run baton doctor. (A command sent once the read has
// failed may find the service gone already: the orchestrator's
// TestHostStopsWhenItsStoreIsDamaged checks the refusal.)
func TestServeStopsWhenItsStoreIsDamaged(t *testing.T) {
	data := t.TempDir()
	s := startService(t, data)
	c, done, ev, _ := s.startTurn(t, "acp/simple.ndjson", "Say hello.")
	until(t, ev, "the run's end", ofType("run.ended"))
	if err := s.signal(unix.SIGTERM); err != nil {
		t.Fatalf("baton serve after SIGTERM: %v\n%s", err, s.stderr)
	}
	// The next start flushes what its log replays into a table; the
	// thread that ended is not read again until a client asks for it.
	s = startService(t, data)
	c, id, ev, errc := s.startTurn(t, "acp/stall.ndjson", "Take your time")
	until(t, ev, "the provider's thinking", thinking)
	procs := pids(t, thread(t, c, id))
	wctx, stopWatching := context.WithCancel(t.Context())
	defer stopWatching()
	watch, err := healthpb.NewHealthClient(s.dial()).Watch(wctx, &healthpb.HealthCheckRequest{Service: "baton.v1.Baton"})
	if err != nil {
		t.Fatal(err)
	}
	if h, err := watch.Recv(); err != nil || h.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health before the damage: %v %v", h, err)
	}
	ssts, _ := filepath.Glob(filepath.Join(data, "events", "*.sst"))
	if len(ssts) != 1 {
		t.Fatalf("tables %v, want the one the start flushed", ssts)
	}
	b, err := os.ReadFile(ssts[0])
	if err != nil {
		t.Fatal(err)
	}
	for i := 64; i < len(b)-128; i++ {
		b[i] ^= 0x5a
	}
	if err := os.WriteFile(ssts[0], b, 0o600); err != nil {
		t.Fatal(err)
	}

	_, err = c.GetThread(t.Context(), &batonv1.GetThreadRequest{ThreadId: done})
	damaged := "the event store is damaged: " + ssts[0] + ": "
	if st, _ := status.FromError(err); st.Code().String() != "DataLoss" || !strings.HasPrefix(st.Message(), "load thread "+done+": "+damaged) {
		t.Fatalf("reading the thread in the damaged table: %v, want DataLoss: load thread %s: %s...", err, done, damaged)
	}
	if h, err := watch.Recv(); err != nil || h.GetStatus() != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Errorf("health once the store met damage: %v %v, want NOT_SERVING", h, err)
	}
	stopWatching()
	for range ev {
	}
	refused := "the event store failed and the service is stopping (it exits 1, for its supervisor to start it again; " +
		"the next start recovers what was in flight): " + damaged
	if st, _ := status.FromError(<-errc); st.Code().String() != "Unavailable" || !strings.HasPrefix(st.Message(), refused) ||
		!strings.HasSuffix(st.Message(), "; subscribe again after the last sequence you received once it is back") {
		t.Errorf("the subscription's end once the store met damage: %v, want Unavailable: %s...", st.Err(), refused)
	}
	select {
	case <-s.done:
	case <-time.After(90 * time.Second):
		t.Fatalf("baton serve still runs 90s after it met damage\n%s", s.stderr)
	}
	var exit *exec.ExitError
	if !errors.As(s.err, &exit) || exit.ExitCode() != 1 {
		t.Errorf("baton serve ended with %v, want exit status 1", s.err)
	}
	lines := strings.Split(strings.TrimRight(s.stderr.String(), "\n"), "\n")
	last := regexp.MustCompile(`^baton: serve: the event store failed: the event store is damaged: ` + regexp.QuoteMeta(ssts[0]) +
		`: .*; the service stopped, for its supervisor to start it again \(the next start recovers what was in flight\); ` +
		"run `baton doctor` to check the store$")
	if got := lines[len(lines)-1]; !last.MatchString(got) {
		t.Errorf("serve's last line:\n%s\nwant it to match:\n%s", got, last)
	}
	for _, pid := range procs {
		if !waitGone(pid, time.Now().Add(30*time.Second)) {
			t.Errorf("process %d outlived the service that met damage", pid)
			unix.Kill(pid, unix.SIGKILL)
		}
	}
}
