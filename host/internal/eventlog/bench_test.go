package eventlog

import (
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/hashicorp/go-hclog"
)

// The event log's write path beside its baselines, measured in the same
// run. A commit here is what a command of one event writes: the event, its
// thread index entry and the command's receipt (and, for the log, the
// thread's head), synced. ns/op is per commit.

// writers is how many threads commit at once in the parallel benchmarks.
const writers = 8

// parallel runs b.N commits split over the writers, each on its own thread.
func parallel(b *testing.B, commit func(w, i int) error) {
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	for w := range writers {
		wg.Go(func() {
			for {
				i := int(next.Add(1))
				if i > b.N {
					return
				}
				if err := commit(w, i); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
}

var benchEvent = json.RawMessage(`{"messageId":"node_0123456789abcdef","text":"a few words of a reply "}`)

func receiptOf(cmd string, seq uint64) []byte {
	return []byte(fmt.Sprintf(`{"commandId":%q,"type":"provider.event","threadId":"t","sequence":%d,"payloadHash":"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef","at":"2026-12-01T00:00:00Z"}`, cmd, seq))
}

func logCommit(s *Store, w, i int) error {
	th := fmt.Sprintf("thread-%d", w)
	cmd := fmt.Sprintf("cmd-%d", i)
	_, _, err := s.Append(Batch{Events: []Pending{{ThreadID: th, Type: "message.delta", At: time.Unix(1, 0), Data: benchEvent}},
		CommandID: cmd, Receipt: func(last uint64) []byte { return receiptOf(cmd, last) },
		ThreadID: th, Head: func(last uint64) []byte { return []byte(`{"id":"` + th + `","status":"running"}`) }})
	return err
}

// BenchmarkAppend is one writer's commits, each waiting for its sync.
func BenchmarkAppend(b *testing.B) {
	s, err := Open(b.TempDir(), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	i := 0
	for b.Loop() {
		i++
		if err := logCommit(s, 0, i); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkParallelAppend: eight threads commit at once; their commits
// share synced writes.
func BenchmarkParallelAppend(b *testing.B) {
	b.Run("eventlog", func(b *testing.B) {
		s, err := Open(b.TempDir(), nil)
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		parallel(b, func(w, i int) error { return logCommit(s, w, i) })
	})
	// The same keys written with raw Pebble batches from eight goroutines,
	// each committed with Sync (Pebble groups concurrent syncs itself).
	b.Run("pebble", func(b *testing.B) {
		db, err := pebble.Open(b.TempDir(), &pebble.Options{FormatMajorVersion: FormatVersion, CacheSize: 16 << 20,
			MemTableSize: 8 << 20, Logger: pebbleLogger{l: hclog.NewNullLogger()}})
		if err != nil {
			b.Fatal(err)
		}
		defer db.Close()
		var seq atomic.Uint64
		parallel(b, func(w, i int) error {
			n := seq.Add(1)
			th := fmt.Sprintf("thread-%d", w)
			cmd := fmt.Sprintf("cmd-%d", i)
			batch := db.NewBatch()
			defer batch.Close()
			batch.Set(eventKey(n), benchEvent, nil)
			batch.Set(threadKey(th, n), nil, nil)
			batch.Set(receiptKey(cmd), receiptOf(cmd, n), nil)
			return batch.Commit(pebble.Sync)
		})
	})
	parallelSQLite(b)
}
