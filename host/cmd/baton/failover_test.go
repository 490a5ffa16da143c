//go:build linux

package main

import (
	"encoding/json"
	"errors"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/testing/protocmp"

	batonv1 "github.com/baton-run/baton/host/api/baton/v1"
	"github.com/baton-run/baton/host/internal/natstest"
)

// These tests run two `baton serve` processes, hosts a and b, each on its
// own data dir, sharing one event log in a three-node JetStream cluster:
// one writes the log, the other follows it, waiting for the installation's
// lease.

// logWatch is a process's stderr, kept whole; a test waits for a line in
// it. It never blocks the process's writes.
type logWatch struct {
	mu      sync.Mutex
	text    strings.Builder
	changed chan struct{} // closed at every write
}

func newLogWatch() *logWatch { return &logWatch{changed: make(chan struct{})} }

func (w *logWatch) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.text.Write(p)
	close(w.changed)
	w.changed = make(chan struct{})
	return len(p), nil
}

// wait waits until the log has a line matching re, for a minute at most.
func (w *logWatch) wait(t testing.TB, re *regexp.Regexp) {
	t.Helper()
	timeout := time.After(60 * time.Second)
	for {
		w.mu.Lock()
		text, changed := w.text.String(), w.changed
		w.mu.Unlock()
		if re.MatchString(text) {
			return
		}
		select {
		case <-changed:
		case <-timeout:
			t.Fatalf("no line matching %s in a minute:\n%s", re, text)
		}
	}
}

func (w *logWatch) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.text.String()
}

// sharedHosts starts host a, which takes the lease and writes the log,
// and host b as its follower (waiting for a's lease), both with args.
func sharedHosts(t testing.TB, args ...string) (a, b *batonService, blog *logWatch) {
	t.Helper()
	cl := natstest.Three(t)
	common := append([]string{"--store", cl.URLs(), "--installation", "failover"}, args...)
	a = startService(t, t.TempDir(), append(common, "--host", "a")...)
	blog = newLogWatch()
	b = launchService(t, t.TempDir(), blog, func(*exec.Cmd) {}, append(common, "--host", "b")...)
	blog.wait(t, regexp.MustCompile(`waiting for host a's lease on installation failover, held since `))
	b.waitHealthy() // the follower serves its socket
	if got := storeOf(t, b.data); got.Role != "follower" || got.Writer != "a" {
		t.Fatalf("b's store in its status: %+v, want a follower of host a", got)
	}
	return a, b, blog
}

// storeOf is the store a service's status shows.
func storeOf(t testing.TB, data string) storeStatus {
	t.Helper()
	out, errOut, code := baton(t, "status", "--json", "--data", data)
	var st serviceStatus
	if err := json.Unmarshal([]byte(out), &st); err != nil || code != exitOK {
		t.Fatalf("status: exit %d, %v\n%s%s", code, err, out, errOut)
	}
	return st.Store
}

// takenOver waits until host b, which followed, writes the log: it took the
// lease, and its service serves again as the writer.
func takenOver(t testing.TB, b *batonService, blog *logWatch) {
	t.Helper()
	blog.wait(t, regexp.MustCompile(`(?s)holding the installation's lease.*serving: `))
	b.waitHealthy()
}

// Host a is killed mid-run with a run queued behind it; host b takes the
// lease once a's has expired, and its start recovers the log as a
// restart does, but a's run in flight ends failed host_lost (the host
// that ran it is gone, not restarted), and the queued run runs on b and
// completes. Read through b, the log
// holds every event a committed, in one gapless sequence, and each run
// prompted its provider once.
func TestFailoverAfterSIGKILL(t *testing.T) {
	a, b, blog := sharedHosts(t, "--lease-ttl", "2s")
	state := filepath.Join(t.TempDir(), "cursor") // the replay peer's, shared by a's provider and b's
	c, id, ev, _ := a.startTurn(t, "acp/restart_queued.ndjson", "Take your time", "--state", state)
	before := until(t, ev, "the provider's thinking", thinking)
	if _, err := c.SendMessage(t.Context(), &batonv1.SendMessageRequest{ThreadId: id, Text: "Then finish", Mode: "queue"}); err != nil {
		t.Fatal(err)
	}
	before = append(before, until(t, ev, "the queued run", ofType("run.queued"))...)
	sessions := pids(t, thread(t, c, id))
	a.signal(syscall.SIGKILL)
	for _, pid := range sessions { // a's provider goes with it; the peer keeps its cursor
		if !waitGone(pid, time.Now().Add(30*time.Second)) {
			t.Errorf("process %d outlived the killed host", pid)
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}

	takenOver(t, b, blog)
	c = b.client()
	last := before[len(before)-1].Seq
	ev, _ = subscribe(t.Context(), t, c, id, last)
	after := until(t, ev, "the queued run's end", func(e event) bool {
		return e.Type == "run.ended" && strings.Contains(e.Data, `"completed"`)
	})
	all, _ := subscribe(t.Context(), t, c, "", 0)
	var seqs []uint64
	whole := until(t, all, "the same end", func(e event) bool {
		seqs = append(seqs, e.Seq)
		return e.Seq == after[len(after)-1].Seq
	})
	var want []uint64
	for i := range seqs {
		want = append(want, uint64(i+1))
	}
	if diff := cmp.Diff(want, seqs); diff != "" {
		t.Errorf("the shared log read through b is not one gapless sequence (-1..N +got):\n%s", diff)
	}
	if diff := cmp.Diff(whole, append(before, after...)); diff != "" {
		t.Errorf("the events a committed and those b committed after are not the log (-log +seen):\n%s", diff)
	}
	p := thread(t, c, id)
	runs := runStates(p)
	if diff := cmp.Diff([]runState{{"failed", "host_lost"}, {"completed", "<nil>"}}, runs); diff != "" {
		t.Errorf("runs after the failover (-want +got):\n%s", diff)
	}
	var hosts []any
	for _, r := range p["runs"].([]any) {
		hosts = append(hosts, r.(map[string]any)["host"])
	}
	if d := cmp.Diff([]any{"a", "b"}, hosts); d != "" {
		t.Errorf("the hosts that ran the runs (-want +got):\n%s", d)
	}
	// The list's host is the thread's owner: a, which created it. This
	// failover takes the whole log over and claims no thread (a
	// thread.moved would make it b's), though b ran its last run.
	out, errOut, code := baton(t, "threads", "--data", b.data)
	if !regexp.MustCompile(`(?m)^THREAD\s+PROVIDER\s+STATUS\s+HOST\s+RUNS.*\n`+id+`\s+acp\s+idle, last run completed\s+a\s+2\s`).MatchString(out) || code != exitOK {
		t.Errorf("threads through b: exit %d, want the thread's owner a:\n%s%s", code, out, errOut)
	}
	// Each run's prompt went to a provider once: a's to the first
	// process, b's to the second (the replay peer refuses any other
	// order, so a prompt sent twice would have failed the run).
	var prompts []string
	for _, e := range whole {
		if e.Type == "provider.turn.bound" {
			prompts = append(prompts, e.Type)
		}
	}
	if diff := cmp.Diff([]string{"provider.turn.bound", "provider.turn.bound"}, prompts); diff != "" {
		t.Errorf("provider turns over both hosts (-one per run +got):\n%s\nall: %v", diff, types(whole))
	}
}

// SIGTERM on the writer drains it and hands its lease back: the
// follower writes at once, long before the lease's minute would have run
// out.
func TestSIGTERMHandsTheLeaseOver(t *testing.T) {
	a, b, blog := sharedHosts(t, "--lease-ttl", "60s")
	if err := a.signal(syscall.SIGTERM); err != nil {
		t.Fatalf("host a after SIGTERM: %v\n%s", err, a.stderr)
	}
	if !strings.Contains(a.stderr.String(), "handed back the installation's lease") {
		t.Errorf("host a did not say it handed the lease back:\n%s", a.stderr)
	}
	takenOver(t, b, blog) // within the minute's wait: long before the lease's TTL
	if got, errOut, code := baton(t, "threads", "--data", b.data); code != exitOK {
		t.Errorf("threads through b: exit %d\n%s%s", code, got, errOut)
	}
	// b's status says where its log is and that it writes it.
	st := storeOf(t, b.data)
	if st.LeaseSince == nil {
		t.Errorf("status through b: no lease_since in %+v", st)
	}
	st.LeaseSince = nil
	want := storeStatus{Kind: "jetstream", Servers: strings.Split(a.cmd.Args[slices.Index(a.cmd.Args, "--store")+1], ","), Installation: "failover",
		Host: "b", Role: "writer", Writer: "b"}
	if d := cmp.Diff(want, st); d != "" {
		t.Errorf("status through b: store (-want +got):\n%s", d)
	}
}

// Host a, paused (SIGSTOP) past its lease's TTL, finds b serving when it
// runs again: its lease was taken over, so it stops as for a failed store
// (exit 1, saying why) rather than write beside b; started again, as its
// supervisor would, it follows b.
func TestPausedHostLosesItsLease(t *testing.T) {
	a, b, blog := sharedHosts(t, "--lease-ttl", "2s")
	if err := a.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	takenOver(t, b, blog)
	if err := a.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-a.done:
	case <-time.After(60 * time.Second):
		t.Fatalf("host a went on after its lease was taken over:\n%s", a.stderr)
	}
	var exit *exec.ExitError
	if !errors.As(a.err, &exit) || exit.ExitCode() != exitFailed {
		t.Errorf("host a's exit: %v, want %d", a.err, exitFailed)
	}
	if !regexp.MustCompile(`baton: serve: the event store failed: (lost the installation's lease|the lease on installation failover expired)`).MatchString(a.stderr.String()) {
		t.Errorf("host a did not say it lost its lease:\n%s", a.stderr)
	}
	alog := newLogWatch()
	launchService(t, a.data, alog, func(*exec.Cmd) {}, a.cmd.Args[4:]...)
	alog.wait(t, regexp.MustCompile(`waiting for host b's lease on installation failover`))
}

// BenchmarkFailover is the time from the writer's SIGKILL to its
// follower running the queued run the killed host left (the run's start
// read through the follower), with a lease TTL of 2s: ms/failover. The
// lease expires a TTL after its last renewal (renewals come every third
// of it), so the lease's share is from 2/3 TTL to one TTL; the rest is the
// follower taking the lease, catching up and recovering. Each failover
// starts a three-node cluster and two hosts, outside the timing.
func BenchmarkFailover(b *testing.B) {
	const ttl = 2 * time.Second
	var total time.Duration
	for range b.N {
		b.StopTimer()
		a, s, slog := sharedHosts(b, "--lease-ttl", ttl.String())
		state := filepath.Join(b.TempDir(), "cursor")
		c, id, ev, _ := a.startTurn(b, "acp/restart_queued.ndjson", "Take your time", "--state", state)
		until(b, ev, "the provider's thinking", thinking)
		if _, err := c.SendMessage(b.Context(), &batonv1.SendMessageRequest{ThreadId: id, Text: "Then finish", Mode: "queue"}); err != nil {
			b.Fatal(err)
		}
		queued := until(b, ev, "the queued run", ofType("run.queued"))
		b.StartTimer()
		start := time.Now()
		a.signal(syscall.SIGKILL)
		takenOver(b, s, slog)
		ev, _ = subscribe(b.Context(), b, s.client(), id, queued[len(queued)-1].Seq)
		until(b, ev, "the queued run's start on the follower", ofType("run.started"))
		total += time.Since(start)
		b.StopTimer()
		s.signal(syscall.SIGTERM)
	}
	b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms/failover")
}

// Host b, a follower, answers for the log host a writes: a thread created
// and run through b runs on a (the commands carried over NATS, their
// receipts returned as a's), b's subscription streams the run as a
// commits it, and b shows the same events and projection as a. A command
// sent again through b gets its first receipt; a's refusal of a bad one
// comes back through b with its code and words.
func TestAFollowerAnswersForTheWriter(t *testing.T) {
	a, b, _ := sharedHosts(t, "--lease-ttl", "60s")
	cb, id, ev, _ := b.startTurn(t, "acp/simple.ndjson", "Say hello.")
	throughB := until(t, ev, "the run's end, through b", ofType("run.ended"))
	ca := a.client()
	fromA, _ := subscribe(t.Context(), t, ca, id, 0)
	throughA := until(t, fromA, "the same end, through a", func(e event) bool { return e.Seq == throughB[len(throughB)-1].Seq })
	if d := cmp.Diff(throughA, throughB); d != "" {
		t.Errorf("the thread's events through b (-a's +b's):\n%s", d)
	}
	if d := cmp.Diff(thread(t, ca, id), thread(t, cb, id)); d != "" {
		t.Errorf("the thread through b (-a's +b's):\n%s", d)
	}
	if runs := runStates(thread(t, cb, id)); !cmp.Equal(runs, []runState{{"completed", "<nil>"}}) {
		t.Errorf("the run through b: %v, want completed", runs)
	}
	out, errOut, code := baton(t, "threads", "--data", b.data)
	if code != exitOK || !strings.Contains(out, id) {
		t.Errorf("threads through b: exit %d, want %s listed:\n%s%s", code, id, out, errOut)
	}

	send := &batonv1.SendMessageRequest{CommandId: "again-" + id, ThreadId: id, Text: "Say hello.", Mode: "queue"}
	first, err := cb.SendMessage(t.Context(), send)
	if err != nil {
		t.Fatal(err)
	}
	again, err := cb.SendMessage(t.Context(), send)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(first, again, protocmp.Transform()); d != "" {
		t.Errorf("the same command again through b (-first receipt +second):\n%s", d)
	}
	_, errA := ca.Interrupt(t.Context(), &batonv1.InterruptRequest{ThreadId: "thr_missing"})
	_, errB := cb.Interrupt(t.Context(), &batonv1.InterruptRequest{ThreadId: "thr_missing"})
	if errA == nil || status.Code(errA) != status.Code(errB) || status.Convert(errA).Message() != status.Convert(errB).Message() {
		t.Errorf("a's refusal through b: %v, want a's own: %v", errB, errA)
	}
}

// BenchmarkCommandThroughFollower is one command (a thread's creation)
// given to the writer, and the same given to a follower, which carries it
// to the writer over NATS and returns its receipt: us/local and
// us/forwarded, measured alternately in the same run.
func BenchmarkCommandThroughFollower(b *testing.B) {
	a, f, _ := sharedHosts(b, "--lease-ttl", "60s")
	ca, cf := a.client(), f.client()
	createThread(b, ca, "acp/simple.ndjson", "decline") // both connections made
	createThread(b, cf, "acp/simple.ndjson", "decline")
	var local, forwarded time.Duration
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		createThread(b, ca, "acp/simple.ndjson", "decline")
		mid := time.Now()
		createThread(b, cf, "acp/simple.ndjson", "decline")
		local += mid.Sub(start)
		forwarded += time.Since(mid)
	}
	b.ReportMetric(float64(local.Microseconds())/float64(b.N), "us/local")
	b.ReportMetric(float64(forwarded.Microseconds())/float64(b.N), "us/forwarded")
}

// Threads created through either host are listed by both, and a request
// the writer's provider makes is answered through the follower: the
// answer reaches the provider on the writer (the replay peer refuses a
// turn that goes on without it), and the follower streams the request's
// life in order.
func TestAnApprovalAnsweredThroughAFollower(t *testing.T) {
	a, b, _ := sharedHosts(t, "--lease-ttl", "60s")
	ca, cb := a.client(), b.client()
	onA := createThread(t, ca, "acp/approval_accept.ndjson", "ask")
	onB := createThread(t, cb, "acp/simple.ndjson", "decline")
	ev, _ := subscribe(t.Context(), t, cb, onA, 0)
	opened, reqID := askApproval(t, ca, onA, ev, "the request, through b")
	if _, err := cb.AnswerRequest(t.Context(), &batonv1.AnswerRequestRequest{RequestId: reqID, Decision: "accept"}); err != nil {
		t.Fatalf("answer through b: %v", err)
	}
	seen := append(opened, until(t, ev, "the run's end, through b", ofType("run.ended"))...)
	var life []string
	for _, e := range seen {
		if strings.HasPrefix(e.Type, "request.") || e.Type == "run.ended" {
			life = append(life, e.Type)
		}
	}
	if d := cmp.Diff([]string{"request.opened", "request.answered", "request.resolved", "run.ended"}, life); d != "" {
		t.Errorf("the request's life through b (-want +got):\n%s", d)
	}
	// b may apply an event a moment before a publishes it: a's own stream
	// says when a shows it.
	onAEvents, _ := subscribe(t.Context(), t, ca, onA, 0)
	until(t, onAEvents, "the run's end, through a", ofType("run.ended"))
	if runs := runStates(thread(t, ca, onA)); !cmp.Equal(runs, []runState{{"completed", "<nil>"}}) {
		t.Errorf("the run on a: %v, want completed", runs)
	}
	for _, h := range []*batonService{a, b} {
		out, errOut, code := baton(t, "threads", "--data", h.data)
		if code != exitOK || !strings.Contains(out, onA) || !strings.Contains(out, onB) {
			t.Errorf("threads through %s: exit %d, want %s and %s listed:\n%s%s", h.data, code, onA, onB, out, errOut)
		}
	}
}
