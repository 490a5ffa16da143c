package orchestrator

import (
	"context"
	"time"

	"github.com/baton-run/baton/host/internal/domain"
	"github.com/baton-run/baton/host/internal/eventlog"
	"github.com/baton-run/baton/host/internal/notify"
)

// Webhooks (Config.Notify): a commit writes, in its own batch, one
// delivery per target for each of its events that needs a person
// (domain.Notices), and wakes the targets' loops, which the host's
// notify.Deliverer runs until Close. A host without Config.Notify (one
// embedded for a command) writes none and sends none: deliveries left in
// the log wait for the next service.

// startNotifier runs the host's deliverer, when it has one.
func (h *Host) startNotifier() {
	if h.cfg.Notify == nil {
		return
	}
	h.notifier = notify.NewDeliverer(h.store, *h.cfg.Notify, h.cfg.Clock, h.log.Named("notify"))
	if h.shared() {
		return // one host delivers every host's: Deliver
	}
	h.wg.Go(func() { h.notifier.Run(h.ctx) })
}

// Deliver runs the host's deliverer, on a shared log, until ctx ends or
// the host closes: every host writes the deliveries its own events call
// for, and the one that coordinates the installation delivers them all,
// so that none is sent twice. One Deliver runs at a time: a second waits
// for the first to end.
func (h *Host) Deliver(ctx context.Context) {
	if h.notifier == nil || !h.shared() {
		return
	}
	h.smu.Lock()
	defer h.smu.Unlock()
	if h.closing {
		return
	}
	h.wg.Go(func() {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		defer context.AfterFunc(h.ctx, cancel)()
		h.delivering.Lock()
		defer h.delivering.Unlock()
		if ctx.Err() == nil {
			h.notifier.Run(ctx)
		}
	})
}

// deliveries are the deliveries a batch of a thread's events calls for,
// committed at now; was is the thread before them.
func (h *Host) deliveries(threadID string, was *domain.Thread, events []domain.Payload, now time.Time) []eventlog.Delivery {
	if h.notifier == nil || len(h.cfg.Notify.Targets) == 0 {
		return nil
	}
	var out []eventlog.Delivery
	for _, n := range domain.Notices(was, events) {
		for _, t := range h.cfg.Notify.Targets {
			if !t.Wants(n.Type) {
				continue
			}
			out = append(out, eventlog.Delivery{Target: t.URL, Event: n.Event,
				Value: func(seq uint64) []byte { return notify.NewEntry(threadID, seq, now, n) }})
		}
	}
	return out
}

// wakeNotifier tells the targets' loops of the deliveries a batch wrote.
func (h *Host) wakeNotifier(ds []eventlog.Delivery) {
	for _, d := range ds {
		h.notifier.Wake(d.Target)
	}
}
