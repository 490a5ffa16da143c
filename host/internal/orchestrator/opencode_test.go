package orchestrator_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-run/baton/host/internal/domain"
)

// The host with the real opencode plugin and the replay peer serving
// transcripts recorded from `opencode serve` (opencode-ai 1.18.33) over
// HTTP and server-sent events.

// opencodeThread creates an opencode thread on a transcript.
func (e *env) opencodeThread(scenario string, policy domain.ApprovalPolicy) (string, domain.Command, domain.Receipt) {
	e.t.Helper()
	return e.newThread("opencode", "opencode/"+scenario+".ndjson", policy)
}

// One message, one run in one turn on the server's session (recorded:
// testdata/opencode/simple.ndjson), with a checkpoint.
func TestOpencodeSimple(t *testing.T) {
	e := newEnv(t)
	e.gitWorkspace()
	threadID, _, _ := e.opencodeThread("simple", "")
	e.dispatch(domain.Command{ID: "send", ThreadID: threadID, Payload: domain.DispatchMessage{Text: messages(t, "opencode/simple.messages")[0]}})
	th := e.waitFor(threadID, "the run to end", allRunsEnded(1))
	e.checkTurnRuns(th, []int{0}, [][]string{nil})
	if got := assistantText(th, th.Runs[0].ID); got != "Hello from the replay agent." {
		t.Errorf("assistant text %q", got)
	}
	if len(th.ProviderThreads) != 1 || th.ProviderThreads[0].ProviderRef != "ses_dd3626894ffeaqaI9vhh6dEh26" {
		t.Errorf("provider threads %+v; want the server's session", th.ProviderThreads)
	}
	e.checkSessionsClosed(threadID)
}

// Two messages, two runs, each the assistant's answer to its own message;
// commands sent again return their receipts and reach opencode once.
func TestOpencodeSimpleAndMultiTurn(t *testing.T) {
	e := newEnv(t)
	e.gitWorkspace()
	threadID, create, created := e.opencodeThread("multi_turn", "")
	var cmds []domain.Command
	var receipts []domain.Receipt
	for i, text := range []string{"Say hello", "Say it again"} {
		cmd := domain.Command{ID: "send-" + text, ThreadID: threadID, Payload: domain.DispatchMessage{Text: text}}
		cmds, receipts = append(cmds, cmd), append(receipts, e.dispatch(cmd))
		e.waitFor(threadID, "the run to end", allRunsEnded(i+1))
	}
	th := mustThread(t, e, threadID)
	for i, want := range []string{"First reply.", "Second reply."} {
		r := th.Runs[i]
		if r.Status != domain.RunStatusCompleted || assistantText(th, r.ID) != want {
			t.Fatalf("run %d: %s %q", i+1, r.Status, assistantText(th, r.ID))
		}
	}
	e.checkTurnRuns(th, []int{0, 0}, [][]string{nil, nil})
	if len(th.ProviderThreads) != 1 || !strings.HasPrefix(th.ProviderThreads[0].ProviderRef, "ses_") {
		t.Fatalf("provider threads: %+v", th.ProviderThreads)
	}
	// Each provider turn is the user message opencode made for the run.
	if len(th.ProviderTurns) != 2 || !strings.HasPrefix(th.ProviderTurns[0].ProviderRef, "msg_") {
		t.Fatalf("provider turns: %+v", th.ProviderTurns)
	}
	if u := th.Runs[0].Usage; u == nil || u.TotalTokens == 0 {
		t.Errorf("run 1 has no usage: %+v", th.Runs[0].Usage)
	}
	e.redispatchAll(append([]domain.Command{create}, cmds...), append([]domain.Receipt{created}, receipts...))
	th = e.checkSessionsClosed(threadID)
	if n := e.countFrames(th, `"path":"/session/`+th.ProviderThreads[0].ProviderRef+`/prompt_async"`); n != 2 {
		t.Errorf("prompt_async sent %d times, want 2", n)
	}
}

// Approvals answered by a client: accept runs the command and the write;
// decline leaves the file alone, the command item is declined, and the turn
// still completes.
func TestOpencodeApprovals(t *testing.T) {
	for _, tc := range []approvalCase{
		{"approval_accept", "accept", 2, "command_execution", domain.StatusCompleted}, // a command and a write
		{"approval_decline", "decline", 1, "command_execution", "declined"},
	} {
		t.Run(tc.scenario, func(t *testing.T) {
			e := newEnv(t)
			th := e.checkApprovals("opencode", tc)
			e.restart()
			if n := e.countFrames(th, `"path":"/permission/`); n != tc.requests {
				t.Errorf("permission replies sent %d times, want %d", n, tc.requests)
			}
		})
	}
}

// A thread's policy answers opencode's permission requests itself.
func TestOpencodeApprovalByPolicy(t *testing.T) {
	e := newEnv(t)
	threadID, _, _ := e.opencodeThread("approval_accept", domain.ApproveAccept)
	send := domain.Command{ID: "send", ThreadID: threadID, Payload: domain.DispatchMessage{Text: "Create made.txt with a command, then hello.txt"}}
	e.dispatch(send)
	th := e.waitFor(threadID, "the run to end", allRunsEnded(1))
	if r := th.Runs[0]; r.Status != domain.RunStatusCompleted {
		t.Fatalf("run %s (%+v)", r.Status, r.Failure)
	}
	// Both of the transcript's requests, the command's and the write's,
	// accepted by the policy.
	type answer struct {
		Kind       domain.RequestKind
		Status     domain.RequestStatus
		Decision   domain.RequestDecision
		AnsweredBy domain.Answerer
	}
	var got []answer
	for _, q := range th.Requests {
		got = append(got, answer{q.Kind, q.Status, q.Decision, q.AnsweredBy})
	}
	want := []answer{
		{domain.RequestCommandApproval, domain.RequestStatusResolved, "accept", domain.AnsweredByPolicy},
		{domain.RequestFileChangeApproval, domain.RequestStatusResolved, "accept", domain.AnsweredByPolicy},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
}

// Invariants 2 and 5: the task tool's child session is a subagent node
// nested under the run's root; its end does not end the run.
func TestOpencodeSubagent(t *testing.T) {
	e := newEnv(t)
	threadID, _, _ := e.opencodeThread("subagent", "")
	th := e.play(threadID, "opencode/subagent.steps.json")
	if len(th.Runs) != 1 {
		t.Fatalf("runs = %d, want 1", len(th.Runs))
	}
	r := th.Runs[0]
	// The run's messages are the child's answer and the root's.
	if r.Status != domain.RunStatusCompleted || assistantText(th, r.ID) != "Hi from the helper.The helper said hi." {
		t.Fatalf("run %s, said %q", r.Status, assistantText(th, r.ID))
	}
	sub := e.subagentTurn(th, r)
	var childMsgs int
	for _, n := range r.Nodes {
		if n.ParentID == sub.ID && n.Kind == domain.NodeAssistantMessage {
			childMsgs++
		}
	}
	if childMsgs != 1 {
		t.Errorf("%d assistant messages under the subagent node, want 1", childMsgs)
	}
	if len(th.ProviderThreads) != 2 || th.ProviderThreads[1].ParentID == "" {
		t.Fatalf("provider threads: %+v", th.ProviderThreads)
	}
	e.checkEndedAfterRoot(th, r, sub)
}

// Invariant 3: an interrupt is opencode's abort; the run ends interrupted
// when the session goes idle, after a permission opencode asks for after
// answering the abort. The abort is sent once.
func TestOpencodeTurnInterrupt(t *testing.T) {
	e := newEnv(t)
	threadID, _, _ := e.opencodeThread("turn_interrupt_late", "")
	e.dispatch(domain.Command{ID: "send", ThreadID: threadID, Payload: domain.DispatchMessage{Text: "Count to a million, slowly"}})
	th := e.waitFor(threadID, "the turn to start", func(th domain.Thread) bool {
		return len(th.Runs) == 1 && th.Runs[0].Status == domain.RunStatusRunning && len(th.ProviderTurns) == 1
	})
	interrupt := domain.Command{ID: "stop", ThreadID: threadID, Payload: domain.InterruptRun{RunID: th.Runs[0].ID}}
	stopped := e.dispatch(interrupt)
	th = e.waitFor(threadID, "the run to end", allRunsEnded(1))
	e.checkInterrupted(threadID, th.Runs[0], asksAfterAck)
	if f := th.Runs[0].Failure; f != nil {
		t.Errorf("the interrupted run failed: %+v", f)
	}
	e.redispatchAll([]domain.Command{interrupt}, []domain.Receipt{stopped})
	e.restart()
	if n := e.countFrames(th, `/abort"`); n != 1 {
		t.Errorf("abort sent %d times, want 1", n)
	}
}

// Invariant 4 without native steering: a message sent into the active run
// interrupts its attempt (abort) and a replacement attempt carries it on
// the same opencode session; still one run.
func TestOpencodeSteeringRestartFallback(t *testing.T) {
	e := newEnv(t)
	threadID, _, _ := e.opencodeThread("steering_restart_fallback", "")
	e.dispatch(domain.Command{ID: "send", ThreadID: threadID, Payload: domain.DispatchMessage{Text: "Tell me a long story about a lighthouse."}})
	e.waitFor(threadID, "the turn to start", func(th domain.Thread) bool {
		return len(th.Runs) == 1 && th.Runs[0].Status == domain.RunStatusRunning && len(th.ProviderTurns) == 1
	})
	e.dispatch(domain.Command{ID: "steer", ThreadID: threadID, Payload: domain.DispatchMessage{Text: "Actually, just say hi."}}) // auto: restart, as opencode cannot steer
	th := e.waitFor(threadID, "the run to end", func(th domain.Thread) bool {
		return allRunsEnded(1)(th) && len(th.Runs[0].Attempts) == 2
	})
	r := e.checkSteeringRestart(th)
	e.checkUserMessages(th, r, 2)
	if got := assistantText(th, r.ID); got != "Hi!" {
		t.Errorf("assistant text %q", got)
	}
	if len(th.ProviderThreads) != 1 {
		t.Fatalf("provider threads %+v; want the one opencode session", th.ProviderThreads)
	}
}

// A child session's turn end captures a checkpoint in a scope nested under
// its run's; the run's own checkpoint has the file the child wrote.
func TestOpencodeSubagentCheckpoint(t *testing.T) {
	e := newEnv(t)
	e.gitWorkspace()
	threadID, _, _ := e.opencodeThread("subagent_checkpoint", domain.ApproveAccept)
	th := e.play(threadID, "opencode/subagent_checkpoint.steps.json")
	if len(th.Runs) != 1 || th.Runs[0].Status != domain.RunStatusCompleted {
		t.Fatalf("runs: %+v", th.Runs)
	}
	_, subCP, runCP := e.subagentCheckpoints(th)
	if got := fileList(subCP); !slices.Equal(got, []string{"added notes.txt"}) {
		t.Errorf("subagent checkpoint %+v, files %q", subCP, got)
	}
	if got := fileList(runCP); !slices.Equal(got, []string{"added notes.txt"}) {
		t.Errorf("run checkpoint files: %q", got)
	}
	if len(th.Requests) != 1 || th.Requests[0].AnsweredBy != "policy" || th.Requests[0].Kind != domain.RequestFileChangeApproval {
		t.Errorf("requests: %+v", th.Requests)
	}
}

// Invariants 5 and 6 with opencode's native revert: three runs change
// files; a rollback to run 1 puts the files back, opencode reverts its
// session to before run 2's message (same session), runs 2 and 3 are rolled
// back, and the fourth run is accepted by the transcript.
func TestOpencodeThreadRollback(t *testing.T) {
	e := newEnv(t)
	e.gitWorkspace()
	threadID, _, _ := e.opencodeThread("thread_rollback", domain.ApproveAccept)
	th := e.play(threadID, "opencode/thread_rollback.steps.json")
	e.checkRolledBackToRun1(th, domain.ReconcileNative)
	if len(th.ProviderThreads) != 1 || th.ProviderThreads[0].Detached {
		t.Errorf("provider threads: %+v; want the one session, reverted in place", th.ProviderThreads)
	}
	th = e.checkSessionsClosed(threadID)
	if n := e.countFrames(th, `/revert"`); n != 1 {
		t.Errorf("revert sent %d times, want 1", n)
	}
}

// A thread continued by a new host resumes the opencode session by its id
// on a new server (the replay peer continues the transcript).
func TestOpencodeResume(t *testing.T) {
	e := newEnv(t)
	threadID, _, _ := e.opencodeThread("resume", "")
	th := e.sendAcrossRestart(threadID, "Remember the word banana", "What was the word?")
	for i, want := range []string{"I will remember banana.", "The word was banana."} {
		r := th.Runs[i]
		if r.Status != domain.RunStatusCompleted || assistantText(th, r.ID) != want {
			t.Fatalf("run %d = %s %q", r.Ordinal, r.Status, assistantText(th, r.ID))
		}
		assertOneRootAndTurn(t, th, r)
	}
	if len(th.ProviderSessions) != 2 || len(th.ProviderThreads) != 1 {
		t.Fatalf("sessions %d, provider threads %d; want 2 sessions on 1 resumed opencode session", len(th.ProviderSessions), len(th.ProviderThreads))
	}
	e.checkSessionsClosed(threadID)
}
