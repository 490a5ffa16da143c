package orchestrator_test

import (
	"errors"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-run/baton/host/internal/domain"
)

// Checks that scenarios recorded for several providers share: each states
// what the host must show at the scenario's end, whatever the provider.

// checkSessionsClosed restarts the host (closing every provider session)
// and checks that each ended cleanly: a replay peer that saw a frame it did
// not expect, or missed one, would have exited with an error.
func (e *env) checkSessionsClosed(threadID string) domain.Thread {
	e.t.Helper()
	e.restart()
	th := mustThread(e.t, e, threadID)
	for _, s := range th.ProviderSessions {
		if s.Status != domain.SessionStatusEnded || s.EndReason != "closed" {
			e.t.Errorf("session %s = %s (%q); want ended, closed (the peer saw every frame it expected)", s.ID, s.Status, s.EndReason)
		}
	}
	return th
}

// countEvents counts the thread's stored events of a type.
func (e *env) countEvents(threadID, typ string) int {
	e.t.Helper()
	n := 0
	for _, t := range e.types(threadID, 0) {
		if t == typ {
			n++
		}
	}
	return n
}

// storedOrder is the thread's stored events that label names, in the
// order they were stored; label returns "" for the events to leave out.
func (e *env) storedOrder(threadID string, label func(domain.Payload) string) []string {
	e.t.Helper()
	recs, err := e.host.ThreadEvents(threadID, 0)
	if err != nil {
		e.t.Fatal(err)
	}
	var out []string
	for _, r := range recs {
		p, err := domain.DecodePayload(r.Type, r.Data)
		if err != nil {
			e.t.Fatalf("stored event %d: %v", r.Sequence, err)
		}
		if s := label(p); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// checkOrder checks that the events label names were stored in the order
// want says, and no others.
func (e *env) checkOrder(threadID, what string, want []string, label func(domain.Payload) string) {
	e.t.Helper()
	if diff := cmp.Diff(want, e.storedOrder(threadID, label)); diff != "" {
		e.t.Errorf("%s: stored events (-want +got):\n%s", what, diff)
	}
}

// runEnd labels the events that end run r: its root turn's terminal
// (node.completed of the attempt's root node, what the provider's terminal
// event becomes), the run's completing while its checkpoint is captured,
// and its end. other labels more events, or is nil.
func runEnd(r domain.Run, other func(domain.Payload) string) func(domain.Payload) string {
	return func(p domain.Payload) string {
		if other != nil {
			if s := other(p); s != "" {
				return s
			}
		}
		switch p := p.(type) {
		case domain.NodeCompleted:
			for _, a := range r.Attempts {
				if p.NodeID == a.RootNode {
					return "root turn's terminal"
				}
			}
		case domain.RunCompleting:
			if p.RunID == r.ID {
				return "run completing"
			}
		case domain.RunEnded:
			if p.RunID == r.ID {
				return "run ended"
			}
		}
		return ""
	}
}

// checkEndedAfterRoot checks that a run with a subagent ended after, and
// only after, its root turn's terminal: the child's terminal is stored
// first (it does not end the run), then the root turn goes on (its last
// assistant message starts), then the root's terminal and the run's end,
// once. (The root's node.completed alone would not do: a run ended early
// completes its root node too.)
func (e *env) checkEndedAfterRoot(th domain.Thread, r domain.Run, child domain.Node) {
	e.t.Helper()
	parent := map[string]string{}
	for _, n := range r.Nodes {
		parent[n.ID] = n.ParentID
	}
	var last string // the root's last assistant message
	for _, m := range th.Messages {
		if m.RunID == r.ID && m.Role == domain.RoleAssistant && m.NodeID != child.ID && parent[m.NodeID] != child.ID {
			last = m.NodeID
		}
	}
	if last == "" {
		e.t.Fatalf("run %d has no assistant message of its root turn: %+v", r.Ordinal, th.Messages)
	}
	e.checkOrder(th.ID, "the subagent's run", []string{"child's terminal", "root's last message", "root turn's terminal", "run completing", "run ended"},
		runEnd(r, func(p domain.Payload) string {
			switch p := p.(type) {
			case domain.NodeCompleted:
				if p.NodeID == child.ID {
					return "child's terminal"
				}
			case domain.NodeStarted:
				if p.NodeID == last {
					return "root's last message"
				}
			}
			return ""
		}))
}

// afterAck is what a turn_interrupt transcript's provider does between
// acknowledging an interrupt and ending its turn.
type afterAck int

const (
	// nothingAfterAck: the provider ends its turn (or its process) at once.
	nothingAfterAck afterAck = iota
	// goesOnAfterAck: it says something more (an item's output, a message).
	goesOnAfterAck
	// asksAfterAck: it asks for an approval, waits for the answer, and
	// only then goes on.
	asksAfterAck
)

// checkInterrupted checks, from the stored events, that a run ended
// interrupted because the host asked, and only on the provider's terminal
// event: the interrupt's request; then what the provider did after its
// acknowledgement (after), stored while the run still runs; then the root
// turn's terminal, and the run's end after it. With asksAfterAck, a host
// that ended the run at the acknowledgement fails this whatever the
// timing: it sends the answer only once it has done with the interrupt, so
// the provider cannot go on before the run's end (closing a run completes
// its open nodes, but writes no output or text). With goesOnAfterAck it
// fails when the provider's words come after the host's end, which the
// timing allows but does not force.
func (e *env) checkInterrupted(threadID string, r domain.Run, after afterAck) {
	e.t.Helper()
	if r.Status != domain.RunStatusInterrupted || !r.InterruptRequested {
		e.t.Fatalf("run %s (requested %v), want interrupted", r.Status, r.InterruptRequested)
	}
	want := []string{"interrupt requested", "root turn's terminal", "run completing", "run ended"}
	switch after {
	case goesOnAfterAck:
		want = slices.Insert(want, 1, "provider goes on")
	case asksAfterAck:
		want = slices.Insert(want, 1, "provider asks", "provider goes on")
	}
	var interrupted, asked, wentOn bool
	e.checkOrder(threadID, "the interrupted run", want, runEnd(r, func(p domain.Payload) string {
		switch p := p.(type) {
		case domain.InterruptRequested:
			if p.RunID == r.ID {
				interrupted = true
				return "interrupt requested"
			}
		case domain.RequestOpened:
			if interrupted && !asked {
				asked = true
				return "provider asks"
			}
		case domain.NodeStarted, domain.NodeUpdated, domain.NodeDelta, domain.MessageAdded, domain.MessageDelta:
			if interrupted && !wentOn && (asked || after != asksAfterAck) {
				wentOn = true
				return "provider goes on"
			}
		}
		return ""
	}))
}

// sendAcrossRestart sends a message, waits for its run to end, restarts
// the host (the provider session closes, its process ends) and sends the
// next, whose run must go on in the provider's thread from a new session;
// it returns the thread once that run has ended.
func (e *env) sendAcrossRestart(threadID, first, second string) domain.Thread {
	e.t.Helper()
	e.dispatch(domain.Command{ID: "send-1", ThreadID: threadID, Payload: domain.DispatchMessage{Text: first}})
	e.waitFor(threadID, "run 1 to end", allRunsEnded(1))
	e.restart()
	e.dispatch(domain.Command{ID: "send-2", ThreadID: threadID, Payload: domain.DispatchMessage{Text: second}})
	return e.waitFor(threadID, "run 2 to end", allRunsEnded(2))
}

// subagentTurn is the node of a subagent's turn in a run: a subagent node
// under the run's root, bound to a provider turn of its own; the test
// fails unless there is one and it completed.
func (e *env) subagentTurn(th domain.Thread, r domain.Run) domain.Node {
	e.t.Helper()
	root := r.Attempts[0].RootNode
	for _, n := range r.Nodes {
		if n.Kind != domain.NodeSubagent || n.ParentID != root {
			continue
		}
		for _, pt := range th.ProviderTurns {
			if pt.NodeID == n.ID {
				if n.Status != domain.StatusCompleted {
					e.t.Fatalf("subagent turn node %+v; want completed", n)
				}
				return n
			}
		}
	}
	e.t.Fatalf("no subagent turn node under the root: %+v", r.Nodes)
	return domain.Node{}
}

// approvalCase is a scenario whose approval requests a client answers,
// every one with the same decision.
type approvalCase struct {
	scenario   string
	decision   domain.RequestDecision
	requests   int // how many the provider asks
	itemKind   domain.NodeKind
	itemStatus domain.ItemStatus // the one item of this kind ends so
}

// checkApprovals plays an approval scenario on a thread that asks a client
// about everything, and checks that the run completed, that the client
// answered every request, all of them approvals, with the case's decision,
// and that the case's item ended as the answer made it.
func (e *env) checkApprovals(provider string, tc approvalCase) domain.Thread {
	e.t.Helper()
	threadID, _, _ := e.newThread(provider, provider+"/"+tc.scenario+".ndjson", domain.ApproveAsk)
	th := e.play(threadID, provider+"/"+tc.scenario+".steps.json")
	if r := th.Runs[0]; r.Status != domain.RunStatusCompleted {
		e.t.Fatalf("run %s (%+v)", r.Status, r.Failure)
	}
	if len(th.Requests) != tc.requests {
		e.t.Fatalf("requests = %+v, want %d", th.Requests, tc.requests)
	}
	for _, q := range th.Requests {
		if q.Status != domain.RequestStatusResolved || q.Decision != tc.decision || q.AnsweredBy != "client" {
			e.t.Errorf("request %+v; want resolved by the client's %s", q, tc.decision)
		}
		if q.Kind != domain.RequestCommandApproval && q.Kind != domain.RequestFileChangeApproval {
			e.t.Errorf("request kind %q", q.Kind)
		}
	}
	var items []domain.TurnItem
	for _, it := range th.TurnItems {
		if it.Kind == tc.itemKind {
			items = append(items, it)
		}
	}
	if len(items) != 1 || items[0].Status != tc.itemStatus {
		e.t.Errorf("%s items %+v, want one %s", tc.itemKind, items, tc.itemStatus)
	}
	return th
}

// checkSteeredNatively checks a run a message was steered into natively:
// one run, completed in its one attempt, the steer stored (run.steered),
// the run ended once, and both user messages the run's.
func (e *env) checkSteeredNatively(threadID string, th domain.Thread) domain.Run {
	e.t.Helper()
	if len(th.Runs) != 1 {
		e.t.Fatalf("runs = %d, want 1", len(th.Runs))
	}
	r := th.Runs[0]
	if r.Status != domain.RunStatusCompleted || len(r.Attempts) != 1 {
		e.t.Fatalf("run %s with %d attempts; want completed with 1", r.Status, len(r.Attempts))
	}
	if e.countEvents(threadID, "run.steered") != 1 || e.countEvents(threadID, "run.ended") != 1 {
		e.t.Fatalf("events %v; want one run.steered and one run.ended", e.types(threadID, 0))
	}
	e.checkUserMessages(th, r, 2)
	return r
}

// checkUserMessages checks that the thread has n user messages, all of
// them the run's.
func (e *env) checkUserMessages(th domain.Thread, r domain.Run, n int) {
	e.t.Helper()
	var users []string
	for _, m := range th.Messages {
		if m.Role == domain.RoleUser {
			users = append(users, m.Text.String())
			if m.RunID != r.ID {
				e.t.Errorf("user message %q belongs to %s, not the run %s", m.Text, m.RunID, r.ID)
			}
		}
	}
	if len(users) != n {
		e.t.Errorf("user messages %q; want %d", users, n)
	}
}

// checkSteeringRestart checks a run steered by restart: one run, completed
// by its second attempt, which replaced the interrupted first for the
// steering message and carried a provider turn of its own.
func (e *env) checkSteeringRestart(th domain.Thread) domain.Run {
	e.t.Helper()
	if len(th.Runs) != 1 {
		e.t.Fatalf("runs = %d, want 1", len(th.Runs))
	}
	r := th.Runs[0]
	if r.Status != domain.RunStatusCompleted || len(r.Attempts) != 2 {
		e.t.Fatalf("run = %s with %d attempts, want completed with 2", r.Status, len(r.Attempts))
	}
	first, second := r.Attempts[0], r.Attempts[1]
	if first.Reason != domain.AttemptInitial || first.Status != domain.AttemptStatus(domain.RunStatusInterrupted) ||
		second.Reason != domain.AttemptSteeringRestart || r.FinalAttempt != second.ID {
		e.t.Fatalf("attempts = %+v", r.Attempts)
	}
	if len(th.ProviderTurns) != 2 || th.ProviderTurns[1].AttemptID != second.ID {
		e.t.Fatalf("provider turns %+v; want the second attempt's own", th.ProviderTurns)
	}
	return r
}

// checkRolledBackToRun1 checks the end of a thread_rollback scenario: three
// runs changed files; a rollback to run 1 put the files back byte for byte
// (files made later removed, ignored ones kept) and reconciled the
// provider's conversation as said; runs 2 and 3 are rolled back, and the
// fourth run answered from run 1's state. It returns the root checkpoints
// (the baseline's, then each run's) and the rollback.
func (e *env) checkRolledBackToRun1(th domain.Thread, reconciliation domain.Reconciliation) ([]domain.Checkpoint, domain.Rollback) {
	e.t.Helper()
	t := e.t
	want := map[string]string{"README.md": readme, ".gitignore": "*.log\n", "build.log": "ignored\n", "a.txt": "one\n"}
	if got := e.files(); !maps.Equal(got, want) {
		t.Errorf("files after the rollback = %q, want %q", got, want)
	}
	if _, err := os.Stat(filepath.Join(e.ws, "sub")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the directory sub/ made by run 2 is still there: %v", err)
	}
	if len(th.Runs) != 4 {
		t.Fatalf("runs = %d, want 4", len(th.Runs))
	}
	for i, want := range []domain.RunStatus{domain.RunStatusCompleted, domain.RunStatusRolledBack, domain.RunStatusRolledBack, domain.RunStatusCompleted} {
		if r := th.Runs[i]; r.Status != want {
			t.Errorf("run %d = %s, want %s (failure %+v)", r.Ordinal, r.Status, want, r.Failure)
		}
	}
	if got := assistantText(th, th.Runs[3].ID); got != "a.txt says one." {
		t.Errorf("run 4 said %q", got)
	}
	// What each run changed.
	roots := rootCheckpoints(th)
	if len(roots) != 5 {
		t.Fatalf("root checkpoints: %+v", roots)
	}
	for i, want := range [][]string{nil, {"added a.txt"}, {"modified a.txt", "added sub/b.txt"}, {"added c.txt"}, nil} {
		if got := fileList(roots[i]); !slices.Equal(got, want) {
			t.Errorf("checkpoint of run %d: files %q, want %q", roots[i].RunOrdinal, got, want)
		}
	}
	if len(th.Rollbacks) != 1 {
		t.Fatalf("rollbacks: %+v", th.Rollbacks)
	}
	rb := th.Rollbacks[0]
	if rb.Status != domain.RollbackDone || rb.TargetRunOrdinal != 1 || rb.Reconciliation != reconciliation ||
		rb.FilesWritten != 1 || rb.FilesRemoved != 2 {
		t.Fatalf("rollback: %+v", rb)
	}
	switch reconciliation {
	case domain.ReconcileNative:
		if rb.TurnsDropped != 2 || len(th.Handoffs) != 0 {
			t.Errorf("native rollback: %+v, handoffs %+v", rb, th.Handoffs)
		}
	case domain.ReconcileFreshThread:
		// One handoff, made by the rollback: a summary of run 1 alone
		// (its range, and the runs its text covers), given to run 4.
		type handoff struct {
			RollbackID      string
			Strategy        domain.HandoffStrategy
			FromRun, ToRun  int
			Status          domain.HandoffStatus
			RunID           string
			CoveredOrdinals []int
		}
		var got []handoff
		for _, h := range th.Handoffs {
			var covered []int
			for _, m := range regexp.MustCompile(`(?m)^## Run (\d+) `).FindAllStringSubmatch(h.Text, -1) {
				n, _ := strconv.Atoi(m[1])
				covered = append(covered, n)
			}
			got = append(got, handoff{h.RollbackID, h.Strategy, h.FromRun, h.ToRun, h.Status, h.RunID, covered})
		}
		want := []handoff{{rb.ID, domain.HandoffFullThreadSummary, 1, 1, domain.HandoffStatusConsumed, th.Runs[3].ID, []int{1}}}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("handoffs (-want +got):\n%s", diff)
		}
		if len(th.ProviderThreads) != 2 || !th.ProviderThreads[0].Detached || th.ProviderThreads[1].Detached {
			t.Errorf("provider threads: %+v; want the old conversation detached and a fresh one", th.ProviderThreads)
		}
	}
	return roots, rb
}

// subagentCheckpoints checks the checkpoints of a run whose subagent wrote
// a file: one root scope for the run and one subagent scope nested under
// it, which does not advance the run count. It returns the subagent's
// scope and checkpoint, and the run's checkpoint.
func (e *env) subagentCheckpoints(th domain.Thread) (domain.CheckpointScope, domain.Checkpoint, domain.Checkpoint) {
	e.t.Helper()
	var root, sub []domain.CheckpointScope
	for _, sc := range th.CheckpointScopes {
		if sc.Kind == domain.ScopeSubagent {
			sub = append(sub, sc)
		} else if sc.RunID != "" {
			root = append(root, sc)
		}
	}
	if len(root) != 1 || len(sub) != 1 || sub[0].ParentID != root[0].ID || sub[0].AdvancesRunCount {
		e.t.Fatalf("scopes: %+v", th.CheckpointScopes)
	}
	var subCP, runCP domain.Checkpoint
	for _, c := range th.Checkpoints {
		switch c.ScopeID {
		case sub[0].ID:
			subCP = c
		case root[0].ID:
			runCP = c
		}
	}
	if subCP.Status != domain.CheckpointReady {
		e.t.Errorf("subagent checkpoint %+v; want ready", subCP)
	}
	return sub[0], subCP, runCP
}

// turnRun is what checkTurnRuns compares of a run.
type turnRun struct {
	Ordinal  int
	Status   domain.RunStatus
	Attempts []turnAttempt
	// Turns are the provider turns of the run.
	Turns []boundTurn
	// Checkpoint is the run's root checkpoint.
	Checkpoint runCheckpoint
}

type turnAttempt struct {
	Reason     domain.AttemptReason
	Status     domain.AttemptStatus
	Final      bool
	Session    int             // the provider session it ran in, by index
	RootKind   domain.NodeKind // of the attempt's root node
	RootStatus domain.ItemStatus
}

// boundTurn is a provider turn's binding: to which attempt (by index) and
// whether to its root node, on which of the thread's provider threads (by
// index), and how it ended.
type boundTurn struct {
	Attempt, Thread int
	OnRoot          bool
	Status          domain.ItemStatus
}

type runCheckpoint struct {
	Status     domain.CheckpointStatus
	RunOrdinal int
	// BaseOrdinal is the run ordinal of the checkpoint it is against (0:
	// the baseline).
	BaseOrdinal int
	Files       []string
}

// checkTurnRuns checks runs that took one turn each, as the simple and
// multi_turn scenarios do: run i has ordinal i+1 and completed in one
// initial attempt, its final, in the given provider session, whose root
// node completed; its one provider turn, completed, is bound to that root
// node, on the thread's first provider thread; and its root checkpoint is ready, against the run
// before's (the baseline for run 1), with the files files[i] says.
func (e *env) checkTurnRuns(th domain.Thread, sessions []int, files [][]string) {
	e.t.Helper()
	index := func(id string, ids []string) int { return slices.Index(ids, id) }
	var threadIDs, sessionIDs []string
	for _, pt := range th.ProviderThreads {
		threadIDs = append(threadIDs, pt.ID)
	}
	for _, s := range th.ProviderSessions {
		sessionIDs = append(sessionIDs, s.ID)
	}
	cps := map[string]domain.Checkpoint{}
	for _, c := range th.Checkpoints {
		cps[c.ID] = c
	}
	var got, want []turnRun
	for _, r := range th.Runs {
		g := turnRun{Ordinal: r.Ordinal, Status: r.Status}
		var attemptIDs []string
		for _, a := range r.Attempts {
			attemptIDs = append(attemptIDs, a.ID)
			ta := turnAttempt{Reason: a.Reason, Status: a.Status, Final: r.FinalAttempt == a.ID, Session: index(a.SessionID, sessionIDs)}
			for _, n := range r.Nodes {
				if n.ID == a.RootNode {
					ta.RootKind, ta.RootStatus = n.Kind, n.Status
				}
			}
			g.Attempts = append(g.Attempts, ta)
		}
		for _, pt := range th.ProviderTurns {
			if pt.RunID != r.ID {
				continue
			}
			a := index(pt.AttemptID, attemptIDs)
			g.Turns = append(g.Turns, boundTurn{Attempt: a, Thread: index(pt.ProviderThreadID, threadIDs),
				OnRoot: a >= 0 && pt.NodeID == r.Attempts[a].RootNode, Status: pt.Status})
		}
		if c, ok := cps[r.CheckpointID]; ok && c.RunID == r.ID {
			g.Checkpoint = runCheckpoint{Status: c.Status, RunOrdinal: c.RunOrdinal, BaseOrdinal: -1, Files: fileList(c)}
			if base, ok := cps[c.BaseID]; ok {
				g.Checkpoint.BaseOrdinal = base.RunOrdinal
			}
		}
		got = append(got, g)
	}
	for i := range files {
		want = append(want, turnRun{Ordinal: i + 1, Status: domain.RunStatusCompleted,
			Attempts:   []turnAttempt{{domain.AttemptInitial, domain.AttemptStatus(domain.RunStatusCompleted), true, sessions[i], domain.NodeRootTurn, domain.StatusCompleted}},
			Turns:      []boundTurn{{Attempt: 0, Thread: 0, OnRoot: true, Status: domain.StatusCompleted}},
			Checkpoint: runCheckpoint{Status: domain.CheckpointReady, RunOrdinal: i + 1, BaseOrdinal: i, Files: files[i]}})
	}
	if diff := cmp.Diff(want, got); diff != "" {
		e.t.Errorf("runs (-want +got):\n%s", diff)
	}
}
