package lease

import (
	"fmt"
	"sync"

	"github.com/baton-run/baton/host/internal/eventlog"
)

// Guard is an event log that fails when the lease is lost: its Failed
// closes, its Failure says the lease was lost, and its decided writes are
// refused from then on. A host on it stops as for any store failure (its
// providers killed, its commands refused, the service exiting 1 for its
// supervisor to start it again as a standby), and writes nothing more that
// could meet the new holder's. A write is refused, too, from the instant
// the lease may have expired on the holder's clock (Held), before the
// renewer has found out. A write already on its way when the lease
// is lost is the shared log's to refuse (jetstreamlog fences another
// host's writes).
type Guard struct {
	eventlog.Log
	lease *Lease

	failed chan struct{} // closed when the lease is lost or the log fails
	mu     sync.Mutex
	cause  error

	closing   chan struct{} // closed by Close: the watcher stops
	watched   chan struct{} // closed when the watcher has stopped
	closeOnce sync.Once
}

// Guard wraps the log this host writes while it holds the lease (after
// Acquire); Close closes the log.
func (l *Lease) Guard(log eventlog.Log) *Guard {
	g := &Guard{Log: log, lease: l, failed: make(chan struct{}), closing: make(chan struct{}), watched: make(chan struct{})}
	lost := l.Lost()
	go func() { // owned by the Guard: Close stops and waits for it
		defer close(g.watched)
		var cause error
		select {
		case <-lost:
			cause = fmt.Errorf("lost %s: %w", l.name(), l.Err())
		case <-log.Failed():
			cause = log.Failure()
		case <-g.closing:
			return
		}
		g.mu.Lock()
		g.cause = cause
		g.mu.Unlock()
		close(g.failed)
	}()
	return g
}

// Failed is closed once the lease is lost or the log has failed.
func (g *Guard) Failed() <-chan struct{} { return g.failed }

// Failure is why (nil while neither happened).
func (g *Guard) Failure() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.cause
}

// refused is the failure a write meets once the lease is lost, or from
// the instant it may have expired (Held), before the renewer finds out.
func (g *Guard) refused() error {
	select {
	case <-g.failed:
		return g.Failure()
	default:
	}
	if !g.lease.Held() {
		return fmt.Errorf("the lease on installation %s expired before it was renewed", g.lease.opts.Installation)
	}
	return nil
}

func (g *Guard) Append(in eventlog.Batch) ([]eventlog.Record, []string, error) {
	if err := g.refused(); err != nil {
		return nil, nil, err
	}
	return g.Log.Append(in)
}

func (g *Guard) EffectDone(ref eventlog.EffectRef) error {
	if err := g.refused(); err != nil {
		return err
	}
	return g.Log.EffectDone(ref)
}

func (g *Guard) UpdateDelivery(d eventlog.StoredDelivery) error {
	if err := g.refused(); err != nil {
		return err
	}
	return g.Log.UpdateDelivery(d)
}

func (g *Guard) DeliveryDone(refs []eventlog.DeliveryRef, states ...eventlog.TargetState) error {
	if err := g.refused(); err != nil {
		return err
	}
	return g.Log.DeliveryDone(refs, states...)
}

// Close stops watching the lease and closes the log.
func (g *Guard) Close() error {
	g.closeOnce.Do(func() { close(g.closing) })
	<-g.watched
	return g.Log.Close()
}
