package plugintest

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-run/baton/sdk"
)

// numbered gives evs their sequence numbers, from 1, as the sdk does.
func numbered(evs []sdk.RuntimeEvent) []sdk.RuntimeEvent {
	out := slices.Clone(evs)
	for i := range out {
		out[i].Sequence = uint64(i + 1)
	}
	return out
}

// goodStream is a session that keeps the whole contract: a root turn the
// client started, an item, a request, a subagent's child thread and turn.
func goodStream() []sdk.RuntimeEvent {
	return []sdk.RuntimeEvent{
		/* 1 */ {Kind: sdk.EventThreadStarted, ThreadRef: "root", RawFrame: 1},
		/* 2 */ {Kind: sdk.EventTurnStarted, ThreadRef: "root", TurnRef: "t1", ClientTurnID: "client-turn-1"},
		/* 3 */ {Kind: sdk.EventItemStarted, ThreadRef: "root", TurnRef: "t1", ItemRef: "i1", ItemKind: sdk.ItemAssistantMessage, Status: sdk.ItemInProgress, RawFrame: 2},
		/* 4 */ {Kind: sdk.EventContentDelta, ThreadRef: "root", TurnRef: "t1", ItemRef: "i1", ItemKind: sdk.ItemAssistantMessage, Text: "Hi", RawFrame: 3},
		/* 5 */ {Kind: sdk.EventItemCompleted, ThreadRef: "root", TurnRef: "t1", ItemRef: "i1", Status: sdk.ItemDone, RawFrame: 4},
		/* 6 */ {Kind: sdk.EventRequestOpened, ThreadRef: "root", TurnRef: "t1", RequestRef: "q1", RawFrame: 5},
		/* 7 */ {Kind: sdk.EventRequestResolved, ThreadRef: "root", TurnRef: "t1", RequestRef: "q1", Status: sdk.DecisionAccept},
		/* 8 */ {Kind: sdk.EventThreadStarted, ThreadRef: "child", ParentThreadRef: "root", RawFrame: 6},
		/* 9 */ {Kind: sdk.EventTurnStarted, ThreadRef: "child", TurnRef: "c1", RawFrame: 6},
		/* 10 */ {Kind: sdk.EventTurnTerminal, ThreadRef: "child", TurnRef: "c1", Status: sdk.TurnCompleted, RawFrame: 7},
		/* 11 */ {Kind: sdk.EventDiagnostic, Title: "malformed frame", RawFrame: 8},
		/* 12 */ {Kind: sdk.EventTurnTerminal, ThreadRef: "root", TurnRef: "t1", Status: sdk.TurnCompleted, ThreadUsable: true, RawFrame: 9},
		/* 13 */ {Kind: sdk.EventRuntimeExited, ThreadRef: "root", Status: sdk.ExitClosed},
	}
}

var goodRun = Run{Turns: []TurnCall{{ClientTurnID: "client-turn-1"}}, Subagents: true}

// TestCheckContract: a stream that keeps the contract passes; each way of
// breaking it is named, with the events it is about.
func TestCheckContract(t *testing.T) {
	good := goodStream()
	// edit returns the good stream changed by f.
	edit := func(f func(evs []sdk.RuntimeEvent) []sdk.RuntimeEvent) []sdk.RuntimeEvent {
		return f(slices.Clone(good))
	}
	without := func(i int) []sdk.RuntimeEvent { return slices.Delete(slices.Clone(good), i-1, i) }
	insert := func(i int, ev sdk.RuntimeEvent) []sdk.RuntimeEvent { return slices.Insert(slices.Clone(good), i-1, ev) }
	exit := good[12]
	crashed := edit(func(evs []sdk.RuntimeEvent) []sdk.RuntimeEvent {
		evs[11].Status, evs[11].ThreadUsable, evs[12].Status = sdk.TurnFailed, false, sdk.ExitFailed
		return evs
	})
	for name, c := range map[string]struct {
		evs  []sdk.RuntimeEvent
		run  Run
		want []Violation
	}{
		"the contract kept": {good, goodRun, nil},
		"two terminals": {insert(13, good[11]), goodRun, []Violation{{Rule: RuleOneTerminal, Seqs: []uint64{12, 13},
			Want: "one turn_terminal for turn t1 (started #2)", Got: "a second one"}}},
		"a turn that never ends": {without(12), goodRun, []Violation{{Rule: RuleOneTerminal, Seqs: []uint64{2},
			Want: "a turn_terminal for turn t1 (started #2)", Got: "none"}}},
		"a terminal of a turn never started": {insert(12, sdk.RuntimeEvent{Kind: sdk.EventTurnTerminal, TurnRef: "t9", Status: sdk.TurnFailed}), goodRun,
			[]Violation{{Rule: RuleOneTerminal, Seqs: []uint64{12}, Want: "turn_terminal of a turn a turn_started began", Got: `turn_terminal of turn "t9", never started`}}},
		"a turn started twice": {insert(3, good[1]), goodRun, []Violation{{Rule: RuleOneTerminal, Seqs: []uint64{2, 3},
			Want: "turn t1 started once", Got: "a second turn_started"}}},
		"a turn_started naming no turn": {edit(func(evs []sdk.RuntimeEvent) []sdk.RuntimeEvent { evs[8].TurnRef = ""; return evs[:9:9] }),
			goodRun, nil /* filled below */},
		"an item never completed": {without(5), goodRun, []Violation{{Rule: RuleItems, Seqs: []uint64{3},
			Want: "item_completed of item i1 (started #3) before turn t1's terminal #11", Got: "none"}}},
		"an item completed after its turn's terminal": {slices.Insert(without(5), 11, good[4]), goodRun, []Violation{{Rule: RuleItems,
			Seqs: []uint64{11, 12}, Want: "item i1 (started #3) completed before turn t1's terminal #11", Got: "item_completed after it"}}},
		"an item completed twice": {insert(6, good[4]), goodRun, []Violation{{Rule: RuleItems, Seqs: []uint64{5, 6},
			Want: "item i1 (started #3) completed once", Got: "a second item_completed"}}},
		"an item completed, never started": {without(3), goodRun, []Violation{{Rule: RuleItems, Seqs: []uint64{4},
			Want: "item_completed of item i1 after its item_started", Got: "no item_started before it"}}},
		"an item started twice": {insert(4, good[2]), goodRun, []Violation{{Rule: RuleItems, Seqs: []uint64{3, 4},
			Want: "item i1 started once", Got: "a second item_started"}}},
		"a request resolved twice": {insert(8, good[6]), goodRun, []Violation{{Rule: RuleRequests, Seqs: []uint64{7, 8},
			Want: "request q1 (opened #6) resolved once", Got: "a second request_resolved"}}},
		"a request resolved, never opened": {without(6), goodRun, []Violation{{Rule: RuleRequests, Seqs: []uint64{6},
			Want: "request_resolved of request q1 after its request_opened", Got: "no request_opened before it"}}},
		"a request open when the session ended": {without(7), goodRun, nil},
		"a request never resolved, no exit": {without(7)[:11], goodRun, []Violation{
			{Rule: RuleRequests, Seqs: []uint64{6}, Want: "request_resolved of request q1 (opened #6), or runtime_exited", Got: "neither"},
			{Rule: RuleExitLast, Want: "one runtime_exited", Got: "0"},
		}},
		"runtime_exited not last": {append(slices.Clone(good), good[10]), goodRun, []Violation{{Rule: RuleExitLast, Seqs: []uint64{14},
			Want: "no event after runtime_exited #13", Got: "diagnostic"}}},
		"runtime_exited twice": {append(slices.Clone(good), exit), goodRun, []Violation{
			{Rule: RuleExitLast, Seqs: []uint64{14}, Want: "no event after runtime_exited #13", Got: "runtime_exited"},
			{Rule: RuleExitLast, Seqs: []uint64{13, 14}, Want: "one runtime_exited", Got: "2"},
		}},
		"a status of another kind's": {edit(func(evs []sdk.RuntimeEvent) []sdk.RuntimeEvent {
			evs[11].Status = sdk.TurnStatus(sdk.ItemDone + "_x")
			return evs
		}), goodRun,
			[]Violation{{Rule: RuleStatus, Seqs: []uint64{12}, Want: "turn_terminal with a status of completed, interrupted, failed", Got: `"completed_x"`}}},
		"an item's status on a turn's end": {edit(func(evs []sdk.RuntimeEvent) []sdk.RuntimeEvent { evs[11].Status = sdk.ItemDone; return evs }), goodRun,
			[]Violation{{Rule: RuleStatus, Seqs: []uint64{12}, Want: "turn_terminal with a status of completed, interrupted, failed", Got: `"completed"`}}},
		"an exit with no status": {edit(func(evs []sdk.RuntimeEvent) []sdk.RuntimeEvent { evs[12].Status = nil; return evs }), goodRun,
			[]Violation{{Rule: RuleStatus, Seqs: []uint64{13}, Want: "runtime_exited with a status of exited, closed, failed", Got: "none"}}},
		"a client turn id not echoed": {edit(func(evs []sdk.RuntimeEvent) []sdk.RuntimeEvent { evs[1].ClientTurnID = ""; return evs }), goodRun,
			[]Violation{{Rule: RuleClientTurnID, Seqs: []uint64{2}, Want: `ClientTurnID "client-turn-1" on the turn_started of root turn 1`, Got: `""`}}},
		"another turn's client turn id": {good, Run{Turns: []TurnCall{{ClientTurnID: "client-turn-2", TurnRef: "t1"}}, Subagents: true},
			[]Violation{{Rule: RuleClientTurnID, Seqs: []uint64{2}, Want: `ClientTurnID "client-turn-2" on the turn_started of turn t1 (StartTurn's answer)`, Got: `"client-turn-1"`}}},
		"a StartTurn with no turn_started": {good, Run{Turns: []TurnCall{{ClientTurnID: "client-turn-1"}, {ClientTurnID: "client-turn-2"}}, Subagents: true},
			[]Violation{{Rule: RuleClientTurnID, Seqs: []uint64{2}, Want: `a turn_started for StartTurn "client-turn-2"`, Got: "none"}}},
		"a child's turn with a client turn id": {edit(func(evs []sdk.RuntimeEvent) []sdk.RuntimeEvent { evs[8].ClientTurnID = "client-turn-1"; return evs }), goodRun,
			[]Violation{{Rule: RuleClientTurnID, Seqs: []uint64{9}, Want: "no ClientTurnID on child thread child's turn c1", Got: `"client-turn-1"`}}},
		"a delta naming no raw frame": {edit(func(evs []sdk.RuntimeEvent) []sdk.RuntimeEvent { evs[3].RawFrame = 0; return evs }), goodRun,
			[]Violation{{Rule: RuleRawFrame, Seqs: []uint64{4}, Want: "content_delta with the index of the frame it came from", Got: "RawFrame 0"}}},
		"no subagent": {slices.Delete(slices.Clone(good), 7, 10), goodRun, []Violation{{Rule: RuleSubagents,
			Want: "a thread_started with the ParentThreadRef of a thread already started", Got: "none"}}},
		"a child of an unknown thread": {edit(func(evs []sdk.RuntimeEvent) []sdk.RuntimeEvent { evs[7].ParentThreadRef = "elsewhere"; return evs }), goodRun,
			[]Violation{
				{Rule: RuleSubagents, Seqs: []uint64{8}, Want: "a child of a thread already started", Got: "thread child, child of unknown thread elsewhere"},
				{Rule: RuleSubagents, Want: "a thread_started with the ParentThreadRef of a thread already started", Got: "none"},
			}},
		"a crash": {crashed, Run{Turns: goodRun.Turns, Crashed: true}, nil},
		"a crash, the turn completed": {good, Run{Turns: goodRun.Turns, Crashed: true}, []Violation{{Rule: RuleCrash, Seqs: []uint64{12},
			Want: "a failed turn_terminal", Got: `"completed"`}}},
		"a crash, the turn never ended": {slices.Delete(slices.Clone(crashed), 7, 12), Run{Crashed: true}, []Violation{
			{Rule: RuleOneTerminal, Seqs: []uint64{2}, Want: "a turn_terminal for turn t1 (started #2)", Got: "none"},
			{Rule: RuleCrash, Want: "a failed turn_terminal", Got: "none"},
		}},
		"a crash, the thread unusable, the runtime closed": {edit(func(evs []sdk.RuntimeEvent) []sdk.RuntimeEvent {
			evs[11].Status, evs[11].ThreadUsable = sdk.TurnFailed, false
			return evs
		}), Run{Turns: goodRun.Turns, Crashed: true}, []Violation{{Rule: RuleCrash, Seqs: []uint64{12, 13},
			Want: "runtime_exited failed after a turn_terminal with ThreadUsable false", Got: `runtime_exited "closed"`}}},
		"a crash, the thread usable, the runtime failed": {edit(func(evs []sdk.RuntimeEvent) []sdk.RuntimeEvent {
			evs[11].Status, evs[12].Status = sdk.TurnFailed, sdk.ExitFailed
			return evs
		}), Run{Turns: goodRun.Turns, Crashed: true}, []Violation{{Rule: RuleCrash, Seqs: []uint64{12, 13},
			Want: "the session living on (runtime_exited closed, when it was closed) after a turn_terminal with ThreadUsable true", Got: `runtime_exited "failed"`}}},
		"malformed frames, a diagnostic short": {good, Run{Turns: goodRun.Turns, Malformed: 2}, []Violation{{Rule: RuleMalformed,
			Want: "2 diagnostics (one a malformed frame) or a failed turn", Got: "1 diagnostics and no failed turn"}}},
		"malformed frames, the turn failed": {crashed, Run{Turns: goodRun.Turns, Malformed: 2}, nil},
		"a malformed frame, its diagnostic": {good, Run{Turns: goodRun.Turns, Malformed: 1}, nil},
	} {
		t.Run(name, func(t *testing.T) {
			want := c.want
			if name == "a turn_started naming no turn" {
				// The child's turn_started (#9) names none, and the stream
				// ends there: nothing after it, no exit.
				want = []Violation{
					{Rule: RuleOneTerminal, Seqs: []uint64{9}, Want: "turn_started naming its turn (TurnRef)", Got: "no TurnRef"},
					{Rule: RuleOneTerminal, Seqs: []uint64{2}, Want: "a turn_terminal for turn t1 (started #2)", Got: "none"},
					{Rule: RuleExitLast, Want: "one runtime_exited", Got: "0"},
				}
			}
			if diff := cmp.Diff(want, CheckContract(numbered(c.evs), c.run)); diff != "" {
				t.Errorf("violations (-want +got):\n%s", diff)
			}
		})
	}
}

func TestViolationString(t *testing.T) {
	v := Violation{Rule: RuleOneTerminal, Seqs: []uint64{12, 13}, Want: "one turn_terminal for turn t1 (started #2)", Got: "a second one"}
	want := "every turn_started gets exactly one turn_terminal: want one turn_terminal for turn t1 (started #2); got a second one (events #12, #13)"
	if got := v.String(); got != want {
		t.Errorf("String() = %q\nwant %q", got, want)
	}
	v = Violation{Rule: RuleResumedRefs, Seqs: []uint64{2, 13}, Sessions: []int{1, 2}, Want: "turn ref t1, given by session 1's turn_started #2, not given again",
		Got: "session 2's turn_started #13 gives it again"}
	want = RuleResumedRefs + ": want turn ref t1, given by session 1's turn_started #2, not given again; got session 2's turn_started #13 gives it again (events session 1 #2, session 2 #13)"
	if got := v.String(); got != want {
		t.Errorf("String() = %q\nwant %q", got, want)
	}
}

// resumed is the good stream as a session that resumes its thread gives
// it: the turn and item refs its own, the request ref the same (requests
// are bound by session).
func resumed(suffix string) []sdk.RuntimeEvent {
	evs := goodStream()
	for i := range evs {
		if evs[i].TurnRef != "" {
			evs[i].TurnRef += suffix
		}
		if evs[i].ItemRef != "" {
			evs[i].ItemRef += suffix
		}
	}
	return evs
}

// TestCheckThread: sessions of one thread that each give refs of their
// own pass; a resumed session that gives a turn or item ref an earlier
// session gave (a plugin that numbers its turns afresh in every session)
// is named, with both sessions and both events.
func TestCheckThread(t *testing.T) {
	for name, c := range map[string]struct {
		sessions [][]sdk.RuntimeEvent
		want     []Violation
	}{
		"one session":           {[][]sdk.RuntimeEvent{goodStream()}, nil},
		"refs of its own, each": {[][]sdk.RuntimeEvent{goodStream(), resumed("-b"), resumed("-c")}, nil},
		"a request ref again":   {[][]sdk.RuntimeEvent{goodStream(), resumed("-b")}, nil},
		"a turn ref given again": {[][]sdk.RuntimeEvent{goodStream(), slices.Concat(resumed("-b")[:12], []sdk.RuntimeEvent{
			{Kind: sdk.EventTurnStarted, ThreadRef: "root", TurnRef: "t1", ClientTurnID: "client-turn-2"},
			{Kind: sdk.EventTurnTerminal, ThreadRef: "root", TurnRef: "t1", Status: sdk.TurnCompleted, ThreadUsable: true, RawFrame: 10},
			goodStream()[12],
		})}, []Violation{{Rule: RuleResumedRefs, Seqs: []uint64{2, 13}, Sessions: []int{1, 2},
			Want: "turn ref t1, given by session 1's turn_started #2, not given again", Got: "session 2's turn_started #13 gives it again"}}},
		"every ref given again": {[][]sdk.RuntimeEvent{goodStream(), goodStream()}, []Violation{
			{Rule: RuleResumedRefs, Seqs: []uint64{2, 2}, Sessions: []int{1, 2},
				Want: "turn ref t1, given by session 1's turn_started #2, not given again", Got: "session 2's turn_started #2 gives it again"},
			{Rule: RuleResumedRefs, Seqs: []uint64{3, 3}, Sessions: []int{1, 2},
				Want: "item ref i1, given by session 1's item_started #3, not given again", Got: "session 2's item_started #3 gives it again"},
			{Rule: RuleResumedRefs, Seqs: []uint64{9, 9}, Sessions: []int{1, 2},
				Want: "turn ref c1, given by session 1's turn_started #9, not given again", Got: "session 2's turn_started #9 gives it again"},
		}},
		"the third session gives the first's": {[][]sdk.RuntimeEvent{goodStream(), resumed("-b"), slices.Concat(resumed("-c")[:1], goodStream()[1:2])},
			[]Violation{{Rule: RuleResumedRefs, Seqs: []uint64{2, 2}, Sessions: []int{1, 3},
				Want: "turn ref t1, given by session 1's turn_started #2, not given again", Got: "session 3's turn_started #2 gives it again"}}},
		"the third session gives the second's": {[][]sdk.RuntimeEvent{goodStream(), resumed("-b"), slices.Concat(resumed("-c")[:2], resumed("-b")[2:3])},
			[]Violation{{Rule: RuleResumedRefs, Seqs: []uint64{3, 3}, Sessions: []int{2, 3},
				Want: "item ref i1-b, given by session 2's item_started #3, not given again", Got: "session 3's item_started #3 gives it again"}}},
	} {
		t.Run(name, func(t *testing.T) {
			var sessions [][]sdk.RuntimeEvent
			for _, evs := range c.sessions {
				sessions = append(sessions, numbered(evs))
			}
			if diff := cmp.Diff(c.want, CheckThread(sessions)); diff != "" {
				t.Errorf("violations (-want +got):\n%s", diff)
			}
		})
	}
}
