package eventlog

import (
	"fmt"
	"testing"
	"time"
)

// BenchmarkOpen is an Open and Close of a store of N events (written in
// commits of 100, then left as a host leaves it: tables, and a log the
// next open replays); its cost must not grow with N.
func BenchmarkOpen(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			dir := b.TempDir()
			s, err := Open(dir, nil)
			if err != nil {
				b.Fatal(err)
			}
			for i := 0; i < n; i += 100 {
				evs := make([]Pending, 100)
				for j := range evs {
					evs[j] = Pending{ThreadID: fmt.Sprintf("thread-%d", (i+j)%50), Type: "message.delta", At: time.Unix(1, 0), Data: benchEvent}
				}
				if _, _, err := s.Append(Batch{Events: evs}); err != nil {
					b.Fatal(err)
				}
			}
			s.Close()
			for b.Loop() {
				s, err := Open(dir, nil)
				if err != nil {
					b.Fatal(err)
				}
				s.Close()
			}
		})
	}
}
