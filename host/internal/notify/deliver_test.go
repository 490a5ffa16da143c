package notify

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/go-hclog"

	"github.com/baton-run/baton/host/internal/domain"
	"github.com/baton-run/baton/host/internal/eventlog"
	"github.com/baton-run/baton/sdk/clock"
)

var epoch = time.Date(2026, 12, 1, 9, 30, 0, 0, time.UTC)

var ended = domain.Notice{Type: domain.NoticeRunEnded, RunID: "run1", Title: "Fix the flaky test",
	Detail: domain.NoticeDetail{Status: domain.RunStatusFailed, Failure: &domain.Failure{Code: "provider_error", Message: "boom"}}}

// openStore opens an event log in a temp dir, closed with the test.
func openStore(t *testing.T) *eventlog.Store {
	t.Helper()
	s, err := eventlog.Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// commit appends one event of thread thr1 at epoch, with its notice's
// delivery to each target, as the host's commit does.
func commit(t testing.TB, s *eventlog.Store, n domain.Notice, targets ...string) uint64 {
	t.Helper()
	b := eventlog.Batch{Events: []eventlog.Pending{{ThreadID: "thr1", Type: "run.ended", At: epoch, Data: json.RawMessage(`{}`)}}}
	for _, url := range targets {
		b.Deliveries = append(b.Deliveries, eventlog.Delivery{Target: url, Event: 0,
			Value: func(seq uint64) []byte { return NewEntry("thr1", seq, epoch, n) }})
	}
	recs, _, err := s.Append(b)
	if err != nil {
		t.Fatal(err)
	}
	return recs[0].Sequence
}

// arrival is one request a receiver got, and the fake time it came at.
type arrival struct {
	at      time.Time
	headers http.Header
	body    []byte
}

// receiver is an HTTP server on 127.0.0.1 that records each request and
// answers with the next of its codes (200 once they run out).
type receiver struct {
	*httptest.Server
	arrivals chan arrival
	mu       sync.Mutex
	codes    []int
}

func newReceiver(t *testing.T, c clock.Clock, codes ...int) *receiver {
	r := &receiver{arrivals: make(chan arrival, 100), codes: codes}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.arrivals <- arrival{at: c.Now(), headers: req.Header, body: body}
		r.mu.Lock()
		code := 200
		if len(r.codes) > 0 {
			code, r.codes = r.codes[0], r.codes[1:]
		}
		r.mu.Unlock()
		w.WriteHeader(code)
	}))
	t.Cleanup(r.Close)
	return r
}

// try is one recorded try.
type try struct {
	ref       eventlog.DeliveryRef
	entry     Entry
	delivered bool
}

// run runs a Deliverer until the test ends; the tries it records come on
// the channel it returns.
func run(t *testing.T, s *eventlog.Store, cfg Config, c clock.Clock) (*Deliverer, <-chan try) {
	d := NewDeliverer(s, cfg, c, hclog.NewNullLogger())
	tries := make(chan try, 100)
	d.tried = func(ref eventlog.DeliveryRef, e Entry, delivered bool) { tries <- try{ref, e, delivered} }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		d.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return d, tries
}

// entries are the store's deliveries, decoded.
func entries(t *testing.T, s *eventlog.Store) map[string]Entry {
	t.Helper()
	list, err := s.Deliveries("")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]Entry{}
	for _, sd := range list {
		e, err := DecodeEntry(sd.Value)
		if err != nil {
			t.Fatal(err)
		}
		out[sd.Target] = e
	}
	return out
}

// waitTimer waits until the one timer pending on f is a backoff's (not a
// try's Timeout) and returns its duration.
func waitTimer(t *testing.T, f *clock.Fake) time.Duration {
	t.Helper()
	p, err := f.WaitPending(t.Context(), func(p []time.Duration) bool { return len(p) == 1 && p[0] < Timeout })
	if err != nil {
		t.Fatal(err)
	}
	return p[0]
}

// A delivery POSTs the document, signed with the secret, with its id; once
// the receiver answers 2xx it leaves the store.
func TestDeliverySignedWithItsID(t *testing.T) {
	f := clock.NewFake(epoch)
	s := openStore(t)
	r := newReceiver(t, f)
	seq := commit(t, s, ended, r.URL)
	secret := []byte("s3cret")
	_, tries := run(t, s, Config{Targets: []Target{{URL: r.URL}}, Secret: secret}, f)
	a := <-r.arrivals
	want := `{"id":"thr1-1","type":"run.ended","thread_id":"thr1","run_id":"run1","sequence":1,"at":"2026-12-01T09:30:00Z",` +
		`"title":"Fix the flaky test","detail":{"status":"failed","failure":{"code":"provider_error","message":"boom"}}}`
	if string(a.body) != want || seq != 1 {
		t.Fatalf("body of event %d:\n%s\nwant\n%s", seq, a.body, want)
	}
	for h, want := range map[string]string{
		"Content-Type":  "application/json",
		IDHeader:        "thr1-1",
		SignatureHeader: Sign(secret, a.body),
	} {
		if got := a.headers.Get(h); got != want {
			t.Errorf("header %s = %q, want %q", h, got, want)
		}
	}
	// The signature, as a receiver checks it: HMAC-SHA256 of the body.
	m := hmac.New(sha256.New, secret)
	m.Write(a.body)
	if got, want := a.headers.Get(SignatureHeader), "sha256="+hex.EncodeToString(m.Sum(nil)); got != want {
		t.Errorf("signature %s, want %s", got, want)
	}
	if tr := <-tries; !tr.delivered || tr.ref.Seq != seq {
		t.Fatalf("try %+v, want event %d delivered", tr, seq)
	}
	if left := entries(t, s); len(left) != 0 {
		t.Fatalf("a delivered delivery is still stored: %v", left)
	}
	if got := delivered(t, s); !cmp.Equal(got, map[string]Delivered{r.URL: {Count: 1, LastID: "thr1-1", LastAt: epoch}}) {
		t.Errorf("the target's state: %+v", got)
	}
}

// delivered are the targets' stored states, decoded.
func delivered(t *testing.T, s *eventlog.Store) map[string]Delivered {
	t.Helper()
	states, err := s.TargetStates()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]Delivered{}
	for _, st := range states {
		if out[st.Target], err = DecodeDelivered(st.Value); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// A receiver that fails is tried again after 1s, 2s, 4s, 8s on the host's
// clock; each failed try is recorded with its error and next try, and the
// delivery goes once the receiver takes it, with the same id and body.
func TestRetriesBackOffOnTheClock(t *testing.T) {
	f := clock.NewFake(epoch)
	s := openStore(t)
	r := newReceiver(t, f, 500, 503, 502, 429)
	commit(t, s, ended, r.URL)
	_, tries := run(t, s, Config{Targets: []Target{{URL: r.URL}}}, f)
	var bodies []string
	var at []time.Duration
	for i, want := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second} {
		a := <-r.arrivals
		at = append(at, a.at.Sub(epoch))
		bodies = append(bodies, a.headers.Get(IDHeader)+" "+string(a.body))
		tr := <-tries
		if tr.delivered || tr.entry.Attempts != i+1 || !tr.entry.NextTry.Equal(a.at.Add(want)) || tr.entry.Failed {
			t.Fatalf("try %d recorded %+v; want attempt %d, next try %v after it", i+1, tr.entry, i+1, want)
		}
		if got := waitTimer(t, f); got != want {
			t.Fatalf("after try %d the deliverer waits %v, want %v", i+1, got, want)
		}
		f.Advance(want)
	}
	a := <-r.arrivals
	at = append(at, a.at.Sub(epoch))
	bodies = append(bodies, a.headers.Get(IDHeader)+" "+string(a.body))
	if tr := <-tries; !tr.delivered {
		t.Fatalf("the fifth try was not delivered: %+v", tr.entry)
	}
	if diff := cmp.Diff([]time.Duration{0, time.Second, 3 * time.Second, 7 * time.Second, 15 * time.Second}, at); diff != "" {
		t.Errorf("tries at (-want +got):\n%s", diff)
	}
	for _, b := range bodies[1:] {
		if b != bodies[0] {
			t.Errorf("a retry sent\n%s\nthe first try\n%s", b, bodies[0])
		}
	}
}

// The errors a try records say what the receiver did.
func TestFailedTriesSayWhy(t *testing.T) {
	f := clock.NewFake(epoch)
	s := openStore(t)
	r := newReceiver(t, f, 500)
	commit(t, s, ended, r.URL)
	_, tries := run(t, s, Config{Targets: []Target{{URL: r.URL}}}, f)
	<-r.arrivals
	if tr := <-tries; tr.entry.LastError != "the receiver answered 500 Internal Server Error" {
		t.Fatalf("last error %q", tr.entry.LastError)
	}
	if e := entries(t, s)[r.URL]; e.Attempts != 1 || e.LastError == "" || !e.NextTry.Equal(epoch.Add(time.Second)) {
		t.Fatalf("stored %+v", e)
	}
}

// A receiver that is down (its port refuses connections) for a while, then
// up: the delivery is tried on the backoff meanwhile, and delivered once.
func TestReceiverDownForAWhile(t *testing.T) {
	f := clock.NewFake(epoch)
	s := openStore(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // down: connections are refused
	url := "http://" + addr + "/hook"
	commit(t, s, ended, url)
	_, tries := run(t, s, Config{Targets: []Target{{URL: url}}}, f)
	for i := 1; i <= 3; i++ {
		tr := <-tries
		if tr.delivered || !strings.Contains(tr.entry.LastError, "connection refused") {
			t.Fatalf("try %d while down: %+v", i, tr.entry)
		}
		if got := waitTimer(t, f); got != Pause(i) {
			t.Fatalf("after try %d the deliverer waits %v, want %v", i, got, Pause(i))
		}
		if i < 3 {
			f.Advance(Pause(i))
		}
	}
	// Up again, on the same address.
	if l, err = net.Listen("tcp", addr); err != nil {
		t.Fatalf("listen again on %s: %v", addr, err)
	}
	var mu sync.Mutex
	got := 0
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		mu.Lock()
		got++
		mu.Unlock()
	})}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	f.Advance(Pause(3))
	if tr := <-tries; !tr.delivered {
		t.Fatalf("the try once up: %+v", tr.entry)
	}
	mu.Lock()
	defer mu.Unlock()
	if got != 1 {
		t.Fatalf("the receiver got %d requests, want 1", got)
	}
	if left := entries(t, s); len(left) != 0 {
		t.Fatalf("deliveries left: %v", left)
	}
}

// A try the receiver does not answer within Timeout (on the host's clock)
// fails saying so, and is tried again.
func TestTimeout(t *testing.T) {
	f := clock.NewFake(epoch)
	s := openStore(t)
	held := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		io.ReadAll(req.Body) // then the server sees the client go
		select {
		case held <- struct{}{}:
			<-req.Context().Done() // never answers the first
		default:
		}
	}))
	t.Cleanup(srv.Close)
	commit(t, s, ended, srv.URL)
	_, tries := run(t, s, Config{Targets: []Target{{URL: srv.URL}}}, f)
	<-held
	if p := f.Pending(); len(p) != 1 || p[0] != Timeout {
		t.Fatalf("timers during a try: %v, want [%v]", p, Timeout)
	}
	f.Advance(Timeout)
	if tr := <-tries; tr.delivered || tr.entry.LastError != "no answer within 10s" {
		t.Fatalf("the try that timed out: %+v", tr.entry)
	}
	f.Advance(waitTimer(t, f))
	if tr := <-tries; !tr.delivered {
		t.Fatalf("the try after: %+v", tr.entry)
	}
}

// A 4xx other than 408 and 429 says the request itself is wrong: the
// delivery fails at once, and stays, failed, with the answer.
func TestRefusedForGood(t *testing.T) {
	f := clock.NewFake(epoch)
	s := openStore(t)
	r := newReceiver(t, f, 400)
	commit(t, s, ended, r.URL)
	_, tries := run(t, s, Config{Targets: []Target{{URL: r.URL}}}, f)
	tr := <-tries
	if tr.delivered || !tr.entry.Failed || tr.entry.Attempts != 1 || tr.entry.LastError != "the receiver answered 400 Bad Request" {
		t.Fatalf("the refused try: %+v", tr.entry)
	}
	if e := entries(t, s)[r.URL]; !e.Failed {
		t.Fatalf("stored %+v, want failed", e)
	}
	if p := f.Pending(); len(p) != 0 {
		t.Fatalf("a failed delivery is waited for: %v", p)
	}
}

// A delivery whose next try would come more than GiveUpAfter after its
// event is given up, and stays, failed, with its last error.
func TestGiveUp(t *testing.T) {
	f := clock.NewFake(epoch.Add(GiveUpAfter - time.Second))
	s := openStore(t)
	r := newReceiver(t, f, 500, 500)
	commit(t, s, ended, r.URL)
	_, tries := run(t, s, Config{Targets: []Target{{URL: r.URL}}}, f)
	if tr := <-tries; tr.entry.Failed {
		t.Fatalf("given up with a try left: %+v", tr.entry)
	}
	f.Advance(waitTimer(t, f))
	if tr := <-tries; !tr.entry.Failed || tr.entry.Attempts != 2 || tr.entry.LastError != "the receiver answered 500 Internal Server Error" {
		t.Fatalf("the last try: %+v", tr.entry)
	}
}

// A Deliverer drops the deliveries to URLs that are no longer targets,
// and sends those to its targets.
func TestDropsDeliveriesToFormerTargets(t *testing.T) {
	f := clock.NewFake(epoch)
	s := openStore(t)
	r := newReceiver(t, f)
	commit(t, s, ended, r.URL, "http://127.0.0.1:1/gone")
	if err := s.DeliveryDone(nil, eventlog.TargetState{Target: "http://127.0.0.1:1/gone", Value: []byte(`{"count":3}`)}); err != nil {
		t.Fatal(err)
	}
	_, tries := run(t, s, Config{Targets: []Target{{URL: r.URL}}}, f)
	<-r.arrivals
	<-tries
	if left := entries(t, s); len(left) != 0 {
		t.Fatalf("deliveries left: %v", left)
	}
	if got := delivered(t, s); len(got) != 1 || got[r.URL].Count != 1 {
		t.Fatalf("targets' states: %+v, want only %s's", got, r.URL)
	}
}

// Wake sends a delivery committed while the deliverer waits.
func TestWake(t *testing.T) {
	f := clock.NewFake(epoch)
	s := openStore(t)
	r := newReceiver(t, f)
	d, tries := run(t, s, Config{Targets: []Target{{URL: r.URL}}}, f)
	commit(t, s, ended, r.URL)
	d.Wake(r.URL)
	d.Wake("http://127.0.0.1:1/not-a-target")
	<-r.arrivals
	if tr := <-tries; !tr.delivered {
		t.Fatalf("%+v", tr.entry)
	}
}

// The backoff doubles from FirstPause up to MaxPause.
func TestPause(t *testing.T) {
	var got []time.Duration
	for n := 1; n <= 12; n++ {
		got = append(got, Pause(n))
	}
	s := time.Second
	want := []time.Duration{s, 2 * s, 4 * s, 8 * s, 16 * s, 32 * s, 64 * s, 128 * s, 256 * s, 512 * s, MaxPause, MaxPause}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("pauses (-want +got):\n%s", diff)
	}
	if Pause(64) != MaxPause {
		t.Errorf("Pause(64) = %v", Pause(64))
	}
}
