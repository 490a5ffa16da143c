package notify

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/baton-run/baton/host/internal/eventlog"
	"github.com/baton-run/baton/sdk/clock"
)

// Store is what a Deliverer needs of the event log.
type Store interface {
	Deliveries(target string) ([]eventlog.StoredDelivery, error)
	UpdateDelivery(eventlog.StoredDelivery) error
	DeliveryDone(refs []eventlog.DeliveryRef, states ...eventlog.TargetState) error
	TargetStates() ([]eventlog.TargetState, error)
}

// Config configures a host's webhooks. Its zero value has no targets:
// nothing is delivered, and deliveries the log holds for targets no
// longer given are dropped when a Deliverer runs.
type Config struct {
	Targets []Target
	// Secret signs each delivery (SignatureHeader); none: unsigned.
	Secret []byte
	// Client sends the deliveries (nil: one that follows no redirect).
	Client *http.Client
}

// Deliverer sends a store's deliveries to their targets: one loop per
// target, each sending what is due in event order, one at a time, then
// waiting on the clock for the next due, or for Wake.
type Deliverer struct {
	store   Store
	targets []Target
	send    *sender
	clock   clock.Clock
	log     hclog.Logger
	wake    map[string]chan struct{}
	// tried, when set (by tests), is told of each try once it is
	// recorded: the entry as stored, and whether it was delivered.
	tried func(ref eventlog.DeliveryRef, e Entry, delivered bool)
}

// NewDeliverer makes a Deliverer of a store's deliveries to cfg's targets,
// timed by c (nil: the system's clock).
func NewDeliverer(store Store, cfg Config, c clock.Clock, log hclog.Logger) *Deliverer {
	c = clock.Or(c)
	d := &Deliverer{store: store, targets: cfg.Targets, send: newSender(cfg.Client, cfg.Secret, c), clock: c,
		log: log, wake: map[string]chan struct{}{}}
	for _, t := range cfg.Targets {
		d.wake[t.URL] = make(chan struct{}, 1)
	}
	return d
}

// Wake tells the loop of a target that a delivery to it was committed.
func (d *Deliverer) Wake(target string) {
	select {
	case d.wake[target] <- struct{}{}:
	default: // one is waiting already (or the target is not one)
	}
}

// Run drops the deliveries to targets it was not given, then runs a loop
// per target until ctx ends. A try that ctx cuts short is not recorded:
// it is made again by the next Deliverer; one that ctx ends after it was
// delivered is (the store must stay open until Run returns).
func (d *Deliverer) Run(ctx context.Context) {
	d.dropStale()
	var wg sync.WaitGroup
	for _, t := range d.targets {
		wg.Go(func() { d.loop(ctx, t.URL) })
	}
	wg.Wait()
}

// dropStale removes the deliveries to URLs that are no longer targets
// (`baton notify remove`, or a --notify not given again), and what they
// were delivered, saying so.
func (d *Deliverer) dropStale() {
	all, err := d.store.Deliveries("")
	if err != nil {
		d.log.Error("read the webhook deliveries", "error", err)
		return
	}
	states, err := d.store.TargetStates()
	if err != nil {
		d.log.Error("read the webhook targets' states", "error", err)
		return
	}
	stale := map[string][]eventlog.DeliveryRef{}
	for _, st := range states {
		if _, ok := d.wake[st.Target]; !ok {
			stale[st.Target] = nil
		}
	}
	for _, sd := range all {
		if _, ok := d.wake[sd.Target]; !ok {
			stale[sd.Target] = append(stale[sd.Target], sd.DeliveryRef)
		}
	}
	for url, refs := range stale {
		if err := d.store.DeliveryDone(refs, eventlog.TargetState{Target: url}); err != nil {
			d.log.Error("drop the deliveries to a URL that is no longer a webhook target", "url", url, "error", err)
			continue
		}
		if len(refs) > 0 {
			d.log.Info("dropped the deliveries to a URL that is no longer a webhook target", "url", url, "deliveries", len(refs))
		}
	}
}

// delivered is what the store says target was delivered.
func (d *Deliverer) delivered(target string) Delivered {
	states, err := d.store.TargetStates()
	if err != nil {
		d.log.Error("read the webhook targets' states", "error", err)
		return Delivered{}
	}
	for _, st := range states {
		if st.Target == target {
			got, err := DecodeDelivered(st.Value)
			if err != nil {
				d.log.Error("a webhook target's state cannot be read; it is counted again from 0", "url", target, "error", err)
			}
			return got
		}
	}
	return Delivered{}
}

// loop sends a target's deliveries until ctx ends.
func (d *Deliverer) loop(ctx context.Context, target string) {
	st := d.delivered(target)
	for {
		next := d.round(ctx, target, &st)
		if ctx.Err() != nil {
			return
		}
		if !d.wait(ctx, target, next) {
			return
		}
	}
}

// storePause is how long a loop whose store read or write failed waits
// before it reads again.
const storePause = time.Minute

// round sends the target's deliveries that are due, in event order,
// counting them in st, and returns when the first of the others is due
// (zero: none is).
func (d *Deliverer) round(ctx context.Context, target string, st *Delivered) time.Time {
	list, err := d.store.Deliveries(target)
	if err != nil {
		d.log.Error("read the webhook deliveries", "url", target, "error", err)
		return d.clock.Now().Add(storePause)
	}
	var next time.Time
	later := func(at time.Time) {
		if next.IsZero() || at.Before(next) {
			next = at
		}
	}
	for _, sd := range list {
		e, err := DecodeEntry(sd.Value)
		if err != nil {
			d.log.Error("a webhook delivery cannot be read; it is left as it is", "url", target, "seq", sd.Seq, "error", err)
			continue
		}
		if e.Failed {
			continue
		}
		if now := d.clock.Now(); e.NextTry.After(now) {
			later(e.NextTry)
			continue
		}
		e, sent, err := d.try(ctx, target, sd, e, st)
		if d.tried != nil && (sent || ctx.Err() == nil) {
			d.tried(sd.DeliveryRef, e, sent)
		}
		switch {
		case ctx.Err() != nil:
			return time.Time{}
		case err != nil:
			d.log.Error("record a webhook delivery", "url", target, "seq", sd.Seq, "error", err)
			later(d.clock.Now().Add(storePause))
		case !sent && !e.Failed:
			later(e.NextTry)
		}
	}
	return next
}

// try sends one delivery once and records what came of it: removed once
// delivered, and counted in st; else its failed try. It returns the entry
// as recorded and whether it was delivered; err is the store's.
func (d *Deliverer) try(ctx context.Context, target string, sd eventlog.StoredDelivery, e Entry, st *Delivered) (Entry, bool, error) {
	perr := d.send.post(ctx, target, e.ID, e.Body)
	if perr == nil { // recorded even as ctx ends: the store closes after the Deliverer
		next := Delivered{Count: st.Count + 1, LastID: e.ID, LastAt: d.clock.Now().UTC()}
		state, _ := json.Marshal(next) // a state always encodes
		if err := d.store.DeliveryDone([]eventlog.DeliveryRef{sd.DeliveryRef}, eventlog.TargetState{Target: target, Value: state}); err != nil {
			return e, true, err
		}
		*st = next
		d.log.Debug("webhook delivered", "url", target, "id", e.ID, "type", e.Type, "tries", e.Attempts+1)
		return e, true, nil
	}
	if ctx.Err() != nil {
		return e, false, nil // cut short: the next Deliverer tries again
	}
	var r *refusal
	forGood := errors.As(perr, &r) && r.forGood()
	e = e.failed(d.clock.Now(), perr, forGood)
	if e.Failed {
		d.log.Warn("webhook delivery given up", "url", target, "id", e.ID, "tries", e.Attempts, "error", perr)
	} else if e.Attempts&(e.Attempts-1) == 0 { // the tries numbered by powers of two: an outage says so a few times
		d.log.Warn("webhook delivery failed; it is tried again", "url", target, "id", e.ID, "tries", e.Attempts, "next", e.NextTry, "error", perr)
	}
	return e, false, d.store.UpdateDelivery(eventlog.StoredDelivery{DeliveryRef: sd.DeliveryRef, Value: encodeEntry(e)})
}

// wait waits until next (forever when zero), a Wake, or ctx's end; it
// says whether the loop goes on.
func (d *Deliverer) wait(ctx context.Context, target string, next time.Time) bool {
	var due <-chan time.Time
	if !next.IsZero() {
		t := timerAt(d.clock, next)
		defer t.Stop()
		due = t.C()
	}
	select {
	case <-due:
	case <-d.wake[target]:
	case <-ctx.Done():
		return false
	}
	return true
}

// timerAt is a timer on c for the instant at (clock.SleepUntil's).
func timerAt(c clock.Clock, at time.Time) clock.Timer {
	if ac, ok := c.(interface{ NewTimerAt(time.Time) clock.Timer }); ok {
		return ac.NewTimerAt(at)
	}
	return c.NewTimer(at.Sub(c.Now()))
}
