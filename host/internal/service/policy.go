package service

import (
	"context"
	"errors"
	"math"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	batonv1 "github.com/baton-run/baton/host/api/baton/v1"
	"github.com/baton-run/baton/host/internal/domain"
)

// The continuation policy: SetPolicy, and the policy CreateThread and
// SendMessage may carry (set with a command id derived from theirs, so a
// retried request sets it once).

// SetPolicy sets a thread's continuation policy (none: off).
func (s *Server) SetPolicy(ctx context.Context, req *batonv1.SetPolicyRequest) (*batonv1.Receipt, error) {
	id, err := s.commandID(req.GetCommandId())
	if err != nil {
		return nil, err
	}
	if err := required("thread_id", req.GetThreadId()); err != nil {
		return nil, err
	}
	p, err := policyOf("policy", req.GetPolicy())
	if err != nil {
		return nil, err
	}
	rc, err := s.setPolicy(ctx, "SetPolicy", id, req.GetThreadId(), p)
	if err != nil {
		return nil, err
	}
	return receiptPB(rc, ""), nil
}

// policyCommandID is the command id of the policy a create or a message
// carries: derived from the request's, so that a retry is the same command.
func policyCommandID(id string) string { return id + ":policy" }

// setPolicy dispatches SetPolicy.
func (s *Server) setPolicy(ctx context.Context, rpc, id, threadID string, p domain.ContinuationPolicy) (domain.Receipt, error) {
	rc, err := s.host.Dispatch(ctx, domain.Command{ID: id, ThreadID: threadID, Payload: domain.SetPolicy{Policy: p}})
	if errors.Is(err, domain.ErrNoProviderCommand) {
		// The domain knows which providers the thread has used; the field
		// is the API's.
		return rc, invalid("policy.switch_provider_command", "required: thread %s has not used %s, so there is no command of it to keep",
			threadID, p.SwitchTo)
	}
	return rc, s.toStatus(rpc, err)
}

// onLimits are the on_limit values a client may send.
var onLimits = map[string]domain.OnLimit{
	"": domain.OnLimitStop, "stop": domain.OnLimitStop, "wait": domain.OnLimitWait, "switch": domain.OnLimitSwitch,
}

// policyOf is a request's policy, checked field by field (errors name
// the field under prefix, as policy.max_wait); nil is off.
func policyOf(prefix string, pb *batonv1.ContinuationPolicy) (domain.ContinuationPolicy, error) {
	var p domain.ContinuationPolicy
	if pb == nil {
		return p, nil
	}
	field := func(name string) string { return prefix + "." + name }
	onLimit, ok := onLimits[pb.GetOnLimit()]
	if !ok {
		return p, invalid(field("on_limit"), "unknown %q; want wait or switch (empty: stop)", pb.GetOnLimit())
	}
	p.OnLimit = onLimit
	if onLimit == domain.OnLimitSwitch {
		if err := required(field("switch_to"), pb.GetSwitchTo()); err != nil {
			return p, err
		}
	} else {
		for _, f := range []struct {
			name string
			set  bool
		}{{"switch_to", pb.GetSwitchTo() != ""}, {"switch_model", pb.GetSwitchModel() != ""},
			{"switch_provider_command", len(pb.GetSwitchProviderCommand().GetArgv())+len(pb.GetSwitchProviderCommand().GetEnv()) > 0},
			{"return", pb.GetReturn()}} {
			if f.set {
				return p, invalid(field(f.name), "only with on_limit switch")
			}
		}
	}
	pc := pb.GetSwitchProviderCommand()
	if err := checkCommand(field("switch_provider_command"), pc); err != nil {
		return p, err
	}
	for _, f := range []struct{ name, v string }{{"switch_to", pb.GetSwitchTo()}, {"switch_model", pb.GetSwitchModel()}} {
		if err := checkID(field(f.name), f.v); err != nil {
			return p, err
		}
	}
	p.SwitchTo, p.SwitchModel, p.Return = pb.GetSwitchTo(), pb.GetSwitchModel(), pb.GetReturn()
	p.SwitchCommand = commandOf(pc)
	p.ContinueText = pb.GetContinueText()
	if p.ContinueText != "" && strings.TrimSpace(p.ContinueText) == "" {
		return p, invalid(field("continue_text"), "blank")
	}
	if pb.GetUntil() != "" && strings.TrimSpace(pb.GetUntil()) == "" {
		return p, invalid(field("until"), "blank")
	}
	p.Until = pb.GetUntil()
	var err error
	durations := []struct {
		name string
		pb   *durationpb.Duration
		to   *time.Duration
	}{{"probe_interval", pb.GetProbeInterval(), &p.Probe.Interval}, {"probe_ceiling", pb.GetProbeCeiling(), &p.Probe.Ceiling},
		{"max_wait", pb.GetMaxWait(), &p.MaxWait}, {"check_timeout", pb.GetCheckTimeout(), &p.CheckTimeout},
		{"max_duration", pb.GetMaxDuration(), &p.MaxDuration}}
	for _, d := range durations {
		if *d.to, err = duration(field(d.name), d.pb); err != nil {
			return p, err
		}
	}
	if f := pb.GetProbeFactor(); f != 0 && (f < 1 || math.IsInf(f, 0) || math.IsNaN(f)) {
		return p, invalid(field("probe_factor"), "must be at least 1 (0: the default, %v), got %v", domain.DefaultProbeFactor, f)
	}
	p.Probe.Factor = pb.GetProbeFactor()
	if p.Probe.Ceiling != 0 && p.Probe.Ceiling < p.Probe.Interval {
		return p, invalid(field("probe_ceiling"), "%v is below probe_interval %v", p.Probe.Ceiling, p.Probe.Interval)
	}
	if pb.GetMaxTokens() < 0 {
		return p, invalid(field("max_tokens"), "must not be negative, got %d", pb.GetMaxTokens())
	}
	p.MaxProbes, p.MaxRuns, p.MaxTokens = int(pb.GetMaxProbes()), int(pb.GetMaxRuns()), pb.GetMaxTokens()
	if err := p.Validate(); err != nil { // what the fields alone do not show
		return p, invalid(prefix, "%v", err)
	}
	return p, nil
}

// duration is a Duration field: unset is zero; it must be valid and not
// negative.
func duration(field string, d *durationpb.Duration) (time.Duration, error) {
	if d == nil {
		return 0, nil
	}
	if err := d.CheckValid(); err != nil {
		return 0, invalid(field, "%v", err)
	}
	v := d.AsDuration()
	if v < 0 {
		return 0, invalid(field, "must not be negative, got %v", v)
	}
	return v, nil
}
