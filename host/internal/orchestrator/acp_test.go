package orchestrator_test

import (
	"encoding/json"
	"errors"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/baton-run/baton/host/internal/domain"
)

// TestSimple: one message makes one run with one root node and one provider
// turn, the assistant's text, and events in strictly increasing sequence. A
// duplicate command returns its receipt and sends nothing to the provider
// again. A new host on the same data dir shows the same projection.
func TestSimple(t *testing.T) {
	e := newEnv(t)
	e.gitWorkspace()
	threadID := e.createThread("acp", "acp/simple.ndjson")
	msgs := messages(t, "acp/simple.messages")
	want := assistantTexts(t, "acp/simple.ndjson")

	send := domain.Command{ID: "send-1", ThreadID: threadID, Payload: domain.DispatchMessage{Text: msgs[0]}}
	first := e.dispatch(send)
	th := e.waitFor(threadID, "the run to end", allRunsEnded(1))

	if len(th.Runs) != 1 {
		t.Fatalf("runs = %d, want 1", len(th.Runs))
	}
	run := th.Runs[0]
	if run.Ordinal != 1 || run.Status != domain.RunStatusCompleted {
		t.Fatalf("run = ordinal %d status %q, want ordinal 1 completed (failure: %+v)", run.Ordinal, run.Status, run.Failure)
	}
	if got := assistantText(th, run.ID); got != want[0] {
		t.Errorf("assistant text = %q, want %q", got, want[0])
	}
	// One turn; one root checkpoint for the run, after the baseline; the
	// agent only talked, so it changed no file.
	e.checkTurnRuns(th, []int{0}, [][]string{nil})
	roots := rootCheckpoints(th)
	if len(roots) != 2 || roots[0].RunOrdinal != 0 {
		t.Fatalf("root checkpoints: %+v; want the baseline and the run's", roots)
	}
	// The run's own checkpoint is recorded after the provider's terminal
	// (the files as the turn left them), and the run ends after that.
	e.checkOrder(threadID, "the run's end", []string{"baseline recorded", "root turn's terminal", "run completing", "run's checkpoint recorded", "run ended"},
		runEnd(run, func(p domain.Payload) string {
			if p, ok := p.(domain.CheckpointRecorded); ok {
				switch p.CheckpointID {
				case roots[0].ID:
					return "baseline recorded"
				case run.CheckpointID:
					return "run's checkpoint recorded"
				}
			}
			return ""
		}))

	// The same command again: the same receipt, no new events, no prompt.
	head := e.host.LastSequence()
	again := e.dispatch(send)
	if again != first {
		t.Errorf("duplicate receipt = %+v, want the original %+v", again, first)
	}
	if e.host.LastSequence() != head {
		t.Errorf("the duplicate appended events: head %d -> %d", head, e.host.LastSequence())
	}
	conflict := send
	conflict.Payload = domain.DispatchMessage{Text: "something else"}
	if _, err := e.host.Dispatch(t.Context(), conflict); !errors.Is(err, domain.ErrConflict) {
		t.Errorf("same command id with other content: err = %v, want a conflict", err)
	}

	// The plugin and the replay peer ran as processes of their own.
	if len(th.ProviderSessions) != 1 {
		t.Fatalf("provider sessions = %d, want 1", len(th.ProviderSessions))
	}
	ses := th.ProviderSessions[0]
	me := os.Getpid()
	if ses.PluginPid == 0 || ses.ProviderPid == 0 || ses.PluginPid == me || ses.ProviderPid == me || ses.PluginPid == ses.ProviderPid {
		t.Errorf("pids: test %d, plugin %d, provider %d; want three different processes", me, ses.PluginPid, ses.ProviderPid)
	}
	if err := syscall.Kill(ses.ProviderPid, 0); err != nil {
		t.Errorf("the replay peer (pid %d) is not running: %v", ses.ProviderPid, err)
	}

	assertSequencesIncrease(t, e, threadID)

	// Closing the host ends the session cleanly: a replay peer that saw a
	// second prompt or kept unused entries would have exited with an error.
	e.restart()
	// The plugin's raw-frame log of the session holds exactly one prompt.
	if n := strings.Count(e.rawFrames(ses.ID), `"method":"session/prompt"`); n != 1 {
		t.Errorf("the provider was sent %d prompts, want 1", n)
	}
	th2, err := e.host.Thread(threadID)
	if err != nil {
		t.Fatal(err)
	}
	if s := th2.ProviderSessions[0]; s.Status != domain.SessionStatusEnded || s.EndReason != "closed" {
		t.Errorf("session after close = %s (%q), want ended (\"closed\")", s.Status, s.EndReason)
	}
	e.restart()
	th3, err := e.host.Thread(threadID)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(th2, th3, cmpopts.IgnoreUnexported(domain.Thread{}, domain.Run{})); diff != "" {
		t.Errorf("the projection rebuilt by a new host differs (-before +after):\n%s", diff)
	}
}

// Invariant 7's other half: a command id is one command, on one thread. The
// same command (same payload) sent again on another thread is a conflict
// that names the thread it was used on, and does nothing there: no event,
// no run, no provider session, while on its own thread it is still the
// duplicate it was.
func TestCommandIDOnAnotherThreadIsAConflict(t *testing.T) {
	e := newEnv(t)
	create := func(id string) string {
		return e.dispatch(domain.Command{ID: id, Payload: domain.CreateThread{Provider: "acp", Cwd: e.ws,
			ProviderCommand: e.peer("acp", "acp/simple.ndjson")}}).ThreadID
	}
	first, other := create("create-first"), create("create-other")
	send := domain.Command{ID: "send-1", ThreadID: first, Payload: domain.DispatchMessage{Text: messages(t, "acp/simple.messages")[0]}}
	rc := e.dispatch(send)
	e.waitFor(first, "the run to end", allRunsEnded(1))

	head := e.host.LastSequence()
	before := mustThread(t, e, other)
	elsewhere := send
	elsewhere.ThreadID = other
	_, err := e.host.Dispatch(t.Context(), elsewhere)
	want := "conflict: command id send-1 already exists: it was used for another message.dispatch command on thread " + first
	if !errors.Is(err, domain.ErrConflict) || !errors.Is(err, domain.ErrExists) || err.Error() != want {
		t.Fatalf("the same command on another thread: err = %v\nwant %q", err, want)
	}
	if got := e.host.LastSequence(); got != head {
		t.Errorf("the refused command appended events: head %d -> %d", head, got)
	}
	if diff := cmp.Diff(before, mustThread(t, e, other), cmpopts.IgnoreUnexported(domain.Thread{}, domain.Run{})); diff != "" {
		t.Errorf("the refused command changed the other thread (-before +after):\n%s", diff)
	}
	if again := e.dispatch(send); again != rc {
		t.Errorf("on its own thread, the duplicate's receipt = %+v, want the original %+v", again, rc)
	}
}

// TestMultiTurn: each message is its own run; runs queue behind the active
// one and complete in order on the same provider thread.
func TestMultiTurn(t *testing.T) {
	e := newEnv(t)
	e.gitWorkspace()
	threadID := e.createThread("acp", "acp/multi_turn.ndjson")
	msgs := messages(t, "acp/multi_turn.messages")
	want := assistantTexts(t, "acp/multi_turn.ndjson")
	if len(msgs) < 2 || len(want) != len(msgs) {
		t.Fatalf("scenario has %d messages and %d prompts; want the same, at least 2", len(msgs), len(want))
	}
	for i, m := range msgs {
		e.dispatch(domain.Command{ID: "send-" + string(rune('a'+i)), ThreadID: threadID, Payload: domain.DispatchMessage{Text: m, Mode: domain.ModeQueueAfterActive}})
	}
	th := e.waitFor(threadID, "every run to end", allRunsEnded(len(msgs)))
	if len(th.Runs) != len(msgs) {
		t.Fatalf("runs = %d, want %d", len(th.Runs), len(msgs))
	}
	var prevEnd *int64
	for i, r := range th.Runs {
		if r.Ordinal != i+1 || r.Status != domain.RunStatusCompleted || r.Input != msgs[i] {
			t.Errorf("run %d = ordinal %d status %q input %q, want ordinal %d completed %q", i, r.Ordinal, r.Status, r.Input, i+1, msgs[i])
		}
		if got := assistantText(th, r.ID); got != want[i] {
			t.Errorf("run %d assistant text = %q, want %q", r.Ordinal, got, want[i])
		}
		end := r.EndedAt.UnixNano()
		if prevEnd != nil && r.StartedAt.UnixNano() < *prevEnd {
			t.Errorf("run %d started before run %d ended", r.Ordinal, r.Ordinal-1)
		}
		prevEnd = &end
	}
	if len(th.ProviderThreads) != 1 {
		t.Errorf("provider threads = %d, want 1 (every run on the same conversation)", len(th.ProviderThreads))
	}
	e.checkTurnRuns(th, []int{0, 0, 0}, [][]string{nil, {"added notes.txt"}, nil})
	assertSequencesIncrease(t, e, threadID)
	e.restart()
	if s := mustThread(t, e, threadID).ProviderSessions[0]; s.EndReason != "closed" {
		t.Errorf("session ended with %q, want \"closed\" (the replay peer saw every frame it expected)", s.EndReason)
	}
}

func mustThread(t *testing.T, e *env, id string) domain.Thread {
	t.Helper()
	th, err := e.host.Thread(id)
	if err != nil {
		t.Fatal(err)
	}
	return th
}

// assertOneRootAndTurn checks that a run has one attempt, one root node and
// one provider turn bound to that root.
func assertOneRootAndTurn(t *testing.T, th domain.Thread, r domain.Run) {
	t.Helper()
	var roots []domain.Node
	for _, n := range r.Nodes {
		if n.Kind == domain.NodeRootTurn {
			roots = append(roots, n)
		}
	}
	if len(r.Attempts) != 1 || len(roots) != 1 {
		t.Fatalf("run %d: %d attempts and %d root nodes, want 1 and 1", r.Ordinal, len(r.Attempts), len(roots))
	}
	if r.FinalAttempt != r.Attempts[0].ID || roots[0].Status != domain.StatusCompleted {
		t.Errorf("run %d: final attempt %q (want %q), root node %s", r.Ordinal, r.FinalAttempt, r.Attempts[0].ID, roots[0].Status)
	}
	var turns []domain.ProviderTurn
	for _, pt := range th.ProviderTurns {
		if pt.RunID == r.ID {
			turns = append(turns, pt)
		}
	}
	if len(turns) != 1 || turns[0].NodeID != roots[0].ID {
		t.Errorf("run %d: provider turns %+v, want one bound to root node %s", r.Ordinal, turns, roots[0].ID)
	}
}

// assertSequencesIncrease checks the stored events: global sequences
// strictly increase, and every one decodes.
func assertSequencesIncrease(t *testing.T, e *env, threadID string) {
	t.Helper()
	recs, err := e.host.ThreadEvents(threadID, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) == 0 {
		t.Fatal("no stored events")
	}
	for i, r := range recs {
		if i > 0 && r.Sequence <= recs[i-1].Sequence {
			t.Fatalf("event %d has sequence %d after %d", i, r.Sequence, recs[i-1].Sequence)
		}
		if _, err := domain.DecodePayload(r.Type, r.Data); err != nil {
			t.Fatalf("stored event %d: %v", r.Sequence, err)
		}
		var v map[string]any
		if err := json.Unmarshal(r.Data, &v); err != nil {
			t.Fatalf("stored event %d is not JSON: %v", r.Sequence, err)
		}
	}
}
