package domain

import (
	"cmp"
	"fmt"
	"slices"
)

// Provider switch and return. A thread keeps one binding per provider it
// has used (ProviderBinding): the command it runs, its own conversation of
// the thread and the last run that conversation saw. A switch changes the
// provider the next runs start on; the first of them carries a handoff of
// what the provider has not seen: every run, in a fresh conversation
// (full_thread_summary), or the runs since it last saw the thread, in its
// own conversation resumed (delta_since_target_last_seen). The handoff is
// planned when the switch is made (so it can be shown) and again when the
// run starts: a plan that changed (a run ended in between) supersedes the
// ready one.

func decideSwitchProvider(t *Thread, p SwitchProvider, env Env, d *Decision) error {
	if !validProviderName(p.Provider) {
		return fmt.Errorf("%w: provider: %q is not a provider name ([a-z0-9][a-z0-9-]*)", ErrInvalid, p.Provider)
	}
	if p.HandoffMaxBytes != 0 && p.HandoffMaxBytes < MinHandoffMaxBytes {
		return fmt.Errorf("%w: handoff max bytes: %d is below the least, %d", ErrInvalid, p.HandoffMaxBytes, MinHandoffMaxBytes)
	}
	b := t.binding(p.Provider)
	command, model := p.ProviderCommand, p.Model
	if len(command.Argv) == 0 {
		if b == nil {
			return fmt.Errorf("%w: %w: thread %s has not used %s, so there is no command of it to keep", ErrInvalid, ErrNoProviderCommand, t.ID, p.Provider)
		}
		command = b.Command
	}
	if model == "" && b != nil {
		model = b.Model
	}
	sw := ProviderSwitched{From: t.Provider, To: p.Provider, FromModel: t.Model, ToModel: model, Command: command,
		HandoffMaxBytes: p.HandoffMaxBytes}
	if sw.From == sw.To && sw.FromModel == sw.ToModel && slices.Equal(command.Argv, t.ProviderCommand.Argv) &&
		slices.Equal(command.Env, t.ProviderCommand.Env) && (p.HandoffMaxBytes == 0 || p.HandoffMaxBytes == t.HandoffMaxBytes) {
		return nil // nothing changes
	}
	d.emit(sw)
	if t.ActiveRun() == nil {
		// Shown now; a run that ends before the next one starts changes it.
		planHandoff(t, env, d, handoffSpec{})
	}
	return nil
}

// validProviderName says whether name is a plugin's name.
func validProviderName(name string) bool {
	if name == "" || len(name) > 64 {
		return false
	}
	for i, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' && i > 0) {
			return false
		}
	}
	return true
}

// handoffRuns is what provider has not seen: the strategy and the
// ordinals of the ended runs to tell it. Those that left the projection
// are the past's; ok is false when it does not hold them (need says what
// would).
func handoffRuns(t *Thread, provider string, past *Past) (s HandoffStrategy, runs []int, need NeedPast, ok bool) {
	strategy, since := HandoffFullThreadSummary, 0
	if b := t.binding(provider); b != nil && b.ProviderThreadID != "" {
		strategy, since = HandoffDeltaSinceLastSeen, b.SeenThrough
	}
	if since < t.earlierRuns() {
		if !past.knowsTold(since) {
			return strategy, nil, NeedPast{Told: true, ToldAfter: since}, false
		}
		runs = past.toldAfter(t, since)
	}
	// Runs are in ordinal order: walking back from the newest stops at the
	// last one seen, so a provider that has seen the thread costs what it
	// missed, not the thread's history.
	var mine []int
	for i := len(t.Runs) - 1; i >= 0 && t.Runs[i].Ordinal > since; i-- {
		if t.Runs[i].told() {
			mine = append(mine, t.Runs[i].Ordinal)
		}
	}
	slices.Reverse(mine)
	return strategy, append(runs, mine...), NeedPast{}, true
}

// told says whether a run is part of what a provider is told of the
// thread: it ended (not rolled back or cancelled), and a provider took its
// turn (a run that failed before any did was never seen by anyone).
func (r *Run) told() bool {
	if !r.Status.Terminal() || r.Status == RunStatusRolledBack || r.Status == RunStatusCancelled {
		return false
	}
	for _, a := range r.Attempts {
		if a.SessionID != "" {
			return true
		}
	}
	return false
}

// TurnText is what the provider is sent for a run's attempt: its input,
// after the ready handoff when the attempt is the run's first.
func (t *Thread) TurnText(runID, attemptID, input string) string {
	r := t.run(runID)
	if r == nil || !r.carriesHandoff(attemptID) {
		return input
	}
	if h := t.readyHandoff(); h != nil && (h.ToProvider == "" || h.ToProvider == r.Provider) {
		return h.Text + "\n\n" + input
	}
	return input
}

// planHandoff makes the handoff the thread's next run needs ready: the
// ready one, if it is that; else it is superseded, and a new one made
// (unless the provider has seen everything). spec gives the rollback or
// fallback it is for, and the provider it is for when that is not the
// thread's (a run that started before a switch); the strategy, runs and
// bound are the thread's.
func planHandoff(t *Thread, env Env, d *Decision, spec handoffSpec) {
	spec.To, spec.MaxBytes = cmp.Or(spec.To, t.Provider), t.HandoffMaxBytes
	strategy, runs, need, ok := handoffRuns(t, spec.To, env.Past)
	if !ok {
		need.ToldBudget = max(cmp.Or(spec.MaxBytes, DefaultHandoffMaxBytes), MinHandoffMaxBytes)
		d.needPast(need)
		return
	}
	spec.Strategy, spec.Runs, spec.past = strategy, runs, env.Past
	ready := t.readyHandoff()
	if ready != nil && ready.Strategy == spec.Strategy && ready.ToProvider == spec.To && slices.Equal(ready.ordinals(), spec.Runs) {
		return
	}
	var id string
	if len(spec.Runs) > 0 {
		id = env.NewID("hof")
	}
	if ready != nil {
		d.emit(HandoffSuperseded{HandoffID: ready.ID, By: id})
	}
	if id != "" {
		h := composeHandoff(t, spec)
		h.HandoffID = id
		d.emit(h)
	}
}

// ordinals are the runs a handoff covers.
func (h *ContextHandoff) ordinals() []int { return HandoffOrdinals(h.Runs, h.FromRun, h.ToRun) }

// HandoffOrdinals are the runs a handoff covers: its runs, or from..to for
// one made before handoffs listed them.
func HandoffOrdinals(runs []HandoffRun, from, to int) []int {
	if len(runs) == 0 && from > 0 {
		out := make([]int, 0, to-from+1)
		for n := from; n <= to; n++ {
			out = append(out, n)
		}
		return out
	}
	out := make([]int, len(runs))
	for i, r := range runs {
		out[i] = r.Ordinal
	}
	return out
}

// binding is what the thread keeps of provider, or nil.
func (t *Thread) binding(provider string) *ProviderBinding {
	for i := range t.ProviderBindings {
		if t.ProviderBindings[i].Provider == provider {
			return &t.ProviderBindings[i]
		}
	}
	return nil
}

// Binding is what the thread keeps of provider: the host opens its
// sessions from it.
func (t *Thread) Binding(provider string) (ProviderBinding, bool) {
	if b := t.binding(provider); b != nil {
		return *b, true
	}
	return ProviderBinding{}, false
}

// runByOrdinal is the run with the ordinal, or nil.
func (t *Thread) runByOrdinal(ord int) *Run {
	if i := ord - 1 - t.earlierRuns(); i >= 0 && i < len(t.Runs) && t.Runs[i].Ordinal == ord {
		return &t.Runs[i]
	}
	for i := range t.Runs {
		if t.Runs[i].Ordinal == ord {
			return &t.Runs[i]
		}
	}
	return nil
}
