package eventlog

import (
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"
)

// Power loss, not just a killed process. The store runs on a file system
// that keeps what was synced and, at random, some of what was not (Pebble's
// crashable MemFS); writers commit at once, and the power goes out at an
// instant rapid picks, while commits are in flight. On the disk as the
// power left it, the store opens with no word of damage, and:
//
//   - every commit acknowledged before the instant is there, whole, at the
//     sequences its Append returned;
//   - a commit that was not acknowledged is there whole or not at all: its
//     events (at consecutive sequences), its receipt, its effect and its
//     thread's head, or none of them;
//   - sequences run from 1 to the last with no gap.
func TestPowerLossKeepsEveryAcknowledgedCommit(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		writers := rapid.IntRange(1, 6).Draw(rt, "writers")
		acksBefore := rapid.IntRange(0, 40).Draw(rt, "acksBefore")
		unsynced := rapid.SampledFrom([]int{0, 10, 50, 90, 100}).Draw(rt, "unsyncedPercent")
		seed := rapid.Int64().Draw(rt, "seed")

		mem := vfs.NewCrashableMem()
		s, err := OpenWith("/store", Options{FS: mem})
		if err != nil {
			rt.Fatal(err)
		}
		var (
			mu      sync.Mutex
			acked   = map[string][]uint64{} // command id -> the sequences Append returned
			tried   []string                // every command id an Append was called with
			nAcked  atomic.Int32
			stop    atomic.Bool
			wg      sync.WaitGroup
			changed = make(chan struct{}, 1)
		)
		for w := range writers {
			wg.Go(func() {
				for n := 0; !stop.Load(); n++ {
					b := plannedBatch(w, n)
					mu.Lock()
					tried = append(tried, b.CommandID)
					mu.Unlock()
					recs, _, err := s.Append(b)
					if err != nil {
						return // the store is closing
					}
					mu.Lock()
					acked[b.CommandID] = seqsOf(recs)
					mu.Unlock()
					nAcked.Add(1)
					select {
					case changed <- struct{}{}:
					default:
					}
				}
			})
		}
		deadline := time.After(60 * time.Second)
		for int(nAcked.Load()) < acksBefore {
			select {
			case <-changed:
			case <-deadline:
				rt.Fatalf("only %d of %d commits acknowledged in 60s", nAcked.Load(), acksBefore)
			}
		}
		// The instant: what was acknowledged up to now must survive. The
		// clone is taken with every write held off, as at a power cut.
		mu.Lock()
		mustSurvive := maps.Clone(acked)
		mu.Unlock()
		crashed := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: unsynced, RNG: rand.New(rand.NewPCG(uint64(seed), 0))})
		stop.Store(true)
		wg.Wait()
		s.Close()

		s, err = OpenWith("/store", Options{FS: crashed})
		if err != nil {
			rt.Fatalf("the store as the power left it does not open: %v", err)
		}
		defer s.Close()
		if d := s.Damage(); d != nil {
			rt.Fatalf("the store as the power left it is damaged: %v", d)
		}
		recs, err := s.After(0, 0)
		if err != nil {
			rt.Fatal(err)
		}
		for i, r := range recs {
			if r.Sequence != uint64(i+1) {
				rt.Fatalf("sequence %d at position %d: the log has a gap", r.Sequence, i+1)
			}
		}
		// Each batch's events, as the log holds them.
		found := map[string][]uint64{}
		for _, r := range recs {
			var d struct{ Cmd string }
			if err := json.Unmarshal(r.Data, &d); err != nil {
				rt.Fatal(err)
			}
			found[d.Cmd] = append(found[d.Cmd], r.Sequence)
		}
		outbox, err := s.Outbox()
		if err != nil {
			rt.Fatal(err)
		}
		effects := map[string]bool{}
		for _, e := range outbox {
			effects[string(e.Data)] = true
		}
		mu.Lock()
		defer mu.Unlock()
		latest := map[string]string{} // thread -> the command id of its last batch there
		for _, id := range tried {
			seqs := found[id]
			rc, hasReceipt, err := s.Receipt(id)
			if err != nil {
				rt.Fatal(err)
			}
			w, n := parseCmd(id)
			want := plannedBatch(w, n)
			if len(seqs) == 0 {
				if hasReceipt || effects[id] {
					rt.Fatalf("%s: no events, yet its receipt (%v) or effect (%v) is there: half there", id, hasReceipt, effects[id])
				}
				if _, ok := mustSurvive[id]; ok {
					rt.Fatalf("%s was acknowledged before the power went out, and is lost", id)
				}
				continue
			}
			if len(seqs) != len(want.Events) || seqs[len(seqs)-1]-seqs[0] != uint64(len(seqs)-1) {
				rt.Fatalf("%s: events at %v, want %d at consecutive sequences: half there", id, seqs, len(want.Events))
			}
			if !hasReceipt || string(rc) != fmt.Sprint(seqs[len(seqs)-1]) || !effects[id] {
				rt.Fatalf("%s: events at %v, but receipt %q (found %v), effect found %v: half there", id, seqs, rc, hasReceipt, effects[id])
			}
			if got, ok := mustSurvive[id]; ok && !slices.Equal(got, seqs) {
				rt.Fatalf("%s: acknowledged at %v, found at %v", id, got, seqs)
			}
			if prev, ok := latest[want.ThreadID]; !ok || found[prev][0] < seqs[0] {
				latest[want.ThreadID] = id
			}
		}
		for th, id := range latest {
			h, ok, err := s.Head(th)
			if err != nil || !ok || string(h) != id {
				rt.Fatalf("thread %s: head %q (found %v, %v), want its last batch's, %s", th, h, ok, err, id)
			}
		}
		for id := range mustSurvive {
			if len(found[id]) == 0 {
				rt.Fatalf("%s was acknowledged before the power went out, and is lost", id)
			}
		}
		var extra []string
		for id := range found {
			if !slices.Contains(tried, id) {
				extra = append(extra, id)
			}
		}
		if diff := cmp.Diff([]string(nil), extra); diff != "" {
			rt.Fatalf("events of batches never appended (-want +got):\n%s", diff)
		}
	})
}

// plannedBatch is writer w's nth batch: 1 to 3 events on the writer's
// thread, an effect, a receipt holding its last sequence, and the thread's
// head naming the batch.
func plannedBatch(w, n int) Batch {
	id := fmt.Sprintf("w%d-%d", w, n)
	th := fmt.Sprintf("thread-%d", w)
	b := Batch{CommandID: id, ThreadID: th,
		Receipt: func(last uint64) []byte { return []byte(fmt.Sprint(last)) },
		Head:    func(uint64) []byte { return []byte(id) },
		Effects: []Effect{{ThreadID: th, Data: []byte(id)}}}
	for i := range 1 + (w+n)%3 {
		b.Events = append(b.Events, Pending{ThreadID: th, Type: "x.happened", At: time.Unix(int64(n), 0),
			Data: json.RawMessage(fmt.Sprintf(`{"cmd":%q,"i":%d}`, id, i))})
	}
	return b
}

func parseCmd(id string) (w, n int) {
	fmt.Sscanf(id, "w%d-%d", &w, &n)
	return w, n
}

func seqsOf(recs []Record) []uint64 {
	out := make([]uint64, len(recs))
	for i, r := range recs {
		out[i] = r.Sequence
	}
	return out
}
