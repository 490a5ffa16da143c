package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-run/baton/sdk"
	"github.com/baton-run/baton/sdk/ndjson"
	"github.com/baton-run/baton/sdk/plugintest"
	"github.com/baton-run/baton/sdk/sse"
)

func TestMain(m *testing.M) { plugintest.Main(m) }

const testdata = "../../testdata/opencode"

// Level-3 tests: each replays one transcript recorded from opencode-ai
// 1.18.33 (`opencode serve` behind replaypeer record --http-proxy) through
// the real plugin binary, started through go-plugin, with the replay peer
// as the opencode server (an HTTP server on 127.0.0.1 printing its address
// as opencode does). The peer checks the plugin's arguments and every
// request it sends, and fails the session's close when one differs or is
// missing.

func start(t *testing.T) *plugintest.Plugin {
	t.Helper()
	return plugintest.Start(t, plugintest.Build(t, "."))
}

func open(t *testing.T, scenario string) (*plugintest.Plugin, *plugintest.Session, string) {
	t.Helper()
	ws := t.TempDir()
	p := start(t)
	s := p.Open(t, filepath.Join(testdata, scenario+".ndjson"), ws)
	if s.Open.ProviderThreadRef == "" || !strings.HasPrefix(s.Open.ProviderThreadRef, "ses_") {
		t.Fatalf("open: %+v; want an opencode session id as the thread", s.Open)
	}
	return p, s, ws
}

func TestDescribe(t *testing.T) {
	p := start(t)
	c := p.Description.Capabilities
	if c.NativeSteering || !c.Interrupt || !c.Approvals || !c.Subagents || !c.Resume || !c.NativeRollback ||
		p.Description.Name != "opencode" || p.Description.WireProtocol != "opencode-server/1 http+sse" {
		t.Fatalf("description = %+v; want opencode-server/1 with interrupt, approvals, subagents, resume and rollback, and no steering",
			p.Description)
	}
}

func TestSimple(t *testing.T) {
	_, s, _ := open(t, "simple")
	root := s.Open.ProviderThreadRef
	s.StartTurn(t, "Say hello")
	evs := s.WaitTurn(t)
	started := plugintest.Find(t, evs, func(ev sdk.RuntimeEvent) bool { return ev.Kind == sdk.EventTurnStarted })
	if started.ClientTurnID != "client-turn-1" || started.ThreadRef != root || !strings.HasPrefix(started.TurnRef, "msg_") {
		t.Errorf("turn_started %+v; want client-turn-1 on %s, the user message as the turn", started, root)
	}
	term := evs[len(evs)-1]
	if term.Status != sdk.TurnCompleted || !term.ThreadUsable || term.ThreadRef != root || term.TurnRef != started.TurnRef {
		t.Fatalf("turn ended %+v; want completed and usable", term)
	}
	if got := text(evs, root, sdk.ItemAssistantMessage); got != "Hello from the replay agent." {
		t.Errorf("assistant text = %q", got)
	}
	// The text came as one delta and again whole in the part's update: the
	// item carries it once.
	if got := plugintest.ItemText(evs, root, sdk.ItemAssistantMessage); got != "Hello from the replay agent." {
		t.Errorf("content deltas = %q; want the text once", got)
	}
	u := plugintest.Find(t, evs, func(ev sdk.RuntimeEvent) bool { return ev.Kind == sdk.EventUsage })
	if u.Usage == nil || u.Usage.InputTokens == 0 || u.Usage.OutputTokens == 0 || u.Usage.TotalTokens < u.Usage.InputTokens+u.Usage.OutputTokens {
		t.Errorf("usage = %+v", u.Usage)
	}
	if n := plugintest.Count(evs, func(ev sdk.RuntimeEvent) bool { return ev.Kind == sdk.EventDiagnostic }); n != 0 {
		t.Errorf("%d diagnostics: %s", n, plugintest.Kinds(evs))
	}
	plugintest.CheckItemsClosed(t, evs)
	// Every event names the server's frame it came from, but a request's
	// resolution, which the plugin reports as it sends the host's answer.
	plugintest.CheckRawFrames(t, evs, sdk.EventRequestResolved)
	all := s.Close(t)
	if first := s.All()[0]; first.Kind != sdk.EventThreadStarted || first.ThreadRef != root || first.ParentThreadRef != "" {
		t.Errorf("first event %+v; want the root's thread_started", first)
	}
	if last := all[len(all)-1]; last.Status != sdk.ExitClosed {
		t.Errorf("runtime exit %+v; want closed", last)
	}
}

// TestMismatchFailsClose: a plugin that sends another prompt than the
// recorded one gets the peer's 500 with the difference, and the session's
// close reports the peer's failure.
func TestMismatchFailsClose(t *testing.T) {
	p, s, _ := open(t, "simple")
	_, err := p.StartTurn(context.Background(), sdk.StartTurnRequest{SessionID: s.ID, Input: sdk.TurnInput{Text: "Say goodbye"}})
	if err == nil || !strings.Contains(err.Error(), "500") || !strings.Contains(err.Error(), `expected "Say hello", got "Say goodbye"`) {
		t.Fatalf("start turn = %v; want the peer's 500 naming the difference", err)
	}
	// The peer exits at the mismatch by itself: its exit is reported
	// without a close (a close first would end it as closed).
	evs := s.Until(t, "runtime exit", func(ev sdk.RuntimeEvent) bool { return ev.Kind == sdk.EventRuntimeExited })
	if last := evs[len(evs)-1]; last.Failure == nil || !strings.Contains(last.Failure.Message, "opencode exited with status 3: ") {
		t.Errorf("runtime exit %+v; want the peer's mismatch exit (3)", last)
	}
	if err := p.CloseSession(context.Background(), s.ID); err != nil && !errors.Is(err, sdk.ErrUnknownSession) {
		t.Fatal(err)
	}
}

// text is the completed items' text of a kind on a thread, joined.
func text(evs []sdk.RuntimeEvent, thread string, kind sdk.ItemKind) string {
	var parts []string
	for _, ev := range evs {
		if ev.Kind == sdk.EventItemCompleted && ev.ItemKind == kind && ev.ThreadRef == thread {
			parts = append(parts, ev.Text)
		}
	}
	return strings.Join(parts, "\n")
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestMultiTurn: two turns one after the other on the same session, each
// with its client turn id.
func TestMultiTurn(t *testing.T) {
	_, s, _ := open(t, "multi_turn")
	root := s.Open.ProviderThreadRef
	var refs []string
	for i, c := range []struct{ send, want string }{{"Say hello", "First reply."}, {"Say it again", "Second reply."}} {
		s.StartTurn(t, c.send)
		evs := s.WaitTurn(t)
		st := plugintest.Find(t, evs, func(ev sdk.RuntimeEvent) bool { return ev.Kind == sdk.EventTurnStarted })
		if want := "client-turn-" + string(rune('1'+i)); st.ClientTurnID != want {
			t.Errorf("turn %d started with client turn %q, want %s", i+1, st.ClientTurnID, want)
		}
		refs = append(refs, st.TurnRef)
		if term := evs[len(evs)-1]; term.Status != sdk.TurnCompleted || term.TurnRef != st.TurnRef {
			t.Errorf("turn %d ended %+v", i+1, term)
		}
		if got := text(evs, root, sdk.ItemAssistantMessage); got != c.want {
			t.Errorf("turn %d text = %q, want %q", i+1, got, c.want)
		}
		plugintest.CheckItemsClosed(t, evs)
	}
	if refs[0] == refs[1] {
		t.Errorf("both turns are %s", refs[0])
	}
	s.Close(t)
}

// TestApprovalAccept: opencode asks before the command and before the
// write (the plugin's default policy); both are accepted, and the items
// complete after the answers.
func TestApprovalAccept(t *testing.T) {
	_, s, ws := open(t, "approval_accept")
	root := s.Open.ProviderThreadRef
	s.Answer = sdk.DecisionAccept
	s.StartTurn(t, "Create made.txt with a command, then hello.txt")
	evs := s.WaitTurn(t)
	if term := evs[len(evs)-1]; term.Status != sdk.TurnCompleted {
		t.Fatalf("turn ended %+v", term)
	}
	reqs := plugintest.Filter(evs, func(ev sdk.RuntimeEvent) bool { return ev.Kind == sdk.EventRequestOpened })
	if len(reqs) != 2 || reqs[0].RequestKind != "command_approval" || reqs[0].Text != "echo made > made.txt" ||
		reqs[1].RequestKind != "file_change_approval" || reqs[0].ItemRef == "" || reqs[0].ThreadRef != root {
		t.Fatalf("requests %+v; want a command then a file change, each naming its item", reqs)
	}
	resolved := plugintest.Count(evs, func(ev sdk.RuntimeEvent) bool {
		return ev.Kind == sdk.EventRequestResolved && ev.Status == sdk.DecisionAccept
	})
	if resolved != 2 {
		t.Errorf("%d requests resolved as accepted, want 2", resolved)
	}
	cmd := plugintest.Find(t, evs, func(ev sdk.RuntimeEvent) bool {
		return ev.Kind == sdk.EventItemCompleted && ev.ItemKind == sdk.ItemCommandExecution
	})
	if cmd.Status != sdk.ItemDone || cmd.Title != "echo made > made.txt" || cmd.ItemRef != reqs[0].ItemRef {
		t.Errorf("command item %+v", cmd)
	}
	fc := plugintest.Find(t, evs, func(ev sdk.RuntimeEvent) bool {
		return ev.Kind == sdk.EventItemCompleted && ev.ItemKind == sdk.ItemFileChange
	})
	if fc.Status != sdk.ItemDone || fc.Title != "hello.txt" {
		t.Errorf("file change item %+v", fc)
	}
	if got := text(evs, root, sdk.ItemAssistantMessage); got != "I created made.txt and hello.txt." {
		t.Errorf("assistant text = %q", got)
	}
	// The replay peer made the files opencode made.
	if got := readFile(t, filepath.Join(ws, "made.txt")); got != "made\n" {
		t.Errorf("made.txt = %q", got)
	}
	plugintest.CheckItemsClosed(t, evs)
	s.Close(t)
}

// TestApprovalDecline: the command is declined (reject); opencode ends the
// turn without running it, and the item is declined.
func TestApprovalDecline(t *testing.T) {
	_, s, ws := open(t, "approval_decline")
	s.StartTurn(t, "Create declined.txt")
	evs := s.WaitTurn(t)
	if term := evs[len(evs)-1]; term.Status != sdk.TurnCompleted || !term.ThreadUsable {
		t.Fatalf("turn ended %+v", term)
	}
	req := plugintest.Find(t, evs, func(ev sdk.RuntimeEvent) bool { return ev.Kind == sdk.EventRequestOpened })
	res := plugintest.Find(t, evs, func(ev sdk.RuntimeEvent) bool { return ev.Kind == sdk.EventRequestResolved })
	if req.RequestKind != "command_approval" || res.RequestRef != req.RequestRef || res.Status != sdk.DecisionDecline {
		t.Errorf("request %+v resolved %+v", req, res)
	}
	cmd := plugintest.Find(t, evs, func(ev sdk.RuntimeEvent) bool {
		return ev.Kind == sdk.EventItemCompleted && ev.ItemKind == sdk.ItemCommandExecution
	})
	if cmd.Status != sdk.ItemDeclined {
		t.Errorf("command item %+v; want declined", cmd)
	}
	if _, err := os.Stat(filepath.Join(ws, "declined.txt")); err == nil {
		t.Error("declined.txt exists")
	}
	plugintest.CheckItemsClosed(t, evs)
	s.Close(t)
}

// TestSubagent: the task tool's child session is a child thread, announced
// with its parent before its turn; its idle ends its own turn, and the
// root turn ends with the root's idle, after the child's.
func TestSubagent(t *testing.T) {
	_, s, _ := open(t, "subagent")
	root := s.Open.ProviderThreadRef
	s.StartTurn(t, "Ask a helper agent to say hi")
	evs := s.Until(t, "the root turn's end", func(ev sdk.RuntimeEvent) bool {
		return ev.Kind == sdk.EventTurnTerminal && ev.ThreadRef == root
	})
	child := plugintest.Find(t, evs, func(ev sdk.RuntimeEvent) bool { return ev.Kind == sdk.EventThreadStarted && ev.ThreadRef != root })
	if child.ParentThreadRef != root || child.ThreadRef == root || !strings.HasPrefix(child.ThreadRef, "ses_") {
		t.Fatalf("child thread %+v", child)
	}
	var order []string
	for _, ev := range evs {
		switch {
		case ev.Kind == sdk.EventThreadStarted && ev.ThreadRef != root:
			order = append(order, "child thread")
		case ev.Kind == sdk.EventTurnStarted && ev.ThreadRef == child.ThreadRef:
			order = append(order, "child turn")
			if ev.ClientTurnID != "" {
				t.Errorf("the child's turn took client turn %q", ev.ClientTurnID)
			}
		case ev.Kind == sdk.EventTurnTerminal:
			order = append(order, "end of "+map[bool]string{true: "root", false: "child"}[ev.ThreadRef == root])
		}
	}
	if got := strings.Join(order, ", "); got != "child thread, child turn, end of child, end of root" {
		t.Errorf("order: %s", got)
	}
	task := plugintest.Find(t, evs, func(ev sdk.RuntimeEvent) bool {
		return ev.Kind == sdk.EventItemCompleted && ev.ItemKind == sdk.ItemSubagent
	})
	if task.ThreadRef != root || task.Status != sdk.ItemDone || task.Title != "task: Say hi" {
		t.Errorf("task item %+v", task)
	}
	if got := text(evs, child.ThreadRef, sdk.ItemAssistantMessage); got != "Hi from the helper." {
		t.Errorf("child text = %q", got)
	}
	if got := text(evs, root, sdk.ItemAssistantMessage); got != "The helper said hi." {
		t.Errorf("root text = %q", got)
	}
	plugintest.CheckItemsClosed(t, evs)
	s.Close(t)
}

// TestInterrupt: an interrupt is an abort; the turn ends interrupted when
// the session goes idle (opencode reports MessageAbortedError first, which
// is no failure), and the thread stays usable.
func TestInterrupt(t *testing.T) {
	_, s, _ := open(t, "turn_interrupt")
	s.StartTurn(t, "Count to a million, slowly")
	s.Until(t, "the turn's start", func(ev sdk.RuntimeEvent) bool { return ev.Kind == sdk.EventTurnStarted })
	s.Interrupt(t, "")
	evs := s.WaitTurn(t)
	term := evs[len(evs)-1]
	if term.Status != sdk.TurnInterrupted || term.Failure != nil || !term.ThreadUsable {
		t.Fatalf("turn ended %+v; want interrupted, usable, no failure", term)
	}
	if n := plugintest.Count(evs, func(ev sdk.RuntimeEvent) bool { return ev.Kind == sdk.EventDiagnostic }); n != 0 {
		t.Errorf("the abort made %d diagnostics", n)
	}
	plugintest.CheckItemsClosed(t, evs)
	// An interrupt with no turn running sends nothing (the peer would
	// refuse an unexpected request) and is still acknowledged.
	s.Interrupt(t, "")
	s.Close(t)
}

// TestResume: a second server (restarted, same data) resumes the session
// by its id; the host is told it was resumed.
func TestResume(t *testing.T) {
	_, s, _ := open(t, "resume")
	first := s.Open.ProviderThreadRef
	s.StartTurn(t, "Remember the word banana")
	s.WaitTurn(t)
	r := s.Resume(t)
	if !r.Open.Resumed || r.Open.ProviderThreadRef != first {
		t.Fatalf("resume: %+v; want session %s resumed", r.Open, first)
	}
	r.StartTurn(t, "What was the word?")
	evs := r.WaitTurn(t)
	if got := text(evs, first, sdk.ItemAssistantMessage); got != "The word was banana." {
		t.Errorf("assistant text = %q", got)
	}
	r.Close(t)
}

// TestResumeUnknownSession: a session the server does not have (404) is
// not resumed: a new one starts, the host is told so, with a diagnostic.
func TestResumeUnknownSession(t *testing.T) {
	p := start(t)
	ws := t.TempDir()
	req := sdk.OpenSessionRequest{Cwd: ws, ResumeThreadRef: "ses_gone",
		Command: plugintest.PeerCommand(filepath.Join(testdata, "resume_unknown.ndjson"), ws, "")}
	s := p.OpenWith(t, req)
	if s.Open.Resumed || s.Open.ProviderThreadRef == "ses_gone" || s.Open.ProviderThreadRef == "" {
		t.Fatalf("open: %+v; want a new session, not resumed", s.Open)
	}
	evs := s.Close(t)
	d := plugintest.Find(t, evs, func(ev sdk.RuntimeEvent) bool { return ev.Kind == sdk.EventDiagnostic })
	if !strings.Contains(d.Title, "could not resume session ses_gone") {
		t.Errorf("diagnostic %+v", d)
	}
}

// TestRollback: three turns, then the last two are dropped with opencode's
// revert to before the second turn's user message, checked against the
// host's BeforeTurnRef; a mismatching ref is refused before anything is
// reverted.
func TestRollback(t *testing.T) {
	p, s, _ := open(t, "thread_rollback")
	s.Answer = sdk.DecisionAccept
	root := s.Open.ProviderThreadRef
	var turns []string
	for _, m := range []string{"Write a.txt saying one", "Add a line to a.txt and write sub/b.txt", "Write c.txt"} {
		s.StartTurn(t, m)
		evs := s.WaitTurn(t)
		turns = append(turns, evs[len(evs)-1].TurnRef)
	}
	ctx := context.Background()
	_, err := p.RollbackThread(ctx, sdk.RollbackThreadRequest{SessionID: s.ID, ThreadRef: root, Turns: 2, BeforeTurnRef: turns[2]})
	if !errors.Is(err, sdk.ErrInvalid) || !strings.Contains(err.Error(), "the host expected "+turns[2]) {
		t.Fatalf("rollback with the wrong turn = %v; want refused", err)
	}
	// The refused rollback read the session and its messages, which the
	// transcript has once (the peer now misses the revert and exits as
	// such): a fresh session replays the good one.
	if err := p.CloseSession(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	evs := s.Until(t, "runtime exit", func(ev sdk.RuntimeEvent) bool { return ev.Kind == sdk.EventRuntimeExited })
	if last := evs[len(evs)-1]; last.Failure == nil || !strings.Contains(last.Failure.Message, "opencode exited with status 4: ") {
		t.Errorf("runtime exit %+v; want the peer's leftover exit (4): nothing was reverted", last)
	}
	p, s, _ = open(t, "thread_rollback")
	s.Answer = sdk.DecisionAccept
	for _, m := range []string{"Write a.txt saying one", "Add a line to a.txt and write sub/b.txt", "Write c.txt"} {
		s.StartTurn(t, m)
		s.WaitTurn(t)
	}
	res, err := p.RollbackThread(ctx, sdk.RollbackThreadRequest{SessionID: s.ID, ThreadRef: root, Turns: 2, BeforeTurnRef: turns[1]})
	if err != nil || res.ThreadRef != root {
		t.Fatalf("rollback = %+v, %v", res, err)
	}
	s.StartTurn(t, "What does a.txt say now?")
	evs = s.WaitTurn(t)
	if term := evs[len(evs)-1]; term.Status != sdk.TurnCompleted {
		t.Fatalf("turn after the rollback ended %+v", term)
	}
	s.Close(t)
}

// TestSubagentCheckpoint: the child session's write asks for permission in
// the child thread; the request names the child's turn.
func TestSubagentCheckpoint(t *testing.T) {
	_, s, ws := open(t, "subagent_checkpoint")
	root := s.Open.ProviderThreadRef
	s.Answer = sdk.DecisionAccept
	s.StartTurn(t, "Ask a helper agent to write notes.txt, then summarize")
	evs := s.Until(t, "the root turn's end", func(ev sdk.RuntimeEvent) bool {
		return ev.Kind == sdk.EventTurnTerminal && ev.ThreadRef == root
	})
	child := plugintest.Find(t, evs, func(ev sdk.RuntimeEvent) bool { return ev.Kind == sdk.EventThreadStarted && ev.ThreadRef != root })
	childTurn := plugintest.Find(t, evs, func(ev sdk.RuntimeEvent) bool {
		return ev.Kind == sdk.EventTurnStarted && ev.ThreadRef == child.ThreadRef
	})
	req := plugintest.Find(t, evs, func(ev sdk.RuntimeEvent) bool { return ev.Kind == sdk.EventRequestOpened })
	if req.ThreadRef != child.ThreadRef || req.TurnRef != childTurn.TurnRef || req.RequestKind != "file_change_approval" {
		t.Errorf("request %+v; want the child turn's file change", req)
	}
	fc := plugintest.Find(t, evs, func(ev sdk.RuntimeEvent) bool {
		return ev.Kind == sdk.EventItemCompleted && ev.ItemKind == sdk.ItemFileChange
	})
	if fc.ThreadRef != child.ThreadRef || fc.Title != "notes.txt" || fc.Status != sdk.ItemDone {
		t.Errorf("file change %+v", fc)
	}
	if got := readFile(t, filepath.Join(ws, "notes.txt")); got != "notes from the helper\n" {
		t.Errorf("notes.txt = %q", got)
	}
	s.Close(t)
}

// TestCrashWithGrandchildHoldingStdout: opencode dies during a turn while a
// process it started (a language server, a command left in the
// background) keeps its stdout open. The turn still ends, failed, and the
// session's runtime_exited comes: the plugin does not wait for that
// process to end.
func TestCrashWithGrandchildHoldingStdout(t *testing.T) {
	// simple, cut after the first text delta, where opencode crashes.
	lines := strings.SplitAfter(readFile(t, filepath.Join(testdata, "simple.ndjson")), "\n")
	cut := -1
	for i, l := range lines {
		if strings.Contains(l, `"type":"message.part.delta"`) {
			cut = i + 1
			break
		}
	}
	if cut < 0 {
		t.Fatal("simple.ndjson has no message.part.delta")
	}
	crash := filepath.Join(t.TempDir(), "crash.ndjson")
	body := strings.Join(lines[:cut], "") + `{"type":"runtime_exit","status":"error","error":"crashed","wait":"now"}` + "\n"
	if err := os.WriteFile(crash, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	ws := t.TempDir()
	p := start(t)
	cmd := plugintest.PeerCommand(crash, ws, "")
	// The peer's grandchild keeps its stdout open; its process group goes
	// when the session closes.
	cmd.Argv = append([]string{"sh", "-c", `sleep 300 & exec "$0" "$@"`}, cmd.Argv...)
	s := p.OpenWith(t, sdk.OpenSessionRequest{Cwd: ws, Command: cmd})
	s.StartTurn(t, "Say hello")
	evs := s.WaitTurn(t) // within plugintest.Timeout, though the grandchild holds stdout for 300s
	term := evs[len(evs)-1]
	if term.Status != sdk.TurnFailed || term.Failure == nil || term.Failure.Code != "provider_exited" {
		t.Fatalf("turn ended %+v; want failed: opencode exited", term)
	}
	evs = s.Until(t, "runtime exit", func(ev sdk.RuntimeEvent) bool { return ev.Kind == sdk.EventRuntimeExited })
	if last := evs[len(evs)-1]; last.Status != sdk.ExitFailed {
		t.Errorf("runtime exit %+v; want failed", last)
	}
}

// TestOverLongEventIsADiagnostic: an event too long to keep (over
// sse.MaxLine) is dropped with a diagnostic; the stream, opencode and the
// turn go on.
func TestOverLongEventIsADiagnostic(t *testing.T) {
	lines := strings.SplitAfter(readFile(t, filepath.Join(testdata, "simple.ndjson")), "\n")
	var b strings.Builder
	for _, l := range lines {
		if strings.Contains(l, `"type":"message.part.delta"`) {
			b.WriteString(`{"type":"emit_inbound","frame":{"sse":{"type":"message.part.updated","properties":{"huge":"` +
				strings.Repeat("x", sse.MaxLine) + `"}}}}` + "\n")
		}
		b.WriteString(l)
	}
	long := filepath.Join(t.TempDir(), "long.ndjson")
	if err := os.WriteFile(long, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	ws := t.TempDir()
	p := start(t)
	s := p.OpenWith(t, sdk.OpenSessionRequest{Cwd: ws, Command: plugintest.PeerCommand(long, ws, "")})
	s.StartTurn(t, "Say hello")
	evs := s.WaitTurn(t)
	if term := evs[len(evs)-1]; term.Status != sdk.TurnCompleted {
		t.Fatalf("turn ended %+v; want completed", term)
	}
	diag := plugintest.Find(t, evs, func(ev sdk.RuntimeEvent) bool { return ev.Kind == sdk.EventDiagnostic })
	if !strings.Contains(diag.Text, "too long") {
		t.Errorf("diagnostic %+v; want the over-long event named", diag)
	}
	if got := text(evs, s.Open.ProviderThreadRef, sdk.ItemAssistantMessage); got != "Hello from the replay agent." {
		t.Errorf("assistant text = %q", got)
	}
	s.Close(t)
}

// TestOverLongStdoutLine: a line on opencode's stdout too long to keep
// (over ndjson.DefaultMaxLine) is skipped; the address after it is still
// found, and stdout is still read.
func TestOverLongStdoutLine(t *testing.T) {
	helloAfter(t, fmt.Sprintf(`head -c %d /dev/zero | tr '\0' x; echo`, ndjson.DefaultMaxLine+10))
}

// helloAfter plays the simple scenario with the shell command prelude
// run first, writing to the server's stdout before the server does, and
// checks that the turn completes.
func helloAfter(t *testing.T, prelude string) {
	t.Helper()
	ws := t.TempDir()
	p := start(t)
	cmd := plugintest.PeerCommand(filepath.Join(testdata, "simple.ndjson"), ws, "")
	cmd.Argv = append([]string{"sh", "-c", prelude + `; exec "$0" "$@"`}, cmd.Argv...)
	s := p.OpenWith(t, sdk.OpenSessionRequest{Cwd: ws, Command: cmd})
	s.StartTurn(t, "Say hello")
	evs := s.WaitTurn(t)
	if term := evs[len(evs)-1]; term.Status != sdk.TurnCompleted {
		t.Fatalf("turn ended %+v; want completed", term)
	}
	s.Close(t)
}

// TestInterruptBeforeTheTurnStarted: the host interrupts (naming no turn)
// after prompt_async was accepted and before opencode's user message
// started the turn. The interrupt is not lost: opencode is asked to abort
// once the turn runs, and the turn ends interrupted.
func TestInterruptBeforeTheTurnStarted(t *testing.T) {
	// turn_interrupt, played in real time with no waits but one: the user
	// message comes 1.5 s after prompt_async's answer.
	var b strings.Builder
	for _, l := range strings.SplitAfter(readFile(t, filepath.Join(testdata, "turn_interrupt.ndjson")), "\n") {
		if l == "" {
			continue
		}
		var e map[string]any
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatal(err)
		}
		delete(e, "afterMs")
		if e["label"] == "15.message.updated" {
			e["afterMs"] = 1500
		}
		out, _ := json.Marshal(e)
		b.Write(append(out, '\n'))
	}
	late := filepath.Join(t.TempDir(), "late.ndjson")
	if err := os.WriteFile(late, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	ws := t.TempDir()
	p := start(t)
	cmd := plugintest.PeerCommand(late, ws, "")
	if i := slices.Index(cmd.Argv, "--speed"); i < 0 {
		t.Fatalf("no --speed in %v", cmd.Argv)
	} else {
		cmd.Argv[i+1] = "1"
	}
	s := p.OpenWith(t, sdk.OpenSessionRequest{Cwd: ws, Command: cmd})
	s.StartTurn(t, "Count to a million, slowly")
	s.Interrupt(t, "")
	evs := s.WaitTurn(t)
	if started := plugintest.Find(t, evs, func(ev sdk.RuntimeEvent) bool { return ev.Kind == sdk.EventTurnStarted }); started.ClientTurnID != "client-turn-1" {
		t.Errorf("turn_started %+v", started)
	}
	if term := evs[len(evs)-1]; term.Status != sdk.TurnInterrupted || term.Failure != nil || !term.ThreadUsable {
		t.Fatalf("turn ended %+v; want interrupted, usable, no failure", term)
	}
	s.Close(t)
}

// TestAddressOnlyOn127: the server's address is the first URL on
// 127.0.0.1 that a "listening" line names, as the plugin asked for
// (--hostname 127.0.0.1); another URL on such a line is not taken for it.
func TestAddressOnlyOn127(t *testing.T) {
	helloAfter(t, `echo "not listening yet: see http://localhost:1/docs"`)
}

// TestUsageLimit: the model API answers every call with a 429 (recorded:
// opencode 1.18.33 against the scripted Messages API). opencode retries on
// its own and says so with session.status retry; at its third attempt the
// plugin stops waiting: it aborts the turn, which ends failed on a rate
// limit whose evidence is that retry frame. (Its reset, opencode's next
// call, lies in the past of a replay: none.)
func TestUsageLimit(t *testing.T) {
	_, s, _ := open(t, "usage_limit")
	s.StartTurn(t, "Write notes.txt with the word done")
	evs := s.WaitTurn(t)
	term := evs[len(evs)-1]
	msg := "This request would exceed your account's rate limit. Please try again later."
	want := &sdk.Limit{Kind: sdk.LimitRate, Message: msg,
		Evidence: `{"id":"evt_2330f2eb9001T47SnX0uyIq1WX","properties":{"sessionID":"ses_dccf0fc46ffeIDZ4tCja9S6T5x","status":{"attempt":3,"message":"This request would exceed your account's rate limit. Please try again later.","next":1796152963745,"type":"retry"}},"type":"session.status"}`}
	if term.Kind != sdk.EventTurnTerminal || term.Status != sdk.TurnFailed || !term.ThreadUsable ||
		term.Failure == nil || term.Failure.Message != msg {
		t.Fatalf("turn ended %+v; want failed on the limit, usable", term)
	}
	if d := cmp.Diff(want, term.Limit); d != "" {
		t.Errorf("limit (-want +got):\n%s", d)
	}
	var retries []string
	for _, ev := range evs {
		if ev.Kind == sdk.EventDiagnostic {
			retries = append(retries, ev.Title)
		}
	}
	if d := cmp.Diff([]string{"opencode retries the model call (attempt 1)", "opencode retries the model call (attempt 2)",
		"opencode retries the model call (attempt 3)", "the turn stops on the rate_limit limit instead of waiting for opencode's retries"}, retries); d != "" {
		t.Errorf("diagnostics (-want +got):\n%s", d)
	}
	s.Close(t)
}
