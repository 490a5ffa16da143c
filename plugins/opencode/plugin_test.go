package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/baton-run/baton/sdk"
	"github.com/baton-run/baton/sdk/plugintest"
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
	started := find(t, evs, func(ev sdk.RuntimeEvent) bool { return ev.Kind == sdk.EventTurnStarted })
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
	if got := deltas(evs, sdk.ItemAssistantMessage); got != "Hello from the replay agent." {
		t.Errorf("content deltas = %q; want the text once", got)
	}
	u := find(t, evs, func(ev sdk.RuntimeEvent) bool { return ev.Kind == sdk.EventUsage })
	if u.Usage == nil || u.Usage.InputTokens == 0 || u.Usage.OutputTokens == 0 || u.Usage.TotalTokens < u.Usage.InputTokens+u.Usage.OutputTokens {
		t.Errorf("usage = %+v", u.Usage)
	}
	if n := count(evs, func(ev sdk.RuntimeEvent) bool { return ev.Kind == sdk.EventDiagnostic }); n != 0 {
		t.Errorf("%d diagnostics: %s", n, plugintest.Kinds(evs))
	}
	checkItemsClosed(t, evs)
	checkRawFrames(t, evs)
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
	if err := p.CloseSession(context.Background(), s.ID); err != nil {
		t.Fatal(err)
	}
	evs := s.Until(t, "runtime exit", func(ev sdk.RuntimeEvent) bool { return ev.Kind == sdk.EventRuntimeExited })
	if last := evs[len(evs)-1]; last.Failure == nil || !strings.Contains(last.Failure.Message, "exit status 3") {
		t.Errorf("runtime exit %+v; want the peer's mismatch exit (3)", last)
	}
}

func find(t *testing.T, evs []sdk.RuntimeEvent, pred func(sdk.RuntimeEvent) bool) sdk.RuntimeEvent {
	t.Helper()
	for _, ev := range evs {
		if pred(ev) {
			return ev
		}
	}
	t.Fatalf("no such event in %s", plugintest.Kinds(evs))
	return sdk.RuntimeEvent{}
}

func count(evs []sdk.RuntimeEvent, pred func(sdk.RuntimeEvent) bool) int {
	n := 0
	for _, ev := range evs {
		if pred(ev) {
			n++
		}
	}
	return n
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

func deltas(evs []sdk.RuntimeEvent, kind sdk.ItemKind) string {
	var b strings.Builder
	for _, ev := range evs {
		if ev.Kind == sdk.EventContentDelta && ev.ItemKind == kind {
			b.WriteString(ev.Text)
		}
	}
	return b.String()
}

// checkItemsClosed: every item started is completed once.
func checkItemsClosed(t *testing.T, evs []sdk.RuntimeEvent) {
	t.Helper()
	open := map[string]bool{}
	for _, ev := range evs {
		switch ev.Kind {
		case sdk.EventItemStarted:
			if open[ev.ItemRef] {
				t.Errorf("item %s started twice", ev.ItemRef)
			}
			open[ev.ItemRef] = true
		case sdk.EventItemCompleted:
			if !open[ev.ItemRef] {
				t.Errorf("item %s completed but not open", ev.ItemRef)
			}
			delete(open, ev.ItemRef)
		}
	}
	for ref := range open {
		t.Errorf("item %s never completed", ref)
	}
}

// checkRawFrames: every event from the provider names its raw frame.
func checkRawFrames(t *testing.T, evs []sdk.RuntimeEvent) {
	t.Helper()
	for _, ev := range evs {
		if ev.RawFrame == 0 && ev.Kind != sdk.EventRequestResolved {
			t.Errorf("%s event without a raw frame", ev.Kind)
		}
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
