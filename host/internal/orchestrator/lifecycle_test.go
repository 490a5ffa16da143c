package orchestrator_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/baton-run/baton/host/internal/domain"
	"github.com/baton-run/baton/host/internal/eventlog"
	"github.com/baton-run/baton/host/internal/scenario"
	"github.com/baton-run/baton/sdk"
)

// play runs a scenario's client side (testdata/PROVIDER/NAME.steps.json)
// and returns the thread once every run has ended.
func (e *env) play(threadID, steps string) domain.Thread {
	e.t.Helper()
	sc, err := scenario.Load(filepath.Join(root, "testdata", steps))
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := scenario.Run(ctx, scenario.Host(e.host), threadID, sc, scenario.Options{}); err != nil {
		th, _ := e.host.Thread(threadID)
		e.t.Fatalf("scenario %s: %v\nthread: %+v", steps, err, th)
	}
	return mustThread(e.t, e, threadID)
}

// types lists the thread's stored event types after a sequence.
func (e *env) types(threadID string, after uint64) []string {
	e.t.Helper()
	recs, err := e.host.ThreadEvents(threadID, after)
	if err != nil {
		e.t.Fatal(err)
	}
	var out []string
	for _, r := range recs {
		out = append(out, r.Type)
	}
	return out
}

func indexOf(list []string, s string) int {
	for i, v := range list {
		if v == s {
			return i
		}
	}
	return -1
}

// redispatch sends every stored client command of the thread again with
// its id: each must return its original receipt and append nothing.
func (e *env) redispatchAll(cmds []domain.Command, receipts []domain.Receipt) {
	e.t.Helper()
	head := e.host.LastSequence()
	for i, c := range cmds {
		rc := e.dispatch(c)
		if rc != receipts[i] {
			e.t.Errorf("duplicate %s: receipt %+v, want the original %+v", c.Payload.CommandType(), rc, receipts[i])
		}
	}
	if e.host.LastSequence() != head {
		e.t.Errorf("duplicates appended events: head %d -> %d", head, e.host.LastSequence())
	}
}

// Invariant 3 (ACP): run.interrupt sends session/cancel and records only
// the request; the run ends interrupted when the prompt's stopReason says
// so, after what the agent says once it has the cancel. A duplicate
// interrupt sends nothing again.
func TestACPInterrupt(t *testing.T) {
	e := newEnv(t)
	threadID := e.createThread("acp", "acp/turn_interrupt_late.ndjson")
	send := domain.Command{ID: "send", ThreadID: threadID, Payload: domain.DispatchMessage{Text: "Write a very long essay about rivers."}}
	sent := e.dispatch(send)
	if err := scenario.Wait(t.Context(), scenario.Host(e.host), threadID, scenario.WaitRunning); err != nil {
		t.Fatal(err)
	}
	th := mustThread(t, e, threadID)
	interrupt := domain.Command{ID: "stop", ThreadID: threadID, Payload: domain.InterruptRun{RunID: th.Runs[0].ID}}
	stopped := e.dispatch(interrupt)
	// The agent speaks only once it has read session/cancel, and then
	// answers the prompt: its words, stored while the run still runs,
	// show that the run outlived the cancel's sending.
	th = e.waitFor(threadID, "the run to end", allRunsEnded(1))
	e.checkInterrupted(threadID, th.Runs[0], goesOnAfterAck)
	if r := th.Runs[0]; r.StopReason != "cancelled" {
		t.Fatalf("run stopped for %q, want cancelled", r.StopReason)
	}
	e.redispatchAll([]domain.Command{send, interrupt}, []domain.Receipt{sent, stopped})
	e.restart()
	if n := e.countFrames(th, `"method":"session/cancel"`); n != 1 {
		t.Errorf("session/cancel sent %d times, want 1", n)
	}
}

// Invariant 4 (ACP, no native steering): a message sent into the active
// run interrupts its attempt and a replacement attempt carries it; still
// one run.
func TestACPSteeringRestartFallback(t *testing.T) {
	e := newEnv(t)
	threadID := e.createThread("acp", "acp/steering_restart_fallback.ndjson")
	th := e.play(threadID, "acp/steering_restart_fallback.steps.json")
	r := e.checkSteeringRestart(th)
	e.checkUserMessages(th, r, 2)
	if got := assistantText(th, r.ID); got != "Hi! Keeping it short." {
		t.Fatalf("assistant text %q", got)
	}
	// The replacement's turn is bound to the new attempt's root node.
	var roots int
	for _, n := range r.Nodes {
		if n.Kind == domain.NodeRootTurn {
			roots++
		}
	}
	if roots != 2 {
		t.Fatalf("root nodes %d; want one per attempt", roots)
	}
}

// Runtime requests answered by a client (ACP allow): the request is
// pending and visible until runtime-request.respond, whose answer goes to
// the agent through the plugin; a duplicate answer sends nothing again.
func TestACPApprovalAnsweredByClient(t *testing.T) {
	e := newEnv(t)
	threadID := e.createThreadWith("acp", "acp/approval_accept.ndjson", domain.ApproveAsk)
	send := domain.Command{ID: "send", ThreadID: threadID, Payload: domain.DispatchMessage{Text: "Write allowed.txt"}}
	sent := e.dispatch(send)
	if err := scenario.Wait(t.Context(), scenario.Host(e.host), threadID, scenario.WaitRequest); err != nil {
		t.Fatal(err)
	}
	th := mustThread(t, e, threadID)
	q := th.Requests[0]
	if q.Status != domain.RequestStatusPending || q.Delivery != domain.DeliveryLive || q.Kind != domain.RequestPermission ||
		th.Runs[0].Status != domain.RunStatusWaiting {
		t.Fatalf("request %+v, run %s; want pending, live, run waiting", q, th.Runs[0].Status)
	}
	// Not a decision the request knows.
	if _, err := e.host.Dispatch(t.Context(), domain.Command{ID: "bad", ThreadID: threadID,
		Payload: domain.RespondToRequest{RequestID: q.ID, Decision: "perhaps"}}); !errors.Is(err, domain.ErrInvalid) {
		t.Fatalf("bad decision: %v", err)
	}
	respond := domain.Command{ID: "allow", ThreadID: threadID, Payload: domain.RespondToRequest{RequestID: q.ID, Decision: "accept"}}
	answered := e.dispatch(respond)
	th = e.waitFor(threadID, "the run to end", allRunsEnded(1))
	if r := th.Runs[0]; r.Status != domain.RunStatusCompleted {
		t.Fatalf("run %s", r.Status)
	}
	if q := th.Requests[0]; q.Status != domain.RequestStatusResolved || q.Decision != "accept" || q.AnsweredBy != "client" {
		t.Fatalf("request after answer: %+v", q)
	}
	if b, err := os.ReadFile(filepath.Join(e.ws, "allowed.txt")); err != nil || string(b) != "written with permission\n" {
		t.Fatalf("allowed.txt = %q, %v", b, err)
	}
	e.redispatchAll([]domain.Command{send, respond}, []domain.Receipt{sent, answered})
	if _, err := e.host.Dispatch(t.Context(), domain.Command{ID: "again", ThreadID: threadID,
		Payload: domain.RespondToRequest{RequestID: q.ID, Decision: "decline"}}); !errors.Is(err, domain.ErrConflict) {
		t.Fatalf("a second answer: %v", err)
	}
	e.restart()
	if n := e.countFrames(th, `"outcome":"selected"`); n != 1 {
		t.Errorf("the agent got %d permission answers, want 1", n)
	}
}

// Invariant 11: a request whose provider process is gone cannot be
// answered; the answer is refused at once and the request says so.
func TestAnswerAfterTheProviderIsGone(t *testing.T) {
	e := newEnv(t)
	threadID := e.createThreadWith("acp", "acp/approval_accept.ndjson", domain.ApproveAsk)
	e.dispatch(domain.Command{ID: "send", ThreadID: threadID, Payload: domain.DispatchMessage{Text: "Write allowed.txt"}})
	if err := scenario.Wait(t.Context(), scenario.Host(e.host), threadID, scenario.WaitRequest); err != nil {
		t.Fatal(err)
	}
	th := mustThread(t, e, threadID)
	q := th.Requests[0]
	// The plugin dies, and its provider with it: the request can no
	// longer be answered, and says so.
	if err := syscall.Kill(th.ProviderSessions[0].PluginPid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	th = e.waitFor(threadID, "the run to end", allRunsEnded(1))
	if got := th.Requests[0]; got.Delivery != domain.DeliveryNotResumable || got.Status != domain.RequestStatusExpired {
		t.Fatalf("request: %+v", got)
	}
	if r := th.Runs[0]; r.Status != domain.RunStatusFailed {
		t.Fatalf("run: %s", r.Status)
	}
	// Answering it is a clear error at once, not a hang.
	_, err := e.host.Dispatch(t.Context(), domain.Command{ID: "late", ThreadID: threadID,
		Payload: domain.RespondToRequest{RequestID: q.ID, Decision: "accept"}})
	if !errors.Is(err, sdk.ErrNotResumable) || !strings.Contains(err.Error(), "not_resumable") {
		t.Fatalf("answering a request whose provider is gone: %v", err)
	}
}

// Effects are in the outbox with the events that caused them: a start
// that the host never finished is cancelled by the next host, with a
// reason, and never performed against a new process (the run itself was
// ended by the host that closed).
func TestUnfinishedEffectIsCancelledOnRestart(t *testing.T) {
	e := newEnv(t)
	threadID := e.createThread("acp", "acp/unresponsive.ndjson")
	e.dispatch(domain.Command{ID: "send", ThreadID: threadID, Payload: domain.DispatchMessage{Text: "hello?"}})
	e.waitFor(threadID, "the run to start", func(th domain.Thread) bool { return len(th.Runs) == 1 && th.Runs[0].Status == domain.RunStatusStarting })
	e.restart()
	// The host that closed ended the run (its turn never reached a
	// provider); the start it left in the outbox is the next host's.
	th := mustThread(t, e, threadID)
	if r := th.Runs[0]; r.Status != domain.RunStatusInterrupted || r.Failure == nil || r.Failure.Code != "host_shut_down" {
		t.Fatalf("run after restart: %+v", r)
	}
	types := e.types(threadID, 0)
	if indexOf(types, "effect.cancelled") < 0 {
		t.Fatalf("no effect.cancelled event: %v", types)
	}
	// The session the turn was to open, and the turn, both cancelled.
	recs, _ := e.host.ThreadEvents(threadID, 0)
	var cancelled []string
	for _, r := range recs {
		if r.Type == "effect.cancelled" {
			var c domain.EffectCancelled
			if err := json.Unmarshal(r.Data, &c); err != nil {
				t.Fatal(err)
			}
			cancelled = append(cancelled, string(c.Type))
		}
	}
	if !slices.Equal(cancelled, []string{"open_session", "start_turn"}) {
		t.Errorf("cancelled effects: %q", cancelled)
	}
	// Settled once (the failed run's checkpoint, which the new host
	// captures after recovery, recorded): another restart cancels nothing
	// more and appends nothing.
	e.waitFor(threadID, "the run's checkpoint", func(th domain.Thread) bool {
		for _, c := range th.Checkpoints {
			if c.Status == domain.CheckpointCapturing {
				return false
			}
		}
		return len(th.Checkpoints) > 0
	})
	head := e.host.LastSequence()
	e.restart()
	if e.host.LastSequence() != head {
		t.Errorf("a second restart appended %v", e.types(threadID, head))
	}
}

// Invariant 8: a snapshot at N plus a subscription after N yields every
// later event exactly once, in order, including across a host restart on
// the same data dir.
func TestSnapshotAndStreamAcrossRestart(t *testing.T) {
	e := newEnv(t)
	threadID := e.createThread("acp", "acp/multi_turn.ndjson")
	msgs := messages(t, "acp/multi_turn.messages")
	e.dispatch(domain.Command{ID: "send-0", ThreadID: threadID, Payload: domain.DispatchMessage{Text: msgs[0], Mode: domain.ModeQueueAfterActive}})
	e.waitFor(threadID, "run 1 to end", allRunsEnded(1))
	snap, at, err := e.host.Snapshot(threadID)
	if err != nil {
		t.Fatal(err)
	}
	if snap.Sequence > at {
		t.Fatalf("snapshot of sequence %d taken at %d", snap.Sequence, at)
	}
	// A subscriber reads from N while the rest of the runs happen, until
	// the host closes under it; another reads only the thread's stream.
	got := make(chan []eventlog.Record, 1)
	gotThread := make(chan []eventlog.Record, 1)
	go func() {
		var out []eventlog.Record
		for r, err := range e.host.ThreadStream(context.Background(), threadID, at) {
			if err != nil {
				break
			}
			out = append(out, r)
		}
		gotThread <- out
	}()
	go func() {
		var out []eventlog.Record
		for r, err := range e.host.Events(context.Background(), at) {
			if err != nil {
				break
			}
			out = append(out, r)
		}
		got <- out
	}()
	for i, m := range msgs[1:] {
		e.dispatch(domain.Command{ID: "send-" + string(rune('a'+i)), ThreadID: threadID,
			Payload: domain.DispatchMessage{Text: m, Mode: domain.ModeQueueAfterActive}})
	}
	e.waitFor(threadID, "every run to end", allRunsEnded(len(msgs)))
	e.restart()
	seen := <-got
	threadSeen := <-gotThread
	last := at
	if len(seen) > 0 {
		last = seen[len(seen)-1].Sequence
	}
	// The subscriber resumes on the new host after the last it saw.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if head := e.host.LastSequence(); last < head {
		for r, err := range e.host.Events(ctx, last) {
			if err != nil {
				t.Fatal(err)
			}
			seen = append(seen, r)
			if r.Sequence >= head {
				break
			}
		}
	}
	all, err := e.host.ThreadEvents(threadID, at)
	if err != nil {
		t.Fatal(err)
	}
	var mine []eventlog.Record
	for i, r := range seen {
		if i > 0 && r.Sequence != seen[i-1].Sequence+1 {
			t.Fatalf("gap or duplicate in the stream: %d after %d", r.Sequence, seen[i-1].Sequence)
		}
		if r.ThreadID == threadID {
			mine = append(mine, r)
		}
	}
	if len(seen) == 0 || seen[0].Sequence != at+1 || len(mine) != len(all) {
		t.Fatalf("stream from %d: %d events (%d of the thread), log has %d", at, len(seen), len(mine), len(all))
	}
	for i := range all {
		if mine[i].Sequence != all[i].Sequence || mine[i].Type != all[i].Type {
			t.Fatalf("event %d: streamed %d %s, stored %d %s", i, mine[i].Sequence, mine[i].Type, all[i].Sequence, all[i].Type)
		}
	}
	for i, r := range threadSeen {
		if r.Sequence != mine[i].Sequence || r.ThreadID != threadID {
			t.Fatalf("thread stream event %d: %d, want %d", i, r.Sequence, mine[i].Sequence)
		}
	}
	// The snapshot plus the events streamed after it is the projection
	// now, whole.
	if len(snap.Runs) != 1 {
		t.Fatalf("the snapshot has %d runs, want 1 (taken after run 1)", len(snap.Runs))
	}
	for _, r := range mine {
		p, err := domain.DecodePayload(r.Type, r.Data)
		if err != nil {
			t.Fatalf("streamed event %d: %v", r.Sequence, err)
		}
		domain.Evolve(&snap, domain.Event{Sequence: r.Sequence, ThreadID: r.ThreadID, At: r.At, Payload: p})
	}
	th := mustThread(t, e, threadID)
	if len(th.Runs) != len(msgs) {
		t.Fatalf("runs now %d, want %d", len(th.Runs), len(msgs))
	}
	if diff := cmp.Diff(th, snap, cmpopts.IgnoreUnexported(domain.Thread{}, domain.Run{})); diff != "" {
		t.Errorf("the snapshot plus the stream differs from the projection (-projection +snapshot and stream):\n%s", diff)
	}
}
