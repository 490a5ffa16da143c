package domain

import "github.com/baton-run/baton/sdk"

// The sdk edge: the one place where the provider's terms cross between the
// plugin contract (the sdk's types) and the domain's own (providerterms.go),
// one function per type and direction. What a provider reports comes in
// through the ...FromSDK functions as the domain ingests its events
// (provider.go); what the host tells a plugin (the command a session
// runs, an answer to a request) goes out through the ...ToSDK ones. A
// field the sdk adds reaches the log only when a function here copies it.

// CommandToSDK is the process a session runs, as a plugin is told it.
func CommandToSDK(c ProviderCommand) sdk.ProviderCommand {
	return sdk.ProviderCommand{Argv: c.Argv, Env: c.Env}
}

// DecisionToSDK is an answer to a request, as its plugin is given it.
func DecisionToSDK(d RequestDecision) sdk.Decision { return sdk.Decision(d) }

// decisionFromSDK is how a provider said a request was resolved.
func decisionFromSDK(d sdk.Decision) RequestDecision { return RequestDecision(d) }

// requestKindFromSDK is what a provider's request asks.
func requestKindFromSDK(k sdk.RequestKind) RequestKind { return RequestKind(k) }

// optionsFromSDK are the answers a provider offers for a request (nil for
// none).
func optionsFromSDK(opts []sdk.RequestOption) []RequestOption {
	if opts == nil {
		return nil
	}
	out := make([]RequestOption, len(opts))
	for i, o := range opts {
		out[i] = RequestOption{ID: o.ID, Label: o.Label, Kind: OptionKind(o.Kind)}
	}
	return out
}

// usageFromSDK is a provider's report of the tokens a turn used.
func usageFromSDK(u sdk.Usage) Usage {
	return Usage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, CachedInputTokens: u.CachedInputTokens,
		ReasoningTokens: u.ReasoningTokens, TotalTokens: u.TotalTokens, CostMicros: u.CostMicros, Model: u.Model}
}

// failureFromSDK is why a provider says its turn or process failed (nil:
// it did not say).
func failureFromSDK(f *sdk.Failure) *Failure {
	if f == nil {
		return nil
	}
	return &Failure{Code: f.Code, Message: f.Message}
}

// rateLimitFromSDK is a provider's word on one of its limits.
func rateLimitFromSDK(l sdk.RateLimit) RateLimit {
	return RateLimit{ResetsAt: l.ResetsAt, UsedPercent: l.UsedPercent, Scope: l.Scope}
}

// limitFromSDK is the provider limit that ended a turn.
func limitFromSDK(l sdk.Limit) Limit {
	return Limit{Kind: LimitKind(l.Kind), ResetsAt: l.ResetsAt, Scope: l.Scope, Message: l.Message, Evidence: l.Evidence}
}
