package main

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	batonv1 "github.com/baton-run/baton/host/api/baton/v1"
	"github.com/baton-run/baton/host/internal/domain"
)

// knownPayload checks that this client knows ev's payload: one of a
// newer service's types is an error that names it.
func knownPayload(ev *batonv1.Event) error {
	if ev.GetPayload() == nil {
		return fmt.Errorf("event %d (%s): a payload this client does not know", ev.GetSequence(), ev.GetType())
	}
	return nil
}

// jsonLine prints m's protojson form (see baton.proto's Thread) as one
// line, kind first: {"kind":"event",...} or {"kind":"thread",...}.
func jsonLine(w io.Writer, kind string, m proto.Message) {
	b := protoJSON(m)
	if len(b) > 2 { // {} has no field to follow kind
		fmt.Fprintf(w, "{\"kind\":%q,%s\n", kind, b[1:])
		return
	}
	fmt.Fprintf(w, "{\"kind\":%q}\n", kind)
}

// protoJSON is m's protojson form without spaces: protojson puts some in
// at random, different from one build to the next, and a script reads
// the same bytes every time.
func protoJSON(m proto.Message) []byte {
	b, err := protojson.Marshal(m)
	var out bytes.Buffer
	if err == nil {
		err = json.Compact(&out, b)
	}
	if err != nil {
		// Unreachable: every message here came from the API, valid
		// UTF-8, and protojson's output is JSON.
		return []byte("{}")
	}
	return out.Bytes()
}

// scopedPrinter is a printer that names checkpoints by the thread's scopes
// so far (events after t open the later ones).
func scopedPrinter(w io.Writer, jsonOut bool, t *batonv1.Thread) *printer {
	p := newPrinter(w, jsonOut, t)
	for _, sc := range t.GetCheckpointScopes() {
		p.scopes[sc.GetId()] = domain.ScopeKind(sc.GetKind())
	}
	return p
}

// printer shows a thread's events, readably or as JSON lines. It keeps the
// little state it needs from the events themselves.
type printer struct {
	w        io.Writer
	json     bool
	threadID string
	policy   domain.ApprovalPolicy
	inText   bool
	ordinals map[string]int              // run id -> ordinal
	items    map[string]*item            // node id -> what to say about it
	scopes   map[string]domain.ScopeKind // checkpoint scope id -> kind
	cps      map[string]string           // checkpoint id -> what it is ("run 2", "a subagent of run 2")
	waits    map[string]*batonv1.Wait    // wait id -> the wait armed
	// now and loc are the clock and zone instants are shown in.
	now func() time.Time
	loc *time.Location
}

type item struct {
	kind        domain.NodeKind
	title, text string
}

func newPrinter(w io.Writer, jsonOut bool, t *batonv1.Thread) *printer {
	p := &printer{w: w, json: jsonOut, threadID: t.GetId(), policy: domain.ApprovalPolicy(t.GetApprovalPolicy()),
		ordinals: map[string]int{}, items: map[string]*item{}, scopes: map[string]domain.ScopeKind{}, cps: map[string]string{},
		waits: map[string]*batonv1.Wait{}, now: time.Now, loc: time.Local}
	for _, r := range t.GetRuns() {
		p.ordinals[r.GetId()] = int(r.GetOrdinal())
	}
	for _, w := range []*batonv1.Wait{t.GetLoop().GetWait(), t.GetLoop().GetReturn()} {
		if w != nil {
			p.waits[w.GetId()] = w
		}
	}
	return p
}

func (p *printer) line(format string, args ...any) {
	if p.inText {
		fmt.Fprintln(p.w)
		p.inText = false
	}
	fmt.Fprintf(p.w, format+"\n", args...)
}

// event prints one event: its JSON line, or what it says to a reader (the
// family's printer below that knows it; events no one reads, such as a
// provider's bindings, print nothing).
func (p *printer) event(ev *batonv1.Event) {
	p.learn(ev)
	if p.json {
		jsonLine(p.w, "event", ev)
		return
	}
	_ = p.runEvent(ev) || p.turnEvent(ev) || p.itemEvent(ev) || p.requestEvent(ev) || p.sessionEvent(ev) ||
		p.rollbackEvent(ev) || p.switchEvent(ev) || p.loopEvent(ev) || p.worktreeEvent(ev)
}

// learn keeps what later events are printed with: runs' ordinals, items'
// kinds, titles and text, checkpoint scopes and what each checkpoint is
// of, and armed waits.
func (p *printer) learn(ev *batonv1.Event) {
	switch e := ev.GetPayload().(type) {
	case *batonv1.Event_RunQueued:
		p.ordinals[e.RunQueued.GetRunId()] = int(e.RunQueued.GetOrdinal())
	case *batonv1.Event_RunQueueResumed:
		for _, r := range e.RunQueueResumed.GetRuns() {
			p.ordinals[r.GetRunId()] = int(r.GetOrdinal())
		}
	case *batonv1.Event_NodeStarted:
		n := e.NodeStarted
		p.items[n.GetNodeId()] = &item{kind: domain.NodeKind(n.GetKind()), title: n.GetTitle()}
	case *batonv1.Event_NodeUpdated:
		if it := p.items[e.NodeUpdated.GetNodeId()]; it != nil && e.NodeUpdated.GetTitle() != "" {
			it.title = e.NodeUpdated.GetTitle()
		}
	case *batonv1.Event_NodeDelta:
		if it := p.items[e.NodeDelta.GetNodeId()]; it != nil {
			it.text += e.NodeDelta.GetText()
		}
	case *batonv1.Event_CheckpointScopeOpened:
		p.scopes[e.CheckpointScopeOpened.GetScopeId()] = domain.ScopeKind(e.CheckpointScopeOpened.GetKind())
	case *batonv1.Event_WaitArmed:
		p.waits[e.WaitArmed.GetId()] = e.WaitArmed
	case *batonv1.Event_CheckpointRequested:
		c := e.CheckpointRequested
		p.cps[c.GetCheckpointId()] = checkpointOf(p.scopes[c.GetScopeId()], int(c.GetRunOrdinal()))
	}
}

// checkpointOf is what a checkpoint is of, by its scope's kind and its
// run: "a subagent of run 2", "the baseline", "run 2".
func checkpointOf(scope domain.ScopeKind, run int) string {
	switch {
	case scope == domain.ScopeSubagent:
		return fmt.Sprintf("a subagent of run %d", run)
	case run == 0:
		return "the baseline"
	}
	return fmt.Sprintf("run %d", run)
}

// The families of events a reader sees. Each prints the events it knows
// and says whether ev was one of them.

// runEvent: the thread's creation, and its runs queued, started and
// ended.
func (p *printer) runEvent(ev *batonv1.Event) bool {
	switch e := ev.GetPayload().(type) {
	case *batonv1.Event_ThreadCreated:
		c := e.ThreadCreated
		p.policy = cmp.Or(domain.ApprovalPolicy(c.GetApprovalPolicy()), domain.ApproveDecline)
		if w := c.GetWorktree(); w != nil {
			p.line("● thread %s · %s · %s · branch %s from %s", p.threadID, c.GetProvider(), c.GetCwd(), w.GetBranch(), baseName(w))
		} else {
			p.line("● thread %s · %s · %s", p.threadID, c.GetProvider(), c.GetCwd())
		}
	case *batonv1.Event_RunQueued:
		p.line("▶ run %d queued: %s", e.RunQueued.GetOrdinal(), oneLine(e.RunQueued.GetInput(), 100))
	case *batonv1.Event_RunQueueResumed:
		p.line("%s", resumedLine(p.threadID, e.RunQueueResumed))
	case *batonv1.Event_RunStarted:
		if h := e.RunStarted.GetHost(); h != "" {
			p.line("▶ run %d started on host %s", p.ordinals[e.RunStarted.GetRunId()], h)
		} else {
			p.line("▶ run %d started", p.ordinals[e.RunStarted.GetRunId()])
		}
	case *batonv1.Event_RunEnded:
		p.line("%s", p.endedLine(e.RunEnded))
	case *batonv1.Event_ThreadMoved:
		p.line("%s", movedLine(e.ThreadMoved))
	case *batonv1.Event_ThreadHostLost:
		p.line("⚠ host %s lost its lease", e.ThreadHostLost.GetHost())
	default:
		return false
	}
	return true
}

// movedLine is what a thread's move to another host says: "▶ thread
// moved from host a to host b (host_lost)".
func movedLine(m *batonv1.ThreadMoved) string {
	s := "▶ thread moved"
	if m.GetFrom() != "" {
		s += " from host " + m.GetFrom()
	}
	s += " to host " + m.GetTo()
	if m.GetReason() != "" {
		s += " (" + m.GetReason() + ")"
	}
	return s
}

// endedLine is what a run's end says: its mark, status and why.
func (p *printer) endedLine(e *batonv1.RunEnded) string {
	n := p.ordinals[e.GetRunId()]
	mark := "✔"
	switch domain.RunStatus(e.GetStatus()) {
	case domain.RunStatusFailed:
		mark = "✖"
	case domain.RunStatusInterrupted, domain.RunStatusCancelled:
		mark = "⏹"
	case domain.RunStatusBlocked:
		mark = "⏸"
	}
	switch {
	case e.GetFailure() != nil:
		return fmt.Sprintf("%s run %d %s: %s", mark, n, e.GetStatus(), e.GetFailure().GetMessage())
	case e.GetStopReason() != "":
		return fmt.Sprintf("%s run %d %s (%s)", mark, n, e.GetStatus(), e.GetStopReason())
	}
	return fmt.Sprintf("%s run %d %s", mark, n, e.GetStatus())
}

// turnEvent: what happens to a run's turn on the way: steering, restarts,
// interrupts, forced stops and stalls, and attempts.
func (p *printer) turnEvent(ev *batonv1.Event) bool {
	switch e := ev.GetPayload().(type) {
	case *batonv1.Event_RunSteered:
		p.line("  » message added to run %d's turn", p.ordinals[e.RunSteered.GetRunId()])
	case *batonv1.Event_RunRestartRequested:
		r := e.RunRestartRequested
		p.line("  » run %d is stopping its turn to restart with: %s", p.ordinals[r.GetRunId()], oneLine(r.GetText(), 80))
	case *batonv1.Event_RunInterruptRequested:
		p.line("  ⏸ run %d: interrupt sent; waiting for the provider", p.ordinals[e.RunInterruptRequested.GetRunId()])
	case *batonv1.Event_RunStopForced:
		p.line("  ⏹ run %d: %s", p.ordinals[e.RunStopForced.GetRunId()], e.RunStopForced.GetReason())
	case *batonv1.Event_RunStalled:
		p.line("  ⏹ run %d: %s", p.ordinals[e.RunStalled.GetRunId()], e.RunStalled.GetReason())
	case *batonv1.Event_AttemptEnded:
		p.line("  ↻ run %d: attempt ended (%s)", p.ordinals[e.AttemptEnded.GetRunId()], e.AttemptEnded.GetStatus())
	case *batonv1.Event_AttemptStarted:
		if a := e.AttemptStarted; domain.AttemptReason(a.GetReason()) != domain.AttemptInitial {
			p.line("  ↻ run %d: new attempt (%s)", p.ordinals[a.GetRunId()], words(a.GetReason()))
		}
	default:
		return false
	}
	return true
}

// itemEvent: the assistant's text as it arrives, the turn's items (tool
// calls, commands, file changes, reasoning) and the provider's
// diagnostics.
func (p *printer) itemEvent(ev *batonv1.Event) bool {
	switch e := ev.GetPayload().(type) {
	case *batonv1.Event_MessageDelta:
		if !p.inText {
			fmt.Fprint(p.w, "  ")
		}
		fmt.Fprint(p.w, strings.ReplaceAll(e.MessageDelta.GetText(), "\n", "\n  "))
		p.inText = true
	case *batonv1.Event_NodeStarted:
		n := e.NodeStarted
		if k := domain.NodeKind(n.GetKind()); k != domain.NodeRootTurn && k != domain.NodeAssistantMessage && k != domain.NodeReasoning {
			p.line("  · %s %s", words(n.GetKind()), n.GetTitle())
		}
	case *batonv1.Event_NodeCompleted:
		n := e.NodeCompleted
		if it := p.items[n.GetNodeId()]; it != nil && it.kind != domain.NodeRootTurn && it.kind != domain.NodeAssistantMessage {
			text := ""
			if it.kind == domain.NodeReasoning && it.text != "" {
				text = ": " + oneLine(it.text, 100)
			}
			p.line("  · %s %s %s%s", words(string(it.kind)), it.title, n.GetStatus(), text)
		}
	case *batonv1.Event_DiagnosticRecorded:
		p.line("  ! %s %s", e.DiagnosticRecorded.GetTitle(), oneLine(e.DiagnosticRecorded.GetText(), 100))
	default:
		return false
	}
	return true
}

// requestEvent: a provider's approvals and questions, their answers and
// how they ended.
func (p *printer) requestEvent(ev *batonv1.Event) bool {
	switch e := ev.GetPayload().(type) {
	case *batonv1.Event_RequestOpened:
		q := e.RequestOpened
		p.line("  ? %s request %s: %s", words(q.GetKind()), q.GetRequestId(), oneLine(q.GetTitle(), 100))
	case *batonv1.Event_RequestAnswered:
		q := e.RequestAnswered
		p.line("  ? request %s: %s (by %s)", q.GetRequestId(), q.GetDecision(), q.GetBy())
	case *batonv1.Event_RequestAnswerFailed:
		q := e.RequestAnswerFailed
		p.line("  ! the answer to request %s did not reach the provider: %s", q.GetRequestId(), oneLine(q.GetReason(), 100))
	case *batonv1.Event_RequestResolved:
		q := e.RequestResolved
		switch {
		case domain.Delivery(q.GetDelivery()) == domain.DeliveryNotResumable:
			p.line("  ? request %s: %s (the provider is gone)", q.GetRequestId(), q.GetStatus())
		case q.GetDecision() != "":
			p.line("  ? request %s resolved: %s", q.GetRequestId(), q.GetDecision())
		default:
			p.line("  ? request %s", q.GetStatus())
		}
	default:
		return false
	}
	return true
}

// sessionEvent: the provider's sessions, its rate limits, and actions a
// stopped host left that were not performed.
func (p *printer) sessionEvent(ev *batonv1.Event) bool {
	switch e := ev.GetPayload().(type) {
	case *batonv1.Event_ProviderSessionOpened:
		p.line("  (provider session %s opened)", e.ProviderSessionOpened.GetSessionId())
	case *batonv1.Event_ProviderSessionEnded:
		p.line("  (provider session %s ended: %s)", e.ProviderSessionEnded.GetSessionId(), e.ProviderSessionEnded.GetReason())
	case *batonv1.Event_RateLimitReported:
		l := e.RateLimitReported
		resets := ""
		if at := instant(l.GetResetsAt()); !at.IsZero() {
			resets = ", resets " + at.Local().Format("Jan 2 15:04")
		}
		p.line("  ⓘ %s limit: %.0f%% used%s", l.GetScope(), l.GetUsedPercent(), resets)
	case *batonv1.Event_EffectCancelled:
		p.line("  ! a %s action was not performed: %s", e.EffectCancelled.GetType(), e.EffectCancelled.GetReason())
	default:
		return false
	}
	return true
}

// rollbackEvent: checkpoints as they are recorded, and rollbacks.
func (p *printer) rollbackEvent(ev *batonv1.Event) bool {
	switch e := ev.GetPayload().(type) {
	case *batonv1.Event_CheckpointRecorded:
		p.checkpoint(e.CheckpointRecorded)
	case *batonv1.Event_RollbackStarted:
		p.line("↺ rolling back to the checkpoint of run %d: restoring files", e.RollbackStarted.GetTargetRunOrdinal())
	case *batonv1.Event_RollbackFilesRestored:
		r := e.RollbackFilesRestored
		p.line("  ↺ files restored: %d written, %d removed (as they were before: git checkout %s -- .)", r.GetWritten(), r.GetRemoved(), r.GetSavedRef())
	case *batonv1.Event_RollbackFailed:
		p.line("✖ rollback failed while restoring %s: %s", e.RollbackFailed.GetStage(), e.RollbackFailed.GetFailure().GetMessage())
	case *batonv1.Event_RollbackCompleted:
		r := e.RollbackCompleted
		how := map[domain.Reconciliation]string{domain.ReconcileNone: "the provider had no turns to drop",
			domain.ReconcileNative:      fmt.Sprintf("the provider dropped %d turns", r.GetTurnsDropped()),
			domain.ReconcileFreshThread: "the next run starts a fresh provider conversation"}[domain.Reconciliation(r.GetReconciliation())]
		p.line("↺ rolled back; %s", how)
		if r.GetNote() != "" {
			p.line("  ! %s", r.GetNote())
		}
	default:
		return false
	}
	return true
}

// switchEvent: provider switches and their handoffs.
func (p *printer) switchEvent(ev *batonv1.Event) bool {
	switch e := ev.GetPayload().(type) {
	case *batonv1.Event_ThreadProviderSwitched:
		p.line("%s", switchedLine(e.ThreadProviderSwitched))
	case *batonv1.Event_HandoffCreated:
		p.line("  ⓘ %s", handoffLine(e.HandoffCreated))
	case *batonv1.Event_HandoffSuperseded:
		if e.HandoffSuperseded.GetBy() == "" { // a replacement says itself what it is
			p.line("  ⓘ handoff withdrawn: nothing new to tell")
		}
	default:
		return false
	}
	return true
}

// resumedLine is what runs a host that stopped left queued say as they
// are sent: which they are, and how to stop or drop them.
func resumedLine(threadID string, e *batonv1.QueuedRunsResumed) string {
	queued := e.GetRuns()
	if len(queued) == 0 {
		return "! runs queued when the host stopped are sent first" // a log from elsewhere: no run named
	}
	var runs []string
	for _, r := range queued {
		runs = append(runs, fmt.Sprintf("run %d %q", r.GetOrdinal(), oneLine(r.GetInput(), 60)))
	}
	first := queued[0].GetOrdinal()
	if len(queued) == 1 {
		return fmt.Sprintf("! 1 run queued when the host stopped is sent first: %s; it starts now (stop it: baton interrupt %s)",
			runs[0], threadID)
	}
	return fmt.Sprintf("! %d runs queued when the host stopped are sent first: %s; run %d starts now (stop it: baton interrupt %s); drop the rest: baton cancel %s --queued",
		len(queued), strings.Join(runs, ", "), first, threadID, threadID)
}

// switchedLine is what a provider switch says.
func switchedLine(e *batonv1.ProviderSwitched) string {
	var s string
	switch {
	case e.GetFrom() != e.GetTo():
		s = "⇄ switched to " + e.GetTo() + modelNote(e.GetToModel())
	case e.GetFromModel() != e.GetToModel():
		s = "⇄ switched to " + e.GetTo() + "'s " + cmp.Or(e.GetToModel(), "default") + " model"
	default:
		s = "⇄ " + e.GetTo() + ": provider settings changed"
	}
	if e.GetHandoffMaxBytes() > 0 {
		s += "; handoffs at most " + byteSize(int(e.GetHandoffMaxBytes()))
	}
	return s
}

// handoffLine is what a handoff says: whom it is for, what it covers, how
// big it is, and what was cut or why it is a full summary after all.
func handoffLine(e *batonv1.HandoffCreated) string {
	s := "handoff"
	if e.GetToProvider() != "" {
		s += " to " + e.GetToProvider()
	}
	delta := domain.HandoffStrategy(e.GetStrategy()) == domain.HandoffDeltaSinceLastSeen
	switch {
	case e.GetRollbackId() != "":
		s += " (after the rollback)"
	case delta && e.GetFromRun() > 1:
		s += fmt.Sprintf(" (delta since run %d)", e.GetFromRun()-1)
	case delta:
		s += " (delta)"
	}
	s += ": " + domain.RunList(ints(e.GetCoveredRuns())) + ", " + byteSize(cmp.Or(int(e.GetBytes()), len(e.GetText())))
	if e.GetTruncated() {
		s += ", truncated"
	}
	if e.GetFallback() != "" {
		s += "; fallback: " + oneLine(e.GetFallback(), 100)
	}
	return s
}

// byteSize is a size as people read it: 900 bytes, 12 KiB (rounded).
func byteSize(n int) string {
	if n < 1024 {
		return plural(n, "byte")
	}
	return fmt.Sprintf("%d KiB", (n+512)/1024)
}

// checkpoint shows what a checkpoint kept: its status, and the files it
// changed.
func (p *printer) checkpoint(e *batonv1.CheckpointRecorded) {
	what := cmp.Or(p.cps[e.GetCheckpointId()], "checkpoint")
	files := e.GetFiles()
	switch {
	case domain.CheckpointStatus(e.GetStatus()) != domain.CheckpointReady:
		p.line("  ⛁ checkpoint of %s: %s (%s)", what, e.GetStatus(), oneLine(e.GetReason(), 100))
	case len(files) == 0:
		p.line("  ⛁ checkpoint of %s: no files changed", what)
	default:
		p.line("  ⛁ checkpoint of %s: %s changed", what, plural(len(files), "file"))
		for i, f := range files {
			if i == 20 {
				p.line("      … and %d more (baton diff %s)", len(files)-i, p.threadID)
				break
			}
			stat := fmt.Sprintf("+%d -%d", f.GetAdditions(), f.GetDeletions())
			if f.GetBinary() {
				stat = "binary"
			}
			p.line("      %s %s (%s)", f.GetKind(), f.GetPath(), stat)
		}
	}
}

// final says how this invocation's runs (mine) ended, or with --json
// prints the thread t.
func (p *printer) final(t *batonv1.Thread, mine []string) {
	if p.json {
		jsonLine(p.w, "thread", t)
		return
	}
	var parts []string
	for _, id := range mine {
		if r := runOf(t, id); r != nil {
			parts = append(parts, fmt.Sprintf("run %d %s", r.GetOrdinal(), r.GetStatus()))
		}
	}
	p.line("■ thread %s: %s (continue it with --thread %s)", t.GetId(), strings.Join(parts, ", "), t.GetId())
	if w := t.GetWorktree(); w != nil {
		p.line("  %s", worktreeLine(w))
	}
}

// words is a vocabulary word as words: command_execution -> command execution.
func words(s string) string { return strings.ReplaceAll(s, "_", " ") }

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

func oneLine(s string, max int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > max {
		for max > 0 && !utf8.RuneStart(s[max]) {
			max-- // never inside a character
		}
		return s[:max] + "…"
	}
	return s
}
