package domain

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-run/baton/sdk"
)

// leftBehind: a live session may take the provider's next run only while
// its conversation is the one the thread's binding goes on in. (The
// orchestrator's TestLeftBehind, moved with the decision.)
func TestLeftBehind(t *testing.T) {
	th := Thread{
		ProviderThreads: []ProviderThread{
			{ID: "pt1", SessionID: "s1", ProviderRef: "c1", Detached: true},
			{ID: "pt2", SessionID: "s2", ProviderRef: "c2"},
		},
		ProviderSessions: []ProviderSession{{ID: "s1"}, {ID: "s2"}, {ID: "s3", Resumed: "c1"}, {ID: "s4"}},
	}
	for _, c := range []struct {
		name    string
		b       ProviderBinding
		session string
		want    bool
	}{
		{"its conversation goes on", ProviderBinding{SessionID: "s2", ThreadRef: "c2"}, "s2", false},
		{"the conversation it started was left behind", ProviderBinding{SessionID: "s1"}, "s1", true},
		{"the conversation it resumed was left behind", ProviderBinding{SessionID: "s3"}, "s3", true},
		{"a fresh session with no conversation yet", ProviderBinding{SessionID: "s4"}, "s4", false},
	} {
		if got := th.leftBehind(c.b, c.session); got != c.want {
			t.Errorf("%s: leftBehind = %v, want %v", c.name, got, c.want)
		}
	}
}

// TestChooseSession: the live session takes a turn on what it runs; a
// turn on another provider, model or command, or on a conversation the
// provider left behind, retires it (saying where the thread went) for a
// new session, which resumes the provider's own conversation where it has
// one and its plugin can.
func TestChooseSession(t *testing.T) {
	acp := ProviderCommand{Argv: []string{"agent"}}
	codex := ProviderCommand{Argv: []string{"codex", "app-server"}, Env: []string{"A=1"}}
	th := Thread{Provider: "acp", Model: "m1",
		ProviderBindings: []ProviderBinding{
			{Provider: "acp", Model: "m1", Command: acp, SessionID: "s1", ThreadRef: "c1"},
			{Provider: "codex", Command: codex, SessionID: "s2"},
		},
		ProviderThreads:  []ProviderThread{{ID: "pt2", SessionID: "s2", ProviderRef: "c2", Detached: true}},
		ProviderSessions: []ProviderSession{{ID: "s1"}, {ID: "s2"}},
	}
	onACP := &LiveSession{ID: "s1", Provider: "acp", Model: "m1", Command: acp}
	for _, c := range []struct {
		name     string
		live     *LiveSession
		provider string
		model    string
		want     SessionChoice
	}{
		{"the thread's own, live", onACP, "", "",
			SessionChoice{Provider: "acp", Model: "m1", Command: acp, Reuse: true, Resume: "c1"}},
		{"none live", nil, "acp", "m1",
			SessionChoice{Provider: "acp", Model: "m1", Command: acp, Resume: "c1"}},
		{"another model", onACP, "acp", "m2",
			SessionChoice{Provider: "acp", Model: "m2", Command: acp, Resume: "c1", Retire: "the thread switched to acp (m2)"}},
		{"another command", &LiveSession{ID: "s1", Provider: "acp", Model: "m1", Command: ProviderCommand{Argv: []string{"old"}}}, "acp", "m1",
			SessionChoice{Provider: "acp", Model: "m1", Command: acp, Resume: "c1", Retire: "the thread switched to acp (m1), with another command"}},
		{"another provider", onACP, "codex", "",
			SessionChoice{Provider: "codex", Command: codex, Retire: "the thread switched to codex"}},
		{"a conversation left behind", &LiveSession{ID: "s2", Provider: "codex", Command: codex}, "codex", "",
			SessionChoice{Provider: "codex", Command: codex, Retire: "its conversation was left behind"}},
	} {
		if diff := cmp.Diff(c.want, th.ChooseSession(c.live, c.provider, c.model, nil)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", c.name, diff)
		}
	}
	o := th.ChooseSession(nil, "", "", nil).Open("thr", "ses_9")
	if got := [2]string{o.ResumeRef(true), o.ResumeRef(false)}; got != [2]string{"c1", ""} {
		t.Errorf("resume refs, with and without the plugin's resume: %q", got)
	}
}

// TestTheDomainChoosesEachTurnsSession follows the session effects through
// a thread whose host holds its session: the first turn opens one, the
// next reuses it, a reused session that had ended meanwhile gets the turn
// again in a new one (once), and each effect's outcome is the one its kind
// declares.
func TestTheDomainChoosesEachTurnsSession(t *testing.T) {
	w := newWorld(t)
	w.holdSessions = true
	head := EffectHead{ThreadID: "thr"}
	d := w.send("one")
	open, start := d.Effects[1].(OpenSession), d.Effects[2].(StartTurn)
	r := w.thread.Runs[0]
	wantOpen := OpenSession{EffectHead: head, RunID: r.ID, AttemptID: r.ActiveAttempt, SessionID: "ses_1", Provider: "acp",
		Command: ProviderCommand{Argv: []string{"agent"}}}
	wantStart := StartTurn{EffectHead: head, RunID: r.ID, AttemptID: r.ActiveAttempt, Text: "one", SessionID: "ses_1"}
	if diff := cmp.Diff([]Effect{wantOpen, wantStart}, d.Effects[1:]); diff != "" {
		t.Fatalf("the first turn's effects (-want +got):\n%s", diff)
	}
	if (RestartTurn{}).CommandType() != "provider.turn.restart" || Stored(RetireSession{SessionID: "ses_1"}, "thr", "9.1").Head() != (EffectHead{ID: "9.1", ThreadID: "thr"}) {
		t.Fatal("a restart's command type, or a retirement's outbox key")
	}
	if !Current(w.thread, open) || !Current(w.thread, OpenSession{SessionID: "ses_9"}) || Pending(open).RunID != r.ID {
		t.Fatalf("an open session for the active attempt is current, as is one for no run; its pending entry names the run")
	}
	// Each outcome, as the host reports it.
	opened := Outcome(w.thread, open, Result{Opened: RecordSessionOpened{ProviderRef: "p", ThreadRef: "pt", PluginPid: 7}})
	if diff := cmp.Diff(&Command{ID: "open:ses_1", ThreadID: "thr", Payload: RecordSessionOpened{SessionID: "ses_1",
		Provider: "acp", ProviderRef: "p", ThreadRef: "pt", PluginPid: 7}}, opened); diff != "" {
		t.Fatalf("opened (-want +got):\n%s", diff)
	}
	failed := errors.New("no such agent")
	restarted := start
	restarted.Restarted = true
	for name, c := range map[string]struct {
		e    Effect
		r    Result
		want *Command
	}{
		"an open that failed": {open, Result{Err: failed}, &Command{ID: "fail:" + r.ID + ":" + r.ActiveAttempt, ThreadID: "thr",
			Payload: FailRun{RunID: r.ID, Failure: Failure{Code: "start_failed", Message: "no such agent"}}}},
		"an open skipped":               {open, Result{Skipped: true}, nil},
		"a rollback's open that failed": {OpenSession{EffectHead: head, SessionID: "ses_9"}, Result{Err: failed}, nil},
		"a retirement":                  {RetireSession{EffectHead: head, SessionID: "ses_1"}, Result{}, nil},
		"a restarted turn's session that ended": {restarted, Result{Err: fmt.Errorf("gone: %w", sdk.ErrUnknownSession)},
			&Command{ID: "fail:" + r.ID + ":" + r.ActiveAttempt, ThreadID: "thr",
				Payload: FailRun{RunID: r.ID, Failure: Failure{Code: "start_failed", Message: "gone: unknown session"}}}},
	} {
		if diff := cmp.Diff(c.want, Outcome(w.thread, c.e, c.r)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", name, diff)
		}
	}
	w.must(*opened)
	w.must(*Outcome(w.thread, start, Result{}))
	w.ev("ses_1", sdk.RuntimeEvent{Kind: sdk.EventTurnStarted, ThreadRef: "pt", TurnRef: "u1", ClientTurnID: r.ActiveAttempt})
	w.ev("ses_1", sdk.RuntimeEvent{Kind: sdk.EventTurnTerminal, TurnRef: "u1", Status: sdk.TurnCompleted})

	// The next run's turn goes to the open session.
	d = w.send("two")
	r = w.thread.Runs[1]
	reused := StartTurn{EffectHead: head, RunID: r.ID, AttemptID: r.ActiveAttempt, Text: "two", SessionID: "ses_1", Reused: true}
	if diff := cmp.Diff([]Effect{reused}, d.Effects); diff != "" {
		t.Fatalf("the next run's effects (-want +got):\n%s", diff)
	}
	// Its provider had exited after the last run: the turn goes to a new
	// session, once (a restarted turn whose session ended fails its run).
	reused.ID = "12.0"
	restart := Outcome(w.thread, reused, Result{Err: fmt.Errorf("acp: %w", sdk.ErrProviderExited)})
	if diff := cmp.Diff(&Command{ID: "restart:12.0", ThreadID: "thr", Payload: RestartTurn{RunID: r.ID, AttemptID: r.ActiveAttempt,
		Text: "two", Reason: "acp: provider exited"}}, restart); diff != "" {
		t.Fatalf("restart (-want +got):\n%s", diff)
	}
	w.ev("ses_1", sdk.RuntimeEvent{Kind: sdk.EventRuntimeExited, Status: sdk.ExitFailed})
	d = w.must(*restart)
	again := []Effect{
		OpenSession{EffectHead: head, RunID: r.ID, AttemptID: r.ActiveAttempt, SessionID: "ses_2", Provider: "acp",
			Command: ProviderCommand{Argv: []string{"agent"}}, Resume: "pt"},
		StartTurn{EffectHead: head, RunID: r.ID, AttemptID: r.ActiveAttempt, Text: "two", SessionID: "ses_2", Restarted: true},
	}
	if diff := cmp.Diff(again, d.Effects); diff != "" || types(d) != "diagnostic.recorded" {
		t.Fatalf("the restarted turn's effects (-want +got):\n%s %s", diff, types(d))
	}
	// A restart for a run that has ended does nothing.
	w.must(Command{ID: "x", ThreadID: "thr", Payload: FailRun{RunID: r.ID, Failure: Failure{Code: "gone"}}})
	if d := w.must(Command{ID: "restart-late", ThreadID: "thr", Payload: restart.Payload}); len(d.Effects)+len(d.Events) != 0 {
		t.Fatalf("a late restart: %s %+v", types(d), d.Effects)
	}
}

// TestALiveSessionWhoseEndIsRecorded is not reused, nor retired again:
// the host's process is on its way out.
func TestALiveSessionWhoseEndIsRecorded(t *testing.T) {
	w := newWorld(t)
	w.open("s1")
	w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventRuntimeExited, Status: sdk.ExitClosed})
	th := w.thread.Scratch()
	env := w.env()
	env.Live = &LiveSession{ID: "s1", Provider: "acp", Command: ProviderCommand{Argv: []string{"agent"}}}
	d, err := Decide(&th, Command{ID: "m", ThreadID: "thr", Payload: DispatchMessage{Text: "one", Mode: ModeQueueAfterActive}}, env)
	if err != nil || strings.Contains(types(d), "provider.session.ended") {
		t.Fatalf("decided %s, %v", types(d), err)
	}
	if e, ok := d.Effects[1].(OpenSession); !ok || e.SessionID != "ses_1" {
		t.Fatalf("effects: %+v", d.Effects)
	}
}
