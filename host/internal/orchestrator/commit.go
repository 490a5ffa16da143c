package orchestrator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/baton-run/baton/host/internal/domain"
	"github.com/baton-run/baton/host/internal/eventlog"
	"github.com/baton-run/baton/host/internal/pluginhost"
)

// The one way anything is committed. A client's command, a provider's
// events and the host's own observations all go through commit:
//
//  1. the command id is checked against the receipts (a duplicate returns
//     its original receipt and does nothing);
//  2. with the thread's writer lock, the command is decided against a
//     scratch copy of the thread's projection, each event applied to it as
//     it is emitted (a decision that needs runs that left the projection
//     is made again with them read from the store: past.go);
//  3. the events, the receipt, the effects, the outbox entries settled,
//     the webhook deliveries the events call for (notify.go) and the
//     thread's head, live marker, (now and then) snapshot and the parts
//     the events made leave its projection are appended in one synced
//     batch, which other threads' commits may share;
//  4. once it is durable, the scratch copy is published as the thread's
//     projection, before any reader can see the events;
//  5. the effects go to the thread's worker, in commit order.
//
// Nothing holds a lock across the synced write that another thread's
// commit waits on: the writer lock is the thread's own.

// decideFunc decides against a scratch thread and returns the events and
// effects it decided (its events already applied to the thread).
type decideFunc func(t *domain.Thread, env domain.Env) ([]domain.Payload, []domain.Effect, error)

// commitReq is one commit.
type commitReq struct {
	threadID string
	cmdID    string
	typ      string // the receipt's command type
	hash     string // the command's content, to tell a duplicate from a reuse
	decide   decideFunc
	done     []eventlog.EffectRef // outbox entries this commit settles
	// facts are what the decision needs that takes I/O to find out,
	// gathered before the thread's lock is taken (nil: none).
	facts *domain.Facts
}

// Dispatch decides a command, commits its events, receipt and effects in
// one synced batch, publishes the thread's new projection, and hands the
// effects to the thread's worker. A command id seen before returns the
// original receipt and does nothing else; the same id with other content is
// a conflict.
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
	// The hash is of the command as the client sent it: a retried
	// thread.create without a thread id is the same command.
	hash := domain.Hash(cmd)
	if _, create := cmd.Payload.(domain.CreateThread); create && cmd.ThreadID == "" {
		if rc, ok, err := h.receipt(cmd.ID, hash); err != nil || ok {
			return rc, err
		}
		// Time-ordered, on the host's clock: thread ids sort as the
		// threads were made (the thread index lists them in id order).
		cmd.ThreadID = h.cfg.IDs.NewTimeID("thr", h.cfg.Clock.Now())
	}
	if err := validID("threadId", cmd.ThreadID); err != nil {
		return domain.Receipt{}, err
	}
	if p, ok := cmd.Payload.(domain.RespondToRequest); ok {
		if err := h.checkReachable(ctx, cmd.ThreadID, p.RequestID); err != nil {
			return domain.Receipt{}, err
		}
	}
	return h.commit(commitReq{threadID: cmd.ThreadID, cmdID: cmd.ID, typ: cmd.Payload.CommandType(), hash: hash, done: done,
		facts: h.gather(cmd.ThreadID, cmd.Payload),
		decide: func(t *domain.Thread, env domain.Env) ([]domain.Payload, []domain.Effect, error) {
			d, err := domain.Decide(t, cmd, env)
			return d.Events, d.Effects, err
		}})
}

// gather finds out what a command's decision needs that takes I/O
// (domain.FactsFor): whether the providers it names have a plugin (which
// stats plugin directories and reads their lockfiles), whether the
// directory it names can be worked in, and what the thread's provider's
// plugin can do (domain.NeedsCapabilities: it may start the plugin). It runs before the thread's lock is
// taken; the decision refuses a thread, switch or policy whose provider
// has no plugin to run it (it could only fail its next run), once the
// command is otherwise valid and is not a duplicate, so a retried create
// still gets its original receipt.
func (h *Host) gather(threadID string, p domain.CommandPayload) *domain.Facts {
	providers, dir := domain.FactsFor(p)
	caps := domain.NeedsCapabilities(p)
	if len(providers) == 0 && dir == "" && !caps {
		return nil
	}
	f := &domain.Facts{Providers: map[string]domain.ProviderFact{}, Dirs: map[string]string{}}
	if caps {
		f.Capabilities = h.capabilitiesOf(threadID)
	}
	for _, name := range providers {
		_, _, err := h.plugins.Find(name)
		switch {
		case err == nil:
			f.Providers[name] = domain.ProviderFact{Installed: true}
		case errors.Is(err, pluginhost.ErrNotInstalled):
			f.Installed, f.Searched = h.plugins.Installed(), h.cfg.PluginDirs
		default:
			// There, but not usable (no checksum recorded).
			f.Providers[name] = domain.ProviderFact{Installed: true, Unusable: err.Error()}
		}
	}
	if dir != "" {
		f.Dirs[dir] = ""
		if err := checkCwd(dir); err != nil {
			f.Dirs[dir] = err.Error()
		}
		if c, ok := p.(domain.CreateThread); ok && c.Worktree != nil {
			f.Worktree = &domain.WorktreeFact{Problem: "cwd " + f.Dirs[dir]}
			if f.Dirs[dir] == "" {
				f.Worktree = h.worktreeFact(threadID, dir, c.Worktree)
			}
		}
	}
	return f
}

// capabilitiesOf is what the plugin of the thread's provider says it can
// do (started if it is not running), or nil when there is none to ask.
func (h *Host) capabilitiesOf(threadID string) *domain.Capabilities {
	t, err := h.view(threadID)
	if err != nil {
		return nil
	}
	p, err := h.plugins.Get(h.ctx, t.Provider)
	if err != nil {
		return nil
	}
	c := p.Description.Capabilities
	return &domain.Capabilities{NativeSteering: c.NativeSteering, NativeRollback: c.NativeRollback}
}

// commit is the commit path described at the top of this file. Once the
// store has failed, every commit fails saying so (storefail.go), whatever
// step met the failure.
func (h *Host) commit(c commitReq) (domain.Receipt, error) {
	if err := h.storeFailed(); err != nil {
		return domain.Receipt{}, err
	}
	rc, err := h.commitOnce(c)
	if err != nil {
		if ferr := h.storeFailed(); ferr != nil {
			err = ferr
		}
	}
	return rc, err
}

func (h *Host) commitOnce(c commitReq) (domain.Receipt, error) {
	if h.closed.Load() {
		return domain.Receipt{}, ErrClosed
	}
	if h.cfg.ReadOnly {
		return domain.Receipt{}, ErrReadOnly
	}
	release := h.cmds.reserve(c.cmdID)
	defer release()
	if rc, ok, err := h.receipt(c.cmdID, c.hash); err != nil || ok {
		if ok {
			// A duplicate writes no batch: the outbox entries it settles
			// (an outcome recorded before, by a host that stopped before it
			// removed them) are removed on their own.
			for _, ref := range c.done {
				if err := h.store.EffectDone(ref); err != nil {
					return rc, err
				}
			}
		}
		return rc, err
	}
	e := h.cache.acquire(c.threadID)
	defer h.cache.release(e)
	e.mu.Lock()
	defer e.mu.Unlock()
	cur, err := h.loadLocked(e)
	if err != nil {
		return domain.Receipt{}, err
	}
	if !h.owns(cur) && !takesOver(c.typ) {
		return domain.Receipt{}, &OwnedElsewhereError{Thread: c.threadID, Host: cur.Owner()}
	}
	now := h.cfg.Clock.Now()
	s, live := h.live(c.threadID)
	env := domain.Env{Now: now, NewID: h.cfg.IDs.NewID, Caps: capabilities(s), Live: live, Host: h.cfg.Host,
		ShuttingDown: h.draining.Load(), InterruptGrace: h.cfg.InterruptGrace, Facts: c.facts, MCP: h.mcpRefs}
	var scratch domain.Thread
	var events []domain.Payload
	var effects []domain.Effect
	var need domain.NeedPast
	for try := 0; ; try++ {
		scratch = cur.Scratch()
		events, effects, err = c.decide(&scratch, env)
		var more *domain.NeedPast
		if !errors.As(err, &more) || try == maxGathers {
			break
		}
		need.Merge(*more)
		if env.Past, err = cur.GatherPast(&need, h.pastParts(c.threadID, cur)); err != nil {
			return domain.Receipt{}, fmt.Errorf("thread %s: %w", c.threadID, err)
		}
	}
	if err != nil {
		return domain.Receipt{}, err
	}
	rc := domain.Receipt{CommandID: c.cmdID, Type: c.typ, ThreadID: c.threadID, PayloadHash: c.hash, At: now.UTC()}
	b := eventlog.Batch{CommandID: c.cmdID, Done: c.done, ThreadID: c.threadID,
		Receipt: func(last uint64) []byte {
			rc.Sequence = last
			v, _ := json.Marshal(rc) // a receipt always encodes
			return v
		}}
	size := 0
	for _, p := range events {
		data, err := json.Marshal(p)
		if err != nil {
			return domain.Receipt{}, fmt.Errorf("encode %s: %w", p.EventType(), err)
		}
		size += len(data)
		b.Events = append(b.Events, eventlog.Pending{ThreadID: c.threadID, Type: p.EventType(), At: now, Data: data})
	}
	b.Deliveries = h.deliveries(c.threadID, cur, events, now)
	for _, ef := range effects {
		data, _ := json.Marshal(ef) // an Effect always encodes
		b.Effects = append(b.Effects, eventlog.Effect{ThreadID: ef.Head().ThreadID, Data: data})
	}
	if b.Archive, err = encodeParts(scratch.TakeArchived()); err != nil {
		return domain.Receipt{}, fmt.Errorf("thread %s: %w", c.threadID, err)
	}
	if len(events) > 0 {
		h.stateOf(e, cur, &scratch, size, &b)
		published := &scratch
		b.OnCommit = func(last uint64) {
			published.Sequence = last
			e.publish(published)
			h.signals.publish(c.threadID, last)
		}
	}
	_, ids, err := h.store.Append(b)
	if err != nil {
		if errors.Is(err, eventlog.ErrClosed) {
			err = ErrClosed
		}
		return domain.Receipt{}, err
	}
	h.afterCommit(e, b)
	h.wakeNotifier(b.Deliveries)
	if len(events) > 0 {
		h.syncDeadlines(c.threadID, &scratch)
		h.syncWaits(c.threadID, cur, &scratch, events)
	}
	if len(effects) > 0 && h.ctx.Err() == nil { // closing: the effects wait in the outbox for the next host
		for i := range effects {
			effects[i] = domain.Stored(effects[i], c.threadID, ids[i])
		}
		h.push(c.threadID, effects)
	}
	return rc, nil
}

// stateOf fills in the thread state a batch writes beside its events, as
// the thread goes from was to t: the head, the live marker when it
// changes, and a snapshot when enough has happened since the last one, or
// when the thread goes quiet. e.mu is held.
func (h *Host) stateOf(e *threadEntry, was, t *domain.Thread, size int, b *eventlog.Batch) {
	sum := t.Summary()
	b.Head = func(last uint64) []byte {
		sum.Sequence = last
		return encodeHead(sum, t)
	}
	wasLive, live := was.Live(), t.Live()
	if live != wasLive {
		b.Live = eventlog.LiveClear
		if live {
			b.Live = eventlog.LiveSet
		}
	}
	since := e.sinceSnapshot + size
	quiet := wasLive && !live
	if since >= max(h.cfg.SnapshotBytes, e.snapshotSize) || (quiet && since >= h.cfg.SnapshotBytes/8) {
		body, _ := json.Marshal(t) // a thread always encodes
		b.Snapshot = &eventlog.Snapshot{Schema: projectionSchema, Body: body}
	}
}

// afterCommit records in the entry what a committed batch wrote. e.mu is
// held.
func (h *Host) afterCommit(e *threadEntry, b eventlog.Batch) {
	for _, p := range b.Events {
		e.sinceSnapshot += len(p.Data)
	}
	if b.Snapshot != nil {
		e.sinceSnapshot, e.snapshotSize = 0, len(b.Snapshot.Body)
	}
}

// receipt returns the stored receipt of a command id, if any; a receipt of
// other content is a conflict.
func (h *Host) receipt(cmdID, hash string) (domain.Receipt, bool, error) {
	b, ok, err := h.store.Receipt(cmdID)
	if err != nil || !ok {
		if errors.Is(err, eventlog.ErrClosed) {
			err = ErrClosed
		}
		return domain.Receipt{}, false, err
	}
	var rc domain.Receipt
	if err := json.Unmarshal(b, &rc); err != nil {
		return domain.Receipt{}, false, fmt.Errorf("receipt of %s is corrupt: %w", cmdID, err)
	}
	if rc.PayloadHash != hash {
		return domain.Receipt{}, false, fmt.Errorf("%w: command id %s %w: it was used for another %s command on thread %s",
			domain.ErrConflict, cmdID, domain.ErrExists, rc.Type, rc.ThreadID)
	}
	return rc, true, nil
}

// checkReachable refuses an answer to a request whose provider process is
// gone (invariant 11): the request says so from then on, and the answer is
// a clear error at once.
func (h *Host) checkReachable(ctx context.Context, threadID, requestID string) error {
	t, err := h.view(threadID)
	if err != nil {
		return nil // Decide says what is wrong
	}
	for i := range t.Requests {
		q := &t.Requests[i]
		if q.ID != requestID || q.Status != domain.RequestStatusPending || q.Delivery != domain.DeliveryLive {
			continue
		}
		if h.sessionLive(threadID, q.SessionID) {
			return nil
		}
		// The provider's process is gone but its end is not recorded yet
		// (its session's pump is ingesting it): a window of milliseconds
		// that no test can place an answer in; once the end is recorded,
		// the request is expired and Decide refuses the answer.
		if _, err := h.Dispatch(ctx, domain.Unreachable(threadID, q.ID)); err != nil {
			return err
		}
		return domain.NotResumable(q.ID)
	}
	return nil
}

// live is the thread's open session as the domain sees it (Env.Live): nil
// when it has none, or its stream has ended.
func (h *Host) live(threadID string) (*liveSession, *domain.LiveSession) {
	h.smu.Lock()
	s, ok := h.sessions[threadID]
	h.smu.Unlock()
	if !ok || s.ended() {
		return nil, nil
	}
	return s, &domain.LiveSession{ID: s.id, Provider: s.provider, Model: s.model, Command: s.command, MCP: s.mcp}
}

// capabilities is what the thread's live plugin says it can do (nothing,
// when the thread has no live session: then no provider turn is running
// to steer either).
func capabilities(s *liveSession) domain.Capabilities {
	if s == nil {
		return domain.Capabilities{}
	}
	return domain.Capabilities{NativeSteering: s.plugin.Description.Capabilities.NativeSteering}
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

// inflight is the set of command ids being committed: a second commit of
// the same id waits for the first, then finds its receipt. (Command ids
// are global, so two threads' writers could otherwise both commit one.)
type inflight struct {
	mu  sync.Mutex
	ids map[string]chan struct{}
}

// reserve waits until no commit holds id, then holds it until the
// returned function is called.
func (f *inflight) reserve(id string) (release func()) {
	for {
		f.mu.Lock()
		if f.ids == nil {
			f.ids = map[string]chan struct{}{}
		}
		busy, ok := f.ids[id]
		if !ok {
			ch := make(chan struct{})
			f.ids[id] = ch
			f.mu.Unlock()
			return func() {
				f.mu.Lock()
				delete(f.ids, id)
				f.mu.Unlock()
				close(ch)
			}
		}
		f.mu.Unlock()
		<-busy
	}
}
