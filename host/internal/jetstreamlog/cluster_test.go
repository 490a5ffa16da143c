package jetstreamlog

import (
	"fmt"
	"sync"
	"testing"

	"github.com/baton-run/baton/host/internal/eventlog"
	"github.com/baton-run/baton/host/internal/natstest"
	"github.com/google/go-cmp/cmp"
)

// In a cluster of three, appends go on while one node is stopped, the
// node catches up when it starts again, and with all three stopped an
// append waits, then returns once they are back; nothing acked is lost.
func TestClusterKeepsTheLogThroughLostNodes(t *testing.T) {
	natstest.NodeLossTest(t)
	c := natstest.Three(t)
	a := host(t, c, "a", t.TempDir())
	if got := a.stream.CachedInfo().Config.Replicas; got != 3 {
		t.Fatalf("the stream has %d replicas in a cluster of three, want 3", got)
	}
	var acked []string
	write := func(l *Log, thread string, i int) {
		t.Helper()
		appendOne(t, l, thread, i)
		acked = append(acked, fmt.Sprintf("%s %d", thread, i))
	}

	// One node lost mid-appends: two writers on, a node stopped after
	// the first acks.
	var wg sync.WaitGroup
	var mu sync.Mutex
	firstAcks := make(chan struct{})
	var once sync.Once
	for w := range 2 {
		thread := fmt.Sprintf("w%d", w)
		wg.Go(func() {
			for i := range 20 {
				if _, _, err := a.Append(eventlog.Batch{Events: []eventlog.Pending{event(thread, i)}}); err != nil {
					t.Errorf("append %s %d: %v", thread, i, err)
					return
				}
				mu.Lock()
				acked = append(acked, fmt.Sprintf("%s %d", thread, i))
				mu.Unlock()
				if i == 4 {
					once.Do(func() { close(firstAcks) })
				}
			}
		})
	}
	<-firstAcks
	c.Stop(2)
	wg.Wait()
	t.Log("writers done with node 2 stopped")
	if t.Failed() {
		return
	}
	// The stopped node catches up: with node 0 stopped, nodes 1 and 2
	// commit w0 20, so node 2 has everything before it.
	c.Start(2)
	c.Stop(0)
	write(a, "w0", 20)
	t.Log("node 2 back, node 0 stopped, w0 20 written")

	// All three lost: an append waits until they are back.
	unanswered := make(chan struct{})
	var unOnce sync.Once
	a.w.unknown = func() { unOnce.Do(func() { close(unanswered) }) }
	c.Stop(1)
	c.Stop(2)
	returned := make(chan error, 1)
	go func() {
		_, _, err := a.Append(eventlog.Batch{Events: []eventlog.Pending{event("w1", 20)}})
		returned <- err
	}()
	<-unanswered // it has published and met no answer
	t.Log("append unanswered")
	select {
	case err := <-returned:
		t.Fatalf("an append returned with every node stopped: %v", err)
	default:
	}
	// Nodes 0 and 2 come back: node 0 never had w0 20, so the log they
	// keep on from is node 2's.
	c.Start(0)
	c.Start(2)
	if err := <-returned; err != nil {
		t.Fatalf("the append waiting for the nodes: %v", err)
	}
	t.Log("nodes 0 and 2 back, w1 20 written")
	c.Start(1)
	acked = append(acked, "w1 20")

	// A second host reads it all from the cluster, as the first has it.
	b := host(t, c, "b", t.TempDir())
	t.Log("host b open")
	recs := all(t, a)
	if d := cmp.Diff(recs, all(t, b)); d != "" {
		t.Fatalf("host b's replica differs from host a's (-a +b):\n%s", d)
	}
	checkLog(t, recs, []string{"w0", "w1"}, 21)
	var got []string
	for _, r := range recs {
		got = append(got, fmt.Sprintf("%s %s", r.ThreadID, r.Data))
	}
	if len(got) != len(acked) {
		t.Fatalf("the log has %d events, %d were acked:\n%s", len(got), len(acked), cmp.Diff(acked, got))
	}
}
