package domain

import (
	"math"
	"time"
)

// The provider's terms as the domain keeps them: the process a session
// runs, a request's kind, options and decision, a run's usage and failure,
// and the limits a provider reports. They are the domain's own types, not
// the sdk's, because they are stored: events, effects and the projection
// hold them, so their JSON is the log's schema, and a change to the
// plugin contract must not change what an old log means. Each JSON form is
// the one the log has always stored (field names, order, omitempty);
// sdkconv.go converts them from and to the sdk's, and nothing else does.

// ProviderCommand is the provider process a session runs.
type ProviderCommand struct {
	Argv []string `json:"argv"`
	// Env holds KEY=VALUE entries added to the plugin's own environment.
	Env []string `json:"env,omitempty"`
	// Agent and AgentVersion name the ACP Registry agent the command runs,
	// as installed by baton agents install (empty: a command given as
	// is).
	Agent        string `json:"agent,omitempty"`
	AgentVersion string `json:"agentVersion,omitempty"`
}

// RequestKind is what a provider asks in a request. The thread's policy
// answers approvals; questions need answers a policy cannot invent, so a
// policy declines them; a generic request (one the plugin does not know)
// is never answered by policy.
type RequestKind string

// Request kinds.
const (
	RequestPermission         RequestKind = "permission"           // use a tool
	RequestCommandApproval    RequestKind = "command_approval"     // run a command
	RequestFileChangeApproval RequestKind = "file_change_approval" // change files
	RequestPermissions        RequestKind = "permissions"          // widen the sandbox
	RequestUserInput          RequestKind = "user_input"           // a question for the user
	RequestGeneric            RequestKind = "generic"              // anything else
)

// OptionKind is what choosing a RequestOption does.
type OptionKind string

// Option kinds.
const (
	OptionAllowOnce    OptionKind = "allow_once"
	OptionAllowAlways  OptionKind = "allow_always"
	OptionRejectOnce   OptionKind = "reject_once"
	OptionRejectAlways OptionKind = "reject_always"
)

// RequestOption is one answer a provider offers for a request.
type RequestOption struct {
	ID    string     `json:"id"`
	Label string     `json:"label,omitempty"`
	Kind  OptionKind `json:"kind,omitempty"`
}

// RequestDecision is an answer to a request, and how the provider said
// the request was resolved.
type RequestDecision string

// Request decisions.
const (
	DecisionAccept           RequestDecision = "accept"
	DecisionAcceptForSession RequestDecision = "accept_for_session"
	DecisionDecline          RequestDecision = "decline"
	DecisionCancel           RequestDecision = "cancel"
	DecisionAnswer           RequestDecision = "answer"
)

// RequestDecisions are every answer a request takes, in the order they
// are offered.
var RequestDecisions = []RequestDecision{DecisionAccept, DecisionAcceptForSession, DecisionDecline, DecisionCancel, DecisionAnswer}

// Usage is token usage as the provider reports it.
type Usage struct {
	InputTokens       int64 `json:"inputTokens,omitempty"`
	OutputTokens      int64 `json:"outputTokens,omitempty"`
	CachedInputTokens int64 `json:"cachedInputTokens,omitempty"`
	ReasoningTokens   int64 `json:"reasoningTokens,omitempty"`
	TotalTokens       int64 `json:"totalTokens,omitempty"`
	// CostMicros is the cost the provider stated, in millionths of a US
	// dollar (0: it stated none; Baton never works one out).
	CostMicros int64 `json:"costMicros,omitempty"`
	// Model is the model the usage is of, when the provider names one.
	Model string `json:"model,omitempty"`
}

// Add adds o's counts to u: a run's usage is the sum of its attempts'. A
// negative count (which no provider means) counts as none, and a sum
// stops at math.MaxInt64 instead of wrapping round to a negative count.
// Model stays where both name the same one or one names none; of two it
// keeps the first in sort order (the same whichever side is added).
func (u *Usage) Add(o Usage) {
	u.InputTokens = addCount(u.InputTokens, o.InputTokens)
	u.OutputTokens = addCount(u.OutputTokens, o.OutputTokens)
	u.CachedInputTokens = addCount(u.CachedInputTokens, o.CachedInputTokens)
	u.ReasoningTokens = addCount(u.ReasoningTokens, o.ReasoningTokens)
	u.TotalTokens = addCount(u.TotalTokens, o.TotalTokens)
	u.CostMicros = addCount(u.CostMicros, o.CostMicros)
	switch {
	case u.Model == "":
		u.Model = o.Model
	case o.Model != "" && o.Model != u.Model:
		u.Model = min(u.Model, o.Model)
	}
}

// addCount is a+b over counts: negatives as 0, saturating at MaxInt64.
func addCount(a, b int64) int64 {
	a, b = max(a, 0), max(b, 0)
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// Failure says why something failed.
type Failure struct {
	Code    string `json:"code,omitempty"`
	Message string `json:"message"`
}

// RateLimit is a provider's word on one of its limits: how much of it is
// used and when it resets.
type RateLimit struct {
	ResetsAt    time.Time `json:"resetsAt,omitzero"`
	UsedPercent float64   `json:"usedPercent,omitempty"`
	Scope       string    `json:"scope,omitempty"`
	// Provider is whose limit it is, and At when it said so (the event's
	// time); a log from before has neither on its events, and its thread
	// says the thread's provider then.
	Provider string    `json:"provider,omitempty"`
	At       time.Time `json:"at,omitzero"`
}

// LimitKind is what sort of provider limit ended a turn.
type LimitKind string

// Limit kinds.
const (
	// LimitUsageWindow: the plan's usage for a window (five hours, a week)
	// is spent; it comes back at the window's reset.
	LimitUsageWindow LimitKind = "usage_window"
	// LimitRate: too many requests for now.
	LimitRate LimitKind = "rate_limit"
	// LimitCredits: the account's credits or billing stop it; it comes
	// back when someone tops it up.
	LimitCredits LimitKind = "credits"
	// LimitOverload: the provider is overloaded.
	LimitOverload LimitKind = "overload"
)

// Limit is a provider limit that ended a turn: the run is blocked, and
// the thread's continuation policy decides what follows.
type Limit struct {
	Kind LimitKind `json:"kind"`
	// ResetsAt is when the provider says the limit lifts (zero: it did
	// not say).
	ResetsAt time.Time `json:"resetsAt,omitzero"`
	// Scope names the limit in the provider's words (five_hour,
	// seven_day, primary, ...).
	Scope   string `json:"scope,omitempty"`
	Message string `json:"message,omitempty"`
	// Evidence is the raw frame (or frames) the limit was read from.
	Evidence string `json:"evidence,omitempty"`
}
