package lease

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/baton-run/baton/host/internal/natstest"
	"github.com/baton-run/baton/sdk/clock"
)

// hostLease opens host's own lease, as a host's service does.
func hostLease(t *testing.T, c *natstest.Cluster, replicas int, o Options) *Lease {
	t.Helper()
	o.Key, o.ReclaimOwn = HostKey(o.Host), true
	return open(t, c, replicas, o)
}

// next is the watcher's next event; the test fails if none comes.
func next(t *testing.T, w *Watcher, what string) HostEvent {
	t.Helper()
	select {
	case ev, ok := <-w.Events():
		if !ok {
			t.Fatalf("waiting for %s: the watcher ended: %v", what, w.Err())
		}
		return ev
	case <-bounded(t).Done():
		t.Fatalf("waiting for %s: no event", what)
	}
	return HostEvent{}
}

var ignoreAt = cmpopts.IgnoreFields(HostEvent{}, "At")

// TestHostLeasesHeldAtOnce: two hosts hold their own leases at the same
// time; each reads as alive, and a watcher begun then reports both.
func TestHostLeasesHeldAtOnce(t *testing.T) {
	for _, c := range clusters {
		t.Run(c.name, func(t *testing.T) {
			cl := c.start(t)
			ctx := bounded(t)
			holders := map[string]Holder{}
			for _, host := range []string{"a", "b"} {
				l := hostLease(t, cl, c.replicas, Options{Host: host, PID: 10, TTL: time.Minute})
				if err := l.Acquire(ctx); err != nil {
					t.Fatalf("host %s's lease: %v", host, err)
				}
				h, ok, err := l.Current(ctx)
				if err != nil || !ok {
					t.Fatal(ok, err)
				}
				holders[host] = h
			}
			js := connect(t, cl)
			for _, host := range []string{"a", "b", "c"} {
				h, ok, err := Alive(ctx, js, "test", host)
				if err != nil {
					t.Fatal(err)
				}
				if d := cmp.Diff(holders[host], h); d != "" || ok != (host != "c") {
					t.Errorf("Alive(%s) = %v (-want +got):\n%s", host, ok, d)
				}
			}
			w, err := Watch(ctx, js, "test")
			if err != nil {
				t.Fatal(err)
			}
			defer w.Stop()
			var got []HostEvent
			for len(got) < 2 {
				got = append(got, next(t, w, "the hosts alive at the start"))
			}
			select {
			case <-w.Synced():
			case <-ctx.Done():
				t.Fatal("the watcher never said it had reported the hosts alive at the start")
			}
			slices.SortFunc(got, func(a, b HostEvent) int { return strings.Compare(a.Host, b.Host) })
			want := []HostEvent{{Host: "a", Alive: true}, {Host: "b", Alive: true}}
			if d := cmp.Diff(want, got, ignoreAt); d != "" {
				t.Errorf("the hosts alive at the start (-want +got):\n%s", d)
			}
			for _, ev := range got {
				if ev.At.Before(holders[ev.Host].Since) {
					t.Errorf("host %s reported alive at %v, before it took its lease (%v)", ev.Host, ev.At, holders[ev.Host].Since)
				}
			}
		})
	}
}

// TestWatchReportsHostsComingAndGoing: a watcher reports the host alive
// at its start, hosts that take their leases, one whose lease expires
// (its renewals stopped) and two that hand theirs back, each once: the
// renewals of a lease that stays are not reported. Each change is dated
// by the servers, not by when the watcher read it.
func TestWatchReportsHostsComingAndGoing(t *testing.T) {
	cl := natstest.Single(t)
	ctx := bounded(t)
	// a renews every third of a second through the test.
	a := hostLease(t, cl, 1, Options{Host: "a", TTL: time.Second})
	if err := a.Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	w, err := Watch(ctx, connect(t, cl), "test")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	var got []HostEvent
	got = append(got, next(t, w, "a, alive at the start"))

	c := hostLease(t, cl, 1, Options{Host: "c", TTL: time.Minute})
	if err := c.Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	got = append(got, next(t, w, "c taking its lease"))

	// b's clock is held still: it never renews.
	paused := clock.NewFake(time.Date(2026, 12, 3, 18, 0, 0, 0, time.UTC))
	b := hostLease(t, cl, 1, Options{Host: "b", TTL: time.Second, Clock: paused})
	took := time.Now()
	if err := b.Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	got = append(got, next(t, w, "b taking its lease"))
	got = append(got, next(t, w, "b's lease expiring"))
	expired := got[len(got)-1].At

	// Both hand their leases back before the watcher's events are read:
	// the second is read after the first is received, yet dated when the
	// servers stored it.
	released := time.Now()
	for _, l := range []*Lease{a, c} {
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	stored := time.Now()
	got = append(got, next(t, w, "a handing its lease back"), next(t, w, "c handing its lease back"))

	want := []HostEvent{{Host: "a", Alive: true}, {Host: "c", Alive: true}, {Host: "b", Alive: true}, {Host: "b"}, {Host: "a"}, {Host: "c"}}
	if d := cmp.Diff(want, got, ignoreAt); d != "" {
		t.Fatalf("the hosts' comings and goings (-want +got):\n%s", d)
	}
	if expired.Before(took.Add(time.Second)) {
		t.Errorf("b's lease reported expired at %v, under its TTL after b took it (%v)", expired, took)
	}
	for _, ev := range got[4:] {
		if ev.At.Before(released) || ev.At.After(stored) {
			t.Errorf("host %s's lease reported handed back at %v, not between the Release (%v) and its answer (%v)", ev.Host, ev.At,
				released, stored)
		}
	}
	w.Stop()
	if _, ok := <-w.Events(); ok {
		t.Error("an event after Stop")
	}
	if err := w.Err(); err == nil || !strings.Contains(err.Error(), "the watcher was stopped") {
		t.Errorf("why the watcher ended: %v", err)
	}
}

// TestOwnLeaseIsReclaimedAtOnce: a host's process that died holding its
// own lease (its connection closed, so it renews no more) leaves it for a
// minute; the host's next process takes it over at once, saying so. The
// installation's lease, left the same way, is waited for.
func TestOwnLeaseIsReclaimedAtOnce(t *testing.T) {
	cl := natstest.Single(t)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second) // a third of the TTL
	defer cancel()

	dead := hostLease(t, cl, 1, Options{Host: "b", PID: 1, TTL: time.Minute})
	if err := dead.Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	was, _, err := dead.Current(ctx)
	if err != nil {
		t.Fatal(err)
	}
	dead.js.Conn().Close()

	blog := newLogLines()
	b := hostLease(t, cl, 1, Options{Host: "b", PID: 2, TTL: time.Minute, Logger: blog.logger()})
	if err := b.Acquire(ctx); err != nil {
		t.Fatalf("the host's next process did not take its own lease over: %v", err)
	}
	now, ok, err := b.Current(ctx)
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	if d := cmp.Diff(Holder{Host: "b", PID: 2, Since: now.Since}, now); d != "" {
		t.Errorf("host b's lease after the takeover (-want +got):\n%s", d)
	}
	if d := cmp.Diff(was, b.Previous()); d != "" {
		t.Errorf("the holder before, as the new process knows it (-the dead process +got):\n%s", d)
	}
	want := []string{
		fmt.Sprintf("took over host b's lease from this host's previous process (pid 1, holding it since %s) without waiting for it to expire",
			was.Since.Format(time.RFC3339)),
		"holding host b's lease",
	}
	if d := cmp.Diff(want, blog.all()); d != "" {
		t.Errorf("the new process's log (-want +got):\n%s", d)
	}
	keys, err := b.kv.Keys(ctx)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(keys)
	if d := cmp.Diff([]string{"host.b", "last-holder.host.b"}, keys); d != "" {
		t.Errorf("the bucket's keys (-want +got):\n%s", d)
	}

	// The installation's lease: the same host's next process waits.
	deadInst := open(t, cl, 1, Options{Host: "b", PID: 1, TTL: time.Minute})
	if err := deadInst.Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	deadInst.js.Conn().Close()
	ilog := newLogLines()
	inst := open(t, cl, 1, Options{Host: "b", PID: 2, TTL: time.Minute, Logger: ilog.logger()})
	actx, stop := context.WithCancel(ctx)
	acquired := make(chan error, 1)
	go func() { acquired <- inst.Acquire(actx) }()
	ilog.waitSaid(t, "waiting for host b's lease on installation test")
	stop()
	if err := <-acquired; err == nil {
		t.Error("the installation's lease was taken from another process of the same host name without waiting")
	}
	if inst.Held() {
		t.Error("the installation's lease is held by the waiting process")
	}
	keys, err = b.kv.Keys(ctx)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(keys)
	if d := cmp.Diff([]string{"host.b", "installation", "last-holder", "last-holder.host.b"}, keys); d != "" {
		t.Errorf("the bucket's keys (-want +got):\n%s", d)
	}
}

func TestHostNamesAKeyCannotHoldAreRefused(t *testing.T) {
	cl := natstest.Single(t)
	js := connect(t, cl)
	for _, c := range []struct {
		o    Options
		want string
	}{
		{Options{Installation: "x", Host: "b.local"}, `open lease: host name "b.local": use 1 to 64 letters, digits, - and _`},
		{Options{Installation: "x", Host: "b*"}, `open lease: host name "b*": use 1 to 64 letters, digits, - and _`},
		{Options{Installation: "x", Host: "b", Key: "host..b"}, `open lease: key "host..b": use tokens of letters, digits, -, _, = and /, joined by dots, not beginning with "last-holder"`},
		{Options{Installation: "x", Host: "b", ReclaimOwn: true}, `open lease: ReclaimOwn is for host b's own lease (key host.b), not key "installation"`},
		{Options{Installation: "x", Host: "b", Key: "host.a", ReclaimOwn: true}, `open lease: ReclaimOwn is for host b's own lease (key host.b), not key "host.a"`},
		{Options{Installation: "x", Host: "b", Key: "last-holder.x"}, `open lease: key "last-holder.x": use tokens of letters, digits, -, _, = and /, joined by dots, not beginning with "last-holder"`},
	} {
		_, err := Open(t.Context(), js, c.o)
		if err == nil || err.Error() != c.want {
			t.Errorf("Open(%+v) = %v, want %q", c.o, err, c.want)
		}
	}
	_, _, err := Alive(t.Context(), js, "x", "a b")
	if want := `read a host's lease on installation x: host name "a b": use 1 to 64 letters, digits, - and _`; err == nil || err.Error() != want {
		t.Errorf("Alive of a bad host name: %v, want %q", err, want)
	}
}
