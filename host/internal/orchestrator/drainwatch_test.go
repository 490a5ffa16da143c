package orchestrator_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-run/baton/host/internal/domain"
	"github.com/baton-run/baton/host/internal/eventlog"
	"github.com/baton-run/baton/host/internal/orchestrator"
)

// stallingLog is the Pebble store as a log Config.OpenLog opens, whose
// writes can be made to wait until Close, as jetstreamlog's wait while
// its servers cannot be reached; then they fail with eventlog.ErrClosed.
type stallingLog struct {
	eventlog.Log
	stalled   chan struct{} // closed by stall: writes wait from then on
	closed    chan struct{} // closed by Close
	stallOnce sync.Once
	closeOnce sync.Once
}

func openStallingLog(dir string) (*stallingLog, error) {
	st, err := eventlog.OpenWith(dir, eventlog.Options{})
	if err != nil {
		return nil, err
	}
	return &stallingLog{Log: st, stalled: make(chan struct{}), closed: make(chan struct{})}, nil
}

func (l *stallingLog) stall() { l.stallOnce.Do(func() { close(l.stalled) }) }

// wait waits until Close once writes stall, and says whether they did.
func (l *stallingLog) wait() bool {
	select {
	case <-l.stalled:
		<-l.closed
		return true
	default:
		return false
	}
}

func (l *stallingLog) Append(in eventlog.Batch) ([]eventlog.Record, []string, error) {
	if l.wait() {
		return nil, nil, eventlog.ErrClosed
	}
	return l.Log.Append(in)
}

func (l *stallingLog) EffectDone(ref eventlog.EffectRef) error {
	if l.wait() {
		return eventlog.ErrClosed
	}
	return l.Log.EffectDone(ref)
}

func (l *stallingLog) UpdateDelivery(d eventlog.StoredDelivery) error {
	if l.wait() {
		return eventlog.ErrClosed
	}
	return l.Log.UpdateDelivery(d)
}

func (l *stallingLog) DeliveryDone(refs []eventlog.DeliveryRef, states ...eventlog.TargetState) error {
	if l.wait() {
		return eventlog.ErrClosed
	}
	return l.Log.DeliveryDone(refs, states...)
}

func (l *stallingLog) Close() error {
	l.closeOnce.Do(func() { close(l.closed) })
	return l.Log.Close()
}

// Close on a log whose writes wait for ever (a shared log whose servers
// are gone): the drain's watchdog, its one bound on the host's clock,
// gives up on the log DrainTimeout plus its margin after the drain began
// and closes it; Close then returns, saying which run it left active and
// why, and no process is left. The next host ends that run as after a
// crash.
func TestDrainGivesUpOnALogThatTakesNoWrites(t *testing.T) {
	e := newEnv(t)
	var log *stallingLog
	e.openLog = func() (eventlog.Log, error) {
		var err error
		log, err = openStallingLog(filepath.Join(e.data, "events"))
		return log, err
	}
	e.restart()
	threadID, plugin, provider := e.stallingTurn()
	run := mustThread(t, e, threadID).Runs[0].ID
	log.stall()
	closed := make(chan error, 1)
	go func() { closed <- e.host.Close() }()
	ctx, cancel := context.WithTimeout(t.Context(), hangGuard)
	defer cancel()
	pending, err := waitBounds(ctx, e.clock, 1)
	if err != nil {
		t.Fatalf("Close set no bound on the host's clock: %v", err)
	}
	bound := orchestrator.DrainTimeout + orchestrator.DrainLogMargin
	if diff := cmp.Diff([]time.Duration{bound}, pending); diff != "" {
		t.Fatalf("pending timers while the drain's first write waits (-want +got):\n%s", diff)
	}
	e.clock.Advance(bound)
	select {
	case err = <-closed:
	case <-ctx.Done():
		t.Fatal("Close still waits after the drain's watchdog's bound")
	}
	e.host = nil
	want := fmt.Sprintf("drain: could not record the end of run %s of thread %s, left active for the next host's recovery to end: "+
		"the event log did not take the drain's writes within %v (a shared log whose servers cannot be reached), so the host closed it", run, threadID, bound)
	if got := fmt.Sprint(err); got != want {
		t.Errorf("Close: %s\nwant: %s", got, want)
	}
	checkExited(t, "Close", plugin, provider)
	e.openLog = nil
	e.open()
	th := e.waitFor(threadID, "the run's end", allRunsEnded(1))
	if diff := cmp.Diff([]string{"run 1 started", "session opened (resume \"\": false)",
		"session ended: the host restarted while this was in progress", `run 1 ended failed "" host_restarted`}, e.lifecycle(threadID, 0)); diff != "" {
		t.Errorf("stored order (-want +got):\n%s", diff)
	}
	if r := th.Runs[0]; r.Status != domain.RunStatusFailed {
		t.Errorf("run after the next start: %+v", r)
	}
}
