package claude

import (
	"encoding/json"
	"fmt"
	"testing"

	gocmp "github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"

	"github.com/baton-run/baton/sdk"
)

// resetSecond draws a resetsAt: plausible ones, ones near the ends of what
// an event carries, and any int64 at all.
func resetSecond() *rapid.Generator[int64] {
	return rapid.OneOf(rapid.Int64Range(1_700_000_000, 2_000_000_000), rapid.Int64Range(-10, 10),
		rapid.Int64Range(sdk.MaxUnixSeconds-10, sdk.MaxUnixSeconds+10), rapid.Int64())
}

func rateLimitLine(sec int64, utilization float64) []byte {
	return fmt.Appendf(nil, `{"type":"rate_limit_event","rate_limit_info":{"status":"allowed_warning","resetsAt":%d,`+
		`"rateLimitType":"five_hour","utilization":%v}}`, sec, utilization)
}

// A rate_limit_event's resetsAt (Unix seconds) is the event's reset
// instant: that very second in UTC, later for a later second, unknown for
// a second no event can carry; utilization is a percentage; and the event
// always encodes (a reset past 9999 used to make it fail).
func TestRateLimitResetProperties(tt *testing.T) {
	rapid.Check(tt, func(t *rapid.T) {
		sec, later := resetSecond().Draw(t, "resetsAt"), resetSecond().Draw(t, "later")
		if later < sec {
			sec, later = later, sec
		}
		u := rapid.Float64Range(0, 1).Draw(t, "utilization")
		evs := feed(tt, newNormalizer("", "/w"), [][]byte{rateLimitLine(sec, u), rateLimitLine(later, u)})
		want := []sdk.RateLimit{{ResetsAt: sdk.UnixSeconds(sec), UsedPercent: u * 100, Scope: "five_hour"},
			{ResetsAt: sdk.UnixSeconds(later), UsedPercent: u * 100, Scope: "five_hour"}}
		var got []sdk.RateLimit
		for _, ev := range evs {
			if ev.Kind != sdk.EventRateLimit || ev.RateLimit == nil || ev.Title != "allowed_warning" {
				t.Fatalf("event %+v, want rate limits only", ev)
			}
			got = append(got, *ev.RateLimit)
			if _, err := json.Marshal(ev); err != nil {
				t.Fatalf("the event does not encode: %v", err)
			}
		}
		if diff := gocmp.Diff(want, got); diff != "" {
			t.Fatalf("rate limits (-want +got):\n%s", diff)
		}
		if r := got[0].ResetsAt; !r.IsZero() && r.Unix() != sec {
			t.Fatalf("resetsAt %d came back as %d", sec, r.Unix())
		}
		if a, b := got[0].ResetsAt, got[1].ResetsAt; !a.IsZero() && !b.IsZero() && b.Before(a) {
			t.Fatalf("resetsAt %d is before %d: %v < %v", later, sec, b, a)
		}
	})
}
