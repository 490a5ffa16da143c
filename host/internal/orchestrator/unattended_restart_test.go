package orchestrator_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/go-hclog"

	"github.com/baton-run/baton/host/internal/domain"
	"github.com/baton-run/baton/host/internal/ids"
	"github.com/baton-run/baton/host/internal/orchestrator"
	"github.com/baton-run/baton/sdk/clock"
	"github.com/baton-run/baton/sdk/plugintest"
)

// A wait survives its host. A host killed with SIGKILL while a run waits
// for a provider's limit to lift leaves the wait in the log; the next host
// recovers the thread (the killed host's provider session ends), arms the
// wait again, and fires it once: at once when its instant passed while no
// host ran, else when the clock reaches it. The continuation is a new
// attempt of the same run, in a new provider process that resumes the
// provider's thread. Recorded from the real codex, killed the same way
// (testdata/record_restart.sh).

// restartTranscript is the recording, and restartReset the reset its
// limit frame gives (account/rateLimits/updated primary.resetsAt).
const restartTranscript = "codex/usage_limit_restart.ndjson"

var restartReset = time.Unix(1796154745, 0)

// How the hosts after the killed one start: the next after the wait's
// instant (it fires the wait at once); the next before the instant (it
// arms the wait again), then one more before it (closed and opened again:
// the wait is still armed); or the next before the instant, closed, and
// one more after it (fires at once a wait no recovery touched).
type restartPlan int

const (
	startAfter restartPlan = iota
	startBeforeTwice
	startBeforeThenAfter
)

func TestSIGKILLDuringAWaitContinuesOnce(t *testing.T) {
	for _, c := range []struct {
		name string
		plan restartPlan
	}{
		{"started after the instant", startAfter},
		{"started before the instant, twice", startBeforeTwice},
		{"started before the instant, then after it", startBeforeThenAfter},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := &env{t: t, data: t.TempDir(), ws: t.TempDir(), seed: 100, clock: clock.NewFake(epoch)}
			captured := e.atCapture(restartTranscript)
			k := killWhileWaiting(t, e, captured)
			w := k.Wait
			// The killed host's wait: the reset the provider gave, plus the
			// wait's jitter, armed when the limit came.
			if !w.Limit.ResetsAt.Equal(restartReset) || !w.At.Equal(restartReset.Add(domain.Jitter(w.ID))) || w.Probe != 1 ||
				w.Kind != domain.WaitContinue || !w.ArmedAt.Equal(captured) {
				t.Fatalf("the killed host's wait %+v (captured at %s)", w, captured)
			}
			t.Cleanup(func() {
				if e.host != nil {
					e.host.Close()
				}
			})
			if c.plan == startAfter {
				e.clock.Set(w.At.Add(time.Hour))
				e.open()
			} else {
				// A second after the kill.
				e.clock.Set(captured.Add(time.Second))
				e.open()
				e.waitArmedAgain(k.ThreadID, w, w.At.Sub(e.clock.Now()))
			}
			fired := e.clock.Now()
			switch c.plan {
			case startBeforeTwice:
				e.restart()
				e.waitArmedAgain(k.ThreadID, w, w.At.Sub(e.clock.Now()))
				e.clock.Set(w.At.Add(-time.Millisecond))
				if diff := cmp.Diff([]time.Duration{time.Millisecond}, e.clock.Pending()); diff != "" {
					t.Fatalf("pending timers a moment before the instant (-want +got):\n%s", diff)
				}
				e.clock.Set(w.At)
				fired = w.At
			case startBeforeThenAfter:
				if err := e.host.Close(); err != nil {
					t.Fatal(err)
				}
				e.host = nil
				e.clock.Set(w.At.Add(time.Hour))
				e.open()
				fired = e.clock.Now()
			}
			th := e.waitFor(k.ThreadID, "the run to end", allRunsEnded(1))
			r := th.Runs[0]
			type attempt struct {
				Reason  domain.AttemptReason
				Status  domain.AttemptStatus
				Started time.Time
			}
			var got []attempt
			for _, a := range r.Attempts {
				got = append(got, attempt{a.Reason, a.Status, a.StartedAt.UTC()})
			}
			want := []attempt{
				{domain.AttemptInitial, domain.AttemptStatus(domain.RunStatusBlocked), captured},
				{domain.AttemptUsageLimitContinuation, domain.AttemptStatus(domain.RunStatusCompleted), fired.UTC()},
			}
			if r.Status != domain.RunStatusCompleted || !cmp.Equal(got, want) {
				t.Fatalf("run %s %+v; attempts (-want +got):\n%s", r.Status, r.Failure, cmp.Diff(want, got))
			}
			codexThread := th.ProviderThreads[0].ProviderRef
			wantStory := []string{
				"run.started", "attempt.started initial codex", `provider.session.opened (resume "": false)`,
				"run.limit_reached", "attempt.ended blocked", "wait.armed " + stamp(w.At),
				// The next host.
				"provider.session.ended: the host restarted while this was in progress",
				"wait.ended fired at " + stamp(fired), "attempt.started usage_limit_continuation codex",
				fmt.Sprintf("provider.session.opened (resume %q: true)", codexThread),
				"run.ended completed",
			}
			if diff := cmp.Diff(wantStory, e.restartStory(k.ThreadID)); diff != "" {
				t.Fatalf("the run's story (-want +got):\n%s", diff)
			}
			if b, err := os.ReadFile(filepath.Join(e.ws, "notes.txt")); err != nil || string(b) != "done\n" {
				t.Fatalf("notes.txt %q, %v", b, err)
			}
			if n := e.countSent(th, domain.DefaultContinueText); n != 1 {
				t.Fatalf("the continuation was sent to the provider %d times", n)
			}
		})
	}
}

// waitArmedAgain checks that a host started before the wait's instant has
// armed its one timer for the rest of the wait, and that the run waits on
// the wait the killed host armed.
func (e *env) waitArmedAgain(threadID string, w domain.Wait, rest time.Duration) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(e.t.Context(), hangGuard)
	defer cancel()
	if err := e.clock.WaitTimers(ctx, 1); err != nil {
		e.t.Fatalf("the wait was not armed again: %v", err)
	}
	if diff := cmp.Diff([]time.Duration{rest}, e.clock.Pending()); diff != "" {
		e.t.Fatalf("pending timers (-want +got):\n%s", diff)
	}
	th := mustThread(e.t, e, threadID)
	if next := th.NextWait(); next == nil || *next != w || th.Runs[0].Status != domain.RunStatusWaiting {
		e.t.Fatalf("run %s, next wait %+v; want the killed host's %+v", th.Runs[0].Status, next, w)
	}
}

// restartStory is loopEvents with the provider sessions' opening and
// ending, and the instants of the wait's arming and firing.
func (e *env) restartStory(threadID string) []string {
	e.t.Helper()
	recs, err := e.host.ThreadEvents(threadID, 0)
	if err != nil {
		e.t.Fatal(err)
	}
	var out []string
	for _, r := range recs {
		p, err := domain.DecodePayload(r.Type, r.Data)
		if err != nil {
			e.t.Fatal(err)
		}
		switch p := p.(type) {
		case domain.SessionOpened:
			out = append(out, fmt.Sprintf("%s (resume %q: %v)", r.Type, p.ResumeRequested, p.Resumed))
		case domain.SessionEnded:
			out = append(out, r.Type+": "+p.Reason)
		case domain.WaitArmed:
			out = append(out, r.Type+" "+stamp(p.Wait.At))
		case domain.WaitEnded:
			out = append(out, fmt.Sprintf("%s %s at %s", r.Type, p.Outcome, stamp(r.At)))
		default:
			if line, ok := loopEvent(r.Type, p); ok {
				out = append(out, line)
			}
		}
	}
	return out
}

// stamp is an instant to the nanosecond, in UTC.
func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// waitingSetup is what the waiting helper is given.
type waitingSetup struct {
	PluginDir string
	Cwd       string
	Command   domain.ProviderCommand
	Text      string
	// Now is the helper host's clock, which nothing moves.
	Now time.Time
}

// waiting is what the waiting helper says once its run waits.
type waiting struct {
	ThreadID    string
	Wait        domain.Wait
	PluginPid   int
	ProviderPid int
}

// killWhileWaiting runs the waiting helper on e's data dir and workspace,
// with the provider command that replays the recording (its cursor file is
// the one the next host's provider continues from), and kills it with
// SIGKILL once its run waits. Its plugin and provider exit with it.
func killWhileWaiting(t *testing.T, e *env, now time.Time) waiting {
	t.Helper()
	b, _ := json.Marshal(waitingSetup{PluginDir: pluginDir, Cwd: e.ws, Command: e.peer("codex", restartTranscript),
		Text: messages(t, "codex/usage_limit_restart.messages")[0], Now: now})
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "BATON_WAITING_HELPER="+e.data, "BATON_WAITING_SETUP="+string(b))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var k waiting
	sc := bufio.NewScanner(out)
	if !sc.Scan() || json.Unmarshal(sc.Bytes(), &k) != nil {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("the waiting helper said %q", sc.Text())
	}
	plugin, provider := plugintest.Pidfd(t, k.PluginPid), plugintest.Pidfd(t, k.ProviderPid)
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	checkExited(t, "its host's SIGKILL", plugin, provider)
	return k
}

// waitingHelper is the host TestSIGKILLDuringAWaitContinuesOnce kills: a
// codex thread whose policy waits on a limit, and a run that hit one. Its
// clock is a fake that nothing moves, so the wait is still armed when the
// test kills it. It prints what it is waiting for (a waiting, as JSON)
// and waits to be killed.
func waitingHelper(dir string) int {
	var setup waitingSetup
	if err := json.Unmarshal([]byte(os.Getenv("BATON_WAITING_SETUP")), &setup); err != nil {
		fmt.Fprintln(os.Stderr, "waiting helper:", err)
		return 1
	}
	h, err := orchestrator.Open(orchestrator.Config{DataDir: dir, PluginDirs: []string{setup.PluginDir},
		Logger: hclog.New(&hclog.LoggerOptions{Level: hclog.Warn, Output: os.Stderr}),
		IDs:    ids.Seeded(1), Clock: clock.NewFake(setup.Now), Unattended: true})
	if err != nil {
		fmt.Fprintln(os.Stderr, "waiting helper:", err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rc, err := h.Dispatch(ctx, domain.Command{ID: "create", Payload: domain.CreateThread{Provider: "codex", Cwd: setup.Cwd,
		ProviderCommand: setup.Command, ApprovalPolicy: domain.ApproveAccept}})
	if err == nil {
		_, err = h.Dispatch(ctx, domain.Command{ID: "policy", ThreadID: rc.ThreadID,
			Payload: domain.SetPolicy{Policy: domain.ContinuationPolicy{OnLimit: domain.OnLimitWait}}})
	}
	if err == nil {
		_, err = h.Dispatch(ctx, domain.Command{ID: "m1", ThreadID: rc.ThreadID, Payload: domain.DispatchMessage{Text: setup.Text}})
	}
	var th domain.Thread
	if err == nil {
		th, err = waitUntil(ctx, h, rc.ThreadID, func(t domain.Thread) bool { return t.NextWait() != nil })
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "waiting helper:", err)
		return 1
	}
	s := th.ProviderSessions[0]
	b, _ := json.Marshal(waiting{ThreadID: th.ID, Wait: *th.NextWait(), PluginPid: s.PluginPid, ProviderPid: s.ProviderPid})
	fmt.Printf("%s\n", b)
	<-ctx.Done() // killed before
	return 1
}

// waitUntil waits until the thread's projection satisfies ok.
func waitUntil(ctx context.Context, h *orchestrator.Host, threadID string, ok func(domain.Thread) bool) (domain.Thread, error) {
	for _, err := range h.Events(ctx, 0) {
		if err != nil {
			return domain.Thread{}, err
		}
		if th, err := h.Thread(threadID); err == nil && ok(th) {
			return th, nil
		}
	}
	return domain.Thread{}, fmt.Errorf("thread %s: %w", threadID, ctx.Err())
}
