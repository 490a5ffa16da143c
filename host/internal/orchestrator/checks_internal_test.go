package orchestrator

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-run/baton/host/internal/domain"
	"github.com/baton-run/baton/host/internal/ids"
	"github.com/baton-run/baton/sdk/clock"
)

// An --until check as the host runs it: the tail of what it printed, its
// exit, a timeout on the host's clock that kills its whole process group,
// and a check that cannot run at all.
func TestRunCheck(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	h, err := Open(Config{DataDir: t.TempDir(), PluginDirs: stubPlugins(t), IDs: ids.Seeded(3), Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	cwd := t.TempDir()
	if err := os.WriteFile(filepath.Join(cwd, "here.txt"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	rc, err := h.Dispatch(t.Context(), domain.Command{ID: "c", Payload: domain.CreateThread{Provider: "none", Cwd: cwd,
		ProviderCommand: domain.ProviderCommand{Argv: []string{"x"}}}})
	if err != nil {
		t.Fatal(err)
	}
	check := func(cmd string, timeout time.Duration) domain.CheckResult {
		t.Helper()
		e := domain.RunCheck{EffectHead: domain.EffectHead{ID: "e1", ThreadID: rc.ThreadID}, RunID: "run_1", Command: cmd, Timeout: timeout}
		r, settled := h.runCheck(e)
		c := domain.Outcome(nil, e, r)
		if want := "check:e1"; !settled || c == nil || c.ID != want {
			t.Fatalf("command %+v, want id %s", c, want)
		}
		return c.Payload.(domain.RecordCheck).CheckResult
	}

	// It runs in the thread's cwd, and its output's tail is kept.
	got := check(`ls; head -c 20000 /dev/zero | tr '\0' x; echo; echo END; exit 3`, time.Minute)
	if got.ExitCode != 3 || !got.Truncated || got.TimedOut || got.Error != "" || len(got.Output) != domain.MaxCheckOutput ||
		!strings.HasSuffix(got.Output, "xxx\nEND\n") {
		t.Fatalf("check: exit %d truncated %v timed out %v error %q, %d bytes ending %q", got.ExitCode, got.Truncated,
			got.TimedOut, got.Error, len(got.Output), got.Output[max(0, len(got.Output)-10):])
	}
	if got := check("ls", 0); got.Output != "here.txt\n" || !got.Passed() {
		t.Fatalf("ls in the thread's cwd: %+v", got)
	}

	// A check that outlives its timeout (the default one, when the effect
	// names none) is killed with its children at the host clock's
	// timeout.
	done := make(chan domain.CheckResult)
	go func() { done <- check("sleep 600 & sleep 600; echo never", 0) }()
	if err := clk.WaitTimers(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]time.Duration{domain.DefaultCheckTimeout}, clk.Pending()); diff != "" {
		t.Fatalf("the check's timeout (-want +got):\n%s", diff)
	}
	clk.Advance(domain.DefaultCheckTimeout)
	if got := <-done; !got.TimedOut || got.ExitCode != -1 || got.Passed() || strings.Contains(got.Output, "never") {
		t.Fatalf("timed out check: %+v", got)
	}

	// A cwd that is gone: the check cannot run, and says why.
	if err := os.RemoveAll(cwd); err != nil {
		t.Fatal(err)
	}
	want := domain.CheckResult{RunID: "run_1", Command: "true", ExitCode: -1, Error: "the thread's working directory " + cwd + " does not exist"}
	if got := check("true", time.Minute); !cmp.Equal(want, got) || got.Passed() {
		t.Fatalf("check in a missing cwd (-want +got):\n%s", cmp.Diff(want, got))
	}
}
