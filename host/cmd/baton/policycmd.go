package main

import (
	"context"
	"fmt"
	"math"
	"regexp"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	batonv1 "github.com/baton-run/baton/host/api/baton/v1"
	"github.com/baton-run/baton/host/internal/domain"
	"github.com/baton-run/baton/host/internal/ids"
)

// Continuation policy: run and send take --on-limit, --until and the
// budgets, and send the thread a SetPolicy (before any message) when one
// of them is given.

// policyFlags are the flags of a thread's continuation policy.
type policyFlags struct {
	onLimit, continueText, until string
	checkTimeout, maxWait        time.Duration
	probeInterval, probeCeiling  time.Duration
	probeFactor, maxHours        float64
	maxRuns, maxProbes           int
	maxTokens                    int64
	// given are the policy flags given: on the command line, or (for a
	// new thread only) in the environment.
	given map[string]bool
}

// policyFlagNames are the policy's flags.
var policyFlagNames = []string{"on-limit", "continue-text", "until", "check-timeout", "max-runs", "max-hours", "max-tokens",
	"max-wait", "max-probes", "probe-interval", "probe-factor", "probe-ceiling"}

// addPolicyFlags declares the policy flags on fs.
func addPolicyFlags(fs *pflag.FlagSet, f *policyFlags) {
	fs.StringVar(&f.onLimit, "on-limit", "", "what a run that hits a provider's usage or rate limit does: `wait` (for the reset, then continue), switch:PROVIDER[,return] (go on there; with return, come back after the reset), or stop (the default: the run ends blocked)")
	fs.StringVar(&f.continueText, "continue-text", "", fmt.Sprintf("the `text` that continues a run after a wait (default %q)", domain.DefaultContinueText))
	fs.StringVar(&f.until, "until", "", "a check `command` run in the thread's directory after each completed run: new runs go on (told its output) until it exits 0")
	fs.DurationVar(&f.checkTimeout, "check-timeout", 0, fmt.Sprintf("bound each --until check to this `duration` (default %v)", fmtDuration(domain.DefaultCheckTimeout)))
	fs.IntVar(&f.maxRuns, "max-runs", 0, "end the loop after `n` runs (default: no bound)")
	fs.Float64Var(&f.maxHours, "max-hours", 0, "end the loop after this many `hours` (default: no bound)")
	fs.Int64Var(&f.maxTokens, "max-tokens", 0, "end the loop once its runs have used `n` tokens (default: no bound)")
	fs.DurationVar(&f.maxWait, "max-wait", 0, fmt.Sprintf("a run waits for limits at most this `duration` in all, then fails (default %s)", fmtDuration(domain.DefaultMaxWait)))
	fs.IntVar(&f.maxProbes, "max-probes", 0, fmt.Sprintf("a run waits for limits at most `n` times, then fails (default %d)", domain.DefaultMaxProbes))
	fs.DurationVar(&f.probeInterval, "probe-interval", 0, fmt.Sprintf("a limit with no reset time is tried again after this `duration` (default %s), then longer", fmtDuration(domain.DefaultProbeInterval)))
	fs.Float64Var(&f.probeFactor, "probe-factor", 0, fmt.Sprintf("each probe waits this `factor` longer than the last (default %v)", domain.DefaultProbeFactor))
	fs.DurationVar(&f.probeCeiling, "probe-ceiling", 0, fmt.Sprintf("no probe waits longer than this `duration` (default %s)", fmtDuration(domain.DefaultProbeCeiling)))
}

// collect notes which policy flags were given. A thread that goes on
// (continued) takes them from the command line only: an environment meant
// for new threads never changes its policy.
func (f *policyFlags) collect(fs *pflag.FlagSet, continued bool) {
	f.given = map[string]bool{}
	for _, name := range policyFlagNames {
		if fl := fs.Lookup(name); fl != nil && fl.Changed && !(continued && fromEnv(fs, name)) {
			f.given[name] = true
		}
	}
}

// providerName is what a plugin's name may be.
var providerName = regexp.MustCompile(`^[a-z0-9][a-z0-9-]*$`)

// maxHours is the most --max-hours a duration holds.
var maxHours = float64(math.MaxInt64) / float64(time.Hour)

// check checks the policy flags given of verb and returns the policy they
// ask (nil: none given). A switch's provider command is not filled in:
// it depends on the thread (see policyFor).
func (f *policyFlags) check(verb string) (*batonv1.ContinuationPolicy, error) {
	if len(f.given) == 0 {
		return nil, nil
	}
	p := &batonv1.ContinuationPolicy{}
	if f.given["on-limit"] {
		switch target, ok := strings.CutPrefix(f.onLimit, "switch:"); {
		case f.onLimit == "wait":
			p.OnLimit = string(domain.OnLimitWait)
		case f.onLimit == "stop":
		case ok:
			target, ret := strings.CutSuffix(target, ",return")
			if !providerName.MatchString(target) {
				return nil, usagef("%s: --on-limit %s: %q is not a provider name (want switch:PROVIDER or switch:PROVIDER,return)", verb, f.onLimit, target)
			}
			p.OnLimit, p.SwitchTo, p.Return = string(domain.OnLimitSwitch), target, ret
		default:
			return nil, usagef("%s: --on-limit must be wait, switch:PROVIDER[,return] or stop, got %q", verb, f.onLimit)
		}
	}
	if f.given["continue-text"] {
		if strings.TrimSpace(f.continueText) == "" {
			return nil, usagef("%s: --continue-text is blank", verb)
		}
		p.ContinueText = f.continueText
	}
	if f.given["until"] {
		if strings.TrimSpace(f.until) == "" {
			return nil, usagef("%s: --until is blank", verb)
		}
		p.Until = f.until
	}
	for _, d := range []struct {
		name string
		v    time.Duration
		to   **durationpb.Duration
	}{{"check-timeout", f.checkTimeout, &p.CheckTimeout}, {"max-wait", f.maxWait, &p.MaxWait},
		{"probe-interval", f.probeInterval, &p.ProbeInterval}, {"probe-ceiling", f.probeCeiling, &p.ProbeCeiling}} {
		if !f.given[d.name] {
			continue
		}
		if d.v < 0 {
			return nil, usagef("%s: --%s must not be negative, got %v", verb, d.name, d.v)
		}
		*d.to = durationpb.New(d.v)
	}
	for _, n := range []struct {
		name string
		v    int64
	}{{"max-runs", int64(f.maxRuns)}, {"max-probes", int64(f.maxProbes)}, {"max-tokens", f.maxTokens}} {
		if f.given[n.name] && (n.v < 0 || n.v > math.MaxUint32 && n.name != "max-tokens") {
			return nil, usagef("%s: --%s must be a count (0: the default), got %d", verb, n.name, n.v)
		}
	}
	if f.given["max-runs"] {
		p.MaxRuns = uint32(f.maxRuns)
	}
	if f.given["max-probes"] {
		p.MaxProbes = uint32(f.maxProbes)
	}
	if f.given["max-tokens"] {
		p.MaxTokens = f.maxTokens
	}
	if f.given["max-hours"] {
		if !(f.maxHours >= 0) || f.maxHours >= maxHours {
			return nil, usagef("%s: --max-hours must be from 0 (no bound) to less than %d, got %v", verb, int64(maxHours), f.maxHours)
		}
		p.MaxDuration = durationpb.New(time.Duration(f.maxHours * float64(time.Hour)))
	}
	if f.given["probe-factor"] {
		if f.probeFactor != 0 && (!(f.probeFactor >= 1) || math.IsInf(f.probeFactor, 0)) {
			return nil, usagef("%s: --probe-factor must be at least 1 (0: the default), got %v", verb, f.probeFactor)
		}
		p.ProbeFactor = f.probeFactor
	}
	if f.given["probe-ceiling"] {
		interval := domain.DefaultProbeInterval
		if f.given["probe-interval"] {
			interval = f.probeInterval
		}
		if f.probeCeiling != 0 && f.probeCeiling < interval {
			return nil, usagef("%s: --probe-ceiling %v is below the probe interval %v", verb, f.probeCeiling, interval)
		}
	}
	return p, nil
}

// policyFor is the policy for thread t: a switch to a provider the thread
// has not used runs that provider's usual command, as baton switch does
// (noCommand names a provider that has none).
func policyFor(t *batonv1.Thread, p *batonv1.ContinuationPolicy) (_ *batonv1.ContinuationPolicy, missing string) {
	if p.GetOnLimit() != string(domain.OnLimitSwitch) {
		return p, ""
	}
	if usedProvider(t, p.GetSwitchTo()) {
		return p, ""
	}
	pc := commandOfArgv(defaultCommand(p.GetSwitchTo()))
	if pc == nil {
		return nil, p.GetSwitchTo()
	}
	p.SwitchProviderCommand = pc
	return p, ""
}

// missingCommand names the provider policy p switches to that has no
// command for thread t ("" when none lacks one), as setPolicy would find
// it, without filling p in: a verb asks it before it writes anything.
func missingCommand(t *batonv1.Thread, p *batonv1.ContinuationPolicy) string {
	if p == nil {
		return ""
	}
	_, missing := policyFor(t, proto.CloneOf(p))
	return missing
}

// setPolicy sends thread t the policy the flags ask (none: nothing).
func setPolicy(ctx context.Context, verb string, c *client, idgen *ids.Allocator, t *batonv1.Thread, p *batonv1.ContinuationPolicy) error {
	if p == nil {
		return nil
	}
	p, missing := policyFor(t, p)
	if missing != "" {
		return noCommand(ctx, verb, c, missing)
	}
	if _, err := c.SetPolicy(ctx, &batonv1.SetPolicyRequest{CommandId: idgen.NewID("cmd"), ThreadId: t.GetId(), Policy: p}); err != nil {
		return rpcError("set policy", err)
	}
	return nil
}
