package acp

import (
	"encoding/json"
	"errors"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/sourcegraph/jsonrpc2"

	"github.com/baton-run/baton/sdk"
)

// What an ACP agent says when its model hits a limit. Recorded from
// @zed-industries/claude-code-acp 0.16.2 (Claude Code 2.1.44 inside),
// signed in to a plan, on a 429 with the unified rate-limit headers of a
// spent five-hour window (testdata/acp/usage_limit.ndjson): no
// session/update about it; session/prompt fails with a JSON-RPC error
// {"code":-32603,"message":"Internal error: You've hit your limit ·
// resets 7:59pm (UTC)"}, no data. The agent turns the CLI's error result
// into that message, so the limit is read from the CLI's words: "You've
// hit your [5-hour|weekly|…] limit · resets TIME (ZONE)" (a spent window;
// "spend limit" and "out of usage credits" are credits), an older CLI's
// "usage limit reached|EPOCH", "Credit balance is too low", a 429 or 529
// in "API Error: …". An agent that gives a retry hint in the error's data
// ({"retryAfter": seconds}, {"retryAfterMs": ms}, {"resetsAt": Unix
// seconds}) gives the reset: a hint in seconds counts from the adapter's
// clock.

var (
	hitLimit   = regexp.MustCompile(`(?i)you've hit your ([a-z0-9 -]*?)\s*limit`)
	oldLimit   = regexp.MustCompile(`(?i)usage limit reached(?:\|(\d+))?`)
	resetsText = regexp.MustCompile(`resets (?:([A-Z][a-z]{2}) (\d{1,2}), )?(\d{1,2})(?::(\d{2}))?(am|pm) \(([^)]+)\)`)
)

// limitOf says which limit, if any, a failed session/prompt ended on.
// now is the adapter's clock.
func limitOf(callErr error, now time.Time) *sdk.Limit {
	var e *jsonrpc2.Error
	if !errors.As(callErr, &e) {
		return nil
	}
	text := e.Message
	var hint struct {
		RetryAfter   *float64 `json:"retryAfter"`
		RetryAfterMs *float64 `json:"retryAfterMs"`
		ResetsAt     *int64   `json:"resetsAt"`
	}
	if e.Data != nil {
		var s string
		if json.Unmarshal(*e.Data, &s) == nil && s != "" {
			text += ": " + s
		}
		_ = json.Unmarshal(*e.Data, &hint) // data that is no object gives no hint
	}
	lower := strings.ToLower(text)
	var l sdk.Limit
	hit := hitLimit.FindStringSubmatch(text)
	old := oldLimit.FindStringSubmatch(text)
	switch {
	case hit != nil && (strings.Contains(lower, "spend limit") || strings.Contains(lower, "credit")),
		strings.Contains(lower, "out of usage credits"), strings.Contains(lower, "credit balance is too low"):
		l.Kind = sdk.LimitCredits
	case hit != nil || old != nil:
		l.Kind = sdk.LimitUsageWindow
		if hit != nil {
			l.Scope = windowScope(strings.ToLower(hit[1]))
		}
	case strings.Contains(lower, "529") || strings.Contains(lower, "overloaded"):
		l.Kind = sdk.LimitOverload
	case strings.Contains(lower, "429") || strings.Contains(lower, "rate limit") || strings.Contains(lower, "rate_limit"):
		l.Kind = sdk.LimitRate
	case hint.RetryAfter != nil || hint.RetryAfterMs != nil || hint.ResetsAt != nil:
		l.Kind = sdk.LimitRate
	default:
		return nil
	}
	switch {
	case hint.ResetsAt != nil && *hint.ResetsAt > 0:
		l.ResetsAt = sdk.UnixSeconds(*hint.ResetsAt)
	case hint.RetryAfter != nil:
		l.ResetsAt = after(now, *hint.RetryAfter*float64(time.Second))
	case hint.RetryAfterMs != nil:
		l.ResetsAt = after(now, *hint.RetryAfterMs*float64(time.Millisecond))
	}
	if l.ResetsAt.IsZero() && len(old) > 1 && old[1] != "" {
		if sec, err := strconv.ParseInt(old[1], 10, 64); err == nil && sec > 0 {
			l.ResetsAt = sdk.UnixSeconds(sec)
		}
	}
	if l.ResetsAt.IsZero() {
		l.ResetsAt = resetsAt(text, now)
	}
	l.Message = strings.TrimPrefix(text, "Internal error: ")
	ev, _ := json.Marshal(struct {
		Error *jsonrpc2.Error `json:"error"`
	}{e})
	l.Evidence = sdk.LimitEvidence(ev)
	return &l
}

// windowScope names a window the way the CLI's rate_limit_event does.
func windowScope(name string) string {
	switch name {
	case "5-hour", "session":
		return "five_hour"
	case "weekly":
		return "seven_day"
	case "opus":
		return "seven_day_opus"
	case "sonnet":
		return "seven_day_sonnet"
	}
	return ""
}

// after is now plus a hint of d nanoseconds: none for a hint that is no
// positive duration.
func after(now time.Time, d float64) time.Time {
	if !(d > 0) || d > float64(1<<62) {
		return time.Time{}
	}
	return now.Add(time.Duration(d)).UTC()
}

var months = map[string]time.Month{"Jan": 1, "Feb": 2, "Mar": 3, "Apr": 4, "May": 5, "Jun": 6, "Jul": 7, "Aug": 8,
	"Sep": 9, "Oct": 10, "Nov": 11, "Dec": 12}

// resetsAt reads the CLI's "resets 7:59pm (UTC)" or "resets Dec 8,
// 7:53pm (Europe/Paris)": the such instant nearest after now (the text
// has no year, and no date when the reset is within a day). Zero when the
// text has none, or names a zone this host does not know.
func resetsAt(text string, now time.Time) time.Time {
	m := resetsText.FindStringSubmatch(text)
	if m == nil {
		return time.Time{}
	}
	loc, err := time.LoadLocation(m[6])
	if err != nil {
		return time.Time{}
	}
	hour, _ := strconv.Atoi(m[3])
	minute, _ := strconv.Atoi(m[4]) // "" (no minutes): 0
	if hour < 1 || hour > 12 || minute > 59 {
		return time.Time{}
	}
	hour %= 12
	if m[5] == "pm" {
		hour += 12
	}
	local := now.In(loc)
	if m[1] == "" {
		// The CLI shows the reset to the minute, rounded down, and only
		// while it lies ahead: a time up to an hour before now has just
		// passed (it is today's), an earlier one is tomorrow's.
		t := time.Date(local.Year(), local.Month(), local.Day(), hour, minute, 0, 0, loc)
		if !t.After(now.Add(-time.Hour)) {
			t = time.Date(local.Year(), local.Month(), local.Day()+1, hour, minute, 0, 0, loc)
		} else if t.After(now.Add(23 * time.Hour)) {
			t = time.Date(local.Year(), local.Month(), local.Day()-1, hour, minute, 0, 0, loc)
		}
		return t.UTC()
	}
	month, ok := months[m[1]]
	day, _ := strconv.Atoi(m[2])
	if !ok || day < 1 || day > 31 {
		return time.Time{}
	}
	t := time.Date(local.Year(), month, day, hour, minute, 0, 0, loc)
	if t.Day() != day { // no such day in that month
		return time.Time{}
	}
	if t.Before(now.Add(-24 * time.Hour)) {
		t = time.Date(local.Year()+1, month, day, hour, minute, 0, 0, loc)
	}
	return t.UTC()
}
