package domain

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/cockroachdb/datadriven"

	"github.com/baton-run/baton/sdk"
)

// The domain as stories: each script under testdata/stories feeds one
// thread commands and provider events, and after each step prints the
// events decided and the effects asked for (or the error a refused command
// gets). A script's expected output is the test; regenerate them with
//
//	go test ./internal/domain/ -run TestStories -rewrite
//
// and read the diff. The thread is a world's (domain_test.go): decided on
// a scratch copy, rebuilt beside from its events alone, checkpoint captures
// recorded ready at once unless held. Ids come from the world's counter;
// scripts name runs by ordinal and requests by the provider's ref, never
// by id.
//
// Directives (arguments key=value, a value with spaces in parentheses:
// text=(do it in Go); a text or a JSON value too long for a line goes in
// the directive's body):
//
//	create-thread provider=P [model=M] [approvals=ask|accept|decline] [shared-cwd]
//	host NAME|none                   the deciding host (Env.Host) from now
//	claim [reason=R]                 the deciding host claims the thread
//	mark-host-lost host=H            H stopped renewing its lease
//	owner                            the thread's owner, and its loss
//	capabilities [native-steering]   what the thread's provider can do
//	hold-captures on|off             leave checkpoint captures to capture
//	send [text=T] [mode=M] [run=N] [id=MSG]   body: the text
//	open-session id=S [provider=P] [thread=REF] [resume=REF] [resumed]
//	dispatched session=S             the active attempt's StartTurn returned
//	turns session=S thread=REF count=N   N runs' turns played to their end
//	provider-event session=S kind=K [turn= thread= parent= item= item-kind=
//	    request= request-kind= status= title= text= client-turn]
//	    (client-turn: the turn echoes the active attempt's id)
//	    body: JSON merged into the sdk.RuntimeEvent (limit, failure, usage)
//	capture run=N [status=S] [reason=R]  a held capture recorded (run=0:
//	                                 the baseline's)
//	respond request=REF decision=D   a client's answer
//	respond-failed request=REF reason=R
//	unreachable request=REF reason=R
//	steer-failed run=N message=MSG reason=R
//	interrupt run=N [force]
//	cancel-queued [run=N]
//	switch provider=P [model=M] [handoff-max=BYTES] [no-command]  (the
//	                                 command to run P is given unless no-command)
//	rollback run=N [subagent] | baseline | checkpoint=ID   (subagent: the
//	                                 run's first subagent checkpoint)
//	files-restored [written=N] [removed=N] [failure=MSG]
//	provider-reconciled how=none|native_rollback|fresh_thread [turns=N]
//	set-policy                       body: the ContinuationPolicy's JSON
//	check run=N exit=N [output=O]    what a loop's --until check found
//	advance DURATION                 the decisions' clock moves on
//	fire stop|stall|request|wait [timeout=D]   the host's timer for it
//	fail-run run=N code=C message=M
//	retire-session id=S reason=R
//	close-idle id=S
//	recover [reason=R] [host-lost]  start-queued
//	    (host-lost: the last writer was another host, whose lease expired)
//	shutdown [reason=R]              the host drains (Env.ShuttingDown) from now
//	show                             runs, requests, sessions, handoffs
func TestStories(t *testing.T) {
	datadriven.Walk(t, "testdata/stories", func(t *testing.T, path string) {
		s := &story{w: &world{t: t, thread: &Thread{}, replica: &Thread{}, holdSessions: true}}
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			s.w.t = t
			return s.step(t, d)
		})
	})
}

// story is one script's thread.
type story struct {
	w *world
}

// args reads a directive's arguments, refusing any it does not know.
type args struct {
	t    *testing.T
	d    *datadriven.TestData
	vals map[string]string
}

func newArgs(t *testing.T, d *datadriven.TestData, known ...string) args {
	t.Helper()
	a := args{t: t, d: d, vals: map[string]string{}}
	for _, c := range d.CmdArgs {
		if !slices.Contains(known, c.Key) {
			t.Fatalf("%s: %s takes no argument %q; it takes %s", d.Pos, d.Cmd, c.Key, strings.Join(known, ", "))
		}
		a.vals[c.Key] = strings.Join(c.Vals, ", ")
	}
	return a
}

func (a args) get(key string) string { return a.vals[key] }

func (a args) has(key string) bool { _, ok := a.vals[key]; return ok }

func (a args) need(key string) string {
	a.t.Helper()
	v, ok := a.vals[key]
	if !ok {
		a.t.Fatalf("%s: %s needs %s=", a.d.Pos, a.d.Cmd, key)
	}
	return v
}

func (a args) int(key string) int {
	a.t.Helper()
	if !a.has(key) {
		return 0
	}
	n, err := strconv.Atoi(a.vals[key])
	if err != nil {
		a.t.Fatalf("%s: %s=%q is not a whole number", a.d.Pos, key, a.vals[key])
	}
	return n
}

// text is the text= argument, else the directive's body.
func (a args) text() string {
	if a.has("text") {
		return a.vals["text"]
	}
	return strings.TrimSpace(a.d.Input)
}

// run is the run whose ordinal is run=N.
func (s *story) run(a args) *Run {
	a.t.Helper()
	n := a.int("run")
	for i := range s.w.thread.Runs {
		if s.w.thread.Runs[i].Ordinal == n {
			return &s.w.thread.Runs[i]
		}
	}
	a.t.Fatalf("%s: the thread has no run %d", a.d.Pos, n)
	return nil
}

// toOpen is the newest open_session effect whose session has not been
// recorded opened, or nil.
func (s *story) toOpen() *OpenSession {
	for _, e := range slices.Backward(s.w.effects) {
		if e, ok := e.(OpenSession); ok {
			if s.w.thread.session(e.SessionID) == nil {
				return &e
			}
			return nil
		}
	}
	return nil
}

// request is the id of the request the provider opened as request=REF.
func (s *story) request(a args) string {
	ref := a.need("request")
	for _, r := range s.w.thread.Requests {
		if r.ProviderRef == ref {
			return r.ID
		}
	}
	return ref // unknown: the command is refused, and the script shows how
}

func (s *story) step(t *testing.T, d *datadriven.TestData) string {
	w := s.w
	var cmd CommandPayload
	switch d.Cmd {
	case "create-thread":
		a := newArgs(t, d, "provider", "model", "approvals", "shared-cwd")
		p := a.get("provider")
		cmd = CreateThread{Provider: p, Model: a.get("model"), Cwd: "/w", ApprovalPolicy: ApprovalPolicy(a.get("approvals")),
			ProviderCommand: ProviderCommand{Argv: []string{p}}, SharedCwd: a.has("shared-cwd")}
	case "host":
		if len(d.CmdArgs) != 1 {
			t.Fatalf("%s: host takes one name, or none", d.Pos)
		}
		w.host = d.CmdArgs[0].Key
		if w.host == "none" {
			w.host = ""
		}
		return "deciding on host " + d.CmdArgs[0].Key
	case "claim":
		cmd = ClaimThread{Reason: newArgs(t, d, "reason").get("reason")}
	case "mark-host-lost":
		cmd = MarkHostLost{Host: newArgs(t, d, "host").need("host")}
	case "owner":
		newArgs(t, d)
		return s.owner()
	case "capabilities":
		// What the thread's plugin can do: its live session's (steering)
		// and, for a rollback's reconciliation, its plugin's.
		newArgs(t, d, "native-steering", "native-rollback")
		w.caps = Capabilities{NativeSteering: d.HasArg("native-steering"), NativeRollback: d.HasArg("native-rollback")}
		return fmt.Sprintf("%+v", w.caps)
	case "hold-captures":
		w.holdCaptures = newArgs(t, d, "on", "off").has("on")
		return "ok"
	case "send":
		a := newArgs(t, d, "text", "mode", "run", "id")
		p := DispatchMessage{Text: a.text(), Mode: DispatchMode(a.get("mode")), MessageID: a.get("id")}
		if a.has("run") {
			p.TargetRunID = s.run(a).ID
		}
		cmd = p
	case "open-session":
		// The host performs the open_session effect the domain decided:
		// the plugin says which conversation the session runs (thread)
		// and whether it resumed the one asked for.
		a := newArgs(t, d, "thread", "resumed")
		e := s.toOpen()
		if e == nil {
			d.Fatalf(t, "%s: no open_session effect to perform", d.Pos)
		}
		cmd = RecordSessionOpened{SessionID: e.SessionID, Provider: e.Provider, Model: e.Model, ProviderRef: "proc-" + e.SessionID,
			ThreadRef: a.get("thread"), ResumeRequested: e.Resume, Resumed: a.has("resumed")}
	case "dispatched":
		a := newArgs(t, d, "session")
		r := w.thread.ActiveRun()
		if r == nil {
			t.Fatalf("%s: dispatched: the thread has no active run", d.Pos)
		}
		cmd = RecordTurnDispatched{RunID: r.ID, AttemptID: r.ActiveAttempt, SessionID: a.need("session")}
	case "provider-event":
		cmd = s.providerEvent(t, d)
	case "turns":
		return s.turns(t, d)
	case "capture":
		a := newArgs(t, d, "run", "status", "reason")
		status := CheckpointStatus(a.get("status"))
		if status == "" {
			status = CheckpointReady
		}
		id := w.thread.Checkpoints[0].ID // run=0: the baseline
		if a.int("run") != 0 {
			id = s.run(a).CheckpointID
		}
		commit := ""
		if status == CheckpointReady {
			commit = "commit-" + id
		}
		cmd = RecordCheckpoint{CheckpointID: id, Status: status, Commit: commit, Reason: a.get("reason")}
	case "respond":
		a := newArgs(t, d, "request", "decision")
		cmd = RespondToRequest{RequestID: s.request(a), Decision: RequestDecision(a.need("decision"))}
	case "respond-failed":
		a := newArgs(t, d, "request", "reason")
		cmd = RespondFailed{RequestID: s.request(a), Reason: a.get("reason")}
	case "unreachable":
		a := newArgs(t, d, "request", "reason")
		cmd = MarkRequestUnreachable{RequestID: s.request(a), Reason: a.get("reason")}
	case "steer-failed":
		a := newArgs(t, d, "run", "message", "reason")
		cmd = SteerFailed{RunID: s.run(a).ID, MessageID: a.need("message"), Reason: a.get("reason")}
	case "interrupt":
		a := newArgs(t, d, "run", "force")
		cmd = InterruptRun{RunID: s.run(a).ID, Force: a.has("force")}
	case "cancel-queued":
		a := newArgs(t, d, "run")
		var p CancelQueued
		if a.has("run") {
			p.RunIDs = []string{s.run(a).ID}
		}
		cmd = p
	case "switch":
		a := newArgs(t, d, "provider", "model", "handoff-max", "no-command")
		p := a.need("provider")
		sw := SwitchProvider{Provider: p, Model: a.get("model"), HandoffMaxBytes: a.int("handoff-max")}
		if _, used := w.thread.Binding(p); !used && !a.has("no-command") {
			sw.ProviderCommand = ProviderCommand{Argv: []string{p}}
		}
		cmd = sw
	case "rollback":
		a := newArgs(t, d, "run", "subagent", "baseline", "checkpoint")
		switch {
		case a.has("subagent"):
			id := ""
			for _, c := range w.thread.Checkpoints {
				if c.RunOrdinal == a.int("run") && c.NodeID != "" {
					id = c.ID
					break
				}
			}
			cmd = RollbackToCheckpoint{CheckpointID: id}
		case a.has("run"):
			cmd = RollbackToCheckpoint{CheckpointID: s.run(a).CheckpointID}
		case a.has("baseline"):
			cmd = RollbackToCheckpoint{ScopeID: w.thread.CheckpointScopes[0].ID}
		default:
			cmd = RollbackToCheckpoint{CheckpointID: a.get("checkpoint")}
		}
	case "files-restored":
		a := newArgs(t, d, "written", "removed", "failure")
		p := RecordFilesRestored{RollbackID: s.rollbackID(t, d), Written: a.int("written"), Removed: a.int("removed")}
		if a.has("failure") {
			p.Failure = &Failure{Code: "restore_failed", Message: a.get("failure")}
		}
		cmd = p
	case "provider-reconciled":
		a := newArgs(t, d, "how", "turns")
		cmd = RecordProviderReconciled{RollbackID: s.rollbackID(t, d), Reconciliation: Reconciliation(a.need("how")),
			TurnsDropped: a.int("turns")}
	case "set-policy":
		newArgs(t, d)
		var p ContinuationPolicy
		dec := json.NewDecoder(strings.NewReader(d.Input))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&p); err != nil {
			t.Fatalf("%s: set-policy's body is not a ContinuationPolicy: %v", d.Pos, err)
		}
		cmd = SetPolicy{Policy: p}
	case "check":
		a := newArgs(t, d, "run", "exit", "output")
		if w.thread.Loop == nil {
			t.Fatalf("%s: check: the thread has no loop", d.Pos)
		}
		cmd = RecordCheck{CheckResult{RunID: s.run(a).ID, Command: w.thread.Loop.Policy.Until, ExitCode: a.int("exit"),
			Output: a.get("output"), At: w.env().Now}}
	case "advance":
		if len(d.CmdArgs) != 1 {
			t.Fatalf("%s: advance takes one duration, e.g. advance 30m", d.Pos)
		}
		by, err := time.ParseDuration(d.CmdArgs[0].Key)
		if err != nil {
			t.Fatalf("%s: advance: %v", d.Pos, err)
		}
		w.now = w.env().Now.Add(by)
		return "now " + w.now.Format(time.RFC3339)
	case "fire":
		return s.fire(t, d)
	case "fail-run":
		a := newArgs(t, d, "run", "code", "message")
		cmd = FailRun{RunID: s.run(a).ID, Failure: Failure{Code: a.need("code"), Message: a.get("message")}}
	case "close-idle":
		cmd = CloseIdleSession{SessionID: newArgs(t, d, "id").need("id")}
	case "recover":
		a := newArgs(t, d, "reason", "host-lost")
		cmd = Recover{Reason: a.get("reason"), HostLost: a.has("host-lost")}
	case "start-queued":
		newArgs(t, d)
		cmd = StartQueued{}
	case "shutdown":
		// The host drains from now on: the Env says so to every decision.
		w.shuttingDown = true
		cmd = ShutDown{Reason: newArgs(t, d, "reason").get("reason")}
	case "show":
		newArgs(t, d)
		return s.show()
	default:
		t.Fatalf("%s: unknown directive %q (the directives are listed at the top of stories_test.go)", d.Pos, d.Cmd)
	}
	return s.decide(cmd)
}

// providerEvent is one normalized event from a session: the arguments
// name its fields, the body adds any (JSON, sdk.RuntimeEvent's names).
func (s *story) providerEvent(t *testing.T, d *datadriven.TestData) CommandPayload {
	a := newArgs(t, d, "session", "kind", "turn", "thread", "parent", "item", "item-kind", "request", "request-kind",
		"status", "title", "text", "client-turn")
	kind := sdk.EventKind(a.need("kind"))
	e := sdk.RuntimeEvent{Kind: kind, TurnRef: a.get("turn"), ThreadRef: a.get("thread"),
		ParentThreadRef: a.get("parent"), ItemRef: a.get("item"), ItemKind: sdk.ItemKind(a.get("item-kind")),
		RequestRef: a.get("request"), RequestKind: sdk.RequestKind(a.get("request-kind")), Status: sdk.StatusOf(kind, a.get("status")),
		Title: a.get("title"), Text: a.get("text")}
	if a.has("client-turn") {
		// The attempt the host started the turn for, echoed back.
		if r := s.w.thread.ActiveRun(); r != nil {
			e.ClientTurnID = r.ActiveAttempt
		}
	}
	if body := strings.TrimSpace(d.Input); body != "" {
		dec := json.NewDecoder(strings.NewReader(body))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&e); err != nil {
			t.Fatalf("%s: provider-event's body is not an sdk.RuntimeEvent: %v", d.Pos, err)
		}
	}
	return IngestProviderEvent{SessionID: a.need("session"), Event: e}
}

// rollbackID is the thread's rollback in progress.
func (s *story) rollbackID(t *testing.T, d *datadriven.TestData) string {
	if !s.w.thread.RollingBack() {
		t.Fatalf("%s: %s: no rollback is in progress", d.Pos, d.Cmd)
	}
	return s.w.thread.Rollbacks[len(s.w.thread.Rollbacks)-1].ID
}

// fire is the host's timer: the command the thread's deadline of that
// kind calls for, decided at the clock's time if the deadline has passed.
func (s *story) fire(t *testing.T, d *datadriven.TestData) string {
	w := s.w
	a := newArgs(t, d, "stop", "stall", "request", "wait", "timeout")
	var timeout time.Duration
	if a.has("timeout") {
		var err error
		if timeout, err = time.ParseDuration(a.get("timeout")); err != nil {
			t.Fatalf("%s: timeout: %v", d.Pos, err)
		}
	}
	var cmd CommandPayload
	var at time.Time
	ok := false
	switch {
	case a.has("stop"):
		cmd, at, ok = w.thread.StopDeadline()
	case a.has("stall"):
		cmd, at, ok = w.thread.StallDeadline(timeout)
	case a.has("request"):
		cmd, at, ok = w.thread.RequestDeadline(timeout)
	case a.has("wait"):
		if wt := w.thread.NextWait(); wt != nil {
			cmd, at, ok = FireWait{WaitID: wt.ID}, wt.At, true
		}
	default:
		t.Fatalf("%s: fire stop, stall, request or wait", d.Pos)
	}
	switch {
	case !ok:
		return "no timer armed"
	case w.env().Now.Before(at):
		return "not yet: due " + at.Format(time.RFC3339)
	}
	return s.decide(cmd)
}

// turns plays count turns of the thread's runs in a session, each
// dispatched, started and completed, and prints one line a run: for a
// story that needs a long thread, not what each turn decides.
func (s *story) turns(t *testing.T, d *datadriven.TestData) string {
	a := newArgs(t, d, "session", "thread", "count")
	session, thread := a.need("session"), a.need("thread")
	var b strings.Builder
	for range a.int("count") {
		r := s.w.thread.ActiveRun()
		if r == nil {
			t.Fatalf("%s: turns: the thread has no active run", d.Pos)
		}
		id, n, ref := r.ID, r.Ordinal, fmt.Sprintf("u%d", r.Ordinal)
		for _, p := range []CommandPayload{
			RecordTurnDispatched{RunID: r.ID, AttemptID: r.ActiveAttempt, SessionID: session},
			IngestProviderEvent{SessionID: session, Event: sdk.RuntimeEvent{Kind: sdk.EventTurnStarted, ThreadRef: thread,
				TurnRef: ref, ClientTurnID: r.ActiveAttempt}},
			IngestProviderEvent{SessionID: session, Event: sdk.RuntimeEvent{Kind: sdk.EventTurnTerminal, TurnRef: ref,
				Status: sdk.TurnCompleted}},
		} {
			if out := s.decide(p); strings.HasPrefix(out, "error: ") {
				t.Fatalf("%s: turns: run %d: %s", d.Pos, n, out)
			}
		}
		status := RunStatus("left the projection")
		for _, r := range s.w.whole().Runs {
			if r.ID == id {
				status = r.Status
			}
		}
		fmt.Fprintf(&b, "run %d turn %s: %s\n", n, ref, status)
	}
	return b.String()
}

// decide decides the command and prints what it decided. Unless captures
// are held, each checkpoint capture it asks for is then recorded ready, as
// the host does once the capture is done: a decision of its own, printed
// after.
func (s *story) decide(p CommandPayload) string {
	d, err := s.w.decide1(Command{ID: "story", ThreadID: "thr", Payload: p})
	if err != nil {
		return "error: " + err.Error() + "\n"
	}
	var b strings.Builder
	printDecision(&b, d)
	for i := 0; i < len(d.Effects) && !s.w.holdCaptures; i++ {
		if e, ok := d.Effects[i].(CaptureCheckpoint); ok {
			c, err := s.w.decide1(Command{ID: "cap", ThreadID: "thr", Payload: RecordCheckpoint{CheckpointID: e.CheckpointID,
				Status: CheckpointReady, Commit: "commit-" + e.CheckpointID}})
			if err != nil {
				s.w.t.Fatalf("record checkpoint %s: %v", e.CheckpointID, err)
			}
			fmt.Fprintf(&b, "captured %s:\n", e.CheckpointID)
			printDecision(&b, c)
			d.Effects = append(d.Effects, c.Effects...)
		}
	}
	return b.String()
}

func printDecision(b *strings.Builder, d Decision) {
	if len(d.Events) == 0 && len(d.Effects) == 0 {
		b.WriteString("nothing decided\n")
	}
	if len(d.Events) > 0 {
		b.WriteString("events:\n")
		for _, e := range d.Events {
			fmt.Fprintf(b, "  %s%s\n", e.EventType(), fields(e))
		}
	}
	if len(d.Effects) > 0 {
		b.WriteString("effects:\n")
		for _, e := range d.Effects {
			fmt.Fprintf(b, "  %s\n", effectLine(e))
		}
	}
}

// effectLine is an effect as a story prints it: its kind, then its
// fields in their JSON order (the thread's id, the same in every story,
// left out).
func effectLine(e Effect) string {
	return string(e.EffectType()) + fields(e, "type", "threadId")
}

// bare is a value printed without quotes.
var bare = regexp.MustCompile(`^[A-Za-z0-9_./:+-]+$`)

// maxValue bounds a value's print: a handoff's text is its golden file's.
const maxValue = 72

// fields prints v's JSON fields in their order as " key=value", leaving
// out the keys skip names: an event's or an effect's whole content, one
// line, whatever its type.
func fields(v any, skip ...string) string {
	b, err := json.Marshal(v)
	if err != nil {
		return " <" + err.Error() + ">"
	}
	var obj []struct {
		key string
		val json.RawMessage
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return " " + string(b)
	}
	for dec.More() {
		k, _ := dec.Token()
		var raw json.RawMessage
		_ = dec.Decode(&raw)
		obj = append(obj, struct {
			key string
			val json.RawMessage
		}{k.(string), raw})
	}
	var out strings.Builder
	for _, f := range obj {
		if slices.Contains(skip, f.key) {
			continue
		}
		val := string(f.val)
		var str string
		if json.Unmarshal(f.val, &str) == nil && bare.MatchString(str) {
			val = str
		}
		if len(val) > maxValue {
			cut := maxValue - 8
			for !utf8.RuneStart(val[cut]) {
				cut--
			}
			val = fmt.Sprintf("%s…(%d bytes)", val[:cut], len(val))
		}
		fmt.Fprintf(&out, " %s=%s", f.key, val)
	}
	return out.String()
}

// show is a short view of the projection: each run with its attempts,
// each request, session and handoff, and the loop's wait.
func (s *story) show() string {
	t := s.w.thread
	var b strings.Builder
	fmt.Fprintf(&b, "thread provider=%s", t.Provider)
	if t.Model != "" {
		fmt.Fprintf(&b, " model=%s", t.Model)
	}
	b.WriteString("\n")
	for _, r := range t.Runs {
		fmt.Fprintf(&b, "run %d %s provider=%s", r.Ordinal, r.Status, r.Provider)
		if r.StopReason != "" {
			fmt.Fprintf(&b, " stop=%s", r.StopReason)
		}
		if r.Failure != nil {
			fmt.Fprintf(&b, " failure=%s:%q", r.Failure.Code, r.Failure.Message)
		}
		if r.Ending != nil {
			fmt.Fprintf(&b, " ending=%s", r.Ending.Status)
		}
		b.WriteString("\n")
		for _, at := range r.Attempts {
			fmt.Fprintf(&b, "  attempt %s %s", at.Reason, at.Status)
			if at.SessionID != "" {
				fmt.Fprintf(&b, " session=%s", at.SessionID)
			}
			if r.FinalAttempt == at.ID {
				b.WriteString(" final")
			}
			b.WriteString("\n")
		}
		for _, n := range r.Nodes {
			depth := 0
			for p := n.ParentID; p != ""; depth++ {
				p = nodeParent(r.Nodes, p)
			}
			fmt.Fprintf(&b, "  %snode %s %s", strings.Repeat("  ", depth), n.Kind, n.Status)
			if n.Title != "" {
				fmt.Fprintf(&b, " %q", n.Title)
			}
			b.WriteString("\n")
		}
	}
	for _, m := range t.Messages {
		fmt.Fprintf(&b, "message %s %s %q\n", m.Role, m.Status, m.Text.String())
	}
	for _, q := range t.Requests {
		fmt.Fprintf(&b, "request %s %s %s delivery=%s", q.ProviderRef, q.Kind, q.Status, q.Delivery)
		if q.Decision != "" {
			fmt.Fprintf(&b, " decision=%s by=%s", q.Decision, q.AnsweredBy)
		}
		b.WriteString("\n")
	}
	for _, ss := range t.ProviderSessions {
		fmt.Fprintf(&b, "session %s %s %s", ss.ID, ss.Provider, ss.Status)
		if ss.EndReason != "" {
			fmt.Fprintf(&b, " reason=%q", ss.EndReason)
		}
		b.WriteString("\n")
	}
	for _, sc := range t.CheckpointScopes {
		for _, c := range t.Checkpoints {
			if c.ScopeID == sc.ID {
				fmt.Fprintf(&b, "checkpoint %s run=%d %s\n", sc.Kind, c.RunOrdinal, c.Status)
			}
		}
	}
	for _, h := range t.Handoffs {
		fmt.Fprintf(&b, "handoff to=%s %s runs=%d-%d %s\n", h.ToProvider, h.Strategy, h.FromRun, h.ToRun, h.Status)
	}
	if l := t.Loop; l != nil {
		fmt.Fprintf(&b, "loop %s runs=%d", l.Status, l.Runs)
		if wt := t.NextWait(); wt != nil {
			fmt.Fprintf(&b, " wait=%s at=%s probe=%d/%d", wt.Kind, wt.At.Format(time.RFC3339), wt.Probe, wt.MaxProbes)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// owner prints the thread's owner, where it was recorded, and its loss.
func (s *story) owner() string {
	t := s.w.thread
	out := fmt.Sprintf("owner=%q host=%q sharedCwd=%t", t.Owner(), t.Host, t.SharedCwd)
	if l := t.HostLost; l != nil {
		out += fmt.Sprintf(" lost=%s at=%s", l.Host, l.At.Format(time.RFC3339))
	}
	if sum := t.Summary(); sum.Host != t.Owner() || sum.HostLost != t.HostLost {
		s.w.t.Errorf("the summary's host %q and loss %v are not the thread's %q and %v", sum.Host, sum.HostLost, t.Owner(), t.HostLost)
	}
	return out + "\n"
}

// nodeParent is the parent of the node id among nodes.
func nodeParent(nodes []Node, id string) string {
	for _, n := range nodes {
		if n.ID == id {
			return n.ParentID
		}
	}
	return ""
}
