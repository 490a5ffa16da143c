package jetstreamlog

import (
	"testing"

	"github.com/baton-run/baton/host/internal/eventlog"
	"github.com/baton-run/baton/host/internal/natstest"
)

// BenchmarkCommitLatency is one writer's durable commit, one at a time:
// ns/op is the latency of a commit no other shares.
func BenchmarkCommitLatency(b *testing.B) {
	b.Run("pebble", func(b *testing.B) {
		s, err := eventlog.Open(b.TempDir(), nil)
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		benchLag(b, s, s)
	})
	b.Run("jetstream-single", func(b *testing.B) {
		l := host(b, natstest.Single(b), "a", b.TempDir())
		benchLag(b, l, l)
	})
	b.Run("jetstream-three", func(b *testing.B) {
		l := host(b, natstest.Three(b), "a", b.TempDir())
		benchLag(b, l, l)
	})
}

// BenchmarkSubscriberLag is a commit on one host until another host's
// replica has it (what a subscriber through that host waits): ns/op less
// BenchmarkCommitLatency's is the lag.
func BenchmarkSubscriberLag(b *testing.B) {
	b.Run("jetstream-single", func(b *testing.B) {
		c := natstest.Single(b)
		benchLag(b, host(b, c, "a", b.TempDir()), host(b, c, "b", b.TempDir()))
	})
	b.Run("jetstream-three", func(b *testing.B) {
		c := natstest.Three(b)
		benchLag(b, host(b, c, "a", b.TempDir()), host(b, c, "b", b.TempDir()))
	})
}

// benchLag appends one event at a time on w and waits until r can read it.
func benchLag(b *testing.B, w, r eventlog.Log) {
	b.ResetTimer()
	for i := range b.N {
		recs, _, err := w.Append(eventlog.Batch{Events: []eventlog.Pending{event("t", i)}})
		if err != nil {
			b.Fatal(err)
		}
		seq := recs[0].Sequence
		for {
			last, changed := r.Last()
			if last >= seq {
				break
			}
			<-changed
		}
	}
}
