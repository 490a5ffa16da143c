package jetstreamlog

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/baton-run/baton/host/internal/eventlog"
	"github.com/baton-run/baton/host/internal/eventlog/eventlogtest"
	"github.com/baton-run/baton/host/internal/natstest"
	"github.com/nats-io/nats-server/v2/server"
)

// The JetStream log keeps every behaviour of the Log: each test on a
// fresh single node (and again on a cluster of three, streams with three
// replicas, where the linearizability check runs while nodes fail in
// turn), peers as other hosts (their own replicas) on the same stream,
// reopened from the replica's directory.
func TestConformance(t *testing.T) { conformance(t, natstest.Single, false) }

func TestConformanceThreeNodes(t *testing.T) { conformance(t, natstest.Three, true) }

// eventsPerFault is how far the log moves (in events, seen by the test's
// first host) while a node is stopped, before it starts again and the
// next one stops. The linearizability workload appends 72 events, so it
// meets two stops, each over half of it: a stop of a leader stalls the
// log for an election (4 to 9 seconds in nats-server), and two keep the
// test within half a minute.
const eventsPerFault = 36

func conformance(t *testing.T, start func(testing.TB) *natstest.Cluster, faults bool) {
	type where struct {
		c    *natstest.Cluster
		host string
		dir  string
	}
	// test is what a subtest opened: its cluster, its first log (whose
	// Last the faults watch) and how many publish rounds of its logs met
	// outcomes they could not know (a node gone under a write).
	type test struct {
		c       *natstest.Cluster
		first   eventlog.Log
		unknown atomic.Int64
	}
	var mu sync.Mutex
	logs := map[eventlog.Log]where{}
	tests := map[*testing.T]*test{}
	open := func(t *testing.T, w where) eventlog.Log {
		t.Helper()
		l := host(t, w.c, w.host, w.dir)
		mu.Lock()
		defer mu.Unlock()
		logs[l] = w
		tt := tests[t]
		if tt == nil {
			tt = &test{c: w.c, first: l}
			tests[t] = tt
		}
		// Set before the log's first Append, which hands it to the
		// writer under the writer's lock.
		l.w.unknown = func() { tt.unknown.Add(1) }
		return l
	}
	of := func(l eventlog.Log) where {
		mu.Lock()
		defer mu.Unlock()
		return logs[l]
	}
	h := eventlogtest.Harness{
		Open: func(t *testing.T) eventlog.Log {
			return open(t, where{c: start(t), host: "a", dir: t.TempDir()})
		},
		Reopen: func(t *testing.T, old eventlog.Log) eventlog.Log {
			if err := old.Close(); err != nil {
				t.Fatalf("close before reopening: %v", err)
			}
			return open(t, of(old))
		},
		Peer: func(t *testing.T, l eventlog.Log) eventlog.Log {
			w := of(l)
			mu.Lock()
			n := len(logs)
			mu.Unlock()
			return open(t, where{c: w.c, host: fmt.Sprintf("peer%d", n), dir: t.TempDir()})
		},
	}
	if faults {
		h.Faults = func(t *testing.T, stop <-chan struct{}) {
			mu.Lock()
			tt := tests[t]
			mu.Unlock()
			stops, leaders := rollingStops(t, tt.c, tt.first, stop)
			t.Logf("faults: %d node stops (%d of a leader); %d publish rounds met unknown outcomes and published again",
				stops, leaders, tt.unknown.Load())
		}
	}
	eventlogtest.Run(t, h)
}

// rollingStops stops the cluster's nodes in turn, one at a time (the
// stream's three replicas keep a quorum): node i stops, the log moves
// eventsPerFault events on (as l sees it), node i starts again and node
// i+1 stops, until stop is closed; then the node down starts again. It
// logs each stop: whether the node led the stream (appends wait for a new
// leader) or the cluster's meta group (a replica's lost consumer is made
// again only once there is a new one), and how long the log took to move
// on. It returns how many stops it made and how many stopped a leader.
func rollingStops(t *testing.T, c *natstest.Cluster, l eventlog.Log, stop <-chan struct{}) (stops, leaders int) {
	for i := 0; ; i = (i + 1) % c.Len() {
		from, _ := l.Last()
		srv := c.Server(i)
		stream := srv.JetStreamIsStreamLeader(server.DEFAULT_GLOBAL_ACCOUNT, streamName("baton"))
		meta := srv.JetStreamIsLeader()
		if stream || meta {
			leaders++
		}
		stopped := time.Now()
		c.Stop(i)
		stops++
		moved := waitPast(t, l, from+eventsPerFault, stop)
		t.Logf("node %d stopped at event %d (stream leader %t, meta leader %t) for %v; the log moved on: %t",
			i, from, stream, meta, time.Since(stopped).Round(time.Millisecond), moved)
		c.Start(i)
		if !moved {
			return stops, leaders
		}
	}
}

// waitPast returns true once l's Last is at least seq, false when stop
// closes first (or the log fails or closes, which fails the test).
func waitPast(t *testing.T, l eventlog.Log, seq uint64, stop <-chan struct{}) bool {
	for {
		last, changed := l.Last()
		if last >= seq {
			return true
		}
		select {
		case <-changed:
			if _, again := l.Last(); again == changed {
				t.Errorf("the log closed at sequence %d while the faults waited for %d", last, seq)
				return false
			}
		case <-stop:
			return false
		}
	}
}
