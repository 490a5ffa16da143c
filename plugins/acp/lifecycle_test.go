package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/baton-run/baton/sdk"
	"github.com/baton-run/baton/sdk/plugintest"
)

// turnStarted waits for the turn to have started at the provider.
func turnStarted(t *testing.T, s *plugintest.Session) sdk.RuntimeEvent {
	t.Helper()
	evs := s.Until(t, "turn started", func(ev sdk.RuntimeEvent) bool { return ev.Kind == sdk.EventTurnStarted })
	return evs[len(evs)-1]
}

// An interrupt is session/cancel; the agent ends the prompt with
// stopReason cancelled, which is the turn's only terminal event.
func TestInterrupt(t *testing.T) {
	p := plugintest.Start(t, plugintest.Build(t, "."))
	s := p.Open(t, filepath.Join(testdata, "turn_interrupt.ndjson"), t.TempDir())
	s.StartTurn(t, "Write a very long essay about rivers.")
	started := turnStarted(t, s)
	if started.ClientTurnID != "client-turn-1" {
		t.Errorf("turn_started names client turn %q, want client-turn-1", started.ClientTurnID)
	}
	s.Interrupt(t, started.TurnRef)
	evs := s.WaitTurn(t)
	term := evs[len(evs)-1]
	if term.Status != sdk.TurnInterrupted || !term.ThreadUsable || term.TurnRef != started.TurnRef {
		t.Fatalf("terminal = %+v; want interrupted, usable, turn %s", term, started.TurnRef)
	}
	s.Close(t)
}

// Steering by restart, at the adapter level: the first turn is cancelled,
// and a new prompt carries the steering message.
func TestRestartAfterCancel(t *testing.T) {
	p := plugintest.Start(t, plugintest.Build(t, "."))
	s := p.Open(t, filepath.Join(testdata, "steering_restart_fallback.ndjson"), t.TempDir())
	s.StartTurn(t, "Tell me a long story about a lighthouse.")
	// The agent says which commands it has before the cancel comes (the
	// transcript's order): the cancel waits for it.
	s.Until(t, "the agent's commands", func(ev sdk.RuntimeEvent) bool {
		return ev.Kind == sdk.EventSessionState && ev.Title == "available_commands_update"
	})
	if err := s.Steer("", "x"); err == nil {
		t.Fatal("ACP has no native steering, but SteerTurn succeeded")
	}
	s.Interrupt(t, "")
	if evs := s.WaitTurn(t); evs[len(evs)-1].Status != sdk.TurnInterrupted {
		t.Fatalf("first turn: %+v (failure %+v)", evs[len(evs)-1], evs[len(evs)-1].Failure)
	}
	s.StartTurn(t, "Actually, just say hi.")
	evs := s.WaitTurn(t)
	if term := evs[len(evs)-1]; term.Status != sdk.TurnCompleted || plugintest.ItemText(evs, "", sdk.ItemAssistantMessage) != "Hi! Keeping it short." {
		t.Fatalf("second turn: %s %q", term.Status, plugintest.ItemText(evs, "", sdk.ItemAssistantMessage))
	}
	s.Close(t)
}

// A permission request allowed by the client: the agent writes the file
// through fs/write_text_file inside the cwd.
func TestApprovalAllowed(t *testing.T) {
	p := plugintest.Start(t, plugintest.Build(t, "."))
	ws := t.TempDir()
	s := p.Open(t, filepath.Join(testdata, "approval_accept.ndjson"), ws)
	s.Answer = sdk.DecisionAccept
	s.StartTurn(t, "Write allowed.txt")
	evs := s.WaitTurn(t)
	var opened, resolved int
	for _, ev := range evs {
		switch ev.Kind {
		case sdk.EventRequestOpened:
			opened++
			if ev.RequestKind != "permission" || len(ev.Options) == 0 {
				t.Errorf("request: %+v", ev)
			}
		case sdk.EventRequestResolved:
			resolved++
			if ev.Status != sdk.DecisionAccept {
				t.Errorf("resolved as %q", ev.Status)
			}
		}
	}
	if opened != 1 || resolved != 1 || evs[len(evs)-1].Status != sdk.TurnCompleted {
		t.Fatalf("opened %d resolved %d, turn %s", opened, resolved, evs[len(evs)-1].Status)
	}
	if b, err := os.ReadFile(filepath.Join(ws, "allowed.txt")); err != nil || string(b) != "written with permission\n" {
		t.Fatalf("allowed.txt = %q, %v", b, err)
	}
	s.Close(t)
}

// An agent that dies mid-turn: the turn fails with how it ended, as the
// replay peer plays it (the transcript's runtime_exit): its exit code and
// the end of its stderr, or the signal that killed it.
func TestAgentDiesMidTurn(t *testing.T) {
	// simple.ndjson up to the prompt, then the agent's end.
	b, err := os.ReadFile(filepath.Join(testdata, "simple.ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	var head []string
	for _, l := range strings.SplitAfter(string(b), "\n") {
		head = append(head, l)
		if strings.Contains(l, `"type":"expect_outbound"`) && strings.Contains(l, `"method":"session/prompt"`) {
			break
		}
	}
	bin := plugintest.Build(t, ".")
	for name, tc := range map[string]struct{ exit, want string }{
		"exit code and stderr": {`{"type":"runtime_exit","status":"error","code":2,"stderr":"Error: the API key was revoked\n"}`,
			"the agent exited with status 2 during the turn: Error: the API key was revoked"},
		"killed": {`{"type":"runtime_exit","status":"error","signal":"SIGKILL"}`, "the agent was killed by SIGKILL during the turn"},
	} {
		t.Run(name, func(t *testing.T) {
			f := filepath.Join(t.TempDir(), "dies.ndjson")
			if err := os.WriteFile(f, []byte(strings.Join(head, "")+tc.exit+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			p := plugintest.Start(t, bin)
			s := p.Open(t, f, t.TempDir())
			s.StartTurn(t, "Say hello.")
			evs := s.WaitTurn(t)
			term := evs[len(evs)-1]
			if term.Status != sdk.TurnFailed || term.Failure == nil || term.Failure.Message != tc.want {
				t.Fatalf("terminal %s %+v; want failed with %q", term.Status, term.Failure, tc.want)
			}
		})
	}
}
