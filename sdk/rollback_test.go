package sdk

import (
	"errors"
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
