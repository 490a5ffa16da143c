package jetstreamlog

import (
	"fmt"
	"sync"
	"testing"

	"github.com/baton-run/baton/host/internal/eventlog"
	"github.com/baton-run/baton/host/internal/eventlog/eventlogtest"
	"github.com/baton-run/baton/host/internal/natstest"
)

// The JetStream log keeps every behaviour of the Log: each test on a
// fresh single node (and again on a cluster of three, streams with three
// replicas), peers as other hosts (their own replicas) on the same
// stream, reopened from the replica's directory.
func TestConformance(t *testing.T) { conformance(t, natstest.Single) }

func TestConformanceThreeNodes(t *testing.T) { conformance(t, natstest.Three) }

func conformance(t *testing.T, start func(testing.TB) *natstest.Cluster) {
	type where struct {
		c    *natstest.Cluster
		host string
		dir  string
	}
	var mu sync.Mutex
	logs := map[eventlog.Log]where{}
	open := func(t *testing.T, w where) eventlog.Log {
		t.Helper()
		l := host(t, w.c, w.host, w.dir)
		mu.Lock()
		logs[l] = w
		mu.Unlock()
		return l
	}
	of := func(l eventlog.Log) where {
		mu.Lock()
		defer mu.Unlock()
		return logs[l]
	}
	eventlogtest.Run(t, eventlogtest.Harness{
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
	})
}
