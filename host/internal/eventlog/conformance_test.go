package eventlog_test

import (
	"testing"

	"github.com/baton-run/baton/host/internal/eventlog"
	"github.com/baton-run/baton/host/internal/eventlog/eventlogtest"
)

// The Pebble store keeps every behaviour of the Log: one writer (no
// peers), reopened from its directory.
func TestConformance(t *testing.T) {
	dirs := map[eventlog.Log]string{}
	open := func(t *testing.T, dir string) eventlog.Log {
		t.Helper()
		s, err := eventlog.Open(dir, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		dirs[s] = dir
		return s
	}
	eventlogtest.Run(t, eventlogtest.Harness{
		Open: func(t *testing.T) eventlog.Log { return open(t, t.TempDir()) },
		Reopen: func(t *testing.T, old eventlog.Log) eventlog.Log {
			if err := old.Close(); err != nil {
				t.Fatalf("close before reopening: %v", err)
			}
			return open(t, dirs[old])
		},
	})
}
