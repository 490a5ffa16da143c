package main

import "testing"

// A run ordinal below what a verb takes is bad usage, named before
// anything is read: negative ordinals anywhere, and 0 where it names no
// run's changes (diff, cancel; rollback's 0 is the baseline).
func TestRunOrdinalUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"diff", "thr_x", "--run", "-1"}, "baton: diff: --run must be a run ordinal from 1, got -1\n"},
		{[]string{"diff", "thr_x", "--run", "0"}, "baton: diff: --run must be a run ordinal from 1, got 0\n"},
		{[]string{"diff", "thr_x", "--max-bytes", "-5"}, "baton: diff: --max-bytes cannot be negative, got -5\n"},
		{[]string{"rollback", "thr_x", "--run", "-1"}, "baton: rollback: --run must be a run ordinal from 0 (0: before the first run), got -1\n"},
		{[]string{"rollback", "thr_x"}, "baton: rollback: --run N is required\n"},
		{[]string{"cancel", "thr_x", "--run", "-2"}, "baton: cancel: --run must be a run ordinal from 1, got -2\n"},
	} {
		out, stderr, code := baton(t, tc.args...)
		if code != exitUsage || stderr != tc.want || out != "" {
			t.Errorf("baton %v: exit %d, stderr %q, stdout %q; want exit 2, %q", tc.args, code, stderr, out, tc.want)
		}
	}
}
