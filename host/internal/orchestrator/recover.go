package orchestrator

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"

	"github.com/hashicorp/go-hclog"

	"github.com/baton-run/baton/host/internal/domain"
	"github.com/baton-run/baton/host/internal/eventlog"
)

// What a start reconciles, and the one-time indexing of a log written
// before the thread index existed.

// layoutVersion is the version of the store's indexes: the thread heads,
// live markers and snapshots kept beside the events. 2: a head holds its
// thread's usage ledger and rate limits (reheaded).
const layoutVersion = 2

// index makes sure the thread index matches the log. A log written by a
// host from before the index (no layout recorded, events present) is read
// once, whole, to write each thread's head, live marker and snapshot; every
// later start reads none of it. An index of an older layout has its heads
// written again (rehead).
func (h *Host) index() error {
	switch n, err := layoutOf(h.store); {
	case err != nil || n == layoutVersion:
		return err
	case n > 0:
		return h.rehead()
	}
	threads := map[string]*domain.Thread{}
	var order []string
	var after uint64
	for {
		recs, err := h.store.After(after, 4096)
		if err != nil {
			return fmt.Errorf("index the event log: %w", err)
		}
		if len(recs) == 0 {
			break
		}
		for _, r := range recs {
			t, ok := threads[r.ThreadID]
			if !ok {
				t = &domain.Thread{}
				threads[r.ThreadID] = t
				order = append(order, r.ThreadID)
			}
			if err := apply(t, r); err != nil {
				return fmt.Errorf("index the event log: thread %s: %w", r.ThreadID, err)
			}
			after = r.Sequence
		}
	}
	for _, id := range order {
		t := threads[id]
		if err := putParts(h.store, id, t); err != nil {
			return fmt.Errorf("index thread %s: %w", id, err)
		}
		body, _ := json.Marshal(t) // a thread always encodes
		sn := &eventlog.Snapshot{Schema: projectionSchema, Seq: t.Sequence, Body: body}
		if err := h.store.PutThreadState(id, encodeHead(t.Summary(), t), t.Live(), sn); err != nil {
			return fmt.Errorf("index thread %s: %w", id, err)
		}
	}
	if len(order) > 0 {
		h.log.Info("indexed the event log's threads", "threads", len(order), "events", after)
	}
	return h.store.SetMeta("layout", []byte(strconv.Itoa(layoutVersion)))
}

// indexed says whether the store's indexes are written, in this baton's
// layout or an older one it reads (a layout it does not know is an error).
func indexed(store eventlog.Log) (bool, error) {
	n, err := layoutOf(store)
	return n > 0, err
}

// layoutOf is the layout of the store's indexes (0: none written; a
// layout this baton does not know is an error).
func layoutOf(store eventlog.Log) (int, error) {
	v, ok, err := store.Meta("layout")
	switch {
	case err != nil:
		return 0, fmt.Errorf("read the store's layout: %w", err)
	case !ok:
		return 0, nil
	}
	if n, _ := strconv.Atoi(string(v)); n >= 1 && n <= layoutVersion {
		return n, nil
	}
	return 0, fmt.Errorf("the event log's indexes are layout %s; this baton knows layout %d (a newer baton wrote them?)", v, layoutVersion)
}

// recover reconciles threads whose sessions or runs were live when the
// previous host stopped, or that have provider actions left in the outbox:
// those processes are gone, so the actions are cancelled with a reason,
// never performed blindly against a new process. The host's own work left
// in the outbox (checkpoint captures, rollback stages) is performed again,
// after the recovery, in its order. Runs the last host left queued start
// then, with no new message, in a host that runs threads' unattended work
// (baton serve); in a host embedded for one command they wait for the
// thread's next message, so that a command that only reads a thread, or
// cancels its queued runs, sends nothing. Either way the event that
// starts them names them (run.queue.resumed). Only those threads are
// read.
func (h *Host) recover() error {
	outbox, err := h.store.Outbox()
	if err != nil {
		return err
	}
	live, err := h.store.LiveThreads()
	if err != nil {
		return err
	}
	left, err := leftEffects(outbox)
	if err != nil {
		return err
	}
	var ids []string
	if h.shared() {
		// A thread of this host's marked lost while it was away, or with
		// runs it left queued, is its to take back and start.
		back, err := h.headsWhere(func(s domain.ThreadSummary) bool {
			return s.Host == h.cfg.Host && (s.HostLost != nil || s.Queued > 0)
		})
		if err != nil {
			return err
		}
		live = append(live, back...)
	}
	for _, id := range liveThreads(live, outbox) {
		// On a shared log, a host reconciles its own threads only: the
		// others' are their hosts', or the coordinator's to take over
		// (TakeOver).
		t, err := h.view(id)
		if err != nil {
			return fmt.Errorf("recover thread %s: %w", id, err)
		}
		if h.owns(t) {
			ids = append(ids, id)
		}
	}
	defer h.armWaits(ids) // after the recovery: a wait that passed while no host ran fires now, once
	for _, id := range ids {
		reason := domain.Recover{Reason: "the host restarted while this was in progress"}
		if err := h.recoverThread(id, reason, left[id]); err != nil {
			return err
		}
	}
	return nil
}

// leftEffects are the outbox's effects by thread, in their order.
func leftEffects(outbox []eventlog.StoredEffect) (map[string][]domain.Effect, error) {
	left := map[string][]domain.Effect{}
	for _, se := range outbox {
		e, err := domain.DecodeEffect(se.Data)
		if err != nil {
			return nil, fmt.Errorf("recover thread %s: outbox entry %s is corrupt: %w", se.ThreadID, se.ID, err)
		}
		left[se.ThreadID] = append(left[se.ThreadID], domain.Stored(e, se.ThreadID, se.ID))
	}
	return left, nil
}

// recoverThread reconciles one thread this host now runs, whose session
// and runs belonged to a process that is gone (this host's before it
// restarted, or a lost host's): rec ends what was in flight, cancels the
// provider actions left in the outbox, and the host's own work left there
// is performed again; then, on an unattended host, its queued runs start.
func (h *Host) recoverThread(id string, rec domain.Recover, left []domain.Effect) error {
	var done []eventlog.EffectRef
	var again []domain.Effect
	for _, e := range left {
		// Performed again after the recovery, marked so: a run it
		// ended does not start the next one when its checkpoint is
		// recorded.
		if e, ok := domain.Replay(e); ok {
			again = append(again, e)
			continue
		}
		rec.Effects = append(rec.Effects, domain.Pending(e))
		done = append(done, eventlog.EffectRef{ThreadID: id, ID: e.Head().ID})
	}
	t, err := h.view(id)
	if err != nil {
		return fmt.Errorf("recover thread %s: %w", id, err)
	}
	if t.HostLost != nil && t.Owner() == h.cfg.Host {
		// Marked lost while this host was away: it is back.
		if err := h.hostCommand(id, domain.ClaimThread{Reason: "host_back"}); err != nil {
			return fmt.Errorf("recover thread %s: %w", id, err)
		}
	}
	if t.Live() || len(rec.Effects) > 0 {
		last, _ := h.store.Last()
		rec.After = last
		if _, err := h.dispatch(h.ctx, domain.Observed(id, rec), done); err != nil {
			return fmt.Errorf("recover thread %s: %w", id, err)
		}
	}
	h.push(id, again)
	// Then runs the last host left queued start by themselves, after
	// the effects it left (their effects queue behind those).
	if !h.cfg.Unattended {
		return nil
	}
	if t, err := h.view(id); err == nil && t.Summary().Queued > 0 {
		last, _ := h.store.Last()
		if _, err := h.dispatch(h.ctx, domain.Observed(id, domain.StartQueued{After: last}), nil); err != nil {
			return fmt.Errorf("recover thread %s: start its queued runs: %w", id, err)
		}
	}
	return nil
}

// liveThreads are the threads a restart must look at: marked live, or with
// effects left in the outbox; sorted.
func liveThreads(live []string, outbox []eventlog.StoredEffect) []string {
	ids := slices.Clone(live)
	for _, e := range outbox {
		ids = append(ids, e.ThreadID)
	}
	slices.Sort(ids)
	return slices.Compact(ids)
}

// Reindex writes a store's thread heads, live markers and snapshots from
// its events, as a host's first open of a store without them does: for a
// store rebuilt from what of a damaged one was intact (baton doctor).
// Threads it leaves live are reconciled by the next host to open it, as
// after any restart.
func Reindex(store eventlog.Log, log hclog.Logger) error {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	h := &Host{store: store, log: log}
	return h.index()
}
