package domain

import (
	"cmp"
	"fmt"
	"strings"
	"time"
)

// The continuation loop, decided. A run whose provider turn ends on a
// limit ends blocked, unless the thread's policy continues it: OnLimitWait
// arms a wait (the run is waiting, its attempt ended) that FireWait turns
// into a usage_limit_continuation attempt on the same provider thread;
// OnLimitSwitch moves the run to another provider at once, with a
// handoff, and may arm a return. After each run ends, the loop counts it
// against its budgets and, with an --until check, asks for the check; a
// check that fails queues the next run. The instants come from policy.go.

// policy is the thread's continuation policy (zero: none).
func (t *Thread) policy() ContinuationPolicy {
	if t.Loop == nil {
		return ContinuationPolicy{}
	}
	return t.Loop.Policy
}

// loopW is the thread's loop, to change: a copy of its own (a scratch
// thread shares the loop it was copied from).
func (t *Thread) loopW() *Loop {
	var l Loop
	if t.Loop != nil {
		l = *t.Loop
	}
	t.Loop = &l
	return t.Loop
}

// loopActive says whether the thread's loop goes on by itself.
func (t *Thread) loopActive() bool { return t.Loop != nil && t.Loop.Status == LoopActive }

func decideSetPolicy(t *Thread, p SetPolicy, d *Decision) error {
	if err := p.Policy.Validate(); err != nil {
		return fmt.Errorf("%w: policy: %w", ErrInvalid, err)
	}
	pol := p.Policy
	if !pol.Off() {
		pol = pol.WithDefaults()
	}
	if pol.OnLimit == OnLimitSwitch && len(pol.SwitchCommand.Argv) == 0 && t.binding(pol.SwitchTo) == nil {
		return fmt.Errorf("%w: %w: on-limit switch:%s: thread %s has not used %s, so there is no command of it to keep",
			ErrInvalid, ErrNoProviderCommand, pol.SwitchTo, t.ID, pol.SwitchTo)
	}
	if t.Loop == nil && pol.Off() {
		return nil // nothing set, nothing to turn off
	}
	d.emit(PolicySet{Policy: pol})
	return nil
}

// limitReached ends the active attempt of run r on a provider limit and
// does what the policy says: wait, switch, or end the run blocked.
func limitReached(t *Thread, r *Run, l Limit, env Env, d *Decision) {
	runID, attemptID, provider := r.ID, r.ActiveAttempt, r.Provider
	d.emit(LimitReached{RunID: runID, AttemptID: attemptID, Provider: provider, Limit: l})
	pol := t.policy()
	switch {
	case pol.OnLimit == OnLimitWait:
		armContinue(t, runID, l, provider, env, d)
		return
	case pol.OnLimit == OnLimitSwitch && pol.SwitchTo != provider:
		switchOnLimit(t, runID, l, provider, env, d)
		return
	}
	endRun(t, runID, RunStatusBlocked, "limit", &Failure{Code: "limit", Message: DescribeLimit(l, provider) + limitWords(l)}, env, d)
}

// limitWords is what a provider said of a limit, for a failure message.
func limitWords(l Limit) string {
	if l.Message == "" {
		return ""
	}
	return ": " + l.Message
}

// armContinue arms the run's next wait, or ends the run when its waits
// are spent: probes, the wait budget, or the loop's hours.
func armContinue(t *Thread, runID string, l Limit, provider string, env Env, d *Decision) {
	pol, r := t.policy(), t.run(runID)
	n, since := r.Waits+1, r.WaitSince
	if n == 1 {
		since = env.Now
	}
	what := DescribeLimit(l, provider)
	if n > pol.MaxProbes {
		endRun(t, runID, RunStatusFailed, "", &Failure{Code: "limit_wait_exhausted",
			Message: fmt.Sprintf("gave up on the %s after %d waits (at most %d)", what, r.Waits, pol.MaxProbes)}, env, d)
		return
	}
	id := env.NewID("wait")
	at := pol.WaitInstant(l, n, id, env.Now)
	if end := since.Add(pol.MaxWait); at.After(end) {
		endRun(t, runID, RunStatusFailed, "", &Failure{Code: "limit_wait_budget",
			Message: fmt.Sprintf("the %s lifts at %s, past the wait budget (%s from %s)", what, stamp(at), pol.MaxWait, stamp(since))}, env, d)
		return
	}
	if why := loopTimeSpent(t.Loop, at); why != "" {
		d.emit(LoopEnded{Status: LoopBudget, Reason: why})
		endRun(t, runID, RunStatusBlocked, "limit", &Failure{Code: "loop_budget", Message: what + ": " + why}, env, d)
		return
	}
	closeAttempt(t, runID, RunStatusBlocked, d)
	d.emit(AttemptEnded{RunID: runID, AttemptID: r.ActiveAttempt, Status: RunStatusBlocked})
	d.emit(WaitArmed{Wait: Wait{ID: id, Kind: WaitContinue, RunID: runID, Provider: provider, Limit: l, At: at,
		Probe: n, MaxProbes: pol.MaxProbes, Since: since, ArmedAt: env.Now}})
}

// switchOnLimit moves the run to the policy's provider: the attempt ends
// blocked, the thread switches, and a continuation attempt carries the
// run's input (and a handoff of the runs before it) to the new provider;
// with Return, a wait brings the thread back when the limit lifts.
func switchOnLimit(t *Thread, runID string, l Limit, from string, env Env, d *Decision) {
	pol, r := t.policy(), t.run(runID)
	input, attemptID := r.Input, r.ActiveAttempt
	closeAttempt(t, runID, RunStatusBlocked, d)
	d.emit(AttemptEnded{RunID: runID, AttemptID: attemptID, Status: RunStatusBlocked})
	// Validated when the policy was set: the binding or the command is there.
	_ = decideSwitchProvider(t, SwitchProvider{Provider: pol.SwitchTo, Model: pol.SwitchModel, ProviderCommand: pol.SwitchCommand}, env, d)
	text := fmt.Sprintf("(%s stopped at its %s while working on this; the files in the working directory may hold its partial work.)\n\n%s",
		from, DescribeLimit(l, ""), withSteering(input, r.PendingRestart))
	startAttempt(t, runID, text, AttemptUsageLimitContinuation, env, d)
	if pol.Return {
		id := env.NewID("wait")
		d.emit(WaitArmed{Wait: Wait{ID: id, Kind: WaitReturn, Provider: from, Limit: l, At: pol.WaitInstant(l, 1, id, env.Now),
			Probe: 1, MaxProbes: 1, Since: env.Now, ArmedAt: env.Now}})
	}
}

func decideFireWait(t *Thread, p FireWait, env Env, d *Decision) error {
	w := t.wait(p.WaitID)
	if w == nil {
		return nil // fired or cancelled before: a wait fires once
	}
	wait := *w
	d.emit(WaitEnded{WaitID: wait.ID, Outcome: WaitFired})
	switch wait.Kind {
	case WaitReturn:
		// Validated when it was armed: the thread has used the provider.
		_ = decideSwitchProvider(t, SwitchProvider{Provider: wait.Provider}, env, d)
	default:
		r := t.run(wait.RunID)
		text := withSteering(t.policy().WithDefaults().ContinueText, r.PendingRestart)
		startAttempt(t, r.ID, text, AttemptUsageLimitContinuation, env, d)
	}
	return nil
}

// withSteering is a replacement attempt's input: text (a continuation's,
// or none), then the steering messages that were waiting for the attempt
// before it to stop, a blank line between each.
func withSteering(text string, pending []SteeringMessage) string {
	parts := make([]string, 0, len(pending)+1)
	if text != "" {
		parts = append(parts, text)
	}
	for _, m := range pending {
		parts = append(parts, m.Text)
	}
	return strings.Join(parts, "\n\n")
}

// wait is the armed wait with this id.
func (t *Thread) wait(id string) *Wait {
	if l := t.Loop; l != nil {
		for _, w := range []*Wait{l.Wait, l.Return} {
			if w != nil && w.ID == id {
				return w
			}
		}
	}
	return nil
}

// cancelWait ends a waiting run: its wait is cancelled and the run ends
// blocked (its attempt ended when the wait was armed).
func cancelWait(t *Thread, r *Run, reason string, env Env, d *Decision) {
	runID, attemptID, what := r.ID, r.ActiveAttempt, DescribeLimit(*r.Limit, r.Provider)
	d.emit(WaitEnded{WaitID: r.WaitID, Outcome: WaitCancelled, Reason: reason})
	if t.loopActive() {
		d.emit(LoopEnded{Status: LoopStopped, Reason: reason})
	}
	out := RunOutcome{AttemptID: attemptID, Status: RunStatusBlocked, StopReason: "limit",
		Failure: &Failure{Code: "limit", Message: what + ": " + reason}}
	d.emit(RunCompleting{RunID: runID, RunOutcome: out})
	requestCheckpoint(t, runID, "", env, d)
}

// loopAfterRun is the loop's step after a run ended: count it, end the
// loop when the run says so or a budget is spent, or ask for the check.
func loopAfterRun(t *Thread, runID string, env Env, d *Decision) {
	if !t.loopActive() {
		return
	}
	r := t.run(runID)
	switch {
	case r.Status == RunStatusCompleted:
	case r.Failure != nil && r.Failure.Code == FailureStalled:
		// A provider that went silent is a fault of the moment, as a
		// limit is: the loop goes on (its check, if it has one, says
		// whether the work is done), and the next run opens a new session.
	default:
		why := fmt.Sprintf("run %d ended %s", r.Ordinal, r.Status)
		if r.Failure != nil {
			why += ": " + r.Failure.Message
		}
		status := LoopStopped
		if r.Status == RunStatusBlocked {
			status = LoopBlocked
		}
		d.emit(LoopEnded{Status: status, Reason: why})
		return
	}
	if line := blockedLine(t, runID); line != "" {
		d.emit(LoopEnded{Status: LoopBlocked, Reason: "the agent said it is blocked: " + line})
		return
	}
	pol := t.Loop.Policy
	if pol.Until == "" {
		if why := loopSpent(t.Loop, env.Now); why != "" {
			d.emit(LoopEnded{Status: LoopBudget, Reason: why})
		}
		return
	}
	d.emit(CheckRequested{RunID: runID, Command: pol.Until})
	d.effect(RunCheck{EffectHead: EffectHead{ThreadID: t.ID}, RunID: runID, Command: pol.Until, Timeout: pol.CheckTimeout})
}

// blockedLine is the line of the run's answer that starts with the
// BlockedMarker, without it ("": none).
func blockedLine(t *Thread, runID string) string {
	// The run's messages come after its user message: walking back from
	// the newest costs the run's, not the thread's history.
	r := t.run(runID)
	for i := len(t.Messages) - 1; i >= 0 && t.Messages[i].ID != r.MessageID; i-- {
		m := t.Messages[i]
		if m.RunID != runID || m.Role != RoleAssistant {
			continue
		}
		for line := range strings.Lines(m.Text.String()) {
			if rest, ok := strings.CutPrefix(strings.TrimSpace(line), BlockedMarker); ok {
				return cmp.Or(strings.TrimSpace(rest), "(no reason given)")
			}
		}
	}
	return ""
}

func decideRecordCheck(t *Thread, p RecordCheck, env Env, d *Decision) error {
	if t.Loop == nil || !t.Loop.CheckPending {
		return nil // recorded before
	}
	if t.run(p.RunID) == nil {
		return fmt.Errorf("%w: run %q", ErrNotFound, p.RunID)
	}
	res := p.CheckResult
	res.At = env.Now
	d.emit(CheckRecorded{CheckResult: res})
	switch {
	case !t.loopActive():
		// The loop ended while the check ran (an interrupt, a new policy).
	case res.Passed():
		d.emit(LoopEnded{Status: LoopDone, Reason: "the check passed"})
	default:
		if why := loopSpent(t.Loop, env.Now); why != "" {
			d.emit(LoopEnded{Status: LoopBudget, Reason: why})
			break
		}
		queueRun(t, env.NewID("msg"), checkMessage(res), t.lastRunMCP(), env, d) // the loop's runs keep its servers
	}
	startNextQueued(t, env, d)
	return nil
}

// checkMessage is the next run's message after a check that did not pass.
func checkMessage(c CheckResult) string {
	var b strings.Builder
	switch {
	case c.TimedOut:
		fmt.Fprintf(&b, "The check `%s` did not finish in time.", c.Command)
	case c.Error != "":
		fmt.Fprintf(&b, "The check `%s` could not run: %s.", c.Command, c.Error)
	default:
		fmt.Fprintf(&b, "The check `%s` did not pass (exit %d).", c.Command, c.ExitCode)
	}
	if out := strings.TrimRight(c.Output, "\n"); out != "" {
		b.WriteString(" The end of its output:\n\n```\n" + out + "\n```\n")
	}
	b.WriteString("\nContinue the work until the check passes. If you cannot go on without a person, " +
		"start a line with " + BlockedMarker + " and say why.")
	return b.String()
}

// loopSpent says which budget of the loop is spent at now ("": none).
func loopSpent(l *Loop, now time.Time) string {
	p := l.Policy
	switch {
	case p.MaxRuns > 0 && l.Runs >= p.MaxRuns:
		return fmt.Sprintf("max runs (%d) reached", p.MaxRuns)
	case p.MaxTokens > 0 && l.Tokens >= p.MaxTokens:
		return fmt.Sprintf("max tokens (%d) reached: %d used", p.MaxTokens, l.Tokens)
	}
	return loopTimeSpent(l, now)
}

// loopTimeSpent says whether the loop's hours end before at ("": no).
func loopTimeSpent(l *Loop, at time.Time) string {
	if l == nil || l.Status != LoopActive || l.Policy.MaxDuration == 0 {
		return ""
	}
	if end := l.Since.Add(l.Policy.MaxDuration); !at.Before(end) {
		return fmt.Sprintf("max hours (%s) reached at %s", hours(l.Policy.MaxDuration), stamp(end))
	}
	return ""
}

// hours is a duration in hours, as --max-hours takes it.
func hours(d time.Duration) string {
	return strings.TrimSuffix(fmt.Sprintf("%.2f", d.Hours()), ".00") + "h"
}

// stamp is an instant in the log's words (UTC, to the second).
func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }
