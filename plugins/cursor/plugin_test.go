package main

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/baton-run/baton/sdk"
	"github.com/baton-run/baton/sdk/plugintest"
)

// Level-3 adapter tests: the real plugin binary through go-plugin, the
// replay peer as cursor-agent (one peer process per turn, continuing one
// transcript through its state file, checking each process's arguments),
// raw stream-json in, normalized events out.

func TestMain(m *testing.M) { plugintest.Main(m) }

const testdata = "../../testdata/cursor/"

func start(t *testing.T) *plugintest.Plugin {
	t.Helper()
	return plugintest.Start(t, plugintest.Build(t, "."))
}

func open(t *testing.T, p *plugintest.Plugin, scenario string) (*plugintest.Session, string) {
	t.Helper()
	ws := t.TempDir()
	return p.Open(t, testdata+scenario+".ndjson", ws), ws
}

// only keeps the events of one kind (and item kind, if given).
func only(evs []sdk.RuntimeEvent, kind sdk.EventKind, item sdk.ItemKind) []sdk.RuntimeEvent {
	return plugintest.Filter(evs, func(ev sdk.RuntimeEvent) bool { return ev.Kind == kind && (item == "" || ev.ItemKind == item) })
}

func terminal(t *testing.T, evs []sdk.RuntimeEvent) sdk.RuntimeEvent {
	t.Helper()
	last := evs[len(evs)-1]
	if last.Kind != sdk.EventTurnTerminal {
		t.Fatalf("last event %s, want turn_terminal", last.Kind)
	}
	return last
}

func TestDescribe(t *testing.T) {
	p := start(t)
	d := p.Description
	want := sdk.Capabilities{Interrupt: true, Resume: true}
	if d.Name != "cursor" || d.Capabilities != want {
		t.Fatalf("describe = %+v, want name cursor and capabilities %+v (no steering, approvals or rollback)", d, want)
	}
}

// One turn: the chat id of system/init names the thread; the client turn
// id comes back on turn_started; reasoning and text stream once each (the
// text sent again before the tool call and the whole reply sent again at
// the end are dropped); the write is a file change; usage and a completed
// terminal end it.
func TestSimple(t *testing.T) {
	p := start(t)
	s, ws := open(t, p, "simple")
	if s.Open.ProviderThreadRef != "" || s.Open.Resumed || s.Open.ProviderPid != 0 {
		t.Fatalf("open = %+v; want no thread yet and no process until a turn", s.Open)
	}
	r := s.StartTurn(t, "Write hello.txt saying hello, then tell me you did.")
	evs := s.WaitTurn(t)
	const chat = "3f1e8a52-6c1d-4b7e-9a0f-2d5c8e1b4a77"
	th := only(evs, sdk.EventThreadStarted, "")
	ts := only(evs, sdk.EventTurnStarted, "")
	if len(th) != 1 || th[0].ThreadRef != chat || len(ts) != 1 || ts[0].ThreadRef != chat ||
		ts[0].ClientTurnID != "client-turn-1" || ts[0].TurnRef != r.TurnRef || r.TurnRef == "" {
		t.Fatalf("thread_started %+v, turn_started %+v (turn %q)", th, ts, r.TurnRef)
	}
	if got := plugintest.ItemText(evs, "", sdk.ItemAssistantMessage); got != "I'll create hello.txt. Done: hello.txt says hello." {
		t.Errorf("assistant text = %q", got)
	}
	if got := plugintest.ItemText(evs, "", sdk.ItemReasoning); got != "The user wants a file hello.txt with hello." {
		t.Errorf("reasoning = %q", got)
	}
	// Two messages: the one before the tool call and the one after.
	if n := len(only(evs, sdk.EventItemStarted, sdk.ItemAssistantMessage)); n != 2 {
		t.Errorf("assistant messages = %d, want 2", n)
	}
	fc := only(evs, sdk.EventItemCompleted, sdk.ItemFileChange)
	if len(fc) != 1 || fc[0].Title != "Write hello.txt" || fc[0].Status != sdk.ItemDone ||
		!strings.Contains(string(fc[0].Detail), `"path":"hello.txt"`) {
		t.Fatalf("file change: %+v", fc)
	}
	u := only(evs, sdk.EventUsage, "")
	if len(u) != 1 || u[0].Usage.InputTokens != 1840 || u[0].Usage.OutputTokens != 96 || u[0].Usage.CachedInputTokens != 12800 {
		t.Errorf("usage: %+v", u)
	}
	if term := terminal(t, evs); term.Status != sdk.TurnCompleted || !term.ThreadUsable || term.TurnRef != r.TurnRef {
		t.Errorf("terminal: %+v", term)
	}
	for _, ev := range only(evs, sdk.EventDiagnostic, "") {
		t.Errorf("diagnostic: %s %s", ev.Title, ev.Text)
	}
	plugintest.CheckItemsClosed(t, evs)
	plugintest.CheckRawFrames(t, evs)
	if b, err := os.ReadFile(filepath.Join(ws, "hello.txt")); err != nil || string(b) != "hello\n" {
		t.Errorf("hello.txt = %q, %v", b, err)
	}
	ex := s.Close(t)
	if last := ex[len(ex)-1]; last.ThreadRef != chat || last.Status != sdk.ExitClosed {
		t.Errorf("runtime exit: %+v", last)
	}
}

// Two turns, two processes: the second resumes the chat (the peer checks
// --resume CHAT_ID in its arguments); both turns are on the one thread.
func TestMultiTurnResumesTheChat(t *testing.T) {
	p := start(t)
	s, _ := open(t, p, "multi_turn")
	s.StartTurn(t, "Remember the word: pineapple.")
	first := s.WaitTurn(t)
	s.StartTurn(t, "What was the word?")
	second := s.WaitTurn(t)
	const chat = "8d2c4b6a-0e1f-4a3b-8c5d-7e9f1a2b3c4d"
	for i, evs := range [][]sdk.RuntimeEvent{first, second} {
		ts := only(evs, sdk.EventTurnStarted, "")
		if len(ts) != 1 || ts[0].ThreadRef != chat {
			t.Errorf("turn %d started: %+v", i+1, ts)
		}
		if term := terminal(t, evs); term.Status != sdk.TurnCompleted {
			t.Errorf("turn %d: %+v", i+1, term)
		}
	}
	if only(first, sdk.EventTurnStarted, "")[0].TurnRef == only(second, sdk.EventTurnStarted, "")[0].TurnRef {
		t.Error("both turns have the same ref")
	}
	if n := len(only(second, sdk.EventThreadStarted, "")); n != 0 {
		t.Errorf("the resumed chat was announced again (%d)", n)
	}
	if got := plugintest.ItemText(second, "", sdk.ItemAssistantMessage); got != "The word was pineapple." {
		t.Errorf("turn 2 said %q", got)
	}
	s.Close(t)
}

// The session's raw-frame log holds every process: its arguments (an
// outbound argv frame), then its stdout lines, numbered on across
// processes; events name their frames.
func TestOneRawFrameLogAcrossProcesses(t *testing.T) {
	p := start(t)
	ws := t.TempDir()
	log := filepath.Join(t.TempDir(), "frames.ndjson")
	s := p.OpenWith(t, sdk.OpenSessionRequest{Cwd: ws, RawFrameLog: log,
		Command: plugintest.PeerCommand(testdata+"multi_turn.ndjson", ws, filepath.Join(t.TempDir(), "cursor"))})
	s.StartTurn(t, "Remember the word: pineapple.")
	first := s.WaitTurn(t)
	s.StartTurn(t, "What was the word?")
	second := s.WaitTurn(t)
	s.Close(t)
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	var argvs []uint64
	var prev uint64
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var rec struct {
			I     uint64          `json:"i"`
			Dir   string          `json:"dir"`
			Frame json.RawMessage `json:"frame"`
		}
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		if rec.I <= prev {
			t.Fatalf("frame %d after %d", rec.I, prev)
		}
		prev = rec.I
		if rec.Dir == "out" && strings.HasPrefix(string(rec.Frame), `{"argv":`) {
			argvs = append(argvs, rec.I)
		}
	}
	if len(argvs) != 2 {
		t.Fatalf("argv frames at %v, want 2", argvs)
	}
	if ts := only(first, sdk.EventTurnStarted, ""); ts[0].RawFrame <= argvs[0] || ts[0].RawFrame >= argvs[1] {
		t.Errorf("turn 1 started at frame %d; its process's frames are %d to %d", ts[0].RawFrame, argvs[0], argvs[1])
	}
	if ts := only(second, sdk.EventTurnStarted, ""); ts[0].RawFrame != argvs[1] {
		t.Errorf("turn 2 (chat known) started at frame %d, want its argv frame %d", ts[0].RawFrame, argvs[1])
	}
}

// A new session asked to resume the chat says so at once, and its first
// process resumes it.
func TestResumeInANewSession(t *testing.T) {
	p := start(t)
	s, _ := open(t, p, "resume")
	s.StartTurn(t, "Remember the word: pineapple.")
	s.WaitTurn(t)
	const chat = "8d2c4b6a-0e1f-4a3b-8c5d-7e9f1a2b3c4d"
	// The chat id came with the first turn (the session opened without
	// one), so the host's next session names it.
	s.Close(t)
	req := s.Request()
	req.SessionID, req.ResumeThreadRef = "", chat
	s2 := p.OpenWith(t, req)
	if !s2.Open.Resumed || s2.Open.ProviderThreadRef != chat {
		t.Fatalf("open with resume: %+v", s2.Open)
	}
	s2.StartTurn(t, "What was the word?")
	evs := s2.WaitTurn(t)
	if ts := only(evs, sdk.EventTurnStarted, ""); len(ts) != 1 || ts[0].ThreadRef != chat || ts[0].ClientTurnID != "client-turn-1" {
		t.Errorf("turn_started: %+v", ts)
	}
	if got := plugintest.ItemText(evs, "", sdk.ItemAssistantMessage); got != "The word was pineapple." {
		t.Errorf("said %q", got)
	}
	s2.Close(t)
}

// countingTurn opens the turn_interrupt session and starts its turn, a
// command that counts slowly, and returns once the command runs.
func countingTurn(t *testing.T, p *plugintest.Plugin) *plugintest.Session {
	t.Helper()
	s, _ := open(t, p, "turn_interrupt")
	s.StartTurn(t, "Count to a million, slowly")
	s.Until(t, "the command to start", func(ev sdk.RuntimeEvent) bool {
		return ev.Kind == sdk.EventItemStarted && ev.ItemKind == sdk.ItemCommandExecution
	})
	return s
}

// Interrupt ends the process group (the peer waits for the signal); the
// turn ends interrupted once the process is gone, the running command
// with it. A second turn while one runs is refused.
func TestInterrupt(t *testing.T) {
	p := start(t)
	s := countingTurn(t, p)
	_, err := p.StartTurn(context.Background(), sdk.StartTurnRequest{SessionID: s.ID, Input: sdk.TurnInput{Text: "again"}})
	if !errors.Is(err, sdk.ErrBusy) {
		t.Errorf("a turn while one runs: %v, want busy", err)
	}
	if err := s.Steer("", "faster"); !errors.Is(err, sdk.ErrUnsupported) {
		t.Errorf("steer: %v, want unsupported", err)
	}
	s.Interrupt(t, "")
	evs := s.WaitTurn(t)
	if term := terminal(t, evs); term.Status != sdk.TurnInterrupted || !term.ThreadUsable {
		t.Fatalf("terminal: %+v", term)
	}
	cmd := only(evs, sdk.EventItemCompleted, sdk.ItemCommandExecution)
	if len(cmd) != 1 || cmd[0].Status != sdk.ItemDeclined {
		t.Errorf("command item: %+v", cmd)
	}
	s.Close(t)
}

// Closing the session while a turn runs stops its process: the turn ends
// interrupted, then the session's runtime_exited, cleanly.
func TestCloseDuringATurn(t *testing.T) {
	p := start(t)
	s := countingTurn(t, p)
	evs := s.Close(t)
	term := only(evs, sdk.EventTurnTerminal, "")
	if len(term) != 1 || term[0].Status != sdk.TurnInterrupted || term[0].Text != "the session was closed" {
		t.Fatalf("terminal: %+v (events %s)", term, plugintest.Kinds(evs))
	}
	if last := evs[len(evs)-1]; last.Kind != sdk.EventRuntimeExited || last.Status != sdk.ExitClosed {
		t.Fatalf("last event: %+v", last)
	}
	_, err := p.StartTurn(context.Background(), sdk.StartTurnRequest{SessionID: s.ID, Input: sdk.TurnInput{Text: "more"}})
	if !errors.Is(err, sdk.ErrUnknownSession) {
		t.Errorf("a turn after close: %v", err)
	}
}

// A process that exits non-zero without a result fails its turn with the
// end of its stderr; the chat goes on in the next turn's process.
func TestFailureWithoutResult(t *testing.T) {
	p := start(t)
	s, _ := open(t, p, "failure")
	s.StartTurn(t, "Say hello.")
	term := terminal(t, s.WaitTurn(t))
	// The peer says on stderr why it ended, as the CLI would.
	abs, _ := filepath.Abs(testdata + "failure.ndjson")
	peer := filepath.Base(plugintest.PeerCommand(abs, "", "").Argv[0]) // the replay peer, or this test binary playing it
	want := peer + " exited with status 1 during the turn: replaypeer: " + abs +
		": runtime exit (error) at entry 4 (line 5, runtime_exit): ConnectError: [resource_exhausted] You've hit your usage limit"
	if term.Status != sdk.TurnFailed || term.Failure == nil || term.Failure.Code != "provider_exited" || term.Failure.Message != want || !term.ThreadUsable {
		t.Fatalf("terminal: %+v (failure %+v)\nwant failed, usable: %s", term, term.Failure, want)
	}
	s.StartTurn(t, "Try again: say hello.")
	evs := s.WaitTurn(t)
	if term := terminal(t, evs); term.Status != sdk.TurnCompleted || plugintest.ItemText(evs, "", sdk.ItemAssistantMessage) != "Hello!" {
		t.Fatalf("the turn after: %+v %q", term, plugintest.ItemText(evs, "", sdk.ItemAssistantMessage))
	}
	s.Close(t)
}

// A process that fails before naming its chat still starts and ends its
// turn, so the host can end the run.
func TestFailureBeforeInit(t *testing.T) {
	p := start(t)
	s, _ := open(t, p, "failure_before_init")
	s.StartTurn(t, "Say hello.")
	evs := s.WaitTurn(t)
	if ts := only(evs, sdk.EventTurnStarted, ""); len(ts) != 1 || ts[0].ClientTurnID != "client-turn-1" {
		t.Fatalf("turn_started: %+v", ts)
	}
	if term := terminal(t, evs); term.Status != sdk.TurnFailed || !strings.Contains(term.Failure.Message, "Authentication required") {
		t.Fatalf("terminal: %+v", term)
	}
	s.Close(t)
}

// A result with is_error fails the turn with its text.
func TestErrorResult(t *testing.T) {
	p := start(t)
	s, _ := open(t, p, "error_result")
	s.StartTurn(t, "Say hello.")
	term := terminal(t, s.WaitTurn(t))
	if term.Status != sdk.TurnFailed || term.Failure == nil || term.Failure.Code != "error" ||
		!strings.Contains(term.Failure.Message, "context length exceeded") || !term.ThreadUsable {
		t.Fatalf("terminal: %+v", term)
	}
	s.Close(t)
}

// Every tool variant, with --force (the runtime policy "force"): commands
// and their exit, file changes, reads, searches, the to-do list, MCP and
// generic function calls, an unknown tool; results success, error; lines
// that are no events are diagnostics and the turn goes on.
func TestToolVariants(t *testing.T) {
	p := start(t)
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "old.log"), []byte("old\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := p.OpenWith(t, sdk.OpenSessionRequest{Cwd: ws, RuntimePolicy: "force",
		Command: plugintest.PeerCommand(testdata+"tools.ndjson", ws, filepath.Join(t.TempDir(), "cursor"))})
	s.StartTurn(t, "Look around, tidy notes.txt and check the build.")
	evs := s.WaitTurn(t)
	type item struct {
		kind   sdk.ItemKind
		title  string
		status sdk.Status
	}
	var got []item
	for _, ev := range only(evs, sdk.EventItemCompleted, "") {
		if ev.ItemKind != sdk.ItemAssistantMessage && ev.ItemKind != sdk.ItemUserMessage {
			got = append(got, item{ev.ItemKind, ev.Title, ev.Status})
		}
	}
	want := []item{
		{sdk.ItemToolCall, "List .", sdk.ItemDone},
		{sdk.ItemToolCall, "Read notes.txt", sdk.ItemDone},
		{sdk.ItemToolCall, "Read missing.txt", sdk.ItemFailed},
		{sdk.ItemToolCall, "Grep milk .", sdk.ItemDone},
		{sdk.ItemToolCall, "Glob **/*.txt", sdk.ItemDone},
		{sdk.ItemFileChange, "Edit notes.txt", sdk.ItemDone},
		{sdk.ItemFileChange, "Delete old.log", sdk.ItemDone},
		{sdk.ItemToolCall, "Update the to-do list", sdk.ItemDone},
		{sdk.ItemCommandExecution, "go build ./...", sdk.ItemDone},
		{sdk.ItemCommandExecution, "go vet ./...", sdk.ItemFailed},
		{sdk.ItemToolCall, "web/fetch", sdk.ItemDone},
		{sdk.ItemToolCall, "web_search", sdk.ItemDone},
		{sdk.ItemToolCall, "webFetch", sdk.ItemDone},
	}
	if !slices.Equal(got, want) {
		t.Errorf("items:\n got %+v\nwant %+v", got, want)
	}
	for _, ev := range only(evs, sdk.EventItemCompleted, "") {
		switch ev.ItemRef {
		case "call_shell_fail":
			var d map[string]any
			_ = json.Unmarshal(ev.Detail, &d)
			if d["exitCode"] != float64(1) || ev.Text != "vet: main.go:3: unreachable code\n" {
				t.Errorf("failed command: detail %s, text %q", ev.Detail, ev.Text)
			}
		case "call_read_missing":
			if ev.Text != "File not found: missing.txt" {
				t.Errorf("failed read says %q", ev.Text)
			}
		}
	}
	diags := only(evs, sdk.EventDiagnostic, "")
	if len(diags) != 3 {
		t.Errorf("diagnostics = %d, want 3 (a line that is no event, an object without a type, an unknown event type): %+v", len(diags), diags)
	}
	if got := plugintest.ItemText(evs, "", sdk.ItemAssistantMessage); got != "Looking around.Tidied notes.txt; go vet found unreachable code." {
		t.Errorf("assistant text = %q", got)
	}
	if term := terminal(t, evs); term.Status != sdk.TurnCompleted {
		t.Errorf("terminal: %+v", term)
	}
	if _, err := os.Stat(filepath.Join(ws, "old.log")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("old.log still there: %v", err)
	}
	s.Close(t)
}

// The task tool call is a subagent item under the turn.
func TestSubagent(t *testing.T) {
	p := start(t)
	s, _ := open(t, p, "subagent")
	s.StartTurn(t, "Ask a helper agent to say hi")
	evs := s.WaitTurn(t)
	sub := only(evs, sdk.EventItemCompleted, sdk.ItemSubagent)
	if len(sub) != 1 || sub[0].Title != "Say hi" || sub[0].Status != sdk.ItemDone || !strings.Contains(string(sub[0].Detail), "Hi there!") {
		t.Fatalf("subagent item: %+v", sub)
	}
	if term := terminal(t, evs); term.Status != sdk.TurnCompleted {
		t.Errorf("terminal: %+v", term)
	}
	s.Close(t)
}

// Without --force the CLI refuses a command itself: no request is opened,
// the command item is declined, and the turn completes.
func TestNoApprovalChannel(t *testing.T) {
	p := start(t)
	s, _ := open(t, p, "approvals_none")
	s.StartTurn(t, "Run make test")
	evs := s.WaitTurn(t)
	if n := len(only(evs, sdk.EventRequestOpened, "")); n != 0 {
		t.Errorf("%d requests opened", n)
	}
	cmd := only(evs, sdk.EventItemCompleted, sdk.ItemCommandExecution)
	if len(cmd) != 1 || cmd[0].Status != sdk.ItemDeclined || !strings.Contains(cmd[0].Text, "allowlist") {
		t.Errorf("command: %+v", cmd)
	}
	err := p.RespondToRequest(context.Background(), sdk.RespondToRequestRequest{SessionID: s.ID, RequestRef: "any", Decision: sdk.DecisionAccept})
	if !errors.Is(err, sdk.ErrUnsupported) {
		t.Errorf("answering a request of a plugin without approvals: %v", err)
	}
	s.Close(t)
}

// A runtime policy the plugin does not know is refused before anything
// starts.
func TestUnknownRuntimePolicy(t *testing.T) {
	p := start(t)
	ws := t.TempDir()
	_, err := p.OpenSession(context.Background(), sdk.OpenSessionRequest{SessionID: "bad-policy", Cwd: ws, RuntimePolicy: "yes-please",
		Command: plugintest.PeerCommand(testdata+"simple.ndjson", ws, "")})
	if !errors.Is(err, sdk.ErrInvalid) {
		t.Fatalf("open: %v, want invalid", err)
	}
}

// TestStdoutClosedButAlive: a CLI that closes its stdout and lives on can
// no longer say anything; its turn does not wait for it to end by itself:
// it is stopped, and the turn fails saying so.
func TestStdoutClosedButAlive(t *testing.T) {
	p := start(t)
	ws := t.TempDir()
	s := p.OpenWith(t, sdk.OpenSessionRequest{Cwd: ws, Command: sdk.ProviderCommand{
		Argv: []string{"sh", "-c", `echo '{"type":"system","subtype":"init","session_id":"chat-1"}'; exec >&-; sleep 300`}}})
	s.StartTurn(t, "Say hello.")
	term := terminal(t, s.WaitTurn(t))
	if term.Status != sdk.TurnFailed || term.Failure == nil || term.Failure.Code != "provider_exited" {
		t.Fatalf("terminal: %+v (failure %+v)", term, term.Failure)
	}
}
