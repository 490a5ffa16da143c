package sdk

import "testing"

func TestUsageAdd(t *testing.T) {
	u := Usage{InputTokens: 10, OutputTokens: 2, CachedInputTokens: 4, ReasoningTokens: 1, TotalTokens: 12}
	u.Add(Usage{InputTokens: 5, OutputTokens: 3, CachedInputTokens: 5, ReasoningTokens: 2, TotalTokens: 8})
	want := Usage{InputTokens: 15, OutputTokens: 5, CachedInputTokens: 9, ReasoningTokens: 3, TotalTokens: 20}
	if u != want {
		t.Fatalf("sum of two model calls' usage: %+v, want %+v", u, want)
	}
}
