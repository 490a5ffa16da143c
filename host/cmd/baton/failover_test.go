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

// sharedHosts starts host a, which takes the installation's lease and
// coordinates, then host b, both with args; each runs its own threads.
func sharedHosts(t testing.TB, args ...string) (a, b *batonService, alog, blog *logWatch) {
	t.Helper()
	cl := natstest.Three(t)
	common := append([]string{"--store", cl.URLs(), "--installation", "failover"}, args...)
	alog, blog = newLogWatch(), newLogWatch()
	a = startServiceLogging(t, t.TempDir(), alog, append(common, "--host", "a")...)
	alog.wait(t, coordinates)
	b = startServiceLogging(t, t.TempDir(), blog, append(common, "--host", "b")...)
	for _, h := range []struct {
		s    *batonService
		want storeStatus
	}{{a, storeStatus{Host: "a", Role: "coordinator", Coordinator: "a"}}, {b, storeStatus{Host: "b", Role: "host", Coordinator: "a"}}} {
		got := storeOf(t, h.s.data)
		if got.Host != h.want.Host || got.Role != h.want.Role || got.Coordinator != h.want.Coordinator {
			t.Fatalf("host %s's store in its status: %+v, want role %s, coordinator %s", h.want.Host, got, h.want.Role, h.want.Coordinator)
		}
	}
	return a, b, alog, blog
}

// coordinates is the line a host logs as it takes the installation's
// lease.
var coordinates = regexp.MustCompile(`this host coordinates the installation`)

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

// startSharedTurn is startTurn for a thread whose cwd every host shares
// (--shared-cwd), or not.
func (s *batonService) startSharedTurn(t testing.TB, shared bool, transcript, text string, peerArgs ...string) (batonv1.BatonClient, string, <-chan event) {
	t.Helper()
	c := s.client()
	argv := []string{filepath.Join(binDir, "replaypeer"), "--transcript", testdataPath(transcript), "--speed", "0"}
	r, err := c.CreateThread(t.Context(), &batonv1.CreateThreadRequest{Provider: "acp", Cwd: t.TempDir(), ApprovalPolicy: "decline",
		SharedCwd: shared, ProviderCommand: &batonv1.ProviderCommand{Argv: append(argv, peerArgs...)}})
	if err != nil {
		t.Fatalf("create thread: %v", err)
	}
	id := r.GetThreadId()
	ev, _ := subscribe(t.Context(), t, c, id, 0)
	if _, err := c.SendMessage(t.Context(), &batonv1.SendMessageRequest{ThreadId: id, Text: text}); err != nil {
		t.Fatal(err)
	}
	return c, id, ev
}

// killMidRun starts a turn on host a that thinks until its host dies, with
// a run queued behind it, and kills a (SIGKILL) with its provider: the
// events up to the queued run, through a.
func killMidRun(t testing.TB, a *batonService, shared bool) (id string, before []event) {
	t.Helper()
	state := filepath.Join(t.TempDir(), "cursor") // the replay peer's, shared by the first provider process and the next
	c, id, ev := a.startSharedTurn(t, shared, "acp/restart_queued.ndjson", "Take your time", "--state", state)
	before = until(t, ev, "the provider's thinking", thinking)
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
	return id, before
}

// runHosts are the hosts that ran a thread's runs, in order.
func runHosts(p map[string]any) []any {
	var hosts []any
	for _, r := range p["runs"].([]any) {
		hosts = append(hosts, r.(map[string]any)["host"])
	}
	return hosts
}

// Host a is killed mid-run, with a run queued behind it, on a thread
// whose cwd every host shares. Once a's leases have expired, b takes the
// installation's lease and a's thread: a's run in flight ends failed
// host_lost (the host that ran it is gone, not restarted), and the queued
// run runs on b and completes. Read through b, the log holds every event a
// committed, in one gapless sequence, and each run prompted its provider
// once.
func TestFailoverAfterSIGKILL(t *testing.T) {
	a, b, _, blog := sharedHosts(t, "--lease-ttl", "2s")
	id, before := killMidRun(t, a, true)

	blog.wait(t, regexp.MustCompile(`(?s)this host coordinates the installation.*took over a lost host's thread`))
	c := b.client()
	last := before[len(before)-1].Seq
	ev, _ := subscribe(t.Context(), t, c, id, last)
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
	if i := slices.IndexFunc(after, ofType("thread.moved")); i < 0 || !strings.Contains(after[i].Data, `"host_lost"`) {
		t.Errorf("no thread.moved for host_lost among b's events: %v", types(after))
	}
	p := thread(t, c, id)
	if diff := cmp.Diff([]runState{{"failed", "host_lost"}, {"completed", "<nil>"}}, runStates(p)); diff != "" {
		t.Errorf("runs after the failover (-want +got):\n%s", diff)
	}
	if d := cmp.Diff([]any{"a", "b"}, runHosts(p)); d != "" {
		t.Errorf("the hosts that ran the runs (-want +got):\n%s", d)
	}
	// The list's host is the thread's owner: b, which claimed it
	// (thread.moved), though a created it.
	out, errOut, code := baton(t, "threads", "--data", b.data)
	if !regexp.MustCompile(`(?m)^THREAD\s+PROVIDER\s+STATUS\s+HOST\s+RUNS.*\n`+id+`\s+acp\s+idle, last run completed\s+b\s+2\s`).MatchString(out) || code != exitOK {
		t.Errorf("threads through b: exit %d, want the thread's owner b:\n%s%s", code, out, errOut)
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

// Host b, which does not coordinate, is killed mid-run on a thread whose
// cwd every host shares. The coordinator, a, learns of it from the
// watch of the hosts' leases (it holds its own lease all along, so no
// takeover of the installation's lease sweeps for it) and takes the
// thread: b's run ends host_lost and the queued run completes on a. On a
// loaded machine the watch's first start may time out and begin again
// after b is gone; the sweep that starts each watch then finds b's lease
// gone without a watch event, so the log is asked only for the takeover.
func TestTheCoordinatorTakesOverWhenAHostDies(t *testing.T) {
	a, b, alog, _ := sharedHosts(t, "--lease-ttl", "2s")
	id, _ := killMidRun(t, b, true)

	alog.wait(t, regexp.MustCompile(`(?s)this host coordinates the installation.*took over a lost host's thread: thread=`+regexp.QuoteMeta(id)+` host=b`))
	c := a.client()
	ev, _ := subscribe(t.Context(), t, c, id, 0)
	until(t, ev, "the queued run's end on a", func(e event) bool {
		return e.Type == "run.ended" && strings.Contains(e.Data, `"completed"`)
	})
	p := thread(t, c, id)
	if diff := cmp.Diff([]runState{{"failed", "host_lost"}, {"completed", "<nil>"}}, runStates(p)); diff != "" {
		t.Errorf("runs after a took the thread (-want +got):\n%s", diff)
	}
	if d := cmp.Diff([]any{"b", "a"}, runHosts(p)); d != "" || p["host"] != "a" {
		t.Errorf("the thread's host %v; the hosts that ran its runs (-want +got):\n%s", p["host"], d)
	}
}

// Host a is killed mid-run on a thread whose cwd is a's own. b, which
// takes the installation's lease, does not take the thread: it marks it
// lost, `show` says where its cwd is, and its queued run waits. Started
// again, a takes its thread back: its run in flight ends as after a
// restart, and the queued run runs on a.
func TestALostHostsThreadWaitsForIt(t *testing.T) {
	a, b, _, blog := sharedHosts(t, "--lease-ttl", "2s")
	id, before := killMidRun(t, a, false)

	blog.wait(t, regexp.MustCompile(`a lost host's thread waits for it`))
	c := b.client()
	ev, _ := subscribe(t.Context(), t, c, id, before[len(before)-1].Seq)
	until(t, ev, "the thread marked lost", ofType("thread.host_lost"))
	out, errOut, code := baton(t, "show", id, "--data", b.data)
	if code != exitOK || !regexp.MustCompile(`host a lost its lease at \d\d:\d\d; the thread's cwd is on a`).MatchString(out) {
		t.Errorf("show through b: exit %d, want it to say host a lost its lease and the cwd is on a:\n%s%s", code, out, errOut)
	}
	if runs := runStates(thread(t, c, id)); !cmp.Equal(runs, []runState{{"running", "<nil>"}, {"queued", "<nil>"}}) {
		t.Errorf("the lost host's thread's runs, on b: %v; want its run as a left it and the queued one waiting", runs)
	}

	startService(t, a.data, a.cmd.Args[4:]...) // a again, as its supervisor would start it
	until(t, ev, "the queued run's end on a", func(e event) bool {
		return e.Type == "run.ended" && strings.Contains(e.Data, `"completed"`)
	})
	p := thread(t, c, id)
	if diff := cmp.Diff([]runState{{"failed", "host_restarted"}, {"completed", "<nil>"}}, runStates(p)); diff != "" {
		t.Errorf("runs once a is back (-want +got):\n%s", diff)
	}
	if d := cmp.Diff([]any{"a", "a"}, runHosts(p)); d != "" {
		t.Errorf("the hosts that ran the runs (-want +got):\n%s", d)
	}
	if p["hostLost"] != nil || p["host"] != "a" {
		t.Errorf("the thread once a is back: host %v, lost %v; want a's, not lost", p["host"], p["hostLost"])
	}
}

// SIGTERM on the coordinating host drains it and hands its leases back:
// the other host coordinates at once, long before the lease's minute
// would have run out.
func TestSIGTERMHandsTheLeaseOver(t *testing.T) {
	a, b, _, blog := sharedHosts(t, "--lease-ttl", "60s")
	if err := a.signal(syscall.SIGTERM); err != nil {
		t.Fatalf("host a after SIGTERM: %v\n%s", err, a.stderr)
	}
	if !strings.Contains(a.stderr.String(), "handed back the installation's lease") {
		t.Errorf("host a did not say it handed the lease back:\n%s", a.stderr)
	}
	blog.wait(t, coordinates) // within the minute's wait: long before the lease's TTL
	st := storeOf(t, b.data)
	if st.LeaseSince == nil {
		t.Errorf("status through b: no lease_since in %+v", st)
	}
	st.LeaseSince = nil
	want := storeStatus{Kind: "jetstream", Servers: strings.Split(a.cmd.Args[slices.Index(a.cmd.Args, "--store")+1], ","), Installation: "failover",
		Host: "b", Role: "coordinator", Coordinator: "b"}
	if d := cmp.Diff(want, st); d != "" {
		t.Errorf("status through b: store (-want +got):\n%s", d)
	}
}

// Host a, paused (SIGSTOP) past its lease's TTL, finds its lease gone when
// it runs again: it stops as for a failed store (exit 1, saying why)
// rather than write a thread another host may have taken; started again,
// as its supervisor would, it serves.
func TestPausedHostLosesItsLease(t *testing.T) {
	a, _, _, blog := sharedHosts(t, "--lease-ttl", "2s")
	if err := a.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	blog.wait(t, coordinates) // a's leases expired
	if err := a.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-a.done:
	case <-time.After(60 * time.Second):
		t.Fatalf("host a went on after its lease expired:\n%s", a.stderr)
	}
	var exit *exec.ExitError
	if !errors.As(a.err, &exit) || exit.ExitCode() != exitFailed {
		t.Errorf("host a's exit: %v, want %d", a.err, exitFailed)
	}
	if !regexp.MustCompile(`baton: serve: the event store failed: .*lease`).MatchString(a.stderr.String()) {
		t.Errorf("host a did not say it lost its lease:\n%s", a.stderr)
	}
	startService(t, a.data, a.cmd.Args[4:]...)
}

// BenchmarkFailover is the time from a host's SIGKILL to another host
// running the queued run the killed host left on a thread whose cwd they
// share (the run's start read through the other host), with a lease TTL
// of 2s: ms/failover. The lease expires a TTL after its last renewal
// (renewals come every third of it), so the lease's share is from 2/3 TTL
// to one TTL; the rest is the coordinator's sweep (after it takes the
// installation's lease, when the lost host held it), its claim of the
// thread and the thread's recovery. Each failover starts a
// three-node cluster and two hosts, outside the timing.
func BenchmarkFailover(b *testing.B) {
	const ttl = 2 * time.Second
	var total time.Duration
	for range b.N {
		b.StopTimer()
		a, s, _, _ := sharedHosts(b, "--lease-ttl", ttl.String())
		state := filepath.Join(b.TempDir(), "cursor")
		c, id, ev := a.startSharedTurn(b, true, "acp/restart_queued.ndjson", "Take your time", "--state", state)
		until(b, ev, "the provider's thinking", thinking)
		if _, err := c.SendMessage(b.Context(), &batonv1.SendMessageRequest{ThreadId: id, Text: "Then finish", Mode: "queue"}); err != nil {
			b.Fatal(err)
		}
		queued := until(b, ev, "the queued run", ofType("run.queued"))
		b.StartTimer()
		start := time.Now()
		a.signal(syscall.SIGKILL)
		ev, _ = subscribe(b.Context(), b, s.client(), id, queued[len(queued)-1].Seq)
		until(b, ev, "the queued run's start on the other host", ofType("run.started"))
		total += time.Since(start)
		b.StopTimer()
		s.signal(syscall.SIGTERM)
	}
	b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms/failover")
}

// Host b answers for the threads host a runs: a thread created through b
// to run on a (--on-host) runs on a (the commands carried over NATS, their
// receipts returned as a's), b's subscription streams the run as a
// commits it, and b shows the same events and projection as a. A command
// sent again through b gets its first receipt; a refusal comes back
// through b with its code and words.
func TestAHostAnswersForAnother(t *testing.T) {
	a, b, _, _ := sharedHosts(t, "--lease-ttl", "60s")
	cb := b.client()
	argv := []string{filepath.Join(binDir, "replaypeer"), "--transcript", testdataPath("acp/simple.ndjson"), "--speed", "0"}
	r, err := cb.CreateThread(t.Context(), &batonv1.CreateThreadRequest{Provider: "acp", Cwd: t.TempDir(), ApprovalPolicy: "decline",
		OnHost: "a", ProviderCommand: &batonv1.ProviderCommand{Argv: argv}})
	if err != nil {
		t.Fatalf("create a thread on a through b: %v", err)
	}
	id := r.GetThreadId()
	ev, _ := subscribe(t.Context(), t, cb, id, 0)
	if _, err := cb.SendMessage(t.Context(), &batonv1.SendMessageRequest{ThreadId: id, Text: "Say hello."}); err != nil {
		t.Fatal(err)
	}
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
	p := thread(t, cb, id)
	if runs := runStates(p); !cmp.Equal(runs, []runState{{"completed", "<nil>"}}) || p["host"] != "a" || !cmp.Equal(runHosts(p), []any{"a"}) {
		t.Errorf("the thread through b: host %v, runs %v on %v; want a's, completed on a", p["host"], runs, runHosts(p))
	}
	out, errOut, code := baton(t, "threads", "--data", b.data)
	if code != exitOK || !regexp.MustCompile(`(?m)^`+id+`\s+acp\s+.*\sa\s+1\s`).MatchString(out) {
		t.Errorf("threads through b: exit %d, want %s listed on host a:\n%s%s", code, id, out, errOut)
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
	bad := &batonv1.InterruptRequest{ThreadId: id, RunId: "run_missing"}
	_, errA := ca.Interrupt(t.Context(), bad)
	_, errB := cb.Interrupt(t.Context(), bad)
	if errA == nil || status.Code(errA) != status.Code(errB) || status.Convert(errA).Message() != status.Convert(errB).Message() {
		t.Errorf("a's refusal through b: %v, want a's own: %v", errB, errA)
	}
}

// BenchmarkCommandThroughAnotherHost is one command (a thread's creation
// on host a) given to a, and the same given to b, which carries it to a
// over NATS and returns its receipt: us/local and us/forwarded, measured
// alternately in the same run.
func BenchmarkCommandThroughAnotherHost(b *testing.B) {
	a, f, _, _ := sharedHosts(b, "--lease-ttl", "60s")
	ca, cf := a.client(), f.client()
	create := func(c batonv1.BatonClient) {
		argv := []string{filepath.Join(binDir, "replaypeer"), "--transcript", testdataPath("acp/simple.ndjson"), "--speed", "0"}
		if _, err := c.CreateThread(b.Context(), &batonv1.CreateThreadRequest{Provider: "acp", Cwd: b.TempDir(), ApprovalPolicy: "decline",
			OnHost: "a", ProviderCommand: &batonv1.ProviderCommand{Argv: argv}}); err != nil {
			b.Fatal(err)
		}
	}
	create(ca) // both connections made
	create(cf)
	var local, forwarded time.Duration
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		create(ca)
		mid := time.Now()
		create(cf)
		local += mid.Sub(start)
		forwarded += time.Since(mid)
	}
	b.ReportMetric(float64(local.Microseconds())/float64(b.N), "us/local")
	b.ReportMetric(float64(forwarded.Microseconds())/float64(b.N), "us/forwarded")
}

// Two hosts run their threads at once, and a request a's provider makes is
// answered through b, naming only the request: the answer reaches the
// provider on a (the replay peer refuses a turn that goes on without it),
// and b streams the request's life in order. Both hosts list both
// threads, each with its host.
func TestAnApprovalAnsweredThroughAnotherHost(t *testing.T) {
	a, b, _, _ := sharedHosts(t, "--lease-ttl", "60s")
	ca, cb := a.client(), b.client()
	onA := createThread(t, ca, "acp/approval_accept.ndjson", "ask")
	_, onB, evB, _ := b.startTurn(t, "acp/simple.ndjson", "Say hello.")
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
	until(t, evB, "b's own run's end", ofType("run.ended"))
	// b may apply an event a moment before a publishes it: a's own stream
	// says when a shows it.
	onAEvents, _ := subscribe(t.Context(), t, ca, onA, 0)
	until(t, onAEvents, "the run's end, through a", ofType("run.ended"))
	for _, c := range []struct {
		c      batonv1.BatonClient
		thread string
		host   string
	}{{ca, onA, "a"}, {cb, onB, "b"}} {
		p := thread(t, c.c, c.thread)
		if runs := runStates(p); !cmp.Equal(runs, []runState{{"completed", "<nil>"}}) || !cmp.Equal(runHosts(p), []any{c.host}) {
			t.Errorf("thread %s: runs %v on %v, want completed on %s", c.thread, runs, runHosts(p), c.host)
		}
	}
	for _, h := range []*batonService{a, b} {
		out, errOut, code := baton(t, "threads", "--data", h.data)
		listed := regexp.MustCompile(`(?m)^`+onA+`\s.*\sa\s+1\s`).MatchString(out) && regexp.MustCompile(`(?m)^`+onB+`\s.*\sb\s+1\s`).MatchString(out)
		if code != exitOK || !listed {
			t.Errorf("threads through %s: exit %d, want %s on a and %s on b:\n%s%s", h.data, code, onA, onB, out, errOut)
		}
	}
}
