package main

import (
	"testing"
	"time"
)

// Ages as people say them, in the largest whole unit (the table on a
// terminal; TestThreadsOrderAndFormats shows them in place).
func TestAge(t *testing.T) {
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		ago  time.Duration
		want string
	}{
		{0, "just now"},
		{999 * time.Millisecond, "just now"},
		{time.Second, "1s ago"},
		{59*time.Second + 999*time.Millisecond, "59s ago"},
		{time.Minute, "1m ago"},
		{3*time.Minute + 59*time.Second, "3m ago"},
		{time.Hour - time.Nanosecond, "59m ago"},
		{time.Hour, "1h ago"},
		{2*time.Hour + 59*time.Minute, "2h ago"},
		{24*time.Hour - time.Second, "23h ago"},
		{24 * time.Hour, "1d ago"},
		{400 * 24 * time.Hour, "400d ago"},
		{-3 * time.Minute, "in 3m"},
		{-500 * time.Millisecond, "just now"},
	} {
		if got := age(now.Add(-c.ago), now); got != c.want {
			t.Errorf("age %v before now = %q; want %q", c.ago, got, c.want)
		}
	}
}
