package plugintest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/baton-run/baton/sdk"
	"github.com/baton-run/baton/sdk/clock"
)

// Scenario names a standard conformance scenario.
type Scenario string

// The standard scenarios, each the name of its transcript in a plugin's
// testdata directory (see Dir).
const (
	Simple          Scenario = "simple"
	MultiTurn       Scenario = "multi_turn"
	Interrupt       Scenario = "turn_interrupt"
	Approvals       Scenario = "approval_accept"
	Steering        Scenario = "message_steering"
	Subagents       Scenario = "subagent"
	Rollback        Scenario = "thread_rollback"
	Resume          Scenario = "resume"
	CrashMidTurn    Scenario = "crash_mid_turn"
	MalformedFrames Scenario = "malformed_frames"
)

// Scenarios is every standard scenario, in the order Conformance plays
// them.
var Scenarios = []Scenario{Simple, MultiTurn, Interrupt, Approvals, Steering, Subagents, Rollback, Resume, CrashMidTurn, MalformedFrames}

// Transcript is how a scenario is played: the replay transcript the
// provider plays, and what the client does.
type Transcript struct {
	// File is the replay transcript (NDJSON, see package transcript).
	File string
	// Inputs is the file of what the client does: a script
	// (<scenario>.steps.json, see Script) or messages (<scenario>.messages:
	// one turn's input a line; a "---" line closes the session and resumes
	// its thread in a new one).
	Inputs string
	// Script, when not nil, is what the client does, instead of Inputs.
	Script *Script
	// Skip, when set, says why the provider cannot play the scenario
	// (an agent of a generic protocol that lacks what it needs): the
	// scenario is skipped, saying so.
	Skip string
}

// Transcripts maps a scenario to the transcript that plays it.
type Transcripts map[Scenario]Transcript

// Script is what the client does in a scenario: the same JSON as the
// host's scenario scripts (<scenario>.steps.json), played on the plugin's
// own calls.
type Script struct {
	// Approve answers requests: "accept", "decline" (the default) or
	// "ask" (left to the script's respond steps).
	Approve string `json:"approve,omitempty"`
	Steps   []Step `json:"steps"`
}

// Step is one thing the client does; one field is set.
type Step struct {
	// Send starts a turn with this input, once the turns before it ended;
	// with Mode "steer_active" it steers the running turn instead.
	Send string `json:"send,omitempty"`
	Mode string `json:"mode,omitempty"`
	// WaitFor waits for the newest turn to reach a point: "running" (its
	// turn_started), "text" (assistant text), "item" (an item started),
	// "request" (a request to answer), "ended" (every turn ended). A wait
	// is over too when the turn ended.
	WaitFor string `json:"waitFor,omitempty"`
	// Interrupt interrupts the newest turn.
	Interrupt bool `json:"interrupt,omitempty"`
	// Respond answers the oldest request not answered yet.
	Respond sdk.Decision      `json:"respond,omitempty"`
	Answers map[string]string `json:"answers,omitempty"`
	// SleepMS is a real provider's pause; a replay skips it.
	SleepMS int `json:"sleepMs,omitempty"`
	// Rollback, once every turn ended, rolls the thread back to after its
	// N-th turn (0: before the first), naming the oldest turn it drops.
	Rollback *int `json:"rollback,omitempty"`
	// Resume closes the session and opens another that resumes its
	// thread.
	Resume bool `json:"resume,omitempty"`
}

// Dir is the transcripts of a plugin's testdata directory: for each
// scenario, <dir>/<scenario>.ndjson with its inputs <scenario>.steps.json
// or <scenario>.messages. Every scenario is named, whether its file exists
// or not, so that Conformance can say which file it looked for.
func Dir(dir string) Transcripts {
	ts := Transcripts{}
	for _, sc := range Scenarios {
		base := filepath.Join(dir, string(sc))
		tr := Transcript{File: base + ".ndjson"}
		for _, ext := range []string{".steps.json", ".messages"} {
			if _, err := os.Stat(base + ext); err == nil {
				tr.Inputs = base + ext
				break
			}
		}
		ts[sc] = tr
	}
	return ts
}

// calledFor says whether a plugin of capabilities c must pass scenario
// sc, and why.
func calledFor(sc Scenario, c sdk.Capabilities) (bool, string) {
	switch sc {
	case Interrupt:
		return c.Interrupt, "Interrupt"
	case Approvals:
		return c.Approvals, "Approvals"
	case Steering:
		return c.NativeSteering, "NativeSteering"
	case Subagents:
		return c.Subagents, "Subagents"
	case Rollback:
		return c.NativeRollback, "NativeRollback"
	case Resume:
		return c.Resume, "Resume"
	}
	return true, "every plugin"
}

// Conformance is the conformance suite: it starts the plugin binary bin
// through go-plugin, reads its Description, and plays, each as a subtest
// in a plugin process of its own, the scenarios its capabilities call
// for: simple, multi_turn, crash_mid_turn and malformed_frames always;
// turn_interrupt for Interrupt, approval_accept for Approvals,
// message_steering for NativeSteering, subagent for Subagents,
// thread_rollback for NativeRollback, resume for Resume. A declared
// capability whose transcript is missing fails (naming the file); a
// transcript of a capability not declared is skipped, with a note.
// crash_mid_turn and malformed_frames, when not given, are made from the
// simple transcript (see CrashTranscript and MalformedTranscript).
//
// Every session's events are checked against the event contract
// (CheckContract), the sessions of a scenario that resumes its thread
// against each other (CheckThread: a resumed session gives no turn or
// item ref an earlier one gave), and each scenario's own outcome: its turns end
// completed (interrupted for turn_interrupt), a request is answered for
// approval_accept, a child thread appears for subagent, the rollback and
// the resume succeed, and the replay peer saw every frame it expected.
// In the simple scenario's session, once its turns ended, the RPC of each
// capability the plugin does not declare must answer sdk.ErrUnsupported
// and send the provider nothing (CheckUndeclared).
//
//	func TestConformance(t *testing.T) {
//		plugintest.Conformance(t, plugintest.Build(t, "."), plugintest.Dir("testdata"))
//	}
func Conformance(t *testing.T, bin string, transcripts Transcripts) {
	t.Helper()
	d := Start(t, bin).Description
	t.Logf("plugin %s %s (%s, sdk %s): capabilities %+v", d.Name, d.Version, d.WireProtocol, d.SDKVersion, d.Capabilities)
	for _, sc := range Scenarios {
		t.Run(string(sc), func(t *testing.T) {
			need, why := calledFor(sc, d.Capabilities)
			tr, given := transcripts[sc]
			if tr.Skip != "" {
				t.Skip(tr.Skip)
			}
			_, statErr := os.Stat(tr.File)
			exists := given && tr.File != "" && statErr == nil
			switch {
			case !need && exists:
				t.Skipf("%s is not declared: transcript %s not played", why, tr.File)
			case !need:
				t.Skipf("%s is not declared", why)
			case (sc == CrashMidTurn || sc == MalformedFrames) && !exists:
				simple := transcripts[Simple]
				if _, err := os.Stat(simple.File); err != nil {
					t.Fatalf("%s is made from the simple transcript, and there is none: %v", sc, err)
				}
				tr = derive(t, sc, simple)
			case !given:
				t.Fatalf("%s is declared, and no transcript was given for scenario %s", why, sc)
			case !exists:
				t.Fatalf("%s is declared, and its transcript is missing: looked for %s", why, tr.File)
			}
			play(t, bin, sc, tr)
		})
	}
}

// derive makes the crash_mid_turn or malformed_frames transcript of the
// simple one, played on its first input.
func derive(t *testing.T, sc Scenario, simple Transcript) Transcript {
	t.Helper()
	script := readScript(t, simple)
	first := ""
	for _, st := range script.Steps {
		if st.Send != "" {
			first = st.Send
			break
		}
	}
	if first == "" {
		t.Fatalf("%s: the simple scenario sends no input", sc)
	}
	var b []byte
	var err error
	if sc == CrashMidTurn {
		b, err = CrashTranscript(simple.File, first)
	} else {
		b, err = MalformedTranscript(simple.File, first)
	}
	if err != nil {
		t.Fatalf("%s: %v", sc, err)
	}
	f := filepath.Join(t.TempDir(), string(sc)+".ndjson")
	if err := os.WriteFile(f, b, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s made from %s: %s", sc, simple.File, describeDerived(sc))
	return Transcript{File: f, Script: &Script{Approve: script.Approve, Steps: []Step{{Send: first}}}}
}

func describeDerived(sc Scenario) string {
	if sc == CrashMidTurn {
		return "cut after the turn's first inbound frame, the provider exits with an error"
	}
	return "a line that is not JSON and a frame of the wrong shape sent after the turn's first inbound frame"
}

// readScript is what the client does in tr.
func readScript(t *testing.T, tr Transcript) Script {
	t.Helper()
	if tr.Script != nil {
		return *tr.Script
	}
	if tr.Inputs == "" {
		t.Fatalf("transcript %s has no inputs: give Transcript.Script, or put a .steps.json or .messages file beside it", tr.File)
	}
	if strings.HasSuffix(tr.Inputs, ".messages") {
		var s Script
		for g, group := range ReadGroups(t, tr.Inputs) {
			if g > 0 {
				s.Steps = append(s.Steps, Step{Resume: true})
			}
			for _, m := range group {
				s.Steps = append(s.Steps, Step{Send: m})
			}
		}
		return s
	}
	b, err := os.ReadFile(tr.Inputs)
	if err != nil {
		t.Fatal(err)
	}
	var s Script
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		t.Fatalf("inputs %s: %v", tr.Inputs, err)
	}
	return s
}

// player plays one scenario's script on a plugin.
type player struct {
	t      *testing.T
	sc     Scenario
	p      *Plugin
	s      *Session
	script Script
	calls  []TurnCall
	starts []int    // where each call's events begin in s.all
	thread []string // the refs of the turns on the thread, for rollback
	// pending are the requests opened and not answered yet (approve ask).
	pending []sdk.RuntimeEvent
	// sessions done: their events and what was done in them.
	done []sessionRun
}

type sessionRun struct {
	evs []sdk.RuntimeEvent
	run Run
}

func play(t *testing.T, bin string, sc Scenario, tr Transcript) {
	t.Helper()
	pl := &player{t: t, sc: sc, p: Start(t, bin), script: readScript(t, tr)}
	pl.open(func() *Session { return pl.p.Open(t, tr.File, t.TempDir()) })
	rolled, resumed := false, false
	for i, st := range pl.script.Steps {
		switch {
		case st.Send != "" && st.Mode == "steer_active":
			ref := pl.current()
			if err := pl.s.Steer(ref, st.Send); err != nil {
				t.Fatalf("step %d: steer turn %s: %v", i+1, ref, err)
			}
		case st.Send != "" && (st.Mode == "" || st.Mode == "queue_after_active"):
			pl.waitEnded()
			pl.startTurn(st.Send)
		case st.Send != "":
			t.Fatalf("step %d: send mode %q is the host's, not a plugin's", i+1, st.Mode)
		case st.WaitFor != "":
			pl.waitFor(st.WaitFor)
		case st.Interrupt:
			pl.s.Interrupt(t, pl.current())
		case st.Respond != "":
			pl.respond(i, st)
		case st.Rollback != nil:
			pl.rollback(i, *st.Rollback)
			rolled = true
		case st.Resume:
			pl.resume()
			resumed = true
		}
	}
	pl.waitEnded()
	if roots := rootTerminals(pl.s.all); sc == CrashMidTurn && len(roots) > 0 && roots[len(roots)-1].ThreadUsable {
		// The thread goes on: the session lives on (a provider process
		// per turn), and closes.
		pl.closeLenient()
	} else if sc == CrashMidTurn {
		pl.wait("runtime_exited after the crash", func() bool {
			return Index(pl.s.all, func(ev sdk.RuntimeEvent) bool { return ev.Kind == sdk.EventRuntimeExited }) >= 0
		})
		pl.finish()
	} else if sc == MalformedFrames && Index(pl.s.all, func(ev sdk.RuntimeEvent) bool {
		return ev.Kind == sdk.EventTurnTerminal && ev.Status == sdk.TurnFailed
	}) >= 0 {
		pl.closeLenient()
	} else {
		if sc == Simple {
			pl.checkUndeclared()
		}
		pl.s.Close(t)
		pl.finish()
	}
	// The plugin lives on, whatever its sessions did.
	if _, err := pl.p.Describe(context.Background()); err != nil {
		t.Errorf("%s: the plugin died: describe after the scenario: %v", sc, err)
	}
	pl.checkOutcome(rolled, resumed)
	if !t.Failed() {
		evs, turns := 0, 0
		for _, sr := range pl.done {
			evs, turns = evs+len(sr.evs), turns+len(sr.run.Turns)
		}
		defer func() {
			if !t.Failed() {
				t.Logf("%s: %d session(s), %d turns, %d events: the contract holds", sc, len(pl.done), turns, evs)
			}
		}()
	}
	// The sessions of a scenario are one thread's: each after the first
	// resumes it.
	var thread [][]sdk.RuntimeEvent
	for _, sr := range pl.done {
		thread = append(thread, sr.evs)
	}
	for _, v := range CheckThread(thread) {
		t.Errorf("%s: %s", sc, v)
	}
	for n, sr := range pl.done {
		for _, v := range CheckContract(sr.evs, sr.run) {
			t.Errorf("%s, session %d: %s", sc, n+1, v)
		}
		if t.Failed() || testing.Verbose() && os.Getenv("BATON_CONFORMANCE_DUMP") != "" {
			t.Logf("session %d events:\n%s", n+1, Dump(sr.evs))
		}
	}
}

// open opens the scenario's (next) session.
func (pl *player) open(open func() *Session) {
	pl.s = open()
	pl.calls, pl.starts = nil, nil
	pl.s.AnswerFunc = func(ev sdk.RuntimeEvent) (sdk.Decision, map[string]string) {
		switch pl.script.Approve {
		case "accept":
			return sdk.DecisionAccept, nil
		case "ask":
			pl.pending = append(pl.pending, ev)
			return "", nil
		}
		return sdk.DecisionDecline, nil
	}
}

func (pl *player) startTurn(text string) {
	pl.starts = append(pl.starts, len(pl.s.all))
	r := pl.s.StartTurn(pl.t, text)
	pl.calls = append(pl.calls, TurnCall{ClientTurnID: fmt.Sprintf("client-turn-%d", pl.s.turns), TurnRef: r.TurnRef})
}

// turnRef is the ref of the session's k-th turn, if known yet: its
// StartTurn's answer, the turn_started echoing its client turn id, or the
// first root turn_started after the call.
func (pl *player) turnRef(k int) string {
	c := pl.calls[k]
	if c.TurnRef != "" {
		return c.TurnRef
	}
	evs := pl.s.all[pl.starts[k]:]
	if i := Index(evs, func(ev sdk.RuntimeEvent) bool {
		return ev.Kind == sdk.EventTurnStarted && ev.ClientTurnID == c.ClientTurnID
	}); i >= 0 {
		return evs[i].TurnRef
	}
	children := map[string]bool{}
	for _, ev := range pl.s.all {
		if ev.Kind == sdk.EventThreadStarted && ev.ParentThreadRef != "" {
			children[ev.ThreadRef] = true
		}
	}
	if i := Index(evs, func(ev sdk.RuntimeEvent) bool { return ev.Kind == sdk.EventTurnStarted && !children[ev.ThreadRef] }); i >= 0 {
		return evs[i].TurnRef
	}
	return ""
}

// current is the newest turn's ref ("" if not known yet).
func (pl *player) current() string {
	if len(pl.calls) == 0 {
		pl.t.Fatal("no turn started yet")
	}
	return pl.turnRef(len(pl.calls) - 1)
}

// ended says whether the session's k-th turn ended; the session's
// provider exiting ends them all.
func (pl *player) ended(k int) bool {
	if Index(pl.s.all, func(ev sdk.RuntimeEvent) bool { return ev.Kind == sdk.EventRuntimeExited }) >= 0 {
		return true
	}
	ref := pl.turnRef(k)
	return ref != "" && Index(pl.s.all[pl.starts[k]:], func(ev sdk.RuntimeEvent) bool {
		return ev.Kind == sdk.EventTurnTerminal && ev.TurnRef == ref
	}) >= 0
}

func (pl *player) allEnded() bool {
	for k := range pl.calls {
		if !pl.ended(k) {
			return false
		}
	}
	return true
}

// wait reads events until ok holds.
func (pl *player) wait(what string, ok func() bool) {
	pl.t.Helper()
	if ok() {
		return
	}
	pl.s.Until(pl.t, what, func(sdk.RuntimeEvent) bool { return ok() })
}

func (pl *player) waitEnded() {
	pl.t.Helper()
	pl.wait("every turn's turn_terminal", pl.allEnded)
}

func (pl *player) waitFor(what string) {
	pl.t.Helper()
	k := len(pl.calls) - 1
	if k < 0 {
		pl.t.Fatalf("wait for %q before any turn", what)
	}
	since := func(match func(sdk.RuntimeEvent) bool) func() bool {
		return func() bool { return pl.ended(k) || Index(pl.s.all[pl.starts[k]:], match) >= 0 }
	}
	switch what {
	case "running":
		pl.wait("turn_started", func() bool {
			return pl.ended(k) || pl.turnRef(k) != "" && Index(pl.s.all[pl.starts[k]:], func(ev sdk.RuntimeEvent) bool {
				return ev.Kind == sdk.EventTurnStarted && ev.TurnRef == pl.turnRef(k)
			}) >= 0
		})
	case "text":
		pl.wait("assistant text", since(func(ev sdk.RuntimeEvent) bool {
			return ev.Kind == sdk.EventContentDelta && ev.ItemKind == sdk.ItemAssistantMessage
		}))
	case "item":
		pl.wait("an item", since(func(ev sdk.RuntimeEvent) bool { return ev.Kind == sdk.EventItemStarted }))
	case "request":
		pl.wait("a request", func() bool { return len(pl.pending) > 0 || pl.allEnded() })
	case "ended":
		pl.waitEnded()
	default:
		pl.t.Fatalf("unknown wait %q", what)
	}
}

func (pl *player) respond(i int, st Step) {
	if len(pl.pending) == 0 {
		pl.t.Fatalf("step %d: no request to answer (events: %s)", i+1, Kinds(pl.s.all))
	}
	q := pl.pending[0]
	pl.pending = pl.pending[1:]
	if err := pl.p.RespondToRequest(context.Background(), sdk.RespondToRequestRequest{SessionID: pl.s.ID, RequestRef: q.RequestRef,
		Decision: st.Respond, Answers: st.Answers}); err != nil {
		pl.t.Fatalf("step %d: answer request %s: %v", i+1, q.RequestRef, err)
	}
}

// rollback drops the turns after the n-th of the thread.
func (pl *player) rollback(i, n int) {
	pl.waitEnded()
	pl.thread = nil
	for k := range pl.calls {
		pl.thread = append(pl.thread, pl.turnRef(k))
	}
	if n < 0 || n >= len(pl.thread) {
		pl.t.Fatalf("step %d: rollback to after turn %d of %d", i+1, n, len(pl.thread))
	}
	thread := ""
	for _, ev := range pl.s.all {
		if ev.Kind == sdk.EventTurnStarted && ev.TurnRef == pl.thread[len(pl.thread)-1] {
			thread = ev.ThreadRef
		}
	}
	_, err := pl.p.RollbackThread(context.Background(), sdk.RollbackThreadRequest{SessionID: pl.s.ID, ThreadRef: thread,
		Turns: uint32(len(pl.thread) - n), BeforeTurnRef: pl.thread[n]})
	if err != nil {
		pl.t.Fatalf("%s: step %d: RollbackThread of the last %d turns (from %s): %v", pl.sc, i+1, len(pl.thread)-n, pl.thread[n], err)
	}
}

// resume closes the session and opens one that resumes its thread: the
// newest root thread_started's, else the one OpenSession named.
func (pl *player) resume() {
	pl.waitEnded()
	old, run := pl.s, pl.run()
	thread := old.Open.ProviderThreadRef
	for _, ev := range old.all {
		if ev.Kind == sdk.EventThreadStarted && ev.ParentThreadRef == "" && ev.ThreadRef != "" {
			thread = ev.ThreadRef
		}
	}
	if thread == "" {
		pl.t.Fatalf("%s: no thread to resume: OpenSession named none, and no root thread_started did", pl.sc)
	}
	old.Close(pl.t)
	pl.done = append(pl.done, sessionRun{evs: drain(pl.t, old), run: run})
	req := old.req
	req.SessionID, req.ResumeThreadRef = "", thread
	pl.open(func() *Session { return pl.p.OpenWith(pl.t, req) })
	if !pl.s.Open.Resumed {
		pl.t.Errorf("%s: the session that resumes thread %s says it did not: %+v", pl.sc, thread, pl.s.Open)
	}
}

// checkUndeclared holds the live session to CheckUndeclared: what the
// calls sent the provider, the replay peer finds unexpected when the
// session closes.
func (pl *player) checkUndeclared() {
	pl.t.Helper()
	ctx, cancel := clock.WithTimeout(context.Background(), Clock, Timeout,
		fmt.Errorf("the undeclared capabilities' calls had no answer after %v", Timeout))
	defer cancel()
	for _, v := range CheckUndeclared(ctx, pl.p, pl.p.Description.Capabilities, pl.s.ID) {
		pl.t.Errorf("%s: %s", pl.sc, v)
	}
}

// finish records the closed session's events.
func (pl *player) finish() {
	pl.done = append(pl.done, sessionRun{evs: drain(pl.t, pl.s), run: pl.run()})
}

func (pl *player) run() Run {
	r := Run{Turns: pl.calls, Subagents: pl.sc == Subagents}
	switch pl.sc {
	case CrashMidTurn:
		r.Crashed = true
	case MalformedFrames:
		r.Malformed = 2
	}
	return r
}

// closeLenient closes a session whose provider may not have played its
// transcript to the end (a plugin that failed the turn of a malformed
// frame).
func (pl *player) closeLenient() {
	if err := pl.p.CloseSession(context.Background(), pl.s.ID); err != nil {
		pl.t.Fatalf("close session: %v", err)
	}
	pl.s.Until(pl.t, "runtime exit", func(ev sdk.RuntimeEvent) bool { return ev.Kind == sdk.EventRuntimeExited })
	pl.finish()
}

// checkOutcome checks what the scenario itself must end with.
func (pl *player) checkOutcome(rolled, resumed bool) {
	t := pl.t
	for n, sr := range pl.done {
		roots := rootTerminals(sr.evs)
		for _, term := range roots {
			want := sdk.TurnCompleted
			switch pl.sc {
			case Interrupt:
				want = sdk.TurnInterrupted
			case CrashMidTurn, MalformedFrames:
				continue // CheckContract's
			}
			if term.Status != want || (want == sdk.TurnCompleted && !term.ThreadUsable) {
				wantUsable := ""
				if want == sdk.TurnCompleted {
					wantUsable = " with ThreadUsable true (the thread can take another turn)"
				}
				t.Errorf("%s, session %d: turn %s ended %s (usable %v, failure %+v) at #%d; want %s%s", pl.sc, n+1, term.TurnRef, sdk.StatusWord(term.Status),
					term.ThreadUsable, term.Failure, term.Sequence, want, wantUsable)
			}
		}
		if pl.sc == Approvals {
			if Index(sr.evs, func(ev sdk.RuntimeEvent) bool {
				return ev.Kind == sdk.EventRequestResolved && ev.Status == sdk.DecisionAccept
			}) < 0 {
				t.Errorf("%s: no request_opened resolved accept: %s", pl.sc, Kinds(sr.evs))
			}
		}
	}
	does := func(f func(Step) bool) bool { return slices.ContainsFunc(pl.script.Steps, f) }
	if pl.sc == Steering && !does(func(st Step) bool { return st.Send != "" && st.Mode == "steer_active" }) {
		t.Errorf("%s: the script steers nothing (a send with mode steer_active)", pl.sc)
	}
	if pl.sc == Interrupt && !does(func(st Step) bool { return st.Interrupt }) {
		t.Errorf("%s: the script interrupts nothing", pl.sc)
	}
	if pl.sc == Rollback && !rolled {
		t.Errorf("%s: the script rolls nothing back", pl.sc)
	}
	if pl.sc == Resume && !resumed {
		t.Errorf("%s: the script resumes nothing (a .messages file with a \"---\" line)", pl.sc)
	}
}

// rootTerminals are the turn_terminal events of turns not on a child
// thread.
func rootTerminals(evs []sdk.RuntimeEvent) []sdk.RuntimeEvent {
	children := map[string]bool{}
	var out []sdk.RuntimeEvent
	for _, ev := range evs {
		switch {
		case ev.Kind == sdk.EventThreadStarted && ev.ParentThreadRef != "":
			children[ev.ThreadRef] = true
		case ev.Kind == sdk.EventTurnTerminal && !children[ev.ThreadRef]:
			out = append(out, ev)
		}
	}
	return out
}

// drain reads a session's events to the end of its stream (after its
// runtime_exited) and returns them all.
func drain(t *testing.T, s *Session) []sdk.RuntimeEvent {
	t.Helper()
	deadline := clock.Or(Clock).NewTimer(Timeout)
	defer deadline.Stop()
	for {
		select {
		case ev, ok := <-s.events:
			if !ok {
				select {
				case err := <-s.errc:
					if !errors.Is(err, context.Canceled) {
						t.Errorf("event stream of session %s: %v", s.ID, err)
					}
				default:
				}
				return s.all
			}
			s.all = append(s.all, ev)
		case <-deadline.C():
			t.Errorf("session %s: its event stream did not end after runtime_exited", s.ID)
			return s.all
		}
	}
}

// Dump lists events, one a line, for failure messages.
func Dump(evs []sdk.RuntimeEvent) string {
	var b strings.Builder
	for _, ev := range evs {
		fmt.Fprintf(&b, "  #%d %s", ev.Sequence, ev.Kind)
		for _, f := range []struct{ k, v string }{{"thread", ev.ThreadRef}, {"parent", ev.ParentThreadRef}, {"turn", ev.TurnRef},
			{"client", ev.ClientTurnID}, {"item", ev.ItemRef}, {"itemKind", string(ev.ItemKind)}, {"request", ev.RequestRef},
			{"status", sdk.StatusWord(ev.Status)}} {
			if f.v != "" {
				fmt.Fprintf(&b, " %s=%s", f.k, f.v)
			}
		}
		if ev.Kind == sdk.EventTurnTerminal {
			fmt.Fprintf(&b, " usable=%v", ev.ThreadUsable)
		}
		if ev.RawFrame != 0 {
			fmt.Fprintf(&b, " raw=%d", ev.RawFrame)
		}
		b.WriteByte('\n')
	}
	return b.String()
}
