package plugintest

import (
	"fmt"
	"slices"
	"strings"

	"github.com/baton-run/baton/sdk"
)

// The event contract, rule by rule, in the words a Violation names.
const (
	RuleStatus       = "every event's status is one sdk.StatusesFor its kind allows"
	RuleOneTerminal  = "every turn_started gets exactly one turn_terminal"
	RuleItems        = "an item started is completed once, before its turn's terminal"
	RuleRequests     = "a request_opened gets one request_resolved, or the session ends"
	RuleClientTurnID = "turn_started echoes the ClientTurnID of the StartTurn it answers"
	RuleExitLast     = "runtime_exited is the last event, exactly once"
	RuleRawFrame     = "an event made of a provider frame names it (RawFrame)"
	RuleCrash        = "a crash mid-turn fails the turn, and then the runtime exits failed with the thread unusable, or the session lives on with the thread usable (a provider process per turn)"
	RuleMalformed    = "a malformed frame yields a diagnostic or a failed turn"
	RuleSubagents    = "a subagent is a child thread: thread_started with a ParentThreadRef"
	RuleResumedRefs  = "a session that resumes a thread gives no turn ref or item ref an earlier session of the thread gave"
)

// RawFrameKinds are the events a plugin makes only of a provider frame, so
// each must name it (RuleRawFrame). Others may be the plugin's own: the
// turn_started it emits as it sends the user's input, and what it emits
// when a session ends (open items completed, requests cancelled, the turn
// failed, runtime_exited), session_state and diagnostics.
var RawFrameKinds = []sdk.EventKind{sdk.EventContentDelta, sdk.EventItemStarted, sdk.EventItemUpdated,
	sdk.EventPlanUpdated, sdk.EventRequestOpened, sdk.EventUsage, sdk.EventRateLimit}

// TurnCall is a StartTurn a session answered: the client turn id sent and
// the turn ref the response named ("" if none).
type TurnCall struct {
	ClientTurnID string
	TurnRef      string
}

// Run is what a session's client did, which the contract checks the
// session's events against.
type Run struct {
	// Turns are the session's StartTurn calls, in order.
	Turns []TurnCall
	// Crashed says the provider crashed during the session's last turn
	// (RuleCrash).
	Crashed bool
	// Malformed counts the malformed frames the provider sent during the
	// session (RuleMalformed).
	Malformed int
	// Subagents says the session ran a turn that spawns a subagent
	// (RuleSubagents).
	Subagents bool
}

// Violation is one breach of the event contract.
type Violation struct {
	Rule string
	// Seqs are the sequence numbers of the events it is about (none: it
	// is about what is missing).
	Seqs []uint64
	// Sessions, for a rule across sessions (CheckThread), are the
	// sessions (from 1) of the events Seqs names, one each.
	Sessions []int
	Want     string
	Got      string
}

func (v Violation) String() string {
	s := fmt.Sprintf("%s: want %s; got %s", v.Rule, v.Want, v.Got)
	if len(v.Seqs) > 0 {
		n := make([]string, len(v.Seqs))
		for i, q := range v.Seqs {
			n[i] = fmt.Sprintf("#%d", q)
			if i < len(v.Sessions) {
				n[i] = fmt.Sprintf("session %d #%d", v.Sessions[i], q)
			}
		}
		s += " (events " + strings.Join(n, ", ") + ")"
	}
	return s
}

// CheckContract checks one session's events, every one it yielded up to
// the end of its stream, against the event contract and returns every
// breach, in the order of the events:
//
//   - every event's Status is one sdk.StatusesFor(kind) allows (when that
//     is not nil), and a turn_terminal and a runtime_exited have one;
//   - every turn_started names its turn, and gets exactly one
//     turn_terminal; no turn_terminal is of a turn that did not start;
//   - an item started is completed once, after it started and before its
//     turn's terminal;
//   - a request_opened gets exactly one request_resolved, or is still
//     open when the session ends (runtime_exited);
//   - turn_started of a turn the client started echoes the ClientTurnID
//     of the StartTurn it answers (the i-th root turn the i-th call's,
//     or the one the response named); a child thread's turn echoes none;
//   - runtime_exited is the last event, exactly once;
//   - the events of RawFrameKinds name their raw frame;
//   - and what run says happened: a crash (a failed turn_terminal, then
//     runtime_exited failed and ThreadUsable false, or a session that
//     lives on, runtime_exited closed, and ThreadUsable true), malformed frames (a
//     diagnostic each, or a failed turn), a subagent (a thread_started
//     with a ParentThreadRef of a thread already known).
func CheckContract(evs []sdk.RuntimeEvent, run Run) []Violation {
	var vs []Violation
	add := func(rule, want, got string, seqs ...uint64) {
		vs = append(vs, Violation{Rule: rule, Seqs: seqs, Want: want, Got: got})
	}
	type turn struct {
		started sdk.RuntimeEvent
		terms   []sdk.RuntimeEvent
	}
	type item struct {
		started   uint64
		ref, turn string
		completed []uint64
	}
	type request struct {
		opened   uint64
		resolved []uint64
	}
	turns := map[string]*turn{}
	var turnOrder []string
	items := map[string]*item{}
	var itemOrder []string
	reqs := map[string]*request{}
	var reqOrder []string
	threads := map[string]bool{}
	children := map[string]bool{}
	var rootStarts []sdk.RuntimeEvent
	var exits []sdk.RuntimeEvent
	var childSeen []uint64
	diags := 0
	for _, ev := range evs {
		seq := ev.Sequence
		if len(exits) > 0 {
			add(RuleExitLast, "no event after runtime_exited #"+fmt.Sprint(exits[0].Sequence), string(ev.Kind), seq)
		}
		if allowed := sdk.StatusesFor(ev.Kind); allowed != nil {
			if sdk.StatusWord(ev.Status) != "" && !slices.Contains(allowed, ev.Status) {
				add(RuleStatus, fmt.Sprintf("%s with a status of %s", ev.Kind, statuses(allowed)), fmt.Sprintf("%q", sdk.StatusWord(ev.Status)), seq)
			}
			if sdk.StatusWord(ev.Status) == "" && (ev.Kind == sdk.EventTurnTerminal || ev.Kind == sdk.EventRuntimeExited) {
				add(RuleStatus, fmt.Sprintf("%s with a status of %s", ev.Kind, statuses(allowed)), "none", seq)
			}
		}
		if ev.RawFrame == 0 && slices.Contains(RawFrameKinds, ev.Kind) {
			add(RuleRawFrame, string(ev.Kind)+" with the index of the frame it came from", "RawFrame 0", seq)
		}
		switch ev.Kind {
		case sdk.EventThreadStarted:
			if ev.ParentThreadRef != "" {
				children[ev.ThreadRef] = true
				if threads[ev.ParentThreadRef] {
					childSeen = append(childSeen, seq)
				} else if run.Subagents {
					add(RuleSubagents, "a child of a thread already started", fmt.Sprintf("thread %s, child of unknown thread %s", ev.ThreadRef, ev.ParentThreadRef), seq)
				}
			}
			threads[ev.ThreadRef] = true
		case sdk.EventTurnStarted:
			threads[ev.ThreadRef] = true
			if ev.TurnRef == "" {
				add(RuleOneTerminal, "turn_started naming its turn (TurnRef)", "no TurnRef", seq)
				continue
			}
			if tu := turns[ev.TurnRef]; tu != nil {
				add(RuleOneTerminal, fmt.Sprintf("turn %s started once", ev.TurnRef), "a second turn_started", tu.started.Sequence, seq)
				continue
			}
			turns[ev.TurnRef] = &turn{started: ev}
			turnOrder = append(turnOrder, ev.TurnRef)
			if children[ev.ThreadRef] {
				if ev.ClientTurnID != "" {
					add(RuleClientTurnID, fmt.Sprintf("no ClientTurnID on child thread %s's turn %s", ev.ThreadRef, ev.TurnRef),
						fmt.Sprintf("%q", ev.ClientTurnID), seq)
				}
			} else {
				rootStarts = append(rootStarts, ev)
			}
		case sdk.EventTurnTerminal:
			tu := turns[ev.TurnRef]
			if tu == nil {
				add(RuleOneTerminal, "turn_terminal of a turn a turn_started began", fmt.Sprintf("turn_terminal of turn %q, never started", ev.TurnRef), seq)
				continue
			}
			tu.terms = append(tu.terms, ev)
			if len(tu.terms) == 2 {
				add(RuleOneTerminal, fmt.Sprintf("one turn_terminal for turn %s (started #%d)", ev.TurnRef, tu.started.Sequence),
					"a second one", tu.terms[0].Sequence, seq)
			}
		case sdk.EventItemStarted:
			k := ev.ThreadRef + "\x00" + ev.ItemRef
			if it := items[k]; it != nil {
				add(RuleItems, fmt.Sprintf("item %s started once", ev.ItemRef), "a second item_started", it.started, seq)
				continue
			}
			items[k] = &item{started: seq, ref: ev.ItemRef, turn: ev.TurnRef}
			itemOrder = append(itemOrder, k)
		case sdk.EventItemCompleted:
			k := ev.ThreadRef + "\x00" + ev.ItemRef
			it := items[k]
			if it == nil {
				add(RuleItems, fmt.Sprintf("item_completed of item %s after its item_started", ev.ItemRef), "no item_started before it", seq)
				continue
			}
			it.completed = append(it.completed, seq)
			if len(it.completed) == 2 {
				add(RuleItems, fmt.Sprintf("item %s (started #%d) completed once", ev.ItemRef, it.started), "a second item_completed", it.completed[0], seq)
			}
			if tu := turns[it.turn]; tu != nil && len(tu.terms) > 0 && len(it.completed) == 1 {
				add(RuleItems, fmt.Sprintf("item %s (started #%d) completed before turn %s's terminal #%d", ev.ItemRef, it.started, it.turn, tu.terms[0].Sequence),
					"item_completed after it", tu.terms[0].Sequence, seq)
			}
		case sdk.EventRequestOpened:
			if rq := reqs[ev.RequestRef]; rq != nil {
				add(RuleRequests, fmt.Sprintf("request %s opened once", ev.RequestRef), "a second request_opened", rq.opened, seq)
				continue
			}
			reqs[ev.RequestRef] = &request{opened: seq}
			reqOrder = append(reqOrder, ev.RequestRef)
		case sdk.EventRequestResolved:
			rq := reqs[ev.RequestRef]
			if rq == nil {
				add(RuleRequests, fmt.Sprintf("request_resolved of request %s after its request_opened", ev.RequestRef), "no request_opened before it", seq)
				continue
			}
			rq.resolved = append(rq.resolved, seq)
			if len(rq.resolved) == 2 {
				add(RuleRequests, fmt.Sprintf("request %s (opened #%d) resolved once", ev.RequestRef, rq.opened), "a second request_resolved", rq.resolved[0], seq)
			}
		case sdk.EventDiagnostic:
			diags++
		case sdk.EventRuntimeExited:
			exits = append(exits, ev)
		}
	}
	exited := len(exits) > 0
	for _, ref := range turnOrder {
		if tu := turns[ref]; len(tu.terms) == 0 {
			add(RuleOneTerminal, fmt.Sprintf("a turn_terminal for turn %s (started #%d)", ref, tu.started.Sequence), "none", tu.started.Sequence)
		}
	}
	for _, k := range itemOrder {
		it := items[k]
		if len(it.completed) == 0 {
			want := fmt.Sprintf("item_completed of item %s (started #%d)", it.ref, it.started)
			if tu := turns[it.turn]; tu != nil && len(tu.terms) > 0 {
				want += fmt.Sprintf(" before turn %s's terminal #%d", it.turn, tu.terms[0].Sequence)
			}
			add(RuleItems, want, "none", it.started)
		}
	}
	for _, ref := range reqOrder {
		if rq := reqs[ref]; len(rq.resolved) == 0 && !exited {
			add(RuleRequests, fmt.Sprintf("request_resolved of request %s (opened #%d), or runtime_exited", ref, rq.opened), "neither", rq.opened)
		}
	}
	if len(exits) != 1 {
		var seqs []uint64
		for _, e := range exits {
			seqs = append(seqs, e.Sequence)
		}
		add(RuleExitLast, "one runtime_exited", fmt.Sprintf("%d", len(exits)), seqs...)
	}
	for i, call := range run.Turns {
		var started *sdk.RuntimeEvent
		how := ""
		if call.TurnRef != "" {
			if tu := turns[call.TurnRef]; tu != nil {
				started = &tu.started
			}
			how = fmt.Sprintf("turn %s (StartTurn's answer)", call.TurnRef)
		} else if i < len(rootStarts) {
			started = &rootStarts[i]
			how = fmt.Sprintf("root turn %d", i+1)
		}
		switch {
		case started == nil:
			add(RuleClientTurnID, fmt.Sprintf("a turn_started for StartTurn %q", call.ClientTurnID), "none", allSeqs(rootStarts)...)
		case started.ClientTurnID != call.ClientTurnID:
			add(RuleClientTurnID, fmt.Sprintf("ClientTurnID %q on the turn_started of %s", call.ClientTurnID, how),
				fmt.Sprintf("%q", started.ClientTurnID), started.Sequence)
		}
	}
	if run.Crashed {
		var term *sdk.RuntimeEvent
		for _, ref := range turnOrder {
			for i, e := range turns[ref].terms {
				if !children[e.ThreadRef] {
					term = &turns[ref].terms[i]
				}
			}
		}
		switch {
		case term == nil:
			add(RuleCrash, "a failed turn_terminal", "none")
		case term.Status != sdk.TurnFailed:
			add(RuleCrash, "a failed turn_terminal", fmt.Sprintf("%q", sdk.StatusWord(term.Status)), term.Sequence)
		case !exited:
		case !term.ThreadUsable && exits[0].Status != sdk.ExitFailed:
			add(RuleCrash, "runtime_exited failed after a turn_terminal with ThreadUsable false",
				fmt.Sprintf("runtime_exited %q", sdk.StatusWord(exits[0].Status)), term.Sequence, exits[0].Sequence)
		case term.ThreadUsable && exits[0].Status != sdk.ExitClosed:
			add(RuleCrash, "the session living on (runtime_exited closed, when it was closed) after a turn_terminal with ThreadUsable true",
				fmt.Sprintf("runtime_exited %q", sdk.StatusWord(exits[0].Status)), term.Sequence, exits[0].Sequence)
		}
	}
	if run.Malformed > 0 && diags < run.Malformed {
		failed := false
		for _, ref := range turnOrder {
			for _, term := range turns[ref].terms {
				failed = failed || term.Status == sdk.TurnFailed
			}
		}
		if !failed {
			add(RuleMalformed, fmt.Sprintf("%d diagnostics (one a malformed frame) or a failed turn", run.Malformed),
				fmt.Sprintf("%d diagnostics and no failed turn", diags))
		}
	}
	if run.Subagents && len(childSeen) == 0 {
		add(RuleSubagents, "a thread_started with the ParentThreadRef of a thread already started", "none")
	}
	return vs
}

// CheckThread checks the sessions of one provider thread, each one's
// events in order and the sessions in the order they were opened (each
// after the first resuming the thread), against the rule that spans them
// (RuleResumedRefs): no turn_started of a later session names a TurnRef,
// and no item_started an ItemRef, that an event of an earlier session
// named. The host binds a turn by its ref alone across the sessions of
// a thread, and an item by its ref within a run, whose attempts may run
// in several sessions: a ref given again reads as the old turn's or
// item's frame seen again. Each breach names both sessions, the ref and
// the sequence numbers of both events, in the order of the later
// session's events. Requests are bound by session and ref, so a request
// ref may come again.
func CheckThread(sessions [][]sdk.RuntimeEvent) []Violation {
	var vs []Violation
	type given struct {
		session int
		seq     uint64
	}
	turns, items := map[string]given{}, map[string]given{}
	for n, evs := range sessions {
		newTurns, newItems := map[string]given{}, map[string]given{}
		for _, ev := range evs {
			kind, ref, seen, mine := "", "", turns, newTurns
			switch {
			case ev.Kind == sdk.EventTurnStarted && ev.TurnRef != "":
				kind, ref = "turn", ev.TurnRef
			case ev.Kind == sdk.EventItemStarted && ev.ItemRef != "":
				kind, ref, seen, mine = "item", ev.ItemRef, items, newItems
			default:
				continue
			}
			if g, ok := seen[ref]; ok {
				vs = append(vs, Violation{Rule: RuleResumedRefs, Seqs: []uint64{g.seq, ev.Sequence}, Sessions: []int{g.session, n + 1},
					Want: fmt.Sprintf("%s ref %s, given by session %d's %s #%d, not given again", kind, ref, g.session, ev.Kind, g.seq),
					Got:  fmt.Sprintf("session %d's %s #%d gives it again", n+1, ev.Kind, ev.Sequence)})
				continue
			}
			if _, ok := mine[ref]; !ok {
				mine[ref] = given{session: n + 1, seq: ev.Sequence}
			}
		}
		for ref, g := range newTurns {
			turns[ref] = g
		}
		for ref, g := range newItems {
			items[ref] = g
		}
	}
	return vs
}

func allSeqs(evs []sdk.RuntimeEvent) []uint64 {
	var out []uint64
	for _, ev := range evs {
		out = append(out, ev.Sequence)
	}
	return out
}

func statuses(ss []sdk.Status) string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = sdk.StatusWord(s)
	}
	return strings.Join(out, ", ")
}
