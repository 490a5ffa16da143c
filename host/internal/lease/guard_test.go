package lease

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-run/baton/host/internal/eventlog"
	"github.com/baton-run/baton/host/internal/natstest"
	"github.com/baton-run/baton/sdk/clock"
)

// TestGuardFailsWhenTheLeaseIsLost: the log a holder writes through its
// Guard takes writes while the lease is held; once another host took the
// lease over, the Guard has failed, saying so, and refuses every decided
// write, so the host stops as for a failed store.
func TestGuardFailsWhenTheLeaseIsLost(t *testing.T) {
	cl := natstest.Single(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	paused := clock.NewFake(time.Date(2026, 12, 3, 18, 0, 0, 0, time.UTC))
	a := open(t, cl, 1, Options{Host: "a", TTL: time.Second, Clock: paused})
	if err := a.Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	store, err := eventlog.Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	g := a.Guard(store)
	defer g.Close()
	batch := func() eventlog.Batch {
		return eventlog.Batch{ThreadID: "t1", Events: []eventlog.Pending{{ThreadID: "t1", Type: "note", At: paused.Now(), Data: []byte(`{}`)}}}
	}
	if _, _, err := g.Append(batch()); err != nil {
		t.Fatalf("append while holding the lease: %v", err)
	}
	if g.Failure() != nil {
		t.Fatalf("failed while holding the lease: %v", g.Failure())
	}
	b := open(t, cl, 1, Options{Host: "b", TTL: time.Second})
	if err := b.Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	if err := paused.WaitTimers(ctx, 1); err != nil {
		t.Fatal(err)
	}
	paused.Advance(time.Second / 3) // a renews, and is refused
	select {
	case <-g.Failed():
	case <-ctx.Done():
		t.Fatal("the guard did not fail when the lease was lost")
	}
	if err := g.Failure(); err == nil || !strings.HasPrefix(err.Error(), "lost the installation's lease: the lease on installation test was taken over") {
		t.Errorf("the guard's failure: %v", err)
	}
	_, _, err = g.Append(batch())
	if err == nil || err.Error() != g.Failure().Error() {
		t.Errorf("append after the loss: %v, want the loss", err)
	}
	if err := g.EffectDone(eventlog.EffectRef{}); err == nil || err.Error() != g.Failure().Error() {
		t.Errorf("effect done after the loss: %v, want the loss", err)
	}
	recs, err := store.After(0, 10)
	if err != nil {
		t.Fatal(err)
	}
	var seqs []uint64
	for _, r := range recs {
		seqs = append(seqs, r.Sequence)
	}
	if d := cmp.Diff([]uint64{1}, seqs); d != "" {
		t.Errorf("the log after the loss holds only what was written before it (-want +got):\n%s", d)
	}
}

// TestGuardRefusesOnceTheLeaseMayHaveExpired: a holder whose renewals
// cannot reach the servers refuses writes from the instant its lease may
// have expired on its clock, whether or not its renewer has given up yet.
func TestGuardRefusesOnceTheLeaseMayHaveExpired(t *testing.T) {
	cl := natstest.Single(t)
	clk := clock.NewFake(time.Date(2026, 12, 3, 18, 0, 0, 0, time.UTC))
	a := open(t, cl, 1, Options{Host: "a", TTL: 3 * time.Second, Clock: clk})
	if err := a.Acquire(bounded(t)); err != nil {
		t.Fatal(err)
	}
	store, err := eventlog.Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	g := a.Guard(store)
	defer g.Close()
	cl.Stop(0)
	batch := eventlog.Batch{ThreadID: "t1", Events: []eventlog.Pending{{ThreadID: "t1", Type: "note", At: clk.Now(), Data: []byte(`{}`)}}}
	clk.Advance(3*time.Second - time.Millisecond)
	if !a.Held() {
		t.Fatal("the lease is not held a moment before its TTL ends")
	}
	if _, _, err := g.Append(batch); err != nil {
		t.Fatalf("append a moment before the TTL ends: %v", err)
	}
	clk.Advance(time.Millisecond)
	_, _, err = g.Append(batch)
	if err == nil || err.Error() != "the lease on installation test expired before it was renewed" &&
		!strings.HasPrefix(err.Error(), "lost the installation's lease: the lease on installation test expired: no renewal") {
		t.Errorf("append once the TTL ended: %v, want it refused", err)
	}
}
