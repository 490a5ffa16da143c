package orchestrator_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/baton-run/baton/host/internal/domain"
	"github.com/baton-run/baton/sdk/pluginclient"
	"github.com/baton-run/baton/sdk/plugintest"
)

// The Cursor agent CLI in print mode: one provider process per turn (the
// replay peer, continuing one authored transcript through its state file
// and checking each process's arguments), the chat continued with
// --resume. No native steering, rollback or approvals: the host restarts
// attempts, starts a fresh chat with a handoff, and asks nothing.

// cursorThread creates a cursor thread on a transcript.
func (e *env) cursorThread(scenario string, policy domain.ApprovalPolicy) string {
	e.t.Helper()
	id, _, _ := e.newThread("cursor", "cursor/"+scenario+".ndjson", policy)
	return id
}

// invocations counts the processes started in a thread's sessions whose
// arguments hold text (read once the host has closed the sessions).
func (e *env) invocations(th domain.Thread, text string) int {
	e.t.Helper()
	n := 0
	for _, s := range th.ProviderSessions {
		for _, l := range strings.Split(e.rawFrames(s.ID), "\n") {
			if strings.Contains(l, `"dir":"out","frame":{"argv":`) && strings.Contains(l, text) {
				n++
			}
		}
	}
	return n
}

// Simple and checkpoint: one message, one run, one root node, one provider
// turn on the chat system/init named; the text streamed once (the repeats
// dropped); the file the agent wrote is in the run's checkpoint.
func TestCursorSimple(t *testing.T) {
	e := newEnv(t)
	e.gitWorkspace()
	threadID := e.cursorThread("simple", "")
	msgs := messages(t, "cursor/simple.messages")
	e.dispatch(domain.Command{ID: "send", ThreadID: threadID, Payload: domain.DispatchMessage{Text: msgs[0]}})
	th := e.waitFor(threadID, "the run to end", allRunsEnded(1))
	r := th.Runs[0]
	if r.Status != domain.RunStatusCompleted || r.Ordinal != 1 {
		t.Fatalf("run = %s %+v", r.Status, r.Failure)
	}
	e.checkTurnRuns(th, []int{0}, [][]string{{"added hello.txt"}})
	if got := assistantText(th, r.ID); got != "I'll create hello.txt. Done: hello.txt says hello." {
		t.Errorf("assistant text = %q", got)
	}
	if len(th.ProviderThreads) != 1 || th.ProviderThreads[0].ProviderRef != "3f1e8a52-6c1d-4b7e-9a0f-2d5c8e1b4a77" {
		t.Errorf("provider threads: %+v", th.ProviderThreads)
	}
	var kinds []string
	for _, it := range th.TurnItems {
		kinds = append(kinds, string(it.Kind)+" "+string(it.Status))
	}
	for _, want := range []string{"reasoning completed", "file_change completed"} {
		if !slices.Contains(kinds, want) {
			t.Errorf("turn items %q lack %q", kinds, want)
		}
	}
	if r.Usage == nil || r.Usage.InputTokens != 1840 || r.Usage.OutputTokens != 96 {
		t.Errorf("usage: %+v", r.Usage)
	}
	if d, _, err := e.host.Diff(t.Context(), threadID, 1, 0); err != nil || !strings.Contains(d.Text, "+hello") {
		t.Errorf("diff of run 1: %+v %v", d, err)
	}
	assertSequencesIncrease(t, e, threadID)
	th = e.checkSessionsClosed(threadID)
	if n := e.invocations(th, `"--resume"`); n != 0 {
		t.Errorf("%d processes resumed a chat; the first turn starts one", n)
	}
}

// Multi-turn: each message is a run of its own, on the same chat; the
// second turn's process resumes it.
func TestCursorMultiTurn(t *testing.T) {
	e := newEnv(t)
	e.gitWorkspace()
	threadID := e.cursorThread("multi_turn", "")
	msgs := messages(t, "cursor/multi_turn.messages")
	for i, m := range msgs {
		e.dispatch(domain.Command{ID: "send-" + string(rune('a'+i)), ThreadID: threadID,
			Payload: domain.DispatchMessage{Text: m, Mode: domain.ModeQueueAfterActive}})
	}
	th := e.waitFor(threadID, "every run to end", allRunsEnded(2))
	for i, want := range []string{"Noted: pineapple.", "The word was pineapple."} {
		r := th.Runs[i]
		if r.Ordinal != i+1 || r.Status != domain.RunStatusCompleted || assistantText(th, r.ID) != want {
			t.Errorf("run %d: %s %q", r.Ordinal, r.Status, assistantText(th, r.ID))
		}
	}
	e.checkTurnRuns(th, []int{0, 0}, [][]string{nil, nil})
	if len(th.ProviderThreads) != 1 || len(th.ProviderSessions) != 1 {
		t.Fatalf("provider threads %+v, sessions %d; want one chat in one session", th.ProviderThreads, len(th.ProviderSessions))
	}
	th = e.checkSessionsClosed(threadID)
	if n := e.invocations(th, `"--resume","8d2c4b6a-0e1f-4a3b-8c5d-7e9f1a2b3c4d"`); n != 1 {
		t.Errorf("%d processes resumed the chat, want 1", n)
	}
}

// Resume: a thread continued by a new host resumes the chat in a new
// session; no second provider thread.
func TestCursorResumeAfterRestart(t *testing.T) {
	e := newEnv(t)
	threadID := e.cursorThread("resume", "")
	groups := plugintest.ReadGroups(t, filepath.Join(root, "testdata", "cursor/resume.messages"))
	th := e.sendAcrossRestart(threadID, groups[0][0], groups[1][0])
	if r := th.Runs[1]; r.Status != domain.RunStatusCompleted || assistantText(th, r.ID) != "The word was pineapple." {
		t.Fatalf("run 2: %s %q", r.Status, assistantText(th, r.ID))
	}
	if len(th.ProviderSessions) != 2 || len(th.ProviderThreads) != 1 {
		t.Fatalf("sessions %d, provider threads %d; want 2 sessions on 1 chat", len(th.ProviderSessions), len(th.ProviderThreads))
	}
	for _, d := range th.Diagnostics {
		if strings.Contains(d.Title, "could not resume") {
			t.Errorf("diagnostic: %+v", d)
		}
	}
	e.checkSessionsClosed(threadID)
}

// Steering by restart: the message sent into the running turn interrupts
// its process (the host restarts the attempt); the replacement's process
// resumes the chat with the steering message. One run, two attempts.
func TestCursorSteeringRestartFallback(t *testing.T) {
	e := newEnv(t)
	threadID := e.cursorThread("steering_restart_fallback", "")
	th := e.play(threadID, "cursor/steering_restart_fallback.steps.json")
	r := e.checkSteeringRestart(th)
	e.checkUserMessages(th, r, 2)
	if th.ProviderTurns[0].ProviderThreadID != th.ProviderTurns[1].ProviderThreadID || len(th.ProviderThreads) != 1 {
		t.Fatalf("provider turns %+v, threads %+v; want both turns on the one chat", th.ProviderTurns, th.ProviderThreads)
	}
	if got := assistantText(th, r.ID); !strings.HasSuffix(got, "Hi! Keeping it short.") {
		t.Errorf("assistant text = %q", got)
	}
	th = e.checkSessionsClosed(threadID)
	if n := e.invocations(th, `"--resume","c7a9e1f3-5b2d-4e8c-a6f0-1d3b5c7e9a2f","--","Actually, just say hi."`); n != 1 {
		t.Errorf("the replacement process resumed the chat with the steering message %d times, want 1", n)
	}
}

// Interrupt: acknowledged at once; the run ends interrupted only when the
// turn's process is gone. The CLI here (interrupt_ignored) outlives the
// SIGTERM that is the interrupt, until the plugin kills it after its
// grace (providerproc.GracePeriod), saying nothing meanwhile: a run ended
// at the acknowledgement, by the host or by the plugin, would end while
// the process still ran, and before the turn's end, with its process's
// life between the two. The host's own grace (on its clock, which stands
// still here) never comes into it.
func TestCursorTurnInterrupt(t *testing.T) {
	e := newEnv(t)
	threadID := e.cursorThread("interrupt_ignored", "")
	e.dispatch(domain.Command{ID: "send", ThreadID: threadID, Payload: domain.DispatchMessage{Text: "Count to a million, slowly"}})
	th := e.waitFor(threadID, "the command to run", func(th domain.Thread) bool {
		return slices.ContainsFunc(th.TurnItems, func(it domain.TurnItem) bool {
			return it.Kind == "command_execution" && it.Status == domain.StatusInProgress
		})
	})
	process := plugintest.Pidfd(t, providerChild(t, th.ProviderSessions[0].PluginPid))
	e.dispatch(domain.Command{ID: "stop", ThreadID: threadID, Payload: domain.InterruptRun{RunID: th.Runs[0].ID}})
	th = e.waitFor(threadID, "the run to end", allRunsEnded(1))
	r := th.Runs[0]
	if !plugintest.Exited(t, process, 0) {
		t.Fatalf("the run ended %s while its provider process still ran: it ended at the interrupt's acknowledgement, "+
			"not when the process was gone", r.Status)
	}
	if r.Stop.Forced != "" {
		t.Errorf("the run was stopped by the host's force (%q), not by the plugin ending the process", r.Stop.Forced)
	}
	e.checkInterrupted(threadID, r, nothingAfterAck)
	var cmd *domain.TurnItem
	for i, it := range th.TurnItems {
		if it.Kind == "command_execution" {
			cmd = &th.TurnItems[i]
		}
	}
	if cmd == nil || cmd.Status == domain.StatusCompleted || cmd.Status == domain.StatusInProgress {
		t.Errorf("the running command: %+v", cmd)
	}
	e.checkSessionsClosed(threadID)
}

// providerChild is the one process a plugin runs (a turn's provider), read
// from /proc: its child.
func providerChild(t *testing.T, plugin int) int {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var kids []int
	for _, ent := range ents {
		pid, err := strconv.Atoi(ent.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", ent.Name(), "stat"))
		if err != nil {
			continue // gone
		}
		// pid (comm) state ppid ...: comm may hold spaces, not ')'.
		if f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:])); len(f) > 1 && f[1] == strconv.Itoa(plugin) {
			kids = append(kids, pid)
		}
	}
	if len(kids) != 1 {
		t.Fatalf("plugin %d runs processes %v; want its turn's provider, one", plugin, kids)
	}
	return kids[0]
}

// Subagent: the task tool call is a subagent node under the run's root;
// the run ends once, on the root turn's result.
func TestCursorSubagent(t *testing.T) {
	e := newEnv(t)
	threadID := e.cursorThread("subagent", "")
	th := e.play(threadID, "cursor/subagent.steps.json")
	r := th.Runs[0]
	if len(th.Runs) != 1 || r.Status != domain.RunStatusCompleted {
		t.Fatalf("runs: %+v", th.Runs)
	}
	root := r.Attempts[0].RootNode
	var subs []domain.Node
	for _, n := range r.Nodes {
		if n.Kind == domain.NodeSubagent {
			subs = append(subs, n)
		}
	}
	if len(subs) != 1 || subs[0].ParentID != root || subs[0].Status != domain.StatusCompleted || subs[0].Title != "Say hi" {
		t.Fatalf("subagent nodes: %+v", subs)
	}
	e.checkEndedAfterRoot(th, r, subs[0])
	if got := assistantText(th, r.ID); got != "Asking a helper. The helper said: Hi there!" {
		t.Errorf("assistant text = %q", got)
	}
}

// Rollback without native rollback: files back to run 1, the chat left
// for a fresh one (the fourth process resumes nothing: the peer checks its
// arguments) whose first turn carries the host's handoff.
func TestCursorThreadRollback(t *testing.T) {
	e := newEnv(t)
	e.gitWorkspace()
	threadID := e.cursorThread("thread_rollback", domain.ApproveAccept)
	th := e.play(threadID, "cursor/thread_rollback.steps.json")
	e.checkRolledBackToRun1(th, domain.ReconcileFreshThread)
	const old, fresh = "d4e6f8a0-b2c4-4d6e-8f0a-2c4e6a8c0e2a", "f6a8c0e2-d4f6-4a8c-9e0b-4d6f8b0d2f4b"
	if len(th.ProviderThreads) != 2 || th.ProviderThreads[0].ProviderRef != old || !th.ProviderThreads[0].Detached ||
		th.ProviderThreads[1].ProviderRef != fresh || th.ProviderThreads[1].Detached {
		t.Fatalf("provider threads: %+v", th.ProviderThreads)
	}
	var run4 *domain.ProviderTurn
	for i, pt := range th.ProviderTurns {
		if pt.RunID == th.Runs[3].ID {
			run4 = &th.ProviderTurns[i]
		}
	}
	if run4 == nil || run4.ProviderThreadID != th.ProviderThreads[1].ID {
		t.Errorf("run 4's turn: %+v", run4)
	}
	th = e.checkSessionsClosed(threadID)
	// The old chat was resumed by runs 2 and 3 only; after the rollback no
	// process names it.
	if n := e.invocations(th, `"--resume","`+old+`"`); n != 2 {
		t.Errorf("%d processes resumed the old chat, want 2 (runs 2 and 3)", n)
	}
	if n := e.invocations(th, `"--","[Baton context handoff, format 1: full_thread_summary for cursor]\nThe files of this project were rolled back`); n != 1 {
		t.Errorf("%d processes got the handoff, want 1", n)
	}
}

// A process that exits non-zero without a result fails its run with the
// CLI's stderr; the next message resumes the same chat.
func TestCursorFailureWithoutResult(t *testing.T) {
	e := newEnv(t)
	threadID := e.cursorThread("failure", "")
	th := e.play(threadID, "cursor/failure.steps.json")
	if len(th.Runs) != 2 {
		t.Fatalf("runs = %d, want 2", len(th.Runs))
	}
	r1, r2 := th.Runs[0], th.Runs[1]
	if r1.Status != domain.RunStatusFailed || r1.Failure == nil || !strings.Contains(r1.Failure.Message, "usage limit") {
		t.Fatalf("run 1: %s %+v", r1.Status, r1.Failure)
	}
	if r2.Status != domain.RunStatusCompleted || assistantText(th, r2.ID) != "Hello!" {
		t.Fatalf("run 2: %s %q", r2.Status, assistantText(th, r2.ID))
	}
	if len(th.ProviderThreads) != 1 || len(th.ProviderSessions) != 1 {
		t.Errorf("provider threads %d, sessions %d; want the one chat in the one session", len(th.ProviderThreads), len(th.ProviderSessions))
	}
	e.checkSessionsClosed(threadID)
}

// Approvals: print mode has none. The capability is off; with the thread
// asking a client about everything, nothing is asked: the CLI itself
// refused the command (the item is declined) and the run completes.
func TestCursorNoApprovals(t *testing.T) {
	p, err := pluginclient.Launch(pluginclient.LaunchConfig{Path: filepath.Join(pluginDir, "baton-plugin-cursor"),
		Logger: hclog.New(&hclog.LoggerOptions{Name: "plugin", Level: hclog.Warn, Output: testWriter{t}})})
	if err != nil {
		t.Fatal(err)
	}
	d, err := p.Describe(context.Background())
	p.Kill()
	if err != nil {
		t.Fatal(err)
	}
	if c := d.Capabilities; c.Approvals || c.NativeSteering || c.NativeRollback || !c.Interrupt || !c.Resume {
		t.Fatalf("capabilities: %+v", c)
	}
	e := newEnv(t)
	threadID := e.cursorThread("approvals_none", domain.ApproveAsk)
	th := e.play(threadID, "cursor/approvals_none.steps.json")
	if r := th.Runs[0]; r.Status != domain.RunStatusCompleted {
		t.Fatalf("run: %s %+v", r.Status, r.Failure)
	}
	if len(th.Requests) != 0 {
		t.Fatalf("requests: %+v", th.Requests)
	}
	var cmds []domain.TurnItem
	for _, it := range th.TurnItems {
		if it.Kind == "command_execution" {
			cmds = append(cmds, it)
		}
	}
	if len(cmds) != 1 || cmds[0].Status != "declined" || cmds[0].Title != "make test" {
		t.Errorf("command items: %+v", cmds)
	}
	if _, err := os.Stat(filepath.Join(e.ws, "hello.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("unexpected file: %v", err)
	}
}
