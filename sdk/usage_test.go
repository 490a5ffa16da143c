package sdk

import (
	"encoding/json"
	"math"
	"math/big"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"
)

func TestUsageAdd(t *testing.T) {
	u := Usage{InputTokens: 10, OutputTokens: 2, CachedInputTokens: 4, ReasoningTokens: 1, TotalTokens: 12}
	u.Add(Usage{InputTokens: 5, OutputTokens: 3, CachedInputTokens: 5, ReasoningTokens: 2, TotalTokens: 8})
	want := Usage{InputTokens: 15, OutputTokens: 5, CachedInputTokens: 9, ReasoningTokens: 3, TotalTokens: 20}
	if u != want {
		t.Fatalf("sum of two model calls' usage: %+v, want %+v", u, want)
	}
}

// count draws a token count: small ones, huge ones near the top, and
// negative ones (which a provider may send, meaning nothing).
func count() *rapid.Generator[int64] {
	return rapid.OneOf(rapid.Int64Range(0, 1<<20), rapid.Int64Range(math.MaxInt64-1<<20, math.MaxInt64),
		rapid.Int64Range(math.MinInt64, -1), rapid.Int64())
}

func usage() *rapid.Generator[Usage] {
	return rapid.Custom(func(t *rapid.T) Usage {
		return Usage{InputTokens: count().Draw(t, "input"), OutputTokens: count().Draw(t, "output"),
			CachedInputTokens: count().Draw(t, "cached"), ReasoningTokens: count().Draw(t, "reasoning"),
			TotalTokens: count().Draw(t, "total"), CostMicros: count().Draw(t, "cost"),
			Model: rapid.SampledFrom([]string{"", "m1", "m2"}).Draw(t, "model")}
	})
}

func sum(a, b Usage) Usage {
	a.Add(b)
	return a
}

func counts(u Usage) []int64 {
	return []int64{u.InputTokens, u.OutputTokens, u.CachedInputTokens, u.ReasoningTokens, u.TotalTokens, u.CostMicros}
}

// Usage.Add is the sum of counts: commutative, associative, with the zero
// Usage adding nothing (to counts that are not negative); a count is
// never negative and is the exact sum of the parts taken as counts, or
// math.MaxInt64 when that sum passes it.
func TestUsageAddProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		a, b, c := usage().Draw(t, "a"), usage().Draw(t, "b"), usage().Draw(t, "c")
		if diff := cmp.Diff(sum(a, b), sum(b, a)); diff != "" {
			t.Fatalf("a+b != b+a (-a+b +b+a):\n%s", diff)
		}
		if diff := cmp.Diff(sum(sum(a, b), c), sum(a, sum(b, c))); diff != "" {
			t.Fatalf("(a+b)+c != a+(b+c):\n%s", diff)
		}
		ab := sum(a, b)
		if diff := cmp.Diff(ab, sum(ab, Usage{})); diff != "" {
			t.Fatalf("adding the zero usage changed a sum:\n%s", diff)
		}
		if diff := cmp.Diff(sum(Usage{}, ab), ab); diff != "" {
			t.Fatalf("the zero usage plus a sum is not the sum:\n%s", diff)
		}
		limit := big.NewInt(math.MaxInt64)
		for i, got := range counts(ab) {
			x, y := max(counts(a)[i], 0), max(counts(b)[i], 0)
			want := new(big.Int).Add(big.NewInt(x), big.NewInt(y))
			if want.Cmp(limit) > 0 {
				want = limit
			}
			if got != want.Int64() {
				t.Fatalf("count %d: %d + %d = %d, want %v", i, counts(a)[i], counts(b)[i], got, want)
			}
		}
	})
}

// A Unix time in seconds is its instant in UTC, the same second again;
// later seconds are later instants; and what is no instant an event can
// carry (before 1970, past 9999) is the zero time, while every instant
// given survives the event's JSON and its wire form.
func TestUnixSecondsProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		sec := rapid.OneOf(rapid.Int64Range(0, MaxUnixSeconds), rapid.Int64Range(MaxUnixSeconds-1000, MaxUnixSeconds+1000),
			rapid.Int64Range(-1000, 1000), rapid.Int64()).Draw(t, "sec")
		got := UnixSeconds(sec)
		if sec < 0 || sec > MaxUnixSeconds {
			if !got.IsZero() {
				t.Fatalf("UnixSeconds(%d) = %v, want the zero time", sec, got)
			}
			return
		}
		if got.Unix() != sec || got.Location() != time.UTC || got.Nanosecond() != 0 {
			t.Fatalf("UnixSeconds(%d) = %v (unix %d)", sec, got, got.Unix())
		}
		if later := rapid.Int64Range(sec, MaxUnixSeconds).Draw(t, "later"); UnixSeconds(later).Before(got) {
			t.Fatalf("UnixSeconds(%d) before UnixSeconds(%d)", later, sec)
		}
		ev := RuntimeEvent{Kind: EventRateLimit, RateLimit: &RateLimit{ResetsAt: got}}
		b, err := json.Marshal(ev)
		if err != nil {
			t.Fatalf("an event resetting at %v does not encode: %v", got, err)
		}
		var back RuntimeEvent
		if err := json.Unmarshal(b, &back); err != nil || !back.RateLimit.ResetsAt.Equal(got) {
			t.Fatalf("JSON: %v back as %+v (%v)", got, back.RateLimit, err)
		}
	})
}
