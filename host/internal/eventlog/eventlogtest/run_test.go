package eventlogtest

import (
	"sync/atomic"
	"testing"

	"github.com/baton-run/baton/host/internal/eventlog"
)

// peer is another handle on the same store: enough for the suite's paths
// that spread work over hosts (writers, catchUp) to run, though not a
// second host.
type peer struct{ eventlog.Log }

// The suite's peer paths run: with Peer and WaitCaughtUp set, every
// behaviour still holds on the Pebble store, and the suite asks for the
// peers and waits for them.
func TestRunWithPeers(t *testing.T) {
	dirs := map[eventlog.Log]string{}
	open := func(t *testing.T, dir string) eventlog.Log {
		s, err := eventlog.Open(dir, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		dirs[s] = dir
		return s
	}
	var peers, waits atomic.Int64
	Run(t, Harness{
		Open: func(t *testing.T) eventlog.Log { return open(t, t.TempDir()) },
		Reopen: func(t *testing.T, old eventlog.Log) eventlog.Log {
			old.Close()
			return open(t, dirs[old])
		},
		Peer: func(t *testing.T, l eventlog.Log) eventlog.Log {
			peers.Add(1)
			return peer{l}
		},
		WaitCaughtUp: func(t *testing.T, logs ...eventlog.Log) {
			if len(logs) < 2 {
				t.Errorf("WaitCaughtUp was given %d logs, want a host and its peers", len(logs))
			}
			waits.Add(1)
		},
	})
	// Two peers for each of the three tests that spread over hosts and
	// one for the shared decisions; a wait for each of the two of those
	// that then read on every host, and three in the shared decisions.
	if got := peers.Load(); got != 7 {
		t.Errorf("the suite opened %d peers, want 7", got)
	}
	if got := waits.Load(); got != 5 {
		t.Errorf("the suite waited for peers %d times, want 5", got)
	}
}
