package claude

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-run/baton/sdk"
)

// TestRunningTotals: a result's total_cost_usd and modelUsage run over
// the conversation; each result gives what they grew by. A resumed
// conversation's first result only sets them (what it had cost before is
// not this session's), totals that went back give nothing, and a result
// without totals changes nothing.
func TestRunningTotals(t *testing.T) {
	res := func(cost float64, in, out int64, modelCost float64) resultFrame {
		return resultFrame{TotalCostUSD: cost, ModelUsage: map[string]modelUsage{"m": {InputTokens: in, OutputTokens: out, CostUSD: modelCost}}}
	}
	m := func(in, out, cost int64) []sdk.Usage {
		return []sdk.Usage{{InputTokens: in, OutputTokens: out, TotalTokens: in + out, CostMicros: cost, Model: "m"}}
	}
	type step struct {
		r      resultFrame
		cost   int64
		models []sdk.Usage
	}
	for _, tc := range []struct {
		name    string
		resumed bool
		steps   []step
	}{
		{"fresh", false, []step{{res(0.5, 10, 1, 0.5), 500000, m(10, 1, 500000)}, {res(0.75, 30, 3, 0.75), 250000, m(20, 2, 250000)}}},
		{"resumed", true, []step{{res(2, 100, 10, 2), 0, nil}, {res(2.5, 130, 12, 2.5), 500000, m(30, 2, 500000)}}},
		{"went back", false, []step{{res(1, 100, 10, 1), 1000000, m(100, 10, 1000000)}, {res(0.25, 5, 1, 0.25), 0, nil}, {res(0.5, 15, 2, 0.5), 250000, m(10, 1, 250000)}}},
		{"no totals", false, []step{{res(1, 100, 10, 1), 1000000, m(100, 10, 1000000)}, {resultFrame{}, 0, nil}, {res(1.5, 110, 11, 1.5), 500000, m(10, 1, 500000)}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := runningTotals{known: !tc.resumed}
			for i, s := range tc.steps {
				cost, models := c.advance(s.r)
				if cost != s.cost {
					t.Errorf("result %d: cost %d micros; want %d", i+1, cost, s.cost)
				}
				if diff := cmp.Diff(s.models, models); diff != "" {
					t.Errorf("result %d: usage by model (-want +got):\n%s", i+1, diff)
				}
			}
		})
	}
}
