package jetstreamlog

import (
	"fmt"
	"sync"
	"testing"

	"github.com/baton-run/baton/host/internal/eventlog"
	"github.com/baton-run/baton/host/internal/eventlog/eventlogtest"
	"github.com/baton-run/baton/host/internal/natstest"
)

// The eventlog conformance suite on one JetStream node, and on a cluster
// of three (streams with three replicas), with peers as other hosts.
func TestConformance(t *testing.T) { conformance(t, natstest.Single) }

func TestConformanceThreeNodes(t *testing.T) { conformance(t, natstest.Three) }

func conformance(t *testing.T, start func(testing.TB) *natstest.Cluster) {
	type where struct {
		c         *natstest.Cluster
		host, dir string
	}
	var mu sync.Mutex
	logs := map[eventlog.Log]where{}
	n := 0
	open := func(t *testing.T, w where) eventlog.Log {
		l, err := Open(t.Context(), Options{URLs: []string{w.c.URLs()}, Host: w.host, Dir: w.dir})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		mu.Lock()
		logs[l] = w
		mu.Unlock()
		return l
	}
	eventlogtest.Run(t, eventlogtest.Harness{
		Open: func(t *testing.T) eventlog.Log {
			return open(t, where{c: start(t), host: "h0", dir: t.TempDir()})
		},
		Reopen: func(t *testing.T, old eventlog.Log) eventlog.Log {
			old.Close()
			return open(t, logs[old])
		},
		Peer: func(t *testing.T, l eventlog.Log) eventlog.Log {
			n++
			return open(t, where{c: logs[l].c, host: fmt.Sprintf("p%d", n), dir: t.TempDir()})
		},
	})
}
