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
	"github.com/baton-run/baton/host/internal/service"
)

// followed is an event as a client follows it: the API's message, and its
// payload in the domain's words (service.PayloadOf), which the printer
// and the session decide on.
type followed struct {
	*batonv1.Event
	Payload domain.Payload
}

// decodeEvent is an API event with its payload read.
func decodeEvent(ev *batonv1.Event) (followed, error) {
	pl, err := service.PayloadOf(ev)
	if err != nil {
		return followed{}, err
	}
	return followed{Event: ev, Payload: pl}, nil
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
func scopedPrinter(w io.Writer, jsonOut bool, t domain.Thread) *printer {
	p := newPrinter(w, jsonOut, t)
	for _, sc := range t.CheckpointScopes {
		p.scopes[sc.ID] = sc.Kind
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
	waits    map[string]domain.Wait      // wait id -> the wait armed
	// now and loc are the clock and zone instants are shown in.
	now func() time.Time
	loc *time.Location
}

type item struct {
	kind        domain.NodeKind
	title, text string
}

func newPrinter(w io.Writer, jsonOut bool, t domain.Thread) *printer {
	p := &printer{w: w, json: jsonOut, threadID: t.ID, policy: t.ApprovalPolicy,
		ordinals: map[string]int{}, items: map[string]*item{}, scopes: map[string]domain.ScopeKind{}, cps: map[string]string{},
		waits: map[string]domain.Wait{}, now: time.Now, loc: time.Local}
	for _, r := range t.Runs {
		p.ordinals[r.ID] = r.Ordinal
	}
	if l := t.Loop; l != nil {
		for _, w := range []*domain.Wait{l.Wait, l.Return} {
			if w != nil {
				p.waits[w.ID] = *w
			}
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
func (p *printer) event(ev followed) {
	p.learn(ev.Payload)
	if p.json {
		jsonLine(p.w, "event", ev.Event)
		return
	}
	pl := ev.Payload
	_ = p.runEvent(pl) || p.turnEvent(pl) || p.itemEvent(pl) || p.requestEvent(pl) || p.sessionEvent(pl) ||
		p.rollbackEvent(pl) || p.switchEvent(pl) || p.loopEvent(pl)
}

// learn keeps what later events are printed with: runs' ordinals, items'
// kinds, titles and text, checkpoint scopes and what each checkpoint is
// of, and armed waits.
func (p *printer) learn(pl domain.Payload) {
	switch e := pl.(type) {
	case domain.RunQueued:
		p.ordinals[e.RunID] = e.Ordinal
	case domain.QueuedRunsResumed:
		for _, r := range e.Runs {
			p.ordinals[r.RunID] = r.Ordinal
		}
	case domain.NodeStarted:
		p.items[e.NodeID] = &item{kind: e.Kind, title: e.Title}
	case domain.NodeUpdated:
		if it := p.items[e.NodeID]; it != nil && e.Title != "" {
			it.title = e.Title
		}
	case domain.NodeDelta:
		if it := p.items[e.NodeID]; it != nil {
			it.text += e.Text
		}
	case domain.CheckpointScopeOpened:
		p.scopes[e.ScopeID] = e.Kind
	case domain.WaitArmed:
		p.waits[e.ID] = e.Wait
	case domain.CheckpointRequested:
		switch {
		case p.scopes[e.ScopeID] == domain.ScopeSubagent:
			p.cps[e.CheckpointID] = fmt.Sprintf("a subagent of run %d", e.RunOrdinal)
		case e.RunOrdinal == 0:
			p.cps[e.CheckpointID] = "the baseline"
		default:
			p.cps[e.CheckpointID] = fmt.Sprintf("run %d", e.RunOrdinal)
		}
	}
}

// The families of events a reader sees. Each prints the events it knows
// and says whether pl was one of them.

// runEvent: the thread's creation, and its runs queued, started and
// ended.
func (p *printer) runEvent(pl domain.Payload) bool {
	switch e := pl.(type) {
	case domain.ThreadCreated:
		p.policy = cmp.Or(e.ApprovalPolicy, domain.ApproveDecline)
		p.line("● thread %s · %s · %s", p.threadID, e.Provider, e.Cwd)
	case domain.RunQueued:
		p.line("▶ run %d queued: %s", e.Ordinal, oneLine(e.Input, 100))
	case domain.QueuedRunsResumed:
		p.line("%s", resumedLine(p.threadID, e))
	case domain.RunStarted:
		p.line("▶ run %d started", p.ordinals[e.RunID])
	case domain.RunEnded:
		p.line("%s", p.endedLine(e))
	default:
		return false
	}
	return true
}

// endedLine is what a run's end says: its mark, status and why.
func (p *printer) endedLine(e domain.RunEnded) string {
	n := p.ordinals[e.RunID]
	mark := "✔"
	switch e.Status {
	case domain.RunStatusFailed:
		mark = "✖"
	case domain.RunStatusInterrupted, domain.RunStatusCancelled:
		mark = "⏹"
	case domain.RunStatusBlocked:
		mark = "⏸"
	}
	switch {
	case e.Failure != nil:
		return fmt.Sprintf("%s run %d %s: %s", mark, n, e.Status, e.Failure.Message)
	case e.StopReason != "":
		return fmt.Sprintf("%s run %d %s (%s)", mark, n, e.Status, e.StopReason)
	}
	return fmt.Sprintf("%s run %d %s", mark, n, e.Status)
}

// turnEvent: what happens to a run's turn on the way: steering, restarts,
// interrupts, forced stops and stalls, and attempts.
func (p *printer) turnEvent(pl domain.Payload) bool {
	switch e := pl.(type) {
	case domain.RunSteered:
		p.line("  » message added to run %d's turn", p.ordinals[e.RunID])
	case domain.RestartRequested:
		p.line("  » run %d is stopping its turn to restart with: %s", p.ordinals[e.RunID], oneLine(e.Text, 80))
	case domain.InterruptRequested:
		p.line("  ⏸ run %d: interrupt sent; waiting for the provider", p.ordinals[e.RunID])
	case domain.StopForced:
		p.line("  ⏹ run %d: %s", p.ordinals[e.RunID], e.Reason)
	case domain.TurnStalled:
		p.line("  ⏹ run %d: %s", p.ordinals[e.RunID], e.Reason)
	case domain.AttemptEnded:
		p.line("  ↻ run %d: attempt ended (%s)", p.ordinals[e.RunID], e.Status)
	case domain.AttemptStarted:
		if e.Reason != domain.AttemptInitial {
			p.line("  ↻ run %d: new attempt (%s)", p.ordinals[e.RunID], words(string(e.Reason)))
		}
	default:
		return false
	}
	return true
}

// itemEvent: the assistant's text as it arrives, the turn's items (tool
// calls, commands, file changes, reasoning) and the provider's
// diagnostics.
func (p *printer) itemEvent(pl domain.Payload) bool {
	switch e := pl.(type) {
	case domain.MessageDelta:
		if !p.inText {
			fmt.Fprint(p.w, "  ")
		}
		fmt.Fprint(p.w, strings.ReplaceAll(e.Text, "\n", "\n  "))
		p.inText = true
	case domain.NodeStarted:
		if e.Kind != domain.NodeRootTurn && e.Kind != domain.NodeAssistantMessage && e.Kind != domain.NodeReasoning {
			p.line("  · %s %s", words(string(e.Kind)), e.Title)
		}
	case domain.NodeCompleted:
		if it := p.items[e.NodeID]; it != nil && it.kind != domain.NodeRootTurn && it.kind != domain.NodeAssistantMessage {
			text := ""
			if it.kind == domain.NodeReasoning && it.text != "" {
				text = ": " + oneLine(it.text, 100)
			}
			p.line("  · %s %s %s%s", words(string(it.kind)), it.title, e.Status, text)
		}
	case domain.DiagnosticRecorded:
		p.line("  ! %s %s", e.Title, oneLine(e.Text, 100))
	default:
		return false
	}
	return true
}

// requestEvent: a provider's approvals and questions, their answers and
// how they ended.
func (p *printer) requestEvent(pl domain.Payload) bool {
	switch e := pl.(type) {
	case domain.RequestOpened:
		p.line("  ? %s request %s: %s", words(string(e.Kind)), e.RequestID, oneLine(e.Title, 100))
	case domain.RequestAnswered:
		p.line("  ? request %s: %s (by %s)", e.RequestID, e.Decision, e.By)
	case domain.RequestAnswerFailed:
		p.line("  ! the answer to request %s did not reach the provider: %s", e.RequestID, oneLine(e.Reason, 100))
	case domain.RequestResolved:
		switch {
		case e.Delivery == domain.DeliveryNotResumable:
			p.line("  ? request %s: %s (the provider is gone)", e.RequestID, e.Status)
		case e.Decision != "":
			p.line("  ? request %s resolved: %s", e.RequestID, e.Decision)
		default:
			p.line("  ? request %s", e.Status)
		}
	default:
		return false
	}
	return true
}

// sessionEvent: the provider's sessions, its rate limits, and actions a
// stopped host left that were not performed.
func (p *printer) sessionEvent(pl domain.Payload) bool {
	switch e := pl.(type) {
	case domain.SessionOpened:
		p.line("  (provider session %s opened)", e.SessionID)
	case domain.SessionEnded:
		p.line("  (provider session %s ended: %s)", e.SessionID, e.Reason)
	case domain.RateLimitReported:
		resets := ""
		if !e.ResetsAt.IsZero() {
			resets = ", resets " + e.ResetsAt.Local().Format("Jan 2 15:04")
		}
		p.line("  ⓘ %s limit: %.0f%% used%s", e.Scope, e.UsedPercent, resets)
	case domain.EffectCancelled:
		p.line("  ! a %s action was not performed: %s", e.Type, e.Reason)
	default:
		return false
	}
	return true
}

// rollbackEvent: checkpoints as they are recorded, and rollbacks.
func (p *printer) rollbackEvent(pl domain.Payload) bool {
	switch e := pl.(type) {
	case domain.CheckpointRecorded:
		p.checkpoint(e)
	case domain.RollbackStarted:
		p.line("↺ rolling back to the checkpoint of run %d: restoring files", e.TargetRunOrdinal)
	case domain.RollbackFilesRestored:
		p.line("  ↺ files restored: %d written, %d removed (as they were before: git checkout %s -- .)", e.Written, e.Removed, e.SavedRef)
	case domain.RollbackFailed:
		p.line("✖ rollback failed while restoring %s: %s", e.Stage, e.Failure.Message)
	case domain.RollbackCompleted:
		how := map[domain.Reconciliation]string{domain.ReconcileNone: "the provider had no turns to drop",
			domain.ReconcileNative:      fmt.Sprintf("the provider dropped %d turns", e.TurnsDropped),
			domain.ReconcileFreshThread: "the next run starts a fresh provider conversation"}[e.Reconciliation]
		p.line("↺ rolled back; %s", how)
		if e.Note != "" {
			p.line("  ! %s", e.Note)
		}
	default:
		return false
	}
	return true
}

// switchEvent: provider switches and their handoffs.
func (p *printer) switchEvent(pl domain.Payload) bool {
	switch e := pl.(type) {
	case domain.ProviderSwitched:
		p.line("%s", switchedLine(e))
	case domain.HandoffCreated:
		p.line("  ⓘ %s", handoffLine(e))
	case domain.HandoffSuperseded:
		if e.By == "" { // a replacement says itself what it is
			p.line("  ⓘ handoff withdrawn: nothing new to tell")
		}
	default:
		return false
	}
	return true
}

// resumedLine is what runs a host that stopped left queued say as they
// are sent: which they are, and how to stop or drop them.
func resumedLine(threadID string, e domain.QueuedRunsResumed) string {
	if len(e.Runs) == 0 {
		return "! runs queued when the host stopped are sent first" // a log from elsewhere: no run named
	}
	var runs []string
	for _, r := range e.Runs {
		runs = append(runs, fmt.Sprintf("run %d %q", r.Ordinal, oneLine(r.Input, 60)))
	}
	first := e.Runs[0].Ordinal
	if len(e.Runs) == 1 {
		return fmt.Sprintf("! 1 run queued when the host stopped is sent first: %s; it starts now (stop it: baton interrupt %s)",
			runs[0], threadID)
	}
	return fmt.Sprintf("! %d runs queued when the host stopped are sent first: %s; run %d starts now (stop it: baton interrupt %s); drop the rest: baton cancel %s --queued",
		len(e.Runs), strings.Join(runs, ", "), first, threadID, threadID)
}

// switchedLine is what a provider switch says.
func switchedLine(e domain.ProviderSwitched) string {
	var s string
	switch {
	case e.From != e.To:
		s = "⇄ switched to " + e.To + modelNote(e.ToModel)
	case e.FromModel != e.ToModel:
		s = "⇄ switched to " + e.To + "'s " + cmp.Or(e.ToModel, "default") + " model"
	default:
		s = "⇄ " + e.To + ": provider settings changed"
	}
	if e.HandoffMaxBytes > 0 {
		s += "; handoffs at most " + byteSize(e.HandoffMaxBytes)
	}
	return s
}

// handoffLine is what a handoff says: whom it is for, what it covers, how
// big it is, and what was cut or why it is a full summary after all.
func handoffLine(e domain.HandoffCreated) string {
	s := "handoff"
	if e.ToProvider != "" {
		s += " to " + e.ToProvider
	}
	switch {
	case e.RollbackID != "":
		s += " (after the rollback)"
	case e.Strategy == domain.HandoffDeltaSinceLastSeen && e.FromRun > 1:
		s += fmt.Sprintf(" (delta since run %d)", e.FromRun-1)
	case e.Strategy == domain.HandoffDeltaSinceLastSeen:
		s += " (delta)"
	}
	s += ": " + domain.RunList(domain.HandoffOrdinals(e.Runs, e.FromRun, e.ToRun)) + ", " + byteSize(cmp.Or(e.Bytes, len(e.Text)))
	if e.Truncated {
		s += ", truncated"
	}
	if e.Fallback != "" {
		s += "; fallback: " + oneLine(e.Fallback, 100)
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
func (p *printer) checkpoint(e domain.CheckpointRecorded) {
	what := cmp.Or(p.cps[e.CheckpointID], "checkpoint")
	switch {
	case e.Status != domain.CheckpointReady:
		p.line("  ⛁ checkpoint of %s: %s (%s)", what, e.Status, oneLine(e.Reason, 100))
	case len(e.Files) == 0:
		p.line("  ⛁ checkpoint of %s: no files changed", what)
	default:
		p.line("  ⛁ checkpoint of %s: %s changed", what, plural(len(e.Files), "file"))
		for i, f := range e.Files {
			if i == 20 {
				p.line("      … and %d more (baton diff %s)", len(e.Files)-i, p.threadID)
				break
			}
			stat := fmt.Sprintf("+%d -%d", f.Additions, f.Deletions)
			if f.Binary {
				stat = "binary"
			}
			p.line("      %s %s (%s)", f.Kind, f.Path, stat)
		}
	}
}

// final says how this invocation's runs (mine) ended, or with --json
// prints the thread (at, t its projection read).
func (p *printer) final(at *batonv1.Thread, t domain.Thread, mine []string) {
	if p.json {
		jsonLine(p.w, "thread", at)
		return
	}
	var parts []string
	for _, id := range mine {
		if r := runOf(t, id); r != nil {
			parts = append(parts, fmt.Sprintf("run %d %s", r.Ordinal, r.Status))
		}
	}
	p.line("■ thread %s: %s (continue it with --thread %s)", t.ID, strings.Join(parts, ", "), t.ID)
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
