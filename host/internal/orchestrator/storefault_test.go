package orchestrator_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"github.com/baton-run/baton/host/internal/domain"
	"github.com/baton-run/baton/host/internal/eventlog"
	"github.com/baton-run/baton/host/internal/orchestrator"
	"github.com/baton-run/baton/sdk/clock"
)

// A store that fails under a host that stays up: what the host records on
// its own (a provider's events, a wait's fire, a forced stop) is retried
// until it commits while the failure may mend (reads that fail for a
// while), and a store that cannot go on (its log cannot be written,
// damage) stops the host the same way whatever the cause. The store runs
// on a file system that fails when the test says (Pebble's errorfs).

// faults make a store's file system fail: its tables' reads (as a disk
// that returns I/O errors for a while: an error, not damage), or its log's
// writes (as a full disk, which Pebble does not go on from).
type faults struct {
	reads, writes atomic.Bool
	failedReads   atomic.Int64
}

var (
	errIO      = errors.New("input/output error (injected)")
	errNoSpace = errors.New("no space left on device (injected)")
)

func (f *faults) fs(base vfs.FS) vfs.FS {
	return errorfs.Wrap(base, errorfs.InjectorFunc(func(op errorfs.Op) error {
		switch rw := op.Kind.ReadOrWrite(); {
		case f.reads.Load() && rw == errorfs.OpIsRead && strings.HasSuffix(op.Path, ".sst"):
			f.failedReads.Add(1)
			return errIO
		case f.writes.Load() && rw == errorfs.OpIsWrite && strings.HasSuffix(op.Path, ".log"):
			return errNoSpace
		}
		return nil
	}))
}

// newEnvOn is newEnv with the host's store on fs.
func newEnvOn(t *testing.T, fs vfs.FS) *env {
	t.Helper()
	e := &env{t: t, data: t.TempDir(), ws: t.TempDir(), seed: 1, clock: clock.NewFake(epoch), storeFS: fs}
	e.open()
	t.Cleanup(func() {
		if e.host != nil {
			e.host.Close()
		}
	})
	return e
}

// unreadable compacts the host's store, so that its tables are new and
// the next reads of them go to the disk, and makes those reads fail.
func (f *faults) unreadable(t *testing.T, h *orchestrator.Host) {
	t.Helper()
	if err := h.Store().(*eventlog.Store).Compact(t.Context()); err != nil {
		t.Fatal(err)
	}
	f.reads.Store(true)
}

// outboxEmpty waits until none of a thread's effects is left in the
// outbox: every action the host began for it has its outcome recorded
// (some outcomes change nothing a projection shows, so only the outbox
// tells).
func (e *env) outboxEmpty(threadID string) {
	e.t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		out, err := e.host.Store().Outbox()
		if err != nil {
			e.t.Fatal(err)
		}
		if !slices.ContainsFunc(out, func(s eventlog.StoredEffect) bool { return s.ThreadID == threadID }) {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("thread %s still has effects in the outbox a minute later: %v", threadID, out)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// outlast lets a retry fail tries times on the host's clock, the reads
// mended before its last pause ends: each pause must be the one the
// backoff gives (doubling from 50ms, at most 5s), and still must hold of
// the thread at each. It returns the time the retry paused in all.
func (e *env) outlast(f *faults, threadID string, tries int, still func(domain.Thread) error) time.Duration {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(e.t.Context(), time.Minute)
	defer cancel()
	var total time.Duration
	pause := 50 * time.Millisecond
	for try := 1; try <= tries; try++ {
		p, err := waitBounds(ctx, e.clock, 1)
		if err != nil {
			e.t.Fatalf("%d tries failed, and no retry is pending a minute later: it was given up (%v)", try, err)
		}
		if !cmp.Equal(p, []time.Duration{pause}) {
			e.t.Fatalf("after %d failed tries, pending timers %v; want the retry's pause, %s", try, p, pause)
		}
		if err := still(mustThread(e.t, e, threadID)); err != nil {
			e.t.Fatalf("after %d failed tries: %v", try, err)
		}
		if try == tries {
			f.reads.Store(false)
		}
		e.clock.Advance(pause)
		total += pause
		pause = min(2*pause, 5*time.Second)
	}
	if f.failedReads.Load() < int64(tries) {
		e.t.Fatalf("%d reads failed, want at least one a try (%d)", f.failedReads.Load(), tries)
	}
	return total
}

// failedTries is how many times a retry fails in these tests: more than
// the five a retry used to give up after.
const failedTries = 8

// A wait whose fire cannot be stored (the store's reads fail) is tried
// again, on the host's clock, until it is: the run waits meanwhile, and
// then continues, late by the pauses.
func TestWaitFireIsRetriedUntilItCommits(t *testing.T) {
	var f faults
	e := newEnvOn(t, f.fs(vfs.NewMem()))
	const name = "codex/usage_limit_wait.ndjson"
	e.atCapture(name)
	id := e.createThreadWith("codex", name, domain.ApproveAccept)
	e.setPolicy(id, domain.ContinuationPolicy{OnLimit: domain.OnLimitWait})
	e.dispatch(domain.Command{ID: "m1", ThreadID: id, Payload: domain.DispatchMessage{Text: messages(t, "codex/usage_limit_wait.messages")[0]}})
	th := e.waitFor(id, "the run to wait for the limit", func(t domain.Thread) bool { return t.NextWait() != nil })
	w := *th.NextWait()
	e.outboxEmpty(id) // the turn's own outcome is recorded: only the fire will retry
	f.unreadable(t, e.host)
	e.clock.Set(w.At)
	paused := e.outlast(&f, id, failedTries, func(th domain.Thread) error {
		if r := th.Runs[0]; r.Status != domain.RunStatusWaiting || r.WaitID != w.ID {
			return errors.New("the run is " + string(r.Status) + ", want it waiting")
		}
		return nil
	})
	th = e.waitFor(id, "the run to end", allRunsEnded(1))
	r := th.Runs[0]
	var attempts []string
	for _, a := range r.Attempts {
		attempts = append(attempts, string(a.Reason)+" "+string(a.Status)+" "+a.StartedAt.UTC().Format(time.RFC3339Nano))
	}
	want := []string{
		"initial blocked " + r.Attempts[0].StartedAt.UTC().Format(time.RFC3339Nano),
		"usage_limit_continuation completed " + w.At.Add(paused).UTC().Format(time.RFC3339Nano),
	}
	if r.Status != domain.RunStatusCompleted || !cmp.Equal(want, attempts) {
		t.Fatalf("run %s, attempts (-want +got):\n%s", r.Status, cmp.Diff(want, attempts))
	}
	wantEvents := []string{
		"run.started", "attempt.started initial codex",
		"run.limit_reached", "attempt.ended blocked", "wait.armed",
		"wait.ended fired", "attempt.started usage_limit_continuation codex",
		"run.ended completed",
	}
	if diff := cmp.Diff(wantEvents, e.loopEvents(id)); diff != "" {
		t.Fatalf("the run's story (-want +got):\n%s", diff)
	}
}

// A provider's events that cannot be stored are not dropped: the batch is
// tried again until it commits, and only then acknowledged. Here the
// provider dies mid-turn while the store's reads fail: the run stays
// running through the retries, and then ends failed with the provider's
// death, its session ended.
func TestProviderEventsAreRetriedUntilTheyCommit(t *testing.T) {
	var f faults
	e := newEnvOn(t, f.fs(vfs.NewMem()))
	id := e.createThread("acp", "acp/stall.ndjson")
	e.dispatch(domain.Command{ID: "m1", ThreadID: id, Payload: domain.DispatchMessage{Text: "Take your time"}})
	th := e.waitFor(id, "the provider's thinking", func(th domain.Thread) bool {
		return len(th.Runs) == 1 && th.Runs[0].Status == domain.RunStatusRunning && len(th.TurnItems) > 0
	})
	f.unreadable(t, e.host)
	if err := syscall.Kill(th.ProviderSessions[0].ProviderPid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	e.outlast(&f, id, failedTries, func(th domain.Thread) error {
		if s := th.Runs[0].Status; s != domain.RunStatusRunning {
			return errors.New("the run is " + string(s) + " before the provider's events were stored")
		}
		return nil
	})
	th = e.waitFor(id, "the run and its session to end", func(th domain.Thread) bool {
		return allRunsEnded(1)(th) && th.ProviderSessions[0].Status == domain.SessionStatusEnded
	})
	type end struct {
		Run     domain.RunStatus
		Failure *domain.Failure
		Session domain.SessionStatus
	}
	want := end{domain.RunStatusFailed, &domain.Failure{Code: "provider_exited", Message: "the agent was killed by SIGKILL during the turn"},
		domain.SessionStatusEnded}
	if diff := cmp.Diff(want, end{th.Runs[0].Status, th.Runs[0].Failure, th.ProviderSessions[0].Status}); diff != "" {
		t.Fatalf("the run's end (-want +got):\n%s", diff)
	}
}

// An interrupt's deadline whose forced stop cannot be stored is tried
// again until it is: the run runs on through the retries, then ends
// interrupted by force, its provider's process gone.
func TestForcedStopIsRetriedUntilItCommits(t *testing.T) {
	var f faults
	e := newEnvOn(t, f.fs(vfs.NewMem()))
	threadID, _ := e.startIgnored("acp", false)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if p, err := waitBounds(ctx, e.clock, 1); err != nil || !cmp.Equal(p, []time.Duration{domain.DefaultInterruptGrace}) {
		t.Fatalf("pending timers %v (%v); want the grace, %s", p, err, domain.DefaultInterruptGrace)
	}
	f.unreadable(t, e.host)
	e.clock.Advance(domain.DefaultInterruptGrace)
	paused := e.outlast(&f, threadID, failedTries, func(th domain.Thread) error {
		if r := th.Runs[0]; r.Status != domain.RunStatusRunning || r.Stop.Forced != "" {
			return errors.New("the run is " + string(r.Status) + ", forced " + r.Stop.Forced + "; want it running until the stop is stored")
		}
		return nil
	})
	reason := "the provider did not stop within 10s of the interrupt, so the host ended its process"
	th := e.checkForced(threadID, reason)
	if got, want := *th.Runs[0].EndedAt, epoch.Add(domain.DefaultInterruptGrace+paused); !got.Equal(want) {
		t.Errorf("the run ended at %v, want at the grace's end and the retries' pauses, %v", got, want)
	}
}

// parkFatal makes eventlog.Fatal park the goroutine that calls it (Pebble's,
// which must not go on), as a process would end, and send its line on the
// returned channel: the process here is the test's.
func parkFatal(t *testing.T) <-chan string {
	lines := make(chan string, 8)
	saved := eventlog.Fatal
	t.Cleanup(func() { eventlog.Fatal = saved })
	eventlog.Fatal = func(msg string) {
		lines <- msg
		select {}
	}
	return lines
}

// waitGone waits until a process has ended (a zombie has), for at most a
// minute: its pidfd becomes readable when it does.
func waitGone(t *testing.T, pid int) {
	t.Helper()
	fd, err := unix.PidfdOpen(pid, 0)
	if errors.Is(err, unix.ESRCH) {
		return
	} else if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	for {
		n, err := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, int(time.Minute/time.Millisecond))
		switch {
		case err == unix.EINTR:
			continue
		case err != nil:
			t.Fatal(err)
		case n == 0:
			t.Fatalf("process %d still runs a minute after the store failed", pid)
		}
		return
	}
}

// failedStore checks a host whose store has failed with cause: Failed is
// closed, Failure says why, a command is refused saying so, the processes
// of the thread's session are gone, and nothing was recorded after the
// failure (the run the host could not end runs on in the projection, for
// the next host to end). Close returns the failure.
func (e *env) failedStore(threadID string, procs []int, cause string) {
	e.t.Helper()
	select {
	case <-e.host.Failed():
	case <-time.After(time.Minute):
		e.t.Fatal("the host did not stop a minute after its store failed")
	}
	want := "the event store failed, so nothing more can be recorded; the host is stopping: " + cause
	if err := e.host.Failure(); !errors.Is(err, orchestrator.ErrStoreFailed) || err.Error() != want {
		e.t.Errorf("Failure() = %v, want %q", err, want)
	}
	_, err := e.host.Dispatch(e.t.Context(), domain.Command{ID: "after", ThreadID: threadID, Payload: domain.DispatchMessage{Text: "Are you there?"}})
	if !errors.Is(err, orchestrator.ErrStoreFailed) || err.Error() != want {
		e.t.Errorf("a command after the store failed: %v, want %q", err, want)
	}
	for _, pid := range procs {
		waitGone(e.t, pid)
	}
	th := mustThread(e.t, e, threadID)
	if got := []domain.RunStatus{th.Runs[0].Status}; !slices.Equal(got, []domain.RunStatus{domain.RunStatusRunning}) {
		e.t.Errorf("runs %v, want the one that ran, still running: nothing is recorded after the failure", got)
	}
	closed := make(chan error, 1)
	go func() { closed <- e.host.Close() }()
	select {
	case err := <-closed:
		if !errors.Is(err, orchestrator.ErrStoreFailed) || err.Error() != want {
			e.t.Errorf("Close of the host whose store failed: %v, want its failure, %q", err, want)
		}
	case <-time.After(time.Minute):
		e.t.Fatal("Close of the host whose store failed did not return in a minute")
	}
	e.host = nil
}

// stalled starts a run whose provider thinks and then says nothing, and
// returns the thread and the processes of its session (plugin, provider).
func (e *env) stalled() (string, []int) {
	e.t.Helper()
	id := e.createThread("acp", "acp/stall.ndjson")
	e.dispatch(domain.Command{ID: "m1", ThreadID: id, Payload: domain.DispatchMessage{Text: "Take your time"}})
	th := e.waitFor(id, "the provider's thinking", func(th domain.Thread) bool {
		return len(th.Runs) == 1 && th.Runs[0].Status == domain.RunStatusRunning && len(th.TurnItems) > 0
	})
	s := th.ProviderSessions[0]
	return id, []int{s.PluginPid, s.ProviderPid}
}

// The log cannot be written (the disk is full): Pebble gives up, and the
// host stops, mid-turn. The command whose write failed is refused saying
// the store failed, as is every later one; the providers are stopped.
func TestHostStopsWhenItsLogCannotBeWritten(t *testing.T) {
	lines := parkFatal(t)
	var f faults
	e := newEnvOn(t, f.fs(vfs.NewMem()))
	id, procs := e.stalled()
	f.writes.Store(true)
	const cause = "pebble: fatal commit error: " + "no space left on device (injected)"
	_, err := e.host.Dispatch(t.Context(), domain.Command{ID: "m2", ThreadID: id, Payload: domain.DispatchMessage{Text: "And then?"}})
	if want := "the event store failed, so nothing more can be recorded; the host is stopping: " + cause; !errors.Is(err, orchestrator.ErrStoreFailed) || err.Error() != want {
		t.Errorf("the command whose write failed: %v, want %q", err, want)
	}
	if line, want := <-lines, "the event store "+filepath.Join(e.data, "events")+" failed and this process cannot go on: "+cause; line != want {
		t.Errorf("Fatal got %q, want %q", line, want)
	}
	e.failedStore(id, procs, cause)
}

// A read meets damage (a table's bytes overwritten on the disk): the host
// stops the same way, mid-turn.
func TestHostStopsWhenItsStoreIsDamaged(t *testing.T) {
	e := newEnv(t)
	id, procs := e.stalled()
	if err := e.host.Store().(*eventlog.Store).Compact(t.Context()); err != nil {
		t.Fatal(err)
	}
	ssts, _ := filepath.Glob(filepath.Join(e.data, "events", "*.sst"))
	slices.Sort(ssts)
	if len(ssts) == 0 {
		t.Fatal("no table after compacting the store")
	}
	sst := ssts[len(ssts)-1]
	b, err := os.ReadFile(sst)
	if err != nil {
		t.Fatal(err)
	}
	for i := 64; i < len(b)-128; i++ {
		b[i] ^= 0x5a
	}
	if err := os.WriteFile(sst, b, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = e.host.ThreadEvents(id, 0)
	var d *eventlog.DamageError
	if !errors.As(err, &d) || d.File != sst {
		t.Fatalf("a read of the damaged table: %v, want damage naming %s", err, sst)
	}
	e.failedStore(id, procs, d.Error())
}
