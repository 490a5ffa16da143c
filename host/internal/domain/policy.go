package domain

import (
	"cmp"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"strings"
	"time"
)

// The continuation policy: what a thread does, unattended, when a run hits
// a provider limit or ends without its check passing. Every rule here is a
// function of (policy, state, now) that returns an instant or a decision;
// nothing here sleeps or reads a clock. The orchestrator arms one timer per
// thread at the instant the projection's armed wait names (Thread.NextWait)
// and sends FireWait when it passes.

// OnLimit is what a thread does when a run hits a provider limit.
type OnLimit string

// On-limit policies.
const (
	// OnLimitStop ends the run blocked; a person decides what follows.
	OnLimitStop OnLimit = ""
	// OnLimitWait waits for the limit's reset (or probes it) and continues
	// the same run on the same provider thread.
	OnLimitWait OnLimit = "wait"
	// OnLimitSwitch continues the run on another provider, with a
	// handoff, and optionally returns to the first after its reset.
	OnLimitSwitch OnLimit = "switch"
)

// Backoff is how probes of a limit with no known reset are spaced: the
// n-th probe (n from 1) waits Interval x Factor^(n-1), at most Ceiling.
type Backoff struct {
	Interval time.Duration `json:"interval"`
	Factor   float64       `json:"factor"`
	Ceiling  time.Duration `json:"ceiling"`
}

// Defaults of a continuation policy.
const (
	// DefaultContinueText is the continuation turn sent after a wait.
	DefaultContinueText = "continue where you stopped"
	// DefaultProbeInterval, DefaultProbeFactor and DefaultProbeCeiling
	// space probes: 5m, 10m, 20m, 40m, then hourly.
	DefaultProbeInterval = 5 * time.Minute
	DefaultProbeFactor   = 2.0
	DefaultProbeCeiling  = time.Hour
	// DefaultMaxProbes bounds the waits of one run.
	DefaultMaxProbes = 8
	// DefaultMaxWait bounds a run's total waiting: a week, so that a
	// seven-day window can be waited out when asked.
	DefaultMaxWait = 8 * 24 * time.Hour
	// DefaultCheckTimeout bounds an --until check.
	DefaultCheckTimeout = 10 * time.Minute
	// MaxJitter is the most a reset instant is moved later, so that many
	// threads waiting for one reset do not all call at once.
	MaxJitter = 30 * time.Second
	// MaxCheckOutput bounds the check output kept in the log (its tail).
	MaxCheckOutput = 8 << 10
	// BlockedMarker, at the start of a line of a run's answer, says the
	// agent is blocked and needs a person: an --until loop stops there.
	BlockedMarker = "BATON-BLOCKED:"
)

// ContinuationPolicy is a thread's unattended-work policy (off when zero).
type ContinuationPolicy struct {
	OnLimit OnLimit `json:"onLimit,omitempty"`
	// SwitchTo (with SwitchModel and SwitchCommand, kept when the thread
	// has used that provider) is where OnLimitSwitch goes; Return comes
	// back to the first provider after its reset.
	SwitchTo      string          `json:"switchTo,omitempty"`
	SwitchModel   string          `json:"switchModel,omitempty"`
	SwitchCommand ProviderCommand `json:"switchCommand,omitzero"`
	Return        bool            `json:"return,omitempty"`
	// ContinueText is the continuation turn (DefaultContinueText).
	ContinueText string  `json:"continueText,omitempty"`
	Probe        Backoff `json:"probe,omitzero"`
	// MaxProbes bounds one run's waits; MaxWait their total time.
	MaxProbes int           `json:"maxProbes,omitempty"`
	MaxWait   time.Duration `json:"maxWait,omitempty"`
	// Until is a check command run in the thread's cwd after each
	// completed run: exit 0 ends the loop; otherwise a new run continues.
	Until        string        `json:"until,omitempty"`
	CheckTimeout time.Duration `json:"checkTimeout,omitempty"`
	// Budgets of the loop, counted from when the policy was set (0: none).
	MaxRuns     int           `json:"maxRuns,omitempty"`
	MaxDuration time.Duration `json:"maxDuration,omitempty"`
	MaxTokens   int64         `json:"maxTokens,omitempty"`
}

// Off says whether the policy asks for nothing: runs end as they end.
func (p ContinuationPolicy) Off() bool {
	return p.OnLimit == OnLimitStop && p.Until == "" && p.MaxRuns == 0 && p.MaxDuration == 0 && p.MaxTokens == 0
}

// WithDefaults fills what was left zero.
func (p ContinuationPolicy) WithDefaults() ContinuationPolicy {
	p.ContinueText = cmp.Or(p.ContinueText, DefaultContinueText)
	// A default interval is never above a ceiling given, nor a default
	// ceiling below the interval: the defaulted policy stays valid.
	if p.Probe.Ceiling != 0 {
		p.Probe.Interval = cmp.Or(p.Probe.Interval, min(DefaultProbeInterval, p.Probe.Ceiling))
	}
	p.Probe.Interval = cmp.Or(p.Probe.Interval, DefaultProbeInterval)
	p.Probe.Factor = cmp.Or(p.Probe.Factor, DefaultProbeFactor)
	p.Probe.Ceiling = cmp.Or(p.Probe.Ceiling, max(DefaultProbeCeiling, p.Probe.Interval))
	p.MaxProbes = cmp.Or(p.MaxProbes, DefaultMaxProbes)
	p.MaxWait = cmp.Or(p.MaxWait, DefaultMaxWait)
	if p.Until != "" {
		p.CheckTimeout = cmp.Or(p.CheckTimeout, DefaultCheckTimeout)
	}
	return p
}

// Validate says what is wrong with a policy, naming the field.
func (p ContinuationPolicy) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	switch p.OnLimit {
	case OnLimitStop, OnLimitWait:
		if p.SwitchTo != "" || p.Return {
			bad("on-limit %q takes no switch target", p.OnLimit)
		}
	case OnLimitSwitch:
		if !validProviderName(p.SwitchTo) {
			bad("on-limit switch needs a provider name ([a-z0-9][a-z0-9-]*), got %q", p.SwitchTo)
		}
	default:
		bad("on-limit must be wait or switch:PROVIDER[,return], got %q", p.OnLimit)
	}
	if p.Probe.Interval < 0 || p.Probe.Ceiling < 0 {
		bad("probe interval and ceiling must not be negative")
	}
	if p.Probe.Factor != 0 && (p.Probe.Factor < 1 || math.IsInf(p.Probe.Factor, 0) || math.IsNaN(p.Probe.Factor)) {
		bad("probe factor must be at least 1, got %v", p.Probe.Factor)
	}
	if p.Probe.Ceiling != 0 && p.Probe.Ceiling < p.Probe.Interval {
		bad("probe ceiling %v is below its interval %v", p.Probe.Ceiling, p.Probe.Interval)
	}
	if p.MaxProbes < 0 || p.MaxWait < 0 || p.CheckTimeout < 0 || p.MaxRuns < 0 || p.MaxDuration < 0 || p.MaxTokens < 0 {
		bad("budgets and timeouts must not be negative")
	}
	if p.Until != "" && strings.TrimSpace(p.Until) == "" {
		bad("the until check is blank")
	}
	return errors.Join(errs...)
}

// Next is the instant of the n-th probe (n from 1) of a limit with no
// known reset, waited from now: never before now, never after now plus
// Ceiling, not earlier for a larger n, and defined for every n (a power
// too large for a duration is the ceiling). b is a defaulted policy's.
func (b Backoff) Next(n int, now time.Time) time.Time {
	d := b.Ceiling
	if n < 1 {
		n = 1
	}
	// Interval x Factor^(n-1) in floating point: a product past the
	// ceiling (or past any duration: +Inf) is the ceiling.
	if f := float64(b.Interval) * math.Pow(b.Factor, float64(n-1)); f < float64(b.Ceiling) {
		d = time.Duration(f)
	}
	return now.Add(max(d, 0))
}

// Jitter is how much later than a reset instant a wait fires: a fixed
// function of the wait's id in [0, MaxJitter), so a decision decided again
// gives the same instant.
func Jitter(waitID string) time.Duration {
	h := fnv.New64a()
	h.Write([]byte(waitID))
	return time.Duration(h.Sum64() % uint64(MaxJitter))
}

// WaitInstant is when the n-th wait for limit l fires: its reset plus the
// wait's jitter when the provider gave a reset still to come, else the
// n-th probe's instant. Never before now.
func (p ContinuationPolicy) WaitInstant(l Limit, n int, waitID string, now time.Time) time.Time {
	if l.ResetsAt.After(now) {
		return l.ResetsAt.Add(Jitter(waitID))
	}
	return p.Probe.Next(n, now)
}

// LoopStatus is where a thread's continuation loop is.
type LoopStatus string

// Loop statuses.
const (
	LoopActive LoopStatus = "active"
	// LoopDone: the check passed.
	LoopDone LoopStatus = "done"
	// LoopBlocked: the agent said it is blocked, or a limit stopped it.
	LoopBlocked LoopStatus = "blocked"
	// LoopBudget: a budget (runs, hours, tokens, waits) ran out.
	LoopBudget LoopStatus = "budget"
	// LoopStopped: a person stopped it (an interrupt, a new policy).
	LoopStopped LoopStatus = "stopped"
)

// Loop is a thread's continuation loop: its policy and what it has used.
type Loop struct {
	Policy ContinuationPolicy `json:"policy"`
	// Since is when the policy was set: budgets count from here.
	Since  time.Time  `json:"since"`
	Status LoopStatus `json:"status"`
	// Reason says why the loop ended.
	Reason string `json:"reason,omitempty"`
	// Runs and Tokens are what the loop's runs used (runs started since,
	// their usage's total tokens).
	Runs   int   `json:"runs"`
	Tokens int64 `json:"tokens"`
	// Wait is the armed wait of a run blocked on a limit; Return the
	// armed return to the provider a switch left.
	Wait   *Wait `json:"wait,omitempty"`
	Return *Wait `json:"return,omitempty"`
	// Check is the last check's result; CheckPending says one is running.
	Check        *CheckResult `json:"check,omitempty"`
	CheckPending bool         `json:"checkPending,omitempty"`
}

// WaitKind is what a wait does when it fires.
type WaitKind string

// Wait kinds.
const (
	// WaitContinue sends the run a continuation attempt on its provider.
	WaitContinue WaitKind = "continue"
	// WaitReturn switches the thread back to the provider it left.
	WaitReturn WaitKind = "return"
)

// Wait is an armed wait: at At, FireWait does what Kind says.
type Wait struct {
	ID       string    `json:"id"`
	Kind     WaitKind  `json:"kind"`
	RunID    string    `json:"runId,omitempty"`
	Provider string    `json:"provider"`
	Limit    Limit     `json:"limit"`
	At       time.Time `json:"at"`
	// Probe is this wait's number for its run (from 1), of at most
	// MaxProbes.
	Probe     int `json:"probe"`
	MaxProbes int `json:"maxProbes"`
	// Since is when the run's first wait began (the wait budget's start).
	Since   time.Time `json:"since"`
	ArmedAt time.Time `json:"armedAt"`
}

// WaitOutcome is how a wait ended.
type WaitOutcome string

// Wait outcomes.
const (
	WaitFired     WaitOutcome = "fired"
	WaitCancelled WaitOutcome = "cancelled"
)

// CheckResult is what an --until check found.
type CheckResult struct {
	RunID    string `json:"runId"`
	Command  string `json:"command"`
	ExitCode int    `json:"exitCode"`
	// Output is the tail of its stdout and stderr, at most MaxCheckOutput
	// bytes; Truncated says more was cut.
	Output    string    `json:"output,omitempty"`
	Truncated bool      `json:"truncated,omitempty"`
	TimedOut  bool      `json:"timedOut,omitempty"`
	Error     string    `json:"error,omitempty"`
	At        time.Time `json:"at"`
}

// Passed says whether the check says the work is done.
func (c CheckResult) Passed() bool { return c.ExitCode == 0 && !c.TimedOut && c.Error == "" }

// DescribeLimit is a limit in words: "codex usage limit (five_hour)".
func DescribeLimit(l Limit, provider string) string {
	what := map[LimitKind]string{LimitUsageWindow: "usage limit", LimitRate: "rate limit",
		LimitCredits: "credits", LimitOverload: "overload"}[l.Kind]
	if what == "" {
		what = "limit"
	}
	s := strings.TrimSpace(provider + " " + what)
	if l.Scope != "" {
		s += " (" + l.Scope + ")"
	}
	return s
}

// NextWait is the thread's earliest armed wait (nil: none), the one its
// timer is for.
func (t *Thread) NextWait() *Wait {
	if t.Loop == nil {
		return nil
	}
	w := t.Loop.Wait
	if r := t.Loop.Return; r != nil && (w == nil || r.At.Before(w.At)) {
		w = r
	}
	return w
}

// Unattended says whether the thread's continuation loop has work still
// to come by itself: a wait armed, a check running, or an active loop with
// a run going or queued. A client that follows a loop (baton run with a
// policy) waits until it is false.
func (t *Thread) Unattended() bool {
	l := t.Loop
	if l == nil {
		return false
	}
	if l.Wait != nil || l.Return != nil || l.CheckPending {
		return true
	}
	return l.Status == LoopActive && (t.ActiveRun() != nil || t.hasQueued())
}
