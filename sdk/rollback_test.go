package sdk

import (
	"errors"
	"strings"
	"testing"
)

// What every Rollbacker refuses before asking its provider, in this order.
func TestRollbackCheck(t *testing.T) {
	for _, tc := range []struct {
		name    string
		req     RollbackThreadRequest
		running string
		exited  bool
		done    bool
		err     error
	}{
		{"another thread", RollbackThreadRequest{ThreadRef: "other", Turns: 1}, "", false, false, ErrInvalid},
		{"no turns", RollbackThreadRequest{ThreadRef: "thr"}, "turn-1", true, true, nil},
		{"provider gone", RollbackThreadRequest{Turns: 1}, "turn-1", true, false, ErrProviderExited},
		{"a turn runs", RollbackThreadRequest{ThreadRef: "thr", Turns: 1}, "turn-1", false, false, ErrBusy},
		{"to do", RollbackThreadRequest{Turns: 2}, "", false, false, nil},
	} {
		done, err := tc.req.Check("thr", tc.running, tc.exited)
		if done != tc.done || !errors.Is(err, tc.err) || (tc.err == nil) != (err == nil) {
			t.Errorf("%s: Check = %v, %v; want %v, %v", tc.name, done, err, tc.done, tc.err)
		}
	}
}

// The turn a rollback cuts before, and the errors that say how the
// provider's history differs from the host's.
func TestRollbackTarget(t *testing.T) {
	turns := []string{"u1", "u2", "u3"} // oldest first
	for _, tc := range []struct {
		want           int
		before, target string
		errHas         string
	}{
		{want: 1, target: "u3"},
		{want: 2, before: "u2", target: "u2"},
		{want: 3, before: "u1", target: "u1"},
		{want: 4, errHas: "cannot drop 4 turns: prov has 3 on the thread"},
		{want: 0, errHas: "cannot drop 0 turns"},
		{want: 2, before: "u1", errHas: "the oldest of the last 2 turns is u2 in prov, but the host expected u1: prov's history differs"},
		{want: 1, before: "u2", errHas: "the newest turn is u3 in prov, but the host expected u2: prov's history differs"},
	} {
		got, err := RollbackTarget("prov", turns, tc.want, tc.before)
		switch {
		case tc.errHas == "" && (err != nil || got != tc.target):
			t.Errorf("RollbackTarget(%d, %q) = %q, %v; want %q", tc.want, tc.before, got, err, tc.target)
		case tc.errHas != "" && (!errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.errHas)):
			t.Errorf("RollbackTarget(%d, %q) = %q, %v; want invalid: %s", tc.want, tc.before, got, err, tc.errHas)
		}
	}
}
