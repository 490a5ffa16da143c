package lease

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/go-hclog"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/baton-run/baton/host/internal/natstest"
	"github.com/baton-run/baton/sdk/clock"
)

// clusters are the servers each test runs against: one node, and three
// whose bucket has three replicas.
var clusters = []struct {
	name     string
	start    func(testing.TB) *natstest.Cluster
	replicas int
}{
	{"single", natstest.Single, 1},
	{"three", natstest.Three, 3},
}

// bounded is the test's context, ended after 45s: a wait that never ends
// fails the test saying what it waited for, rather than hang it.
func bounded(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 45*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func connect(t *testing.T, c *natstest.Cluster) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(c.URLs(), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// open opens host's lease on its own connection, as a host on its own
// machine would.
func open(t *testing.T, c *natstest.Cluster, replicas int, o Options) *Lease {
	t.Helper()
	o.Installation, o.Replicas = "test", replicas
	if o.Clock != nil {
		// Open's retries, while a forming cluster cannot place the bucket
		// yet, wait on the lease's clock: a test's fake clock would hold
		// them for ever. The bucket is made on the system's first.
		if _, err := Open(bounded(t), connect(t, c), Options{Installation: o.Installation, Host: "setup", Replicas: replicas}); err != nil {
			t.Fatal(err)
		}
	}
	l, err := Open(bounded(t), connect(t, c), o)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// logLines is an hclog output that keeps each line's message and sends it
// on a channel, for a test to wait on what a host says.
type logLines struct {
	mu    sync.Mutex
	lines []string
	said  chan string
}

func newLogLines() *logLines { return &logLines{said: make(chan string, 100)} }

func (w *logLines) Write(p []byte) (int, error) {
	for _, line := range strings.Split(strings.TrimSpace(string(p)), "\n") {
		// "TIMESTAMP [LEVEL] name: message: key=value": keep "message".
		_, msg, _ := strings.Cut(line, "] ")
		msg, _, _ = strings.Cut(strings.TrimSpace(msg), ": ")
		w.mu.Lock()
		w.lines = append(w.lines, msg)
		w.mu.Unlock()
		select {
		case w.said <- msg:
		default:
		}
	}
	return len(p), nil
}

func (w *logLines) logger() hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{Output: w, Level: hclog.Info, DisableTime: true})
}

// waitSaid waits until the host logs a line starting with prefix.
func (w *logLines) waitSaid(t *testing.T, prefix string) {
	t.Helper()
	ctx := bounded(t)
	for {
		select {
		case msg := <-w.said:
			if strings.HasPrefix(msg, prefix) {
				return
			}
		case <-ctx.Done():
			t.Fatalf("the host never said %q", prefix)
		}
	}
}

func (w *logLines) all() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.lines...)
}

// TestOneHolderAtATime has two hosts take the lease in turn, each as soon
// as the other hands it back, and records when each held it: the holds
// never overlap, and each host holds it as often as it asked.
func TestOneHolderAtATime(t *testing.T) {
	for _, c := range clusters {
		t.Run(c.name, func(t *testing.T) {
			cl := c.start(t)
			const rounds = 15
			var mu sync.Mutex
			holding := ""
			var events []string // "a+" took it, "a-" hands it back
			var overlaps []string
			var wg sync.WaitGroup
			for _, host := range []string{"a", "b"} {
				l := open(t, cl, c.replicas, Options{Host: host, TTL: time.Minute})
				wg.Go(func() {
					for range rounds {
						if err := l.Acquire(bounded(t)); err != nil {
							t.Error(err)
							return
						}
						mu.Lock()
						if holding != "" {
							overlaps = append(overlaps, fmt.Sprintf("%s took the lease while %s held it", host, holding))
						}
						holding = host
						events = append(events, host+"+")
						mu.Unlock()

						// Hold it for a round trip to the bucket's leader
						// (a read of a replica could be behind it).
						if _, err := l.kv.Status(bounded(t)); err != nil {
							t.Error(err)
						}

						mu.Lock()
						holding = ""
						events = append(events, host+"-")
						mu.Unlock()
						if err := l.Release(bounded(t)); err != nil {
							t.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			if len(overlaps) > 0 {
				t.Fatalf("the holds overlapped: %v\nevents: %v", overlaps, events)
			}
			// Every hold is a take followed by its own hand-back, and each
			// host held it once per round.
			var want []string
			held := map[string]int{}
			for i := 0; i < len(events); i += 2 {
				h := strings.TrimSuffix(events[i], "+")
				want = append(want, h+"+", h+"-")
				held[h]++
			}
			if d := cmp.Diff(want, events); d != "" {
				t.Errorf("holds interleaved (-one at a time +got):\n%s", d)
			}
			if d := cmp.Diff(map[string]int{"a": rounds, "b": rounds}, held); d != "" {
				t.Errorf("holds per host (-want +got):\n%s", d)
			}
		})
	}
}

// TestReleaseHandsOverAtOnce: a standby waiting on a lease with a TTL of a
// minute takes it as soon as its holder hands it back, well before that
// minute; it said once whom it waited for.
func TestReleaseHandsOverAtOnce(t *testing.T) {
	for _, c := range clusters {
		t.Run(c.name, func(t *testing.T) {
			cl := c.start(t)
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second) // half the TTL
			defer cancel()
			a := open(t, cl, c.replicas, Options{Host: "a", PID: 11, TTL: time.Minute})
			if err := a.Acquire(ctx); err != nil {
				t.Fatal(err)
			}
			held, ok, err := a.Current(ctx)
			if err != nil || !ok {
				t.Fatal(ok, err)
			}
			blog := newLogLines()
			b := open(t, cl, c.replicas, Options{Host: "b", PID: 22, TTL: time.Minute, Logger: blog.logger()})
			acquired := make(chan error, 1)
			go func() { acquired <- b.Acquire(ctx) }()
			blog.waitSaid(t, "waiting for host a's lease")
			if err := a.Release(ctx); err != nil {
				t.Fatal(err)
			}
			if err := <-acquired; err != nil {
				t.Fatalf("the standby did not take the lease handed back: %v", err)
			}
			now, ok, err := b.Current(ctx)
			if err != nil || !ok {
				t.Fatal(ok, err)
			}
			if d := cmp.Diff(Holder{Host: "b", PID: 22, Since: now.Since}, now); d != "" {
				t.Errorf("holder after the hand-over (-want +got):\n%s", d)
			}
			if d := cmp.Diff(held, b.Previous()); d != "" {
				t.Errorf("the holder before b, as b knows it (-a +got):\n%s", d)
			}
			if d := cmp.Diff(Holder{}, a.Previous()); d != "" {
				t.Errorf("the holder before a, the first (-none +got):\n%s", d)
			}
			want := []string{
				"waiting for host a's lease on installation test, held since " + held.Since.Format(time.RFC3339),
				"holding the installation's lease",
			}
			if d := cmp.Diff(want, blog.all()); d != "" {
				t.Errorf("the standby's log (-want +got):\n%s", d)
			}
			select {
			case <-b.Lost():
				t.Fatalf("the new holder lost the lease: %v", b.Err())
			default:
			}
			if err := b.Release(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestTakeoverWhenTheHolderStopsRenewing: a holder whose renewals stop (its
// clock is held still, as a paused process's is) loses the lease after its
// TTL; a standby takes it then, and the old holder, renewing at last, is
// refused and counts the lease lost. Its Release hands nothing back.
func TestTakeoverWhenTheHolderStopsRenewing(t *testing.T) {
	for _, c := range clusters {
		t.Run(c.name, func(t *testing.T) {
			cl := c.start(t)
			// A bound for a loaded machine, not a wait: a three-node
			// cluster's first acquire took over 30 s once, beside a full
			// test run and npm installs on two cores.
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()
			paused := clock.NewFake(time.Date(2026, 12, 3, 18, 0, 0, 0, time.UTC))
			a := open(t, cl, c.replicas, Options{Host: "a", TTL: time.Second, Clock: paused})
			if err := a.Acquire(ctx); err != nil {
				t.Fatal(err)
			}
			b := open(t, cl, c.replicas, Options{Host: "b", TTL: time.Second})
			if err := b.Acquire(ctx); err != nil {
				t.Fatalf("the standby did not take the lease its holder stopped renewing: %v", err)
			}
			if got := b.Previous().Host; got != "a" {
				t.Errorf("the holder before b, as b knows it: %q, want a", got)
			}
			select {
			case <-a.Lost():
				t.Fatal("the paused holder counted the lease lost before it renewed")
			default:
			}
			// The paused holder wakes and renews.
			if err := paused.WaitTimers(ctx, 1); err != nil {
				t.Fatal(err)
			}
			paused.Advance(time.Second / 3)
			select {
			case <-a.Lost():
			case <-ctx.Done():
				t.Fatal("the old holder's refused renewal did not lose it the lease")
			}
			if err := a.Err(); err == nil || !strings.Contains(err.Error(), "taken over") {
				t.Errorf("why the lease was lost: %v, want it taken over", err)
			}
			if err := a.Release(ctx); err != nil {
				t.Fatal(err)
			}
			now, ok, err := b.Current(ctx)
			if err != nil || !ok || now.Host != "b" {
				t.Fatalf("after the old holder's release the lease is %+v (held: %v, %v), want b's", now, ok, err)
			}
			select {
			case <-b.Lost():
				t.Fatalf("the new holder lost the lease: %v", b.Err())
			default:
			}
		})
	}
}

// TestLostWhenTheServersAreGone: a holder that cannot reach any server
// counts the lease lost once its TTL has passed since its last renewal,
// and not before.
func TestLostWhenTheServersAreGone(t *testing.T) {
	cl := natstest.Single(t)
	clk := clock.NewFake(time.Date(2026, 12, 3, 18, 0, 0, 0, time.UTC))
	a := open(t, cl, 1, Options{Host: "a", TTL: 3 * time.Second, Clock: clk})
	if err := a.Acquire(bounded(t)); err != nil {
		t.Fatal(err)
	}
	start := clk.Now()
	cl.Stop(0)
	// Move the holder's clock from timer to timer (its renewals' waits and
	// retries) until it counts the lease lost; the last move may leave no
	// timer, so the wait for one ends with the loss.
	ctx, cancel := context.WithCancel(bounded(t))
	defer cancel()
	go func() {
		select {
		case <-a.Lost():
			cancel()
		case <-ctx.Done():
		}
	}()
	for ctx.Err() == nil {
		clk.AdvanceNext(ctx)
	}
	select {
	case <-a.Lost():
	default:
		t.Fatal("the test ended before the lease was lost")
	}
	if got := clk.Now().Sub(start); got != 3*time.Second {
		t.Errorf("the lease was counted lost %v after the last renewal, want 3s (its TTL)", got)
	}
	if err := a.Err(); err == nil || !strings.Contains(err.Error(), "no renewal was answered within its TTL") {
		t.Errorf("why the lease was lost: %v", err)
	}
}

// TestRenewalsKeepTheLease: a holder that renews keeps the lease past many
// TTLs, and a standby keeps waiting.
func TestRenewalsKeepTheLease(t *testing.T) {
	cl := natstest.Single(t)
	a := open(t, cl, 1, Options{Host: "a", TTL: time.Second})
	if err := a.Acquire(bounded(t)); err != nil {
		t.Fatal(err)
	}
	js := connect(t, cl)
	kv, err := js.KeyValue(t.Context(), Bucket("test"))
	if err != nil {
		t.Fatal(err)
	}
	w, err := kv.Watch(t.Context(), InstallationKey, jetstream.UpdatesOnly())
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	// Watch the key through ten renewals (over three TTLs): each is a put
	// by a, never a marker of expiry.
	var ops []string
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	for range 10 {
		var e jetstream.KeyValueEntry
		select {
		case e = <-w.Updates():
		case <-ctx.Done():
			t.Fatalf("the key's changes while a renews: %v, then nothing", ops)
		}
		h, _ := decode(e.Value())
		ops = append(ops, e.Operation().String()+" "+h.Host)
	}
	want := strings.Split(strings.Repeat("KeyValuePutOp a,", 10), ",")[:10]
	if d := cmp.Diff(want, ops); d != "" {
		t.Errorf("the key's changes while a renews (-want +got):\n%s", d)
	}
	select {
	case <-a.Lost():
		t.Fatalf("lost: %v", a.Err())
	default:
	}
}

func TestOpenRefusesBadOptions(t *testing.T) {
	cl := natstest.Single(t)
	js := connect(t, cl)
	for _, c := range []struct {
		o    Options
		want string
	}{
		{Options{Installation: "a.b", Host: "h"}, `open lease: installation name "a.b": use 1 to 64 letters, digits, - and _`},
		{Options{Installation: "x", Host: ""}, "open lease: no host name"},
		{Options{Installation: "x", Host: "h", TTL: time.Millisecond}, "open lease: TTL 1ms is under 1s"},
	} {
		_, err := Open(t.Context(), js, c.o)
		if err == nil || err.Error() != c.want {
			t.Errorf("Open(%+v) = %v, want %q", c.o, err, c.want)
		}
	}
}

// TestLeaseOutlivesANodesLoss: on three nodes, the holder keeps renewing
// its lease while one node is down (the bucket's other two elect a
// leader within the TTL), and never counts it lost.
func TestLeaseOutlivesANodesLoss(t *testing.T) {
	natstest.NodeLossTest(t)
	cl := natstest.Three(t)
	a := open(t, cl, 3, Options{Host: "a", TTL: 6 * time.Second})
	if err := a.Acquire(bounded(t)); err != nil {
		t.Fatal(err)
	}
	// A watcher on the two nodes that stay.
	urls := strings.Split(cl.URLs(), ",")
	nc, err := nats.Connect(strings.Join(urls[1:], ","))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	kv, err := js.KeyValue(t.Context(), Bucket("test"))
	if err != nil {
		t.Fatal(err)
	}
	w, err := kv.Watch(t.Context(), InstallationKey, jetstream.UpdatesOnly())
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	cl.Stop(0)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	var ops []string
	for len(ops) < 4 { // four renewals: over a TTL and a half
		select {
		case e := <-w.Updates():
			h, _ := decode(e.Value())
			ops = append(ops, e.Operation().String()+" "+h.Host)
		case <-a.Lost():
			t.Fatalf("lost the lease with one node of three down: %v", a.Err())
		case <-ctx.Done():
			t.Fatalf("renewals seen with one node down: %v, then none", ops)
		}
	}
	if d := cmp.Diff(strings.Split("KeyValuePutOp a,KeyValuePutOp a,KeyValuePutOp a,KeyValuePutOp a", ","), ops); d != "" {
		t.Errorf("the key's changes with one node down (-want +got):\n%s", d)
	}
	if !a.Held() {
		t.Error("the lease is not held after its renewals")
	}
}

// TestAcquireWaitsForTheServers: a host that cannot reach the servers
// says so once and keeps trying; it takes the lease when they are back.
func TestAcquireWaitsForTheServers(t *testing.T) {
	cl := natstest.Single(t)
	alog := newLogLines()
	a := open(t, cl, 1, Options{Host: "a", TTL: time.Minute, Logger: alog.logger()})
	cl.Stop(0)
	acquired := make(chan error, 1)
	go func() { acquired <- a.Acquire(bounded(t)) }()
	alog.waitSaid(t, "cannot reach the servers to take the lease")
	cl.Start(0)
	if err := <-acquired; err != nil {
		t.Fatalf("acquire once the servers are back: %v", err)
	}
	want := []string{"cannot reach the servers to take the lease; trying again", "holding the installation's lease"}
	if d := cmp.Diff(want, alog.all()); d != "" {
		t.Errorf("the host's log (-want +got):\n%s", d)
	}
	if err := a.Release(bounded(t)); err != nil {
		t.Fatal(err)
	}
}

// TestAcquireReclaimsItsOwnLostTry: a try of Acquire's that the servers
// stored although its answer was lost leaves the lease held in this very
// process's name; the next try takes it at once rather than wait for it
// to expire. Another process of the same host waits.
func TestAcquireReclaimsItsOwnLostTry(t *testing.T) {
	cl := natstest.Single(t)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second) // a third of the TTL
	defer cancel()
	a := open(t, cl, 1, Options{Host: "a", PID: 7, TTL: time.Minute})
	lost := Holder{Host: "a", PID: 7, Since: time.Date(2026, 12, 3, 18, 0, 0, 0, time.UTC)}
	v, _ := json.Marshal(lost)
	if _, err := a.kv.Create(ctx, InstallationKey, v, jetstream.KeyTTL(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if err := a.Acquire(ctx); err != nil {
		t.Fatalf("acquire over its own lost try: %v", err)
	}
	now, ok, err := a.Current(ctx)
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	if d := cmp.Diff(lost, now); d != "" {
		t.Errorf("the lease after the reclaim (-the lost try's +got):\n%s", d)
	}
	if !a.Held() {
		t.Error("the reclaimed lease is not held")
	}
	other := open(t, cl, 1, Options{Host: "a", PID: 8, TTL: time.Minute})
	octx, ocancel := context.WithTimeout(ctx, 2*time.Second)
	defer ocancel()
	if err := other.Acquire(octx); err == nil {
		t.Error("another process of host a took the lease a holds")
	}
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestRenewalGoesOnFromItsOwnLostRenewal: a renewal the servers stored
// although its answer was lost moves the revision under the holder; its
// next renewal, refused for naming the old revision, finds its own value
// there and goes on from it, without counting the lease lost.
func TestRenewalGoesOnFromItsOwnLostRenewal(t *testing.T) {
	cl := natstest.Single(t)
	ctx := bounded(t)
	clk := clock.NewFake(time.Date(2026, 12, 3, 18, 0, 0, 0, time.UTC))
	a := open(t, cl, 1, Options{Host: "a", TTL: 3 * time.Second, Clock: clk})
	if err := a.Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	a.mu.Lock()
	rev, v := a.rev, a.value
	a.mu.Unlock()
	lostRenewal, err := a.put(ctx, rev, v) // as a's renewal whose answer never came
	if err != nil {
		t.Fatal(err)
	}
	w, err := a.kv.Watch(ctx, InstallationKey, jetstream.UpdatesOnly())
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if err := clk.WaitTimers(ctx, 1); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Second) // a renews, naming the revision before the lost renewal
	select {
	case e := <-w.Updates():
		if e.Revision() <= lostRenewal || !bytes.Equal(e.Value(), v) {
			t.Errorf("the renewal after the lost one: revision %d, value %s; want after %d, %s", e.Revision(), e.Value(), lostRenewal, v)
		}
	case <-a.Lost():
		t.Fatalf("the holder counted its own lost renewal as a takeover: %v", a.Err())
	case <-ctx.Done():
		t.Fatal("no renewal after the lost one")
	}
	select {
	case <-a.Lost():
		t.Fatalf("lost: %v", a.Err())
	default:
	}
	if !a.Held() {
		t.Error("the lease is not held after the renewal")
	}
}
