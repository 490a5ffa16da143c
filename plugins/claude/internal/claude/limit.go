package claude

import (
	"cmp"
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/baton-run/baton/sdk"
)

// What Claude Code 2.1.332 sends when a model request fails on a limit
// (probed against the scripted model server; .notes/claude-probe.md):
//   - signed in to a plan (OAuth), a 429 with the unified rate-limit
//     headers (anthropic-ratelimit-unified-status: rejected, -reset,
//     -representative-claim five_hour|seven_day): a rate_limit_event with
//     status "rejected", resetsAt and rateLimitType, no retry, then a
//     made-up assistant message (error "rate_limit") and a result with
//     is_error, api_error_status 429, api_error "usage_limit_reached" and
//     the text "You've hit your 5-hour limit · resets 7:50pm (UTC)";
//   - with an API key, the same 429 is retried (system api_retry) and then
//     ends as a result with api_error_status 429, api_error_type
//     rate_limit_error and no rate_limit_event;
//   - a credit balance that is too low (400 invalid_request_error
//     "Your credit balance is too low…"): an assistant message with error
//     "billing_error" and a result "Credit balance is too low";
//   - 529 overloaded_error: api_retry, then api_error_status 529,
//     api_error_type overloaded_error.
// Older CLIs ended such a turn with the text "Claude AI usage limit
// reached|EPOCH", the reset after the bar.

// usageLimitText finds an older CLI's "usage limit reached|EPOCH"; the
// epoch is any run of digits (too long for int64: no instant).
var usageLimitText = regexp.MustCompile(`(?i)usage limit reached(?:\|(\d+))?`)

// limit says which provider limit, if any, a failed result ended the turn
// on, from the result and what the turn kept (see rootTurn).
func (t *rootTurn) limit(r resultFrame, raw json.RawMessage) *sdk.Limit {
	status := 0
	if r.APIErrorStatus != nil {
		status = *r.APIErrorStatus
	}
	text := cmp.Or(r.Result, strings.Join(r.Errors, "; "))
	var l sdk.Limit
	old := usageLimitText.FindStringSubmatch(text)
	ev := t.rejected
	switch {
	case ev != nil && ev.RateLimitType == "overage":
		// What is spent is the usage credits beyond the plan.
		l.Kind = sdk.LimitCredits
	case r.APIError == "usage_limit_reached" || ev != nil && isWindow(ev.RateLimitType) || old != nil:
		l.Kind = sdk.LimitUsageWindow
	case t.apiError == "billing_error" || r.APIErrorType == "billing_error" || status == 402 ||
		strings.Contains(strings.ToLower(text), "credit balance is too low"):
		l.Kind = sdk.LimitCredits
	case status == 529 || r.APIErrorType == "overloaded_error":
		l.Kind = sdk.LimitOverload
	case status == 429 || r.APIErrorType == "rate_limit_error" || ev != nil:
		l.Kind = sdk.LimitRate
	default:
		return nil
	}
	if ev != nil {
		l.Scope = ev.RateLimitType
		if ev.ResetsAt != nil {
			l.ResetsAt = resetAt(*ev.ResetsAt)
		}
	}
	if l.ResetsAt.IsZero() && len(old) > 1 && old[1] != "" {
		if sec, err := strconv.ParseInt(old[1], 10, 64); err == nil {
			l.ResetsAt = resetAt(sec)
		}
	}
	l.Message = text
	l.Evidence = sdk.LimitEvidence(t.rejectedRaw, raw)
	return &l
}

// isWindow says whether a rate limit type is a plan's usage window (the
// five hours, the week, a model's week).
func isWindow(typ string) bool {
	return strings.HasPrefix(typ, "five_hour") || strings.HasPrefix(typ, "seven_day")
}

// resetAt is a reset given in Unix seconds: none for 0 or less, or
// past what an instant can be.
func resetAt(sec int64) time.Time {
	if sec <= 0 {
		return time.Time{}
	}
	return sdk.UnixSeconds(sec)
}
