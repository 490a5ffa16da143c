package jetstreamlog

import (
	"fmt"
	"sync"
	"testing"

	"github.com/baton-run/baton/host/internal/eventlog"
	"github.com/baton-run/baton/host/internal/natstest"
)

// BenchmarkAppend compares the Pebble store with the JetStream log on one
// node and on three: 8 goroutines, each appending one-event batches to its
// own thread. ns/op is per event.
func BenchmarkAppend(b *testing.B) {
	b.Run("pebble", func(b *testing.B) {
		s, err := eventlog.Open(b.TempDir(), nil)
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		benchAppend(b, s)
	})
	b.Run("jetstream-single", func(b *testing.B) {
		benchAppend(b, host(b, natstest.Single(b), "a", b.TempDir()))
	})
	b.Run("jetstream-three", func(b *testing.B) {
		benchAppend(b, host(b, natstest.Three(b), "a", b.TempDir()))
	})
}

func benchAppend(b *testing.B, l eventlog.Log) {
	const writers = 8
	b.ResetTimer()
	var wg sync.WaitGroup
	for w := range writers {
		thread := fmt.Sprintf("t%d", w)
		wg.Go(func() {
			for i := w; i < b.N; i += writers {
				if _, _, err := l.Append(eventlog.Batch{Events: []eventlog.Pending{event(thread, i)}}); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}
