package service_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/timestamppb"

	batonv1 "github.com/baton-run/baton/host/api/baton/v1"
	"github.com/baton-run/baton/host/internal/domain"
	"github.com/baton-run/baton/host/internal/service"
)

// A command returns its receipt (the thread id and command id allocated
// when the client sends none, the run a message started); a repeat
// returns the same receipt and writes nothing; the same id with other
// content is AlreadyExists.
func TestCommandsReceiptsAndRepeats(t *testing.T) {
	e := newEnv(t, service.Options{})
	ctx := t.Context()
	create := &batonv1.CreateThreadRequest{CommandId: "create", Provider: "acp", Cwd: e.ws, ProviderCommand: e.peer("acp/simple.ndjson")}
	crc, err := e.client.CreateThread(ctx, create)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(crc.GetThreadId(), "thr") {
		t.Fatalf("thread id %q, want one allocated", crc.GetThreadId())
	}
	want := &batonv1.Receipt{CommandId: "create", Type: "thread.create", ThreadId: crc.GetThreadId(), Sequence: 1, At: timestamppb.New(epoch)}
	if d := cmp.Diff(want, crc, protocmp.Transform()); d != "" {
		t.Errorf("create receipt (-want +got):\n%s", d)
	}
	threadID := crc.GetThreadId()
	send := &batonv1.SendMessageRequest{CommandId: "send", ThreadId: threadID, Text: messages(t, "acp/simple.messages")[0], Mode: "queue"}
	src, err := e.client.SendMessage(ctx, send)
	if err != nil {
		t.Fatal(err)
	}
	th := e.waitFor(threadID, "the run to end", allRunsEnded(1))
	if r := th.Runs[0]; r.Status != domain.RunStatusCompleted || r.MessageID != "msg_send" {
		t.Fatalf("run %+v; want completed, its message msg_send (made from the command id)", r)
	}
	wantSend := &batonv1.Receipt{CommandId: "send", Type: "message.dispatch", ThreadId: threadID, Sequence: src.GetSequence(),
		At: timestamppb.New(epoch), RunId: th.Runs[0].ID}
	if d := cmp.Diff(wantSend, src, protocmp.Transform()); d != "" || src.GetSequence() <= 1 {
		t.Errorf("send receipt (-want +got):\n%s", d)
	}

	head := e.host.LastSequence()
	before, err := e.client.GetThread(ctx, &batonv1.GetThreadRequest{ThreadId: threadID})
	if err != nil {
		t.Fatal(err)
	}
	again, err := e.client.CreateThread(ctx, create)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(crc, again, protocmp.Transform()); d != "" {
		t.Errorf("repeated create (-first +repeat):\n%s", d)
	}
	sendAgain, err := e.client.SendMessage(ctx, send)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(src, sendAgain, protocmp.Transform()); d != "" {
		t.Errorf("repeated send (-first +repeat):\n%s", d)
	}
	if got := e.host.LastSequence(); got != head {
		t.Errorf("repeats wrote events: head %d -> %d", head, got)
	}
	after, err := e.client.GetThread(ctx, &batonv1.GetThreadRequest{ThreadId: threadID})
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(before, after, protocmp.Transform()); d != "" {
		t.Errorf("repeats changed the thread (-before +after):\n%s", d)
	}

	// The same command id with other content.
	other := &batonv1.SendMessageRequest{CommandId: "send", ThreadId: threadID, Text: "something else", Mode: "queue"}
	if _, err := e.client.SendMessage(ctx, other); status.Code(err) != codes.AlreadyExists {
		t.Errorf("reused command id: %v, want AlreadyExists", err)
	}
	// No command id: one is allocated.
	nrc, err := e.client.CreateThread(ctx, &batonv1.CreateThreadRequest{ThreadId: "named", Provider: "acp", Cwd: e.ws})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(nrc.GetCommandId(), "cmd") || nrc.GetThreadId() != "named" {
		t.Errorf("receipt %v; want an allocated command id and thread named", nrc)
	}
}

// A command id is one command on one thread: the same message, with the
// same command id, sent to another thread is AlreadyExists naming the
// thread it went to, and the other thread is left as it was.
func TestCommandIDOnAnotherThreadIsAlreadyExists(t *testing.T) {
	e := newEnv(t, service.Options{})
	ctx := t.Context()
	first := e.create("create-first", "", "acp", "acp/simple.ndjson", "").GetThreadId()
	other := e.create("create-other", "", "acp", "acp/simple.ndjson", "").GetThreadId()
	send := &batonv1.SendMessageRequest{CommandId: "send", ThreadId: first, Text: messages(t, "acp/simple.messages")[0], Mode: "queue"}
	if _, err := e.client.SendMessage(ctx, send); err != nil {
		t.Fatal(err)
	}
	e.waitFor(first, "the run to end", allRunsEnded(1))

	head := e.host.LastSequence()
	before, err := e.client.GetThread(ctx, &batonv1.GetThreadRequest{ThreadId: other})
	if err != nil {
		t.Fatal(err)
	}
	elsewhere := &batonv1.SendMessageRequest{CommandId: send.CommandId, ThreadId: other, Text: send.Text, Mode: send.Mode}
	_, err = e.client.SendMessage(ctx, elsewhere)
	want := "conflict: command id send already exists: it was used for another message.dispatch command on thread " + first
	if status.Code(err) != codes.AlreadyExists || status.Convert(err).Message() != want {
		t.Errorf("the same message and command id on another thread: %v\nwant AlreadyExists: %s", err, want)
	}
	if got := e.host.LastSequence(); got != head {
		t.Errorf("the refused send wrote events: head %d -> %d", head, got)
	}
	after, err := e.client.GetThread(ctx, &batonv1.GetThreadRequest{ThreadId: other})
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(before, after, protocmp.Transform()); d != "" {
		t.Errorf("the refused send changed the other thread (-before +after):\n%s", d)
	}
}

// Interrupt with no run id stops the active run; its repeat, after the
// run has ended, returns the first receipt; with no run active it is
// FailedPrecondition.
func TestInterruptActiveRun(t *testing.T) {
	e := newEnv(t, service.Options{})
	ctx := t.Context()
	threadID := e.create("create", "", "acp", "acp/turn_interrupt_late.ndjson", "").GetThreadId()
	if _, err := e.client.SendMessage(ctx, &batonv1.SendMessageRequest{CommandId: "send", ThreadId: threadID,
		Text: "Write a very long essay about rivers."}); err != nil {
		t.Fatal(err)
	}
	running := e.waitFor(threadID, "the run to run", func(t domain.Thread) bool {
		return len(t.Runs) == 1 && t.Runs[0].Status == domain.RunStatusRunning
	})
	stop := &batonv1.InterruptRequest{CommandId: "stop", ThreadId: threadID}
	rc, err := e.client.Interrupt(ctx, stop)
	if err != nil {
		t.Fatal(err)
	}
	th := e.waitFor(threadID, "the run to end", allRunsEnded(1))
	if r := th.Runs[0]; r.ID != running.Runs[0].ID || r.Status != domain.RunStatusInterrupted || !r.InterruptRequested {
		t.Fatalf("run %s %s (interrupt requested %v); want the active run interrupted", r.ID, r.Status, r.InterruptRequested)
	}
	again, err := e.client.Interrupt(ctx, stop)
	if err != nil {
		t.Fatalf("repeated interrupt: %v", err)
	}
	if d := cmp.Diff(rc, again, protocmp.Transform()); d != "" {
		t.Errorf("repeated interrupt (-first +repeat):\n%s", d)
	}
	_, err = e.client.Interrupt(ctx, &batonv1.InterruptRequest{CommandId: "stop2", ThreadId: threadID})
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "no active run") {
		t.Errorf("interrupt with no active run: %v, want FailedPrecondition saying so", err)
	}
	_, err = e.client.Interrupt(ctx, &batonv1.InterruptRequest{CommandId: "stop", ThreadId: "other"})
	if status.Code(err) != codes.AlreadyExists {
		t.Errorf("interrupt reusing a command id on another thread: %v, want AlreadyExists", err)
	}
}

// pendingApproval is a thread of ACP's approval_accept transcript whose
// run waits for its approval (policy ask), and its projection then.
func (e *env) pendingApproval(ctx context.Context) (string, domain.Thread) {
	e.t.Helper()
	threadID := e.create("create", "", "acp", "acp/approval_accept.ndjson", "ask").GetThreadId()
	if _, err := e.client.SendMessage(ctx, &batonv1.SendMessageRequest{ThreadId: threadID, Text: "Write allowed.txt"}); err != nil {
		e.t.Fatal(err)
	}
	return threadID, e.waitFor(threadID, "a request", func(t domain.Thread) bool {
		return len(t.Requests) == 1 && t.Requests[0].Status == domain.RequestStatusPending
	})
}

// AnswerRequest with no thread id finds the request's thread; the answer
// reaches the provider.
func TestAnswerRequestFindsThread(t *testing.T) {
	e := newEnv(t, service.Options{})
	ctx := t.Context()
	threadID, th := e.pendingApproval(ctx)
	answer := &batonv1.AnswerRequestRequest{CommandId: "answer", RequestId: th.Requests[0].ID, Decision: "accept"}
	rc, err := e.client.AnswerRequest(ctx, answer)
	if err != nil {
		t.Fatal(err)
	}
	if rc.GetThreadId() != threadID || rc.GetType() != "runtime-request.respond" {
		t.Errorf("receipt %v; want the request's thread %s", rc, threadID)
	}
	th = e.waitFor(threadID, "the run to end", allRunsEnded(1))
	if q := th.Requests[0]; q.Status != domain.RequestStatusResolved || q.Decision != domain.DecisionAccept || q.AnsweredBy != domain.AnsweredByClient {
		t.Errorf("request %+v; want resolved, accepted by the client", q)
	}
	again, err := e.client.AnswerRequest(ctx, answer)
	if err != nil {
		t.Fatalf("repeated answer: %v", err)
	}
	if d := cmp.Diff(rc, again, protocmp.Transform()); d != "" {
		t.Errorf("repeated answer (-first +repeat):\n%s", d)
	}
}

// An answer to a request whose provider process is gone is refused at
// once: FailedPrecondition, in the words the host has always used. The
// host's refusal and a plugin's (sdk.ErrNotResumable) are one error.
func TestAnswerToAGoneProviderIsFailedPrecondition(t *testing.T) {
	e := newEnv(t, service.Options{})
	ctx := t.Context()
	threadID, th := e.pendingApproval(ctx)
	if err := syscall.Kill(th.ProviderSessions[0].PluginPid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	e.waitFor(threadID, "the request to expire", func(t domain.Thread) bool {
		return t.Requests[0].Delivery == domain.DeliveryNotResumable
	})
	q := th.Requests[0].ID
	_, err := e.client.AnswerRequest(ctx, &batonv1.AnswerRequestRequest{ThreadId: threadID, RequestId: q, Decision: "accept"})
	want := "not_resumable: request " + q + " cannot be answered: its provider process is gone"
	if status.Code(err) != codes.FailedPrecondition || status.Convert(err).Message() != want {
		t.Errorf("answering a request whose provider is gone: %v; want FailedPrecondition %q", err, want)
	}
}

// Every refusal has the code that says what it is, and a message naming
// the field, the id or the state.
func TestErrorCodes(t *testing.T) {
	e := newEnv(t, service.Options{})
	ctx := t.Context()
	idle := e.create("c-idle", "idle", "acp", "acp/simple.ndjson", "").GetThreadId()
	busy := e.create("c-busy", "busy", "acp", "acp/simple.ndjson", "").GetThreadId()
	if _, err := e.client.SendMessage(ctx, &batonv1.SendMessageRequest{CommandId: "s1", ThreadId: busy, MessageId: "m1",
		Text: messages(t, "acp/simple.messages")[0]}); err != nil {
		t.Fatal(err)
	}
	e.waitFor(busy, "the run to end", allRunsEnded(1))
	for _, tc := range []struct {
		name string
		call func() error
		code codes.Code
		msg  string
	}{
		{"create: no provider", func() error {
			_, err := e.client.CreateThread(ctx, &batonv1.CreateThreadRequest{Cwd: e.ws})
			return err
		}, codes.InvalidArgument, "provider: required"},
		{"create: relative cwd", func() error {
			_, err := e.client.CreateThread(ctx, &batonv1.CreateThreadRequest{Provider: "acp", Cwd: "rel"})
			return err
		}, codes.InvalidArgument, `cwd: must be an absolute path, got "rel"`},
		{"create: no cwd", func() error {
			_, err := e.client.CreateThread(ctx, &batonv1.CreateThreadRequest{Provider: "acp"})
			return err
		}, codes.InvalidArgument, "cwd: required"},
		{"create: bad policy", func() error {
			_, err := e.client.CreateThread(ctx, &batonv1.CreateThreadRequest{Provider: "acp", Cwd: e.ws, ApprovalPolicy: "sometimes"})
			return err
		}, codes.InvalidArgument, `approval_policy: unknown policy "sometimes"`},
		{"create: thread exists", func() error {
			_, err := e.client.CreateThread(ctx, &batonv1.CreateThreadRequest{ThreadId: idle, Provider: "acp", Cwd: e.ws})
			return err
		}, codes.AlreadyExists, `thread "idle" already exists`},
		{"create: on another host, the log not shared", func() error {
			_, err := e.client.CreateThread(ctx, &batonv1.CreateThreadRequest{Provider: "acp", Cwd: e.ws, OnHost: "b"})
			return err
		}, codes.FailedPrecondition, `on_host "b": this service's event log is not shared with other hosts (serve --store nats://...)`},
		{"create: long thread id", func() error {
			_, err := e.client.CreateThread(ctx, &batonv1.CreateThreadRequest{ThreadId: strings.Repeat("x", 300), Provider: "acp", Cwd: e.ws})
			return err
		}, codes.InvalidArgument, "thread_id: longer than 256 bytes"},
		{"send: no thread", func() error {
			_, err := e.client.SendMessage(ctx, &batonv1.SendMessageRequest{Text: "hi"})
			return err
		}, codes.InvalidArgument, "thread_id: required"},
		{"send: no text", func() error {
			_, err := e.client.SendMessage(ctx, &batonv1.SendMessageRequest{ThreadId: idle})
			return err
		}, codes.InvalidArgument, "text: required"},
		{"send: white space (refused before the thread is looked up)", func() error {
			_, err := e.client.SendMessage(ctx, &batonv1.SendMessageRequest{ThreadId: "nope", Text: " \n\t"})
			return err
		}, codes.InvalidArgument, "text: the message is empty or only white space"},
		{"send: bad mode", func() error {
			_, err := e.client.SendMessage(ctx, &batonv1.SendMessageRequest{ThreadId: idle, Text: "hi", Mode: "x"})
			return err
		}, codes.InvalidArgument, `mode: unknown mode "x"; want queue, steer, restart or now`},
		{"send: unknown thread", func() error {
			_, err := e.client.SendMessage(ctx, &batonv1.SendMessageRequest{ThreadId: "nope", Text: "hi"})
			return err
		}, codes.NotFound, `thread "nope"`},
		{"send: steer an idle thread", func() error {
			_, err := e.client.SendMessage(ctx, &batonv1.SendMessageRequest{ThreadId: idle, Text: "hi", Mode: "steer"})
			return err
		}, codes.FailedPrecondition, "needs an active run"},
		{"send: message id in use", func() error {
			_, err := e.client.SendMessage(ctx, &batonv1.SendMessageRequest{ThreadId: busy, MessageId: "m1", Text: "again", Mode: "queue"})
			return err
		}, codes.AlreadyExists, `message "m1" already exists`},
		{"send: command id in use", func() error {
			_, err := e.client.SendMessage(ctx, &batonv1.SendMessageRequest{CommandId: "s1", ThreadId: idle, Text: "other"})
			return err
		}, codes.AlreadyExists, "command id s1 already exists"},
		{"answer: no request", func() error {
			_, err := e.client.AnswerRequest(ctx, &batonv1.AnswerRequestRequest{Decision: "accept"})
			return err
		}, codes.InvalidArgument, "request_id: required"},
		{"answer: no decision", func() error {
			_, err := e.client.AnswerRequest(ctx, &batonv1.AnswerRequestRequest{RequestId: "r"})
			return err
		}, codes.InvalidArgument, "decision: required"},
		{"answer: bad decision", func() error {
			_, err := e.client.AnswerRequest(ctx, &batonv1.AnswerRequestRequest{RequestId: "r", Decision: "maybe"})
			return err
		}, codes.InvalidArgument, `decision: unknown decision "maybe"`},
		{"answer: unknown request", func() error {
			_, err := e.client.AnswerRequest(ctx, &batonv1.AnswerRequestRequest{RequestId: "req_nope", Decision: "accept"})
			return err
		}, codes.NotFound, `request "req_nope"`},
		{"answer: unknown request on a thread", func() error {
			_, err := e.client.AnswerRequest(ctx, &batonv1.AnswerRequestRequest{ThreadId: idle, RequestId: "req_nope", Decision: "accept"})
			return err
		}, codes.NotFound, "req_nope"},
		{"interrupt: no thread", func() error {
			_, err := e.client.Interrupt(ctx, &batonv1.InterruptRequest{})
			return err
		}, codes.InvalidArgument, "thread_id: required"},
		{"interrupt: idle thread", func() error {
			_, err := e.client.Interrupt(ctx, &batonv1.InterruptRequest{ThreadId: idle})
			return err
		}, codes.FailedPrecondition, "thread idle has no active run"},
		{"interrupt: unknown run", func() error {
			_, err := e.client.Interrupt(ctx, &batonv1.InterruptRequest{ThreadId: idle, RunId: "run_nope"})
			return err
		}, codes.NotFound, "run_nope"},
		{"interrupt: ended run", func() error {
			th, err := e.host.Thread(busy)
			if err != nil {
				return err
			}
			_, err = e.client.Interrupt(ctx, &batonv1.InterruptRequest{ThreadId: busy, RunId: th.Runs[0].ID})
			return err
		}, codes.FailedPrecondition, "has already ended"},
		{"rollback: no thread", func() error {
			_, err := e.client.Rollback(ctx, &batonv1.RollbackRequest{})
			return err
		}, codes.InvalidArgument, "thread_id: required"},
		{"rollback: no such run", func() error {
			_, err := e.client.Rollback(ctx, &batonv1.RollbackRequest{ThreadId: idle, Run: 5})
			return err
		}, codes.NotFound, "no checkpoint of run 5"},
		{"get: no thread", func() error {
			_, err := e.client.GetThread(ctx, &batonv1.GetThreadRequest{})
			return err
		}, codes.InvalidArgument, "thread_id: required"},
		{"get: unknown thread", func() error {
			_, err := e.client.GetThread(ctx, &batonv1.GetThreadRequest{ThreadId: "nope"})
			return err
		}, codes.NotFound, `thread "nope"`},
		{"list: bad status", func() error {
			_, err := e.client.ListThreads(ctx, &batonv1.ListThreadsRequest{Status: "dancing"})
			return err
		}, codes.InvalidArgument, `status: unknown status "dancing"`},
		{"diff: no thread", func() error {
			_, err := e.client.Diff(ctx, &batonv1.DiffRequest{})
			return err
		}, codes.InvalidArgument, "thread_id: required"},
		{"diff: no run", func() error {
			_, err := e.client.Diff(ctx, &batonv1.DiffRequest{ThreadId: idle})
			return err
		}, codes.NotFound, "thread idle has no run with a ready checkpoint"},
		{"subscribe: unknown thread", func() error {
			s, err := e.client.Subscribe(ctx, &batonv1.SubscribeRequest{ThreadId: "nope"})
			if err != nil {
				return err
			}
			_, err = s.Recv()
			return err
		}, codes.NotFound, `thread "nope"`},
	} {
		err := tc.call()
		if status.Code(err) != tc.code || !strings.Contains(status.Convert(err).Message(), tc.msg) {
			t.Errorf("%s: %v; want %s with %q", tc.name, err, tc.code, tc.msg)
		}
	}
}

// A host that has closed answers Unavailable.
func TestClosedHostUnavailable(t *testing.T) {
	e := newEnv(t, service.Options{})
	e.host.Close()
	_, err := e.client.CreateThread(context.Background(), &batonv1.CreateThreadRequest{Provider: "acp", Cwd: e.ws})
	if status.Code(err) != codes.Unavailable {
		t.Errorf("create on a closed host: %v, want Unavailable", err)
	}
}

// Rollback to run 0 puts the files back as they were before the first
// run; a repeat returns the first receipt.
func TestRollbackToRun(t *testing.T) {
	e := newEnv(t, service.Options{})
	ctx := t.Context()
	e.gitWorkspace()
	threadID := e.create("create", "", "acp", "acp/approval_accept.ndjson", "accept").GetThreadId()
	if _, err := e.client.SendMessage(ctx, &batonv1.SendMessageRequest{ThreadId: threadID, Text: "Write allowed.txt"}); err != nil {
		t.Fatal(err)
	}
	e.waitFor(threadID, "the run to end", allRunsEnded(1))
	written := filepath.Join(e.ws, "allowed.txt")
	if _, err := os.Stat(written); err != nil {
		t.Fatalf("the run wrote nothing: %v", err)
	}
	rollback := &batonv1.RollbackRequest{CommandId: "rb", ThreadId: threadID, Run: 0}
	rc, err := e.client.Rollback(ctx, rollback)
	if err != nil {
		t.Fatal(err)
	}
	th := e.waitFor(threadID, "the rollback", func(t domain.Thread) bool { return len(t.Rollbacks) == 1 && !t.RollingBack() })
	if rb := th.Rollbacks[0]; rb.Status != domain.RollbackDone {
		t.Fatalf("rollback %+v, want completed", rb)
	}
	if _, err := os.Stat(written); !os.IsNotExist(err) {
		t.Errorf("allowed.txt after the rollback to run 0: %v, want it gone", err)
	}
	again, err := e.client.Rollback(ctx, rollback)
	if err != nil {
		t.Fatalf("repeated rollback: %v", err)
	}
	if d := cmp.Diff(rc, again, protocmp.Transform()); d != "" {
		t.Errorf("repeated rollback (-first +repeat):\n%s", d)
	}
}

// CancelQueued cancels a thread's queued runs, those it names or every
// one, each with its reason; the active run goes on; a repeat returns the
// first receipt and writes nothing; what it cannot cancel is refused with
// the code and a message that names it. The provider never hears of the
// cancelled runs (the replay peer takes one prompt, then its cancel).
func TestCancelQueued(t *testing.T) {
	e := newEnv(t, service.Options{})
	ctx := t.Context()
	id := e.create("c", "busy", "acp", "acp/turn_interrupt.ndjson", "").GetThreadId()
	for _, text := range []string{"Write a very long essay about rivers.", "two", "three", "four"} {
		if _, err := e.client.SendMessage(ctx, &batonv1.SendMessageRequest{ThreadId: id, Text: text, Mode: "queue"}); err != nil {
			t.Fatal(err)
		}
	}
	th, err := e.host.Thread(id)
	if err != nil {
		t.Fatal(err)
	}
	runID := func(i int) string { return th.Runs[i].ID }
	one, err := e.client.CancelQueued(ctx, &batonv1.CancelQueuedRequest{CommandId: "drop-3", ThreadId: id, RunIds: []string{runID(2)}})
	if err != nil {
		t.Fatal(err)
	}
	all := &batonv1.CancelQueuedRequest{CommandId: "drop", ThreadId: id, Reason: "dropped by hand"}
	rc, err := e.client.CancelQueued(ctx, all)
	if err != nil {
		t.Fatal(err)
	}
	want := &batonv1.Receipt{CommandId: "drop", Type: "thread.queue.cancel", ThreadId: id, Sequence: rc.GetSequence(), At: timestamppb.New(epoch)}
	if d := cmp.Diff(want, rc, protocmp.Transform()); d != "" || rc.GetSequence() <= one.GetSequence() {
		t.Errorf("receipt (-want +got):\n%s\n(sequence %d after %d)", d, rc.GetSequence(), one.GetSequence())
	}
	again, err := e.client.CancelQueued(ctx, all)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(rc, again, protocmp.Transform()); d != "" {
		t.Errorf("repeat (-first +repeat):\n%s", d)
	}
	for _, tc := range []struct {
		name string
		req  *batonv1.CancelQueuedRequest
		code codes.Code
		msg  string
	}{
		{"no thread", &batonv1.CancelQueuedRequest{}, codes.InvalidArgument, "thread_id: required"},
		{"unknown thread", &batonv1.CancelQueuedRequest{ThreadId: "nope"}, codes.NotFound, `thread "nope"`},
		{"empty run id", &batonv1.CancelQueuedRequest{ThreadId: id, RunIds: []string{""}}, codes.InvalidArgument, "run_ids: required"},
		{"long reason", &batonv1.CancelQueuedRequest{ThreadId: id, Reason: strings.Repeat("x", 1025)}, codes.InvalidArgument,
			"reason: longer than 1024 bytes"},
		{"unknown run", &batonv1.CancelQueuedRequest{ThreadId: id, RunIds: []string{"run_nope"}}, codes.NotFound, `run "run_nope"`},
		{"started run", &batonv1.CancelQueuedRequest{ThreadId: id, RunIds: []string{runID(0)}}, codes.FailedPrecondition,
			"not queued: only a run that has not started can be cancelled (interrupt one that has)"},
		{"ended run", &batonv1.CancelQueuedRequest{ThreadId: id, RunIds: []string{runID(1)}}, codes.FailedPrecondition,
			"run 2 is cancelled, not queued"},
	} {
		_, err := e.client.CancelQueued(ctx, tc.req)
		if st := status.Convert(err); st.Code() != tc.code || !strings.Contains(st.Message(), tc.msg) {
			t.Errorf("%s: %v %q, want %v containing %q", tc.name, st.Code(), st.Message(), tc.code, tc.msg)
		}
	}
	// The active run went on: it ends when interrupted.
	e.waitFor(id, "the prompt to be sent", func(th domain.Thread) bool {
		return len(th.Runs[0].Attempts) > 0 && th.Runs[0].Attempts[0].SessionID != ""
	})
	if _, err := e.client.Interrupt(ctx, &batonv1.InterruptRequest{ThreadId: id}); err != nil {
		t.Fatal(err)
	}
	th = e.waitFor(id, "every run to end", allRunsEnded(4))
	type run struct {
		Status     domain.RunStatus
		StopReason string
	}
	var got []run
	for _, r := range th.Runs {
		got = append(got, run{r.Status, r.StopReason})
	}
	wantRuns := []run{{domain.RunStatusInterrupted, "cancelled"}, {domain.RunStatusCancelled, "dropped by hand"},
		{domain.RunStatusCancelled, domain.StopCancelledQueued}, {domain.RunStatusCancelled, "dropped by hand"}}
	if d := cmp.Diff(wantRuns, got); d != "" {
		t.Errorf("runs (-want +got):\n%s", d)
	}
}

// A thread created with a shared cwd says so, in its projection and in
// its thread.created event.
func TestCreateThreadCarriesSharedCwd(t *testing.T) {
	e := newEnv(t, service.Options{})
	ctx := t.Context()
	rc, err := e.client.CreateThread(ctx, &batonv1.CreateThreadRequest{ThreadId: "shared", Provider: "acp", Cwd: e.ws, SharedCwd: true})
	if err != nil {
		t.Fatal(err)
	}
	th, err := e.client.GetThread(ctx, &batonv1.GetThreadRequest{ThreadId: rc.GetThreadId()})
	if err != nil {
		t.Fatal(err)
	}
	if !th.GetSharedCwd() {
		t.Errorf("the thread's shared_cwd is false; want true")
	}
}

// A thread's owner and its loss, through the service: the host that
// created it owns it; when the host's loss is recorded (a host-internal
// command), the list and the thread say so, and its claim clears it.
func TestThreadOwnerAndLoss(t *testing.T) {
	e := newEnvHost(t, "a")
	ctx := t.Context()
	rc, err := e.client.CreateThread(ctx, &batonv1.CreateThreadRequest{ThreadId: "owned", Provider: "acp", Cwd: e.ws})
	if err != nil {
		t.Fatal(err)
	}
	summary := func() *batonv1.ThreadSummary {
		t.Helper()
		l, err := e.client.ListThreads(ctx, &batonv1.ListThreadsRequest{})
		if err != nil || len(l.GetThreads()) != 1 {
			t.Fatalf("list: %v, %v", l, err)
		}
		return l.GetThreads()[0]
	}
	if s := summary(); s.GetHost() != "a" || s.GetHostLost() != nil {
		t.Errorf("a new thread's summary: host %q, lost %v; want a, none", s.GetHost(), s.GetHostLost())
	}
	if _, err := e.host.Dispatch(ctx, domain.Command{ID: "lost", ThreadID: rc.GetThreadId(), Payload: domain.MarkHostLost{Host: "a"}}); err != nil {
		t.Fatal(err)
	}
	want := &batonv1.HostLost{Host: "a", At: timestamppb.New(epoch)}
	if d := cmp.Diff(want, summary().GetHostLost(), protocmp.Transform()); d != "" {
		t.Errorf("the summary's loss (-want +got):\n%s", d)
	}
	th, err := e.client.GetThread(ctx, &batonv1.GetThreadRequest{ThreadId: rc.GetThreadId()})
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(want, th.GetHostLost(), protocmp.Transform()); d != "" || th.GetHost() != "a" {
		t.Errorf("the thread: host %q, loss (-want +got):\n%s", th.GetHost(), d)
	}
	if _, err := e.host.Dispatch(ctx, domain.Command{ID: "back", ThreadID: rc.GetThreadId(), Payload: domain.ClaimThread{Reason: domain.ClaimHostBack}}); err != nil {
		t.Fatal(err)
	}
	if s := summary(); s.GetHost() != "a" || s.GetHostLost() != nil {
		t.Errorf("claimed back: host %q, lost %v; want a, none", s.GetHost(), s.GetHostLost())
	}
}
