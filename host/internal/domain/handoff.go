package domain

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Context handoffs: what a provider's conversation is told of runs it has
// not seen. composeHandoff is a pure function of the thread and the spec:
// the same log gives the same text, byte for byte (no map is iterated, no
// clock is read).
//
// The text is a header (the format version, the strategy, the target and
// why it is told), a section per covered run, oldest first, and where the
// thread stands now. It is at most the spec's bound: when the whole text
// is longer, the runs are cut, each step cheapest-to-lose first, until it
// fits: the older runs lose their commands' output, then their messages
// and trail are cut short, then each becomes one line, then the oldest are
// left out; only then is the newest run cut the same way. Every run is
// rendered once at each of its levels, so the cost is linear in what the
// runs hold.

// HandoffVersion is the version of the handoff text's format; a change to
// what composeHandoff writes bumps it.
const HandoffVersion = 1

// DefaultHandoffMaxBytes bounds a handoff's text when the thread sets no
// bound of its own.
const DefaultHandoffMaxBytes = 64 << 10

// MinHandoffMaxBytes is the smallest bound a thread may set: room for the
// header, the thread's state and a line per run.
const MinHandoffMaxBytes = 4 << 10

// Limits of the parts of a handoff's text. The fixed parts (header,
// closing section, the line naming left-out runs, a run's one-line stub)
// are bounded so that they fit in MinHandoffMaxBytes together.
const (
	handoffTitleMax     = 300  // a tool's or command's title, flattened to a line
	handoffOutputBytes  = 1200 // a command's output tail
	handoffOutputLines  = 15
	handoffBriefMessage = 600 // a message in a run cut short
	handoffBriefItems   = 8   // trail entries, files and plan steps of a run cut short
	handoffBriefTitle   = 120
	handoffStubBytes    = 200 // the user's message in a run's one-line stub
	handoffNameMax      = 64  // a provider's name
	handoffReasonMax    = 200 // a fallback's reason
	handoffClosingMax   = 1200
)

// handoffSpec is what a handoff is for.
type handoffSpec struct {
	Strategy HandoffStrategy
	// To is the provider whose conversation gets it.
	To string
	// Runs are the ordinals it covers, ascending; each is a run of the
	// thread that ended (not rolled back or cancelled).
	Runs []int
	// MaxBytes bounds the text (0: DefaultHandoffMaxBytes; a bound below
	// MinHandoffMaxBytes is taken as that).
	MaxBytes int
	// RollbackTo, when set, says the files were rolled back to after that
	// run; Fallback why a conversation that had seen the thread is
	// replaced by a fresh one.
	RollbackTo int
	Fallback   string
	// RollbackID is the rollback it is made for (not part of the text).
	RollbackID string
	// past tells of the covered runs that left the projection.
	past *Past
}

// handoff levels: how much of a run the text keeps.
const (
	levelWhole    = iota // everything; commands with their output's tail
	levelNoOutput        // commands without their output
	levelBrief           // messages and the trail cut short
	levelStub            // one line: the start of the user's message
	levelOut             // left out of the text
)

// handoffPart is one covered run, rendered at each level it can have.
type handoffPart struct {
	run    *Run
	text   [levelOut]string
	level  int
	files  []FileChange
	plan   []planStep
	planAt int // the run's ordinal when plan is its pending plan
	// floor is the fullest level its text has (a run that left the
	// projection may be told at most cut short: its fuller levels' texts
	// are that one's).
	floor int
}

// composeHandoff makes the handoff for spec: its text and what it covers.
// The caller sets HandoffID. The covered runs that left the projection are
// told from spec.past: as its digests say, or, for the older ones it has
// none of, left out.
func composeHandoff(t *Thread, spec handoffSpec) HandoffCreated {
	limit := cmp.Or(spec.MaxBytes, DefaultHandoffMaxBytes)
	limit = max(limit, MinHandoffMaxBytes)
	h := HandoffCreated{Strategy: spec.Strategy, Version: HandoffVersion, ToProvider: spec.To, Fallback: spec.Fallback,
		RollbackID: spec.RollbackID}

	// What each covered run said and did, found in one pass each over the
	// thread's messages and items.
	parts := make([]handoffPart, 0, len(spec.Runs))
	at := make(map[string]int, len(spec.Runs)) // run id -> index in parts
	for _, ord := range spec.Runs {
		if r := t.runByOrdinal(ord); r != nil {
			at[r.ID] = len(parts)
			parts = append(parts, handoffPart{run: r})
			h.Runs = append(h.Runs, HandoffRun{Ordinal: r.Ordinal, RunID: r.ID, Provider: r.Provider})
			continue
		}
		hr, dg, ok := spec.past.tells(ord)
		if !ok {
			continue // a run the thread does not have
		}
		h.Runs = append(h.Runs, hr)
		if dg != nil {
			parts = append(parts, *dg)
			continue
		}
		// Older than the digests reach: its one line would not fit.
		parts = append(parts, handoffPart{run: &Run{ID: hr.RunID, Ordinal: hr.Ordinal, Provider: hr.Provider}, level: levelOut})
	}
	msgs := make([][]*Message, len(parts))
	for i := range t.Messages {
		if m := &t.Messages[i]; m.Text.Len() > 0 {
			if j, ok := at[m.RunID]; ok {
				msgs[j] = append(msgs[j], m)
				h.Runs[j].MessageIDs = append(h.Runs[j].MessageIDs, m.ID)
			}
		}
	}
	items := make([][]*TurnItem, len(parts))
	for i := range t.TurnItems {
		if j, ok := at[t.TurnItems[i].RunID]; ok {
			items[j] = append(items[j], &t.TurnItems[i])
		}
	}
	for i := range parts {
		if _, ours := at[parts[i].run.ID]; ours { // a run the thread holds (the past's are rendered)
			p := &parts[i]
			if c := t.checkpoint(p.run.CheckpointID); c != nil {
				p.files = c.Files
			}
			p.render(msgs[i], items[i])
		}
	}
	if n := len(parts); n > 0 {
		h.FromRun, h.ToRun, h.FromProvider = parts[0].run.Ordinal, parts[n-1].run.Ordinal, parts[n-1].run.Provider
	}

	head := handoffHeader(spec, parts)
	closing := handoffClosing(t, spec, parts)
	const end = "\n[End of the handoff. The user's new message follows.]"
	fit(parts, limit-len(head)-len(closing)-len(end))

	var b strings.Builder
	b.Grow(limit)
	b.WriteString(head)
	var out runRanges
	for i := range parts {
		if parts[i].level == levelOut {
			out.add(parts[i].run.Ordinal)
		}
	}
	b.WriteString(leftOutLine(&out))
	for i := range parts {
		if p := &parts[i]; p.level != levelOut {
			b.WriteString(p.text[p.level])
		}
	}
	b.WriteString(closing)
	b.WriteString(end)
	h.Text = b.String()
	h.Bytes = len(h.Text)
	var cuts [levelOut + 1][]int
	for i := range parts {
		if l := max(parts[i].level, parts[i].floor); l != levelWhole {
			h.Runs[i].Shortened = true
			cuts[l] = append(cuts[l], parts[i].run.Ordinal)
		}
	}
	var said []string
	for l, how := range [...]string{levelNoOutput: "without command output", levelBrief: "cut short",
		levelStub: "cut to one line", levelOut: "left out"} {
		if len(cuts[l]) > 0 {
			said = append(said, fmt.Sprintf("%s %s", RunList(cuts[l]), how))
		}
	}
	if len(said) > 0 {
		h.Truncated, h.Cut = true, strings.Join(said, "; ")
	}
	return h
}

// fit chooses each part's level so that the parts fit in budget bytes:
// the older runs are cut first, a step at a time across all of them, the
// newest last.
func fit(parts []handoffPart, budget int) {
	size, line := 0, 0 // the parts' bytes; the left-out line's
	var out runRanges
	for i := range parts {
		if p := &parts[i]; p.level == levelOut { // left out already
			out.add(p.run.Ordinal)
			line = len(leftOutLine(&out))
		} else {
			size += len(p.text[levelWhole])
		}
	}
	set := func(i, level int) bool {
		if size+line <= budget {
			return true
		}
		p := &parts[i]
		if p.level >= level {
			return false // there already
		}
		size -= len(p.text[p.level])
		if p.level = level; level == levelOut {
			out.add(p.run.Ordinal)
			line = len(leftOutLine(&out))
		} else {
			size += len(p.text[level])
		}
		return false
	}
	n := len(parts)
	for level := levelNoOutput; level <= levelOut; level++ {
		for i := 0; i < n-1; i++ {
			if set(i, level) {
				return
			}
		}
	}
	for level := levelNoOutput; level <= levelStub && n > 0; level++ {
		if set(n-1, level) {
			return
		}
	}
}

// leftOutLine names the runs left out of the text (none: "").
func leftOutLine(out *runRanges) string {
	if out.count == 0 {
		return ""
	}
	return fmt.Sprintf("\n(%s left out: the handoff's size bound has no room for them.)\n", capitalize(out.String()))
}

// handoffHeader says what the handoff is, for whom and why.
func handoffHeader(spec handoffSpec, parts []handoffPart) string {
	var b strings.Builder
	to := oneLine(spec.To, handoffNameMax)
	fmt.Fprintf(&b, "[Baton context handoff, format %d: %s for %s]\n", HandoffVersion, spec.Strategy, to)
	var from []string
	for i := range parts {
		if p := oneLine(parts[i].run.Provider, handoffNameMax); !slices.Contains(from, p) && len(from) < 4 {
			from = append(from, p)
		}
	}
	var ords []int
	for i := range parts {
		ords = append(ords, parts[i].run.Ordinal)
	}
	covered := "no runs"
	if len(ords) > 0 {
		covered = RunList(ords) + " (on " + strings.Join(from, ", ") + ")"
	}
	switch {
	case spec.Fallback != "":
		fmt.Fprintf(&b, "Your earlier conversation of this thread could not be resumed (%s), so this one starts afresh. ",
			oneLine(spec.Fallback, handoffReasonMax))
	case spec.RollbackTo > 0:
		fmt.Fprintf(&b, "The files of this project were rolled back to how they were after run %d, and this conversation starts afresh. ",
			spec.RollbackTo)
	case spec.Strategy == HandoffDeltaSinceLastSeen:
		b.WriteString("You have worked on this thread before; it went on without you since you last saw it. ")
	default:
		b.WriteString("This thread was worked on before you joined it. ")
	}
	order := ""
	if len(ords) > 1 {
		order = ", oldest first"
	}
	fmt.Fprintf(&b, "What was asked, answered, run and changed in %s follows%s; the files in the working directory are as the last run left them.\n", covered, order)
	return b.String()
}

// handoffClosing is where the thread stands now: the newest covered run,
// the files the covered runs changed, open requests, a pending plan and
// who takes the thread next. It is at most about handoffClosingMax bytes.
func handoffClosing(t *Thread, spec handoffSpec, parts []handoffPart) string {
	var b strings.Builder
	b.WriteString("\n## Where the thread stands now\n")
	if n := len(parts); n > 0 {
		r := parts[n-1].run
		fmt.Fprintf(&b, "The last run, run %d, ended %s on %s.\n", r.Ordinal, r.Status, oneLine(r.Provider, handoffNameMax))
	}
	room := handoffClosingMax
	list := func(title string, lines []string) {
		if len(lines) == 0 {
			return
		}
		b.WriteString(title + "\n")
		for i, l := range lines {
			if room -= len(l) + 3; room < 0 {
				fmt.Fprintf(&b, "- (and %d more)\n", len(lines)-i)
				return
			}
			b.WriteString("- " + l + "\n")
		}
	}
	// Files: each path once, its changes over the covered runs summed.
	var files []FileChange
	seen := map[string]int{}
	for i := range parts {
		for _, f := range parts[i].files {
			j, ok := seen[f.Path]
			if !ok {
				seen[f.Path] = len(files)
				files = append(files, f)
				continue
			}
			g := &files[j]
			g.Additions += f.Additions
			g.Deletions += f.Deletions
			g.Binary = g.Binary || f.Binary
			if g.Kind != "added" || f.Kind == "deleted" {
				g.Kind = f.Kind
			}
		}
	}
	slices.SortFunc(files, func(a, b FileChange) int { return strings.Compare(a.Path, b.Path) })
	var lines []string
	for _, f := range files {
		lines = append(lines, fileLine(f, handoffBriefTitle))
	}
	list("Files changed in these runs:", lines)
	lines = nil
	for _, q := range t.Requests {
		if q.Status == RequestStatusPending {
			lines = append(lines, fmt.Sprintf("%s: %s", q.Kind, oneLine(q.Title, handoffBriefTitle)))
		}
	}
	list("Open requests:", lines)
	for i := len(parts) - 1; i >= 0; i-- {
		if p := &parts[i]; p.planAt > 0 {
			lines = nil
			for _, s := range p.plan {
				if !s.done {
					lines = append(lines, oneLine(s.text, handoffBriefTitle))
				}
			}
			list(fmt.Sprintf("Pending plan (from run %d), steps not done:", p.planAt), lines)
			break
		}
	}
	fmt.Fprintf(&b, "Next: you (%s) take the thread's next run.\n", oneLine(spec.To, handoffNameMax))
	return b.String()
}

// render writes the run's text at each level.
func (p *handoffPart) render(msgs []*Message, items []*TurnItem) {
	r := p.run
	title := fmt.Sprintf("\n## Run %d (%s, %s)\n", r.Ordinal, r.Status, oneLine(r.Provider, handoffNameMax))
	var trail []trailEntry
	for _, it := range items {
		switch it.Kind {
		case NodeReasoning, NodeApprovalRequest, "user_message": // the user's message is the run's
		case NodePlan:
			if steps, ok := parsePlan(it.Detail); ok {
				p.plan = steps // the newest plan of the run
			}
		default:
			trail = append(trail, newTrailEntry(it))
		}
	}
	if slices.ContainsFunc(p.plan, func(s planStep) bool { return !s.done }) {
		p.planAt = r.Ordinal
	}
	for level := levelWhole; level <= levelBrief; level++ {
		var b strings.Builder
		b.WriteString(title)
		asked, answered := p.pickMessages(msgs, level)
		p.writeMessages(&b, asked, level)
		p.writeTrail(&b, trail, level)
		p.writeFiles(&b, level)
		p.writePlan(&b, level)
		p.writeMessages(&b, answered, level)
		if n := len(msgs) - len(asked) - len(answered); n > 0 {
			fmt.Fprintf(&b, "(%d more messages left out)\n", n)
		}
		p.text[level] = b.String()
	}
	input := r.Input
	for _, m := range msgs {
		if m.ID == r.MessageID {
			input = m.Text.String()
		}
	}
	p.text[levelStub] = fmt.Sprintf("\nRun %d (%s, %s): %s (shortened)\n", r.Ordinal, r.Status,
		oneLine(r.Provider, handoffNameMax), oneLine(input, handoffStubBytes))
}

// pickMessages are the run's messages the level keeps: the user's,
// written before the trail, and the assistant's, after it. Cut short, a
// run keeps its first message and its last answer.
func (p *handoffPart) pickMessages(msgs []*Message, level int) (asked, answered []*Message) {
	if level == levelBrief {
		if len(msgs) > 0 {
			asked = msgs[:1]
		}
		for j := len(msgs) - 1; j > 0; j-- {
			if msgs[j].Role == RoleAssistant {
				return asked, msgs[j : j+1]
			}
		}
		return asked, nil
	}
	for _, m := range msgs {
		if m.Role == RoleAssistant {
			answered = append(answered, m)
		} else {
			asked = append(asked, m)
		}
	}
	return asked, answered
}

func (p *handoffPart) writeMessages(b *strings.Builder, msgs []*Message, level int) {
	for _, m := range msgs {
		text := valid(m.Text.String())
		if level == levelBrief {
			text = cut(text, handoffBriefMessage)
		}
		if m.Role == RoleAssistant {
			fmt.Fprintf(b, "Assistant: %s\n", text)
		} else {
			fmt.Fprintf(b, "User: %s\n", text)
		}
	}
}

func (p *handoffPart) writeTrail(b *strings.Builder, trail []trailEntry, level int) {
	if len(trail) == 0 {
		return
	}
	b.WriteString("Commands and tools:\n")
	for i, e := range trail {
		if level == levelBrief && i == handoffBriefItems {
			fmt.Fprintf(b, "- (and %d more)\n", len(trail)-i)
			return
		}
		max := handoffTitleMax
		if level == levelBrief {
			max = handoffBriefTitle
		}
		b.WriteString("- " + e.line(max) + "\n")
		if level == levelWhole && e.output != "" {
			b.WriteString(e.output)
		}
	}
}

func (p *handoffPart) writeFiles(b *strings.Builder, level int) {
	if len(p.files) == 0 {
		return
	}
	b.WriteString("Files changed:")
	for i, f := range p.files {
		if level == levelBrief && i == handoffBriefItems {
			fmt.Fprintf(b, " and %d more", len(p.files)-i)
			break
		}
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(" " + fileLine(f, handoffTitleMax))
	}
	b.WriteString("\n")
}

func (p *handoffPart) writePlan(b *strings.Builder, level int) {
	if p.planAt == 0 {
		return
	}
	done := 0
	for _, s := range p.plan {
		if s.done {
			done++
		}
	}
	fmt.Fprintf(b, "Plan (%d of %d steps done):\n", done, len(p.plan))
	shown := 0
	for _, s := range p.plan {
		if level == levelBrief && s.done {
			continue
		}
		if level == levelBrief && shown == handoffBriefItems {
			b.WriteString("- (and more)\n")
			return
		}
		shown++
		mark := "[ ]"
		if s.done {
			mark = "[x]"
		}
		max := handoffTitleMax
		if level == levelBrief {
			max = handoffBriefTitle
		}
		b.WriteString("- " + mark + " " + oneLine(s.text, max) + "\n")
	}
}

// fileLine is a changed file: path, kind and lines added and deleted.
func fileLine(f FileChange, max int) string {
	if f.Binary {
		return fmt.Sprintf("%s (%s, binary)", oneLine(f.Path, max), f.Kind)
	}
	return fmt.Sprintf("%s (%s, +%d/-%d)", oneLine(f.Path, max), f.Kind, f.Additions, f.Deletions)
}

// trailEntry is one step of a run's trail: a command, a tool call, a file
// change.
type trailEntry struct {
	kind   NodeKind
	title  string
	status ItemStatus
	exit   *int
	output string // the output's tail, indented, lines ending in "\n"
}

// itemDetail is what the normalizers keep of a command (codex: exitCode,
// aggregatedOutput; cursor: exitCode, stdout, stderr; claude and opencode:
// output).
type itemDetail struct {
	ExitCode         *int            `json:"exitCode"`
	AggregatedOutput string          `json:"aggregatedOutput"`
	Output           json.RawMessage `json:"output"`
	Stdout           string          `json:"stdout"`
	Stderr           string          `json:"stderr"`
}

func newTrailEntry(it *TurnItem) trailEntry {
	e := trailEntry{kind: it.Kind, title: it.Title, status: it.Status}
	if it.Kind != "command_execution" {
		return e
	}
	var d itemDetail
	_ = json.Unmarshal(it.Detail, &d) // a detail of another shape has none of these
	e.exit = d.ExitCode
	out := it.Text.String()
	if out == "" {
		out = d.AggregatedOutput
	}
	if s := ""; out == "" && json.Unmarshal(d.Output, &s) == nil {
		out = s
	}
	if out == "" {
		out = d.Stdout + d.Stderr
	}
	e.output = outputTail(out)
	return e
}

// line is the entry as one line of at most about max bytes.
func (e trailEntry) line(max int) string {
	var s string
	switch e.kind {
	case "command_execution":
		s = "$ " + oneLine(e.title, max)
		if e.exit != nil {
			s += " (exit " + strconv.Itoa(*e.exit) + ")"
		}
	case "file_change":
		s = "edited " + oneLine(e.title, max)
	case NodeToolCall:
		s = "tool: " + oneLine(e.title, max)
	default:
		s = string(e.kind) + ": " + oneLine(e.title, max)
	}
	if e.status != StatusCompleted && e.status != "" && (e.exit == nil || e.status != StatusFailed) {
		s += " [" + string(e.status) + "]"
	}
	return s
}

// outputTail is the end of a command's output: its last lines, at most
// handoffOutputBytes, indented.
func outputTail(s string) string {
	s = strings.TrimRight(valid(s), "\n")
	if s == "" {
		return ""
	}
	cutAt := 0
	if len(s) > handoffOutputBytes {
		cutAt = len(s) - handoffOutputBytes
		for !utf8.RuneStart(s[cutAt]) {
			cutAt++
		}
	}
	tail := s[cutAt:]
	lines := strings.Split(tail, "\n")
	if len(lines) > handoffOutputLines {
		lines = lines[len(lines)-handoffOutputLines:]
		cutAt = 1
	}
	var b strings.Builder
	if cutAt > 0 {
		b.WriteString("    [... output cut; its end:]\n")
	}
	for _, l := range lines {
		b.WriteString("    " + l + "\n")
	}
	return b.String()
}

// planStep is one step of a plan.
type planStep struct {
	text string
	done bool
}

// parsePlan reads the steps of a plan item's detail: a list of entries
// (ACP: content, status) or an object holding one (codex: plan, with
// step, status).
func parsePlan(detail json.RawMessage) ([]planStep, bool) {
	type entry struct {
		Step, Content, Text, Title, Status string
	}
	var entries []entry
	if json.Unmarshal(detail, &entries) != nil {
		var o struct {
			Plan, Entries, Steps, Todos []entry
		}
		if json.Unmarshal(detail, &o) != nil {
			return nil, false
		}
		entries = slices.Concat(o.Plan, o.Entries, o.Steps, o.Todos)
	}
	if len(entries) == 0 {
		return nil, false
	}
	steps := make([]planStep, len(entries))
	for i, e := range entries {
		steps[i] = planStep{text: cmp.Or(e.Step, e.Content, e.Text, e.Title),
			done: e.Status == "completed" || e.Status == "done" || e.Status == "complete"}
	}
	return steps, true
}

// RunList names runs by their ordinals, ascending, as people write them:
// "run 4", "runs 1-3, 5"; more than four ranges are named by their count
// and span; none, "no runs".
func RunList(ords []int) string {
	if len(ords) == 0 {
		return "no runs"
	}
	var rs runRanges
	for _, o := range ords {
		rs.add(o)
	}
	return rs.String()
}

// runRanges are ascending ordinals kept as ranges, each added in constant
// time: the first five ranges, the count and the last.
type runRanges struct {
	ranges      [][2]int // at most five
	count, last int
}

func (rs *runRanges) add(o int) {
	switch n := len(rs.ranges); {
	case n > 0 && rs.ranges[n-1][1] == o-1:
		rs.ranges[n-1][1] = o
	case n < 5:
		rs.ranges = append(rs.ranges, [2]int{o, o})
	}
	rs.count, rs.last = rs.count+1, o
}

func (rs *runRanges) String() string {
	switch {
	case rs.count == 1:
		return "run " + strconv.Itoa(rs.last)
	case len(rs.ranges) > 4:
		return fmt.Sprintf("%d runs from %d to %d", rs.count, rs.ranges[0][0], rs.last)
	}
	var b strings.Builder
	b.WriteString("runs ")
	for i, r := range rs.ranges {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.Itoa(r[0]))
		if r[1] > r[0] {
			b.WriteString("-" + strconv.Itoa(r[1]))
		}
	}
	return b.String()
}

func capitalize(s string) string { return strings.ToUpper(s[:1]) + s[1:] }

// valid is s with any bytes that are not UTF-8 replaced.
func valid(s string) string { return strings.ToValidUTF8(s, "\uFFFD") }

// oneLine is s on one line, cut to at most about n bytes.
func oneLine(s string, n int) string {
	if len(s) > 4*n { // the rest would be cut anyway; flattening it costs
		i := 4 * n
		for !utf8.RuneStart(s[i]) {
			i--
		}
		s = s[:i]
	}
	s = strings.Join(strings.Fields(valid(s)), " ")
	return cut(s, n)
}

// cut shortens s to at most n bytes on a character boundary, marking the cut.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + " [...]"
}
