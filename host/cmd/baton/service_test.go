//go:build linux

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	batonv1 "github.com/baton-run/baton/host/api/baton/v1"
	"github.com/baton-run/baton/host/internal/service"
)

// These tests run `baton serve` as its own process, with real plugins and
// replay peers, and talk to it over its unix socket with the generated
// client: what a user's editor or script does.

// batonService is one `baton serve` process.
type batonService struct {
	t      testing.TB
	cmd    *exec.Cmd
	data   string
	sock   string
	stderr *bytes.Buffer
	done   chan struct{}
	err    error // the process's exit, once done is closed
}

// startService starts `baton serve` on a data dir and waits until it
// answers its health check.
func startService(t testing.TB, data string, args ...string) *batonService {
	t.Helper()
	return startServiceLogging(t, data, io.Discard, args...)
}

// startServiceLogging is startService whose stderr is also written to log.
func startServiceLogging(t testing.TB, data string, log io.Writer, args ...string) *batonService {
	t.Helper()
	return startServiceCmd(t, data, log, func(*exec.Cmd) {}, args...)
}

// startServiceCmd is startServiceLogging with the command changed by
// prepare before it starts (its environment, its process group).
func startServiceCmd(t testing.TB, data string, log io.Writer, prepare func(*exec.Cmd), args ...string) *batonService {
	t.Helper()
	s := launchService(t, data, log, prepare, args...)
	s.waitHealthy()
	return s
}

// launchService starts `baton serve` without waiting for it to answer
// (a standby answers only once it serves): waitHealthy waits.
func launchService(t testing.TB, data string, log io.Writer, prepare func(*exec.Cmd), args ...string) *batonService {
	t.Helper()
	if err := os.MkdirAll(data, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(data, 0o700); err != nil { // serve refuses a data dir others may reach
		t.Fatal(err)
	}
	s := &batonService{t: t, data: data, sock: filepath.Join(data, "baton.sock"), stderr: &bytes.Buffer{}, done: make(chan struct{})}
	s.cmd = exec.Command(filepath.Join(binDir, "baton"), append([]string{"serve", "--data", data}, args...)...)
	s.cmd.Stderr = &lockedWriter{w: io.MultiWriter(s.stderr, log)}
	prepare(s.cmd)
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { s.err = s.cmd.Wait(); close(s.done) }()
	t.Cleanup(func() {
		select {
		case <-s.done:
		default:
			s.cmd.Process.Kill()
			<-s.done
		}
	})
	return s
}

// waitHealthy waits until the service's health check says SERVING, for a
// minute at most.
func (s *batonService) waitHealthy() {
	s.t.Helper()
	s.waitHealthyWithin(60 * time.Second)
}

// waitHealthyWithin waits until the service's health check says
// SERVING, for d at most.
func (s *batonService) waitHealthyWithin(d time.Duration) {
	t := s.t
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), d)
	defer cancel()
	conn := s.dial()
	defer conn.Close()
	for {
		resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: "baton.v1.Baton"}, grpc.WaitForReady(true))
		if err == nil && resp.GetStatus() == healthpb.HealthCheckResponse_SERVING {
			return
		}
		if err == nil { // a standby, waiting for the lease
			err = fmt.Errorf("its health is %s", resp.GetStatus())
		}
		select {
		case <-s.done:
			t.Fatalf("baton serve exited before it answered: %v\n%s", s.err, s.stderr)
		case <-ctx.Done():
			t.Fatalf("baton serve did not answer its health check: %v\n%s", err, s.stderr)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (s *batonService) dial() *grpc.ClientConn {
	conn, err := grpc.NewClient("unix://"+s.sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() { conn.Close() })
	return conn
}

func (s *batonService) client() batonv1.BatonClient { return batonv1.NewBatonClient(s.dial()) }

// signal sends sig and waits for the process to end.
func (s *batonService) signal(sig syscall.Signal) error {
	s.t.Helper()
	if err := s.cmd.Process.Signal(sig); err != nil {
		s.t.Fatal(err)
	}
	select {
	case <-s.done:
		return s.err
	case <-time.After(90 * time.Second):
		s.cmd.Process.Kill()
		s.t.Fatalf("baton serve did not end after %v\n%s", sig, s.stderr)
		return nil
	}
}

type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

// event is what the tests compare of a streamed event.
type event struct {
	Seq    uint64
	Thread string
	Type   string
	Data   string
}

// toEvent is a streamed event with its payload as the CLI reads it, in
// the domain's JSON.
func toEvent(e *batonv1.Event) event {
	pl, err := service.PayloadOf(e)
	if err != nil {
		return event{Seq: e.GetSequence(), Thread: e.GetThreadId(), Type: e.GetType(), Data: err.Error()}
	}
	b, _ := json.Marshal(pl)
	return event{Seq: e.GetSequence(), Thread: e.GetThreadId(), Type: e.GetType(), Data: string(b)}
}

// subscribe subscribes and sends each event on the returned channel until the
// stream ends; the stream's end (its error) comes last on errc.
func subscribe(ctx context.Context, t testing.TB, c batonv1.BatonClient, thread string, after uint64) (<-chan event, <-chan error) {
	t.Helper()
	st, err := c.Subscribe(ctx, &batonv1.SubscribeRequest{ThreadId: thread, AfterSequence: after})
	if err != nil {
		t.Fatal(err)
	}
	ch, errc := make(chan event, 4096), make(chan error, 1)
	go func() {
		defer close(ch)
		for {
			e, err := st.Recv()
			if err != nil {
				errc <- err
				return
			}
			ch <- toEvent(e)
		}
	}()
	return ch, errc
}

// until reads events until one satisfies stop, and returns them all.
func until(t testing.TB, ch <-chan event, what string, stop func(event) bool) []event {
	t.Helper()
	var got []event
	timeout := time.After(90 * time.Second)
	for {
		select {
		case e, ok := <-ch:
			if !ok {
				t.Fatalf("the stream ended before %s; got %v", what, types(got))
			}
			got = append(got, e)
			if stop(e) {
				return got
			}
		case <-timeout:
			last := "nothing"
			if len(got) > 0 {
				last = got[len(got)-1].Data
			}
			t.Fatalf("no %s in 90s; got %v; the last: %s", what, types(got), last)
		}
	}
}

func types(es []event) []string {
	var s []string
	for _, e := range es {
		s = append(s, fmt.Sprintf("%d:%s", e.Seq, e.Type))
	}
	return s
}

func ofType(typ string) func(event) bool { return func(e event) bool { return e.Type == typ } }

// thinking is the provider's reasoning starting: a turn under way.
func thinking(e event) bool {
	return e.Type == "node.started" && strings.Contains(e.Data, `"reasoning"`)
}

// startTurn creates a thread replaying transcript (the replay peer given
// peerArgs too), follows its events from its creation on, and sends text:
// a client of the service, the thread, its events and how their stream
// ended.
func (s *batonService) startTurn(t testing.TB, transcript, text string, peerArgs ...string) (batonv1.BatonClient, string, <-chan event, <-chan error) {
	t.Helper()
	c := s.client()
	id := createThread(t, c, transcript, "decline", peerArgs...)
	ev, errc := subscribe(t.Context(), t, c, id, 0)
	if _, err := c.SendMessage(t.Context(), &batonv1.SendMessageRequest{ThreadId: id, Text: text}); err != nil {
		t.Fatal(err)
	}
	return c, id, ev, errc
}

// askApproval sends the approval transcript's message to a thread (made
// from acp/approval_accept.ndjson with the ask policy) and waits on ev for
// the request its provider opens: the events up to it, and its id.
func askApproval(t testing.TB, c batonv1.BatonClient, thread string, ev <-chan event, what string) ([]event, string) {
	t.Helper()
	if _, err := c.SendMessage(t.Context(), &batonv1.SendMessageRequest{ThreadId: thread, Text: "Write allowed.txt"}); err != nil {
		t.Fatal(err)
	}
	opened := until(t, ev, what, ofType("request.opened"))
	var req struct {
		ID string `json:"requestId"`
	}
	json.Unmarshal([]byte(opened[len(opened)-1].Data), &req)
	if req.ID == "" {
		t.Fatalf("request.opened without a request id: %s", opened[len(opened)-1].Data)
	}
	return opened, req.ID
}

func createThread(t testing.TB, c batonv1.BatonClient, transcript, approval string, extra ...string) string {
	t.Helper()
	argv := []string{filepath.Join(binDir, "replaypeer"), "--transcript", testdataPath(transcript), "--speed", "0"}
	r, err := c.CreateThread(t.Context(), &batonv1.CreateThreadRequest{
		Provider: "acp", Cwd: t.TempDir(), ApprovalPolicy: approval,
		ProviderCommand: &batonv1.ProviderCommand{Argv: append(argv, extra...)},
	})
	if err != nil {
		t.Fatalf("create thread: %v", err)
	}
	return r.GetThreadId()
}

func testdataPath(name string) string {
	abs, _ := filepath.Abs(filepath.Join(root, "testdata", name))
	return abs
}

// thread reads a thread's projection through the service, as the CLI
// reads it, in the domain's JSON.
func thread(t testing.TB, c batonv1.BatonClient, id string) map[string]any {
	t.Helper()
	th, err := c.GetThread(t.Context(), &batonv1.GetThreadRequest{ThreadId: id})
	if err != nil {
		t.Fatalf("get thread %s: %v", id, err)
	}
	b, _ := json.Marshal(service.ThreadOf(th))
	var m map[string]any
	json.Unmarshal(b, &m)
	return m
}

// Two clients on one thread see the same events in the same order, and the
// second answering a request resolves what the first one's run waits on.
func TestServiceTwoClientsOneThread(t *testing.T) {
	s := startService(t, t.TempDir())
	a, b := s.client(), s.client()
	id := createThread(t, a, "acp/approval_accept.ndjson", "ask")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	ea, _ := subscribe(ctx, t, a, id, 0)
	eb, _ := subscribe(ctx, t, b, id, 0)
	opened, reqID := askApproval(t, a, id, ea, "a request")
	// b answers, naming only the request.
	if _, err := b.AnswerRequest(t.Context(), &batonv1.AnswerRequestRequest{RequestId: reqID, Decision: "accept"}); err != nil {
		t.Fatalf("answer from the second client: %v", err)
	}
	gotA := append(opened, until(t, ea, "the run's end", ofType("run.ended"))...)
	gotB := until(t, eb, "the run's end", ofType("run.ended"))
	if diff := cmp.Diff(gotA, gotB); diff != "" {
		t.Fatalf("the two clients saw different events (-first +second):\n%s", diff)
	}
	want := []string{"request.opened", "request.answered", "request.resolved", "run.ended"}
	var seen []string
	for _, e := range gotA {
		if slices.Contains(want, e.Type) {
			seen = append(seen, e.Type)
		}
	}
	if diff := cmp.Diff(want, seen); diff != "" {
		t.Errorf("order of the request's life (-want +got):\n%s", diff)
	}
	p := thread(t, a, id)
	got := map[string]any{}
	for _, r := range p["requests"].([]any) {
		r := r.(map[string]any)
		got = map[string]any{"id": r["id"], "status": r["status"], "decision": r["decision"]}
	}
	if diff := cmp.Diff(map[string]any{"id": reqID, "status": "resolved", "decision": "accept"}, got); diff != "" {
		t.Errorf("the request in the projection (-want +got):\n%s", diff)
	}
	if st := p["runs"].([]any)[0].(map[string]any)["status"]; st != "completed" {
		t.Errorf("run status = %v, want completed", st)
	}
}

// A service killed with SIGKILL mid-run loses nothing: started again, a
// client that resubscribes from the last sequence it saw gets every later
// event once, the run in flight ends with a reason, and the run queued
// behind it starts by itself.
func TestServiceSIGKILLAndResubscribe(t *testing.T) {
	data := t.TempDir()
	s := startService(t, data)
	state := filepath.Join(t.TempDir(), "cursor")
	c, id, ev, _ := s.startTurn(t, "acp/restart_queued.ndjson", "Take your time", "--state", state)
	before := until(t, ev, "the provider's thinking", thinking)
	if _, err := c.SendMessage(t.Context(), &batonv1.SendMessageRequest{ThreadId: id, Text: "Then finish", Mode: "queue"}); err != nil {
		t.Fatal(err)
	}
	before = append(before, until(t, ev, "the queued run", ofType("run.queued"))...)
	sessions := pids(t, thread(t, c, id))
	s.signal(syscall.SIGKILL)
	for _, pid := range sessions { // the orphans notice and go; the peer keeps its cursor
		if !waitGone(pid, time.Now().Add(30*time.Second)) {
			t.Errorf("process %d outlived the killed service", pid)
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}

	s = startService(t, data)
	c = s.client()
	last := before[len(before)-1].Seq
	ev, _ = subscribe(t.Context(), t, c, id, last)
	after := until(t, ev, "the queued run's end", func(e event) bool {
		return e.Type == "run.ended" && strings.Contains(e.Data, `"completed"`)
	})
	all, _ := subscribe(t.Context(), t, c, id, 0)
	whole := until(t, all, "the same end", func(e event) bool { return e.Seq == after[len(after)-1].Seq })
	if diff := cmp.Diff(whole, append(before, after...)); diff != "" {
		t.Errorf("the events before the kill and after the resubscription are not the thread's whole log (-log +seen):\n%s", diff)
	}
	p := thread(t, c, id)
	runs := runStates(p)
	want := []runState{{"failed", "host_restarted"}, {"completed", "<nil>"}}
	if diff := cmp.Diff(want, runs); diff != "" {
		t.Errorf("runs after the restart (-want +got):\n%s", diff)
	}
}

// runState is a run of a thread's projection: its status and its
// failure's code ("<nil>": none).
type runState struct{ Status, Failure string }

// runStates are the runs of a thread's projection, in order.
func runStates(p map[string]any) []runState {
	var runs []runState
	for _, r := range p["runs"].([]any) {
		r := r.(map[string]any)
		f, _ := r["failure"].(map[string]any)
		runs = append(runs, runState{Status: r["status"].(string), Failure: fmt.Sprint(f["code"])})
	}
	return runs
}

// pids are the plugin and provider processes of a thread's sessions.
func pids(t testing.TB, p map[string]any) []int {
	var out []int
	ss, _ := p["providerSessions"].([]any)
	for _, s := range ss {
		s := s.(map[string]any)
		for _, k := range []string{"pluginPid", "providerPid"} {
			if n, ok := s[k].(float64); ok && n > 0 {
				out = append(out, int(n))
			}
		}
	}
	if len(out) == 0 {
		t.Fatalf("no session processes in the projection: %v", p["providerSessions"])
	}
	return out
}

// Fifty threads driven at once through one service all complete, the log
// they share has no gap, and each thread's projection is its transcript's.
func TestServiceFiftyThreads(t *testing.T) {
	const n = 50
	s := startService(t, t.TempDir())
	c := s.client()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	ev, _ := subscribe(ctx, t, c, "", 0)
	ids := make([]string, n)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			argv := []string{filepath.Join(binDir, "replaypeer"), "--transcript", testdataPath("acp/simple.ndjson"), "--speed", "0"}
			r, err := c.CreateThread(ctx, &batonv1.CreateThreadRequest{Provider: "acp", Cwd: t.TempDir(),
				ProviderCommand: &batonv1.ProviderCommand{Argv: argv}})
			if err == nil {
				ids[i] = r.GetThreadId()
				_, err = c.SendMessage(ctx, &batonv1.SendMessageRequest{ThreadId: ids[i], Text: "Say hello."})
			}
			if err != nil {
				errs <- fmt.Errorf("thread %d: %w", i, err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	ended := map[string]bool{}
	var seq uint64
	until(t, ev, "every run's end", func(e event) bool {
		if e.Seq != seq+1 {
			t.Fatalf("the log has a gap or a repeat: %d after %d", e.Seq, seq)
		}
		seq = e.Seq
		if e.Type == "run.ended" {
			ended[e.Thread] = true
		}
		return len(ended) == n
	})
	type summary struct {
		Runs      []string
		Assistant []string
	}
	want := summary{Runs: []string{"completed"}, Assistant: []string{"Hello from the replay agent."}}
	for _, id := range ids {
		p := thread(t, c, id)
		var got summary
		for _, r := range p["runs"].([]any) {
			got.Runs = append(got.Runs, r.(map[string]any)["status"].(string))
		}
		for _, m := range p["messages"].([]any) {
			if m := m.(map[string]any); m["role"] == "assistant" {
				got.Assistant = append(got.Assistant, m["text"].(string))
			}
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("thread %s (-want +got):\n%s", id, diff)
		}
	}
}

// SIGTERM drains: the run in flight is asked to stop and ends with the
// provider's own interrupt while subscribers still follow it, the service
// exits 0, and no plugin or provider process it started is left.
func TestServiceSIGTERMDrains(t *testing.T) {
	data := t.TempDir()
	s := startService(t, data)
	c, id, ev, errc := s.startTurn(t, "acp/turn_interrupt.ndjson", "Write a very long essay about rivers.")
	// The turn has reached the provider: the host knows the session that
	// took it (whichever it hears of first).
	until(t, ev, "the turn reaching the provider", func(e event) bool {
		return e.Type == "attempt.dispatched" || e.Type == "provider.turn.bound"
	})
	procs := pids(t, thread(t, c, id))
	if err := s.signal(syscall.SIGTERM); err != nil {
		t.Fatalf("baton serve after SIGTERM: %v (want exit 0)\n%s", err, s.stderr)
	}
	// The subscriber saw the drain: the interrupt asked, the run ended.
	var seen []string
	for _, e := range until(t, ev, "the run's end", ofType("run.ended")) {
		seen = append(seen, e.Type)
	}
	for _, want := range []string{"run.interrupt.requested", "run.ended"} {
		if !slices.Contains(seen, want) {
			t.Errorf("events after SIGTERM = %v; want %s among them", seen, want)
		}
	}
	select {
	case err := <-errc:
		if st, _ := status.FromError(err); st.Code() != codes.Unavailable {
			t.Errorf("the subscription ended with %v; want Unavailable (service shutting down)", err)
		}
	case <-time.After(30 * time.Second):
		t.Error("the subscription did not end with the service")
	}
	for _, pid := range procs {
		if alive(pid) {
			t.Errorf("process %d outlived the drained service", pid)
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	// The run's end, as the next start reads it.
	s = startService(t, data)
	r := thread(t, s.client(), id)["runs"].([]any)[0].(map[string]any)
	got := map[string]any{"status": r["status"], "stopReason": r["stopReason"]}
	if diff := cmp.Diff(map[string]any{"status": "interrupted", "stopReason": "cancelled"}, got); diff != "" {
		t.Errorf("the run after a drain (-want +got):\n%s\nrun: %v", diff, r)
	}
}

// A second signal during the drain exits at once, with status 1; the next
// start ends the run the drain had not ended yet, with a reason.
func TestServiceSecondSignalExitsAtOnce(t *testing.T) {
	data := t.TempDir()
	s := startService(t, data)
	// The provider takes the interrupt and never ends its turn: the drain
	// would wait for it.
	_, id, ev, _ := s.startTurn(t, "acp/stall.ndjson", "Take your time")
	until(t, ev, "the provider's thinking", thinking)
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	until(t, ev, "the drain's interrupt", ofType("run.interrupt.requested"))
	err := s.signal(syscall.SIGTERM)
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("baton serve after a second signal: %v, want exit status 1\n%s", err, s.stderr)
	}
	s = startService(t, data)
	r := thread(t, s.client(), id)["runs"].([]any)[0].(map[string]any)
	f, _ := r["failure"].(map[string]any)
	got := map[string]any{"status": r["status"], "code": f["code"]}
	if diff := cmp.Diff(map[string]any{"status": "failed", "code": "host_restarted"}, got); diff != "" {
		t.Errorf("the run after the service exited mid-drain (-want +got):\n%s", diff)
	}
}

// The socket is the owner's alone, in a data dir only the owner can enter.
func TestServiceSocketModes(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	s := startService(t, data)
	for path, want := range map[string]os.FileMode{data: 0o700 | os.ModeDir, s.sock: 0o600 | os.ModeSocket} {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode() != want {
			t.Errorf("%s: mode %v, want %v", path, fi.Mode(), want)
		}
	}
	if err := s.signal(syscall.SIGTERM); err != nil {
		t.Fatalf("exit after SIGTERM: %v", err)
	}
	os.Chmod(data, 0o770)
	cmd := exec.Command(filepath.Join(binDir, "baton"), "serve", "--data", data)
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), data) || !strings.Contains(string(out), "writable") {
		t.Errorf("serve on a group-writable data dir: %v\n%s", err, out)
	}
}
