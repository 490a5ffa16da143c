package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"

	"github.com/baton-run/baton/sdk"
	"github.com/baton-run/baton/sdk/plugintest"
)

func TestMain(m *testing.M) { plugintest.Main(m) }

const testdata = "../../testdata/claude"

// Level-3 tests: each replays one Claude Code transcript (recorded from
// @anthropic-ai/claude-code 2.1.332 against the scripted model server,
// except api_error and usage_by_model, authored from recorded frames;
// mcp_usage with its MCP servers added by baton mcp add) through the real plugin
// binary, started through go-plugin, with the replay peer as the CLI, and
// asserts the normalized events. The peer checks the arguments the plugin
// appends, every frame it writes, and fails the session's close when one
// differs or is missing.

func TestDescribe(t *testing.T) {
	p := plugintest.Start(t, plugintest.Build(t, "."))
	c := p.Description.Capabilities
	if p.Description.Name != "claude" || !c.NativeSteering || !c.Interrupt || !c.Approvals || !c.Subagents || !c.Resume ||
		!c.NativeRollback || c.ThreadSnapshot {
		t.Fatalf("description = %+v; want claude with steering, interrupt, approvals, subagents, resume and rollback", p.Description)
	}
	for _, k := range []string{sdk.NoteSteering, sdk.NoteInterrupt, sdk.NoteApprovals, sdk.NoteSubagents, sdk.NoteRollback, sdk.NoteResume} {
		if p.Description.Notes[k] == "" {
			t.Errorf("no note on %s", k)
		}
	}
}

func TestSimple(t *testing.T) {
	s := open(t, "simple", nil)
	if s.Open.ProviderThreadRef != "" {
		t.Errorf("a fresh conversation has no id before its first message; got %q", s.Open.ProviderThreadRef)
	}
	turn := s.StartTurn(t, "Say hello").TurnRef
	evs := s.WaitTurnRef(t, turn)
	first := evs[0]
	if first.Kind != sdk.EventThreadStarted || first.ThreadRef == "" || first.ParentThreadRef != "" {
		t.Fatalf("first event %+v; want the root's thread_started, named by the CLI's session id", first)
	}
	root := first.ThreadRef
	started := plugintest.Find(t, evs, func(ev sdk.RuntimeEvent) bool { return ev.Kind == sdk.EventTurnStarted })
	if started.TurnRef != turn || started.ThreadRef != root || started.ClientTurnID != "client-turn-1" {
		t.Errorf("turn_started %+v; want turn %s on %s for client-turn-1", started, turn, root)
	}
	term := evs[len(evs)-1]
	if term.Status != sdk.TurnCompleted || !term.ThreadUsable || term.ThreadRef != root || term.TurnRef != turn {
		t.Fatalf("turn ended %+v; want completed and usable", term)
	}
	if got := plugintest.ItemText(evs, root, sdk.ItemAssistantMessage); got != "Hello! How can I help you today?" {
		t.Errorf("assistant text = %q", got)
	}
	if got := plugintest.ItemText(evs, root, sdk.ItemReasoning); got != "The user wants a greeting." {
		t.Errorf("reasoning text = %q", got)
	}
	u := plugintest.Find(t, evs, func(ev sdk.RuntimeEvent) bool { return ev.Kind == sdk.EventUsage })
	if u.Usage == nil || u.Usage.InputTokens == 0 || u.Usage.OutputTokens == 0 || u.Usage.TotalTokens != u.Usage.InputTokens+u.Usage.OutputTokens {
		t.Errorf("usage = %+v", u.Usage)
	}
	if n := plugintest.Count(evs, func(ev sdk.RuntimeEvent) bool {
		return ev.Kind == sdk.EventDiagnostic || ev.ItemKind == sdk.ItemUserMessage
	}); n != 0 {
		t.Errorf("%d diagnostics or user-message events (the user's own message echoed): %s", n, plugintest.Kinds(evs))
	}
	plugintest.CheckItemsClosed(t, evs)
	// Every event names the CLI frame it came from, but the turn_started
	// the plugin emits as it writes the user message: the host's own.
	plugintest.CheckRawFrames(t, evs, sdk.EventTurnStarted)
	s.Close(t)
	all := s.All()
	if last := all[len(all)-1]; last.Status != sdk.ExitClosed || last.ThreadRef != root {
		t.Errorf("runtime exit %+v; want closed on %s", last, root)
	}
}

// Two turns one after the other in one CLI process.
func TestQueuedTurns(t *testing.T) {
	s := open(t, "multi_turn", nil)
	want := []string{"First reply, after a while.", "Second reply."}
	var root string
	for i, input := range []string{"Answer slowly", "Then answer again"} {
		turn := s.StartTurn(t, input).TurnRef
		evs := s.WaitTurnRef(t, turn)
		if root == "" {
			root = evs[0].ThreadRef
		}
		if term := evs[len(evs)-1]; term.Status != sdk.TurnCompleted {
			t.Fatalf("turn %d ended %+v", i+1, term)
		}
		if got := plugintest.ItemText(evs, root, sdk.ItemAssistantMessage); got != want[i] {
			t.Errorf("turn %d text = %q, want %q", i+1, got, want[i])
		}
		if i == 1 && plugintest.Count(evs, func(ev sdk.RuntimeEvent) bool { return ev.Kind == sdk.EventThreadStarted }) != 0 {
			t.Errorf("the second turn announced the thread again: %s", plugintest.Kinds(evs))
		}
	}
	s.Close(t)
}

// steer runs a turn with a steer written once it started, and returns its
// events.
func steer(t *testing.T, scenario, input string) (root string, evs []sdk.RuntimeEvent) {
	t.Helper()
	s := open(t, scenario, nil)
	turn := s.StartTurn(t, input).TurnRef
	evs = s.Until(t, "turn_started", func(ev sdk.RuntimeEvent) bool { return ev.Kind == sdk.EventTurnStarted })
	root = evs[0].ThreadRef
	if err := s.Steer(turn, "Make it short"); err != nil {
		t.Fatalf("steer: %v", err)
	}
	evs = append(evs, s.WaitTurnRef(t, turn)...)
	if term := evs[len(evs)-1]; term.Status != sdk.TurnCompleted || term.TurnRef != turn {
		t.Fatalf("turn ended %+v", term)
	}
	// The turn is over: a steer now is refused.
	if err := s.Steer(turn, "too late"); !errors.Is(err, sdk.ErrBusy) {
		t.Errorf("steer after the turn: %v; want busy", err)
	}
	// Over the whole session: one terminal, and nothing the CLI did
	// after it (a turn ended too early leaves the rest outside any turn).
	s.Close(t)
	all := s.All()
	if n := plugintest.Count(all, func(ev sdk.RuntimeEvent) bool { return ev.Kind == sdk.EventTurnTerminal }); n != 1 {
		t.Errorf("%d turn terminals; want the one of the host's turn: %s", n, plugintest.Kinds(all))
	}
	if n := plugintest.Count(all, func(ev sdk.RuntimeEvent) bool { return ev.Kind == sdk.EventDiagnostic }); n != 0 {
		t.Errorf("%d diagnostics: %s", n, plugintest.Kinds(all))
	}
	return root, evs
}

// The steer arrives while the model still answers the first message: the
// CLI runs it as a CLI turn of its own after the first result. Both
// results belong to the host's one turn, which ends with the second.
func TestSteeringAfterTheAnswer(t *testing.T) {
	root, evs := steer(t, "message_steering", "Write a long story")
	if got := plugintest.ItemText(evs, root, sdk.ItemAssistantMessage); got != "A very long story that nobody reads, because the user steered.A short story: the end." {
		t.Errorf("assistant text = %q", got)
	}
	u := plugintest.Find(t, evs, func(ev sdk.RuntimeEvent) bool { return ev.Kind == sdk.EventUsage })
	if u.Usage.OutputTokens < 2 {
		t.Errorf("usage %+v; want both results' tokens", u.Usage)
	}
}

// The steer arrives before a tool call ends: the CLI gives it to the model
// with the tool's result, in the same CLI turn.
func TestSteeringAtAToolBoundary(t *testing.T) {
	root, evs := steer(t, "message_steering_tool", "Look around, then write a long story")
	cmd := plugintest.Find(t, evs, func(ev sdk.RuntimeEvent) bool {
		return ev.Kind == sdk.EventItemCompleted && ev.ItemKind == sdk.ItemCommandExecution
	})
	if cmd.Title != "ls" || cmd.Status != sdk.ItemDone {
		t.Errorf("command item %+v; want ls, completed", cmd)
	}
	if got := plugintest.ItemText(evs, root, sdk.ItemAssistantMessage); got != "A short story: the end." {
		t.Errorf("assistant text = %q", got)
	}
}

func TestInterrupt(t *testing.T) {
	s := open(t, "turn_interrupt", nil)
	turn := s.StartTurn(t, "Count to a million, slowly").TurnRef
	s.Until(t, "turn_started", func(ev sdk.RuntimeEvent) bool { return ev.Kind == sdk.EventTurnStarted })
	s.Interrupt(t, "")
	evs := s.WaitTurnRef(t, turn)
	term := evs[len(evs)-1]
	if term.Status != sdk.TurnInterrupted || !term.ThreadUsable || term.Failure != nil {
		t.Fatalf("turn ended %+v; want interrupted, usable", term)
	}
	if !strings.Contains(term.Title, "aborted_streaming") {
		t.Errorf("terminal title %q; want the CLI's terminal reason", term.Title)
	}
	s.Close(t)
}

// A steer still queued when the host interrupts (recorded): the interrupt
// cancels it (cancel_queued, checked by the peer), so the CLI runs nothing
// after the interrupted turn's result, and the turn ends with that result.
func TestInterruptCancelsTheQueuedSteer(t *testing.T) {
	s := open(t, "message_steering_interrupt", nil)
	turn := s.StartTurn(t, "Write a long story").TurnRef
	s.Until(t, "turn_started", func(ev sdk.RuntimeEvent) bool { return ev.Kind == sdk.EventTurnStarted })
	if err := s.Steer(turn, "Make it short"); err != nil {
		t.Fatalf("steer: %v", err)
	}
	s.Interrupt(t, turn)
	evs := s.WaitTurnRef(t, turn)
	if term := evs[len(evs)-1]; term.Status != sdk.TurnInterrupted || !term.ThreadUsable {
		t.Fatalf("turn ended %+v; want interrupted", term)
	}
	s.Close(t)
	all := s.All()
	if n := plugintest.Count(all, func(ev sdk.RuntimeEvent) bool {
		return ev.Kind == sdk.EventTurnTerminal || ev.Kind == sdk.EventDiagnostic
	}); n != 1 {
		t.Errorf("%d terminals and diagnostics; want the turn's terminal only: %s", n, plugintest.Kinds(all))
	}
}

func TestApprovalAccept(t *testing.T) {
	var req sdk.RuntimeEvent
	s := open(t, "approval_accept", func(ev sdk.RuntimeEvent) (sdk.Decision, map[string]string) {
		req = ev
		return sdk.DecisionAccept, nil
	})
	turn := s.StartTurn(t, "Write allowed.txt").TurnRef
	evs := s.WaitTurnRef(t, turn)
	root := evs[0].ThreadRef
	if req.RequestKind != "file_change_approval" || req.Title != "allowed.txt" || req.ThreadRef != root || req.TurnRef != turn ||
		req.ItemRef == "" || len(req.Options) != 3 {
		t.Fatalf("request %+v; want a file change approval for allowed.txt on the turn's item", req)
	}
	res := plugintest.Find(t, evs, func(ev sdk.RuntimeEvent) bool { return ev.Kind == sdk.EventRequestResolved })
	if res.RequestRef != req.RequestRef || res.Status != sdk.DecisionAccept {
		t.Errorf("resolution %+v", res)
	}
	item := plugintest.Find(t, evs, func(ev sdk.RuntimeEvent) bool {
		return ev.Kind == sdk.EventItemCompleted && ev.ItemKind == sdk.ItemFileChange
	})
	if item.ItemRef != req.ItemRef || item.Status != sdk.ItemDone || item.Title != "allowed.txt" {
		t.Errorf("file change item %+v", item)
	}
	if i, j := plugintest.Index(evs, func(ev sdk.RuntimeEvent) bool { return ev.Kind == sdk.EventRequestResolved }),
		plugintest.Index(evs, func(ev sdk.RuntimeEvent) bool {
			return ev.Kind == sdk.EventItemCompleted && ev.ItemKind == sdk.ItemFileChange
		}); i > j {
		t.Errorf("the item completed before its request was resolved: %s", plugintest.Kinds(evs))
	}
	if got := plugintest.ItemText(evs, root, sdk.ItemAssistantMessage); got != "I wrote allowed.txt." {
		t.Errorf("assistant text = %q", got)
	}
	if term := evs[len(evs)-1]; term.Status != sdk.TurnCompleted {
		t.Errorf("turn ended %+v", term)
	}
	s.Close(t) // the peer checked the allow answer (updatedInput is the tool's input)
}

func TestApprovalDecline(t *testing.T) {
	s := open(t, "approval_decline", nil) // requests declined
	turn := s.StartTurn(t, "Create declined.txt").TurnRef
	evs := s.WaitTurnRef(t, turn)
	req := plugintest.Find(t, evs, func(ev sdk.RuntimeEvent) bool { return ev.Kind == sdk.EventRequestOpened })
	if req.RequestKind != "command_approval" || req.Title != "touch declined.txt" {
		t.Errorf("request %+v; want a command approval", req)
	}
	item := plugintest.Find(t, evs, func(ev sdk.RuntimeEvent) bool {
		return ev.Kind == sdk.EventItemCompleted && ev.ItemKind == sdk.ItemCommandExecution
	})
	if item.Status != sdk.ItemDeclined {
		t.Errorf("command item %+v; want declined", item)
	}
	if term := evs[len(evs)-1]; term.Status != sdk.TurnCompleted {
		t.Errorf("turn ended %+v", term)
	}
	s.Close(t)
}

// Accepted for the session: the CLI's suggested rule is sent back for the
// session only (checked by the peer), and the same command the second time
// is not asked about.
func TestApprovalAcceptForSession(t *testing.T) {
	var reqs []sdk.RuntimeEvent
	s := open(t, "approval_accept_for_session", func(ev sdk.RuntimeEvent) (sdk.Decision, map[string]string) {
		reqs = append(reqs, ev)
		return sdk.DecisionAcceptForSession, nil
	})
	turn := s.StartTurn(t, "Create made.txt twice").TurnRef
	evs := s.WaitTurnRef(t, turn)
	if len(reqs) != 1 || reqs[0].Title != "touch made.txt" {
		t.Fatalf("requests %+v; want one for the first touch", reqs)
	}
	cmds := plugintest.Filter(evs, func(ev sdk.RuntimeEvent) bool {
		return ev.Kind == sdk.EventItemCompleted && ev.ItemKind == sdk.ItemCommandExecution && ev.Status == sdk.ItemDone
	})
	if len(cmds) != 2 {
		t.Errorf("completed commands %d, want 2: %s", len(cmds), plugintest.Kinds(evs))
	}
	s.Close(t)
}

// An interrupt while the CLI waits on a permission: the CLI withdraws the
// request (control_cancel_request) and the plugin never answers it.
func TestRequestWithdrawn(t *testing.T) {
	s := open(t, "request_withdrawn", func(sdk.RuntimeEvent) (sdk.Decision, map[string]string) { return "", nil })
	turn := s.StartTurn(t, "Create x.txt").TurnRef
	evs := s.Until(t, "the request", func(ev sdk.RuntimeEvent) bool { return ev.Kind == sdk.EventRequestOpened })
	req := evs[len(evs)-1]
	s.Interrupt(t, turn)
	evs = s.WaitTurnRef(t, turn)
	res := plugintest.Find(t, evs, func(ev sdk.RuntimeEvent) bool { return ev.Kind == sdk.EventRequestResolved })
	if res.RequestRef != req.RequestRef || res.Status != sdk.DecisionCancel || !strings.Contains(res.Text, "withdrew") {
		t.Errorf("resolution %+v; want the request cancelled by the CLI", res)
	}
	if term := evs[len(evs)-1]; term.Status != sdk.TurnInterrupted {
		t.Errorf("turn ended %+v", term)
	}
	err := s.Plugin().RespondToRequest(context.Background(), sdk.RespondToRequestRequest{SessionID: s.ID, RequestRef: req.RequestRef,
		Decision: sdk.DecisionAccept})
	if !errors.Is(err, sdk.ErrUnknownRequest) {
		t.Errorf("answering a withdrawn request: %v; want unknown request", err)
	}
	s.Close(t) // the peer fails if an answer was written
}

func TestSubagent(t *testing.T) {
	s := open(t, "subagent", nil)
	turn := s.StartTurn(t, "Ask a helper agent to say hi").TurnRef
	evs := s.WaitTurnRef(t, turn)
	root := evs[0].ThreadRef
	task := plugintest.Find(t, evs, func(ev sdk.RuntimeEvent) bool {
		return ev.Kind == sdk.EventItemStarted && ev.ItemKind == sdk.ItemSubagent
	})
	child := plugintest.Find(t, evs, func(ev sdk.RuntimeEvent) bool { return ev.Kind == sdk.EventThreadStarted && ev.ThreadRef != root })
	if child.ParentThreadRef != root || child.ThreadRef != task.ItemRef || task.Title != "Task: Say hi" {
		t.Fatalf("child thread %+v of task %+v; want a child of %s named by the Task tool use", child, task, root)
	}
	cturn := plugintest.Find(t, evs, func(ev sdk.RuntimeEvent) bool {
		return ev.Kind == sdk.EventTurnStarted && ev.ThreadRef == child.ThreadRef
	})
	if cturn.ClientTurnID != "" || cturn.Title != "child task: say hi" {
		t.Errorf("child turn %+v", cturn)
	}
	if got := plugintest.ItemText(evs, child.ThreadRef, sdk.ItemAssistantMessage); got != "Child says hi." {
		t.Errorf("child text = %q", got)
	}
	if got := plugintest.ItemText(evs, root, sdk.ItemAssistantMessage); got != "Spawning a helper.The helper said hi. Done." {
		t.Errorf("root text = %q", got)
	}
	cend := plugintest.Index(evs, func(ev sdk.RuntimeEvent) bool {
		return ev.Kind == sdk.EventTurnTerminal && ev.ThreadRef == child.ThreadRef
	})
	if cend < 0 || evs[cend].Status != sdk.TurnCompleted || cend == len(evs)-1 {
		t.Errorf("child turn end at %d of %d: %s", cend, len(evs), plugintest.Kinds(evs))
	}
	if term := evs[len(evs)-1]; term.ThreadRef != root || term.Status != sdk.TurnCompleted {
		t.Errorf("turn ended %+v", term)
	}
	plugintest.CheckItemsClosed(t, evs)
	s.Close(t)
}

// A background subagent outlives the CLI turn that started it: the host's
// turn goes on through the CLI turn its task notification starts, and
// ends with that turn's result, after the subagent's.
func TestBackgroundSubagent(t *testing.T) {
	s := open(t, "subagent_background", nil)
	turn := s.StartTurn(t, "Ask a background helper to say hi").TurnRef
	evs := s.WaitTurnRef(t, turn)
	root := evs[0].ThreadRef
	child := plugintest.Find(t, evs, func(ev sdk.RuntimeEvent) bool { return ev.Kind == sdk.EventThreadStarted && ev.ThreadRef != root })
	cend := plugintest.Index(evs, func(ev sdk.RuntimeEvent) bool {
		return ev.Kind == sdk.EventTurnTerminal && ev.ThreadRef == child.ThreadRef
	})
	if cend < 0 || evs[cend].Status != sdk.TurnCompleted || cend == len(evs)-1 {
		t.Fatalf("the subagent's turn did not end before the root's: %s", plugintest.Kinds(evs))
	}
	if got := plugintest.ItemText(evs, child.ThreadRef, sdk.ItemAssistantMessage); got != "Child says hi." {
		t.Errorf("child text = %q", got)
	}
	if got := plugintest.ItemText(evs, root, sdk.ItemAssistantMessage); got != "The helper is working.The helper said hi. Done." {
		t.Errorf("root text = %q", got)
	}
	if n := plugintest.Count(evs, func(ev sdk.RuntimeEvent) bool { return ev.Kind == sdk.EventDiagnostic }); n != 0 {
		t.Errorf("%d diagnostics: %s", n, plugintest.Kinds(evs))
	}
	if term := evs[len(evs)-1]; term.ThreadRef != root || term.Status != sdk.TurnCompleted {
		t.Errorf("turn ended %+v", term)
	}
	s.Close(t)
	all := s.All()
	if n := plugintest.Count(all, func(ev sdk.RuntimeEvent) bool { return ev.Kind == sdk.EventTurnTerminal && ev.ThreadRef == root }); n != 1 {
		t.Errorf("%d root turn terminals over the session; want 1: %s", n, plugintest.Kinds(all))
	}
	if n := plugintest.Count(all, func(ev sdk.RuntimeEvent) bool { return ev.Kind == sdk.EventDiagnostic }); n != 0 {
		t.Errorf("%d diagnostics over the session: %s", n, plugintest.Kinds(all))
	}
}

// Authored from a probe: the host interrupts while its turn waits on a
// background subagent after the main loop's result. The CLI is idle: it
// stops the task and acknowledges, and sends no result. The turn ends
// interrupted with the acknowledgement, the subagent's turn too, and the
// session takes the next turn.
func TestInterruptWhileWaitingOnABackgroundSubagent(t *testing.T) {
	s := open(t, "subagent_background_interrupt", nil)
	turn := s.StartTurn(t, "Ask a background helper to say hi").TurnRef
	evs := s.Until(t, "the subagent's text", func(ev sdk.RuntimeEvent) bool {
		return ev.Kind == sdk.EventItemCompleted && ev.ItemKind == sdk.ItemAssistantMessage && ev.ThreadRef == "toolu_000000000000000000000001"
	})
	root := evs[0].ThreadRef
	s.Interrupt(t, turn)
	evs = append(evs, s.WaitTurnRef(t, turn)...)
	term := evs[len(evs)-1]
	if term.ThreadRef != root || term.Status != sdk.TurnInterrupted || !term.ThreadUsable || term.Failure != nil {
		t.Fatalf("turn ended %+v; want interrupted, usable", term)
	}
	child := plugintest.Filter(evs, func(ev sdk.RuntimeEvent) bool {
		return ev.Kind == sdk.EventTurnTerminal && ev.ThreadRef == "toolu_000000000000000000000001"
	})
	if len(child) != 1 || child[0].Status != sdk.TurnInterrupted {
		t.Errorf("subagent turn ends %+v; want one, interrupted", child)
	}
	if n := plugintest.Count(evs, func(ev sdk.RuntimeEvent) bool { return ev.Kind == sdk.EventUsage }); n != 1 {
		t.Errorf("%d usage events; want the first result's", n)
	}
	if err := s.Steer(turn, "too late"); !errors.Is(err, sdk.ErrBusy) {
		t.Errorf("steer after the turn: %v; want busy", err)
	}
	s.Close(t)
}

// A command started in the background (Bash run_in_background) is a task
// of the CLI too (task_type local_bash, named by the Bash tool use): it is
// the command item, not a subagent, and the turn ends with the result
// without waiting for it (a server started that way may never end).
func TestBackgroundCommand(t *testing.T) {
	s := open(t, "command_background", nil)
	turn := s.StartTurn(t, "Run a slow command in the background").TurnRef
	evs := s.WaitTurnRef(t, turn)
	root := evs[0].ThreadRef
	if term := evs[len(evs)-1]; term.ThreadRef != root || term.Status != sdk.TurnCompleted {
		t.Fatalf("turn ended %+v", term)
	}
	if n := plugintest.Count(evs, func(ev sdk.RuntimeEvent) bool { return ev.ThreadRef != root && ev.Kind != sdk.EventDiagnostic }); n != 0 {
		t.Errorf("%d events off the root thread (the command made a subagent): %s", n, plugintest.Kinds(evs))
	}
	cmd := plugintest.Find(t, evs, func(ev sdk.RuntimeEvent) bool {
		return ev.Kind == sdk.EventItemCompleted && ev.ItemKind == sdk.ItemCommandExecution
	})
	if cmd.Title != "sleep 30; echo finished" || cmd.Status != sdk.ItemDone {
		t.Errorf("command item %+v", cmd)
	}
	s.Close(t)
	all := s.All()
	if n := plugintest.Count(all, func(ev sdk.RuntimeEvent) bool { return ev.Kind == sdk.EventDiagnostic }); n != 0 {
		t.Errorf("%d diagnostics (the command's end is no subagent's): %s", n, plugintest.Kinds(all))
	}
}

// A subagent's own tool use asks for permission on the subagent's thread.
func TestSubagentApproval(t *testing.T) {
	var reqs []sdk.RuntimeEvent
	s := open(t, "subagent_checkpoint", func(ev sdk.RuntimeEvent) (sdk.Decision, map[string]string) {
		reqs = append(reqs, ev)
		return sdk.DecisionAccept, nil
	})
	turn := s.StartTurn(t, "Ask a helper agent to write notes.txt, then summarize").TurnRef
	evs := s.WaitTurnRef(t, turn)
	root := evs[0].ThreadRef
	child := plugintest.Find(t, evs, func(ev sdk.RuntimeEvent) bool { return ev.Kind == sdk.EventThreadStarted && ev.ThreadRef != root })
	if len(reqs) != 2 || reqs[0].ThreadRef != child.ThreadRef || reqs[0].Title != "notes.txt" ||
		reqs[1].ThreadRef != root || reqs[1].Title != "summary.txt" {
		t.Fatalf("requests %+v; want notes.txt on the child, then summary.txt on the root", reqs)
	}
	notes := plugintest.Find(t, evs, func(ev sdk.RuntimeEvent) bool {
		return ev.Kind == sdk.EventItemCompleted && ev.ItemKind == sdk.ItemFileChange && ev.Title == "notes.txt"
	})
	if notes.ThreadRef != child.ThreadRef || notes.Status != sdk.ItemDone {
		t.Errorf("notes.txt item %+v", notes)
	}
	plugintest.CheckItemsClosed(t, evs)
	s.Close(t)
}

// A second CLI process resumes the conversation (--resume, checked by the
// peer) and keeps its id.
func TestResume(t *testing.T) {
	s := open(t, "resume", nil)
	turn := s.StartTurn(t, "Remember the word banana").TurnRef
	evs := s.WaitTurnRef(t, turn)
	root := evs[0].ThreadRef
	s.Close(t)
	r := openWith(t, s.Plugin(), s.Request(), root, nil)
	if !r.Open.Resumed || r.Open.ProviderThreadRef != root {
		t.Fatalf("resumed session %+v; want %s resumed", r.Open, root)
	}
	turn = r.StartTurn(t, "What was the word?").TurnRef
	evs = r.WaitTurnRef(t, turn)
	if got := plugintest.ItemText(evs, root, sdk.ItemAssistantMessage); got != "The word was banana." {
		t.Errorf("text = %q", got)
	}
	if started := plugintest.Find(t, evs, func(ev sdk.RuntimeEvent) bool { return ev.Kind == sdk.EventTurnStarted }); started.ThreadRef != root {
		t.Errorf("turn_started %+v", started)
	}
	r.Close(t)
	all := r.All()
	if first := all[0]; first.Kind != sdk.EventThreadStarted || first.ThreadRef != root {
		t.Errorf("the resumed session's first event %+v; want its thread", first)
	}
}

// Authored from a probe: a resume the CLI cannot do (it exits with "No
// conversation found") falls back to a fresh conversation, and says so.
func TestResumeUnknown(t *testing.T) {
	p := plugintest.Start(t, plugintest.Build(t, "."))
	ws := t.TempDir()
	req := sdk.OpenSessionRequest{Cwd: ws, Command: plugintest.PeerCommand(filepath.Join(testdata, "resume_unknown.ndjson"), ws,
		filepath.Join(t.TempDir(), "cursor"))}
	const lost = "5e1f0000-0000-4000-8000-0000000000a1"
	s := openWith(t, p, req, lost, nil)
	if s.Open.Resumed || s.Open.ProviderThreadRef != "" {
		t.Fatalf("open %+v; want a fresh conversation, not resumed", s.Open)
	}
	turn := s.StartTurn(t, "Say hello").TurnRef
	evs := s.WaitTurnRef(t, turn)
	diags := plugintest.Filter(evs, func(ev sdk.RuntimeEvent) bool { return ev.Kind == sdk.EventDiagnostic })
	if len(diags) != 2 || !strings.Contains(diags[0].Text, "No conversation found") || !strings.Contains(diags[1].Title, "could not resume") {
		t.Errorf("diagnostics %+v; want the CLI's error and the fallback", diags)
	}
	thread := plugintest.Find(t, evs, func(ev sdk.RuntimeEvent) bool { return ev.Kind == sdk.EventThreadStarted })
	if thread.ThreadRef == lost || thread.ThreadRef == "" {
		t.Errorf("thread %+v; want the fresh session", thread)
	}
	if term := evs[len(evs)-1]; term.Status != sdk.TurnCompleted || term.ThreadRef != thread.ThreadRef {
		t.Errorf("turn ended %+v", term)
	}
	s.Close(t)
}

// Three turns, then the last two dropped: the CLI is resumed cut at the
// last assistant message of the first turn, forked into a new session,
// which the fourth turn continues.
func TestRollback(t *testing.T) {
	p := plugintest.Start(t, plugintest.Build(t, "."))
	ws := t.TempDir()
	frames := filepath.Join(t.TempDir(), "frames.ndjson")
	s := openWith(t, p, sdk.OpenSessionRequest{Cwd: ws, RawFrameLog: frames,
		Command: plugintest.PeerCommand(filepath.Join(testdata, "thread_rollback.ndjson"), ws, filepath.Join(t.TempDir(), "cursor"))},
		"", nil)
	s.Answer = sdk.DecisionAccept
	var turns []string
	var root string
	for _, input := range []string{"Write a.txt saying one", "Add a line to a.txt and write sub/b.txt", "Write c.txt"} {
		turn := s.StartTurn(t, input).TurnRef
		evs := s.WaitTurnRef(t, turn)
		if root == "" {
			root = evs[0].ThreadRef
		}
		if term := evs[len(evs)-1]; term.Status != sdk.TurnCompleted {
			t.Fatalf("turn %q ended %+v", input, term)
		}
		turns = append(turns, turn)
	}
	ctx := context.Background()
	_, err := p.RollbackThread(ctx, sdk.RollbackThreadRequest{SessionID: s.ID, ThreadRef: root, Turns: 2, BeforeTurnRef: turns[2]})
	if !errors.Is(err, sdk.ErrInvalid) {
		t.Errorf("a rollback naming the wrong oldest turn: %v; want invalid", err)
	}
	if _, err := p.RollbackThread(ctx, sdk.RollbackThreadRequest{SessionID: s.ID, ThreadRef: root, Turns: 4}); !errors.Is(err, sdk.ErrInvalid) {
		t.Errorf("a rollback of more turns than the session ran: %v; want invalid", err)
	}
	resp, err := p.RollbackThread(ctx, sdk.RollbackThreadRequest{SessionID: s.ID, ThreadRef: root, Turns: 2, BeforeTurnRef: turns[1]})
	if err != nil {
		t.Fatalf("rollback: %v", err)
	}
	fork := resp.ThreadRef
	if fork == "" || fork == root {
		t.Fatalf("rollback answered thread %q; want the fork of %s", fork, root)
	}
	ev := s.Until(t, "the fork's thread_started", func(ev sdk.RuntimeEvent) bool { return ev.Kind == sdk.EventThreadStarted })
	if got := ev[len(ev)-1]; got.ThreadRef != fork || got.ParentThreadRef != "" {
		t.Errorf("thread_started %+v; want the fork as a root", got)
	}
	turn := s.StartTurn(t, "What does a.txt say now?").TurnRef
	evs := s.WaitTurnRef(t, turn)
	if got := plugintest.ItemText(evs, fork, sdk.ItemAssistantMessage); got != "a.txt says one." {
		t.Errorf("text on the fork = %q", got)
	}
	if term := evs[len(evs)-1]; term.ThreadRef != fork || term.Status != sdk.TurnCompleted {
		t.Errorf("turn ended %+v", term)
	}
	if n := plugintest.Count(s.All(), func(ev sdk.RuntimeEvent) bool { return ev.Kind == sdk.EventRuntimeExited }); n != 0 {
		t.Errorf("the replaced CLI process ended the session")
	}
	s.Close(t)
	all := s.All()
	// One raw-frame log, one numbering, across both CLI processes.
	var last uint64
	for _, ev := range all {
		if ev.RawFrame != 0 && ev.RawFrame < last {
			t.Fatalf("raw frame %d after %d (%s)", ev.RawFrame, last, ev.Kind)
		}
		last = max(last, ev.RawFrame)
	}
	log, err := os.ReadFile(frames)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(log), `"subtype":"initialize"`); n != 2 {
		t.Errorf("the raw-frame log has %d initialize requests; want both processes'", n)
	}
	if _, err := os.Stat(frames + ".1"); err == nil {
		t.Errorf("the raw-frame log was rotated at the restart")
	}
}

// Two rollbacks with no turn between them: the first fork is never written
// (the CLI writes it with its first message), so the second cuts the
// original session again, further back, into a fork of its own, which the
// next turn continues.
func TestRollbackTwice(t *testing.T) {
	s := open(t, "thread_rollback_twice", nil)
	s.Answer = sdk.DecisionAccept
	var turns []string
	var root string
	for _, input := range []string{"Write a.txt saying one", "Add a line to a.txt and write sub/b.txt", "Write c.txt"} {
		turn := s.StartTurn(t, input).TurnRef
		evs := s.WaitTurnRef(t, turn)
		if root == "" {
			root = evs[0].ThreadRef
		}
		turns = append(turns, turn)
	}
	ctx := context.Background()
	first, err := s.Plugin().RollbackThread(ctx, sdk.RollbackThreadRequest{SessionID: s.ID, ThreadRef: root, Turns: 1, BeforeTurnRef: turns[2]})
	if err != nil {
		t.Fatalf("first rollback: %v", err)
	}
	second, err := s.Plugin().RollbackThread(ctx, sdk.RollbackThreadRequest{SessionID: s.ID, ThreadRef: first.ThreadRef, Turns: 1,
		BeforeTurnRef: turns[1]})
	if err != nil {
		t.Fatalf("second rollback: %v", err)
	}
	if second.ThreadRef == "" || second.ThreadRef == first.ThreadRef || second.ThreadRef == root {
		t.Fatalf("rollbacks answered %s, then %s; want two forks of %s", first.ThreadRef, second.ThreadRef, root)
	}
	turn := s.StartTurn(t, "What does a.txt say now?").TurnRef
	evs := s.WaitTurnRef(t, turn)
	if got := plugintest.ItemText(evs, second.ThreadRef, sdk.ItemAssistantMessage); got != "a.txt says one." {
		t.Errorf("text on the second fork = %q", got)
	}
	if term := evs[len(evs)-1]; term.ThreadRef != second.ThreadRef || term.Status != sdk.TurnCompleted {
		t.Errorf("turn ended %+v", term)
	}
	s.Close(t)
}

// Authored: a resume the CLI fails for another reason (it exits with no
// "No conversation found") is an error, not a fresh conversation that
// would drop the context; the transcript's fresh CLI is never started.
func TestResumeCrash(t *testing.T) {
	p := plugintest.Start(t, plugintest.Build(t, "."))
	ws := t.TempDir()
	req := sdk.OpenSessionRequest{SessionID: "resume-crash", Cwd: ws, ResumeThreadRef: "5e1f0000-0000-4000-8000-0000000000a1",
		Command: plugintest.PeerCommand(filepath.Join(testdata, "resume_crash.ndjson"), ws, filepath.Join(t.TempDir(), "cursor"))}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := p.OpenSession(ctx, req)
	if err == nil {
		t.Fatalf("open session %+v; want an error (the CLI failed to resume)", resp)
	}
	// The peer says on stderr why it ended, as a CLI would.
	abs, _ := filepath.Abs(filepath.Join(testdata, "resume_crash.ndjson"))
	want := "resume conversation 5e1f0000-0000-4000-8000-0000000000a1: claude exited with status 1 before answering initialize: replaypeer: " +
		abs + ": runtime exit (error) at entry 4 (line 5, runtime_exit): exit status 1"
	if !errors.Is(err, sdk.ErrProviderExited) || err.Error() != want {
		t.Errorf("error %v\nwant ErrProviderExited: %s", err, want)
	}
}

// Authored from recorded frames: a rate limit warning, malformed frames,
// a control request the plugin does not handle, and an API failure the CLI
// reports as a "success" result with is_error.
func TestAPIErrorAndOddFrames(t *testing.T) {
	s := open(t, "api_error", nil)
	turn := s.StartTurn(t, "Say hello").TurnRef
	evs := s.WaitTurnRef(t, turn)
	root := evs[0].ThreadRef
	rl := plugintest.Find(t, evs, func(ev sdk.RuntimeEvent) bool { return ev.Kind == sdk.EventRateLimit })
	if rl.RateLimit == nil || !rl.RateLimit.ResetsAt.Equal(time.Unix(1796050800, 0)) || rl.RateLimit.Scope != "five_hour" ||
		rl.RateLimit.UsedPercent < 90.9 || rl.RateLimit.UsedPercent > 91.1 || rl.Title != "allowed_warning" || rl.ThreadRef != root {
		t.Errorf("rate limit %+v (%+v)", rl, rl.RateLimit)
	}
	diags := plugintest.Filter(evs, func(ev sdk.RuntimeEvent) bool { return ev.Kind == sdk.EventDiagnostic })
	var malformed int
	for _, d := range diags {
		if d.Title == "malformed frame" {
			malformed++
		}
	}
	if malformed != 3 || len(diags) != 4 || !strings.Contains(diags[3].Title, "hook_callback") {
		t.Errorf("diagnostics %+v; want three malformed frames and the unsupported hook_callback", diags)
	}
	term := evs[len(evs)-1]
	if term.Status != sdk.TurnFailed || term.Failure == nil || term.Failure.Code != "api_error_529" ||
		!strings.Contains(term.Failure.Message, "Overloaded") || !term.ThreadUsable {
		t.Errorf("turn ended %+v (%+v); want failed with the API error", term, term.Failure)
	}
	// A 529 the CLI gave up on is the provider's overload (the
	// allowed_warning event before it is no limit: no scope, no reset).
	res := frames(t, "api_error", "result (success, is_error)")
	want := &sdk.Limit{Kind: sdk.LimitOverload, Message: term.Failure.Message, Evidence: evidenceOf(res)}
	if diff := gocmp.Diff(want, term.Limit); diff != "" {
		t.Errorf("limit (-want +got):\n%s", diff)
	}
	s.Close(t) // the peer checked the error answer to hook_callback
}

// open opens a session on a transcript; requests are answered by answer
// (nil: declined).
func open(t *testing.T, scenario string, answer func(sdk.RuntimeEvent) (sdk.Decision, map[string]string)) *plugintest.Session {
	t.Helper()
	p := plugintest.Start(t, plugintest.Build(t, "."))
	ws := t.TempDir()
	state := filepath.Join(t.TempDir(), "cursor")
	req := sdk.OpenSessionRequest{Cwd: ws, Command: plugintest.PeerCommand(filepath.Join(testdata, scenario+".ndjson"), ws, state)}
	return openWith(t, p, req, "", answer)
}

// openWith opens a session with req, resuming the provider's thread resume
// (if not empty); requests are answered by answer (nil: declined).
func openWith(t *testing.T, p *plugintest.Plugin, req sdk.OpenSessionRequest, resume string, answer func(sdk.RuntimeEvent) (sdk.Decision, map[string]string)) *plugintest.Session {
	t.Helper()
	req.SessionID = ""
	req.ResumeThreadRef = resume
	s := p.OpenWith(t, req)
	s.AnswerFunc = answer // nil: Answer, decline
	return s
}
