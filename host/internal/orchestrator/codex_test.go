package orchestrator_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-run/baton/host/internal/domain"
)

// codexThread creates a codex thread on a transcript.
func (e *env) codexThread(scenario string, policy domain.ApprovalPolicy) (string, domain.Command, domain.Receipt) {
	e.t.Helper()
	return e.newThread("codex", "codex/"+scenario+".ndjson", policy)
}

// One message, one run in one turn on the app server's thread (recorded:
// testdata/codex/simple.ndjson), with the assistant's text and a
// checkpoint.
func TestCodexSimple(t *testing.T) {
	e := newEnv(t)
	e.gitWorkspace()
	threadID, _, _ := e.codexThread("simple", "")
	th := e.play(threadID, "codex/simple.steps.json")
	e.checkTurnRuns(th, []int{0}, [][]string{nil})
	if got := assistantText(th, th.Runs[0].ID); got != "Hello! How can I help you today?" {
		t.Errorf("assistant text %q", got)
	}
	if len(th.ProviderThreads) != 1 || th.ProviderThreads[0].ProviderRef != "01a22c20-9631-7302-96a1-049f8b508f6f" {
		t.Errorf("provider threads %+v; want the app server's thread", th.ProviderThreads)
	}
	e.checkSessionsClosed(threadID)
}

// Invariant 4 with native steering: the message attaches to the active run
// through turn/steer; no new run and no new attempt. Every client command
// sent again returns its receipt and reaches the provider once.
func TestCodexMessageSteering(t *testing.T) {
	e := newEnv(t)
	threadID, create, created := e.codexThread("message_steering", "")
	send := domain.Command{ID: "send", ThreadID: threadID, Payload: domain.DispatchMessage{Text: "Write a long story"}}
	sent := e.dispatch(send)
	e.waitFor(threadID, "the turn to start", func(th domain.Thread) bool { return th.Runs[0].Status == domain.RunStatusRunning })
	steer := domain.Command{ID: "steer", ThreadID: threadID, Payload: domain.DispatchMessage{Text: "Make it short"}} // auto: steer
	steered := e.dispatch(steer)
	th := e.waitFor(threadID, "the run to end", allRunsEnded(1))
	r := e.checkSteeredNatively(threadID, th)
	if got := assistantText(th, r.ID); got != "A short story: the end." {
		t.Fatalf("assistant text %q", got)
	}
	e.redispatchAll([]domain.Command{create, send, steer}, []domain.Receipt{created, sent, steered})
	e.restart()
	if n := e.countFrames(th, `"method":"turn/steer"`); n != 1 {
		t.Errorf("turn/steer sent %d times, want 1", n)
	}
	if n := e.countFrames(th, `"method":"turn/start"`); n != 1 {
		t.Errorf("turn/start sent %d times, want 1", n)
	}
}

// A steering message the provider refuses (codex answers turn/steer with
// an error; authored from the recorded message_steering) is not lost: it
// becomes a run of its own, queued behind the active run and started once
// that run has ended, with the provider's reason recorded against the run
// it was meant for. turn/steer reaches the provider once; the message then
// goes as its own turn.
func TestCodexSteerRefused(t *testing.T) {
	e := newEnv(t)
	threadID, _, _ := e.codexThread("message_steering_refused", "")
	e.dispatch(domain.Command{ID: "send", ThreadID: threadID, Payload: domain.DispatchMessage{Text: "Write a long story"}})
	e.waitFor(threadID, "the turn to start", func(th domain.Thread) bool { return th.Runs[0].Status == domain.RunStatusRunning })
	e.dispatch(domain.Command{ID: "steer", ThreadID: threadID, Payload: domain.DispatchMessage{Text: "Make it short"}}) // auto: steer
	th := e.waitFor(threadID, "both runs to end", allRunsEnded(2))

	type run struct {
		Ordinal   int
		Status    domain.RunStatus
		Message   string // the text of the user message the run is for
		Attempts  int
		Assistant string
		Users     []string // the user messages that are the run's
	}
	var got []run
	for _, r := range th.Runs {
		var users []string
		var msg string
		for _, m := range th.Messages {
			if m.ID == r.MessageID {
				msg = m.Text.String()
			}
			if m.Role == domain.RoleUser && m.RunID == r.ID {
				users = append(users, m.Text.String())
			}
		}
		got = append(got, run{r.Ordinal, r.Status, msg, len(r.Attempts), assistantText(th, r.ID), users})
	}
	want := []run{
		{1, domain.RunStatusCompleted, "Write a long story", 1, "Once upon a time, a long story began, and went on.", []string{"Write a long story"}},
		{2, domain.RunStatusCompleted, "Make it short", 1, "A short story: the end.", []string{"Make it short"}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("runs (-want +got):\n%s", diff)
	}
	var diags []domain.Diagnostic
	for _, d := range th.Diagnostics {
		if d.RunID != "" {
			diags = append(diags, d)
		}
	}
	wantDiags := []domain.Diagnostic{{RunID: th.Runs[0].ID, Title: "the provider did not take a steering message; it was queued as a new run",
		Text: "steer turn 01a22c20-b2d1-7dd0-afd2-b97ac91073a3: codex refused it: cannot steer turn 01a22c20-b2d1-7dd0-afd2-b97ac91073a3: " +
			"it is completing: session busy"}}
	if diff := cmp.Diff(wantDiags, diags); diff != "" {
		t.Errorf("diagnostics of the runs (-want +got):\n%s", diff)
	}

	// The refusal is recorded while run 1 is still ending (its checkpoint
	// is captured after the steer is done with), so run 2 waits for it.
	ordinal := map[string]int{}
	for _, r := range th.Runs {
		ordinal[r.ID] = r.Ordinal
	}
	e.checkOrder(threadID, "the refused steer", []string{
		"message \"Write a long story\" for run 1", "run 1 queued", "run 1 started",
		"message \"Make it short\" for run 1", "steered into run 1",
		"diagnostic for run 1: the provider did not take a steering message; it was queued as a new run",
		"run 2 queued", "run 1 ended completed", "run 2 started", "run 2 ended completed",
	}, func(p domain.Payload) string {
		switch p := p.(type) {
		case domain.MessageAdded:
			if p.Role == domain.RoleUser {
				return fmt.Sprintf("message %q for run %d", p.Text, ordinal[p.RunID])
			}
		case domain.RunQueued:
			return fmt.Sprintf("run %d queued", p.Ordinal)
		case domain.RunStarted:
			return fmt.Sprintf("run %d started", ordinal[p.RunID])
		case domain.RunSteered:
			return fmt.Sprintf("steered into run %d", ordinal[p.RunID])
		case domain.DiagnosticRecorded:
			if p.RunID != "" {
				return fmt.Sprintf("diagnostic for run %d: %s", ordinal[p.RunID], p.Title)
			}
		case domain.RunEnded:
			return fmt.Sprintf("run %d ended %s", ordinal[p.RunID], p.Status)
		}
		return ""
	})
	th = e.checkSessionsClosed(threadID)
	if n := e.countFrames(th, `"method":"turn/steer"`); n != 1 {
		t.Errorf("turn/steer sent %d times, want 1", n)
	}
	if n := e.countFrames(th, `"method":"turn/start"`); n != 2 {
		t.Errorf("turn/start sent %d times, want 2", n)
	}
}

// Invariant 3 (Codex): turn/interrupt is acknowledged; the run ends
// interrupted on turn/completed, which comes after an approval the
// provider asks for after the acknowledgement.
func TestCodexTurnInterrupt(t *testing.T) {
	e := newEnv(t)
	threadID, _, _ := e.codexThread("turn_interrupt_late", "")
	th := e.play(threadID, "codex/turn_interrupt.steps.json")
	r := th.Runs[0]
	e.checkInterrupted(threadID, r, asksAfterAck)
	// Interrupting an ended run is a conflict, and sends nothing.
	if _, err := e.host.Dispatch(t.Context(), domain.Command{ID: "late", ThreadID: threadID,
		Payload: domain.InterruptRun{RunID: r.ID}}); !errors.Is(err, domain.ErrConflict) {
		t.Fatalf("interrupting an ended run: err = %v, want a conflict", err)
	}
	e.restart()
	if n := e.countFrames(th, `"method":"turn/interrupt"`); n != 1 {
		t.Errorf("turn/interrupt sent %d times, want 1", n)
	}
}

// Invariants 2 and 5: a subagent's turn is a node nested under the run's
// root; its end does not end the run; the run count does not move.
func TestCodexSubagent(t *testing.T) {
	e := newEnv(t)
	threadID, _, _ := e.codexThread("subagent", "")
	th := e.play(threadID, "codex/subagent.steps.json")
	if len(th.Runs) != 1 {
		t.Fatalf("runs = %d, want 1", len(th.Runs))
	}
	r := th.Runs[0]
	if r.Status != domain.RunStatusCompleted || r.Ordinal != 1 {
		t.Fatalf("run %d %s", r.Ordinal, r.Status)
	}
	sub := e.subagentTurn(th, r)
	// The child's items hang under its node; its text is not the run's.
	var childMsgs int
	for _, n := range r.Nodes {
		if n.ParentID == sub.ID && n.Kind == domain.NodeAssistantMessage {
			childMsgs++
		}
	}
	if childMsgs == 0 {
		t.Errorf("no assistant message under the subagent node")
	}
	var children int
	for _, pt := range th.ProviderThreads {
		if pt.ParentID != "" {
			children++
		}
	}
	if children != 1 || len(th.ProviderThreads) != 2 {
		t.Fatalf("provider threads: %+v", th.ProviderThreads)
	}
	// The run ended after, and only after, its root turn's terminal.
	e.checkEndedAfterRoot(th, r, sub)
}

// Approvals answered by a client: accept runs the command and the patch,
// decline leaves the file alone and the turn still completes.
func TestCodexApprovals(t *testing.T) {
	for _, tc := range []approvalCase{
		{"approval_accept", "accept", 2, "command_execution", domain.StatusCompleted}, // a command and a patch
		{"approval_decline", "decline", 1, "command_execution", "declined"},
	} {
		t.Run(tc.scenario, func(t *testing.T) { newEnv(t).checkApprovals("codex", tc) })
	}
}

// A message sent while a run is active, with queue_after_active, is a run
// of its own that starts when the first ends.
func TestCodexQueuedRun(t *testing.T) {
	e := newEnv(t)
	e.gitWorkspace()
	threadID, _, _ := e.codexThread("multi_turn", "")
	th := e.play(threadID, "codex/multi_turn.steps.json")
	if len(th.Runs) != 2 {
		t.Fatalf("runs = %d, want 2", len(th.Runs))
	}
	for i, want := range []string{"First reply, after a while.", "Second reply."} {
		r := th.Runs[i]
		if r.Ordinal != i+1 || r.Status != domain.RunStatusCompleted || assistantText(th, r.ID) != want {
			t.Fatalf("run %d: ordinal %d %s %q", i+1, r.Ordinal, r.Status, assistantText(th, r.ID))
		}
	}
	e.checkTurnRuns(th, []int{0, 0}, [][]string{nil, nil})
	if !th.Runs[1].StartedAt.After(*th.Runs[0].EndedAt) && !th.Runs[1].StartedAt.Equal(*th.Runs[0].EndedAt) {
		t.Fatalf("run 2 started at %v, before run 1 ended at %v", th.Runs[1].StartedAt, th.Runs[0].EndedAt)
	}
	recs, _ := e.host.ThreadEvents(threadID, 0)
	var ended1, started2 uint64
	for _, r := range recs {
		if r.Type == "run.ended" && ended1 == 0 {
			ended1 = r.Sequence
		}
		if r.Type == "run.started" && strings.Contains(string(r.Data), th.Runs[1].ID) {
			started2 = r.Sequence
		}
	}
	if started2 < ended1 {
		t.Fatalf("run 2 started (seq %d) before run 1 ended (seq %d)", started2, ended1)
	}
}

// A request of a kind the host does not know is kept as a generic
// request, never answered by policy; a question gets the client's answer.
func TestCodexUnknownRequest(t *testing.T) {
	e := newEnv(t)
	threadID, _, _ := e.codexThread("unknown_request", domain.ApproveAsk)
	th := e.play(threadID, "codex/unknown_request.steps.json")
	if r := th.Runs[0]; r.Status != domain.RunStatusCompleted {
		t.Fatalf("run %s", r.Status)
	}
	kinds := map[domain.RequestKind]domain.RuntimeRequest{}
	for _, q := range th.Requests {
		kinds[q.Kind] = q
	}
	if q, ok := kinds[domain.RequestGeneric]; !ok || q.Title == "" || q.Decision != "decline" {
		t.Errorf("generic request: %+v", q)
	}
	if q, ok := kinds[domain.RequestUserInput]; !ok || q.Answers["answer"] != "Blue" {
		t.Errorf("question: %+v", q)
	}
	// The provider's rate limit is in the projection, with its reset instant.
	if l := th.RateLimits; len(l) != 1 || l[0].Scope != "codex/primary" || l[0].UsedPercent != 42 || l[0].ResetsAt.Unix() != 1800000000 {
		t.Errorf("rate limits: %+v", l)
	}
}
