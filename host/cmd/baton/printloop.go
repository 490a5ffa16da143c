package main

import (
	"cmp"
	"fmt"
	"strings"
	"time"

	batonv1 "github.com/baton-run/baton/host/api/baton/v1"
	"github.com/baton-run/baton/host/internal/domain"
)

// What the printer says of unattended work: limits, waits, checks and the
// loop. Instants are the local clock's HH:MM (with the date when not
// today) and how far they are from the printer's now.

// loopEvent: the continuation policy, limits, waits, checks and the
// loop's end.
func (p *printer) loopEvent(ev *batonv1.Event) bool {
	switch e := ev.GetPayload().(type) {
	case *batonv1.Event_ThreadPolicySet:
		p.line("⚙ policy: %s", policyLine(e.ThreadPolicySet.GetPolicy()))
	case *batonv1.Event_RunLimitReached:
		p.line("  ⏸ %s", p.limitLine(e.RunLimitReached))
	case *batonv1.Event_WaitArmed:
		p.line("⏳ %s", p.waitLine(e.WaitArmed))
	case *batonv1.Event_WaitEnded:
		p.line("⏳ %s", p.waitEndedLine(e.WaitEnded))
	case *batonv1.Event_LoopCheckRequested:
		c := e.LoopCheckRequested
		p.line("◇ check `%s` after run %d", oneLine(c.GetCommand(), 80), p.ordinals[c.GetRunId()])
	case *batonv1.Event_LoopCheckRecorded:
		mark := "✖"
		if e.LoopCheckRecorded.GetPassed() {
			mark = "✔"
		}
		for i, l := range checkLine(e.LoopCheckRecorded) {
			if i == 0 {
				l = mark + " " + l
			}
			p.line("%s", l)
		}
	case *batonv1.Event_LoopEnded:
		p.line("● %s", loopEndedLine(e.LoopEnded))
	default:
		return false
	}
	return true
}

// checkLines is how many of a failed check's last lines are shown.
const checkLines = 5

// clockTime is an instant as HH:MM in loc, with the date when it is not
// the day of now.
func clockTime(t, now time.Time, loc *time.Location) string {
	t, now = t.In(loc), now.In(loc)
	if y, m, d := t.Date(); y == now.Year() && m == now.Month() && d == now.Day() {
		return t.Format("15:04")
	}
	if t.Year() != now.Year() {
		return t.Format("Jan 2 2006 15:04")
	}
	return t.Format("Jan 2 15:04")
}

// fmtDuration is a duration as people say it: 45s, 20m, 2h13m, 3d4h
// (rounded to the minute from a minute up).
func fmtDuration(d time.Duration) string {
	if d < time.Minute {
		return fmt.Sprintf("%ds", int64(d.Round(time.Second)/time.Second))
	}
	m := int64(d.Round(time.Minute) / time.Minute)
	days, hours, mins := m/(24*60), m/60%24, m%60
	var b strings.Builder
	if days > 0 {
		fmt.Fprintf(&b, "%dd", days)
	}
	if hours > 0 {
		fmt.Fprintf(&b, "%dh", hours)
	}
	if mins > 0 && days == 0 {
		fmt.Fprintf(&b, "%dm", mins)
	}
	if b.Len() == 0 {
		return "0m"
	}
	return b.String()
}

// when is an instant and how far it is: "14:05 (in 2h13m)".
func (p *printer) when(t time.Time) string {
	now := p.now()
	s := clockTime(t, now, p.loc)
	if d := t.Sub(now); d > 0 {
		return s + " (in " + fmtDuration(d) + ")"
	} else if d < -time.Minute {
		return s + " (" + fmtDuration(-d) + " ago)"
	}
	return s + " (now)"
}

// limitLine is what a run that hit a limit says: "codex hit its usage
// limit (five_hour): resets 14:05 (in 2h13m)".
func (p *printer) limitLine(e *batonv1.LimitReached) string {
	s := e.GetProvider() + " hit its " + describeLimit(e.GetLimit(), "")
	if resets := instant(e.GetLimit().GetResetsAt()); resets.IsZero() {
		s += ": no reset time given"
	} else {
		s += ": resets " + p.when(resets)
	}
	return s // the provider's message is its diagnostic's
}

// waitLine is what an armed wait says: "waiting for codex usage limit:
// resets 14:05 (in 2h13m), probe 2 of at most 8"; for a probe of a limit
// with no reset still to come, "waiting for codex rate limit: probe 3 of
// at most 8 at 14:20 (in 20m)"; for a return, "returning to codex at 14:05
// (in 2h13m), after its usage limit resets".
func (p *printer) waitLine(w *batonv1.Wait) string {
	at := instant(w.GetAt())
	if domain.WaitKind(w.GetKind()) == domain.WaitReturn {
		return "returning to " + w.GetProvider() + " at " + p.when(at) + ", after its " + describeLimit(w.GetLimit(), "") + " resets"
	}
	s := "waiting for " + describeLimit(w.GetLimit(), w.GetProvider()) + ": "
	probe := fmt.Sprintf("probe %d of at most %d", w.GetProbe(), w.GetMaxProbes())
	if w.GetAtReset() {
		return s + "resets " + p.when(instant(w.GetLimit().GetResetsAt())) + ", " + probe
	}
	return s + probe + " at " + p.when(at)
}

// waitEndedLine is what the end of a wait says.
func (p *printer) waitEndedLine(e *batonv1.WaitEnded) string {
	w, known := p.waits[e.GetWaitId()]
	isReturn := known && domain.WaitKind(w.GetKind()) == domain.WaitReturn
	what := "the wait"
	if isReturn {
		what = "the wait to return to " + w.GetProvider()
	} else if known {
		what = "the wait for " + describeLimit(w.GetLimit(), w.GetProvider())
	}
	fired := domain.WaitOutcome(e.GetOutcome()) == domain.WaitFired
	switch {
	case fired && isReturn:
		return what + " is over: returning"
	case fired && known:
		return fmt.Sprintf("%s is over: continuing run %d", what, p.ordinals[w.GetRunId()])
	case fired:
		return what + " is over"
	case e.GetReason() != "" && e.GetReason() != "the wait was cancelled":
		return what + " was cancelled: " + oneLine(e.GetReason(), 100)
	}
	return what + " was cancelled"
}

// checkLine is what a check found: "check `go test ./...` failed (exit
// 1); last lines:" and then its last few lines.
func checkLine(c *batonv1.CheckResult) []string {
	s := "check `" + oneLine(c.GetCommand(), 80) + "` "
	switch {
	case c.GetPassed():
		return []string{s + "passed"}
	case c.GetError() != "":
		s += "could not run: " + oneLine(c.GetError(), 100)
	case c.GetTimedOut():
		s += "timed out"
	default:
		s += fmt.Sprintf("failed (exit %d)", c.GetExitCode())
	}
	lines := strings.Split(strings.TrimRight(c.GetOutput(), "\n"), "\n")
	if strings.TrimSpace(c.GetOutput()) == "" {
		return []string{s}
	}
	if len(lines) > checkLines {
		lines = lines[len(lines)-checkLines:]
	}
	out := []string{s + "; last lines:"}
	for _, l := range lines {
		out = append(out, "    │ "+oneLine(l, 160))
	}
	return out
}

// loopWords are the loop's statuses as its end says them.
var loopWords = map[domain.LoopStatus]string{
	domain.LoopDone: "done", domain.LoopBlocked: "blocked", domain.LoopBudget: "stopped", domain.LoopStopped: "stopped",
}

// loopEndedLine is what the end of a loop says: "loop done: the check
// passed", "loop stopped: max runs (5) reached".
func loopEndedLine(e *batonv1.LoopEnded) string {
	word := cmp.Or(loopWords[domain.LoopStatus(e.GetStatus())], e.GetStatus())
	if e.GetReason() == "" {
		return "loop " + word
	}
	return "loop " + word + ": " + oneLine(e.GetReason(), 120)
}

// policyLine is a continuation policy on one line, as the host applies
// it.
func policyLine(pol *batonv1.ContinuationPolicy) string {
	p := pol.GetApplied()
	if p == nil {
		return "off"
	}
	var parts []string
	limits := fmt.Sprintf("at most %d waits, %s in all", p.GetMaxProbes(), fmtDuration(durationOf(p.GetMaxWait())))
	switch domain.OnLimit(p.GetOnLimit()) {
	case domain.OnLimitWait:
		parts = append(parts, "on a limit: wait ("+limits+")")
	case domain.OnLimitSwitch:
		s := "on a limit: switch to " + p.GetSwitchTo() + modelNote(p.GetSwitchModel())
		if p.GetReturn() {
			s += ", return after the reset (" + limits + ")"
		}
		parts = append(parts, s)
	}
	if p.GetUntil() != "" {
		parts = append(parts, "until `"+oneLine(p.GetUntil(), 80)+"` passes (timeout "+fmtDuration(durationOf(p.GetCheckTimeout()))+")")
	}
	var budgets []string
	if p.GetMaxRuns() > 0 {
		budgets = append(budgets, plural(int(p.GetMaxRuns()), "run"))
	}
	if d := durationOf(p.GetMaxDuration()); d > 0 {
		budgets = append(budgets, fmtDuration(d))
	}
	if p.GetMaxTokens() > 0 {
		budgets = append(budgets, fmt.Sprintf("%d tokens", p.GetMaxTokens()))
	}
	if len(budgets) > 0 {
		parts = append(parts, "at most "+strings.Join(budgets, ", "))
	}
	return strings.Join(parts, "; ")
}

// loopLine is where a loop is: its status (and why it ended), and what it
// has used of its budgets.
func loopLine(l *batonv1.Loop, now time.Time, loc *time.Location) string {
	s := l.GetStatus()
	if l.GetReason() != "" {
		s += " (" + oneLine(l.GetReason(), 100) + ")"
	}
	pol := l.GetPolicy()
	runs := plural(int(l.GetRuns()), "run")
	if pol.GetMaxRuns() > 0 {
		runs = fmt.Sprintf("%d of %d runs", l.GetRuns(), pol.GetMaxRuns())
	}
	tokens := fmt.Sprintf("%d tokens", l.GetTokens())
	if pol.GetMaxTokens() > 0 {
		tokens = fmt.Sprintf("%d of %d tokens", l.GetTokens(), pol.GetMaxTokens())
	}
	since := instant(l.GetSince())
	s += "; " + runs + ", " + tokens + " since " + clockTime(since, now, loc)
	if d := durationOf(pol.GetMaxDuration()); d > 0 {
		s += " (until " + clockTime(since.Add(d), now, loc) + ")"
	}
	if l.GetCheckPending() {
		s += "; a check is running"
	}
	return s
}
