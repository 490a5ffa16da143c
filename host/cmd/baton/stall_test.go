//go:build linux

package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	batonv1 "github.com/baton-run/baton/host/api/baton/v1"
	"github.com/baton-run/baton/host/internal/domain"
)

// Silence, through the real binary with small real timeouts: a provider
// that takes the prompt and says nothing more (testdata/acp/stall.ndjson)
// has its process ended after --turn-stall-timeout and the run fails
// saying so; an approval nobody answers is declined after
// --request-timeout; the service that does it stays up.

// stallReason is the failure of a run whose provider said nothing for 1s.
const stallReason = "the provider sent nothing for 1s mid-turn (the host's turn stall timeout), so the host ended its process"

// checkStalled checks a thread whose only run stalled.
func checkStalled(t *testing.T, th domain.Thread) {
	t.Helper()
	r := th.Runs[0]
	if diff := cmp.Diff(&domain.Failure{Code: domain.FailureStalled, Message: stallReason}, r.Failure); r.Status != domain.RunStatusFailed || diff != "" {
		t.Errorf("run %s; failure (-want +got):\n%s", r.Status, diff)
	}
	s := th.ProviderSessions[0]
	if s.Status != domain.SessionStatusEnded || s.EndReason != "ended by the host: "+stallReason {
		t.Errorf("session %s, ended for %q", s.Status, s.EndReason)
	}
	if err := syscall.Kill(s.ProviderPid, 0); s.ProviderPid == 0 || !errors.Is(err, syscall.ESRCH) {
		t.Errorf("the provider process %d lives on (kill -0: %v)", s.ProviderPid, err)
	}
}

// baton run with --turn-stall-timeout 1s: the run fails, exit 1, and what
// it prints says why.
func TestRunStallsOnASilentProvider(t *testing.T) {
	data := t.TempDir()
	// Bounded, so that a run the timeout does not end fails the test
	// rather than hanging it.
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(binDir, "baton"), "run", "--data", data, "--cwd", t.TempDir(), "--provider", "acp",
		"--turn-stall-timeout", "1s", "--provider-command", peerCommand(t, "acp/stall.ndjson"), "Take your time")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	out, errOut, code := stdout.String(), stderr.String(), cmd.ProcessState.ExitCode()
	if ctx.Err() != nil {
		t.Fatalf("baton run did not end within 90s: %v\nstdout:\n%s\nstderr:\n%s", err, out, errOut)
	}
	if code != exitFailed {
		t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, exitFailed, out, errOut)
	}
	var said []string
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "  ⏹") || strings.HasPrefix(line, "✖") {
			said = append(said, line)
		}
	}
	want := []string{"  ⏹ run 1: " + stallReason, "✖ run 1 failed: " + stallReason}
	if diff := cmp.Diff(want, said); diff != "" {
		t.Errorf("what baton run says of the stall (-want +got):\n%s\nall of it:\n%s", diff, out)
	}
	th := threadsJSON(t, mustBaton(t, "threads", "--json", "--data", data))
	checkStalled(t, showJSON(t, data, th[0].ID))
}

// mustBaton runs baton and returns its stdout, failing unless it exits 0.
func mustBaton(t *testing.T, args ...string) string {
	t.Helper()
	out, errOut, code := baton(t, args...)
	if code != exitOK {
		t.Fatalf("baton %v: exit %d\n%s", args, code, errOut)
	}
	return out
}

// baton serve with both timeouts at 1s: a silent turn fails, an approval
// nobody answers is declined and its run goes on to complete, and the
// service answers its health check throughout.
func TestServeEndsSilenceAndAnswersUnansweredRequests(t *testing.T) {
	data := t.TempDir()
	s := startService(t, data, "--turn-stall-timeout", "1s", "--request-timeout", "1s")
	c := s.client()
	silent := createThread(t, c, "acp/stall.ndjson", "decline")
	asking := createThread(t, c, "acp/approval_decline.ndjson", "ask")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	silentEvents, _ := subscribe(ctx, t, c, silent, 0)
	askingEvents, _ := subscribe(ctx, t, c, asking, 0)
	for id, text := range map[string]string{silent: "Take your time", asking: "Write secret.txt"} {
		if _, err := c.SendMessage(t.Context(), &batonv1.SendMessageRequest{ThreadId: id, Text: text}); err != nil {
			t.Fatal(err)
		}
	}
	until(t, silentEvents, "the silent run's end", ofType("run.ended"))
	until(t, askingEvents, "the asking run's end", ofType("run.ended"))

	waitThread(t, data, silent, func(th domain.Thread) bool { return th.ProviderSessions[0].Status == domain.SessionStatusEnded })
	checkStalled(t, showJSON(t, data, silent))
	th := showJSON(t, data, asking)
	q := th.Requests[0]
	if q.Status != domain.RequestStatusResolved || q.Decision != domain.DecisionDecline || q.AnsweredBy != domain.AnsweredByTimeout {
		t.Errorf("the request: %s, %s by %q; want resolved, declined by the timeout", q.Status, q.Decision, q.AnsweredBy)
	}
	if r := th.Runs[0]; r.Status != domain.RunStatusCompleted {
		t.Errorf("the asking run: %s, want completed", r.Status)
	}
	if _, err := os.Stat(filepath.Join(th.Cwd, "secret.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("secret.txt was written (%v)", err)
	}
	if _, err := healthpb.NewHealthClient(s.dial()).Check(t.Context(), &healthpb.HealthCheckRequest{Service: "baton.v1.Baton"}, grpc.WaitForReady(true)); err != nil {
		t.Errorf("the service after the stall: %v\n%s", err, s.stderr)
	}
}

// A negative timeout is bad usage, said in the user's words.
func TestSilenceTimeoutsRefuseNegatives(t *testing.T) {
	for flag, want := range map[string]string{
		"--turn-stall-timeout": "baton: threads: --turn-stall-timeout must be a duration, such as 30m or 2h, or 0 to never end a silent turn; got -1s\n",
		"--request-timeout":    "baton: threads: --request-timeout must be a duration, such as 10m or 1h, or 0 to let requests wait for an answer; got -1s\n",
	} {
		_, errOut, code := baton(t, "threads", flag, "-1s")
		if code != exitUsage || errOut != want {
			t.Errorf("%s -1s: exit %d, %q; want %d, %q", flag, code, errOut, exitUsage, want)
		}
	}
}
