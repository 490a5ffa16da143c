package acp

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
	_ "time/tzdata" // zones in the CLI's reset texts, wherever the test runs

	gocmp "github.com/google/go-cmp/cmp"
	"github.com/sourcegraph/jsonrpc2"
	"pgregory.net/rapid"

	"github.com/baton-run/baton/sdk"
	"github.com/baton-run/baton/sdk/clock"
)

func rpcErr(msg string, data string) error {
	e := &jsonrpc2.Error{Code: jsonrpc2.CodeInternalError, Message: msg}
	if data != "" {
		raw := json.RawMessage(data)
		e.Data = &raw
	}
	return fmt.Errorf("session/prompt: %w", e)
}

// Each shape an ACP agent's limit comes in, read at a fixed instant (the
// adapter's clock): the recorded claude-code-acp message, the CLI's other
// texts (a named window, a reset with a date, a zone), an older CLI's
// "usage limit reached|EPOCH", retry hints in the error's data, credits,
// overload and rate limits; and errors that are no limit. A reset that is
// no instant (a malformed time or date, an unknown zone, a hint that is no
// positive duration) is zero.
func TestLimitOf(t *testing.T) {
	now := time.Date(2026, 12, 1, 20, 0, 0, 0, time.UTC)
	ev := func(msg, data string) string {
		e := &jsonrpc2.Error{Code: jsonrpc2.CodeInternalError, Message: msg}
		if data != "" {
			raw := json.RawMessage(data)
			e.Data = &raw
		}
		b, _ := json.Marshal(struct {
			Error *jsonrpc2.Error `json:"error"`
		}{e})
		return string(b)
	}
	cases := []struct {
		name, msg, data string
		want            *sdk.Limit
	}{
		{"recorded", "Internal error: You've hit your limit · resets 7:59pm (UTC)", "",
			&sdk.Limit{Kind: sdk.LimitUsageWindow, ResetsAt: time.Date(2026, 12, 1, 19, 59, 0, 0, time.UTC)}},
		{"tomorrow", "Internal error: You've hit your limit · resets 6:59pm (UTC)", "",
			&sdk.Limit{Kind: sdk.LimitUsageWindow, ResetsAt: time.Date(2026, 12, 2, 18, 59, 0, 0, time.UTC)}},
		{"later today", "Internal error: You've hit your 5-hour limit · resets 11pm (UTC)", "",
			&sdk.Limit{Kind: sdk.LimitUsageWindow, Scope: "five_hour", ResetsAt: time.Date(2026, 12, 1, 23, 0, 0, 0, time.UTC)}},
		{"this minute, rounded down", "Internal error: You've hit your 5-hour limit · resets 8pm (UTC)", "",
			&sdk.Limit{Kind: sdk.LimitUsageWindow, Scope: "five_hour", ResetsAt: time.Date(2026, 12, 1, 20, 0, 0, 0, time.UTC)}},
		{"just passed", "Internal error: You've hit your 5-hour limit · resets 7:30pm (UTC)", "",
			&sdk.Limit{Kind: sdk.LimitUsageWindow, Scope: "five_hour", ResetsAt: time.Date(2026, 12, 1, 19, 30, 0, 0, time.UTC)}},
		{"weekly, a date in a zone", "Internal error: You've hit your weekly limit · resets Dec 8, 7:53pm (Europe/Paris)", "",
			&sdk.Limit{Kind: sdk.LimitUsageWindow, Scope: "seven_day", ResetsAt: time.Date(2026, 12, 8, 18, 53, 0, 0, time.UTC)}},
		{"a date next year", "Internal error: You've hit your Opus limit · resets Jan 2, 9am (UTC)", "",
			&sdk.Limit{Kind: sdk.LimitUsageWindow, Scope: "seven_day_opus", ResetsAt: time.Date(2027, 1, 2, 9, 0, 0, 0, time.UTC)}},
		{"no such day", "Internal error: You've hit your limit · resets Feb 30, 9am (UTC)", "",
			&sdk.Limit{Kind: sdk.LimitUsageWindow}},
		{"no such hour", "Internal error: You've hit your limit · resets 13:99pm (UTC)", "",
			&sdk.Limit{Kind: sdk.LimitUsageWindow}},
		{"unknown zone", "Internal error: You've hit your limit · resets 3pm (Nowhere/Else)", "",
			&sdk.Limit{Kind: sdk.LimitUsageWindow}},
		{"older CLI", "Internal error: Claude AI usage limit reached|1796160000", "",
			&sdk.Limit{Kind: sdk.LimitUsageWindow, ResetsAt: time.Unix(1796160000, 0).UTC()}},
		{"older CLI, no instant", "Internal error: Claude AI usage limit reached|99999999999999999999", "",
			&sdk.Limit{Kind: sdk.LimitUsageWindow}},
		{"retry hint", "Internal error", `{"retryAfter": 30}`,
			&sdk.Limit{Kind: sdk.LimitRate, ResetsAt: now.Add(30 * time.Second)}},
		{"retry hint in ms on a 429", "Internal error: API Error: Request rejected (429)", `{"retryAfterMs": 1500}`,
			&sdk.Limit{Kind: sdk.LimitRate, ResetsAt: now.Add(1500 * time.Millisecond)}},
		{"reset instant in data", "Internal error: rate limit", `{"resetsAt": 1796160000}`,
			&sdk.Limit{Kind: sdk.LimitRate, ResetsAt: time.Unix(1796160000, 0).UTC()}},
		{"hint no duration", "Internal error: rate limit", `{"retryAfter": -1}`, &sdk.Limit{Kind: sdk.LimitRate}},
		{"hint too long", "Internal error: rate limit", `{"retryAfter": 1e300}`, &sdk.Limit{Kind: sdk.LimitRate}},
		{"data text", "Internal error", `"Credit balance is too low"`, &sdk.Limit{Kind: sdk.LimitCredits}},
		{"spend limit", "Internal error: You've hit your monthly spend limit", "", &sdk.Limit{Kind: sdk.LimitCredits}},
		{"overload", "Internal error: API Error: 529 Overloaded.", "", &sdk.Limit{Kind: sdk.LimitOverload}},
		{"no limit", "Internal error: boom", "", nil},
		{"data no object", "Internal error: boom", `[1,2]`, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := limitOf(rpcErr(c.msg, c.data), now)
			if c.want != nil {
				c.want.Evidence = ev(c.msg, c.data)
				text := c.msg
				var s string
				if json.Unmarshal([]byte(c.data), &s) == nil {
					text += ": " + s
				}
				c.want.Message = strings.TrimPrefix(text, "Internal error: ")
			}
			if diff := gocmp.Diff(c.want, got); diff != "" {
				t.Errorf("limit (-want +got):\n%s", diff)
			}
		})
	}
	if l := limitOf(errors.New("the agent is gone"), now); l != nil {
		t.Errorf("a failure that is no JSON-RPC error: limit %+v", l)
	}
}

// A reset read from "resets H[:MM]am|pm (UTC)" is the such instant that
// lies within an hour before now (the CLI rounds down to the minute: a
// reset that just passed) or within 23 hours after it.
func TestResetsAtProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		now := time.Unix(rapid.Int64Range(0, 4_000_000_000).Draw(t, "now"), 0).UTC()
		h, m := rapid.IntRange(1, 12).Draw(t, "hour"), rapid.IntRange(0, 59).Draw(t, "minute")
		pm := rapid.Bool().Draw(t, "pm")
		suffix := "am"
		hour := h % 12
		if pm {
			suffix, hour = "pm", hour+12
		}
		got := resetsAt(fmt.Sprintf("resets %d:%02d%s (UTC)", h, m, suffix), now)
		if !got.After(now.Add(-time.Hour)) || got.After(now.Add(23*time.Hour)) || got.Hour() != hour || got.Minute() != m || got.Second() != 0 {
			t.Fatalf("resets %d:%02d%s at %v: %v", h, m, suffix, now, got)
		}
	})
}

// A failed prompt's retry hint counts from the normalizer's clock (the
// adapter's: WithClock), and the limit is on the turn's terminal.
func TestRetryHintCountsFromTheClock(t *testing.T) {
	fc := clock.NewFake(time.Date(2026, 12, 1, 20, 0, 0, 0, time.UTC))
	if a := New(nil, WithClock(fc)); a.clock != fc {
		t.Fatalf("WithClock: the adapter's clock is %v", a.clock)
	}
	n := newNormalizer("s", "p")
	n.now = fc.Now
	n.startTurn()
	fc.Advance(time.Hour)
	evs := n.endTurn(&promptResult{}, rpcErr("Internal error", `{"retryAfter": 5}`), true)
	term := evs[len(evs)-1]
	if want := time.Date(2026, 12, 1, 21, 0, 5, 0, time.UTC); term.Status != sdk.TurnFailed || term.Limit == nil || !term.Limit.ResetsAt.Equal(want) {
		t.Fatalf("terminal %+v (limit %+v); want failed on a limit that resets at %v", term, term.Limit, want)
	}
}

// FuzzLimitOf: whatever message and data a failed prompt carries, reading
// its limit does not panic, a limit has a known kind, its reset is zero or
// an instant an event can carry, and its evidence is bounded.
func FuzzLimitOf(f *testing.F) {
	f.Add("Internal error: You've hit your limit · resets 7:59pm (UTC)", "") // recorded (testdata/acp/usage_limit.ndjson)
	f.Add("Internal error: You've hit your weekly limit · resets Dec 8, 7:53pm (UTC)", "")
	f.Add("Internal error: Claude AI usage limit reached|1760000400", "")
	f.Add("Internal error", `{"retryAfter": 30}`)
	f.Add("Internal error", `{"retryAfterMs": 1e308, "resetsAt": -1}`)
	f.Add("Internal error", `"Credit balance is too low"`)
	f.Add("Internal error: API Error: 529 Overloaded.", "null")
	now := time.Date(2026, 12, 1, 20, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, msg, data string) {
		if data != "" && !json.Valid([]byte(data)) {
			return // a JSON-RPC error's data is JSON
		}
		l := limitOf(rpcErr(msg, data), now)
		if l == nil {
			return
		}
		switch {
		case l.Kind != sdk.LimitUsageWindow && l.Kind != sdk.LimitRate && l.Kind != sdk.LimitCredits && l.Kind != sdk.LimitOverload:
			t.Fatalf("kind %q", l.Kind)
		case len(l.Evidence) > sdk.MaxLimitEvidence:
			t.Fatalf("%d bytes of evidence", len(l.Evidence))
		case !l.ResetsAt.IsZero() && (l.ResetsAt.Year() < 1970 || l.ResetsAt.Unix() > sdk.MaxUnixSeconds):
			t.Fatalf("reset %v is no instant an event carries", l.ResetsAt)
		}
		if _, err := json.Marshal(sdk.RuntimeEvent{Kind: sdk.EventTurnTerminal, Limit: l}); err != nil {
			t.Fatalf("the event does not encode: %v", err)
		}
	})
}
