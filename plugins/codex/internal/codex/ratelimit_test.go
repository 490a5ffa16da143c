package codex

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"

	"github.com/baton-run/baton/sdk"
)

// resetSecond draws a resetsAt: plausible ones, ones near the ends of what
// an event carries, and any int64 at all.
func resetSecond() *rapid.Generator[int64] {
	return rapid.OneOf(rapid.Int64Range(1_700_000_000, 2_000_000_000), rapid.Int64Range(-10, 10),
		rapid.Int64Range(sdk.MaxUnixSeconds-10, sdk.MaxUnixSeconds+10), rapid.Int64())
}

func rateLimitFrame(sec int64, used float64) string {
	return fmt.Sprintf(`{"method":"account/rateLimits/updated","params":{"rateLimits":{"limitId":"codex",`+
		`"primary":{"usedPercent":%v,"resetsAt":%d,"windowDurationMins":300},"secondary":null}}}`, used, sec)
}

// A window's resetsAt (Unix seconds) is the event's reset instant: that
// very second in UTC, later for a later second, unknown for a second no
// event can carry; and the event always encodes (a reset past 9999 used
// to make it fail).
func TestRateLimitResetProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		sec, later := resetSecond().Draw(t, "resetsAt"), resetSecond().Draw(t, "later")
		if later < sec {
			sec, later = later, sec
		}
		used := rapid.Float64Range(0, 100).Draw(t, "usedPercent")
		evs := feed(newNormalizer("", "/w"), rateLimitFrame(sec, used), rateLimitFrame(later, used))
		want := []sdk.RateLimit{{ResetsAt: sdk.UnixSeconds(sec), UsedPercent: used, Scope: "codex/primary"},
			{ResetsAt: sdk.UnixSeconds(later), UsedPercent: used, Scope: "codex/primary"}}
		var got []sdk.RateLimit
		for _, ev := range evs {
			if ev.Kind != sdk.EventRateLimit || ev.RateLimit == nil {
				t.Fatalf("event %+v, want rate limits only", ev)
			}
			got = append(got, *ev.RateLimit)
			if _, err := json.Marshal(ev); err != nil {
				t.Fatalf("the event does not encode: %v", err)
			}
		}
		if diff := cmp.Diff(want, got); diff != "" {
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
