package domain

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-run/baton/sdk"
)

var (
	mcpFS   = MCPServerRef{Name: "fs", Transport: "stdio", Revision: 1}
	mcpWeb  = MCPServerRef{Name: "web", Transport: "http", Revision: 2}
	mcpMine = MCPServerRef{Name: "mine", Transport: "stdio", Thread: "thr", Revision: 3}
	mcpElse = MCPServerRef{Name: "else", Transport: "stdio", Thread: "thr_other", Revision: 4}
)

// openMCP is the MCP servers of the open_session effect of d (and false
// when d opens none).
func openMCP(d Decision) ([]MCPServerRef, bool) {
	for _, e := range d.Effects {
		if o, ok := e.(OpenSession); ok {
			return o.MCP, true
		}
	}
	return nil, false
}

// finishOpen records the session d opened, with the servers the host
// passed on (its effect's), and ends the run's turn.
func (w *world) finishOpen(d Decision, turn string) {
	w.t.Helper()
	for _, e := range d.Effects {
		if o, ok := e.(OpenSession); ok {
			w.must(*Outcome(w.thread, o, Result{Opened: RecordSessionOpened{ProviderRef: "p", ThreadRef: "pt", MCP: o.MCP}}))
			w.runTurn(o.SessionID, turn)
			return
		}
	}
	w.t.Fatal("the decision opens no session")
}

// runTurn runs a turn in session to its end: the decision at its end.
func (w *world) runTurn(session, turn string) Decision {
	w.ev(session, sdk.RuntimeEvent{Kind: sdk.EventTurnStarted, ThreadRef: "pt", TurnRef: turn})
	return w.ev(session, sdk.RuntimeEvent{Kind: sdk.EventTurnTerminal, TurnRef: turn, Status: sdk.TurnCompleted})
}

// A run's session gets the servers configured for every thread and for
// this one; a run's own choice gets those it names, or none; a session is
// kept while its servers are the run's, and replaced (resuming the
// provider's conversation) when they changed; the session records them.
func TestMCPServersOfARun(t *testing.T) {
	w := newWorld(t)
	w.holdSessions = true
	w.mcp = []MCPServerRef{mcpElse, mcpFS, mcpMine, mcpWeb}

	d := w.send("one")
	got, ok := openMCP(d)
	if diff := cmp.Diff([]MCPServerRef{mcpFS, mcpMine, mcpWeb}, got); !ok || diff != "" {
		t.Fatalf("the configured servers of this thread (-want +got):\n%s", diff)
	}
	w.finishOpen(d, "t1")
	if diff := cmp.Diff([]MCPServerRef{mcpFS, mcpMine, mcpWeb}, w.thread.ProviderSessions[0].MCP); diff != "" {
		t.Fatalf("the session records its servers (-want +got):\n%s", diff)
	}

	// The same servers: the live session takes the next run.
	d = w.send("two")
	if _, ok := openMCP(d); ok {
		t.Fatalf("a run with the session's servers opened another: %s", types(d))
	}
	w.runTurn("ses_1", "t2")

	// A run of its own choice: a new session, the live one retired saying why.
	d = w.must(Command{ID: "m3", ThreadID: "thr", Payload: DispatchMessage{Text: "three", Mode: ModeQueueAfterActive,
		MCP: &MCPChoice{Names: []string{"web", "fs"}}}})
	got, ok = openMCP(d)
	if diff := cmp.Diff([]MCPServerRef{mcpFS, mcpWeb}, got); !ok || diff != "" {
		t.Fatalf("the run's own servers, sorted (-want +got):\n%s", diff)
	}
	if s := w.thread.ProviderSessions[0]; s.EndReason != "its MCP servers changed (now fs, web)" {
		t.Fatalf("the live session ended %q", s.EndReason)
	}
	if diff := cmp.Diff(&MCPChoice{Names: []string{"web", "fs"}}, w.thread.Runs[2].MCP); diff != "" {
		t.Fatalf("the run keeps its choice (-want +got):\n%s", diff)
	}
	w.must(*Outcome(w.thread, d.Effects[len(d.Effects)-2], Result{Opened: RecordSessionOpened{ProviderRef: "p", ThreadRef: "pt",
		MCP: []MCPServerRef{mcpFS, mcpWeb}}}))

	// A server removed since: the run goes without it, saying so.
	w.mcp = []MCPServerRef{mcpWeb}
	d = w.must(Command{ID: "m4", ThreadID: "thr", Payload: DispatchMessage{Text: "four", Mode: ModeQueueAfterActive,
		MCP: &MCPChoice{Names: []string{"web"}}}})
	w.mcp = []MCPServerRef{mcpFS}
	d = w.must(Command{ID: "m5", ThreadID: "thr", Payload: DispatchMessage{Text: "five", Mode: ModeQueueAfterActive,
		MCP: &MCPChoice{Names: []string{"fs"}}}})
	_ = d
	w.mcp = []MCPServerRef{}
	// run four starts once three ends.
	d = w.runTurn("ses_2", "t3")
	want := "an MCP server the run named is no longer configured"
	if !hasDiagnostic(d, want) {
		t.Fatalf("a removed server is left out silently: %s", types(d))
	}
	got, ok = openMCP(d)
	if !ok || len(got) != 0 {
		t.Fatalf("run four's servers: %v (opened: %v)", got, ok)
	}

	// None: no server at all, whatever is configured.
	w2 := newWorld(t)
	w2.mcp = []MCPServerRef{mcpFS}
	d = w2.must(Command{ID: "m", ThreadID: "thr", Payload: DispatchMessage{Text: "x", MCP: &MCPChoice{None: true}}})
	if got, ok := openMCP(d); !ok || got != nil {
		t.Fatalf("--no-mcp: %v", got)
	}
	// No servers configured, and a rollback's session: the configured ones.
	w3 := newWorld(t)
	if got, _ := openMCP(w3.send("x")); got != nil {
		t.Fatalf("a host with none configured: %v", got)
	}
	if th := (Thread{ID: "thr"}); th.runMCP("") != nil || th.lastRunMCP() != nil {
		t.Fatal("a thread without runs has a run's choice")
	}
}

func hasDiagnostic(d Decision, title string) bool {
	for _, e := range d.Events {
		if dr, ok := e.(DiagnosticRecorded); ok && dr.Title == title {
			return true
		}
	}
	return false
}

// A message's choice of servers is refused when it names a server the
// host has not configured (naming those it has), or both servers and none.
func TestMCPChoiceRefused(t *testing.T) {
	w := newWorld(t)
	for _, c := range []struct {
		mcp  []MCPServerRef
		c    MCPChoice
		want string
	}{
		{nil, MCPChoice{Names: []string{"fs"}}, `invalid command: mcp: no MCP server is named "fs" (configured: none; baton mcp add adds one)`},
		{[]MCPServerRef{mcpWeb, mcpFS}, MCPChoice{Names: []string{"fs", "db"}}, `invalid command: mcp: no MCP server is named "db" (configured: web, fs; baton mcp add adds one)`},
		{[]MCPServerRef{mcpFS}, MCPChoice{Names: []string{"fs"}, None: true}, "invalid command: mcp: choose MCP servers or none, not both"},
	} {
		w.mcp = c.mcp
		c := c
		_, err := w.decide(Command{ID: "m", ThreadID: "thr", Payload: DispatchMessage{Text: "x", MCP: &c.c}})
		if !errors.Is(err, ErrInvalid) || err.Error() != c.want {
			t.Errorf("%+v: %v, want %s", c.c, err, c.want)
		}
	}
}
