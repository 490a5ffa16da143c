package codex

import (
	"encoding/json"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/baton-run/baton/sdk"
)

// Limits, as codex 0.171.0 reports them (recorded against the scripted
// Responses API, see .notes/codex-probe.md "Limits"): a turn that fails on
// one ends with turn/completed, status "failed", whose error.codexErrorInfo
// says which:
//
//   - "usageLimitExceeded": a 429 with error.type usage_limit_reached (the
//     plan's window is spent; message "You’ve hit your usage limit. …"),
//     but also usage_not_included ("To use Codex with your ChatGPT plan,
//     upgrade to Plus …") and a response.failed insufficient_quota ("Quota
//     exceeded. Check your plan and billing details."): only the message
//     tells them apart. The reset is not in the error: codex sends the
//     429's x-codex-* headers as an account/rateLimits/updated snapshot just
//     before, whose spent window (usedPercent 100) carries resetsAt.
//   - "rateLimitExceeded": a response.failed rate_limit_exceeded ("… Please
//     try again in 1.5s.").
//   - {"responseTooManyFailedAttempts":{"httpStatusCode":429}}: a plain 429
//     once codex's own retries are spent (also httpConnectionFailed,
//     responseStreamConnectionFailed, responseStreamDisconnected).
//   - "serverOverloaded": a 503 server_is_overloaded / slow_down.

// limitSnapshot is the last rate-limit snapshot codex sent for a limit id.
type limitSnapshot struct {
	p   rateLimitsNotification
	raw json.RawMessage // the frame
}

// retryIn is codex's own reading of a rate limit's "try again in" hint.
var retryIn = regexp.MustCompile(`(?i)try again in\s*(\d+(?:\.\d+)?)\s*(s|ms|seconds?)\b`)

// maxRetryIn bounds a "try again in" hint (a longer one is no rate limit
// hint but noise).
const maxRetryIn = 7 * 24 * time.Hour

// limitKind says which limit a turn error's codexErrorInfo names.
func limitKind(info json.RawMessage, message string) (sdk.LimitKind, bool) {
	var name string
	if json.Unmarshal(info, &name) == nil {
		switch name {
		case "usageLimitExceeded":
			if strings.Contains(strings.ToLower(message), "usage limit") {
				return sdk.LimitUsageWindow, true
			}
			return sdk.LimitCredits, true
		case "rateLimitExceeded":
			return sdk.LimitRate, true
		case "serverOverloaded":
			return sdk.LimitOverload, true
		}
		return "", false
	}
	var obj map[string]struct {
		HTTPStatusCode *int `json:"httpStatusCode"`
	}
	if json.Unmarshal(info, &obj) != nil {
		return "", false
	}
	for _, k := range []string{"responseTooManyFailedAttempts", "httpConnectionFailed", "responseStreamConnectionFailed",
		"responseStreamDisconnected"} {
		v, ok := obj[k]
		if !ok || v.HTTPStatusCode == nil {
			continue
		}
		switch *v.HTTPStatusCode {
		case 429:
			return sdk.LimitRate, true
		case 402:
			return sdk.LimitCredits, true
		case 503, 529:
			return sdk.LimitOverload, true
		}
	}
	return "", false
}

// frameOf is a notification's frame as the evidence of a limit keeps it
// (the handler sees the decoded frame: codex's emittedAtMs is not in it).
func frameOf(method string, params json.RawMessage) json.RawMessage {
	b, err := json.Marshal(struct {
		Method string          `json:"method"`
		Params json.RawMessage `json:"params,omitempty"`
	}{method, params})
	if err != nil { // params that are no JSON: they were decoded, so never
		return nil
	}
	return b
}

// limit is the Limit of a failed turn, or nil when its error is no limit.
// raw is the turn/completed frame.
func (n *normalizer) limit(t turn, raw json.RawMessage) *sdk.Limit {
	if t.Status != "failed" || t.Error == nil {
		return nil
	}
	kind, ok := limitKind(t.Error.CodexErrorInfo, t.Error.Message)
	if !ok {
		return nil
	}
	// When codex said it: the turn's completedAt (the process's clock,
	// and a replay's), else now.
	at := n.now()
	if t.CompletedAt != nil {
		if c := sdk.UnixSeconds(*t.CompletedAt); !c.IsZero() {
			at = c
		}
	}
	l := &sdk.Limit{Kind: kind, Message: t.Error.Message}
	evidence := []json.RawMessage{raw}
	switch kind {
	case sdk.LimitUsageWindow:
		// The spent window of the last snapshot: the latest reset among
		// the windows at 100%.
		for _, id := range sortedKeys(n.snapshots) {
			s := n.snapshots[id]
			for _, w := range []struct {
				name string
				w    *rateLimitWindow
			}{{"primary", s.p.RateLimits.Primary}, {"secondary", s.p.RateLimits.Secondary}} {
				if w.w == nil || w.w.UsedPercent < 100 || w.w.ResetsAt == nil {
					continue
				}
				r := sdk.UnixSeconds(*w.w.ResetsAt)
				if r.IsZero() || !r.After(at) || !r.After(l.ResetsAt) {
					continue
				}
				l.ResetsAt, l.Scope = r, strings.TrimPrefix(deref(s.p.RateLimits.LimitID)+"/"+w.name, "/")
				evidence = []json.RawMessage{s.raw, raw}
			}
		}
	case sdk.LimitRate:
		if m := retryIn.FindStringSubmatch(t.Error.Message); m != nil {
			v, err := strconv.ParseFloat(m[1], 64)
			unit := time.Second
			if strings.EqualFold(m[2], "ms") {
				unit = time.Millisecond
			}
			// (An instant past what an event carries is no instant.)
			if d := time.Duration(v * float64(unit)); err == nil && d > 0 && d <= maxRetryIn && at.Add(d).Unix() <= sdk.MaxUnixSeconds {
				l.ResetsAt = at.Add(d)
			}
		}
	}
	l.Evidence = sdk.LimitEvidence(evidence...)
	return l
}

func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }
