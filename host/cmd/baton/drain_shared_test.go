//go:build linux

package main

import (
	"errors"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-run/baton/host/internal/natstest"
)

// drainExitBound is how long the test waits for `baton serve` to exit
// after SIGTERM before it fails: far past the drain's bound (the drain
// timeout, its margin and the log's close timeout, about half a minute),
// so that it fails only a host that hangs, never a slow one.
const drainExitBound = 3 * time.Minute

// hostServing matches a service's log once it holds its own host lease
// and serves (it writes the threads it owns only under that lease).
var hostServing = regexp.MustCompile(`(?s)holding host \S+'s lease.*serving: `)

// SIGTERM while the shared log's servers are gone: the drain cannot
// record the end of the run in flight, yet the service exits within its
// bound (exit 1), saying which run it left active and why, and its
// provider's processes go with it. Once the servers are back, the next
// start's recovery ends the run as after a killed host.
//
// With the default lease TTL (15s) the lease expires during the drain, as
// it would in production, and the service exits as for a lost lease; with
// a TTL longer than the drain it holds the lease to the end, and exits
// saying what the drain left. The next start of the same host takes its
// lease back at once.
func TestDrainEndsWhenTheSharedLogsServersAreGone(t *testing.T) {
	for _, tc := range []struct {
		name string
		ttl  []string
		exit string // the service's last line, a regular expression; RUN and THREAD stand for the run's ids
	}{
		{name: "lease expires during the drain",
			exit: `baton: serve: the event store failed: lost host a's lease: host a's lease on installation drain expired: ` +
				`no renewal was answered within its TTL \(15s\); this host was paused, or could not reach the servers; ` +
				`the service stopped, for its supervisor to start it again \(the next start recovers what was in flight\)`},
		{name: "lease outlives the drain", ttl: []string{"--lease-ttl", "60s"},
			exit: `baton: serve: close host: drain: could not record the end of run RUN of thread THREAD, left active for the next host's recovery to end: ` +
				`the event log did not take the drain's writes within 20s \(a shared log whose servers cannot be reached\), so the host closed it`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := natstest.Single(t)
			args := append([]string{"--store", c.URLs(), "--installation", "drain", "--host", "a"}, tc.ttl...)
			data := t.TempDir()
			slog := newLogWatch()
			s := launchService(t, data, slog, func(*exec.Cmd) {}, args...)
			slog.wait(t, hostServing)
			s.waitHealthy()
			state := filepath.Join(t.TempDir(), "cursor") // the replay peer's: its provider thinks until the turn is ended
			cl, id, ev, _ := s.startTurn(t, "acp/restart_queued.ndjson", "Take your time", "--state", state)
			until(t, ev, "the provider's thinking", thinking)
			p := thread(t, cl, id)
			run := p["runs"].([]any)[0].(map[string]any)["id"].(string)
			procs := pids(t, p)

			c.Stop(0)
			slog.wait(t, regexp.MustCompile(`lost the connection to the jetstream log's servers`))
			if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			select {
			case <-s.done:
			case <-time.After(drainExitBound):
				s.cmd.Process.Kill()
				<-s.done
				t.Fatalf("baton serve did not exit within %v of SIGTERM with the log's servers gone:\n%s", drainExitBound, s.stderr)
			}
			var exit *exec.ExitError
			if !errors.As(s.err, &exit) || exit.ExitCode() != exitFailed {
				t.Errorf("baton serve after SIGTERM with the log's servers gone: %v, want exit status %d\n%s", s.err, exitFailed, s.stderr)
			}
			left := regexp.MustCompile(`\[ERROR\] baton: drain: could not record the end of a run; it stays active in the log until the next host's recovery ends it: ` +
				`thread=` + regexp.QuoteMeta(id) + ` run=` + regexp.QuoteMeta(run) + ` error="[^"]*servers cannot be reached`)
			if !left.MatchString(s.stderr.String()) {
				t.Errorf("baton serve did not say it left run %s of thread %s active because the log's servers cannot be reached (want %s):\n%s",
					run, id, left, s.stderr)
			}
			last := regexp.MustCompile(`(?m)^` + strings.NewReplacer("RUN", regexp.QuoteMeta(run), "THREAD", regexp.QuoteMeta(id)).Replace(tc.exit) + `\n\z`)
			if !last.MatchString(s.stderr.String()) {
				t.Errorf("baton serve's last line (want %s):\n%s", last, s.stderr)
			}
			for _, pid := range procs {
				if !waitGone(pid, time.Now().Add(30*time.Second)) {
					t.Errorf("process %d outlived the service", pid)
					syscall.Kill(pid, syscall.SIGKILL)
				}
			}

			c.Start(0)
			rlog := newLogWatch()
			s = launchService(t, data, rlog, func(*exec.Cmd) {}, args...)
			// The same host takes its own lease back, and recovers its
			// threads before it serves.
			rlog.wait(t, hostServing)
			s.waitHealthy()
			if diff := cmp.Diff([]runState{{"failed", "host_restarted"}}, runStates(thread(t, s.client(), id))); diff != "" {
				t.Errorf("runs after the servers came back and the service started again (-want +got):\n%s", diff)
			}
		})
	}
}
