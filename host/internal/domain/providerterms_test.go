package domain

import (
	"math"
	"testing"
)

// TestUsageAdd: a run's usage is the sum of its attempts', counted as
// the provider's tokens are: none for a negative count, and no sum past
// the largest count.
func TestUsageAdd(t *testing.T) {
	for _, c := range []struct {
		name string
		u, o Usage
		want Usage
	}{
		{"two attempts' usage", Usage{InputTokens: 10, OutputTokens: 2, CachedInputTokens: 4, ReasoningTokens: 1, TotalTokens: 12},
			Usage{InputTokens: 5, OutputTokens: 3, CachedInputTokens: 5, ReasoningTokens: 2, TotalTokens: 8},
			Usage{InputTokens: 15, OutputTokens: 5, CachedInputTokens: 9, ReasoningTokens: 3, TotalTokens: 20}},
		{"a negative count counts as none", Usage{InputTokens: -4, TotalTokens: 3}, Usage{InputTokens: 2, TotalTokens: -1},
			Usage{InputTokens: 2, TotalTokens: 3}},
		{"a sum past the largest count stops there", Usage{TotalTokens: math.MaxInt64 - 1}, Usage{TotalTokens: 2},
			Usage{TotalTokens: math.MaxInt64}},
	} {
		got := c.u
		got.Add(c.o)
		if got != c.want {
			t.Errorf("%s: %+v plus %+v is %+v, want %+v", c.name, c.u, c.o, got, c.want)
		}
	}
}
