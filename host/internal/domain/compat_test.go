package domain

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/baton-run/baton/sdk"
	"github.com/google/go-cmp/cmp"
)

// The domain's events, effects and projections are JSON in the host's
// store; they held the domain's own copies of the sdk's value types
// (Usage, RateLimit, Failure, Limit, RequestOption, ...), then the sdk's,
// and hold the domain's own again (providerterms.go), each with the JSON
// form it always had. testdata/compat/b6dd12e.json is what compatScenario
// wrote with the copies (commit b6dd12e): its log, its outbox, its last
// projection and its commands' hashes.

// compatRecord is one stored event of a log.
type compatRecord struct {
	Sequence uint64          `json:"sequence"`
	At       time.Time       `json:"at"`
	Type     string          `json:"type"`
	Data     json.RawMessage `json:"data"`
}

// compatLog is what a host would have stored of compatScenario.
type compatLog struct {
	Events  []compatRecord    `json:"events"`
	Effects []json.RawMessage `json:"effects"`
	Thread  json.RawMessage   `json:"thread"`
	// Hashes are the commands' Hash, in order, by command type.
	Hashes []compatHash `json:"hashes"`
}

type compatHash struct {
	Type string `json:"type"`
	Hash string `json:"hash"`
}

// compatScenario runs a thread through every value the sdk's types carry
// in events: a provider command with an environment, a policy, items of
// each sort, a request with options answered by a client, usage over two
// attempts, rate limits (one with no usage percentage), a provider limit
// that arms a wait, a continuation and a provider that exits with a
// failure.
func compatScenario(t *testing.T) (*world, compatLog) {
	w := &world{t: t, thread: &Thread{}, replica: &Thread{}}
	var out compatLog
	step := func(cmd Command) Decision {
		t.Helper()
		first := w.seq
		d := w.must(cmd)
		for i, p := range d.Events {
			data, err := json.Marshal(p)
			if err != nil {
				t.Fatal(err)
			}
			out.Events = append(out.Events, compatRecord{Sequence: first + uint64(i) + 1, At: w.env().Now.UTC(), Type: p.EventType(), Data: data})
		}
		for _, e := range d.Effects {
			data, _ := json.Marshal(e)
			out.Effects = append(out.Effects, data)
		}
		out.Hashes = append(out.Hashes, compatHash{Type: cmd.Payload.CommandType(), Hash: Hash(cmd)})
		return d
	}
	ev := func(session string, e sdk.RuntimeEvent) Decision {
		return step(Command{ID: "e", ThreadID: "thr", Payload: IngestProviderEvent{SessionID: session, Event: e}})
	}
	step(Command{ID: "c", ThreadID: "thr", Payload: CreateThread{Provider: "codex", Cwd: "/w", Model: "gpt",
		ProviderCommand: ProviderCommand{Argv: []string{"codex", "app-server"}, Env: []string{"A=1"}}, ApprovalPolicy: "ask"}})
	step(Command{ID: "pol", ThreadID: "thr", Payload: SetPolicy{Policy: ContinuationPolicy{OnLimit: "wait", MaxProbes: 3, MaxTokens: 1 << 20}}})
	step(Command{ID: "m1", ThreadID: "thr", Payload: DispatchMessage{Text: "one"}})
	step(Command{ID: "o1", ThreadID: "thr", Payload: RecordSessionOpened{SessionID: "s1", Provider: "codex", ProviderRef: "p", ThreadRef: "pt"}})
	ev("s1", sdk.RuntimeEvent{Sequence: 1, Kind: "thread_started", ThreadRef: "pt"})
	ev("s1", sdk.RuntimeEvent{Sequence: 2, Kind: "turn_started", ThreadRef: "pt", TurnRef: "u1"})
	ev("s1", sdk.RuntimeEvent{Sequence: 3, Kind: "item_started", TurnRef: "u1", ItemRef: "r1", ItemKind: "reasoning"})
	ev("s1", sdk.RuntimeEvent{Sequence: 4, Kind: "content_delta", TurnRef: "u1", ItemRef: "r1", Text: "hmm"})
	ev("s1", sdk.RuntimeEvent{Sequence: 5, Kind: "item_completed", TurnRef: "u1", ItemRef: "r1"})
	ev("s1", sdk.RuntimeEvent{Sequence: 6, Kind: "item_started", TurnRef: "u1", ItemRef: "t1", Title: "ls"})
	ev("s1", sdk.RuntimeEvent{Sequence: 7, Kind: "item_updated", TurnRef: "u1", ItemRef: "t1", Status: sdk.ItemInProgress,
		Detail: json.RawMessage(`{"x":1}`)})
	ev("s1", sdk.RuntimeEvent{Sequence: 8, Kind: "request_opened", TurnRef: "u1", ItemRef: "t1", RequestRef: "q1",
		RequestKind: "command_approval", Title: "run ls", Options: []sdk.RequestOption{{ID: "o1", Label: "Allow", Kind: "allow_once"}, {ID: "o2", Kind: "reject_once"}}})
	step(Command{ID: "a1", ThreadID: "thr", Payload: RespondToRequest{RequestID: w.thread.Requests[0].ID, Decision: "accept_for_session"}})
	ev("s1", sdk.RuntimeEvent{Sequence: 9, Kind: "request_resolved", RequestRef: "q1", Status: sdk.DecisionAcceptForSession})
	ev("s1", sdk.RuntimeEvent{Sequence: 10, Kind: "item_completed", TurnRef: "u1", ItemRef: "t1", Status: sdk.ItemFailed})
	ev("s1", sdk.RuntimeEvent{Sequence: 11, Kind: "item_started", TurnRef: "u1", ItemRef: "a1", ItemKind: "assistant_message"})
	ev("s1", sdk.RuntimeEvent{Sequence: 12, Kind: "content_delta", TurnRef: "u1", ItemRef: "a1", Text: "Hello"})
	ev("s1", sdk.RuntimeEvent{Sequence: 13, Kind: "item_completed", TurnRef: "u1", ItemRef: "a1"})
	ev("s1", sdk.RuntimeEvent{Sequence: 14, Kind: "usage", TurnRef: "u1", Usage: &sdk.Usage{InputTokens: 10, OutputTokens: 5,
		CachedInputTokens: 2, ReasoningTokens: 1, TotalTokens: 15}})
	ev("s1", sdk.RuntimeEvent{Sequence: 15, Kind: "rate_limit", RateLimit: &sdk.RateLimit{Scope: "five_hour", ResetsAt: t0.Add(time.Hour)}})
	ev("s1", sdk.RuntimeEvent{Sequence: 16, Kind: "rate_limit", RateLimit: &sdk.RateLimit{Scope: "seven_day", UsedPercent: 42.5}})
	ev("s1", sdk.RuntimeEvent{Sequence: 17, Kind: "diagnostic", TurnRef: "u1", Title: "stderr", Text: "warning"})
	ev("s1", sdk.RuntimeEvent{Sequence: 18, Kind: "turn_terminal", TurnRef: "u1", Status: sdk.TurnFailed,
		Limit: &sdk.Limit{Kind: "usage_window", ResetsAt: t0.Add(2 * time.Hour), Scope: "five_hour", Message: "usage limit reached",
			Evidence: `{"error":"usage_limit"}`},
		Failure: &sdk.Failure{Code: "usage_limit", Message: "usage limit reached"}})
	ev("s1", sdk.RuntimeEvent{Sequence: 19, Kind: "runtime_exited", Status: sdk.ExitClosed})
	wait := w.thread.NextWait()
	if wait == nil {
		t.Fatal("the limit armed no wait")
	}
	w.now = wait.At
	step(Command{ID: "f1", ThreadID: "thr", Payload: FireWait{WaitID: wait.ID}})
	step(Command{ID: "o2", ThreadID: "thr", Payload: RecordSessionOpened{SessionID: "s2", Provider: "codex", ProviderRef: "p2", ThreadRef: "pt"}})
	ev("s2", sdk.RuntimeEvent{Sequence: 1, Kind: "turn_started", ThreadRef: "pt", TurnRef: "u2"})
	ev("s2", sdk.RuntimeEvent{Sequence: 2, Kind: "usage", TurnRef: "u2", Usage: &sdk.Usage{InputTokens: 5, OutputTokens: 2, TotalTokens: 7}})
	ev("s2", sdk.RuntimeEvent{Sequence: 3, Kind: "turn_terminal", TurnRef: "u2", Status: sdk.TurnCompleted, ThreadUsable: true})
	step(Command{ID: "m2", ThreadID: "thr", Payload: DispatchMessage{Text: "two"}})
	ev("s2", sdk.RuntimeEvent{Sequence: 4, Kind: "turn_started", ThreadRef: "pt", TurnRef: "u3"})
	ev("s2", sdk.RuntimeEvent{Sequence: 5, Kind: "runtime_exited", Status: sdk.ExitFailed, Failure: &sdk.Failure{Code: "crash", Message: "boom"}})
	thread, err := json.Marshal(w.thread)
	if err != nil {
		t.Fatal(err)
	}
	out.Thread = thread
	return w, out
}

// jsonTree is v as JSON reads it back untyped: what a client of the
// projection sees.
func jsonTree(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var tree any
	if err := json.Unmarshal(b, &tree); err != nil {
		t.Fatal(err)
	}
	return tree
}

// TestOldLogsStillRead: a log, an outbox and a projection written while
// the domain kept copies of the sdk's types decode into the sdk's types
// and say what today's domain says of the same commands: the same events,
// the same effects, the same thread rebuilt from the old log and read from
// the old snapshot; and a client command retried across the change is
// still the same command (its hash is unchanged).
func TestOldLogsStillRead(t *testing.T) {
	b, err := os.ReadFile("testdata/compat/b6dd12e.json")
	if err != nil {
		t.Fatal(err)
	}
	var old compatLog
	if err := json.Unmarshal(b, &old); err != nil {
		t.Fatal(err)
	}
	w, now := compatScenario(t)

	var oldEvents, newEvents []Payload
	rebuilt := &Thread{}
	for _, rec := range old.Events {
		p, err := DecodePayload(rec.Type, rec.Data)
		if err != nil {
			t.Fatalf("old event %d: %v", rec.Sequence, err)
		}
		oldEvents = append(oldEvents, p)
		Evolve(rebuilt, Event{Sequence: rec.Sequence, ThreadID: "thr", At: rec.At, Payload: p})
	}
	for _, rec := range now.Events {
		p, _ := DecodePayload(rec.Type, rec.Data)
		// Today a rate limit names its provider; the thread an old one
		// is applied to names it instead (the same, as rebuilt below).
		if l, ok := p.(RateLimitReported); ok {
			l.Provider = ""
			p = l
		}
		newEvents = append(newEvents, p)
	}
	if diff := cmp.Diff(jsonTree(t, oldEvents), jsonTree(t, newEvents)); diff != "" {
		t.Errorf("old events decoded (-) against today's (+):\n%s", diff)
	}
	if diff := cmp.Diff(oldEvents, newEvents, cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) })); diff != "" {
		t.Errorf("old event payloads (-) against today's (+):\n%s", diff)
	}
	want := jsonTree(t, w.thread)
	if diff := cmp.Diff(jsonTree(t, rebuilt), want); diff != "" {
		t.Errorf("the thread rebuilt from the old log (-) against today's (+):\n%s", diff)
	}
	var snapshot Thread
	if err := json.Unmarshal(old.Thread, &snapshot); err != nil {
		t.Fatal(err)
	}
	// What the projection has gained since the snapshot was written
	// (requests' openedAt, the title) is not in it: a host rebuilds such a
	// snapshot from the log (the orchestrator's projection schema moved on).
	today := w.thread.Clone()
	today.Title = ""
	for i := range today.Requests {
		today.Requests[i].OpenedAt = time.Time{}
	}
	// The usage ledger, and whose limits and when, are newer still.
	today.Ledger = nil
	for i := range today.Runs {
		for j := range today.Runs[i].Attempts {
			today.Runs[i].Attempts[j].Ledger = nil
		}
	}
	for i := range today.RateLimits {
		today.RateLimits[i].Provider, today.RateLimits[i].At = "", time.Time{}
	}
	if diff := cmp.Diff(jsonTree(t, snapshot), jsonTree(t, today)); diff != "" {
		t.Errorf("the old snapshot (-) against today's thread (+):\n%s", diff)
	}
	var oldEffects []Effect
	for _, data := range old.Effects {
		e, err := DecodeEffect(data)
		if err != nil {
			t.Fatal(err)
		}
		oldEffects = append(oldEffects, e)
	}
	// Today the domain also chooses each turn's session: the effects
	// that open one, and the session a start names, are new.
	var decided []Effect
	for _, e := range w.effects {
		switch e := e.(type) {
		case OpenSession, RetireSession:
			continue
		case StartTurn:
			e.SessionID, e.Reused = "", false
			decided = append(decided, e)
		default:
			decided = append(decided, e)
		}
	}
	if diff := cmp.Diff(oldEffects, decided); diff != "" {
		t.Errorf("old outbox (-) against today's effects (+):\n%s", diff)
	}
	// Provider events' hashes change (the event is the sdk's, with its
	// session id and field order); nothing compares them across versions:
	// their command ids name a session, which ends with the host that
	// opened it.
	var oldHashes, newHashes []compatHash
	for i, h := range old.Hashes {
		if h.Type != (IngestProviderEvent{}).CommandType() {
			oldHashes, newHashes = append(oldHashes, h), append(newHashes, now.Hashes[i])
		}
	}
	if len(oldHashes) < 8 || len(now.Hashes) != len(old.Hashes) {
		t.Fatalf("%d commands of %d compared (today: %d)", len(oldHashes), len(old.Hashes), len(now.Hashes))
	}
	if diff := cmp.Diff(oldHashes, newHashes); diff != "" {
		t.Errorf("command hashes, old (-) against today's (+):\n%s", diff)
	}
}

// TestOldEffectsStillRead: an effect of each kind, as the one struct of
// every kind's fields stored it (testdata/compat/effects-3842d10.json,
// written at commit 3842d10), decodes to its kind with its fields, and
// the kind's stored form decodes back to the same effect. An effect of a
// type this host does not know decodes to one that names it, so that a
// recovery cancels it; one that is not JSON is JSON's error (its caller
// names the outbox entry), one whose field does not fit its kind names
// the kind.
func TestOldEffectsStillRead(t *testing.T) {
	b, err := os.ReadFile("testdata/compat/effects-3842d10.json")
	if err != nil {
		t.Fatal(err)
	}
	var stored []json.RawMessage
	if err := json.Unmarshal(b, &stored); err != nil {
		t.Fatal(err)
	}
	head := func(id string) EffectHead { return EffectHead{ID: id, ThreadID: "thr"} }
	want := []Effect{
		StartTurn{EffectHead: head("3.0"), RunID: "run_2", AttemptID: "att_3", Text: "one"}, // a provider and model it named are not read
		Respond{EffectHead: head("4.0"), RunID: "run_2", SessionID: "s1", RequestRef: "q1", Decision: DecisionAccept,
			Answers: map[string]string{"q": "a"}},
		Steer{EffectHead: head("5.0"), RunID: "run_2", AttemptID: "att_3", MessageID: "msg_7", Text: "focus", SessionID: "s1", TurnRef: "u1"},
		Interrupt{EffectHead: head("6.0"), RunID: "run_2", AttemptID: "att_3", SessionID: "s1", TurnRef: "u1"},
		EndSession{EffectHead: head("7.0"), RunID: "run_2", AttemptID: "att_3", SessionID: "s1"},
		CaptureCheckpoint{EffectHead: head("8.0"), RunID: "run_2", CheckpointID: "cp_9", Ref: "refs/baton/checkpoints/thr/root/1", BaseID: "cp_6"},
		RestoreFiles{EffectHead: head("9.0"), RollbackID: "rb_10", CheckpointID: "cp_6", Commit: "c0ffee",
			Ref: "refs/baton/checkpoints/thr/pre-rollback/rb_10"},
		ReconcileThread{EffectHead: head("10.0"), RollbackID: "rb_10", ThreadRef: "pt", Turns: 2, TurnRef: "u2",
			Refs: []string{"refs/a", "refs/b"}, Hold: true},
		RunCheck{EffectHead: head("11.0"), RunID: "run_2", Command: "make test", Timeout: 90 * time.Second},
	}
	var got, again []Effect
	for _, data := range stored {
		e, err := DecodeEffect(data)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, e)
		b, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		if e, err = DecodeEffect(b); err != nil {
			t.Fatal(err)
		}
		again = append(again, e)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("old effects decoded (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want, again); diff != "" {
		t.Errorf("effects stored again and decoded (-want +got):\n%s", diff)
	}
	// A recovery cancels the provider actions, naming them, and performs
	// the host's own work again, marked as replayed; the stored effects
	// are in the outbox entry's thread.
	var pending []PendingEffect
	var replayed []Effect
	for _, e := range want {
		if e := Stored(e, "thr-b", "k"); e.Head() != (EffectHead{ID: "k", ThreadID: "thr-b"}) {
			t.Errorf("%s effect stored: %+v", e.EffectType(), e.Head())
		}
		if e, again := Replay(e); again {
			replayed = append(replayed, e)
		} else {
			pending = append(pending, Pending(e))
		}
	}
	wantPending := []PendingEffect{{ID: "3.0", Type: EffectStartTurn, RunID: "run_2"}, {ID: "4.0", Type: EffectRespond, RunID: "run_2"},
		{ID: "5.0", Type: EffectSteer, RunID: "run_2", MessageID: "msg_7"}, {ID: "6.0", Type: EffectInterrupt, RunID: "run_2"},
		{ID: "7.0", Type: EffectEndSession, RunID: "run_2"}}
	if diff := cmp.Diff(wantPending, pending); diff != "" {
		t.Errorf("effects a recovery cancels (-want +got):\n%s", diff)
	}
	restore, reconcile := want[6].(RestoreFiles), want[7].(ReconcileThread)
	restore.Replayed, reconcile.Replayed = true, true
	if diff := cmp.Diff([]Effect{want[5], restore, reconcile, want[8]}, replayed); diff != "" {
		t.Errorf("effects a recovery performs again (-want +got):\n%s", diff)
	}
	for _, e := range replayed {
		if !e.EffectType().Replayable() {
			t.Errorf("%s is performed again but is not Replayable", e.EffectType())
		}
	}
	newer, err := DecodeEffect([]byte(`{"type":"open_worktree","threadId":"thr","runId":"run_2"}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := Stored(newer, "thr", "12.0"); got.EffectType() != "open_worktree" || got.Head() != head("12.0") ||
		Pending(got) != (PendingEffect{ID: "12.0", Type: "open_worktree", RunID: "run_2"}) {
		t.Errorf("an effect of a newer host's type: %+v, pending %+v", got, Pending(got))
	}
	if _, err := DecodeEffect([]byte(`{"type":`)); err == nil || err.Error() != "unexpected end of JSON input" {
		t.Errorf("a cut effect: %v", err)
	}
	if _, err := DecodeEffect([]byte(`{"type":"steer","threadId":"thr","turns":"two","runId":7}`)); err == nil ||
		!strings.HasPrefix(err.Error(), "steer effect: json: cannot unmarshal number ") {
		t.Errorf("a steer effect with a number for its run: %v", err)
	}
}
