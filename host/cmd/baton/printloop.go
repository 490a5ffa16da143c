package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/baton-run/baton/host/internal/domain"
)

// What the printer says of unattended work: limits, waits, checks and the
// loop. Instants are the local clock's HH:MM (with the date when not
// today) and how far they are from the printer's now.

// loopEvent: the continuation policy, limits, waits, checks and the
// loop's end.
func (p *printer) loopEvent(pl domain.Payload) bool {
	switch e := pl.(type) {
	case domain.PolicySet:
		p.line("⚙ policy: %s", policyLine(e.Policy))
	case domain.LimitReached:
		p.line("  ⏸ %s", p.limitLine(e))
	case domain.WaitArmed:
		p.line("⏳ %s", p.waitLine(e.Wait))
	case domain.WaitEnded:
		p.line("⏳ %s", p.waitEndedLine(e))
	case domain.CheckRequested:
		p.line("◇ check `%s` after run %d", oneLine(e.Command, 80), p.ordinals[e.RunID])
	case domain.CheckRecorded:
		mark := "✖"
		if e.Passed() {
			mark = "✔"
		}
		for i, l := range checkLine(e.CheckResult) {
			if i == 0 {
				l = mark + " " + l
			}
			p.line("%s", l)
		}
	case domain.LoopEnded:
		p.line("● %s", loopEndedLine(e))
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
func (p *printer) limitLine(e domain.LimitReached) string {
	s := e.Provider + " hit its " + domain.DescribeLimit(e.Limit, "")
	if e.Limit.ResetsAt.IsZero() {
		s += ": no reset time given"
	} else {
		s += ": resets " + p.when(e.Limit.ResetsAt)
	}
	return s // the provider's message is its diagnostic's
}

// waitLine is what an armed wait says: "waiting for codex usage limit:
// resets 14:05 (in 2h13m), probe 2 of at most 8"; for a probe of a limit
// with no reset still to come, "waiting for codex rate limit: probe 3 of
// at most 8 at 14:20 (in 20m)"; for a return, "returning to codex at 14:05
// (in 2h13m), after its usage limit resets".
func (p *printer) waitLine(w domain.Wait) string {
	if w.Kind == domain.WaitReturn {
		return "returning to " + w.Provider + " at " + p.when(w.At) + ", after its " + domain.DescribeLimit(w.Limit, "") + " resets"
	}
	s := "waiting for " + domain.DescribeLimit(w.Limit, w.Provider) + ": "
	probe := fmt.Sprintf("probe %d of at most %d", w.Probe, w.MaxProbes)
	// A wait for a reset fires at it (plus a jitter); else it is a probe.
	if r := w.Limit.ResetsAt; !r.IsZero() && !w.At.Before(r) && w.At.Sub(r) <= domain.MaxJitter {
		return s + "resets " + p.when(r) + ", " + probe
	}
	return s + probe + " at " + p.when(w.At)
}

// waitEndedLine is what the end of a wait says.
func (p *printer) waitEndedLine(e domain.WaitEnded) string {
	w, known := p.waits[e.WaitID]
	what := "the wait"
	if known && w.Kind == domain.WaitReturn {
		what = "the wait to return to " + w.Provider
	} else if known {
		what = "the wait for " + domain.DescribeLimit(w.Limit, w.Provider)
	}
	switch {
	case e.Outcome == domain.WaitFired && known && w.Kind == domain.WaitReturn:
		return what + " is over: returning"
	case e.Outcome == domain.WaitFired && known:
		return fmt.Sprintf("%s is over: continuing run %d", what, p.ordinals[w.RunID])
	case e.Outcome == domain.WaitFired:
		return what + " is over"
	case e.Reason != "" && e.Reason != "the wait was cancelled":
		return what + " was cancelled: " + oneLine(e.Reason, 100)
	}
	return what + " was cancelled"
}

// checkLine is what a check found: "check `go test ./...` failed (exit
// 1); last lines:" and then its last few lines.
func checkLine(c domain.CheckResult) []string {
	s := "check `" + oneLine(c.Command, 80) + "` "
	switch {
	case c.Passed():
		return []string{s + "passed"}
	case c.Error != "":
		s += "could not run: " + oneLine(c.Error, 100)
	case c.TimedOut:
		s += "timed out"
	default:
		s += fmt.Sprintf("failed (exit %d)", c.ExitCode)
	}
	lines := strings.Split(strings.TrimRight(c.Output, "\n"), "\n")
	if strings.TrimSpace(c.Output) == "" {
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
func loopEndedLine(e domain.LoopEnded) string {
	word := loopWords[e.Status]
	if word == "" {
		word = string(e.Status)
	}
	if e.Reason == "" {
		return "loop " + word
	}
	return "loop " + word + ": " + oneLine(e.Reason, 120)
}

// policyLine is a continuation policy on one line.
func policyLine(pol domain.ContinuationPolicy) string {
	if pol.Off() {
		return "off"
	}
	p := pol.WithDefaults()
	var parts []string
	limits := fmt.Sprintf("at most %d waits, %s in all", p.MaxProbes, fmtDuration(p.MaxWait))
	switch p.OnLimit {
	case domain.OnLimitWait:
		parts = append(parts, "on a limit: wait ("+limits+")")
	case domain.OnLimitSwitch:
		s := "on a limit: switch to " + p.SwitchTo + modelNote(p.SwitchModel)
		if p.Return {
			s += ", return after the reset (" + limits + ")"
		}
		parts = append(parts, s)
	}
	if p.Until != "" {
		parts = append(parts, "until `"+oneLine(p.Until, 80)+"` passes (timeout "+fmtDuration(p.CheckTimeout)+")")
	}
	var budgets []string
	if p.MaxRuns > 0 {
		budgets = append(budgets, plural(p.MaxRuns, "run"))
	}
	if p.MaxDuration > 0 {
		budgets = append(budgets, fmtDuration(p.MaxDuration))
	}
	if p.MaxTokens > 0 {
		budgets = append(budgets, fmt.Sprintf("%d tokens", p.MaxTokens))
	}
	if len(budgets) > 0 {
		parts = append(parts, "at most "+strings.Join(budgets, ", "))
	}
	return strings.Join(parts, "; ")
}

// loopLine is where a loop is: its status (and why it ended), and what it
// has used of its budgets.
func loopLine(l domain.Loop, now time.Time, loc *time.Location) string {
	s := string(l.Status)
	if l.Reason != "" {
		s += " (" + oneLine(l.Reason, 100) + ")"
	}
	runs := plural(l.Runs, "run")
	if l.Policy.MaxRuns > 0 {
		runs = fmt.Sprintf("%d of %d runs", l.Runs, l.Policy.MaxRuns)
	}
	tokens := fmt.Sprintf("%d tokens", l.Tokens)
	if l.Policy.MaxTokens > 0 {
		tokens = fmt.Sprintf("%d of %d tokens", l.Tokens, l.Policy.MaxTokens)
	}
	s += "; " + runs + ", " + tokens + " since " + clockTime(l.Since, now, loc)
	if l.Policy.MaxDuration > 0 {
		s += " (until " + clockTime(l.Since.Add(l.Policy.MaxDuration), now, loc) + ")"
	}
	if l.CheckPending {
		s += "; a check is running"
	}
	return s
}
