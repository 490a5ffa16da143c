//go:build linux

package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	batonv1 "github.com/baton-run/baton/host/api/baton/v1"
)

// What a client may hold of `baton serve`, through the real process with
// small bounds given on its command line: a subscriber that falls behind
// is cut off and resumes, subscriptions past a bound are refused,
// connections past one are closed, and a connection that is idle, or
// whose client does not answer, is closed.

// logLines collects a process's log lines as they are written, and waits
// for one; a write never waits for a reader.
type logLines struct {
	mu    sync.Mutex
	part  []byte
	lines []string
	more  chan struct{} // closed at the next line
}

func newLogLines() *logLines { return &logLines{more: make(chan struct{})} }

func (l *logLines) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.part = append(l.part, b...)
	added := false
	for {
		i := bytes.IndexByte(l.part, '\n')
		if i < 0 {
			break
		}
		l.lines = append(l.lines, string(l.part[:i]))
		l.part = l.part[i+1:]
		added = true
	}
	if added {
		close(l.more)
		l.more = make(chan struct{})
	}
	return len(b), nil
}

// wait returns the first line that matches re, or fails the test when
// none comes in 90s.
func (l *logLines) wait(t *testing.T, re *regexp.Regexp) string {
	t.Helper()
	timeout := time.After(90 * time.Second)
	for from := 0; ; {
		l.mu.Lock()
		lines, more := l.lines, l.more
		l.mu.Unlock()
		for ; from < len(lines); from++ {
			if re.MatchString(lines[from]) {
				return lines[from]
			}
		}
		select {
		case <-more:
		case <-timeout:
			t.Fatalf("no log line matching %s in 90s:\n%s", re, strings.Join(lines, "\n"))
		}
	}
}

// afterSequence is the sequence a cut-off subscriber's status says to
// subscribe again after.
func afterSequence(t *testing.T, msg string) uint64 {
	t.Helper()
	var seq uint64
	i := strings.LastIndex(msg, "after_sequence ")
	if i < 0 {
		t.Fatalf("%q names no sequence to subscribe again after", msg)
	}
	if _, err := fmt.Sscanf(msg[i:], "after_sequence %d", &seq); err != nil {
		t.Fatalf("%q names no sequence: %v", msg, err)
	}
	return seq
}

// A subscriber that reads nothing does not hold the service up: threads
// are made, its buffer of --subscriber-buffer events stays full for
// --slow-subscriber, and its stream ends with ResourceExhausted naming
// the last sequence it was sent. Subscribing again after it gives the
// rest: every event once, in order.
func TestServiceCutsOffASlowSubscriber(t *testing.T) {
	log := newLogLines()
	s := startServiceLogging(t, t.TempDir(), log, "--subscriber-buffer", "2", "--slow-subscriber", "100ms")
	c := s.client()
	// Small windows (no dynamic growth): the transport holds little of
	// what the subscriber does not read.
	conn, err := grpc.NewClient("unix://"+s.sock, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithInitialWindowSize(64<<10), grpc.WithInitialConnWindowSize(64<<10))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	stream, err := batonv1.NewBatonClient(conn).Subscribe(ctx, &batonv1.SubscribeRequest{})
	if err != nil {
		t.Fatal(err)
	}
	// Each thread.created carries 32 KiB: a few fill the windows, the
	// transport's write quota and the buffer.
	pad := "PAD=" + strings.Repeat("x", 32<<10)
	var want []uint64
	for range 16 {
		rc, err := c.CreateThread(ctx, &batonv1.CreateThreadRequest{Provider: "acp", Cwd: t.TempDir(),
			ProviderCommand: &batonv1.ProviderCommand{Argv: []string{"agent"}, Env: []string{pad}}})
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, rc.GetSequence())
	}
	log.wait(t, regexp.MustCompile(`subscriber too slow; ending its stream`))
	var got []uint64
	for {
		ev, err := stream.Recv()
		if err == nil {
			got = append(got, ev.GetSequence())
			continue
		}
		if status.Code(err) != codes.ResourceExhausted {
			t.Fatalf("after %d events: %v, want ResourceExhausted\n%s", len(got), err, s.stderr)
		}
		last := afterSequence(t, status.Convert(err).Message())
		if len(got) == 0 || got[len(got)-1] != last {
			t.Fatalf("cut off after sequences %v, but the status says to subscribe again after %d: %q", got, last, status.Convert(err).Message())
		}
		if len(got) == len(want) {
			t.Fatalf("every event was sent before the cut: the test proves nothing")
		}
		break
	}
	resumed, err := c.Subscribe(ctx, &batonv1.SubscribeRequest{AfterSequence: got[len(got)-1]})
	if err != nil {
		t.Fatal(err)
	}
	for got[len(got)-1] < want[len(want)-1] {
		ev, err := resumed.Recv()
		if err != nil {
			t.Fatalf("resumed stream: %v", err)
		}
		got = append(got, ev.GetSequence())
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("sequences seen across the cut (-committed +seen):\n%s", diff)
	}
}

// Subscriptions past --max-thread-subscribers to one thread, or past
// --max-subscribers in all, are refused with ResourceExhausted saying
// which bound; a subscription that ends makes room for another.
func TestServiceBoundsSubscribers(t *testing.T) {
	log := newLogLines()
	s := startServiceLogging(t, t.TempDir(), log, "--max-subscribers", "2", "--max-thread-subscribers", "1")
	c := s.client()
	a := createThread(t, c, "acp/simple.ndjson", "decline")
	b := createThread(t, c, "acp/simple.ndjson", "decline")
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	// subscribe subscribes and says how the subscription began: its first
	// event's type, or its status.
	subscribe := func(ctx context.Context, thread string) string {
		st, err := c.Subscribe(ctx, &batonv1.SubscribeRequest{ThreadId: thread})
		if err != nil {
			t.Fatal(err)
		}
		ev, err := st.Recv()
		if err != nil {
			return fmt.Sprintf("%s: %s", status.Code(err), status.Convert(err).Message())
		}
		return ev.GetType()
	}
	firstCtx, endFirst := context.WithCancel(ctx)
	got := []string{
		subscribe(firstCtx, a),
		subscribe(ctx, a),
		subscribe(ctx, ""),
		subscribe(ctx, b),
	}
	want := []string{
		"thread.created",
		"ResourceExhausted: too many subscribers to thread " + a + ": it takes 1 at once (baton serve --max-thread-subscribers), and that many are open; end one, or subscribe again later",
		"thread.created",
		"ResourceExhausted: too many subscribers: the service takes 2 at once (baton serve --max-subscribers), and that many are open; end one, or subscribe again later",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("subscriptions to a, a, the log and b (-want +got):\n%s", diff)
	}
	log.wait(t, regexp.MustCompile(`subscriber refused: thread=`+a+` reason="too many subscribers to thread`))
	log.wait(t, regexp.MustCompile(`subscriber refused: thread=`+b+` reason="too many subscribers: the service takes 2`))
	// The first ends: once the service has seen it end, a has room again
	// (until then, either bound may refuse).
	endFirst()
	for {
		got := subscribe(ctx, a)
		if got == "thread.created" {
			break
		}
		if got != want[1] && got != want[3] {
			t.Fatalf("a subscription to a after the first ended: %s", got)
		}
	}
}

// A connection past --max-connections is closed as it is accepted (its
// call fails Unavailable at once), the log says why and so does a baton
// verb; once another closes, a client connects again.
func TestServiceBoundsConnections(t *testing.T) {
	log := newLogLines()
	s := startServiceLogging(t, t.TempDir(), log, "--max-connections", "2")
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	check := func(conn *grpc.ClientConn, opts ...grpc.CallOption) error {
		_, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{}, opts...)
		return err
	}
	// Each waits until it is let in: the health check startService made
	// may still hold its connection for a moment.
	first, second := s.dial(), s.dial()
	for _, conn := range []*grpc.ClientConn{first, second} {
		if err := check(conn, grpc.WaitForReady(true)); err != nil {
			t.Fatal(err)
		}
	}
	third := s.dial()
	if err := check(third); status.Code(err) != codes.Unavailable {
		t.Fatalf("a third connection's call: %v, want Unavailable", err)
	}
	log.wait(t, regexp.MustCompile(`connection refused: the service holds as many connections as it may; refusing more until one closes \(baton serve --max-connections\): open=2 listener=unix://`))
	// A baton verb says so, rather than that no service answers.
	out, errOut, code := execBaton(t, append(os.Environ(), "BATON_DATA="+s.data), "", "threads")
	want := "baton: the service on " + s.sock + " closed the connection at once: it holds as many connections as it takes (baton serve --max-connections); try again once another of its clients ends\n"
	if code != exitFailed || out != "" || errOut != want {
		t.Errorf("baton threads against the full service: exit %d\nstdout: %s\nstderr: %s\nwant exit %d and %s", code, out, errOut, exitFailed, want)
	}
	first.Close()
	if err := check(third, grpc.WaitForReady(true)); err != nil {
		t.Fatalf("the third connection once the first closed: %v", err)
	}
}

// h2Conn is a bare HTTP/2 client of the service's socket: it says the
// preface and its settings, then only reads, so that a test sees the
// frames the service sends, and answers none (no ping acknowledged).
type h2Conn struct{ net.Conn }

// HTTP/2's frame types a test looks for.
const (
	h2Ping   = 0x6
	h2GoAway = 0x7
)

func dialH2(t *testing.T, sock string, wait time.Duration) h2Conn {
	t.Helper()
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	hello := append([]byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"), 0, 0, 0, 0x4, 0, 0, 0, 0, 0) // the preface, empty SETTINGS
	if _, err := c.Write(hello); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(wait)) // a bound on the test's failure only
	return h2Conn{c}
}

// frame reads the next frame: its type, flags and payload.
func (c h2Conn) frame() (typ, flags byte, payload []byte, err error) {
	var hdr [9]byte
	if _, err := io.ReadFull(c, hdr[:]); err != nil {
		return 0, 0, nil, err
	}
	payload = make([]byte, int(hdr[0])<<16|int(hdr[1])<<8|int(hdr[2]))
	_, err = io.ReadFull(c, payload)
	return hdr[3], hdr[4], payload, err
}

// A connection with no call in flight for --connection-idle-timeout is
// told to go away (GOAWAY, "max_idle"): a client that is gone frees what
// it held.
func TestServiceClosesIdleConnections(t *testing.T) {
	s := startService(t, t.TempDir(), "--connection-idle-timeout", "200ms")
	// Far below the defaults, which would take a minute and more.
	c := dialH2(t, s.sock, 30*time.Second)
	for {
		typ, _, p, err := c.frame()
		if err != nil {
			t.Fatalf("the idle connection ended with %v before the service said to go away", err)
		}
		if typ != h2GoAway {
			continue
		}
		if len(p) < 8 {
			t.Fatalf("a GOAWAY of %d bytes", len(p))
		}
		if code, debug := binary.BigEndian.Uint32(p[4:8]), string(p[8:]); code != 0 || debug != "max_idle" {
			t.Fatalf("GOAWAY with code %d and %q, want 0 (no error) and max_idle", code, debug)
		}
		return
	}
}

// A client that stops answering is found out: once its connection is
// silent for --keepalive the service pings it, and when no answer comes
// within --keepalive-timeout the connection is closed (its subscriptions
// would end with it). Idle connections are kept, so that nothing else
// closes it.
func TestServiceClosesSilentClients(t *testing.T) {
	s := startService(t, t.TempDir(), "--connection-idle-timeout", "0", "--keepalive", "1s", "--keepalive-timeout", "200ms")
	// Far below the defaults (a minute and 20s).
	c := dialH2(t, s.sock, 30*time.Second)
	var seen []string
	for {
		typ, flags, p, err := c.frame()
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, syscall.ECONNRESET) {
				t.Fatalf("the connection ended with %v after %v, want its close", err, seen)
			}
			break
		}
		switch {
		case typ == h2Ping && flags&0x1 == 0:
			seen = append(seen, "ping")
		case typ == h2GoAway:
			seen = append(seen, "goaway "+string(p[8:]))
		}
	}
	if diff := cmp.Diff([]string{"ping"}, seen); diff != "" {
		t.Errorf("what the service sent before it closed the connection (-want +got):\n%s", diff)
	}
}

// BenchmarkIdleSubscribers: the memory n idle subscribers add to `baton
// serve`, per subscriber: the growth of its anonymous resident memory
// (heap and stacks, from /proc) once each subscription, over one
// connection, has been sent the thread's creation and waits for more. Run
// it with -benchtime 1x: a later round reuses memory the round before it
// left to the collector.
func BenchmarkIdleSubscribers(b *testing.B) {
	for _, n := range []int{100, 1000} {
		b.Run(fmt.Sprintf("subscribers=%d", n), func(b *testing.B) {
			bound := strconv.Itoa(n + 1)
			s := startService(b, b.TempDir(), "--max-streams", bound, "--max-subscribers", bound, "--max-thread-subscribers", bound)
			c := s.client()
			rc, err := c.CreateThread(b.Context(), &batonv1.CreateThreadRequest{Provider: "acp", Cwd: b.TempDir(),
				ProviderCommand: &batonv1.ProviderCommand{Argv: []string{"agent"}}})
			if err != nil {
				b.Fatal(err)
			}
			var perSub float64
			for b.Loop() {
				before := rssAnonKB(b, s.cmd.Process.Pid)
				ctx, cancel := context.WithCancel(b.Context())
				for range n {
					st, err := c.Subscribe(ctx, &batonv1.SubscribeRequest{ThreadId: rc.GetThreadId()})
					if err != nil {
						b.Fatal(err)
					}
					if _, err := st.Recv(); err != nil {
						b.Fatal(err)
					}
				}
				perSub = float64(rssAnonKB(b, s.cmd.Process.Pid)-before) * 1024 / float64(n)
				cancel()
			}
			b.ReportMetric(perSub, "B/sub")
		})
	}
}

// rssAnonKB is a process's anonymous resident memory, in kB.
func rssAnonKB(tb testing.TB, pid int) int {
	tb.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		tb.Fatal(err)
	}
	for l := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(l, "RssAnon:"); ok {
			kb, err := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			if err != nil {
				tb.Fatalf("RssAnon: %q", v)
			}
			return kb
		}
	}
	tb.Fatalf("no RssAnon in /proc/%d/status", pid)
	return 0
}
