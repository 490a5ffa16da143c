package orchestrator_test

import (
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-run/baton/host/internal/domain"
	"github.com/baton-run/baton/sdk/plugintest"
)

// The scenarios of the testing strategy with Claude Code: the real claude
// plugin, through go-plugin, with the replay peer playing transcripts
// recorded from @anthropic-ai/claude-code 2.1.332 (testdata/claude). The
// peer checks the arguments the plugin starts the CLI with and every
// frame it writes. thread_rollback is in TestThreadRollback.

// claudeThread creates a Claude Code thread on a transcript.
func (e *env) claudeThread(scenario string, policy domain.ApprovalPolicy) string {
	e.t.Helper()
	id, _, _ := e.newThread("claude", "claude/"+scenario+".ndjson", policy)
	return id
}

// One run: the CLI's session is the thread's provider thread; the
// assistant's text and reasoning are in the projection, and the usage of
// the result.
func TestClaudeSimple(t *testing.T) {
	e := newEnv(t)
	e.gitWorkspace()
	threadID := e.claudeThread("simple", "")
	th := e.play(threadID, "claude/simple.steps.json")
	e.checkTurnRuns(th, []int{0}, [][]string{nil})
	r := th.Runs[0]
	if r.Status != domain.RunStatusCompleted || assistantText(th, r.ID) != "Hello! How can I help you today?" {
		t.Fatalf("run %s said %q", r.Status, assistantText(th, r.ID))
	}
	// The session the CLI's frames name (testdata/claude/simple.ndjson).
	if len(th.ProviderThreads) != 1 || th.ProviderThreads[0].ProviderRef != "47020ab0-7a03-4729-b456-0fedbfdea733" {
		t.Errorf("provider threads %+v; want the CLI's session", th.ProviderThreads)
	}
	var reasoning []string
	for _, it := range th.TurnItems {
		if it.Kind == domain.NodeReasoning {
			reasoning = append(reasoning, it.Text.String())
		}
	}
	if !slices.Equal(reasoning, []string{"The user wants a greeting."}) {
		t.Errorf("reasoning items %q", reasoning)
	}
	if r.Usage == nil || r.Usage.OutputTokens == 0 || r.Usage.TotalTokens == 0 {
		t.Errorf("usage %+v", r.Usage)
	}
	th = e.checkSessionsClosed(threadID)
	if ref := th.ProviderThreads[0].ProviderRef; e.countFrames(th, `"session_id":"`+ref+`"`) == 0 {
		t.Errorf("provider thread %s is not the session the CLI named", ref)
	}
}

// Two runs in one CLI process, the second queued behind the first.
func TestClaudeQueuedRun(t *testing.T) {
	e := newEnv(t)
	e.gitWorkspace()
	threadID := e.claudeThread("multi_turn", "")
	th := e.play(threadID, "claude/multi_turn.steps.json")
	e.checkTurnRuns(th, []int{0, 0}, [][]string{nil, nil})
	if len(th.Runs) != 2 || len(th.ProviderSessions) != 1 {
		t.Fatalf("runs %d, sessions %d; want 2 runs in 1 session", len(th.Runs), len(th.ProviderSessions))
	}
	for i, want := range []string{"First reply, after a while.", "Second reply."} {
		if r := th.Runs[i]; r.Status != domain.RunStatusCompleted || assistantText(th, r.ID) != want {
			t.Errorf("run %d: %s %q", i+1, r.Status, assistantText(th, r.ID))
		}
	}
	e.checkSessionsClosed(threadID)
}

// Native steering: the message joins the active run (one run, one
// attempt), whether Claude Code feeds it to the model at a tool boundary
// or runs it right after the first answer with a result of its own.
func TestClaudeMessageSteering(t *testing.T) {
	for _, tc := range []struct{ scenario, input, want string }{
		{"message_steering", "Write a long story", "A very long story that nobody reads, because the user steered.A short story: the end."},
		{"message_steering_tool", "Look around, then write a long story", "A short story: the end."},
	} {
		t.Run(tc.scenario, func(t *testing.T) {
			e := newEnv(t)
			threadID := e.claudeThread(tc.scenario, "")
			e.dispatch(domain.Command{ID: "send", ThreadID: threadID, Payload: domain.DispatchMessage{Text: tc.input}})
			e.waitFor(threadID, "the turn to start", func(th domain.Thread) bool { return th.Runs[0].Status == domain.RunStatusRunning })
			e.dispatch(domain.Command{ID: "steer", ThreadID: threadID, Payload: domain.DispatchMessage{Text: "Make it short",
				Mode: domain.ModeSteerActive}})
			th := e.waitFor(threadID, "the run to end", allRunsEnded(1))
			r := e.checkSteeredNatively(threadID, th)
			if got := assistantText(th, r.ID); got != tc.want {
				t.Fatalf("assistant text %q", got)
			}
			th = e.checkSessionsClosed(threadID)
			if n := e.countFrames(th, `"content":"Make it short"`); n != 2 {
				t.Errorf("the steer is in %d raw frames; want 2 (written once, echoed once)", n)
			}
		})
	}
}

// The interrupt control request is acknowledged; the run ends
// interrupted with the result (terminal reason aborted_streaming), which
// comes after an approval the CLI asks for after the acknowledgement.
func TestClaudeTurnInterrupt(t *testing.T) {
	e := newEnv(t)
	threadID := e.claudeThread("turn_interrupt_late", "")
	th := e.play(threadID, "claude/turn_interrupt.steps.json")
	r := th.Runs[0]
	e.checkInterrupted(threadID, r, asksAfterAck)
	th = e.checkSessionsClosed(threadID)
	if n := e.countFrames(th, `"subtype":"interrupt"`); n != 1 {
		t.Errorf("interrupt sent %d times, want 1", n)
	}
}

// A steer still queued when the run is interrupted: the interrupt cancels
// it (recorded), so the run ends interrupted with one attempt and the CLI
// answers nothing after it.
func TestClaudeSteerThenInterrupt(t *testing.T) {
	e := newEnv(t)
	threadID := e.claudeThread("message_steering_interrupt", "")
	th := e.play(threadID, "claude/message_steering_interrupt.steps.json")
	if len(th.Runs) != 1 {
		t.Fatalf("runs = %d, want 1", len(th.Runs))
	}
	if r := th.Runs[0]; r.Status != domain.RunStatusInterrupted || len(r.Attempts) != 1 {
		t.Fatalf("run %s with %d attempts; want interrupted, 1", r.Status, len(r.Attempts))
	}
	if len(th.Diagnostics) != 0 {
		t.Errorf("diagnostics %+v", th.Diagnostics)
	}
	th = e.checkSessionsClosed(threadID)
	if n := e.countFrames(th, `"cancel_queued":true`); n != 1 {
		t.Errorf("interrupts cancelling the queue: %d, want 1", n)
	}
}

// Approvals answered by a client: accept writes the file (the CLI got
// the tool's input back), decline leaves the command undone and the turn
// still completes.
func TestClaudeApprovals(t *testing.T) {
	for _, tc := range []struct {
		approvalCase
		kind domain.RequestKind // of the one request
	}{
		{approvalCase{"approval_accept", "accept", 1, "file_change", domain.StatusCompleted}, domain.RequestFileChangeApproval},
		{approvalCase{"approval_decline", "decline", 1, "command_execution", "declined"}, domain.RequestCommandApproval},
	} {
		t.Run(tc.scenario, func(t *testing.T) {
			e := newEnv(t)
			th := e.checkApprovals("claude", tc.approvalCase)
			if q := th.Requests[0]; q.Kind != tc.kind {
				t.Errorf("request kind %q, want %q", q.Kind, tc.kind)
			}
			e.checkSessionsClosed(th.ID)
		})
	}
}

// An interrupt while the CLI waits on an approval: the CLI withdraws the
// request, which is resolved without an answer, and the run ends
// interrupted.
func TestClaudeRequestWithdrawn(t *testing.T) {
	e := newEnv(t)
	threadID := e.claudeThread("request_withdrawn", domain.ApproveAsk)
	th := e.play(threadID, "claude/request_withdrawn.steps.json")
	if r := th.Runs[0]; r.Status != domain.RunStatusInterrupted {
		t.Fatalf("run %s", r.Status)
	}
	// Withdrawn by the CLI: cancelled, with no answer from anyone.
	type outcome struct {
		Kind       domain.RequestKind
		Status     domain.RequestStatus
		Decision   domain.RequestDecision
		AnsweredBy domain.Answerer
	}
	var got []outcome
	for _, q := range th.Requests {
		got = append(got, outcome{q.Kind, q.Status, q.Decision, q.AnsweredBy})
	}
	want := []outcome{{domain.RequestCommandApproval, domain.RequestStatusCancelled, domain.DecisionCancel, ""}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("requests (-want +got):\n%s", diff)
	}
	e.checkSessionsClosed(threadID) // the peer fails on an answer it did not expect
}

// A Task subagent is a node under the run's root with a provider thread
// of its own; its end does not end the run.
func TestClaudeSubagent(t *testing.T) {
	e := newEnv(t)
	threadID := e.claudeThread("subagent", "")
	th := e.play(threadID, "claude/subagent.steps.json")
	if len(th.Runs) != 1 || th.Runs[0].Status != domain.RunStatusCompleted {
		t.Fatalf("runs %+v", th.Runs)
	}
	r := th.Runs[0]
	sub := e.subagentTurn(th, r)
	// The subagent's text is a message of the run on a node under the
	// subagent's; the root's text is on the root's nodes.
	parent := map[string]string{}
	for _, n := range r.Nodes {
		parent[n.ID] = n.ParentID
	}
	for _, m := range th.Messages {
		if m.Role != domain.RoleAssistant {
			continue
		}
		under := m.NodeID == sub.ID || parent[m.NodeID] == sub.ID
		if under != (m.Text.String() == "Child says hi.") {
			t.Errorf("message %q on node %s (under the subagent: %v)", m.Text, m.NodeID, under)
		}
	}
	if len(th.ProviderThreads) != 2 || th.ProviderThreads[1].ParentID != th.ProviderThreads[0].ID {
		t.Fatalf("provider threads: %+v", th.ProviderThreads)
	}
	e.checkEndedAfterRoot(th, r, sub)
	e.checkSessionsClosed(threadID)
}

// A background subagent (Claude Code's default) outlives the CLI turn that
// started it: the run ends once, after the subagent, with the answer the
// CLI gives when the subagent's task notification comes in.
func TestClaudeBackgroundSubagent(t *testing.T) {
	e := newEnv(t)
	threadID := e.claudeThread("subagent_background", "")
	th := e.play(threadID, "claude/subagent_background.steps.json")
	if len(th.Runs) != 1 || th.Runs[0].Status != domain.RunStatusCompleted {
		t.Fatalf("runs %+v", th.Runs)
	}
	r := th.Runs[0]
	if got := assistantText(th, r.ID); !strings.HasSuffix(got, "The helper said hi. Done.") {
		t.Errorf("the run's text %q; want it to end with the answer after the subagent", got)
	}
	// The CLI's first result is not the run's end: that is the answer
	// after the subagent's.
	e.checkEndedAfterRoot(th, r, e.subagentTurn(th, r))
	if len(th.Diagnostics) != 0 {
		t.Errorf("diagnostics %+v", th.Diagnostics)
	}
	e.checkSessionsClosed(threadID)
}

// An interrupt while the run waits on a background subagent after the
// CLI's first result (authored from a probe): the CLI stops the task and
// acknowledges, with no result; the run still ends interrupted, once, with
// the subagent's node, and the session is closed cleanly.
func TestClaudeBackgroundSubagentInterrupt(t *testing.T) {
	e := newEnv(t)
	threadID := e.claudeThread("subagent_background_interrupt", "")
	e.dispatch(domain.Command{ID: "send", ThreadID: threadID, Payload: domain.DispatchMessage{Text: "Ask a background helper to say hi"}})
	th := e.waitFor(threadID, "the subagent's text", func(th domain.Thread) bool {
		return slices.ContainsFunc(th.Messages, func(m domain.Message) bool { return m.Text.String() == "Child says hi." })
	})
	e.dispatch(domain.Command{ID: "stop", ThreadID: threadID, Payload: domain.InterruptRun{RunID: th.Runs[0].ID}})
	th = e.waitFor(threadID, "the run to end", allRunsEnded(1))
	r := th.Runs[0]
	if r.Status != domain.RunStatusInterrupted || !r.InterruptRequested {
		t.Fatalf("run %s (requested %v), want interrupted", r.Status, r.InterruptRequested)
	}
	for _, n := range r.Nodes {
		if n.Kind == domain.NodeSubagent && !domain.RunStatus(n.Status).Terminal() {
			t.Errorf("subagent node %s is still %s", n.ID, n.Status)
		}
	}
	if n := strings.Count(strings.Join(e.types(threadID, 0), " "), "run.ended"); n != 1 {
		t.Fatalf("run.ended %d times", n)
	}
	e.checkSessionsClosed(threadID)
}

// A command started in the background is the run's command item, not a
// subagent: the run completes with the CLI's result, without waiting for
// the command (recorded: it runs on until the session closes).
func TestClaudeBackgroundCommand(t *testing.T) {
	e := newEnv(t)
	threadID := e.claudeThread("command_background", domain.ApproveAccept)
	th := e.play(threadID, "claude/command_background.steps.json")
	if len(th.Runs) != 1 || th.Runs[0].Status != domain.RunStatusCompleted {
		t.Fatalf("runs %+v", th.Runs)
	}
	for _, n := range th.Runs[0].Nodes {
		if n.Kind == domain.NodeSubagent {
			t.Errorf("subagent node %+v for a background command", n)
		}
	}
	if len(th.ProviderThreads) != 1 || len(th.Diagnostics) != 0 {
		t.Errorf("provider threads %+v, diagnostics %+v; want the CLI's session only", th.ProviderThreads, th.Diagnostics)
	}
	e.checkSessionsClosed(threadID)
}

// A subagent that writes a file: its turn's end is a checkpoint nested
// under the run's, which does not count as a run; the run's own checkpoint
// has both files.
func TestClaudeSubagentCheckpoint(t *testing.T) {
	e := newEnv(t)
	e.gitWorkspace()
	threadID := e.claudeThread("subagent_checkpoint", domain.ApproveAccept)
	th := e.play(threadID, "claude/subagent_checkpoint.steps.json")
	if len(th.Runs) != 1 || th.Runs[0].Status != domain.RunStatusCompleted {
		t.Fatalf("runs: %+v", th.Runs)
	}
	_, subCP, runCP := e.subagentCheckpoints(th)
	if got := fileList(subCP); !slices.Equal(got, []string{"added notes.txt"}) {
		t.Errorf("subagent checkpoint %+v: files %q", subCP, got)
	}
	if got := fileList(runCP); !slices.Equal(got, []string{"added notes.txt", "added summary.txt"}) {
		t.Errorf("run checkpoint files: %q", got)
	}
	if got := e.files()["notes.txt"]; got != "from the helper\n" {
		t.Errorf("notes.txt = %q", got)
	}
	if _, err := e.host.Dispatch(t.Context(), domain.Command{ID: "rb", ThreadID: threadID,
		Payload: domain.RollbackToCheckpoint{CheckpointID: subCP.ID}}); !errors.Is(err, domain.ErrUnsupported) {
		t.Errorf("rollback to a subagent checkpoint: %v", err)
	}
	e.checkSessionsClosed(threadID)
}

// A thread continued by a new host resumes the CLI's session (--resume,
// checked by the peer): the second run is on the same provider thread,
// in a second session.
func TestClaudeResumeAfterRestart(t *testing.T) {
	e := newEnv(t)
	threadID := e.claudeThread("resume", "")
	groups := plugintest.ReadGroups(t, filepath.Join(root, "testdata", "claude/resume.messages"))
	if len(groups) != 2 {
		t.Fatalf("the scenario has %d groups, want 2", len(groups))
	}
	th := e.sendAcrossRestart(threadID, groups[0][0], groups[1][0])
	for i, want := range []string{"Noted: the word is banana.", "The word was banana."} {
		r := th.Runs[i]
		if r.Status != domain.RunStatusCompleted || assistantText(th, r.ID) != want {
			t.Errorf("run %d: %s %q", r.Ordinal, r.Status, assistantText(th, r.ID))
		}
		assertOneRootAndTurn(t, th, r)
	}
	if len(th.ProviderSessions) != 2 || len(th.ProviderThreads) != 1 || len(th.Diagnostics) != 0 {
		t.Fatalf("sessions %d, provider threads %d, diagnostics %+v; want 2 sessions on 1 resumed provider thread",
			len(th.ProviderSessions), len(th.ProviderThreads), th.Diagnostics)
	}
	e.checkSessionsClosed(threadID)
}
