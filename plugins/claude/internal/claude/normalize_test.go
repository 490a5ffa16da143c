package claude

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/baton-run/baton/sdk"
)

// feed runs frames (one per line) through n the way a session does:
// can_use_tool control requests are opened, other control frames skipped.
func feed(t testing.TB, n *normalizer, lines [][]byte) []sdk.RuntimeEvent {
	var evs []sdk.RuntimeEvent
	for _, line := range lines {
		f, err := decodeFrame(line)
		if err != nil {
			evs = append(evs, malformed(err, line))
			continue
		}
		switch f.Type {
		case typeControlRequest:
			var body controlRequestBody
			if json.Unmarshal(f.Request, &body) == nil && body.Subtype == "can_use_tool" {
				_, out := n.openRequest(f.RequestID, body, f.raw)
				evs = append(evs, out...)
			}
		case typeControlResponse, typeControlCancel:
		default:
			evs = append(evs, n.frame(f)...)
		}
	}
	return evs
}

func readLines(t testing.TB, file string) [][]byte {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for _, l := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		out = append(out, l)
	}
	return out
}

// A background subagent (recorded from 2.1.332, which starts Task agents
// in the background unless the model says otherwise): the Task's tool
// result comes at once ("Async agent launched") and does not end the
// child's turn; its task_notification does. (The Task item completes with
// that first result: the child thread carries the agent's life, which may
// outlast the root turn.) The main agent's own tool use in between stays
// on the root.
func TestBackgroundSubagent(t *testing.T) {
	n := newNormalizer("", "/ws")
	n.startTurn("turn-1", "client-1")
	evs := feed(t, n, readLines(t, "testdata/background_subagent.ndjson"))
	root := "fa6101d1-f2a8-4e58-9b47-23af5bb9ace6"
	child := "toolu_000000000000000000000001"
	var got []string
	for _, ev := range evs {
		switch ev.Kind {
		case sdk.EventThreadStarted, sdk.EventTurnStarted, sdk.EventTurnTerminal, sdk.EventRequestOpened:
			got = append(got, fmt.Sprintf("%s %s %s %s", ev.Kind, ev.ThreadRef, ev.TurnRef, sdk.StatusWord(ev.Status)))
		case sdk.EventItemCompleted:
			got = append(got, fmt.Sprintf("%s %s %s %s %s", ev.Kind, ev.ThreadRef, ev.ItemKind, ev.Title, sdk.StatusWord(ev.Status)))
		case sdk.EventDiagnostic:
			t.Errorf("diagnostic %s: %s", ev.Title, ev.Text)
		}
	}
	want := []string{
		"thread_started " + root + "  ",
		"turn_started " + root + " turn-1 ",
		"thread_started " + child + "  ",
		"turn_started " + child + " " + child + "/turn ",
		"item_completed " + root + " subagent Task: Write a note completed",
		"request_opened " + root + " turn-1 ",
		"item_completed " + child + " assistant_message  completed",
		"turn_terminal " + child + " " + child + "/turn completed",
		"item_completed " + root + " file_change note.txt completed",
		"item_completed " + root + " assistant_message  completed",
		"turn_terminal " + root + " turn-1 completed",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for _, ev := range evs {
		if ev.Kind == sdk.EventThreadStarted && ev.ThreadRef == child && (ev.ParentThreadRef != root || ev.ParentItemRef != child) {
			t.Errorf("child thread_started %+v; want parent %s and its Task item", ev, root)
		}
	}
}

// A steer the CLI drops from its queue (command_lifecycle "cancelled")
// is not waited for: the next result ends the turn.
func TestSteerDroppedFromTheQueue(t *testing.T) {
	n := newNormalizer("s", "/ws")
	n.startTurn("t1", "c1")
	n.steer()
	evs := feed(t, n, [][]byte{
		[]byte(`{"type":"user","message":{"role":"user","content":"go"},"session_id":"s","parent_tool_use_id":null,"uuid":"u1","isReplay":true}`),
		[]byte(`{"type":"command_lifecycle","command_uuid":"u2","state":"cancelled","session_id":"s","uuid":"x"}`),
		[]byte(`{"type":"result","subtype":"success","is_error":false,"session_id":"s"}`),
	})
	if len(evs) == 0 || evs[len(evs)-1].Kind != sdk.EventTurnTerminal || n.activeTurn() != "" {
		t.Fatalf("events %+v; want the turn ended", evs)
	}
	// Without the cancellation the result would not have ended it.
	n.startTurn("t2", "c2")
	n.steer()
	evs = feed(t, n, [][]byte{
		[]byte(`{"type":"user","message":{"role":"user","content":"go"},"session_id":"s","parent_tool_use_id":null,"uuid":"u3","isReplay":true}`),
		[]byte(`{"type":"result","subtype":"success","is_error":false,"session_id":"s"}`),
	})
	if len(evs) != 0 || n.activeTurn() != "t2" {
		t.Fatalf("events %+v; want the turn still waiting for its steer", evs)
	}
}

func TestResultStatus(t *testing.T) {
	i529 := 529
	for _, c := range []struct {
		name        string
		r           resultFrame
		interrupted bool
		status      sdk.Status
		code        string
	}{
		{"success", resultFrame{Subtype: "success", TerminalReason: "completed"}, false, sdk.TurnCompleted, ""},
		{"success with is_error", resultFrame{Subtype: "success", IsError: true, Result: "API Error"}, false, sdk.TurnFailed, "error"},
		{"api error", resultFrame{Subtype: "success", IsError: true, APIErrorStatus: &i529}, false, sdk.TurnFailed, "api_error_529"},
		{"aborted", resultFrame{Subtype: "error_during_execution", IsError: true, TerminalReason: "aborted_tools"}, false, sdk.TurnInterrupted, ""},
		{"interrupted, no reason", resultFrame{Subtype: "error_during_execution", IsError: true}, true, sdk.TurnInterrupted, ""},
		{"error, not interrupted", resultFrame{Subtype: "error_during_execution", IsError: true, Errors: []string{"boom"}}, false, sdk.TurnFailed, "error_during_execution"},
		{"max turns", resultFrame{Subtype: "error_max_turns", IsError: true, TerminalReason: "max_turns"}, false, sdk.TurnFailed, "error_max_turns"},
	} {
		t.Run(c.name, func(t *testing.T) {
			status, f := resultStatus(c.r, c.interrupted)
			if status != c.status || (f == nil) != (c.code == "") || (f != nil && (f.Code != c.code || f.Message == "")) {
				t.Errorf("status %s, failure %+v; want %s, code %q", status, f, c.status, c.code)
			}
		})
	}
}

// A CLI that exits mid-turn: the subagent's turn, the root's open tool
// item and the root turn all end failed.
func TestExited(t *testing.T) {
	n := newNormalizer("sess", "/ws")
	n.startTurn("t1", "c1")
	evs := feed(t, n, [][]byte{
		[]byte(`{"type":"assistant","message":{"role":"assistant","content":[{"type":"tool_use","id":"tu1","name":"Task","input":{"prompt":"p"}}]},"parent_tool_use_id":null,"session_id":"sess","uuid":"a1"}`),
		[]byte(`{"type":"assistant","message":{"role":"assistant","content":[{"type":"tool_use","id":"tu2","name":"Bash","input":{"command":"sleep 9"}}]},"parent_tool_use_id":"tu1","session_id":"sess","uuid":"a2"}`),
	})
	evs = append(evs, n.exited("claude exited")...)
	var ends []string
	for _, ev := range evs {
		if ev.Kind == sdk.EventTurnTerminal || ev.Kind == sdk.EventItemCompleted {
			ends = append(ends, fmt.Sprintf("%s %s %s %s", ev.Kind, ev.ThreadRef, ev.ItemRef, sdk.StatusWord(ev.Status)))
		}
	}
	want := "item_completed tu1 tu2 failed|turn_terminal tu1  failed|item_completed sess tu1 failed|turn_terminal sess  failed"
	if got := strings.Join(ends, "|"); got != want {
		t.Errorf("ends %s\nwant %s", got, want)
	}
	if n.activeTurn() != "" {
		t.Errorf("a turn is still active")
	}
}

// A frame before the CLI named its session, and a result with no turn,
// are reported, not bound.
func TestOutsideATurn(t *testing.T) {
	n := newNormalizer("", "/ws")
	evs := feed(t, n, [][]byte{
		[]byte(`{"type":"result","subtype":"success","is_error":false,"session_id":"s"}`),
	})
	if len(evs) != 2 || evs[0].Kind != sdk.EventThreadStarted || evs[1].Kind != sdk.EventDiagnostic {
		t.Fatalf("events %+v; want the thread and a diagnostic", evs)
	}
	n = newNormalizer("", "/ws")
	n.startTurn("t1", "")
	evs = feed(t, n, [][]byte{[]byte(`{"type":"assistant","message":{"role":"assistant","content":"hi"}}`)})
	if len(evs) != 1 || evs[0].Kind != sdk.EventDiagnostic {
		t.Fatalf("events %+v; want a diagnostic for a frame before the session id", evs)
	}
}

func TestReplyToAQuestion(t *testing.T) {
	q := &permissionRequest{id: "r1", body: controlRequestBody{ToolName: "AskUserQuestion",
		Input: json.RawMessage(`{"questions":[{"question":"Which?"}],"answers":{"Old?":"yes"}}`)}}
	resp, err := reply(q, sdk.DecisionAnswer, map[string]string{"Which?": "that one"})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(resp)
	if got := string(b); got != `{"behavior":"allow","updatedInput":{"answers":{"Old?":"yes","Which?":"that one"},"questions":[{"question":"Which?"}]}}` {
		t.Errorf("answer %s", got)
	}
	if _, err := reply(q, "maybe", nil); err == nil {
		t.Error("an unknown decision was answered")
	}
	b, _ = json.Marshal(must(reply(&permissionRequest{}, sdk.DecisionAccept, nil)))
	if string(b) != `{"behavior":"allow","updatedInput":{}}` {
		t.Errorf("allow with no input: %s", b)
	}
}

// Accept for the session: the CLI's suggestions, every one kept to the
// session (never written to a settings file).
func TestReplyAcceptForSession(t *testing.T) {
	q := &permissionRequest{id: "r1", body: controlRequestBody{ToolName: "Bash", Input: json.RawMessage(`{"command":"ls"}`),
		PermissionSuggestions: []json.RawMessage{
			json.RawMessage(`{"type":"addRules","rules":[{"toolName":"Bash","ruleContent":"ls"}],"behavior":"allow","destination":"localSettings"}`),
			json.RawMessage(`"not an object"`),
			json.RawMessage(`{"type":"setMode","mode":"acceptEdits","destination":"session"}`),
		}}}
	b, _ := json.Marshal(must(reply(q, sdk.DecisionAcceptForSession, nil)))
	want := `{"behavior":"allow","updatedInput":{"command":"ls"},"updatedPermissions":[` +
		`{"behavior":"allow","destination":"session","rules":[{"toolName":"Bash","ruleContent":"ls"}],"type":"addRules"},` +
		`{"destination":"session","mode":"acceptEdits","type":"setMode"}]}`
	if string(b) != want {
		t.Errorf("answer\n%s\nwant\n%s", b, want)
	}
}

func must(v any, err error) any {
	if err != nil {
		panic(err)
	}
	return v
}

func TestForkID(t *testing.T) {
	a, b := forkID("s", "e1"), forkID("s", "e2")
	if a == b || a != forkID("s", "e1") || len(a) != 36 || a[14] != '8' {
		t.Errorf("fork ids %s %s; want distinct, stable version-8 UUIDs", a, b)
	}
}

// maxSeedFrame bounds the frames seeded into the fuzzers.
const maxSeedFrame = 4 << 10

// inboundFrames are the frames a transcript's CLI sends, as lines.
func inboundFrames(f *testing.F, file string) [][]byte {
	fh, err := os.Open(file)
	if err != nil {
		f.Fatal(err)
	}
	defer fh.Close()
	var out [][]byte
	sc := bufio.NewScanner(fh)
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		var e struct {
			Type  string          `json:"type"`
			Frame json.RawMessage `json:"frame"`
		}
		if json.Unmarshal(sc.Bytes(), &e) == nil && e.Type == "emit_inbound" {
			var buf bytes.Buffer
			// The big frames (the initialize answer, system/init with
			// every tool and skill) only slow the fuzzer down.
			if json.Compact(&buf, e.Frame) == nil && buf.Len() <= maxSeedFrame {
				out = append(out, buf.Bytes())
			}
		}
	}
	return out
}

func transcripts(f *testing.F) []string {
	files, _ := filepath.Glob("../../../../testdata/claude/*.ndjson")

	if len(files) == 0 {
		f.Fatal("no claude transcripts")
	}
	return files
}

func FuzzDecodeFrame(f *testing.F) {
	for _, file := range transcripts(f) {
		for _, fr := range inboundFrames(f, file) {
			f.Add(fr)
		}
	}
	for _, frames := range limitSeeds(f) {
		for _, fr := range frames {
			f.Add(fr)
		}
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		fr, err := decodeFrame(line)
		if err != nil {
			return
		}
		if fr.Type == "" {
			t.Fatalf("decoded a frame without a type from %q", line)
		}
		if len(fr.Message) > 0 {
			var m message
			if json.Unmarshal(fr.Message, &m) == nil {
				_, _ = m.blocks()
			}
		}
		n := newNormalizer("", "/ws")
		n.startTurn("t", "c")
		_ = n.frame(fr)
	})
}

// FuzzNormalize feeds a whole CLI session (frames, one per line; a line
// "#steer" steers, "#interrupt" interrupts the turn and "#ack" is the CLI's
// acknowledgement of the interrupt) and checks what the
// host relies on: a thread is announced before anything names it, the root
// once and every other one as its child; a turn starts before its events
// and ends once; when the CLI exits, nothing is left open.
func FuzzNormalize(f *testing.F) {
	for _, file := range transcripts(f) {
		f.Add(bytes.Join(inboundFrames(f, file), []byte("\n")))
	}
	for _, frames := range limitSeeds(f) {
		f.Add(bytes.Join(frames, []byte("\n")))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		n := newNormalizer("", "/ws")
		var evs []sdk.RuntimeEvent
		turns := 0
		for i, line := range bytes.Split(data, []byte("\n")) {
			if i > 500 {
				break
			}
			switch string(line) {
			case "#steer":
				n.steer()
				continue
			case "#interrupt":
				n.interrupting()
				continue
			case "#ack":
				evs = append(evs, n.interruptAcknowledged(n.activeTurn(), 0)...)
				continue
			}
			if n.activeTurn() == "" {
				turns++
				evs = append(evs, n.startTurn(fmt.Sprintf("turn-%d", turns), "")...)
			}
			evs = append(evs, feed(t, n, [][]byte{line})...)
		}
		evs = append(evs, n.exited("gone")...)

		known := map[string]bool{}
		roots := 0
		started, ended := map[string]bool{}, map[string]bool{}
		open := map[string]bool{}
		for i, ev := range evs {
			switch ev.Kind {
			case sdk.EventThreadStarted:
				if ev.ThreadRef == "" || known[ev.ThreadRef] {
					t.Fatalf("event %d: thread %q announced again or without an id", i, ev.ThreadRef)
				}
				if ev.ParentThreadRef == "" {
					roots++
				} else if !known[ev.ParentThreadRef] {
					t.Fatalf("event %d: thread %s names an unknown parent %s", i, ev.ThreadRef, ev.ParentThreadRef)
				}
				if roots > 1 {
					t.Fatalf("event %d: a second root thread %s", i, ev.ThreadRef)
				}
				known[ev.ThreadRef] = true
				continue
			case sdk.EventDiagnostic, sdk.EventRateLimit:
				continue
			}
			if !known[ev.ThreadRef] {
				t.Fatalf("event %d (%s) on thread %q before it was announced", i, ev.Kind, ev.ThreadRef)
			}
			key := ev.ThreadRef + "/" + ev.TurnRef
			switch ev.Kind {
			case sdk.EventTurnStarted:
				if started[key] {
					t.Fatalf("event %d: turn %s started twice", i, key)
				}
				started[key] = true
			case sdk.EventTurnTerminal:
				if !started[key] || ended[key] {
					t.Fatalf("event %d: turn %s ended without a start or twice", i, key)
				}
				ended[key] = true
				checkLimit(t, i, ev)
			case sdk.EventItemStarted:
				open[ev.ThreadRef+"/"+ev.ItemRef] = true
			case sdk.EventItemCompleted:
				delete(open, ev.ThreadRef+"/"+ev.ItemRef)
			}
			if ev.Kind != sdk.EventTurnStarted && ev.TurnRef != "" && !started[key] && ev.Kind != sdk.EventItemUpdated {
				t.Fatalf("event %d (%s) of turn %s before it started", i, ev.Kind, key)
			}
		}
		if len(open) > 0 {
			t.Fatalf("items left open after the CLI exited: %v", open)
		}
		for k := range started {
			if !ended[k] {
				t.Fatalf("turn %s never ended", k)
			}
		}
	})
}

// Recorded in a probe: an interrupt while the host's turn waits on a
// background subagent whose tool use waits on a permission. The CLI
// withdraws the request, stops the task, acknowledges, and then sends the
// subagent's tool result ("The user doesn't want to proceed…"): the
// subagent's turn, and its item, ended already; nothing more is reported.
func TestToolResultAfterTheSubagentEnded(t *testing.T) {
	n := newNormalizer("sess", "/ws")
	n.startTurn("t1", "c1")
	evs := feed(t, n, [][]byte{
		[]byte(`{"type":"assistant","message":{"role":"assistant","content":[{"type":"tool_use","id":"tu1","name":"Agent","input":{"prompt":"p"}}]},"parent_tool_use_id":null,"session_id":"sess","uuid":"a1"}`),
		[]byte(`{"type":"system","subtype":"task_started","task_id":"k1","task_type":"local_agent","tool_use_id":"tu1","is_backgrounded":true,"session_id":"sess"}`),
		[]byte(`{"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"tu1","content":"Async agent launched"}]},"parent_tool_use_id":null,"session_id":"sess","uuid":"u1"}`),
		[]byte(`{"type":"result","subtype":"success","is_error":false,"terminal_reason":"completed","session_id":"sess"}`),
		[]byte(`{"type":"assistant","message":{"role":"assistant","content":[{"type":"tool_use","id":"tu2","name":"Write","input":{"file_path":"/ws/n.txt","content":"x"}}]},"parent_tool_use_id":"tu1","session_id":"sess","uuid":"a2"}`),
	})
	n.interrupting()
	evs = append(evs, feed(t, n, [][]byte{
		[]byte(`{"type":"system","subtype":"task_notification","task_id":"k1","tool_use_id":"tu1","status":"stopped","session_id":"sess"}`),
	})...)
	evs = append(evs, n.interruptAcknowledged("t1", 0)...)
	evs = append(evs, feed(t, n, [][]byte{
		[]byte(`{"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"tu2","content":"The user doesn't want to proceed with this tool use.","is_error":true}]},"parent_tool_use_id":"tu1","session_id":"sess","uuid":"u2"}`),
		[]byte(`{"type":"user","message":{"role":"user","content":[{"type":"text","text":"[Request interrupted by user for tool use]"}]},"parent_tool_use_id":"tu1","session_id":"sess","uuid":"u3"}`),
	})...)
	var ends []string
	for _, ev := range evs {
		switch ev.Kind {
		case sdk.EventDiagnostic:
			t.Errorf("diagnostic %s", ev.Title)
		case sdk.EventTurnTerminal, sdk.EventItemCompleted:
			ends = append(ends, fmt.Sprintf("%s %s %s %s", ev.Kind, ev.ThreadRef, ev.ItemRef, sdk.StatusWord(ev.Status)))
		}
	}
	want := "item_completed sess tu1 completed|item_completed tu1 tu2 failed|turn_terminal tu1  interrupted|turn_terminal sess  interrupted"
	if got := strings.Join(ends, "|"); got != want {
		t.Errorf("ends %s\nwant %s", got, want)
	}
	if n.activeTurn() != "" {
		t.Errorf("the turn is still active")
	}
}
