package domain

import (
	"fmt"
	"time"
)

// Owners. On a log several hosts share, each thread is owned by one host:
// the host that created it, until a thread.moved gives it to another. Only
// its owner runs the thread's providers and writes its events. A host
// that stops renewing its lease is lost; its threads are marked so, and
// another host takes over the ones whose directory it can reach too
// (SharedCwd), or the owner claims them back when it returns.

// HostLost says the thread's owner stopped renewing its lease: Host is
// that owner, At when the loss was recorded.
type HostLost struct {
	Host string    `json:"host"`
	At   time.Time `json:"at"`
}

// Commands of owners: the hosts' own, never a client's.
type (
	// ClaimThread makes the deciding host (Env.Host) the thread's owner:
	// it takes a lost host's thread over, or takes its own back after it
	// was marked lost. A thread its host already owns, not marked lost,
	// changes nothing.
	ClaimThread struct {
		// Reason says why (a Claim constant, or the host's own word).
		Reason string `json:"reason,omitempty"`
	}
	// MarkHostLost says Host stopped renewing its lease: a thread it owns
	// is marked lost, once. A thread another host owns is left alone.
	MarkHostLost struct {
		Host string `json:"host"`
	}
)

// Why a host claims a thread.
const (
	// ClaimHostLost: another host takes a lost host's thread, whose cwd it
	// shares.
	ClaimHostLost = "host_lost"
	// ClaimHostBack: the owner came back after its thread was marked lost.
	ClaimHostBack = "host_back"
)

func (ClaimThread) CommandType() string  { return "thread.claim" }
func (MarkHostLost) CommandType() string { return "thread.mark_host_lost" }

// Events of owners.
type (
	// ThreadMoved: the thread's owner is To from now on (From: the owner
	// before, "" when none was known).
	ThreadMoved struct {
		From   string `json:"from,omitempty"`
		To     string `json:"to"`
		Reason string `json:"reason,omitempty"`
	}
	// ThreadHostLost: the thread's owner, Host, stopped renewing its lease.
	// The event's time is when it was recorded.
	ThreadHostLost struct {
		Host string `json:"host"`
	}
)

func (ThreadMoved) EventType() string    { return "thread.moved" }
func (ThreadHostLost) EventType() string { return "thread.host_lost" }

// Owner is the host that owns the thread: the host that created it or
// the last it moved to; for a thread created before owners were recorded,
// the host of its newest run that has started; "" for none (a host alone
// on its log).
func (t *Thread) Owner() string {
	if t.Host != "" {
		return t.Host
	}
	for i := len(t.Runs) - 1; i >= 0; i-- {
		if t.Runs[i].StartedAt != nil {
			return t.Runs[i].Host
		}
	}
	return ""
}

func decideClaim(t *Thread, p ClaimThread, env Env, d *Decision) error {
	if env.Host == "" {
		return fmt.Errorf("%w: %s needs the deciding host's name (Env.Host)", ErrInvalid, p.CommandType())
	}
	from := t.Owner()
	if from == env.Host && t.HostLost == nil {
		return nil // its owner already, and not lost: nothing to do
	}
	d.emit(ThreadMoved{From: from, To: env.Host, Reason: p.Reason})
	return nil
}

func decideMarkHostLost(t *Thread, p MarkHostLost, d *Decision) {
	if t.Owner() != p.Host || t.HostLost != nil {
		return // another host's thread, or marked before
	}
	d.emit(ThreadHostLost(p))
}
