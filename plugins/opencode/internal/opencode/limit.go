package opencode

import (
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/baton-run/baton/sdk"
)

// Limits, as opencode 1.18.33 reports them (recorded against the scripted
// Anthropic Messages API, see .notes/opencode-probe.md "Limits"):
//
//   - A 429 (or 529, 503) is retryable: opencode retries the model call by
//     itself (recorded: attempts 1, 2, 3 about 1-2 s apart, and no sign of
//     a cap), and says so with session.status
//     {"type":"retry","attempt":N,"message":<the API's error message>,
//     "next":<Unix ms of its next call>} (the next call waits the API's
//     retry-after). Nothing in it says which limit; the message does.
//     A limit that does not clear soon would keep the turn running
//     unseen: once opencode's next call is more than retryPatience away,
//     or it is at its retryGiveUp-th attempt, the plugin aborts the turn,
//     which ends failed with the limit, its reset opencode's next call.
//   - An error opencode does not retry (a 400 "credit balance is too
//     low", a 402) ends the turn with session.error {"error":{"name":
//     "APIError","data":{"message","statusCode","isRetryable":false,
//     "responseHeaders":{...},"responseBody":"..."}}}.

const (
	// retryPatience is how far ahead opencode's next call may lie for the
	// plugin to let it retry on its own.
	retryPatience = time.Minute
	// retryGiveUp is the retry attempt at which the plugin stops waiting
	// for opencode's retries.
	retryGiveUp = 3
)

// limitKindOf says what sort of limit an error is, from its HTTP status
// (0: unknown) and its message; ok is false for no limit.
func limitKindOf(status int, message string) (sdk.LimitKind, bool) {
	m := strings.ToLower(message)
	switch {
	case status == 402 || strings.Contains(m, "credit balance") || strings.Contains(m, "billing") ||
		strings.Contains(m, "insufficient_quota") || strings.Contains(m, "quota exceeded"):
		return sdk.LimitCredits, true
	case strings.Contains(m, "usage limit"):
		return sdk.LimitUsageWindow, true
	case status == 529 || status == 503 || strings.Contains(m, "overloaded"):
		return sdk.LimitOverload, true
	case status == 429 || strings.Contains(m, "rate limit") || strings.Contains(m, "too many requests"):
		return sdk.LimitRate, true
	}
	return "", false
}

// errorLimit is the limit a session error names, or nil. now is when it
// arrived.
func errorLimit(e *errorInfo, raw json.RawMessage, now time.Time) *sdk.Limit {
	if e == nil || e.Name != "APIError" {
		return nil
	}
	var status int
	if f, err := strconv.ParseFloat(strings.Trim(string(e.Data.StatusCode), `"`), 64); err == nil && f >= 0 && f < 1000 {
		status = int(f)
	}
	kind, ok := limitKindOf(status, e.Data.Message)
	if !ok {
		return nil
	}
	var headers map[string]any
	_ = json.Unmarshal(e.Data.ResponseHeaders, &headers)
	h := func(name string) string {
		for k, v := range headers {
			if s, ok := v.(string); ok && strings.EqualFold(k, name) {
				return strings.TrimSpace(s)
			}
		}
		return ""
	}
	// The API's own clock, where it said; else when the error came.
	at := now
	if d, err := time.Parse(time.RFC1123, h("date")); err == nil {
		at = d
	}
	if kind == sdk.LimitRate && h("anthropic-ratelimit-unified-status") == "rejected" {
		kind = sdk.LimitUsageWindow // the plan's window (five_hour, seven_day) is spent
	}
	l := &sdk.Limit{Kind: kind, Message: e.Data.Message, Evidence: sdk.LimitEvidence(raw)}
	if v, err := strconv.ParseInt(h("anthropic-ratelimit-unified-reset"), 10, 64); err == nil {
		l.ResetsAt = sdk.UnixSeconds(v)
		l.Scope = h("anthropic-ratelimit-unified-representative-claim")
	} else if v, err := strconv.ParseFloat(h("retry-after"), 64); err == nil && v > 0 && v <= maxSeconds {
		l.ResetsAt = at.Add(time.Duration(v * float64(time.Second)))
	}
	if !l.ResetsAt.After(at) || l.ResetsAt.Unix() > sdk.MaxUnixSeconds {
		l.ResetsAt = time.Time{}
	}
	return l
}

// maxSeconds bounds a retry-after: a week.
const maxSeconds = 7 * 24 * 3600

// retryLimit is the limit a retry status names when the plugin should stop
// waiting for opencode's retries (see retryPatience), or nil. now is when
// it arrived.
func retryLimit(p statusEvent, raw json.RawMessage, now time.Time) *sdk.Limit {
	next := unixMillis(p.Status.Next)
	if next.Sub(now) <= retryPatience && p.Status.Attempt < retryGiveUp {
		return nil
	}
	kind, ok := limitKindOf(0, p.Status.Message)
	if !ok {
		// opencode retries what the API says is retryable: a limit of
		// some sort, the message says no more.
		kind = sdk.LimitRate
	}
	l := &sdk.Limit{Kind: kind, Message: p.Status.Message, Evidence: sdk.LimitEvidence(raw)}
	if next.After(now) {
		l.ResetsAt = next
	}
	return l
}

// unixMillis is the instant of a JSON number of Unix milliseconds (zero
// for anything else, or one no event can carry).
func unixMillis(raw json.RawMessage) time.Time {
	f, err := strconv.ParseFloat(string(raw), 64)
	if err != nil || math.IsNaN(f) || f <= 0 || f/1000 > sdk.MaxUnixSeconds {
		return time.Time{}
	}
	return time.UnixMilli(int64(f)).UTC()
}
