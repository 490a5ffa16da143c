package orchestrator

import (
	"context"
	"fmt"
	"sync"

	"github.com/baton-run/baton/host/internal/checkpoint"
	"github.com/baton-run/baton/host/internal/eventlog"
	"github.com/baton-run/baton/host/internal/pluginhost"
)

// On a log several hosts share, each host follows the others' commits
// (followLog): what it shows of a thread another host runs is what that
// host shows, moments later.

// followLog brings the other hosts' commits after seq to this host's
// readers, batch by batch as the replica applies them: each cached thread
// they touch has them applied to its projection (a new one, published as
// a commit's is), and then the thread's streams wake. Threads not cached
// load from the replica when next read. It ends when the host closes.
func (h *Host) followLog(seq uint64) {
	for {
		_, changed := h.store.Last()
		for {
			recs, err := h.store.After(seq, streamPage)
			if err != nil {
				h.log.Error("follow the shared log", "after", seq, "error", err)
				h.fail(fmt.Errorf("follow the shared log after %d: %w", seq, err))
				return
			}
			if len(recs) == 0 {
				break
			}
			if err := h.applyFollowed(recs); err != nil {
				h.fail(err)
				return
			}
			seq = recs[len(recs)-1].Sequence
			h.followed.advance(seq)
		}
		select {
		case <-changed:
		case <-h.ctx.Done():
			return
		}
	}
}

// WaitFollowed waits until the host shows the log up to seq: at once on a
// host alone on its log; on a shared log, once it has applied the other
// hosts' events through seq (what it reads then includes them). The
// service waits so after a command it carried to the thread's owner, so
// that its client reads its own writes.
func (h *Host) WaitFollowed(ctx context.Context, seq uint64) error {
	if !h.shared() {
		return nil
	}
	for {
		at, changed := h.followed.current()
		if at >= seq {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("wait for the shared log's sequence %d here (at %d): %w", seq, at, context.Cause(ctx))
		case <-h.ctx.Done():
			return ErrClosed
		}
	}
}

// progress is a sequence that only grows, and a channel closed each time
// it does.
type progress struct {
	mu      sync.Mutex
	at      uint64
	changed chan struct{}
}

func (p *progress) advance(seq uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if seq <= p.at && p.changed != nil {
		return
	}
	p.at = max(p.at, seq)
	if p.changed != nil {
		close(p.changed)
	}
	p.changed = make(chan struct{})
}

func (p *progress) current() (uint64, <-chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.changed == nil {
		p.changed = make(chan struct{})
	}
	return p.at, p.changed
}

// applyFollowed applies a page of the other hosts' events, in order, thread by
// thread.
func (h *Host) applyFollowed(recs []eventlog.Record) error {
	var order []string
	byThread := map[string][]eventlog.Record{}
	for _, r := range recs {
		if _, ok := byThread[r.ThreadID]; !ok {
			order = append(order, r.ThreadID)
		}
		byThread[r.ThreadID] = append(byThread[r.ThreadID], r)
	}
	for _, id := range order {
		trecs := byThread[id]
		if err := h.cache.follow(id, func(e *threadEntry) error { return h.applyToEntry(e, trecs) }); err != nil {
			return err
		}
		h.signals.publish(id, trecs[len(trecs)-1].Sequence)
	}
	return nil
}

// applyToEntry applies a thread's followed events to its cached projection
// (e.mu held), skipping those it already shows (it was loaded after they
// were applied to the replica).
func (h *Host) applyToEntry(e *threadEntry, recs []eventlog.Record) error {
	old := e.proj.Load()
	if old == nil {
		return nil // not loaded: it loads from the replica when read
	}
	copied := old.Clone()
	t := &copied
	applied := false
	for _, r := range recs {
		if r.Sequence <= t.Sequence {
			continue
		}
		if err := apply(t, r); err != nil {
			return fmt.Errorf("follow thread %s: %w", e.id, err)
		}
		applied = true
	}
	if !applied {
		return nil
	}
	if err := putParts(h.store, e.id, t); err != nil {
		return fmt.Errorf("follow thread %s: %w", e.id, err)
	}
	e.publish(t)
	return nil
}

// newHost is the Host every mode of Open starts from, on its store.
func newHost(cfg Config, store eventlog.Log) *Host {
	h := &Host{cfg: cfg, log: cfg.Logger, store: store,
		plugins: pluginhost.New(pluginhost.Config{Dirs: cfg.PluginDirs, Logger: cfg.Logger.Named("plugin"), Clock: cfg.Clock, CallTimeout: cfg.PluginCallTimeout}),
		cps:     checkpoint.New(checkpoint.WithClock(cfg.Clock)),
		workers: map[string]*worker{}, sessions: map[string]*liveSession{}, failed: make(chan struct{})}
	h.ctx, h.cancel = context.WithCancel(context.Background())
	h.stopping, h.stop = context.WithCancel(h.ctx)
	h.cache.init(cfg.MaxThreads)
	return h
}
