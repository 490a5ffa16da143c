package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-run/baton/sdk"
	"github.com/baton-run/baton/sdk/plugintest"
)

func TestMain(m *testing.M) { plugintest.Main(m) }

const testdata = "../../testdata/codex"

// Level-3 tests: each replays one codex transcript (recorded from codex
// app-server 0.171.0, except unknown_request and rollback_*, which are
// authored from 0.171.0 frames) through the
// real plugin binary, started through go-plugin, with the replay peer as
// codex, and asserts the normalized events. The peer checks every frame the
// plugin sends and fails the session's close when one differs or is missing.

func TestDescribe(t *testing.T) {
	p := plugintest.Start(t, plugintest.Build(t, "."))
	c := p.Description.Capabilities
	if !c.NativeSteering || !c.Interrupt || !c.Approvals || !c.Subagents || !c.Resume || !c.NativeRollback ||
		p.Description.WireProtocol != "codex-app-server/v2" {
		t.Fatalf("description = %+v; want codex-app-server/v2 with steering, interrupt, approvals, subagents, resume and rollback",
			p.Description)
	}
}

func TestSimple(t *testing.T) {
	s := open(t, "simple", t.TempDir(), "", nil)
	root := s.Open.ProviderThreadRef
	turn := s.StartTurn(t, "Say hello").TurnRef
	evs := s.WaitTurnRef(t, turn)
	term := evs[len(evs)-1]
	if term.Status != sdk.TurnCompleted || !term.ThreadUsable || term.ThreadRef != root {
		t.Fatalf("turn ended %+v; want completed and usable on %s", term, root)
	}
	if got := plugintest.ItemText(evs, root, sdk.ItemAssistantMessage); got != "Hello! How can I help you today?" {
		t.Errorf("assistant text = %q", got)
	}
	if got := plugintest.ItemText(evs, root, sdk.ItemReasoning); got != "The user wants a greeting." {
		t.Errorf("reasoning text = %q", got)
	}
	if n := plugintest.Count(evs, func(ev sdk.RuntimeEvent) bool { return ev.ItemKind == sdk.ItemUserMessage }); n != 0 {
		t.Errorf("the user's own message came back as %d events", n)
	}
	u := plugintest.Find(t, evs, func(ev sdk.RuntimeEvent) bool { return ev.Kind == sdk.EventUsage })
	if u.Usage == nil || u.Usage.TotalTokens != u.Usage.InputTokens+u.Usage.OutputTokens || u.Usage.TotalTokens == 0 {
		t.Errorf("usage = %+v", u.Usage)
	}
	// codex with a custom model provider reports rate limits with every
	// field null: no rate_limit event, no diagnostic.
	if n := plugintest.Count(evs, func(ev sdk.RuntimeEvent) bool {
		return ev.Kind == sdk.EventRateLimit || ev.Kind == sdk.EventDiagnostic
	}); n != 0 {
		t.Errorf("%d rate_limit/diagnostic events: %s", n, plugintest.Kinds(evs))
	}
	plugintest.CheckItemsClosed(t, evs)
	plugintest.CheckRawFrames(t, evs)
	s.Close(t)
	all := s.All()
	if first := all[0]; first.Kind != sdk.EventThreadStarted || first.ThreadRef != root || first.ParentThreadRef != "" {
		t.Errorf("first event %+v; want the root's thread_started", first)
	}
	if n := plugintest.Count(all, func(ev sdk.RuntimeEvent) bool { return ev.Kind == sdk.EventThreadStarted }); n != 1 {
		t.Errorf("%d thread_started events; want 1 (codex's own thread/started for the root is not repeated)", n)
	}
	if last := all[len(all)-1]; last.Status != sdk.ExitClosed {
		t.Errorf("runtime exit %+v; want closed", last)
	}
}

// TestQueuedTurns: a second message waits for the first turn (a slow
// reply) to end, then runs as a turn of its own.
func TestQueuedTurns(t *testing.T) {
	s := open(t, "multi_turn", t.TempDir(), "", nil)
	root := s.Open.ProviderThreadRef
	first := s.StartTurn(t, "Answer slowly").TurnRef
	started := s.Until(t, "the first turn's start", func(ev sdk.RuntimeEvent) bool { return ev.Kind == sdk.EventTurnStarted && ev.TurnRef == first })
	if c := started[len(started)-1].ClientTurnID; c != "client-turn-1" {
		t.Errorf("turn_started names client turn %q, want client-turn-1", c)
	}
	evs := s.WaitTurnRef(t, first)
	second := s.StartTurn(t, "Then answer again").TurnRef
	evs2 := s.WaitTurnRef(t, second)
	if first == second {
		t.Fatalf("both turns are %s", first)
	}
	for i, c := range []struct {
		evs  []sdk.RuntimeEvent
		want string
	}{{evs, "First reply, after a while."}, {evs2, "Second reply."}} {
		term := c.evs[len(c.evs)-1]
		if term.Status != sdk.TurnCompleted {
			t.Errorf("turn %d ended %s", i+1, term.Status)
		}
		if got := plugintest.ItemText(c.evs, root, sdk.ItemAssistantMessage); got != c.want {
			t.Errorf("turn %d text = %q, want %q", i+1, got, c.want)
		}
	}
	s.Close(t)
}

// TestSteering: a steer goes into the running turn (turn/steer with the
// turn's id); codex drops the slow reply and answers the steer in the same
// turn. A steer with no turn running is an error, not a silent no-op.
func TestSteering(t *testing.T) {
	s := open(t, "message_steering", t.TempDir(), "", nil)
	root := s.Open.ProviderThreadRef
	turn := s.StartTurn(t, "Write a long story").TurnRef
	s.Until(t, "the turn's start", func(ev sdk.RuntimeEvent) bool { return ev.Kind == sdk.EventTurnStarted })
	if err := s.Steer("", "Make it short"); err != nil {
		t.Fatalf("steer: %v", err)
	}
	evs := s.WaitTurnRef(t, turn)
	if term := evs[len(evs)-1]; term.Status != sdk.TurnCompleted {
		t.Fatalf("turn ended %s", term.Status)
	}
	if got := plugintest.ItemText(evs, root, sdk.ItemAssistantMessage); got != "A short story: the end." {
		t.Errorf("assistant text = %q; want only the answer to the steer", got)
	}
	if n := plugintest.Count(evs, func(ev sdk.RuntimeEvent) bool { return ev.Kind == sdk.EventTurnStarted }); n != 0 {
		t.Errorf("the steer started %d turns", n)
	}
	err := s.Steer("", "late")
	if !errors.Is(err, sdk.ErrBusy) || !strings.Contains(err.Error(), "no turn is running") {
		t.Errorf("steer after the turn = %v; want a busy error saying no turn is running", err)
	}
	s.Close(t)
}

// TestInterrupt: an interrupt without a turn ref stops the running turn,
// which ends interrupted when codex says so.
func TestInterrupt(t *testing.T) {
	s := open(t, "turn_interrupt", t.TempDir(), "", nil)
	turn := s.StartTurn(t, "Count to a million, slowly").TurnRef
	s.Until(t, "the turn's start", func(ev sdk.RuntimeEvent) bool { return ev.Kind == sdk.EventTurnStarted })
	s.Interrupt(t, "")
	evs := s.WaitTurnRef(t, turn)
	term := evs[len(evs)-1]
	if term.Status != sdk.TurnInterrupted || term.Failure != nil || !term.ThreadUsable {
		t.Fatalf("turn ended %+v; want interrupted, usable, no failure", term)
	}
	// Nothing runs any more: a second interrupt is a quiet acknowledgement.
	s.Interrupt(t, "")
	s.Close(t)
}

// TestApprovalAccept: a command and a patch are each asked of the host
// (codex runs with approvalPolicy "untrusted"); accepted, both run.
func TestApprovalAccept(t *testing.T) {
	ws := t.TempDir()
	s := open(t, "approval_accept", ws, "", nil)
	s.Answer = sdk.DecisionAccept
	root := s.Open.ProviderThreadRef
	turn := s.StartTurn(t, "Create made.txt with a command, then hello.txt with a patch").TurnRef
	evs := s.WaitTurnRef(t, turn)
	if term := evs[len(evs)-1]; term.Status != sdk.TurnCompleted {
		t.Fatalf("turn ended %s", term.Status)
	}
	reqs := plugintest.Filter(evs, func(ev sdk.RuntimeEvent) bool { return ev.Kind == sdk.EventRequestOpened })
	if len(reqs) != 2 || reqs[0].RequestKind != "command_approval" || reqs[1].RequestKind != "file_change_approval" {
		t.Fatalf("requests: %+v", reqs)
	}
	cmd, patch := reqs[0], reqs[1]
	if cmd.Title != "/bin/bash -lc 'touch made.txt && echo made'" || cmd.ItemRef == "" || cmd.ThreadRef != root || cmd.TurnRef != turn {
		t.Errorf("command request = %+v", cmd)
	}
	if len(cmd.Options) == 0 || cmd.Options[0].ID != "accept" || cmd.Options[0].Kind != "allow_once" {
		t.Errorf("command options = %+v; want codex's availableDecisions", cmd.Options)
	}
	if patch.Title != "hello.txt" {
		t.Errorf("patch request title = %q; want the file it changes", patch.Title)
	}
	for _, q := range reqs {
		resolved := plugintest.Index(evs, func(ev sdk.RuntimeEvent) bool {
			return ev.Kind == sdk.EventRequestResolved && ev.RequestRef == q.RequestRef && ev.Status == sdk.DecisionAccept
		})
		done := plugintest.Index(evs, func(ev sdk.RuntimeEvent) bool { return ev.Kind == sdk.EventItemCompleted && ev.ItemRef == q.ItemRef })
		if resolved < 0 || done < resolved {
			t.Errorf("request %s: resolved at %d, its item completed at %d", q.RequestRef, resolved, done)
		}
		if item := evs[done]; item.Status != sdk.ItemDone {
			t.Errorf("item %s ended %s", item.ItemRef, item.Status)
		}
	}
	ran := plugintest.Find(t, evs, func(ev sdk.RuntimeEvent) bool {
		return ev.Kind == sdk.EventItemCompleted && ev.ItemKind == sdk.ItemCommandExecution
	})
	var detail struct {
		ExitCode         *int   `json:"exitCode"`
		AggregatedOutput string `json:"aggregatedOutput"`
	}
	if err := json.Unmarshal(ran.Detail, &detail); err != nil || detail.ExitCode == nil || *detail.ExitCode != 0 || detail.AggregatedOutput != "made\n" {
		t.Errorf("command detail = %s", ran.Detail)
	}
	for _, f := range []string{"made.txt", "hello.txt"} {
		if _, err := os.Stat(filepath.Join(ws, f)); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
	if got := plugintest.ItemText(evs, root, sdk.ItemAssistantMessage); got != "I will create made.txt first.Done: made.txt and hello.txt exist." {
		t.Errorf("assistant text = %q", got)
	}
	plugintest.CheckItemsClosed(t, evs)
	s.Close(t)
}

// TestApprovalDecline: a declined command does not run, and the turn goes
// on to completion.
func TestApprovalDecline(t *testing.T) {
	ws := t.TempDir()
	s := open(t, "approval_decline", ws, "", nil) // requests declined
	turn := s.StartTurn(t, "Create declined.txt").TurnRef
	evs := s.WaitTurnRef(t, turn)
	if term := evs[len(evs)-1]; term.Status != sdk.TurnCompleted {
		t.Fatalf("turn ended %s", term.Status)
	}
	req := plugintest.Find(t, evs, func(ev sdk.RuntimeEvent) bool { return ev.Kind == sdk.EventRequestOpened })
	if req.RequestKind != "command_approval" {
		t.Errorf("request kind %q", req.RequestKind)
	}
	item := plugintest.Find(t, evs, func(ev sdk.RuntimeEvent) bool {
		return ev.Kind == sdk.EventItemCompleted && ev.ItemKind == sdk.ItemCommandExecution
	})
	if item.Status != sdk.ItemDeclined || item.ItemRef != req.ItemRef {
		t.Errorf("command item %+v; want declined", item)
	}
	if _, err := os.Stat(filepath.Join(ws, "declined.txt")); err == nil {
		t.Error("declined.txt exists")
	}
	s.Close(t)
}

// TestSubagent: the child thread codex spawns (it sends no thread/started
// for it) is announced with its parent before its turn starts, so the host
// never takes the child's turn for a root turn; the root turn ends last.
func TestSubagent(t *testing.T) {
	s := open(t, "subagent", t.TempDir(), "", nil)
	root := s.Open.ProviderThreadRef
	turn := s.StartTurn(t, "Ask a helper agent to say hi").TurnRef
	evs := s.WaitTurnRef(t, turn)
	term := evs[len(evs)-1]
	if term.Status != sdk.TurnCompleted || term.ThreadRef != root {
		t.Fatalf("root turn ended %+v", term)
	}
	isChild := func(ev sdk.RuntimeEvent) bool { return ev.Kind == sdk.EventThreadStarted && ev.ThreadRef != root }
	child := plugintest.Find(t, evs, isChild)
	if child.ParentThreadRef != root || child.ThreadRef == root || child.ThreadRef == "" {
		t.Fatalf("child thread_started %+v; want a child of %s", child, root)
	}
	announced := plugintest.Index(evs, isChild)
	for i, ev := range evs {
		if ev.ThreadRef == child.ThreadRef && i < announced {
			t.Errorf("event %d (%s) on the child thread comes before its thread_started", i, ev.Kind)
		}
	}
	childTurn := plugintest.Find(t, evs, func(ev sdk.RuntimeEvent) bool {
		return ev.Kind == sdk.EventTurnStarted && ev.ThreadRef == child.ThreadRef
	})
	if childTurn.Title != "child task: say hi" {
		t.Errorf("child turn title %q; want its prompt", childTurn.Title)
	}
	childEnd := plugintest.Find(t, evs, func(ev sdk.RuntimeEvent) bool {
		return ev.Kind == sdk.EventTurnTerminal && ev.ThreadRef == child.ThreadRef
	})
	if childEnd.Status != sdk.TurnCompleted || childEnd.TurnRef != childTurn.TurnRef {
		t.Errorf("child turn ended %+v", childEnd)
	}
	if got := plugintest.ItemText(evs, child.ThreadRef, sdk.ItemAssistantMessage); got != "Child says hi." {
		t.Errorf("child text = %q", got)
	}
	if got := plugintest.ItemText(evs, root, sdk.ItemAssistantMessage); got != "Spawning a helper.The helper said hi. Done." {
		t.Errorf("root text = %q", got)
	}
	spawns := plugintest.Filter(evs, func(ev sdk.RuntimeEvent) bool {
		return ev.Kind == sdk.EventItemCompleted && ev.ItemKind == sdk.ItemSubagent && ev.ThreadRef == root
	})
	if len(spawns) != 2 || !strings.HasPrefix(spawns[0].Title, "spawnAgent") || spawns[1].Title != "wait" {
		t.Errorf("subagent items: %+v", spawns)
	}
	plugintest.CheckItemsClosed(t, evs)
	s.Close(t)
}

// TestResume: codex started again resumes the thread (thread/resume), and
// the next turn goes on in it.
func TestResume(t *testing.T) {
	ws := t.TempDir()
	state := filepath.Join(t.TempDir(), "cursor")
	s := open(t, "resume", ws, state, nil)
	thread := s.Open.ProviderThreadRef
	evs := s.WaitTurnRef(t, s.StartTurn(t, "Remember the word banana").TurnRef)
	if got := plugintest.ItemText(evs, thread, sdk.ItemAssistantMessage); got != "Noted: the word is banana." {
		t.Errorf("turn 1 text = %q", got)
	}
	s.Close(t)

	s2 := openWith(t, s.Plugin(), s.Request(), thread, nil)
	if !s2.Open.Resumed || s2.Open.ProviderThreadRef != thread {
		t.Fatalf("open = %+v; want thread %s resumed", s2.Open, thread)
	}
	evs = s2.WaitTurnRef(t, s2.StartTurn(t, "What was the word?").TurnRef)
	if term := evs[len(evs)-1]; term.Status != sdk.TurnCompleted {
		t.Fatalf("turn 2 ended %s", term.Status)
	}
	if got := plugintest.ItemText(evs, thread, sdk.ItemAssistantMessage); got != "The word was banana." {
		t.Errorf("turn 2 text = %q", got)
	}
	if n := plugintest.Count(evs, func(ev sdk.RuntimeEvent) bool { return ev.Kind == sdk.EventDiagnostic }); n != 0 {
		t.Errorf("%d diagnostics (resume's extra notifications must be quiet): %s", n, plugintest.Kinds(evs))
	}
	s2.Close(t)
}

// TestUnknownRequest: a server request of a method the plugin does not know
// is shown as a generic request (never dropped, never answered by the
// plugin); a question gets the host's answer.
func TestUnknownRequest(t *testing.T) {
	s := open(t, "unknown_request", t.TempDir(), "", func(ev sdk.RuntimeEvent) (sdk.Decision, map[string]string) {
		if ev.RequestKind == "user_input" {
			return sdk.DecisionAnswer, map[string]string{"answer": "Blue"}
		}
		return sdk.DecisionDecline, nil
	})
	root := s.Open.ProviderThreadRef
	turn := s.StartTurn(t, "Pick a colour for the button").TurnRef
	evs := s.WaitTurnRef(t, turn)
	if term := evs[len(evs)-1]; term.Status != sdk.TurnCompleted {
		t.Fatalf("turn ended %s", term.Status)
	}
	reqs := plugintest.Filter(evs, func(ev sdk.RuntimeEvent) bool { return ev.Kind == sdk.EventRequestOpened })
	if len(reqs) != 2 {
		t.Fatalf("requests: %+v", reqs)
	}
	gen, ask := reqs[0], reqs[1]
	if gen.RequestKind != "generic" || gen.Title != "future/unknownRequest" || !strings.Contains(string(gen.Detail), `"payload":{"level":3}`) ||
		gen.ThreadRef != root || gen.TurnRef != turn {
		t.Errorf("unknown request = %+v; want generic, titled by its method, its params as detail", gen)
	}
	if ask.RequestKind != "user_input" || ask.Title != "Which colour should the button be?" || !strings.Contains(string(ask.Detail), `"id":"color"`) {
		t.Errorf("question = %+v", ask)
	}
	for _, want := range []struct{ ref, status string }{{gen.RequestRef, "decline"}, {ask.RequestRef, "answer"}} {
		if n := plugintest.Count(evs, func(ev sdk.RuntimeEvent) bool {
			return ev.Kind == sdk.EventRequestResolved && ev.RequestRef == want.ref
		}); n != 1 {
			t.Errorf("request %s resolved %d times; want once (codex's serverRequest/resolved is not repeated)", want.ref, n)
		}
	}
	if got := plugintest.ItemText(evs, root, sdk.ItemAssistantMessage); got != "Blue it is." {
		t.Errorf("assistant text = %q", got)
	}
	err := s.Plugin().RespondToRequest(context.Background(), sdk.RespondToRequestRequest{SessionID: s.ID, RequestRef: gen.RequestRef,
		Decision: sdk.DecisionAccept})
	if !errors.Is(err, sdk.ErrUnknownRequest) {
		t.Errorf("answering a resolved request: %v; want unknown request", err)
	}
	s.Close(t)
}

// TestCloseWithPendingRequest: closing the session while codex waits for
// an answer resolves the request as cancelled and fails the running turn
// (its thread cannot go on in that process), before the runtime exit.
func TestCloseWithPendingRequest(t *testing.T) {
	s := open(t, "approval_decline", t.TempDir(), "", func(sdk.RuntimeEvent) (sdk.Decision, map[string]string) { return "", nil })
	turn := s.StartTurn(t, "Create declined.txt").TurnRef
	evs := s.Until(t, "the request", func(ev sdk.RuntimeEvent) bool { return ev.Kind == sdk.EventRequestOpened })
	ref := evs[len(evs)-1].RequestRef
	if err := s.Plugin().CloseSession(context.Background(), s.ID); err != nil {
		t.Fatal(err)
	}
	evs = s.Until(t, "runtime exit", func(ev sdk.RuntimeEvent) bool { return ev.Kind == sdk.EventRuntimeExited })
	resolved := plugintest.Index(evs, func(ev sdk.RuntimeEvent) bool {
		return ev.Kind == sdk.EventRequestResolved && ev.RequestRef == ref && ev.Status == sdk.DecisionCancel
	})
	term := plugintest.Index(evs, func(ev sdk.RuntimeEvent) bool { return ev.Kind == sdk.EventTurnTerminal && ev.TurnRef == turn })
	if resolved < 0 || term < 0 || evs[term].Status != sdk.TurnFailed || evs[term].ThreadUsable {
		t.Fatalf("events after close: %s; want the request cancelled and the turn failed, unusable", plugintest.Kinds(evs))
	}
	if exit := evs[len(evs)-1]; exit.Status != sdk.ExitClosed {
		t.Errorf("runtime exit %+v; want closed", exit)
	}
	err := s.Plugin().RespondToRequest(context.Background(), sdk.RespondToRequestRequest{SessionID: s.ID, RequestRef: ref, Decision: sdk.DecisionAccept})
	if !errors.Is(err, sdk.ErrNotResumable) {
		t.Errorf("answer after close: %v; want not resumable", err)
	}
}

// TestRollback (recorded from codex 0.171.0): after three turns that change
// files the host drops the last two, naming the oldest of them: the plugin
// lists the two newest turns of the paginated thread, checks the turn,
// reverts codex's history before it, and the thread takes its next turn.
// The revert's notifications are quiet.
func TestRollback(t *testing.T) {
	s := open(t, "thread_rollback", t.TempDir(), "", nil)
	s.Answer = sdk.DecisionAccept
	root := s.Open.ProviderThreadRef
	var turns []string
	for _, step := range []struct{ input, reply string }{
		{"Write a.txt saying one", "Wrote a.txt."},
		{"Add a line to a.txt and write sub/b.txt", "Changed a.txt and added sub/b.txt."},
		{"Write c.txt", "Added c.txt."},
	} {
		ref := s.StartTurn(t, step.input).TurnRef
		evs := s.WaitTurnRef(t, ref)
		if term := evs[len(evs)-1]; term.Status != sdk.TurnCompleted {
			t.Fatalf("turn %q ended %s", step.input, term.Status)
		}
		if got := plugintest.ItemText(evs, root, sdk.ItemAssistantMessage); got != step.reply {
			t.Errorf("turn %q text = %q, want %q", step.input, got, step.reply)
		}
		turns = append(turns, ref)
	}
	res, err := s.Plugin().RollbackThread(context.Background(), sdk.RollbackThreadRequest{SessionID: s.ID, ThreadRef: root, Turns: 2,
		BeforeTurnRef: turns[1]})
	if err != nil {
		t.Fatalf("rollback of the last 2 turns: %v", err)
	}
	if res.ThreadRef != root {
		t.Errorf("rollback names thread %q; want the same thread %s (codex keeps its id)", res.ThreadRef, root)
	}
	turn := s.StartTurn(t, "What does a.txt say now?").TurnRef
	evs := s.WaitTurnRef(t, turn)
	if term := evs[len(evs)-1]; term.Status != sdk.TurnCompleted || term.ThreadRef != root {
		t.Fatalf("the turn after the rollback ended %+v; want completed on %s", term, root)
	}
	if got := plugintest.ItemText(evs, root, sdk.ItemAssistantMessage); got != "a.txt says one." {
		t.Errorf("assistant text after the rollback = %q", got)
	}
	s.Close(t)
	all := s.All()
	if n := plugintest.Count(all, func(ev sdk.RuntimeEvent) bool { return ev.Kind == sdk.EventDiagnostic }); n != 0 {
		t.Errorf("%d diagnostics (thread/status/changed and thread/reverted must be quiet): %s", n, plugintest.Kinds(all))
	}
}

// TestRollbackRefused: a rollback of no turns sends nothing; one whose
// oldest turn is not the turn the host named fails, naming both, and
// sends no thread/revert (the replay peer fails the close if it does); an
// unknown session is an unknown session.
func TestRollbackRefused(t *testing.T) {
	s := openNever(t, "rollback_mismatch")
	root := s.Open.ProviderThreadRef
	turns := runTurns(t, s, "turn 1", "turn 2")
	ctx := context.Background()
	if res, err := s.Plugin().RollbackThread(ctx, sdk.RollbackThreadRequest{SessionID: s.ID, Turns: 0}); err != nil || res.ThreadRef != root {
		t.Errorf("rollback of 0 turns = %+v, %v; want thread %s and nothing done", res, err, root)
	}
	_, err := s.Plugin().RollbackThread(ctx, sdk.RollbackThreadRequest{SessionID: s.ID, ThreadRef: root, Turns: 1, BeforeTurnRef: turns[0]})
	if !errors.Is(err, sdk.ErrInvalid) || !strings.Contains(err.Error(), turns[0]) || !strings.Contains(err.Error(), turns[1]) ||
		!strings.Contains(err.Error(), "history differs") {
		t.Errorf("rollback naming turn 1 when codex's newest is turn 2: %v; want an invalid-request error naming %s and %s "+
			"and saying the histories differ", err, turns[0], turns[1])
	}
	_, err = s.Plugin().RollbackThread(ctx, sdk.RollbackThreadRequest{SessionID: "no-such-session", Turns: 1})
	if !errors.Is(err, sdk.ErrUnknownSession) {
		t.Errorf("rollback in an unknown session: %v; want unknown session", err)
	}
	s.Close(t)
}

// openNever opens a session on scenario with codex's approvalPolicy
// "never", as the probe the rollback transcripts come from ran.
func openNever(t *testing.T, scenario string) *plugintest.Session {
	t.Helper()
	p := plugintest.Start(t, plugintest.Build(t, "."))
	ws := t.TempDir()
	req := sdk.OpenSessionRequest{Cwd: ws, RuntimePolicy: "never",
		Command: plugintest.PeerCommand(filepath.Join(testdata, scenario+".ndjson"), ws, "")}
	return openWith(t, p, req, "", nil)
}

// runTurns runs one turn per text, each to completion, and returns their refs.
func runTurns(t *testing.T, s *plugintest.Session, texts ...string) []string {
	t.Helper()
	var refs []string
	for i, input := range texts {
		ref := s.StartTurn(t, input).TurnRef
		evs := s.WaitTurnRef(t, ref)
		if term := evs[len(evs)-1]; term.Status != sdk.TurnCompleted {
			t.Fatalf("turn %q ended %s", input, term.Status)
		}
		if got, want := plugintest.ItemText(evs, s.Open.ProviderThreadRef, sdk.ItemAssistantMessage), fmt.Sprintf("Reply %d.", i+1); got != want {
			t.Errorf("turn %q text = %q, want %q", input, got, want)
		}
		refs = append(refs, ref)
	}
	return refs
}

// open opens a session on a transcript in ws, the peer's cursor in state
// (if not empty); requests are answered by answer (nil: declined).
func open(t *testing.T, scenario, ws, state string, answer func(sdk.RuntimeEvent) (sdk.Decision, map[string]string)) *plugintest.Session {
	t.Helper()
	p := plugintest.Start(t, plugintest.Build(t, "."))
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

// TestUsageLimit: codex's first model call got a 429 usage_limit_reached
// (recorded: codex 0.171.0 against the scripted Responses API, whose
// x-codex-primary-* headers said the five-hour window is spent and resets
// 3 s later). codex sends the headers as a rate-limit snapshot, then fails
// the turn with codexErrorInfo usageLimitExceeded: the turn terminal is
// failed and carries the limit, its reset from the spent window, and both
// frames as evidence.
func TestUsageLimit(t *testing.T) {
	s := open(t, "usage_limit", t.TempDir(), "", nil)
	turn := s.StartTurn(t, "Write notes.txt with the word done").TurnRef
	evs := s.WaitTurnRef(t, turn)
	term := evs[len(evs)-1]
	msg := "You’ve hit your usage limit. Upgrade to Pro (https://chatgpt.com/explore/pro), visit https://chatgpt.com/settings/usage to purchase more credits or try again at 7:12 PM."
	snapshot := `{"method":"account/rateLimits/updated","params":{"rateLimits":{"credits":null,"individualLimit":null,"limitId":"codex","limitName":null,"normalModelSlug":null,"planType":null,"primary":{"resetsAt":1796152365,"usedPercent":100,"windowDurationMins":300},"rateLimitReachedType":null,"secondary":{"resetsAt":null,"usedPercent":41,"windowDurationMins":10080},"spendControlReached":null}}}`
	completed := `{"method":"turn/completed","params":{"threadId":"01a23306-0390-7360-93d3-ecb75422d1ae","turn":{"completedAt":1796152362,"durationMs":163,"error":{"additionalDetails":null,"codexErrorInfo":"usageLimitExceeded","message":"` +
		msg + `","misalignment":null},"id":"01a23306-03c0-7e43-821e-0c55d018addd","items":[],"itemsView":"notLoaded","rootTurnId":"01a23306-03c0-7e43-821e-0c55d018addd","startedAt":1796152361,"status":"failed"}}}`
	want := &sdk.Limit{Kind: sdk.LimitUsageWindow, ResetsAt: time.Unix(1796152365, 0).UTC(), Scope: "codex/primary",
		Message: msg, Evidence: snapshot + "\n" + completed}
	if term.Kind != sdk.EventTurnTerminal || term.Status != sdk.TurnFailed || !term.ThreadUsable {
		t.Fatalf("turn ended %+v; want failed and usable", term)
	}
	if d := cmp.Diff(want, term.Limit); d != "" {
		t.Errorf("limit (-want +got):\n%s", d)
	}
	if term.Failure == nil || term.Failure.Message != msg {
		t.Errorf("failure %+v", term.Failure)
	}
	// The snapshot is a rate limit of its own; codex's error notification
	// a diagnostic.
	got := plugintest.Filter(evs, func(ev sdk.RuntimeEvent) bool { return ev.Kind == sdk.EventRateLimit })
	var rls []sdk.RateLimit
	for _, ev := range got {
		rls = append(rls, *ev.RateLimit)
	}
	if d := cmp.Diff([]sdk.RateLimit{{ResetsAt: time.Unix(1796152365, 0).UTC(), UsedPercent: 100, Scope: "codex/primary"},
		{UsedPercent: 41, Scope: "codex/secondary"}}, rls); d != "" {
		t.Errorf("rate limits (-want +got):\n%s", d)
	}
	s.Close(t)
}

// TestUsageLimitWait: the turns of `baton run --on-limit wait` (recorded):
// the first fails on the usage limit, whose reset is 3 s after the turn's
// end; the continuation the host sends after it ("continue where you
// stopped") is a turn of the same codex thread, which writes notes.txt
// and completes, no limit on it.
func TestUsageLimitWait(t *testing.T) {
	ws := t.TempDir()
	s := open(t, "usage_limit_wait", ws, "", nil)
	s.Answer = sdk.DecisionAccept
	root := s.Open.ProviderThreadRef
	first := s.StartTurn(t, "Write notes.txt with the word done").TurnRef
	evs := s.WaitTurnRef(t, first)
	term := evs[len(evs)-1]
	if term.Status != sdk.TurnFailed || term.Limit == nil || !term.ThreadUsable {
		t.Fatalf("first turn ended %+v; want failed on a limit, usable", term)
	}
	if got, want := *term.Limit, (sdk.Limit{Kind: sdk.LimitUsageWindow, ResetsAt: time.Unix(1796154059, 0).UTC(), Scope: "codex/primary",
		Message: term.Failure.Message, Evidence: term.Limit.Evidence}); got != want {
		t.Errorf("limit %+v, want %+v", got, want)
	}
	next := s.StartTurn(t, "continue where you stopped").TurnRef
	evs = s.WaitTurnRef(t, next)
	term = evs[len(evs)-1]
	if term.Status != sdk.TurnCompleted || term.Limit != nil || term.ThreadRef != root {
		t.Fatalf("continuation ended %+v; want completed on %s, no limit", term, root)
	}
	if got := plugintest.ItemText(evs, root, sdk.ItemAssistantMessage); got != "I wrote notes.txt with the word done." {
		t.Errorf("assistant text = %q", got)
	}
	if b, err := os.ReadFile(filepath.Join(ws, "notes.txt")); err != nil || string(b) != "done\n" {
		t.Errorf("notes.txt = %q, %v", b, err)
	}
	s.Close(t)
}
