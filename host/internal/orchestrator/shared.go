package orchestrator

import (
	"context"
	"errors"
	"fmt"

	"github.com/baton-run/baton/host/internal/domain"
)

// Threads on a log several hosts share (Config.OpenLog and Config.Host).
//
// Each thread is owned by one host: the one it was created on (or told to
// run on), until another takes it over (domain.ClaimThread). A host
// decides, runs and commits its own threads only; every other thread it
// follows as the others commit it (followLog), so that it answers reads
// and subscriptions for every thread from its replica. A command for a
// thread another host owns is that host's: the service carries it there
// before it reaches this one (OwnedElsewhereError, when it does not).
//
// Two hosts never write one thread at once, whatever their clocks: an
// append names the last sequence of the thread's subject it decided
// against, and the log refuses it once another host wrote the thread
// since (jetstreamlog's fencing). Whether a host is alive is its own
// lease's business (package lease, held by the serving process); when one
// is lost, the host that coordinates the installation calls TakeOver.

// ErrOwnedElsewhere is a command for a thread another host owns, given to
// this one (OwnedElsewhereError says which).
var ErrOwnedElsewhere = errors.New("the thread runs on another host")

// OwnedElsewhereError is a command for a thread another host owns, given
// to this one.
type OwnedElsewhereError struct {
	Thread, Host string
}

func (e *OwnedElsewhereError) Error() string {
	return fmt.Sprintf("thread %s runs on host %s: its commands go to that host", e.Thread, e.Host)
}

func (e *OwnedElsewhereError) Unwrap() error { return ErrOwnedElsewhere }

// shared says whether the host is one of several on a shared log, each
// owning its threads.
func (h *Host) shared() bool { return h.cfg.OpenLog != nil && h.cfg.Host != "" }

// owns says whether t is this host's to run: on a log of its own, every
// thread is; on a shared one, those it owns, and those no host owns (made
// before threads had owners, and never run).
func (h *Host) owns(t *domain.Thread) bool {
	if !h.shared() {
		return true
	}
	o := t.Owner()
	return o == "" || o == h.cfg.Host
}

// Owner is the host that runs a thread, on a shared log ("" on a log of
// its own, or for a thread no host owns). A thread that does not exist is
// domain.ErrNotFound.
func (h *Host) Owner(threadID string) (string, error) {
	t, err := h.view(threadID)
	if err != nil {
		return "", err
	}
	if !h.shared() {
		return "", nil
	}
	return t.Owner(), nil
}

// HostName is the name this host has on a shared log ("" alone on its
// own).
func (h *Host) HostName() string { return h.cfg.Host }

// hostCommand commits a command the host gives itself about a thread (a
// claim, a mark): a new command id each time, for each is its own
// decision.
func (h *Host) hostCommand(threadID string, p domain.CommandPayload) error {
	_, err := h.dispatch(h.ctx, domain.Command{ID: h.cfg.IDs.NewID("host"), ThreadID: threadID, Payload: p}, nil)
	return err
}

// TakeOver handles the threads of hosts that lost their leases (they
// died, stopped, or lost the servers), as the host that coordinates the
// installation: gone says whether a host's lease is gone, asked just
// before each of its threads is touched (a host that came back keeps its
// threads). Each thread of theirs that has work (a run in flight or
// queued, a session, effects left) and whose cwd every host shares
// (domain.Thread.SharedCwd) becomes this host's: what was in flight ends
// host_lost, and its queued runs start here. Every other one is marked
// lost (domain.MarkHostLost), so that it shows where its cwd is, and its
// queued runs wait for their host. It reads every thread's head, once.
func (h *Host) TakeOver(ctx context.Context, gone func(host string) bool) error {
	if !h.shared() {
		return errors.New("take over lost hosts' threads: this host is not on a shared log")
	}
	// Decide on what the log holds now, not on what this host had
	// followed when it was told.
	last, _ := h.store.Last()
	if err := h.WaitFollowed(ctx, last); err != nil {
		return fmt.Errorf("take over lost hosts' threads: %w", err)
	}
	outbox, err := h.store.Outbox()
	if err != nil {
		return fmt.Errorf("take over lost hosts' threads: %w", err)
	}
	live, err := h.store.LiveThreads()
	if err != nil {
		return fmt.Errorf("take over lost hosts' threads: %w", err)
	}
	queued, err := h.queuedThreads()
	if err != nil {
		return fmt.Errorf("take over lost hosts' threads: %w", err)
	}
	left, err := leftEffects(outbox)
	if err != nil {
		return fmt.Errorf("take over lost hosts' threads: %w", err)
	}
	known := map[string]bool{} // gone, by host: asked once a sweep
	var errs []error
	for _, id := range liveThreads(append(live, queued...), outbox) {
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		t, err := h.view(id)
		if err != nil {
			errs = append(errs, fmt.Errorf("thread %s: %w", id, err))
			continue
		}
		owner := t.Owner()
		if owner == "" || owner == h.cfg.Host {
			continue
		}
		g, asked := known[owner]
		if !asked {
			g = gone(owner)
			known[owner] = g
		}
		if !g {
			continue
		}
		if err := h.takeOverThread(id, t, owner, left[id]); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("take over lost hosts' threads: %w", err)
	}
	return nil
}

// takeOverThread takes one lost host's thread (t is its projection), or
// marks it lost.
func (h *Host) takeOverThread(id string, t *domain.Thread, lost string, left []domain.Effect) error {
	if !t.SharedCwd {
		if t.HostLost != nil {
			return nil
		}
		if err := h.hostCommand(id, domain.MarkHostLost{Host: lost}); err != nil {
			return fmt.Errorf("mark thread %s's host %s lost: %w", id, lost, err)
		}
		h.log.Warn("a lost host's thread waits for it: its cwd is not shared", "thread", id, "host", lost)
		return nil
	}
	if err := h.hostCommand(id, domain.ClaimThread{Reason: "host_lost"}); err != nil {
		return fmt.Errorf("take thread %s from host %s: %w", id, lost, err)
	}
	h.log.Info("took over a lost host's thread", "thread", id, "host", lost)
	rec := domain.Recover{Reason: "host " + lost + " was lost while this was in progress; host " + h.cfg.Host + " took over", HostLost: true}
	if err := h.recoverThread(id, rec, left); err != nil {
		return err
	}
	h.armWaits([]string{id})
	return nil
}

// queuedThreads are the threads with runs queued (a thread with queued
// runs and nothing live is not marked live).
func (h *Host) queuedThreads() ([]string, error) {
	return h.headsWhere(func(s domain.ThreadSummary) bool { return s.Queued > 0 })
}

// headsWhere are the threads whose heads in the thread index keep says
// to, in id order. It reads every thread's head: a shared log's host does
// as it starts, and as it takes over a lost host's threads.
func (h *Host) headsWhere(keep func(domain.ThreadSummary) bool) ([]string, error) {
	var ids []string
	after := ""
	for {
		heads, err := h.store.Heads(after, 1024)
		if err != nil {
			return nil, err
		}
		if len(heads) == 0 {
			return ids, nil
		}
		for _, hd := range heads {
			s, err := decodeHead(hd.Data)
			if err != nil {
				return nil, fmt.Errorf("thread %s's head: %w", hd.ThreadID, err)
			}
			if keep(s) {
				ids = append(ids, hd.ThreadID)
			}
		}
		after = heads[len(heads)-1].ThreadID
	}
}

// takesOver says whether a command of that type is one a host gives about
// another host's thread (to take it, or mark it lost).
func takesOver(typ string) bool {
	return typ == domain.ClaimThread{}.CommandType() || typ == domain.MarkHostLost{}.CommandType()
}

// ownLive are the live threads this host runs.
func (h *Host) ownLive() ([]string, error) {
	live, err := h.store.LiveThreads()
	if err != nil || !h.shared() {
		return live, err
	}
	own := live[:0:0]
	for _, id := range live {
		t, err := h.view(id)
		if err != nil {
			return nil, fmt.Errorf("thread %s: %w", id, err)
		}
		if h.owns(t) {
			own = append(own, id)
		}
	}
	return own, nil
}
