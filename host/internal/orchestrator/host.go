// Package orchestrator is the host's core: it takes commands, decides them
// with the pure domain, commits their events and receipts in one batch,
// keeps the thread projections, and performs the effects through provider
// plugins. It is the one writer of the event log.
package orchestrator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/hashicorp/go-hclog"

	"github.com/baton-run/baton/host/internal/checkpoint"
	"github.com/baton-run/baton/host/internal/domain"
	"github.com/baton-run/baton/host/internal/eventlog"
	"github.com/baton-run/baton/host/internal/ids"
	"github.com/baton-run/baton/host/internal/pluginhost"
)

// Config configures a host. The zero value of every field but DataDir works.
type Config struct {
	// DataDir holds the event log and the raw-frame logs.
	DataDir string
	// PluginDirs are searched for plugin binaries, in order.
	PluginDirs []string
	Logger     hclog.Logger
	// Now is the clock (default time.Now).
	Now func() time.Time
	// IDs allocates ids (default: randomly seeded).
	IDs *ids.Allocator
}

// Host is a running orchestrator.
type Host struct {
	cfg     Config
	log     hclog.Logger
	store   *eventlog.Store
	plugins *pluginhost.Manager
	cps     *checkpoint.Service

	ctx    context.Context // ends at Close
	cancel context.CancelFunc
	wg     sync.WaitGroup // effect workers and session pumps

	mu      sync.Mutex // the writer: decide, append, apply
	threads map[string]*domain.Thread
	workers map[string]*worker
	closed  bool // no more commands: the store is closing

	smu      sync.Mutex
	sessions map[string]*liveSession // by thread id
	closing  bool
}

// Open opens the host on its data dir: the log is read and every thread's
// projection rebuilt, then threads left mid-run by a previous host are
// reconciled.
func Open(cfg Config) (*Host, error) {
	if cfg.DataDir == "" {
		return nil, errors.New("open host: no data dir")
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.IDs == nil {
		cfg.IDs = ids.New()
	}
	for _, d := range []string{cfg.DataDir, filepath.Join(cfg.DataDir, "rawframes")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("open host: %w", err)
		}
	}
	store, err := eventlog.Open(filepath.Join(cfg.DataDir, "events"), cfg.Logger)
	if err != nil {
		return nil, fmt.Errorf("open host: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	h := &Host{cfg: cfg, log: cfg.Logger, store: store,
		plugins: pluginhost.New(pluginhost.Config{Dirs: cfg.PluginDirs, Logger: cfg.Logger.Named("plugin")}),
		cps:     checkpoint.New(),
		ctx:     ctx, cancel: cancel, threads: map[string]*domain.Thread{}, workers: map[string]*worker{},
		sessions: map[string]*liveSession{}}
	if err := h.rebuild(); err != nil {
		cancel()
		store.Close()
		return nil, fmt.Errorf("open host: %w", err)
	}
	if err := h.recover(); err != nil {
		h.Close()
		return nil, fmt.Errorf("open host: %w", err)
	}
	return h, nil
}

// rebuild applies the whole log to empty projections.
func (h *Host) rebuild() error {
	var after uint64
	for {
		recs, err := h.store.After(after, 4096)
		if err != nil {
			return err
		}
		if len(recs) == 0 {
			return nil
		}
		for _, r := range recs {
			if err := h.apply(r); err != nil {
				return err
			}
			after = r.Sequence
		}
	}
}

// apply decodes a stored event and applies it (the rebuild path).
func (h *Host) apply(r eventlog.Record) error {
	p, err := domain.DecodePayload(r.Type, r.Data)
	if err != nil {
		return fmt.Errorf("event %d of thread %s: %w", r.Sequence, r.ThreadID, err)
	}
	return h.evolve(r, p)
}

// evolve applies an event's payload to its thread's projection.
func (h *Host) evolve(r eventlog.Record, p domain.Payload) error {
	t, ok := h.threads[r.ThreadID]
	if !ok {
		if _, create := p.(domain.ThreadCreated); !create {
			return fmt.Errorf("event %d (%s) is for thread %s, which was never created", r.Sequence, r.Type, r.ThreadID)
		}
		t = &domain.Thread{}
		h.threads[r.ThreadID] = t
	}
	domain.Evolve(t, domain.Event{Sequence: r.Sequence, ThreadID: r.ThreadID, At: r.At, Payload: p})
	return nil
}

// recover reconciles threads whose sessions or runs were live when the
// previous host stopped, or that have provider actions left in the outbox:
// those processes are gone, so the actions are cancelled with a reason,
// never performed blindly against a new process. The host's own work left
// in the outbox (checkpoint captures, rollback stages) is performed again,
// after the recovery, in its order.
func (h *Host) recover() error {
	outbox, err := h.store.Outbox()
	if err != nil {
		return err
	}
	left := map[string][]domain.Effect{}
	for _, se := range outbox {
		var e domain.Effect
		if err := json.Unmarshal(se.Data, &e); err != nil {
			return fmt.Errorf("recover thread %s: outbox entry %s is corrupt: %w", se.ThreadID, se.ID, err)
		}
		e.ID, e.ThreadID = se.ID, se.ThreadID
		left[se.ThreadID] = append(left[se.ThreadID], e)
	}
	h.mu.Lock()
	var todo []string
	for id, t := range h.threads {
		if needsRecovery(t) || len(left[id]) > 0 {
			todo = append(todo, id)
		}
	}
	h.mu.Unlock()
	slices.Sort(todo)
	for _, id := range todo {
		rec := domain.Recover{Reason: "the host restarted while this was in progress"}
		var done []eventlog.EffectRef
		var again []domain.Effect
		for _, e := range left[id] {
			if domain.Replayable(e.Type) {
				again = append(again, e)
				continue
			}
			rec.Effects = append(rec.Effects, domain.PendingEffect{ID: e.ID, Type: e.Type, RunID: e.RunID, MessageID: e.MessageID})
			done = append(done, eventlog.EffectRef{ThreadID: id, ID: e.ID})
		}
		h.mu.Lock()
		needed := needsRecovery(h.threads[id])
		h.mu.Unlock()
		if needed || len(rec.Effects) > 0 {
			last, _ := h.store.Last()
			_, err := h.dispatch(h.ctx, domain.Command{ID: fmt.Sprintf("recover:%s:%d", id, last), ThreadID: id, Payload: rec}, done)
			if err != nil {
				return fmt.Errorf("recover thread %s: %w", id, err)
			}
		}
		// After the recovery: a run it ended does not start the next one
		// when its checkpoint is recorded.
		h.mu.Lock()
		for _, e := range again {
			e.Replayed = true
			h.workerFor(id).push(e)
		}
		h.mu.Unlock()
	}
	return nil
}

func needsRecovery(t *domain.Thread) bool {
	for _, s := range t.ProviderSessions {
		if s.Status == domain.SessionStatusOpen {
			return true
		}
	}
	for _, r := range t.Runs {
		if domain.Active(r.Status) {
			return true
		}
	}
	return false
}

// Close closes live sessions (their provider processes stop and their last
// events are recorded), stops plugins and closes the log.
//
// Order matters: sessions close first (their ends are recorded), then the
// workers stop, then the plugins are killed, which ends any event stream
// still open, so that waiting for the goroutines cannot hang.
func (h *Host) Close() error {
	h.smu.Lock()
	if h.closing {
		h.smu.Unlock()
		return nil
	}
	h.closing = true
	live := make([]*liveSession, 0, len(h.sessions))
	for _, s := range h.sessions {
		live = append(live, s)
	}
	h.smu.Unlock()
	var wg sync.WaitGroup
	for _, s := range live {
		wg.Go(func() { s.close(h.log) })
	}
	wg.Wait()
	h.cancel()
	h.plugins.Close()
	h.wg.Wait()
	h.mu.Lock()
	h.closed = true
	h.mu.Unlock()
	return h.store.Close()
}

// ErrClosed is returned by Dispatch after Close began.
var ErrClosed = errors.New("host closed")

// Dispatch decides a command, commits its events, receipt and effects in
// one synced batch, applies the events, and hands the effects to the
// thread's worker. A command id seen before returns the original receipt
// and does nothing else; the same id with other content is a conflict.
func (h *Host) Dispatch(ctx context.Context, cmd domain.Command) (domain.Receipt, error) {
	return h.dispatch(ctx, cmd, nil)
}

// dispatch is Dispatch that also settles outbox entries in the batch.
func (h *Host) dispatch(ctx context.Context, cmd domain.Command, done []eventlog.EffectRef) (domain.Receipt, error) {
	if err := validID("commandId", cmd.ID); err != nil {
		return domain.Receipt{}, err
	}
	if cmd.Payload == nil {
		return domain.Receipt{}, fmt.Errorf("%w: command %s has no payload", domain.ErrInvalid, cmd.ID)
	}
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return domain.Receipt{}, ErrClosed
	}
	// The hash is of the command as the client sent it: a retried
	// thread.create without a thread id is the same command.
	hash := domain.Hash(cmd)
	if b, ok, err := h.store.Receipt(cmd.ID); err != nil || ok {
		h.mu.Unlock()
		if err != nil {
			return domain.Receipt{}, err
		}
		var rc domain.Receipt
		if err := json.Unmarshal(b, &rc); err != nil {
			return domain.Receipt{}, fmt.Errorf("receipt of %s is corrupt: %w", cmd.ID, err)
		}
		if rc.PayloadHash != hash {
			return domain.Receipt{}, fmt.Errorf("%w: command %s was already used for another %s command on thread %s",
				domain.ErrConflict, cmd.ID, rc.Type, rc.ThreadID)
		}
		return rc, nil
	}
	if _, create := cmd.Payload.(domain.CreateThread); create && cmd.ThreadID == "" {
		cmd.ThreadID = h.cfg.IDs.NewID("thr")
	}
	if err := validID("threadId", cmd.ThreadID); err != nil {
		h.mu.Unlock()
		return domain.Receipt{}, err
	}
	if p, ok := cmd.Payload.(domain.RespondToRequest); ok {
		if q := h.unreachable(cmd.ThreadID, p.RequestID); q != nil {
			h.mu.Unlock()
			// Invariant 11: an answer that cannot reach the provider is a
			// clear error at once, and the request says so from now on.
			if _, err := h.Dispatch(ctx, *unreachableCmd(cmd.ThreadID, q.ID)); err != nil {
				return domain.Receipt{}, err
			}
			return domain.Receipt{}, fmt.Errorf("%w: request %s cannot be answered: its provider process is gone", domain.ErrNotResumable, q.ID)
		}
	}
	now := h.cfg.Now()
	// The lock order is mu, then smu: reading the live session's
	// capabilities here is safe, and current.
	caps := h.capabilities(cmd.ThreadID)
	dec, err := domain.Decide(h.threads[cmd.ThreadID], cmd, domain.Env{Now: now, NewID: h.cfg.IDs.NewID, Caps: caps})
	if err != nil {
		h.mu.Unlock()
		return domain.Receipt{}, err
	}
	batch := eventlog.Batch{Events: make([]eventlog.Pending, len(dec.Events)), Done: done, CommandID: cmd.ID}
	for i, p := range dec.Events {
		data, err := json.Marshal(p)
		if err != nil {
			h.mu.Unlock()
			return domain.Receipt{}, fmt.Errorf("encode %s: %w", p.EventType(), err)
		}
		batch.Events[i] = eventlog.Pending{ThreadID: cmd.ThreadID, Type: p.EventType(), At: now, Data: data}
	}
	for _, e := range dec.Effects {
		data, _ := json.Marshal(e) // an Effect always encodes
		batch.Effects = append(batch.Effects, eventlog.Effect{ThreadID: e.ThreadID, Data: data})
	}
	rc := domain.Receipt{CommandID: cmd.ID, Type: cmd.Payload.CommandType(), ThreadID: cmd.ThreadID, PayloadHash: hash, At: now.UTC()}
	batch.Receipt = func(last uint64) ([]byte, error) {
		rc.Sequence = last
		return json.Marshal(rc)
	}
	recs, effectIDs, err := h.store.Append(batch)
	if err != nil {
		h.mu.Unlock()
		return domain.Receipt{}, err
	}
	// The payloads Decide made are applied as they are: decoding what was
	// just encoded would only repeat the work.
	for i, r := range recs {
		if err := h.evolve(r, dec.Events[i]); err != nil {
			h.mu.Unlock()
			return domain.Receipt{}, fmt.Errorf("apply committed event: %w", err)
		}
	}
	if h.ctx.Err() == nil { // closing: the effects wait in the outbox for the next host
		for i, e := range dec.Effects {
			e.ID = effectIDs[i]
			h.workerFor(e.ThreadID).push(e)
		}
	}
	h.mu.Unlock()
	return rc, nil
}

// capabilities is what the thread's live plugin says it can do (nothing,
// when the thread has no live session: then no provider turn is running
// to steer either).
func (h *Host) capabilities(threadID string) domain.Capabilities {
	h.smu.Lock()
	defer h.smu.Unlock()
	s, ok := h.sessions[threadID]
	if !ok {
		return domain.Capabilities{}
	}
	return domain.Capabilities{NativeSteering: s.plugin.Description.Capabilities.NativeSteering}
}

// unreachable returns a request that is pending and still thought live,
// but whose session's process is gone; h.mu is held.
func (h *Host) unreachable(threadID, requestID string) *domain.RuntimeRequest {
	t, ok := h.threads[threadID]
	if !ok {
		return nil
	}
	for i := range t.Requests {
		q := &t.Requests[i]
		if q.ID != requestID || q.Status != domain.RequestStatusPending || q.Delivery != domain.DeliveryLive {
			continue
		}
		if !h.sessionLive(threadID, q.SessionID) {
			return q
		}
	}
	return nil
}

// sessionLive says whether a session's plugin and stream are still there.
func (h *Host) sessionLive(threadID, sessionID string) bool {
	s, err := h.liveSessionFor(threadID, sessionID)
	if err != nil {
		return false
	}
	select {
	case <-s.plugin.Exited():
		return false
	default:
		return true
	}
}

func validID(what, id string) error {
	if id == "" {
		return fmt.Errorf("%w: no %s", domain.ErrInvalid, what)
	}
	if len(id) > 256 || strings.ContainsRune(id, 0) || !utf8.ValidString(id) {
		return fmt.Errorf("%w: %s %q is too long, not UTF-8 or holds a NUL byte", domain.ErrInvalid, what, id)
	}
	return nil
}

// Thread returns a copy of a thread's projection.
func (h *Host) Thread(id string) (domain.Thread, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	t, ok := h.threads[id]
	if !ok {
		return domain.Thread{}, fmt.Errorf("%w: thread %q", domain.ErrNotFound, id)
	}
	return t.Clone(), nil
}

// Snapshot returns a thread's projection and the log sequence it reflects:
// Events(ctx, seq) then yields every later event exactly once.
func (h *Host) Snapshot(id string) (domain.Thread, uint64, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	t, ok := h.threads[id]
	if !ok {
		return domain.Thread{}, 0, fmt.Errorf("%w: thread %q", domain.ErrNotFound, id)
	}
	last, _ := h.store.Last()
	return t.Clone(), last, nil
}

// Events yields every committed event after a sequence, in order, then
// waits for more until ctx ends or the host closes.
func (h *Host) Events(ctx context.Context, after uint64) iter.Seq2[eventlog.Record, error] {
	return func(yield func(eventlog.Record, error) bool) {
		for {
			if h.ctx.Err() != nil {
				return
			}
			_, changed := h.store.Last()
			recs, err := h.store.After(after, 1024)
			if err != nil {
				yield(eventlog.Record{}, err)
				return
			}
			for _, r := range recs {
				if !yield(r, nil) {
					return
				}
				after = r.Sequence
			}
			if len(recs) > 0 {
				continue
			}
			select {
			case <-changed:
			case <-ctx.Done():
				return
			case <-h.ctx.Done():
				return
			}
		}
	}
}

// ThreadStream is Events for one thread: a client that took Snapshot(id)
// at sequence N reads ThreadStream(ctx, id, N) and sees every later event
// of the thread exactly once.
func (h *Host) ThreadStream(ctx context.Context, threadID string, after uint64) iter.Seq2[eventlog.Record, error] {
	return func(yield func(eventlog.Record, error) bool) {
		for r, err := range h.Events(ctx, after) {
			if err != nil || r.ThreadID == threadID {
				if !yield(r, err) || err != nil {
					return
				}
			}
		}
	}
}

// LastSequence is the log's head.
func (h *Host) LastSequence() uint64 {
	last, _ := h.store.Last()
	return last
}

// ThreadEvents returns a thread's stored events after a sequence.
func (h *Host) ThreadEvents(threadID string, after uint64) ([]eventlog.Record, error) {
	return h.store.ThreadAfter(threadID, after)
}
