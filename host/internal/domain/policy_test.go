package domain

import (
	"math"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"
)

// durationGen draws durations a policy may hold: zero, small ones, any
// positive one, and the awkward ones (a nanosecond, years, the largest).
func durationGen() *rapid.Generator[time.Duration] {
	return rapid.OneOf(
		rapid.Just(time.Duration(0)),
		rapid.Map(rapid.Int64Range(1, int64(24*time.Hour)), func(d int64) time.Duration { return time.Duration(d) }),
		rapid.Map(rapid.Int64Range(1, math.MaxInt64), func(d int64) time.Duration { return time.Duration(d) }),
		rapid.SampledFrom([]time.Duration{1, time.Second, DefaultProbeInterval, DefaultProbeCeiling,
			7 * 24 * time.Hour, 50 * 365 * 24 * time.Hour, math.MaxInt64}),
	)
}

// factorGen draws probe factors: zero (the default), one, the least float
// above one, ordinary ones and huge ones.
func factorGen() *rapid.Generator[float64] {
	return rapid.OneOf(
		rapid.SampledFrom([]float64{0, 1, math.Nextafter(1, 2), 1.5, 2, 3, 1e10, 1e300, math.MaxFloat64}),
		rapid.Float64Range(1, 100),
	)
}

// probeCountGen draws probe counts: the ordinary 1..1e6, beyond it up to
// math.MaxInt, and the meaningless zero and negatives.
func probeCountGen() *rapid.Generator[int] {
	return rapid.OneOf(
		rapid.IntRange(1, 1e6),
		rapid.IntRange(1e6, math.MaxInt),
		rapid.SampledFrom([]int{1, 2, math.MaxInt, math.MaxInt - 1, 0, -1, math.MinInt}),
		rapid.IntRange(math.MinInt, 0),
	)
}

// nowGen draws instants from year 1 to year 3000, to the nanosecond.
func nowGen() *rapid.Generator[time.Time] {
	return rapid.Custom(func(rt *rapid.T) time.Time {
		sec := rapid.Int64Range(time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC).Unix(), time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC).Unix()).Draw(rt, "sec")
		return time.Unix(sec, rapid.Int64Range(0, 999_999_999).Draw(rt, "nsec")).UTC()
	})
}

// validPolicy draws a policy that Validate accepts, before defaults: its
// ceiling (when set) at least its interval, any of them possibly zero.
func validPolicy(rt *rapid.T) ContinuationPolicy {
	a, b := durationGen().Draw(rt, "interval"), durationGen().Draw(rt, "ceiling")
	if b != 0 && b < a {
		a, b = b, a
	}
	p := ContinuationPolicy{OnLimit: OnLimitWait, Probe: Backoff{Interval: a, Factor: factorGen().Draw(rt, "factor"), Ceiling: b},
		MaxProbes: rapid.IntRange(0, 100).Draw(rt, "max probes")}
	if err := p.Validate(); err != nil {
		rt.Fatalf("drew an invalid policy %+v: %v", p, err)
	}
	return p
}

// wantProbe is Interval x Factor^(n-1), at most Ceiling, computed exactly
// (in 256-bit floating point, by squaring) from the same numbers.
func wantProbe(b Backoff, n int) time.Duration {
	ceiling := new(big.Float).SetInt64(int64(b.Ceiling))
	x := new(big.Float).SetPrec(256).SetInt64(int64(b.Interval))
	f := new(big.Float).SetPrec(256).SetFloat64(b.Factor)
	if x.Cmp(ceiling) >= 0 {
		return b.Ceiling
	}
	// Every factor is at least 1: once x or the factor still to multiply
	// by reaches the ceiling, so does the product.
	for k := uint64(max(n, 1) - 1); k > 0; {
		if k&1 == 1 {
			if x.Mul(x, f); x.Cmp(ceiling) >= 0 {
				return b.Ceiling
			}
		}
		if k >>= 1; k > 0 {
			if f.Mul(f, f); f.Cmp(ceiling) >= 0 {
				return b.Ceiling
			}
		}
	}
	d, _ := x.Int64()
	return time.Duration(d)
}

// TestBackoffNextProperty: for any valid defaulted policy, any instant
// and any probe count, the probe's instant is strictly after now (never a
// busy loop), at most now plus the ceiling, Interval x Factor^(n-1) up to
// the rounding of a float64 (for n up to 1e6), the first probe's for n < 1,
// and not earlier for a larger n; it never overflows or panics.
func TestBackoffNextProperty(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		p := validPolicy(rt).WithDefaults()
		if err := p.Validate(); err != nil {
			rt.Fatalf("a valid policy with its defaults is invalid: %+v: %v", p, err)
		}
		b, now := p.Probe, nowGen().Draw(rt, "now")
		n := probeCountGen().Draw(rt, "n")
		at := b.Next(n, now)
		if !at.After(now) {
			rt.Fatalf("probe %d of %+v from %v is at %v, not after now: a busy loop", n, b, now, at)
		}
		if at.After(now.Add(b.Ceiling)) {
			rt.Fatalf("probe %d of %+v from %v is at %v, after the ceiling", n, b, now, at)
		}
		if n < 1 {
			if first := b.Next(1, now); !at.Equal(first) {
				rt.Fatalf("probe %d of %+v is at %v, not the first probe's %v", n, b, at, first)
			}
		}
		if n >= 1 && n <= 1e6 {
			got, want := at.Sub(now), wantProbe(b, n)
			if diff := (got - want).Abs(); diff > max(1, time.Duration(float64(want)*1e-9)) {
				rt.Fatalf("probe %d of %+v waits %v, want %v (interval x factor^(n-1), at most the ceiling)", n, b, got, want)
			}
		}
		// Monotonic: the next probe, and any later one, is not earlier.
		if n < math.MaxInt {
			if next := b.Next(n+1, now); next.Before(at) {
				rt.Fatalf("probe %d of %+v is at %v, before probe %d's %v", n+1, b, next, n, at)
			}
		}
		if m := probeCountGen().Draw(rt, "m"); m >= n {
			if later := b.Next(m, now); later.Before(at) {
				rt.Fatalf("probe %d of %+v is at %v, before probe %d's %v", m, b, later, n, at)
			}
		}
	})
}

// TestBackoffNextExamples pins the documented spacing of the defaults
// (5m, 10m, 20m, 40m, then hourly) and the edges: factor 1, an interval
// equal to its ceiling, a ceiling of many years, and counts past any
// duration.
func TestBackoffNextExamples(t *testing.T) {
	defaults := ContinuationPolicy{}.WithDefaults().Probe
	years := 200 * 365 * 24 * time.Hour
	for _, c := range []struct {
		name string
		b    Backoff
		n    []int
		want []time.Duration
	}{
		{"defaults", defaults, []int{-5, 0, 1, 2, 3, 4, 5, 6, 1e6, math.MaxInt},
			[]time.Duration{5 * time.Minute, 5 * time.Minute, 5 * time.Minute, 10 * time.Minute, 20 * time.Minute, 40 * time.Minute, time.Hour, time.Hour, time.Hour, time.Hour}},
		{"factor 1", Backoff{Interval: time.Minute, Factor: 1, Ceiling: time.Hour}, []int{1, 2, 1e6, math.MaxInt},
			[]time.Duration{time.Minute, time.Minute, time.Minute, time.Minute}},
		{"interval at the ceiling", Backoff{Interval: time.Hour, Factor: 3, Ceiling: time.Hour}, []int{1, 2, math.MaxInt},
			[]time.Duration{time.Hour, time.Hour, time.Hour}},
		{"a ceiling of years", Backoff{Interval: time.Second, Factor: 10, Ceiling: years}, []int{1, 2, 10, 11, 100, math.MaxInt},
			[]time.Duration{time.Second, 10 * time.Second, 1e9 * time.Second, years, years, years}},
		{"the largest ceiling", Backoff{Interval: math.MaxInt64, Factor: math.MaxFloat64, Ceiling: math.MaxInt64}, []int{1, math.MaxInt},
			[]time.Duration{math.MaxInt64, math.MaxInt64}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var got []time.Duration
			for _, n := range c.n {
				got = append(got, c.b.Next(n, t0).Sub(t0))
			}
			if diff := cmp.Diff(c.want, got); diff != "" {
				t.Errorf("waits of probes %v (-want +got):\n%s", c.n, diff)
			}
		})
	}
}

// TestWaitInstantProperty: a reset still to come is waited for, plus the
// wait's jitter; a reset that passed, that is now, or none at all (what a
// provider that sends malformed reset information leaves) falls back to
// the backoff, strictly after now.
func TestWaitInstantProperty(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		p := validPolicy(rt).WithDefaults()
		now := nowGen().Draw(rt, "now")
		n := probeCountGen().Draw(rt, "n")
		id := rapid.String().Draw(rt, "wait id")
		l := Limit{Kind: rapid.SampledFrom([]LimitKind{LimitUsageWindow, LimitRate, LimitCredits, LimitOverload}).Draw(rt, "kind")}
		switch rapid.IntRange(0, 3).Draw(rt, "reset") {
		case 0: // to come
			l.ResetsAt = now.Add(durationGen().Filter(func(d time.Duration) bool { return d > 0 }).Draw(rt, "in"))
			at := p.WaitInstant(l, n, id, now)
			if want := l.ResetsAt.Add(Jitter(id)); !at.Equal(want) {
				rt.Fatalf("wait for a reset at %v is at %v, want the reset plus its jitter %v", l.ResetsAt, at, want)
			}
			if at.Before(l.ResetsAt) || !at.Before(l.ResetsAt.Add(MaxJitter)) {
				rt.Fatalf("wait for a reset at %v is at %v, outside [reset, reset+%v)", l.ResetsAt, at, MaxJitter)
			}
			return
		case 1: // passed
			l.ResetsAt = now.Add(-durationGen().Draw(rt, "ago"))
		case 2: // none
		case 3: // now
			l.ResetsAt = now
		}
		at := p.WaitInstant(l, n, id, now)
		if want := p.Probe.Next(n, now); !at.Equal(want) {
			rt.Fatalf("wait for a limit resetting at %v (now %v) is at %v, want the backoff's %v", l.ResetsAt, now, at, want)
		}
		if !at.After(now) {
			rt.Fatalf("wait for a limit resetting at %v (now %v) is at %v: a busy loop", l.ResetsAt, now, at)
		}
	})
}

// TestJitterProperty: the jitter is a fixed function of the wait's id, in
// [0, MaxJitter).
func TestJitterProperty(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		id := rapid.String().Draw(rt, "id")
		j := Jitter(id)
		if j < 0 || j >= MaxJitter {
			rt.Fatalf("jitter of %q is %v, outside [0, %v)", id, j, MaxJitter)
		}
		if again := Jitter(strings.Clone(id)); again != j {
			rt.Fatalf("jitter of %q is %v, then %v", id, j, again)
		}
	})
	// It spreads: waits of many threads for one reset do not all fire at
	// the same instant.
	seen := map[time.Duration]bool{}
	for _, id := range []string{"wait_1", "wait_2", "wait_3", "wait_4"} {
		seen[Jitter(id)] = true
	}
	if len(seen) < 4 {
		t.Errorf("jitters of four waits: %v, want four different ones", seen)
	}
}

func TestValidate(t *testing.T) {
	bad := []struct {
		name string
		p    ContinuationPolicy
		want string
	}{
		{"unknown on-limit", ContinuationPolicy{OnLimit: "sleep"}, `on-limit must be wait or switch:PROVIDER[,return], got "sleep"`},
		{"wait with a switch target", ContinuationPolicy{OnLimit: OnLimitWait, SwitchTo: "claude"}, `on-limit "wait" takes no switch target`},
		{"stop with a return", ContinuationPolicy{Return: true}, `on-limit "" takes no switch target`},
		{"switch to nothing", ContinuationPolicy{OnLimit: OnLimitSwitch}, `on-limit switch needs a provider name ([a-z0-9][a-z0-9-]*), got ""`},
		{"switch to a bad name", ContinuationPolicy{OnLimit: OnLimitSwitch, SwitchTo: "Claude Code"}, `on-limit switch needs a provider name ([a-z0-9][a-z0-9-]*), got "Claude Code"`},
		{"factor below 1", ContinuationPolicy{Probe: Backoff{Factor: 0.5}}, "probe factor must be at least 1, got 0.5"},
		{"negative factor", ContinuationPolicy{Probe: Backoff{Factor: -2}}, "probe factor must be at least 1, got -2"},
		{"NaN factor", ContinuationPolicy{Probe: Backoff{Factor: math.NaN()}}, "probe factor must be at least 1, got NaN"},
		{"infinite factor", ContinuationPolicy{Probe: Backoff{Factor: math.Inf(1)}}, "probe factor must be at least 1, got +Inf"},
		{"negative infinite factor", ContinuationPolicy{Probe: Backoff{Factor: math.Inf(-1)}}, "probe factor must be at least 1, got -Inf"},
		{"ceiling below interval", ContinuationPolicy{Probe: Backoff{Interval: time.Hour, Ceiling: time.Minute}}, "probe ceiling 1m0s is below its interval 1h0m0s"},
		{"negative interval", ContinuationPolicy{Probe: Backoff{Interval: -time.Second}}, "probe interval and ceiling must not be negative"},
		{"negative ceiling", ContinuationPolicy{Probe: Backoff{Ceiling: -time.Second}}, "probe interval and ceiling must not be negative\nprobe ceiling -1s is below its interval 0s"},
		{"negative max probes", ContinuationPolicy{MaxProbes: -1}, "budgets and timeouts must not be negative"},
		{"negative max wait", ContinuationPolicy{MaxWait: -1}, "budgets and timeouts must not be negative"},
		{"negative check timeout", ContinuationPolicy{CheckTimeout: -1}, "budgets and timeouts must not be negative"},
		{"negative max runs", ContinuationPolicy{MaxRuns: -1}, "budgets and timeouts must not be negative"},
		{"negative max duration", ContinuationPolicy{MaxDuration: -1}, "budgets and timeouts must not be negative"},
		{"negative max tokens", ContinuationPolicy{MaxTokens: -1}, "budgets and timeouts must not be negative"},
		{"blank until", ContinuationPolicy{Until: " \t\n"}, "the until check is blank"},
		{"everything at once", ContinuationPolicy{OnLimit: OnLimitSwitch, SwitchTo: "-x", Probe: Backoff{Factor: 0.9}, MaxRuns: -3, Until: " "},
			"on-limit switch needs a provider name ([a-z0-9][a-z0-9-]*), got \"-x\"\nprobe factor must be at least 1, got 0.9\nbudgets and timeouts must not be negative\nthe until check is blank"},
	}
	for _, c := range bad {
		t.Run(c.name, func(t *testing.T) {
			err := c.p.Validate()
			if err == nil {
				t.Fatalf("Validate(%+v) = nil, want %q", c.p, c.want)
			}
			if err.Error() != c.want {
				t.Errorf("Validate(%+v):\n got %q\nwant %q", c.p, err, c.want)
			}
		})
	}
	good := map[string]ContinuationPolicy{
		"off":                     {},
		"wait":                    {OnLimit: OnLimitWait},
		"switch and return":       {OnLimit: OnLimitSwitch, SwitchTo: "claude", Return: true},
		"switch with a model":     {OnLimit: OnLimitSwitch, SwitchTo: "codex-2", SwitchModel: "big", SwitchCommand: ProviderCommand{Argv: []string{"codex"}}},
		"factor 1":                {OnLimit: OnLimitWait, Probe: Backoff{Interval: time.Minute, Factor: 1, Ceiling: time.Minute}},
		"a ceiling only":          {OnLimit: OnLimitWait, Probe: Backoff{Ceiling: time.Second}},
		"an interval only":        {OnLimit: OnLimitWait, Probe: Backoff{Interval: 3 * time.Hour}},
		"largest":                 {OnLimit: OnLimitWait, Probe: Backoff{Interval: math.MaxInt64, Factor: math.MaxFloat64, Ceiling: math.MaxInt64}},
		"until with every budget": {Until: "make test", CheckTimeout: time.Minute, MaxRuns: 5, MaxDuration: 8 * time.Hour, MaxTokens: 1e6, MaxProbes: 3, MaxWait: time.Hour},
	}
	for name, p := range good {
		t.Run(name, func(t *testing.T) {
			if err := p.Validate(); err != nil {
				t.Errorf("Validate(%+v) = %v, want nil", p, err)
			}
			if err := p.WithDefaults().Validate(); err != nil {
				t.Errorf("Validate(%+v) with its defaults = %v, want nil", p.WithDefaults(), err)
			}
		})
	}
}

// TestWithDefaultsProperty: WithDefaults fills exactly the fields left
// zero, and a valid policy stays valid.
func TestWithDefaultsProperty(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		dur := durationGen()
		p := ContinuationPolicy{
			OnLimit:      rapid.SampledFrom([]OnLimit{OnLimitStop, OnLimitWait, OnLimitSwitch}).Draw(rt, "on limit"),
			SwitchTo:     rapid.SampledFrom([]string{"", "claude"}).Draw(rt, "switch to"),
			SwitchModel:  rapid.SampledFrom([]string{"", "big"}).Draw(rt, "switch model"),
			Return:       rapid.Bool().Draw(rt, "return"),
			ContinueText: rapid.SampledFrom([]string{"", "go on"}).Draw(rt, "continue text"),
			Probe:        Backoff{Interval: dur.Draw(rt, "interval"), Factor: factorGen().Draw(rt, "factor"), Ceiling: dur.Draw(rt, "ceiling")},
			MaxProbes:    rapid.IntRange(0, 3).Draw(rt, "max probes"),
			MaxWait:      dur.Draw(rt, "max wait"),
			Until:        rapid.SampledFrom([]string{"", "make test"}).Draw(rt, "until"),
			CheckTimeout: dur.Draw(rt, "check timeout"),
			MaxRuns:      rapid.IntRange(0, 3).Draw(rt, "max runs"),
			MaxDuration:  dur.Draw(rt, "max duration"),
			MaxTokens:    rapid.Int64Range(0, 3).Draw(rt, "max tokens"),
		}
		got := p.WithDefaults()
		want := p
		or := func(v *time.Duration, d time.Duration) {
			if *v == 0 {
				*v = d
			}
		}
		if want.ContinueText == "" {
			want.ContinueText = DefaultContinueText
		}
		if want.Probe.Factor == 0 {
			want.Probe.Factor = DefaultProbeFactor
		}
		// A zero interval is the default's, but never above a ceiling
		// given; a zero ceiling the default's, but never below the
		// interval.
		if want.Probe.Ceiling != 0 {
			or(&want.Probe.Interval, min(DefaultProbeInterval, want.Probe.Ceiling))
		}
		or(&want.Probe.Interval, DefaultProbeInterval)
		or(&want.Probe.Ceiling, max(DefaultProbeCeiling, want.Probe.Interval))
		if want.MaxProbes == 0 {
			want.MaxProbes = DefaultMaxProbes
		}
		or(&want.MaxWait, DefaultMaxWait)
		if want.Until != "" {
			or(&want.CheckTimeout, DefaultCheckTimeout)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			rt.Fatalf("WithDefaults(%+v) (-want +got):\n%s", p, diff)
		}
		if p.Validate() == nil {
			if err := got.Validate(); err != nil {
				rt.Fatalf("valid %+v with its defaults %+v is invalid: %v", p, got, err)
			}
		}
	})
}

func TestPolicyOff(t *testing.T) {
	for _, c := range []struct {
		name string
		p    ContinuationPolicy
		off  bool
	}{
		{"zero", ContinuationPolicy{}, true},
		// What only shapes a wait or a switch asks for nothing by itself.
		{"only the shape of waits", ContinuationPolicy{ContinueText: "go on", Probe: Backoff{Interval: time.Minute}, MaxProbes: 3, MaxWait: time.Hour, CheckTimeout: time.Minute}, true},
		{"on-limit wait", ContinuationPolicy{OnLimit: OnLimitWait}, false},
		{"on-limit switch", ContinuationPolicy{OnLimit: OnLimitSwitch, SwitchTo: "claude"}, false},
		{"until", ContinuationPolicy{Until: "make test"}, false},
		{"max runs", ContinuationPolicy{MaxRuns: 1}, false},
		{"max duration", ContinuationPolicy{MaxDuration: time.Hour}, false},
		{"max tokens", ContinuationPolicy{MaxTokens: 1}, false},
	} {
		if got := c.p.Off(); got != c.off {
			t.Errorf("%s: Off(%+v) = %v, want %v", c.name, c.p, got, c.off)
		}
	}
}

func TestCheckResultPassed(t *testing.T) {
	for _, c := range []struct {
		r    CheckResult
		want bool
	}{
		{CheckResult{ExitCode: 0}, true},
		{CheckResult{ExitCode: 1}, false},
		{CheckResult{ExitCode: -1}, false},
		{CheckResult{TimedOut: true}, false},
		{CheckResult{Error: "exec: sh: not found"}, false},
	} {
		if got := c.r.Passed(); got != c.want {
			t.Errorf("Passed(%+v) = %v, want %v", c.r, got, c.want)
		}
	}
}

func TestLimitDescribe(t *testing.T) {
	for _, c := range []struct {
		l        Limit
		provider string
		want     string
	}{
		{Limit{Kind: LimitUsageWindow, Scope: "five_hour"}, "codex", "codex usage limit (five_hour)"},
		{Limit{Kind: LimitRate}, "claude", "claude rate limit"},
		{Limit{Kind: LimitCredits}, "claude", "claude credits"},
		{Limit{Kind: LimitOverload, Scope: "model"}, "opencode", "opencode overload (model)"},
		{Limit{Kind: "quota"}, "acp", "acp limit"},
		{Limit{}, "", "limit"},
		{Limit{Kind: LimitRate, Scope: "requests"}, "", "rate limit (requests)"},
	} {
		if got := DescribeLimit(c.l, c.provider); got != c.want {
			t.Errorf("Describe(%+v, %q) = %q, want %q", c.l, c.provider, got, c.want)
		}
	}
}

func TestThreadNextWait(t *testing.T) {
	early := &Wait{ID: "early", At: t0}
	late := &Wait{ID: "late", At: t0.Add(time.Second)}
	same := &Wait{ID: "same", At: t0}
	for _, c := range []struct {
		name string
		loop *Loop
		want *Wait
	}{
		{"no loop", nil, nil},
		{"no wait", &Loop{Status: LoopActive}, nil},
		{"a wait", &Loop{Wait: late}, late},
		{"a return", &Loop{Return: late}, late},
		{"the return first", &Loop{Wait: late, Return: early}, early},
		{"the wait first", &Loop{Wait: early, Return: late}, early},
		{"at once: the wait", &Loop{Wait: early, Return: same}, early},
	} {
		th := &Thread{Loop: c.loop}
		if got := th.NextWait(); got != c.want {
			t.Errorf("%s: NextWait() = %+v, want %+v", c.name, got, c.want)
		}
	}
}

func TestThreadUnattended(t *testing.T) {
	started := t0
	running := []Run{{ID: "r1", Status: RunStatusCompleted, StartedAt: &started}, {ID: "r2", Status: RunStatusRunning, StartedAt: &started}}
	queued := []Run{{ID: "r1", Status: RunStatusCompleted, StartedAt: &started}, {ID: "r2", Status: RunStatusQueued}}
	ended := []Run{{ID: "r1", Status: RunStatusCompleted, StartedAt: &started}, {ID: "r2", Status: RunStatusCancelled}}
	wait := &Wait{ID: "w", At: t0}
	for _, c := range []struct {
		name string
		loop *Loop
		runs []Run
		want bool
	}{
		{"no loop, a run going", nil, running, false},
		{"a wait armed", &Loop{Status: LoopActive, Wait: wait}, ended, true},
		{"a return armed, loop ended", &Loop{Status: LoopDone, Return: wait}, ended, true},
		{"a check running", &Loop{Status: LoopActive, CheckPending: true}, ended, true},
		{"active, a run going", &Loop{Status: LoopActive}, running, true},
		{"active, a run queued", &Loop{Status: LoopActive}, queued, true},
		{"active, nothing to come", &Loop{Status: LoopActive}, ended, false},
		{"active, no runs", &Loop{Status: LoopActive}, nil, false},
		{"done, a run going", &Loop{Status: LoopDone}, running, false},
		{"budget, a run queued", &Loop{Status: LoopBudget}, queued, false},
		{"stopped", &Loop{Status: LoopStopped}, ended, false},
	} {
		th := &Thread{Loop: c.loop, Runs: c.runs}
		if got := th.Unattended(); got != c.want {
			t.Errorf("%s: Unattended() = %v, want %v", c.name, got, c.want)
		}
	}
}
