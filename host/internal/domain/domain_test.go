package domain

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/baton-run/baton/sdk"
	"pgregory.net/rapid"
)

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// world is the orchestrator loop without storage: each command is decided
// against a scratch copy of the thread, which becomes the thread when the
// decision succeeds. Beside it, replica is the thread rebuilt from the
// decisions' events alone, as a host that restarts rebuilds it from the
// log: after every decision the two must be the same.
type world struct {
	t       testing.TB
	thread  *Thread
	replica *Thread
	seq     uint64
	n, nses int
	effects []Effect
	caps    Capabilities
	// shuttingDown is the Env's: the host drains.
	shuttingDown bool
	// host is the Env's: the host deciding, on a shared log.
	host string
	// holdCaptures leaves checkpoint captures undone; otherwise each is
	// recorded ready at once, as the host does after the decision, and its
	// events are added to the decision's.
	holdCaptures bool
	// now is the decisions' time (zero: t0).
	now time.Time
	// parts are what left the thread, as a host stores them; gathered
	// counts the decisions that needed them.
	parts    []Archived
	gathered int
	// holdSessions: the Env gives the decisions the thread's live session
	// (live).
	holdSessions bool
	// sessions are what each session opened runs, as the host holds it:
	// its provider and model (the thread's when it names none) and the
	// thread's command for that provider when it opened.
	sessions map[string]LiveSession
	// events are every event decided, in order.
	events []Payload
	// facts, when set, are what the host gathered for every decision.
	facts *Facts
	// mcp, when set, are the MCP servers the host has configured (Env.MCP).
	mcp []MCPServerRef
}

func newWorld(t *testing.T) *world {
	w := &world{t: t, thread: &Thread{}, replica: &Thread{}}
	w.must(Command{ID: "c", ThreadID: "thr", Payload: CreateThread{Provider: "acp", Cwd: "/w", ProviderCommand: ProviderCommand{Argv: []string{"agent"}}}})
	return w
}

func (w *world) env() Env {
	now := t0
	if !w.now.IsZero() {
		now = w.now
	}
	env := Env{Now: now, NewID: w.newID, Caps: w.caps, ShuttingDown: w.shuttingDown, Live: w.live(), Host: w.host}
	if w.mcp != nil {
		env.MCP = func() []MCPServerRef { return w.mcp }
	}
	return env
}

// envFor is the environment cmd is decided in: the host gathers what the
// thread's plugin can do for the decisions that need it.
func (w *world) envFor(cmd Command) Env {
	env := w.env()
	env.Facts = w.facts
	if NeedsCapabilities(cmd.Payload) {
		caps := w.caps
		env.Facts = &Facts{Capabilities: &caps}
	}
	return env
}

// newID numbers ids in the order they are made. Sessions, which the
// domain names when it decides to open one, are numbered apart: the ids
// of everything else read as they did when the host named sessions.
func (w *world) newID(prefix string) string {
	if prefix == "ses" {
		w.nses++
		return fmt.Sprintf("ses_%d", w.nses)
	}
	w.n++
	return fmt.Sprintf("%s_%d", prefix, w.n)
}

// live is the thread's open session as a host holds it: its newest one
// that is open, in a world that holds sessions as the host does
// (holdSessions); else none, so that each turn is decided into a session
// of its own and the tests open sessions as they please.
func (w *world) live() *LiveSession {
	if !w.holdSessions {
		return nil
	}
	for _, s := range slices.Backward(w.thread.ProviderSessions) {
		if s.Status == SessionStatusOpen {
			l := w.sessions[s.ID]
			return &l
		}
	}
	return nil
}

// decide1 decides one command as the host does: on a scratch copy, kept
// only when the decision succeeds.
func (w *world) decide1(cmd Command) (Decision, error) {
	before, _ := json.Marshal(w.thread)
	env := w.envFor(cmd)
	var scratch Thread
	var d Decision
	var err error
	var all NeedPast
	n, nses := w.n, w.nses
	for range 4 {
		w.n, w.nses = n, nses // a decision made again allocates the same ids
		scratch = w.thread.Scratch()
		d, err = Decide(&scratch, cmd, env)
		// The scratch shares the thread's collections until it writes to them:
		// what it writes, the thread it was made from never shows.
		if after, _ := json.Marshal(w.thread); string(after) != string(before) {
			w.t.Fatalf("deciding %s changed the thread the scratch was made from:\nbefore: %s\nafter:  %s",
				cmd.Payload.CommandType(), before, after)
		}
		var need *NeedPast
		if !errors.As(err, &need) {
			break
		}
		// As the host does: what the decision needs of the past (and what
		// it needed before), gathered from the parts stored, and the
		// decision made again.
		w.gathered++
		all.Merge(*need)
		if env.Past, err = w.thread.GatherPast(&all, w.stored()); err != nil {
			w.t.Fatal(err)
		}
	}
	if err != nil {
		return d, err
	}
	if p, ok := cmd.Payload.(RecordSessionOpened); ok {
		if w.sessions == nil {
			w.sessions = map[string]LiveSession{}
		}
		l := LiveSession{ID: p.SessionID, Provider: p.Provider, Model: p.Model, MCP: p.MCP}
		if p.Provider == "" {
			l.Provider, l.Model = scratch.Provider, scratch.Model
		}
		b, _ := scratch.Binding(l.Provider)
		l.Command = b.Command
		w.sessions[p.SessionID] = l
	}
	w.thread = &scratch
	left := w.thread.TakeArchived()
	w.parts = append(w.parts, left...)
	w.apply(d)
	// The replica left the same parts: they follow from the events alone.
	if got, want := jsonOf(w.replica.TakeArchived()), jsonOf(left); got != want {
		w.t.Fatalf("the parts the replica left differ from the thread's:\nthread:  %s\nreplica: %s", want, got)
	}
	return d, nil
}

// stored are the parts that left, newest first, as a host reads them.
func (w *world) stored() iter.Seq2[Archived, error] {
	return func(yield func(Archived, error) bool) {
		ps := slices.Clone(w.parts)
		slices.SortStableFunc(ps, func(a, b Archived) int { return cmp.Compare(b.Ordinal, a.Ordinal) })
		for _, a := range ps {
			if !yield(a, nil) {
				return
			}
		}
	}
}

// whole is the thread with every run that left it back in place: one
// page of every run, as a host reads it.
func (w *world) whole() Thread {
	return w.thread.Page(1, w.thread.RunCount(), w.parts)
}

func jsonOf(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func (w *world) decide(cmd Command) (Decision, error) {
	d, err := w.decide1(cmd)
	if err != nil {
		return d, err
	}
	for i := 0; i < len(d.Effects) && !w.holdCaptures; i++ {
		if e, ok := d.Effects[i].(CaptureCheckpoint); ok {
			c, err := w.decide1(Command{ID: "cap", ThreadID: "thr", Payload: RecordCheckpoint{CheckpointID: e.CheckpointID,
				Status: CheckpointReady, Commit: "commit-" + e.CheckpointID}})
			if err != nil {
				w.t.Fatalf("record checkpoint: %v", err)
			}
			d.Events = append(d.Events, c.Events...)
			d.Effects = append(d.Effects, c.Effects...)
		}
	}
	return d, nil
}

// apply stores a decision: its events get sequences and are applied to the
// replica, which must then equal the live thread.
func (w *world) apply(d Decision) {
	w.t.Helper()
	for _, p := range d.Events {
		w.seq++
		Evolve(w.replica, Event{Sequence: w.seq, ThreadID: "thr", At: w.env().Now.UTC(), Payload: p})
	}
	w.events = append(w.events, d.Events...)
	if len(d.Events) > 0 {
		w.thread.Sequence = w.seq
	}
	w.effects = append(w.effects, d.Effects...)
	live, _ := json.Marshal(w.thread)
	rebuilt, _ := json.Marshal(w.replica)
	if string(live) != string(rebuilt) {
		w.t.Fatalf("the thread Decide left differs from the one its events rebuild:\nlive:    %s\nrebuilt: %s", live, rebuilt)
	}
}

// edit changes the thread by hand (and its replica alike), for a state the
// commands cannot reach directly.
func (w *world) edit(f func(*Thread)) {
	c := w.thread.Clone() // its own slices: the edit writes into them
	f(&c)
	w.thread = &c
	f(w.replica)
}

func (w *world) must(cmd Command) Decision {
	w.t.Helper()
	d, err := w.decide(cmd)
	if err != nil {
		w.t.Fatalf("%s: %v", cmd.Payload.CommandType(), err)
	}
	return d
}

// send queues a message as a run of its own.
func (w *world) send(text string) Decision {
	return w.must(Command{ID: "m", ThreadID: "thr", Payload: DispatchMessage{Text: text, Mode: ModeQueueAfterActive}})
}

func (w *world) open(session string) {
	w.must(Command{ID: "o", ThreadID: "thr", Payload: RecordSessionOpened{SessionID: session, ProviderRef: "p", ThreadRef: "pt"}})
}

func (w *world) ev(session string, e sdk.RuntimeEvent) Decision {
	return w.must(Command{ID: "e", ThreadID: "thr", Payload: IngestProviderEvent{SessionID: session, Event: e}})
}

func types(d Decision) string {
	var s []string
	for _, e := range d.Events {
		s = append(s, e.EventType())
	}
	return strings.Join(s, " ")
}

func TestCreateThreadValidation(t *testing.T) {
	for _, tc := range []struct {
		p    CreateThread
		want error
	}{
		{CreateThread{Cwd: "/w"}, ErrInvalid},
		{CreateThread{Provider: "acp", Cwd: "rel"}, ErrInvalid},
		{CreateThread{Provider: "acp"}, ErrInvalid},
		{CreateThread{Provider: "acp", Cwd: "/w", ApprovalPolicy: "sometimes"}, ErrInvalid},
	} {
		if _, err := Decide(&Thread{}, Command{ID: "c", ThreadID: "t", Payload: tc.p}, Env{}); !errors.Is(err, tc.want) {
			t.Errorf("%+v: %v, want %v", tc.p, err, tc.want)
		}
	}
	w := newWorld(t)
	if _, err := w.decide(Command{ID: "c", ThreadID: "thr", Payload: CreateThread{Provider: "acp", Cwd: "/w"}}); !errors.Is(err, ErrConflict) || !errors.Is(err, ErrExists) {
		t.Errorf("creating an existing thread: %v, want ErrConflict and ErrExists", err)
	}
	w.must(Command{ID: "m1", ThreadID: "thr", Payload: DispatchMessage{MessageID: "msg1", Text: "hi", Mode: ModeQueueAfterActive}})
	if _, err := w.decide(Command{ID: "m2", ThreadID: "thr", Payload: DispatchMessage{MessageID: "msg1", Text: "again", Mode: ModeQueueAfterActive}}); !errors.Is(err, ErrConflict) || !errors.Is(err, ErrExists) {
		t.Errorf("a message id in use: %v, want ErrConflict and ErrExists", err)
	}
	if _, err := Decide(&Thread{}, Command{ID: "c", ThreadID: "nope", Payload: DispatchMessage{Text: "x"}}, Env{}); !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown thread: %v", err)
	}
	if _, err := Decide(&Thread{}, Command{ID: "c"}, Env{}); !errors.Is(err, ErrInvalid) {
		t.Errorf("no payload: %v", err)
	}
	if _, err := w.decide(Command{ID: "c", ThreadID: "thr", Payload: DispatchMessage{}}); !errors.Is(err, ErrInvalid) {
		t.Errorf("empty message: %v", err)
	}
	if _, err := w.decide(Command{ID: "c", ThreadID: "thr", Payload: unknownCmd{}}); !errors.Is(err, ErrInvalid) {
		t.Errorf("unknown command: %v", err)
	}
	if _, err := w.decide(Command{ID: "c", ThreadID: "thr", Payload: FailRun{RunID: "nope"}}); !errors.Is(err, ErrNotFound) {
		t.Errorf("fail unknown run: %v", err)
	}
}

// A message that says nothing, is not text or is over the limit is
// refused, naming the field and what is wrong, and decides nothing; one
// at the limit is a run.
func TestDispatchRefusesBadText(t *testing.T) {
	w := newWorld(t)
	for _, tc := range []struct {
		name, text, want string
	}{
		{"empty", "", "invalid command: text: the message is empty or only white space"},
		{"white space", " \t\n\u00a0", "invalid command: text: the message is empty or only white space"},
		{"not UTF-8", "ok \xff", "invalid command: text: the message is not UTF-8 text (at byte 3)"},
		{"over the limit", strings.Repeat("a", MaxMessageBytes+1), "invalid command: text: the message is 16777217 bytes; the limit is 16 MiB"},
	} {
		d, err := w.decide(Command{ID: "c-" + tc.name, ThreadID: "thr", Payload: DispatchMessage{Text: tc.text}})
		if !errors.Is(err, ErrInvalid) || err == nil || err.Error() != tc.want || len(d.Events) != 0 {
			t.Errorf("%s: %.200v (%d events); want %q", tc.name, err, len(d.Events), tc.want)
		}
	}
	if n, m := len(w.thread.Runs), len(w.thread.Messages); n != 0 || m != 0 {
		t.Fatalf("refused messages left %d runs and %d messages", n, m)
	}
	full := strings.Repeat("a", MaxMessageBytes)
	scratch := w.thread.Scratch()
	d, err := Decide(&scratch, Command{ID: "c-full", ThreadID: "thr", Payload: DispatchMessage{Text: full}}, w.env())
	if err != nil || len(scratch.Runs) != 1 || scratch.Runs[0].Input != full || len(d.Events) == 0 {
		t.Fatalf("a message of MaxMessageBytes: %v (%d runs)", err, len(scratch.Runs))
	}
}

type unknownCmd struct{}

func (unknownCmd) CommandType() string { return "nope" }

// A whole run: dispatch, provider events, completion barrier, and the next
// queued run starting.
func TestRunLifecycle(t *testing.T) {
	w := newWorld(t)
	d := w.send("one")
	// The baseline checkpoint is asked for before the first run's turn.
	if got := types(d); got != "message.added run.queued checkpoint.scope.opened checkpoint.requested run.started attempt.started node.started checkpoint.recorded" {
		t.Fatalf("dispatch on an idle thread: %s", got)
	}
	// With no session open, the domain opens one for the turn.
	if len(d.Effects) != 3 || d.Effects[0].EffectType() != EffectCapture || d.Effects[1].EffectType() != EffectOpenSession ||
		d.Effects[2].EffectType() != EffectStartTurn || d.Effects[2].(StartTurn).Text != "one" ||
		d.Effects[2].(StartTurn).SessionID != d.Effects[1].(OpenSession).SessionID {
		t.Fatalf("effects: %+v", d.Effects)
	}
	if sc := w.thread.CheckpointScopes[0]; sc.Kind != ScopeRootRun || sc.Ordinal != 0 || sc.RunID != "" || !sc.AdvancesRunCount {
		t.Fatalf("baseline scope: %+v", sc)
	}
	if got := types(w.send("two")); got != "message.added run.queued" {
		t.Fatalf("dispatch behind an active run: %s", got)
	}
	w.open("s1")
	w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventThreadStarted, ThreadRef: "pt"}) // already bound by the open
	if len(w.thread.ProviderThreads) != 1 {
		t.Fatalf("provider threads: %+v", w.thread.ProviderThreads)
	}
	w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventTurnStarted, ThreadRef: "pt", TurnRef: "u1"})
	if again := w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventTurnStarted, ThreadRef: "pt", TurnRef: "u1"}); len(again.Events) != 0 {
		t.Fatalf("the same turn again allocated %s", types(again))
	}
	r := w.thread.Runs[0]
	if r.Status != RunStatusRunning {
		t.Fatalf("run status %s", r.Status)
	}
	w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventItemStarted, TurnRef: "u1", ItemRef: "r1", ItemKind: sdk.ItemReasoning})
	w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventContentDelta, TurnRef: "u1", ItemRef: "r1", ItemKind: sdk.ItemReasoning, Text: "hmm"})
	w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventItemCompleted, TurnRef: "u1", ItemRef: "r1"})
	w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventItemCompleted, TurnRef: "u1", ItemRef: "r1"}) // twice: nothing more
	w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventContentDelta, TurnRef: "u1", ItemRef: "a1", ItemKind: sdk.ItemAssistantMessage, Text: "Hel"})
	w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventContentDelta, TurnRef: "u1", ItemRef: "a1", ItemKind: sdk.ItemAssistantMessage, Text: "lo"})
	w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventContentDelta, TurnRef: "u1", ItemRef: "a1", ItemKind: sdk.ItemAssistantMessage})
	w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventItemStarted, TurnRef: "u1", ItemRef: "t1", Title: "ls"})
	w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventItemUpdated, TurnRef: "u1", ItemRef: "t1", Status: sdk.ItemInProgress, Detail: json.RawMessage(`{"x":1}`)})
	w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventItemUpdated, TurnRef: "u1", ItemRef: "t1"})
	w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventItemUpdated, TurnRef: "u1", ItemRef: "t1", Title: "ls -la"})
	w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventItemStarted, TurnRef: "u1", ItemRef: "a0", ItemKind: sdk.ItemAssistantMessage})
	w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventItemCompleted, TurnRef: "u1", ItemRef: "a0", Title: "done", Detail: json.RawMessage(`{}`)})
	w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventPlanUpdated, TurnRef: "u1", Detail: json.RawMessage(`[1]`)})
	w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventPlanUpdated, TurnRef: "u1", Detail: json.RawMessage(`[1,2]`)})
	w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventUsage, TurnRef: "u1", Usage: &sdk.Usage{TotalTokens: 5}})
	w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventDiagnostic, Title: "odd"})
	w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventSessionState})
	d = w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventTurnTerminal, TurnRef: "u1", Status: sdk.TurnCompleted, Title: "end_turn"})
	if got := types(d); got != "message.completed node.completed node.completed node.completed node.completed run.completing checkpoint.scope.opened checkpoint.requested checkpoint.recorded run.ended run.started attempt.started node.started" {
		t.Fatalf("terminal: %s", got)
	}
	th := w.thread
	r = th.Runs[0]
	if r.Status != RunStatusCompleted || r.StopReason != "end_turn" || r.FinalAttempt == "" || r.Usage.TotalTokens != 5 {
		t.Fatalf("run 1: %+v", r)
	}
	if th.Runs[1].Status != RunStatusStarting || th.Runs[1].Ordinal != 2 {
		t.Fatalf("run 2: %+v", th.Runs[1])
	}
	if m := th.Messages[2]; m.Role != RoleAssistant || m.Text.String() != "Hello" || m.Status != StatusCompleted {
		t.Fatalf("assistant message: %+v", m)
	}
	if it := th.TurnItems[0]; it.Kind != NodeReasoning || it.Text.String() != "hmm" || it.Status != StatusCompleted {
		t.Fatalf("reasoning item: %+v", it)
	}
	if it := th.TurnItems[1]; it.Kind != "tool_call" || string(it.Detail) != `{"x":1}` || it.Status != StatusCompleted || it.Title != "ls -la" {
		t.Fatalf("tool item: %+v", it)
	}
	if string(th.TurnItems[2].Detail) != `[1,2]` {
		t.Fatalf("plan: %+v", th.TurnItems[2])
	}
	if th.ProviderTurns[0].Status != StatusCompleted || len(th.Diagnostics) != 1 {
		t.Fatalf("turns %+v diags %+v", th.ProviderTurns, th.Diagnostics)
	}
	// Late events for the ended run change nothing.
	if d := w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventContentDelta, TurnRef: "u1", ItemRef: "a1", Text: "late"}); len(d.Events) != 0 {
		t.Fatalf("late delta: %s", types(d))
	}
	if d := w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventTurnTerminal, TurnRef: "u1", Status: sdk.TurnCompleted}); len(d.Events) != 0 {
		t.Fatalf("second terminal: %s", types(d))
	}
}

// Invariant 2: a turn that is not the root turn of the active attempt never
// ends the run.
func TestOnlyTheRootTurnEndsTheRun(t *testing.T) {
	w := newWorld(t)
	w.send("one")
	w.open("s1")
	if d := w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventTurnTerminal, TurnRef: "child", Status: sdk.TurnCompleted}); types(d) != "diagnostic.recorded" {
		t.Fatalf("unknown turn's terminal: %s", types(d))
	}
	w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventThreadStarted, ThreadRef: "child-thread", ParentThreadRef: "pt"})
	if p := w.thread.ProviderThreads[1]; p.ParentID != w.thread.ProviderThreads[0].ID {
		t.Fatalf("child thread: %+v", p)
	}
	if !w.thread.Runs[0].Status.Active() {
		t.Fatalf("the run ended on a child's terminal: %s", w.thread.Runs[0].Status)
	}
	w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventTurnStarted, ThreadRef: "pt", TurnRef: "root"})
	for i, st := range []sdk.Status{sdk.TurnFailed, sdk.TurnInterrupted, sdk.TurnCompleted} {
		ref := fmt.Sprintf("child-%d", i)
		d := w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventTurnStarted, ThreadRef: "child-thread", TurnRef: ref, Title: "helper"})
		if got := types(d); got != "node.started provider.turn.bound" {
			t.Fatalf("child turn started: %s", got)
		}
		d = w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventTurnTerminal, TurnRef: ref, Status: st})
		want := "node.completed checkpoint.scope.opened checkpoint.requested checkpoint.recorded"
		if i == 0 {
			want = "node.completed checkpoint.scope.opened checkpoint.scope.opened checkpoint.requested checkpoint.recorded" // the run's scope first
		}
		if got := types(d); got != want {
			t.Fatalf("child terminal (%s): %s", st, got)
		}
		if again := w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventTurnTerminal, TurnRef: ref, Status: st}); len(again.Events) != 0 {
			t.Fatalf("child terminal twice: %s", types(again))
		}
	}
	r := w.thread.Runs[0]
	if !r.Status.Active() || r.Status != RunStatusRunning {
		t.Fatalf("after child turns the run is %s; want running", r.Status)
	}
	var sub []string
	for _, n := range r.Nodes {
		if n.Kind == NodeSubagent {
			if n.ParentID != r.Attempts[0].RootNode {
				t.Errorf("subagent node %s is not under the root", n.ID)
			}
			sub = append(sub, string(n.Status))
		}
	}
	if strings.Join(sub, ",") != "failed,cancelled,completed" {
		t.Errorf("subagent nodes: %v", sub)
	}
	w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventTurnTerminal, TurnRef: "root", Status: sdk.TurnCompleted})
	if r := w.thread.Runs[0]; r.Status != RunStatusCompleted || r.Attempts[0].SessionID != "s1" {
		t.Fatalf("the root turn ends the run: %+v", r)
	}
}

func TestTerminalStatuses(t *testing.T) {
	for status, want := range map[sdk.TurnStatus]RunStatus{sdk.TurnCompleted: RunStatusCompleted, sdk.TurnInterrupted: RunStatusInterrupted, sdk.TurnFailed: RunStatusFailed} {
		w := newWorld(t)
		w.send("one")
		w.open("s1")
		w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventTurnStarted, ThreadRef: "new-thread", TurnRef: "u1"})
		w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventItemStarted, TurnRef: "u1", ItemRef: "t1"})
		w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventTurnTerminal, TurnRef: "u1", Status: status})
		r := w.thread.Runs[0]
		if r.Status != want {
			t.Errorf("%s: run %s", status, r.Status)
		}
		if n := r.Nodes[1]; status != "completed" && n.Status != StatusCancelled {
			t.Errorf("%s: open item closed as %s", status, n.Status)
		}
	}
}

func TestRequestsAndProviderExit(t *testing.T) {
	w := newWorld(t)
	w.send("one")
	w.send("two")
	w.open("s1")
	w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventTurnStarted, ThreadRef: "pt", TurnRef: "u1"})
	w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventItemStarted, TurnRef: "u1", ItemRef: "t1"})
	w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventRequestOpened, TurnRef: "u1", RequestRef: "q1", ItemRef: "t1", RequestKind: "permission",
		Options: []sdk.RequestOption{{ID: "a", Kind: "allow_once"}}})
	w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventRequestOpened, TurnRef: "u1", RequestRef: "q1"}) // the same frame again
	if len(w.thread.Requests) != 1 || w.thread.Runs[0].Status != RunStatusWaiting || w.thread.Requests[0].NodeID == "" {
		t.Fatalf("after request: %+v %s", w.thread.Requests, w.thread.Runs[0].Status)
	}
	if e, ok := w.effects[len(w.effects)-1].(Respond); !ok || e.Decision != DecisionDecline || e.RequestRef != "q1" || e.SessionID != "s1" {
		t.Fatalf("the default policy declines: %+v", e)
	}
	w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventRequestResolved, RequestRef: "q1", Status: sdk.DecisionAccept})
	w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventRequestResolved, RequestRef: "q1", Status: sdk.DecisionAccept})
	if q := w.thread.Requests[0]; q.Status != RequestStatusResolved || q.Decision != "accept" || w.thread.Runs[0].Status != RunStatusRunning {
		t.Fatalf("resolved: %+v %s", q, w.thread.Runs[0].Status)
	}
	w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventRequestOpened, TurnRef: "u1", RequestRef: "q2"})
	w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventRequestOpened, TurnRef: "u1", RequestRef: "q3"})
	w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventRequestResolved, RequestRef: "q3", Status: sdk.DecisionCancel})
	d := w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventRuntimeExited, Status: sdk.ExitFailed, Failure: &sdk.Failure{Message: "boom"}})
	// The session's end expires its pending request once: the run's
	// completion barrier that follows sees it expired already.
	if got := types(d); !strings.HasPrefix(got, "provider.session.ended request.resolved node.completed node.completed run.completing checkpoint.scope.opened checkpoint.requested checkpoint.recorded run.ended run.started") {
		t.Fatalf("exit: %s", got)
	}
	th := w.thread
	if q := th.Requests[1]; q.Status != RequestStatusExpired || q.Delivery != DeliveryNotResumable {
		t.Fatalf("pending request after exit: %+v", q)
	}
	if th.Requests[2].Status != RequestStatusCancelled {
		t.Fatalf("cancelled request: %+v", th.Requests[2])
	}
	if r := th.Runs[0]; r.Status != RunStatusFailed || r.Failure.Message != "boom" {
		t.Fatalf("run after exit: %+v", r)
	}
	if s := th.ProviderSessions[0]; s.Status != SessionStatusEnded || s.EndReason != "boom" || s.EndedAt == nil {
		t.Fatalf("session: %+v", s)
	}
	// Events from the ended session are ignored.
	if d := w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventTurnStarted, TurnRef: "u9"}); len(d.Events) != 0 {
		t.Fatalf("event from an ended session: %s", types(d))
	}
	// A session that exits before run 2's turn was sent to it leaves the
	// run to the next session.
	w.open("s2")
	if d := w.ev("s2", sdk.RuntimeEvent{Kind: sdk.EventRuntimeExited, Status: sdk.ExitExited}); strings.Contains(types(d), "run.ended") {
		t.Fatalf("an exit of a session the run's turn never reached ended it: %s", types(d))
	}
	run2 := w.thread.Runs[1]
	dispatched := func(session string) Decision {
		return w.must(Command{ID: "td", ThreadID: "thr", Payload: RecordTurnDispatched{RunID: run2.ID, AttemptID: run2.ActiveAttempt, SessionID: session}})
	}
	// The turn was sent to s2 after all, but s2 is gone: the run fails.
	if got := types(dispatched("s2")); !strings.Contains(got, "run.ended") || w.thread.Runs[1].Failure.Code != "provider_exited" {
		t.Fatalf("a turn sent to a session that has ended: %s %+v", got, w.thread.Runs[1].Failure)
	}
	// Run 3: its turn reaches s3, which then exits with a code of its own.
	w.send("three")
	run3 := w.thread.Runs[2]
	w.open("s3")
	w.must(Command{ID: "td", ThreadID: "thr", Payload: RecordTurnDispatched{RunID: run3.ID, AttemptID: run3.ActiveAttempt, SessionID: "s3"}})
	if again := w.must(Command{ID: "td", ThreadID: "thr", Payload: RecordTurnDispatched{RunID: run3.ID, AttemptID: run3.ActiveAttempt, SessionID: "s3"}}); len(again.Events) != 0 {
		t.Fatalf("dispatched twice: %s", types(again))
	}
	d = w.ev("s3", sdk.RuntimeEvent{Kind: sdk.EventRuntimeExited, Status: sdk.ExitFailed, Failure: &sdk.Failure{Code: "plugin_exited", Message: "gone"}})
	if r := w.thread.Runs[2]; r.Failure == nil || r.Failure.Code != "plugin_exited" || !strings.Contains(types(d), "run.ended") {
		t.Fatalf("the exit's own failure code is kept: %+v", r.Failure)
	}
	if _, err := w.decide(Command{ID: "td", ThreadID: "thr", Payload: RecordTurnDispatched{AttemptID: "nope"}}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown attempt: %v", err)
	}
}

func TestResumeThatDidNotHappenIsVisible(t *testing.T) {
	w := newWorld(t)
	d := w.must(Command{ID: "o", ThreadID: "thr", Payload: RecordSessionOpened{SessionID: "s2", ThreadRef: "fresh",
		ResumeRequested: "old", Resumed: false}})
	if got := types(d); got != "provider.session.opened diagnostic.recorded provider.thread.bound" {
		t.Fatalf("%s", got)
	}
	d = w.must(Command{ID: "o", ThreadID: "thr", Payload: RecordSessionOpened{SessionID: "s3", ThreadRef: "fresh",
		ResumeRequested: "fresh", Resumed: true}})
	if got := types(d); got != "provider.session.opened" {
		t.Fatalf("a resumed thread is bound already: %s", got)
	}
	if got, want := d.Events[0], (SessionOpened{SessionID: "s3", ResumeRequested: "fresh", Resumed: true}); !reflect.DeepEqual(got, want) {
		t.Fatalf("session opened: %+v, want %+v", got, want)
	}
}

func TestTurnStartedWithoutARun(t *testing.T) {
	w := newWorld(t)
	w.open("s1")
	if d := w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventTurnStarted, TurnRef: "u1"}); types(d) != "diagnostic.recorded" {
		t.Fatalf("%s", types(d))
	}
	for _, k := range []sdk.EventKind{sdk.EventItemStarted, sdk.EventPlanUpdated, sdk.EventUsage, sdk.EventRequestResolved} {
		if d := w.ev("s1", sdk.RuntimeEvent{Kind: k, ItemRef: "x", RequestRef: "x", Usage: &sdk.Usage{}}); len(d.Events) != 0 {
			t.Errorf("%s with no run: %s", k, types(d))
		}
	}
	if d := w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventRequestOpened, RequestRef: "q"}); types(d) != "request.opened" {
		t.Errorf("a request with no run is still recorded: %s", types(d))
	}
}

func TestFailRunAndRecover(t *testing.T) {
	w := newWorld(t)
	w.send("one")
	w.send("two")
	d := w.must(Command{ID: "f", ThreadID: "thr", Payload: FailRun{RunID: w.thread.Runs[0].ID, Failure: Failure{Message: "no plugin"}}})
	if !strings.Contains(types(d), "run.ended run.started") {
		t.Fatalf("fail: %s", types(d))
	}
	if d := w.must(Command{ID: "f", ThreadID: "thr", Payload: FailRun{RunID: w.thread.Runs[0].ID}}); len(d.Events) != 0 {
		t.Fatalf("failing an ended run: %s", types(d))
	}
	w.send("queued")
	queued := w.thread.Runs[2]
	if !w.thread.hasQueued() || queued.Status != RunStatusQueued {
		t.Fatalf("a run should be queued: %+v", queued)
	}
	if got := types(w.must(Command{ID: "fq", ThreadID: "thr", Payload: FailRun{RunID: queued.ID}})); got != "" {
		t.Fatalf("failing a queued run should do nothing: %s", got)
	}
	w.open("s1")
	d = w.must(Command{ID: "r", ThreadID: "thr", Payload: Recover{Reason: "restart"}})
	if got := types(d); got != "provider.session.ended node.completed run.completing checkpoint.scope.opened checkpoint.requested run.ended checkpoint.recorded" {
		t.Fatalf("recover: %s", got)
	}
	if r := w.thread.Runs[1]; r.Status != RunStatusFailed || r.Failure.Code != "host_restarted" {
		t.Fatalf("recovered run: %+v", r)
	}
	// Recovery starts no work: the queued run waits for the thread's next
	// message, and then goes first, named (the new one is not).
	if r := w.thread.Runs[2]; r.Status != RunStatusQueued {
		t.Fatalf("a run started by recovery: %+v", r)
	}
	d = w.send("three")
	if got := types(d); got != "message.added run.queued run.queue.resumed run.started attempt.started node.started" ||
		w.thread.Runs[2].Status != RunStatusStarting || w.thread.Runs[3].Status != RunStatusQueued {
		t.Fatalf("the next message: %s; runs %s %s", got, w.thread.Runs[2].Status, w.thread.Runs[3].Status)
	}
	want := QueuedRunsResumed{Reason: ResumeReason, Runs: []QueuedRun{{RunID: queued.ID, Ordinal: 3, Input: "queued"}}}
	if !reflect.DeepEqual(d.Events[2], want) {
		t.Fatalf("the next message says %+v\nwant %+v", d.Events[2], want)
	}
	// A message on an idle thread with nothing left queued says nothing.
	w.must(Command{ID: "f3", ThreadID: "thr", Payload: FailRun{RunID: w.thread.Runs[2].ID}})
	w.must(Command{ID: "f4", ThreadID: "thr", Payload: FailRun{RunID: w.thread.Runs[3].ID}})
	if got := types(w.send("four")); got != "message.added run.queued run.started attempt.started node.started" {
		t.Fatalf("a message on an idle thread: %s", got)
	}
}

// Evolve ignores references that do not resolve instead of inventing state.
func TestEvolveIgnoresUnknownRefs(t *testing.T) {
	th := &Thread{}
	Evolve(th, Event{Sequence: 1, ThreadID: "t", At: t0, Payload: ThreadCreated{Provider: "p", Cwd: "/w"}})
	before, _ := json.Marshal(th)
	for _, p := range []Payload{MessageDelta{MessageID: "x"}, MessageCompleted{MessageID: "x"}, RunStarted{RunID: "x"},
		AttemptStarted{RunID: "x"}, NodeStarted{RunID: "x"}, NodeUpdated{RunID: "x", NodeID: "y", Status: "s"}, NodeDelta{NodeID: "x"},
		NodeCompleted{RunID: "x"}, SessionEnded{SessionID: "x"}, RequestResolved{RequestID: "x"}, UsageReported{RunID: "x"},
		RunEnded{RunID: "x"}, ProviderTurnBound{RunID: "x"}, RequestResolved{RequestID: "q", Status: "resolved"},
		RunCompleting{RunID: "x"}, CheckpointRecorded{CheckpointID: "x"}, RollbackFilesRestored{RollbackID: "x"},
		RollbackFailed{RollbackID: "x"}, RollbackCompleted{RollbackID: "x"}, HandoffConsumed{HandoffID: "x"}} {
		Evolve(th, Event{Sequence: 1, ThreadID: "t", At: t0, Payload: p})
	}
	th.ProviderTurns = []ProviderTurn{}
	Evolve(th, Event{Sequence: 2, ThreadID: "t", At: t0, Payload: RunQueued{RunID: "r", Ordinal: 1}})
	Evolve(th, Event{Sequence: 3, ThreadID: "t", At: t0, Payload: AttemptStarted{RunID: "r", AttemptID: "a"}})
	Evolve(th, Event{Sequence: 4, ThreadID: "t", At: t0, Payload: ProviderTurnBound{RunID: "r", AttemptID: "a", ProviderThreadID: "nope"}})
	if th.Runs[0].Attempts[0].SessionID != "" {
		t.Errorf("an unknown provider thread gave the attempt a session")
	}
	th.Runs, th.ProviderTurns = []Run{}, []ProviderTurn{}
	th.Sequence = 1
	after, _ := json.Marshal(th)
	if string(before) != string(after) {
		t.Errorf("unresolved refs changed the thread:\n%s\n%s", before, after)
	}
}

// Every event type decodes back to the value that was encoded.
func TestCommandTypesAreDistinct(t *testing.T) {
	seen := map[string]bool{}
	for _, c := range []CommandPayload{CreateThread{}, DispatchMessage{}, IngestProviderEvent{}, RecordSessionOpened{}, FailRun{}, Recover{},
		InterruptRun{}, RespondToRequest{}, SteerFailed{}, MarkRequestUnreachable{}, RecordTurnDispatched{}, RespondFailed{},
		RollbackToCheckpoint{}, RecordCheckpoint{}, RecordFilesRestored{}, RecordProviderReconciled{},
		StartQueued{}, CloseIdleSession{}, ShutDown{}, CancelQueued{}, ForceStop{}, StallTurn{}, ExpireRequest{},
		ClaimThread{}, MarkHostLost{}} {
		if seen[c.CommandType()] {
			t.Errorf("duplicate command type %s", c.CommandType())
		}
		seen[c.CommandType()] = true
	}
}

func TestEveryEventRoundTrips(t *testing.T) {
	for _, typ := range EventTypes() {
		v, err := DecodePayload(typ, []byte(`{}`))
		if err != nil || v.EventType() != typ {
			t.Errorf("%s: %v", typ, err)
		}
	}
	p := RunEnded{RunID: "r", Status: "failed", Failure: &Failure{Message: "m"}}
	b, _ := json.Marshal(p)
	got, err := DecodePayload(p.EventType(), b)
	if err != nil || !reflect.DeepEqual(got, p) {
		t.Errorf("round trip: %+v %v", got, err)
	}
	if _, err := DecodePayload("thread.exploded", []byte(`{}`)); err == nil || !strings.Contains(err.Error(), `unknown event type "thread.exploded"`) {
		t.Errorf("unknown type: %v", err)
	}
	if _, err := DecodePayload("run.ended", []byte(`[`)); err == nil || !strings.Contains(err.Error(), "event run.ended") {
		t.Errorf("bad data: %v", err)
	}
}

func TestDecodeCommand(t *testing.T) {
	c, err := DecodeCommand([]byte(`{"type":"message.dispatch","commandId":"c1","threadId":"t1","payload":{"text":"hi"}}`))
	if err != nil || c.ID != "c1" || c.ThreadID != "t1" || c.Payload.(DispatchMessage).Text != "hi" {
		t.Fatalf("%+v %v", c, err)
	}
	if c, err := DecodeCommand([]byte(`{"type":"thread.create","commandId":"c"}`)); err != nil || c.Payload.CommandType() != "thread.create" {
		t.Errorf("no payload: %+v %v", c, err)
	}
	for in, want := range map[string]string{
		`{`:                           "invalid command",
		`{"type":"message.dispatch"}`: "no commandId",
		`{"type":"provider.event","commandId":"c"}`: `unknown command type "provider.event"`,
		// The hosts' own: a client may not move a thread, or say a host is lost.
		`{"type":"thread.claim","commandId":"c","threadId":"t","payload":{"reason":"host_lost"}}`: `unknown command type "thread.claim"`,
		`{"type":"thread.mark_host_lost","commandId":"c","threadId":"t","payload":{"host":"a"}}`:  `unknown command type "thread.mark_host_lost"`,
		`{"type":"message.dispatch","commandId":"c","payload":{"txt":"x"}}`:                       "message.dispatch payload",
		`{"type":"message.dispatch","commandId":"c","extra":1}`:                                   "unknown field",
	} {
		if _, err := DecodeCommand([]byte(in)); err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), want) {
			t.Errorf("DecodeCommand(%s) = %v, want %q", in, err, want)
		}
	}
	a := Command{ID: "x", ThreadID: "t", Payload: DispatchMessage{Text: "a"}}
	b := a
	b.Payload = DispatchMessage{Text: "b"}
	if Hash(a) == Hash(b) || Hash(a) != Hash(a) {
		t.Error("Hash must tell content apart and be stable")
	}
}

func TestStatusHelpers(t *testing.T) {
	for _, s := range []RunStatus{RunStatusCompleted, RunStatusInterrupted, RunStatusFailed, RunStatusCancelled, RunStatusRolledBack} {
		if !s.Terminal() || s.Active() {
			t.Errorf("%s", s)
		}
	}
	for _, s := range []RunStatus{RunStatusStarting, RunStatusRunning, RunStatusWaiting} {
		if s.Terminal() || !s.Active() {
			t.Errorf("%s", s)
		}
	}
	if RunStatusQueued.Terminal() || RunStatusQueued.Active() {
		t.Error("queued")
	}
}

// Property: whatever order messages and provider terminals arrive in,
// ordinals are dense and monotonic, at most one run is active, and runs
// start in ordinal order.
func TestRunOrdinalsProperty(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		w := newWorld(t)
		w.open("s1")
		w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventThreadStarted, ThreadRef: "child", ParentThreadRef: "pt"})
		turns := 0
		newTurn := func() string { turns++; return fmt.Sprintf("u%d", turns) }
		status := func() sdk.Status {
			return rapid.SampledFrom([]sdk.Status{sdk.TurnCompleted, sdk.TurnFailed, sdk.TurnInterrupted}).Draw(rt, "status")
		}
		steps := rapid.IntRange(1, 50).Draw(rt, "steps")
		for i := 0; i < steps; i++ {
			ended := map[string]bool{}
			for _, r := range w.thread.Runs {
				ended[r.ID] = r.Status.Terminal()
			}
			r := w.thread.ActiveRun()
			op := rapid.IntRange(0, 6).Draw(rt, "op")
			switch {
			case op == 0:
				w.send("m")
			case op == 1 && r != nil && w.thread.rootTurn(r) == nil:
				w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventTurnStarted, ThreadRef: "pt", TurnRef: newTurn()})
			case op == 2 && r != nil && w.thread.rootTurn(r) != nil:
				w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventTurnTerminal, TurnRef: w.thread.rootTurn(r).ProviderRef, Status: status()})
			case op == 3 && r != nil:
				w.must(Command{ID: "f", ThreadID: "thr", Payload: FailRun{RunID: r.ID}})
			case op == 4:
				// A message with the automatic policy; refusals are fine.
				w.caps.NativeSteering = rapid.Bool().Draw(rt, "steers")
				w.dispatch(DispatchMessage{Text: "steer"})
			case op == 5 && len(w.thread.Runs) > 0:
				target := w.thread.Runs[rapid.IntRange(0, len(w.thread.Runs)-1).Draw(rt, "target")]
				w.decide(Command{ID: "i", ThreadID: "thr", Payload: InterruptRun{RunID: target.ID}})
			case op == 6 && r != nil:
				// Subagent work: never ends, fails or starts a run.
				ref := newTurn()
				w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventTurnStarted, ThreadRef: "child", TurnRef: ref})
				w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventTurnTerminal, TurnRef: ref, Status: status()})
				for _, q := range w.thread.Runs {
					if q.Status.Terminal() != ended[q.ID] {
						rt.Fatalf("a subagent's terminal changed run %d to %s", q.Ordinal, q.Status)
					}
				}
			}
			active, lastStarted := 0, 0
			for j, r := range w.thread.Runs {
				if r.Ordinal != w.thread.earlierRuns()+j+1 {
					rt.Fatalf("run %d has ordinal %d", j, r.Ordinal)
				}
				if r.Status.Active() {
					active++
					if a := r.attempt(r.ActiveAttempt); a == nil || a.Status != AttemptInProgress {
						rt.Fatalf("active run %d has no attempt in progress", r.Ordinal)
					}
				} else if r.ActiveAttempt != "" {
					rt.Fatalf("run %d is %s with an active attempt", r.Ordinal, r.Status)
				}
				inProgress := 0
				for _, a := range r.Attempts {
					if a.Status == AttemptInProgress {
						inProgress++
					}
				}
				if inProgress > 1 {
					rt.Fatalf("run %d has %d attempts in progress", r.Ordinal, inProgress)
				}
				if r.Status != RunStatusQueued {
					if r.Ordinal < lastStarted {
						rt.Fatalf("run %d started after run %d", r.Ordinal, lastStarted)
					}
					lastStarted = r.Ordinal
				}
			}
			if active > 1 {
				rt.Fatalf("%d active runs", active)
			}
			if active == 0 && w.thread.hasQueued() {
				rt.Fatalf("a run is queued with none active")
			}
		}
	})
}

// fuzzStates are the threads a decoded command is decided against: none
// yet (only thread.create succeeds), one with a run whose provider turn is
// running, the same with a permission request pending for the client, and
// the run ended with its checkpoint. They are built by deciding real
// commands and provider events.
func fuzzStates(tb testing.TB) (states map[string]Thread, runID, requestID, checkpointID string) {
	w := &world{t: tb, thread: &Thread{}, replica: &Thread{}}
	w.must(Command{ID: "c", ThreadID: "thr", Payload: CreateThread{Provider: "acp", Cwd: "/w", ProviderCommand: ProviderCommand{Argv: []string{"agent"}},
		ApprovalPolicy: ApproveAsk}})
	w.send("one")
	w.open("s1")
	w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventTurnStarted, ThreadRef: "pt", TurnRef: "u1"})
	active := w.thread.Clone()
	w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventRequestOpened, TurnRef: "u1", RequestRef: "q1", ItemRef: "t1", RequestKind: sdk.RequestPermission,
		Title: "Write a.txt", Options: []sdk.RequestOption{{ID: "allow", Label: "Allow", Kind: "allow_once"}}})
	pending := w.thread.Clone()
	if r := pending.Runs[0]; r.Status != RunStatusWaiting || len(pending.Requests) != 1 || pending.Requests[0].Status != RequestStatusPending {
		tb.Fatalf("the pending state is not a run waiting on a pending request: run %s, requests %+v", r.Status, pending.Requests)
	}
	w.must(Command{ID: "r", ThreadID: "thr", Payload: RespondToRequest{RequestID: pending.Requests[0].ID, Decision: DecisionAccept}})
	w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventTurnTerminal, TurnRef: "u1", Status: sdk.TurnCompleted})
	ended := w.thread.Clone()
	if r := ended.Runs[0]; r.Status != RunStatusCompleted || ended.Checkpoints[len(ended.Checkpoints)-1].Status != CheckpointReady {
		tb.Fatalf("the ended state is not a completed run with its checkpoint: run %s, checkpoints %+v", r.Status, ended.Checkpoints)
	}
	return map[string]Thread{"none": {}, "active run": active, "pending request": pending, "ended run": ended},
		active.Runs[0].ID, pending.Requests[0].ID, ended.Checkpoints[len(ended.Checkpoints)-1].ID
}

func FuzzDecodeCommand(f *testing.F) {
	states, runID, requestID, checkpointID := fuzzStates(f)
	for _, seed := range []string{
		`{"type":"thread.create","commandId":"c","payload":{"provider":"acp","cwd":"/w","providerCommand":{"argv":["a"]}}}`,
		`{"type":"message.dispatch","commandId":"c1","threadId":"thr","payload":{"text":"hi"}}`,
		`{"type":"message.dispatch","commandId":"c1","threadId":"thr","payload":{"text":"hi","mode":"queue_after_active"}}`,
		`{"type":"message.dispatch","commandId":"c2","threadId":"thr","payload":{"text":"hi","mode":"steer_active","targetRunId":"` + runID + `"}}`,
		`{"type":"message.dispatch","commandId":"c2","threadId":"thr","payload":{"text":"hi","mode":"restart_active","targetRunId":"` + runID + `"}}`,
		`{"type":"run.interrupt","commandId":"c3","threadId":"thr","payload":{"runId":"` + runID + `"}}`,
		`{"type":"runtime-request.respond","commandId":"c4","threadId":"thr","payload":{"requestId":"` + requestID + `","decision":"accept"}}`,
		`{"type":"runtime-request.respond","commandId":"c4","threadId":"thr","payload":{"requestId":"` + requestID + `","decision":"answer","answers":{"a":"b"}}}`,
		`{"type":"checkpoint.rollback","commandId":"c5","threadId":"thr","payload":{"checkpointId":"` + checkpointID + `"}}`,
		`{"type":"thread.queue.cancel","commandId":"c6","threadId":"thr","payload":{}}`,
		`{"type":"thread.queue.cancel","commandId":"c6","threadId":"thr","payload":{"runIds":["` + runID + `"],"reason":"r"}}`,
	} {
		f.Add([]byte(seed))
	}
	names := slices.Sorted(maps.Keys(states))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := DecodeCommand(b)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v is not ErrInvalid", err)
			}
			return
		}
		if c.ID == "" || c.Payload == nil {
			t.Fatalf("decoded a command without id or payload: %+v", c)
		}
		// Decided against each state, a command is refused with one of
		// the domain's errors, or its events, applied to the state as a
		// reader applies them, give the thread the decision left.
		for _, name := range names {
			state := states[name]
			th, replica := state.Clone(), state.Clone()
			n := 0
			d, err := Decide(&th, c, Env{Now: t0, NewID: func(p string) string { n++; return fmt.Sprintf("%s_f%d", p, n) }})
			if err != nil {
				if !slices.ContainsFunc([]error{ErrInvalid, ErrNotFound, ErrConflict, sdk.ErrNotResumable, ErrUnsupported},
					func(e error) bool { return errors.Is(err, e) }) {
					t.Fatalf("%s: error %v is none of the domain's", name, err)
				}
				continue
			}
			seq := replica.Sequence
			for _, p := range d.Events {
				seq++
				Evolve(&replica, Event{Sequence: seq, ThreadID: th.ID, At: t0, Payload: p})
			}
			if len(d.Events) > 0 {
				th.Sequence = seq
			}
			if name == "none" {
				replica.ID = th.ID // a created thread takes its id from the command
			}
			decided, _ := json.Marshal(th)
			evolved, _ := json.Marshal(replica)
			if string(decided) != string(evolved) {
				t.Fatalf("%s: %s decided to\n%s\nbut its events evolve to\n%s", name, c.Payload.CommandType(), decided, evolved)
			}
		}
	})
}

// The completion barrier expires a request the provider left pending when
// its turn ended; a session that exits with no run active ends alone.
func TestTurnEndExpiresPendingRequests(t *testing.T) {
	w := running(t, Capabilities{})
	w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventRequestOpened, TurnRef: "u1", RequestRef: "q1", RequestKind: sdk.RequestUserInput})
	d := w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventTurnTerminal, TurnRef: "u1", Status: sdk.TurnCompleted})
	if got := types(d); !strings.HasPrefix(got, "request.resolved node.completed run.completing") {
		t.Fatalf("terminal: %s", got)
	}
	if q := w.thread.Requests[0]; q.Status != RequestStatusExpired || q.Delivery != DeliveryLive {
		t.Fatalf("request: %+v", q)
	}
	d = w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventRuntimeExited, Status: sdk.ExitExited})
	if got := types(d); got != "provider.session.ended" {
		t.Fatalf("exit with no run: %s", got)
	}
}

// A plugin that numbers its turns afresh in each session gives a resumed
// thread's new turn the ref of an earlier one. That is not the earlier
// turn's frame again (it names another attempt): the run fails, saying
// why, rather than waiting forever for a turn whose events look like the
// old one's. The old turn's frame again still allocates nothing, and a
// reused ref for an attempt the host no longer waits for changes nothing.
func TestTurnRefReusedInANewSession(t *testing.T) {
	w := newWorld(t)
	w.send("one")
	w.open("s1")
	first := w.thread.Runs[0].ActiveAttempt
	w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventTurnStarted, ThreadRef: "pt", TurnRef: "turn-1", ClientTurnID: first})
	w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventTurnTerminal, TurnRef: "turn-1", Status: sdk.TurnCompleted, ThreadUsable: true})
	w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventRuntimeExited, Status: sdk.ExitClosed})
	if r := w.thread.Runs[0]; r.Status != RunStatusCompleted {
		t.Fatalf("run 1 %s", r.Status)
	}
	w.send("two")
	second := w.thread.Runs[1].ActiveAttempt
	w.must(Command{ID: "o", ThreadID: "thr", Payload: RecordSessionOpened{SessionID: "s2", ThreadRef: "pt", ResumeRequested: "pt", Resumed: true}})
	if d := w.ev("s2", sdk.RuntimeEvent{Kind: sdk.EventTurnStarted, ThreadRef: "pt", TurnRef: "turn-1", ClientTurnID: first}); len(d.Events) != 0 {
		t.Fatalf("the earlier turn's frame again: %s", types(d))
	}
	d := w.ev("s2", sdk.RuntimeEvent{Kind: sdk.EventTurnStarted, ThreadRef: "pt", TurnRef: "turn-1", ClientTurnID: second})
	if got := types(d); got != "node.completed run.completing checkpoint.scope.opened checkpoint.requested checkpoint.recorded run.ended" {
		t.Fatalf("a reused ref: %s", got)
	}
	r := w.thread.Runs[1]
	want := Failure{Code: "turn_ref_reused", Message: "the provider started this run's turn as turn-1, the ref a turn of run 1 already has: " +
		"a plugin must give every turn of a provider thread its own ref, in every session"}
	if r.Status != RunStatusFailed || r.Failure == nil || *r.Failure != want {
		t.Fatalf("run 2 %s, failure %+v", r.Status, r.Failure)
	}
	if d := w.ev("s2", sdk.RuntimeEvent{Kind: sdk.EventTurnStarted, ThreadRef: "pt", TurnRef: "turn-1", ClientTurnID: second}); len(d.Events) != 0 {
		t.Fatalf("a reused ref for a run that ended: %s", types(d))
	}
}
