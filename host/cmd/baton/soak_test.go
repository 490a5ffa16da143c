//go:build linux

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	batonv1 "github.com/baton-run/baton/host/api/baton/v1"
	"github.com/baton-run/baton/host/internal/domain"
	"github.com/baton-run/baton/host/internal/eventlog"
	"github.com/baton-run/baton/host/internal/orchestrator"
	"github.com/baton-run/baton/host/internal/scenario"
	"github.com/baton-run/baton/host/internal/service"
	"github.com/baton-run/baton/sdk/replay"
	"github.com/baton-run/baton/sdk/transcript"
)

// The soak, as the most trusted stores test themselves: `baton serve` for
// a bounded time (BATON_SOAK, `make soak`: 10m) under everything a service
// meets in months of use at once:
//
//   - BATON_SOAK_THREADS (20) workers, each replaying recorded sessions of
//     every provider in a loop, a new thread each time, through the API;
//   - chaos: every few seconds a provider process killed with SIGKILL, now
//     and then a plugin process, and now and then a store fault (the
//     service's file size limit dropped to nothing with prlimit, so its
//     next write fails with EFBIG, as a full disk would);
//   - subscribers to the whole log that read slowly, fall behind, are cut
//     off and subscribe again after the last event they got;
//   - a supervisor that starts the service again whenever it exits, as
//     systemd's Restart=on-failure does.
//
// At the end, every run has ended with a reason, the log is gapless
// (doctor), every projection equals its rebuild from the log, memory is
// flat after warm-up, and no goroutine or file descriptor has leaked.
// The figures are logged (go test -v): read them in the closing note.
func TestSoak(t *testing.T) {
	d := os.Getenv("BATON_SOAK")
	if d == "" {
		t.Skip("the soak runs on demand: make soak (BATON_SOAK=10m; BATON_SOAK_THREADS=20)")
	}
	dur, err := time.ParseDuration(d)
	if err != nil || dur <= 0 {
		t.Fatalf("BATON_SOAK=%q: give a duration, such as 10m", d)
	}
	workers := 20
	if n := os.Getenv("BATON_SOAK_THREADS"); n != "" {
		if workers, err = strconv.Atoi(n); err != nil || workers < 1 {
			t.Fatalf("BATON_SOAK_THREADS=%q: give a count", n)
		}
	}
	sk := newSoak(t, dur, workers)
	sk.run()
	sk.check()
}

// soakScenario is a recorded session a worker replays: its transcript
// and the messages its runs take.
type soakScenario struct {
	provider, transcript string
	messages             []string
}

// soakScenarios are the sessions the workers replay, every provider's.
func soakScenarios(t *testing.T) []soakScenario {
	t.Helper()
	out := []soakScenario{
		{"acp", "acp/multi_turn.ndjson", lines(t, "acp/multi_turn.messages")},
		{"acp", "acp/simple.ndjson", lines(t, "acp/simple.messages")},
		{"opencode", "opencode/simple.ndjson", lines(t, "opencode/simple.messages")},
		{"cursor", "cursor/multi_turn.ndjson", lines(t, "cursor/multi_turn.messages")},
	}
	for _, s := range []struct{ provider, name string }{{"codex", "multi_turn"}, {"claude", "multi_turn"}} {
		sc, err := scenario.Load(filepath.Join(root, "testdata", s.provider, s.name+".steps.json"))
		if err != nil {
			t.Fatal(err)
		}
		var msgs []string
		for _, st := range sc.Steps {
			if st.Send != "" {
				msgs = append(msgs, st.Send)
			}
		}
		out = append(out, soakScenario{s.provider, s.provider + "/" + s.name + ".ndjson", msgs})
	}
	return out
}

// soak is one soak's world.
type soak struct {
	t         *testing.T
	dur       time.Duration
	workers   int
	data, ws  string
	scenarios []soakScenario
	sup       *supervisor

	threads   sync.Map // thread id -> true: every thread the workers made
	cycles    atomic.Int64
	kills     atomic.Int64 // providers killed
	plugins   atomic.Int64 // plugins killed
	faults    atomic.Int64 // store faults injected
	cutoffs   atomic.Int64 // subscribers cut off for falling behind
	stuck     atomic.Int64 // threads whose runs did not end in time
	subEvents atomic.Int64

	mu      sync.Mutex
	samples []soakSample
	errs    []string
}

// soakSample is what the service's process held at one instant.
type soakSample struct {
	at                     time.Duration
	goroutines, openFiles  int
	heap, resident         uint64
	activeThreads, plugins int
}

func newSoak(t *testing.T, dur time.Duration, workers int) *soak {
	sk := &soak{t: t, dur: dur, workers: workers, data: t.TempDir(), ws: t.TempDir(), scenarios: soakScenarios(t)}
	if err := os.Chmod(sk.data, 0o700); err != nil {
		t.Fatal(err)
	}
	sk.sup = startSupervisor(t, sk.data, "--grace", "2s", "--idle-timeout", "20s")
	return sk
}

// fail records a finding; the soak goes on and reports them all.
func (sk *soak) fail(format string, args ...any) {
	sk.mu.Lock()
	defer sk.mu.Unlock()
	sk.errs = append(sk.errs, fmt.Sprintf(format, args...))
}

func (sk *soak) run() {
	t := sk.t
	start := time.Now()
	// Warm-up: one round of every scenario with no chaos, then the idle
	// state the end is compared with.
	for i, sc := range sk.scenarios {
		sk.cycle(t.Context(), i, sc)
	}
	base := sk.idle("after warm-up")
	t.Logf("warm-up: %s; idle: %d goroutines, %d open files, heap %s, %s resident", time.Since(start).Round(time.Second),
		base.goroutines, base.openFiles, fmtBytes(base.heap), fmtBytes(base.resident))

	ctx, cancel := context.WithTimeout(t.Context(), sk.dur)
	defer cancel()
	var wg sync.WaitGroup
	for i := range sk.workers {
		wg.Go(func() {
			for n := i; ctx.Err() == nil; n += sk.workers {
				sk.cycle(ctx, i, sk.scenarios[n%len(sk.scenarios)])
			}
		})
	}
	chaos, stopChaos := context.WithCancel(ctx)
	wg.Go(func() { sk.chaos(chaos) })
	for range 3 {
		wg.Go(func() { sk.slowSubscriber(ctx) })
	}
	wg.Go(func() { sk.sample(ctx, start) })
	<-ctx.Done()
	stopChaos()
	wg.Wait()
	t.Logf("load: %s, %d cycles, %d providers and %d plugins killed, %d store faults, %d service restarts, %d subscribers cut off, %d events to slow subscribers",
		sk.dur, sk.cycles.Load(), sk.kills.Load(), sk.plugins.Load(), sk.faults.Load(), sk.sup.restarts.Load(), sk.cutoffs.Load(), sk.subEvents.Load())

	end := sk.idle("at the end")
	t.Logf("idle at the end: %d goroutines, %d open files, heap %s, %s resident", end.goroutines, end.openFiles, fmtBytes(end.heap), fmtBytes(end.resident))
	if sk.sup.restarts.Load() == 0 {
		// The same process from warm-up to the end: nothing it holds may
		// have grown with what it did.
		if end.goroutines > base.goroutines+5 {
			sk.fail("goroutines grew from %d to %d, idle", base.goroutines, end.goroutines)
		}
		if end.openFiles > base.openFiles+5 {
			sk.fail("open files grew from %d to %d, idle", base.openFiles, end.openFiles)
		}
	}
	sk.checkMemory()
}

// cycle replays one scenario on a new thread: its messages queued as
// runs, then followed until every run has ended. A service that stops
// meanwhile (a store fault) is waited for; its recovery ends the runs it
// had in flight.
func (sk *soak) cycle(ctx context.Context, worker int, sc soakScenario) {
	defer sk.cycles.Add(1)
	c := sk.sup.client(ctx)
	if c == nil {
		return
	}
	cwd := filepath.Join(sk.ws, fmt.Sprintf("w%d-%d", worker, sk.cycles.Load()))
	if err := os.MkdirAll(cwd, 0o755); err != nil {
		sk.fail("workspace: %v", err)
		return
	}
	if worker%2 == 0 { // half of them checkpoint in git
		exec.Command("git", "-C", cwd, "init", "-q").Run()
	}
	argv := soakPeer(sk.t, sc.transcript, cwd)
	rc, err := c.CreateThread(ctx, &batonv1.CreateThreadRequest{Provider: sc.provider, Cwd: cwd, ProviderCommand: &batonv1.ProviderCommand{Argv: argv},
		ApprovalPolicy: "accept"})
	if err != nil {
		if ctx.Err() == nil && !gone(err) {
			sk.fail("create a %s thread: %v", sc.provider, err)
		}
		return
	}
	thread := rc.GetThreadId()
	sk.threads.Store(thread, true)
	sent := 0
	for _, m := range sc.messages {
		if _, err := c.SendMessage(ctx, &batonv1.SendMessageRequest{ThreadId: thread, Text: m, Mode: "queue_after_active"}); err != nil {
			if ctx.Err() == nil && !gone(err) {
				sk.fail("send to %s: %v", thread, err)
			}
			break
		}
		sent++
	}
	if sent == 0 { // the service stopped before it took a message: no run to follow
		return
	}
	// Followed with the service's own clock of events: every run ends, a
	// service that stops and starts again included, within two minutes.
	deadline := time.Now().Add(2 * time.Minute)
	var last *batonv1.Thread
	for time.Now().Before(deadline) {
		c := sk.sup.client(context.Background())
		if c == nil {
			return
		}
		th, err := c.thread(context.Background(), thread)
		if err == nil && allEnded(th) {
			return
		}
		if err == nil {
			last = th
		}
		sk.waitEvents(c, thread, th.GetSequence())
	}
	sk.stuck.Add(1)
	var where []string
	for _, r := range last.GetRuns() {
		where = append(where, fmt.Sprintf("run %d %s", r.GetOrdinal(), r.GetStatus()))
	}
	sk.fail("thread %s (%s): its runs did not end within 2 minutes (last seen at sequence %d: %s)",
		thread, sc.transcript, last.GetSequence(), strings.Join(where, ", "))
}

// waitEvents waits for the thread's next event after seq (or for the
// stream to end: the service stopped, or a second passed).
func (sk *soak) waitEvents(c *client, thread string, seq uint64) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	st, err := c.Subscribe(ctx, &batonv1.SubscribeRequest{ThreadId: thread, AfterSequence: seq})
	if err == nil {
		st.Recv()
	}
}

// allEnded says whether a thread's runs have all ended.
func allEnded(th *batonv1.Thread) bool {
	for _, r := range th.GetRuns() {
		if !statusOf(r).Terminal() {
			return false
		}
	}
	return len(th.GetRuns()) > 0
}

// gone says whether err is the service going away (or refusing while it
// stops), which the soak causes on purpose.
func gone(err error) bool {
	switch status.Code(err) {
	case codes.Unavailable, codes.Canceled, codes.DeadlineExceeded:
		return true
	}
	return false
}

// soakPeer is the replay peer command for a transcript in cwd; its cursor
// lets a provider started again (a resumed session) go on.
func soakPeer(t *testing.T, name, cwd string) []string {
	abs, _ := filepath.Abs(filepath.Join(root, "testdata", name))
	tr, err := transcript.ReadFile(abs)
	if err != nil {
		t.Fatal(err)
	}
	argv := []string{filepath.Join(binDir, "replaypeer"), "--transcript", abs, "--speed", "2", "--state", filepath.Join(cwd, ".peer-cursor")}
	return append(argv, replay.PeerArgs(tr)...)
}

// chaos kills providers every few seconds, a plugin now and then, and
// injects a store fault now and then, until ctx ends.
func (sk *soak) chaos(ctx context.Context) {
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	tick := time.NewTicker(3 * time.Second)
	defer tick.Stop()
	for n := 1; ; n++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		switch {
		case n%30 == 0:
			if pid := sk.sup.pid(); pid != 0 {
				// A store fault: the next write fails with EFBIG (Go
				// ignores SIGXFSZ), as on a full disk.
				lim := unix.Rlimit{Cur: 1, Max: 1}
				if err := unix.Prlimit(pid, unix.RLIMIT_FSIZE, &lim, nil); err == nil {
					sk.faults.Add(1)
				}
			}
		case n%7 == 0:
			if pid := sk.randomSessionPid(ctx, rng, true); pid != 0 && syscall.Kill(pid, syscall.SIGKILL) == nil {
				sk.plugins.Add(1)
			}
		default:
			if pid := sk.randomSessionPid(ctx, rng, false); pid != 0 && syscall.Kill(pid, syscall.SIGKILL) == nil {
				sk.kills.Add(1)
			}
		}
	}
}

// randomSessionPid is the provider (or plugin) process of a random open
// session of an active thread (0: none).
func (sk *soak) randomSessionPid(ctx context.Context, rng *rand.Rand, plugin bool) int {
	c := sk.sup.client(ctx)
	if c == nil {
		return 0
	}
	st, err := c.GetStatus(ctx, &batonv1.GetStatusRequest{})
	if err != nil || len(st.GetActiveThreads()) == 0 {
		return 0
	}
	ts := st.GetActiveThreads()
	th, err := c.thread(ctx, ts[rng.IntN(len(ts))].GetId())
	if err != nil {
		return 0
	}
	for _, s := range slices.Backward(th.GetProviderSessions()) {
		if domain.SessionStatus(s.GetStatus()) == domain.SessionStatusOpen {
			if plugin {
				return int(s.GetPluginPid())
			}
			return int(s.GetProviderPid())
		}
	}
	return 0
}

// slowSubscriber follows the whole log slowly, as a client on a poor link
// does: cut off when it falls behind, it subscribes again after the last
// event it got. Every event must come once, in order.
func (sk *soak) slowSubscriber(ctx context.Context) {
	var last uint64
	for ctx.Err() == nil {
		c := sk.sup.client(ctx)
		if c == nil {
			return
		}
		st, err := c.Subscribe(ctx, &batonv1.SubscribeRequest{AfterSequence: last})
		if err != nil {
			continue
		}
		// A slow reader, which is what the soak is about: an event each
		// tick.
		pace := time.NewTicker(20 * time.Millisecond)
		for {
			e, err := st.Recv()
			if err != nil {
				if status.Code(err) == codes.ResourceExhausted {
					sk.cutoffs.Add(1)
				}
				break
			}
			if e.GetSequence() <= last {
				sk.fail("a subscriber after %d got %d again, or out of order", last, e.GetSequence())
			}
			last = e.GetSequence()
			sk.subEvents.Add(1)
			<-pace.C
		}
		pace.Stop()
	}
}

// sample records what the service holds every five seconds.
func (sk *soak) sample(ctx context.Context, start time.Time) {
	tick := time.NewTicker(5 * time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if s, ok := sk.status(ctx); ok {
			s.at = time.Since(start)
			sk.mu.Lock()
			sk.samples = append(sk.samples, s)
			sk.mu.Unlock()
		}
	}
}

// status is one sample of the service's process.
func (sk *soak) status(ctx context.Context) (soakSample, bool) {
	c := sk.sup.client(ctx)
	if c == nil {
		return soakSample{}, false
	}
	st, err := c.GetStatus(ctx, &batonv1.GetStatusRequest{})
	if err != nil {
		return soakSample{}, false
	}
	rt := st.GetRuntime()
	running := 0
	for _, p := range st.GetPlugins() {
		if p.GetPid() != 0 {
			running++
		}
	}
	return soakSample{goroutines: int(rt.GetGoroutines()), openFiles: int(rt.GetOpenFiles()), heap: rt.GetHeapBytes(),
		resident: rt.GetResidentBytes(), activeThreads: len(st.GetActiveThreads()), plugins: running}, true
}

// idle waits until the service has no active thread (every run ended,
// every session closed by the idle timeout), then samples it.
func (sk *soak) idle(when string) soakSample {
	deadline := time.Now().Add(3 * time.Minute)
	poll := time.NewTicker(time.Second) // the service's own state, asked again
	defer poll.Stop()
	for {
		s, ok := sk.status(context.Background())
		if ok && s.activeThreads == 0 {
			return s
		}
		if time.Now().After(deadline) {
			sk.t.Fatalf("%s: the service did not go idle within 3 minutes: %+v", when, s)
		}
		<-poll.C
	}
}

// checkMemory says whether the resident memory stayed flat after
// warm-up: the median of the last quarter of the samples against the
// median of the second.
func (sk *soak) checkMemory() {
	sk.mu.Lock()
	samples := slices.Clone(sk.samples)
	sk.mu.Unlock()
	if len(samples) < 8 {
		sk.t.Logf("%d samples: too few to judge the memory", len(samples))
		return
	}
	q := len(samples) / 4
	median := func(ss []soakSample, f func(soakSample) uint64) uint64 {
		v := make([]uint64, len(ss))
		for i, s := range ss {
			v[i] = f(s)
		}
		sort.Slice(v, func(i, j int) bool { return v[i] < v[j] })
		return v[len(v)/2]
	}
	rss := func(s soakSample) uint64 { return s.resident }
	heap := func(s soakSample) uint64 { return s.heap }
	early, late := median(samples[q:2*q], rss), median(samples[3*q:], rss)
	earlyHeap, lateHeap := median(samples[q:2*q], heap), median(samples[3*q:], heap)
	var gmax, fmax int
	for _, s := range samples {
		gmax, fmax = max(gmax, s.goroutines), max(fmax, s.openFiles)
	}
	sk.t.Logf("memory: resident median %s (second quarter) -> %s (last quarter), ratio %.2f; heap %s -> %s; at most %d goroutines and %d open files under load; %d samples",
		fmtBytes(early), fmtBytes(late), float64(late)/float64(early), fmtBytes(earlyHeap), fmtBytes(lateHeap), gmax, fmax, len(samples))
	if float64(late) > 1.25*float64(early) {
		sk.fail("resident memory grew under the same load: median %s in the second quarter, %s in the last", fmtBytes(early), fmtBytes(late))
	}
}

// check stops the service and checks what it left: every run ended with
// a reason, the log gapless, every projection equal to its rebuild.
func (sk *soak) check() {
	t := sk.t
	if err := sk.sup.stop(); err != nil {
		sk.fail("the service's last stop: %v", err)
	}
	for _, e := range sk.sup.exits() {
		t.Logf("the service exited: %s", e)
	}
	out, errOut, code := baton(t, "doctor", "--data", sk.data)
	if code != exitOK {
		sk.fail("doctor: exit %d\n%s%s", code, out, errOut)
	}
	store, err := eventlog.OpenWith(filepath.Join(sk.data, "events"), eventlog.Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("open the store: %v", err)
	}
	defer store.Close()
	summaries, err := orchestrator.ReadThreads(store)
	if err != nil {
		t.Fatal(err)
	}
	runs, reasons := 0, map[string]int{}
	for _, s := range summaries {
		th, err := orchestrator.ReadThread(store, s.ID)
		if err != nil {
			sk.fail("read %s: %v", s.ID, err)
			continue
		}
		every, err := rebuild(store, th.ID, true) // its projection holds its newest runs only
		if err != nil {
			sk.fail("rebuild %s: %v", th.ID, err)
			continue
		}
		for _, r := range every.Runs {
			runs++
			why := string(r.Status)
			switch {
			case !r.Status.Terminal():
				sk.fail("thread %s run %d is %s after the service stopped", th.ID, r.Ordinal, r.Status)
			case r.Status == domain.RunStatusCompleted:
			case r.Failure != nil:
				why += ": " + r.Failure.Code
			case r.StopReason != "":
				why += ": " + r.StopReason
			default:
				sk.fail("thread %s run %d ended %s with no reason", th.ID, r.Ordinal, r.Status)
			}
			reasons[why]++
		}
		rebuilt, err := rebuild(store, th.ID, false)
		if err != nil {
			sk.fail("rebuild %s: %v", th.ID, err)
			continue
		}
		a, _ := json.Marshal(th)
		b, _ := json.Marshal(rebuilt)
		if !bytes.Equal(a, b) {
			sk.fail("thread %s: its projection is not its rebuild from the log", th.ID)
		}
	}
	var ends []string
	for why, n := range reasons {
		ends = append(ends, fmt.Sprintf("%d %s", n, why))
	}
	sort.Strings(ends)
	t.Logf("%d threads, %d runs: %s", len(summaries), runs, strings.Join(ends, ", "))
	if sk.stuck.Load() > 0 {
		sk.fail("%d threads' runs did not end in time", sk.stuck.Load())
	}
	for _, e := range sk.errs {
		t.Error(e)
	}
}

// rebuild folds a thread's every stored event into a projection; keepAll:
// one that keeps every run (a host's leaves its older ones).
func rebuild(store *eventlog.Store, threadID string, keepAll bool) (domain.Thread, error) {
	recs, err := store.ThreadAfter(threadID, 0, 0, 0)
	if err != nil {
		return domain.Thread{}, err
	}
	return fold(recs, keepAll)
}

// fold folds a thread's events, from its first, into a projection;
// keepAll: one that keeps every run.
func fold(recs []eventlog.Record, keepAll bool) (domain.Thread, error) {
	var th domain.Thread
	if keepAll {
		th.KeepAll()
	}
	for _, r := range recs {
		p, err := domain.DecodePayload(r.Type, r.Data)
		if err != nil {
			return domain.Thread{}, fmt.Errorf("event %d: %w", r.Sequence, err)
		}
		domain.Evolve(&th, domain.Event{Sequence: r.Sequence, ThreadID: r.ThreadID, At: r.At, Payload: p})
		th.Sequence = r.Sequence
	}
	return th, nil
}

// supervisor keeps `baton serve` running, as systemd's Restart=on-failure
// does: started again whenever it exits, until stop.
type supervisor struct {
	t        *testing.T
	data     string
	args     []string
	restarts atomic.Int64

	mu      sync.Mutex
	cmd     *exec.Cmd
	conn    *grpc.ClientConn
	c       *client
	stopped bool
	exited  []string
	done    chan struct{} // closed when the current process has exited
}

func startSupervisor(t *testing.T, data string, args ...string) *supervisor {
	s := &supervisor{t: t, data: data, args: args}
	s.start()
	t.Cleanup(func() { s.stop() })
	return s
}

// start starts the service and waits until it answers.
func (s *supervisor) start() {
	cmd := exec.Command(filepath.Join(binDir, "baton"), append([]string{"serve", "--data", s.data}, s.args...)...)
	var errb bytes.Buffer
	cmd.Stderr = &lockedWriter{w: &errb}
	if err := cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	done := make(chan struct{})
	s.mu.Lock()
	s.cmd, s.done = cmd, done
	s.mu.Unlock()
	go func() {
		err := cmd.Wait()
		close(done)
		s.mu.Lock()
		stopped := s.stopped
		if !stopped {
			tail := errb.String()
			if i := strings.LastIndexByte(strings.TrimRight(tail, "\n"), '\n'); i >= 0 {
				tail = tail[i+1:]
			}
			s.exited = append(s.exited, fmt.Sprintf("%v: %s", err, strings.TrimSpace(tail)))
			if s.conn != nil {
				s.conn.Close()
				s.conn, s.c = nil, nil
			}
		}
		s.mu.Unlock()
		if !stopped {
			s.restarts.Add(1)
			s.start()
		}
	}()
}

// pid is the service's process (0: none).
func (s *supervisor) pid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil || s.cmd.Process == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

// client is a client of the running service, once it answers (nil when
// ctx ends first, or the supervisor stopped).
func (s *supervisor) client(ctx context.Context) *client {
	for ctx.Err() == nil {
		s.mu.Lock()
		if s.stopped {
			s.mu.Unlock()
			return nil
		}
		if s.c != nil {
			c := s.c
			s.mu.Unlock()
			return c
		}
		s.mu.Unlock()
		conn, err := service.Dial(ctx, filepath.Join(s.data, "baton.sock"), service.DialOptions{})
		if err == nil {
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			err = service.Check(cctx, conn)
			cancel()
		}
		if err != nil {
			if conn != nil {
				conn.Close()
			}
			select { // the service is starting again
			case <-ctx.Done():
			case <-time.After(200 * time.Millisecond):
			}
			continue
		}
		s.mu.Lock()
		if s.c == nil {
			s.conn, s.c = conn, &client{BatonClient: batonv1.NewBatonClient(conn), close: func() {}}
		} else {
			conn.Close()
		}
		c := s.c
		s.mu.Unlock()
		return c
	}
	return nil
}

// stop stops the service (SIGTERM: it drains) and keeps it stopped.
func (s *supervisor) stop() error {
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		return nil
	}
	s.stopped = true
	cmd, done := s.cmd, s.done
	if s.conn != nil {
		s.conn.Close()
	}
	s.mu.Unlock()
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(90 * time.Second):
		cmd.Process.Kill()
		<-done
		return errors.New("it did not stop within 90s of SIGTERM")
	}
	if code := cmd.ProcessState.ExitCode(); code != 0 {
		return fmt.Errorf("exit %d after SIGTERM", code)
	}
	return nil
}

// exits are the service's exits the supervisor did not ask for.
func (s *supervisor) exits() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.exited)
}
