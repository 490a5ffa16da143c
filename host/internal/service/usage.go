package service

import (
	"context"
	"slices"

	batonv1 "github.com/baton-run/baton/host/api/baton/v1"
	"github.com/baton-run/baton/host/internal/domain"
	"github.com/baton-run/baton/host/internal/orchestrator"
)

// Usage reports what threads used, from their usage ledgers (see
// orchestrator/usage.go).
func (s *Server) Usage(_ context.Context, req *batonv1.UsageRequest) (*batonv1.UsageResponse, error) {
	by := domain.UsageBy(req.GetBy())
	if by != "" && !slices.Contains(domain.UsageBys, by) {
		return nil, invalid("by", "unknown grouping %q; want %s", by, domain.OneOf(domain.UsageBys...))
	}
	if err := checkID("thread_id", req.GetThreadId()); err != nil {
		return nil, err
	}
	r, err := s.host.Usage(orchestrator.UsageQuery{By: by, Since: instant(req.GetSince()), ThreadID: req.GetThreadId()})
	if err != nil {
		return nil, s.toStatus("Usage", err)
	}
	resp := &batonv1.UsageResponse{Total: usagePB(&r.Total)}
	for _, l := range r.Lines {
		resp.Lines = append(resp.Lines, &batonv1.UsageLine{Key: l.Key, Usage: usagePB(&l.Usage)})
	}
	return resp, nil
}

// Limits is each provider's latest word on its rate limits, the latest
// first.
func (s *Server) Limits(context.Context, *batonv1.LimitsRequest) (*batonv1.LimitsResponse, error) {
	limits, err := s.host.Limits()
	if err != nil {
		return nil, s.toStatus("Limits", err)
	}
	return &batonv1.LimitsResponse{Limits: list(limits, rateLimitPB)}, nil
}

// UsageReportOf is a usage report as the API gives it.
func UsageReportOf(r *batonv1.UsageResponse) orchestrator.UsageReport {
	out := orchestrator.UsageReport{Total: UsageOf(r.GetTotal())}
	for _, l := range r.GetLines() {
		out.Lines = append(out.Lines, domain.UsageLine{Key: l.GetKey(), Usage: UsageOf(l.GetUsage())})
	}
	return out
}

// LimitsOf is rate limits as the API gives them.
func LimitsOf(r *batonv1.LimitsResponse) []domain.RateLimit {
	return list(r.GetLimits(), rateLimitOf)
}

// UsageOf is usage as the API gives it (the zero Usage for none).
func UsageOf(u *batonv1.Usage) domain.Usage {
	if p := usageOf(u); p != nil {
		return *p
	}
	return domain.Usage{}
}

// summaryUsagePB is a thread's usage (unset: none).
func summaryUsagePB(u domain.Usage) *batonv1.Usage {
	if u == (domain.Usage{}) {
		return nil
	}
	return usagePB(&u)
}

func usagesPB(us []domain.Usage) []*batonv1.Usage {
	return list(us, func(u domain.Usage) *batonv1.Usage { return usagePB(&u) })
}

func usagesOf(us []*batonv1.Usage) []domain.Usage {
	return list(us, UsageOf)
}
