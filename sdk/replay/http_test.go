package replay

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-run/baton/sdk/clock"
	"github.com/baton-run/baton/sdk/sse"
	"github.com/baton-run/baton/sdk/transcript"
)

const httpHeader = `{"type":"transcript_start","provider":"opencode","protocol":"http","version":"1","scenario":"t","metadata":{"source":"authored"}}`

const listening = `{"type":"emit_inbound","frame":{"stdout":"listening on <listen>"}}`

func decodeHTTP(t *testing.T, lines ...string) *transcript.Transcript {
	t.Helper()
	return decodeUnder(t, httpHeader, lines...)
}

// server is an HTTP playback in this process; the test is its client.
type server struct {
	url    string
	stdin  *io.PipeWriter // the client's end of the peer's stdin
	stdout chan string    // the lines it prints after its address
	ended  chan struct{}
	err    error // ServeHTTP's result, once ended
}

// startServer plays cfg on a free port; its first stdout line must be
// the listening entry, which tells the address.
func startServer(t *testing.T, ctx context.Context, cfg HTTPConfig) *server {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	cfg.Listen, cfg.In, cfg.Out = "127.0.0.1:0", inR, outW
	s := &server{stdin: inW, stdout: make(chan string, 16), ended: make(chan struct{})}
	go func() {
		s.err = ServeHTTP(ctx, cfg)
		outW.Close()
		close(s.ended)
	}()
	t.Cleanup(func() { inW.Close(); <-s.ended })
	go func() {
		defer close(s.stdout)
		sc := bufio.NewScanner(outR)
		for sc.Scan() {
			s.stdout <- sc.Text()
		}
	}()
	select {
	case l := <-s.stdout:
		_, s.url, _ = strings.Cut(l, "listening on ")
	case <-time.After(30 * time.Second):
		t.Fatal("the peer printed no address")
	}
	return s
}

// result waits for the playback's result; one still running after 30
// seconds is stuck.
func (s *server) result(t *testing.T) error {
	t.Helper()
	select {
	case <-s.ended:
		return s.err
	case <-time.After(30 * time.Second):
		t.Fatal("the playback did not end")
	}
	return nil
}

func (s *server) do(t *testing.T, method, path, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, s.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		t.Errorf("%s %s: %v", method, path, err)
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// stream opens the event stream; the channel has each event's data and
// closes when the stream ends. drop is the client going away from it.
func (s *server) stream(t *testing.T) (events <-chan string, drop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	req, _ := http.NewRequestWithContext(ctx, "GET", s.url+"/event", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("event stream: %d %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	ch := make(chan string, 16)
	go func() {
		defer close(ch)
		defer resp.Body.Close()
		d := sse.NewDecoder(resp.Body)
		for {
			ev, err := d.Next()
			if err != nil {
				return
			}
			ch <- string(ev.Data)
		}
	}()
	t.Cleanup(cancel)
	return ch, cancel
}

// collect is what ch has until it closes.
func collect(t *testing.T, ch <-chan string) []string {
	t.Helper()
	var got []string
	for {
		select {
		case s, ok := <-ch:
			if !ok {
				return got
			}
			got = append(got, s)
		case <-time.After(30 * time.Second):
			t.Fatalf("not closed after 30s; had %q", got)
		}
	}
}

// An HTTP transcript the peer cannot play, or a peer that cannot play it,
// ends the playback with an error that names the entry, before any client
// request is needed (and not as a client gone with entries unused), and
// sends nothing.
func TestHTTPCannotPlay(t *testing.T) {
	_, notFrame := transcript.DecodeHTTPFrame([]byte(`[1]`))
	_, listenErr := net.Listen("tcp", "127.0.0.1:99999")
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing", "cursor")
	stdout := `{"type":"emit_inbound","frame":{"stdout":"up"}}`
	for name, tc := range map[string]struct {
		entry string
		cfg   HTTPConfig
		want  *Error
	}{
		"not an HTTP frame": {`{"type":"emit_inbound","frame":[1]}`, HTTPConfig{},
			&Error{Code: ExitBadUsage, Msg: "entry 1 (line 2, emit_inbound): " + notFrame.Error()}},
		"a frame of no kind": {`{"type":"emit_inbound","frame":{"n":1}}`, HTTPConfig{},
			&Error{Code: ExitBadUsage, Msg: `entry 1 (line 2, emit_inbound): an HTTP transcript's emit_inbound frame must be a response, an sse event or a stdout line: {"n":1}`}},
		"an event before a stream": {`{"type":"emit_inbound","frame":{"sse":{"type":"x"}}}`, HTTPConfig{},
			&Error{Code: ExitBadUsage, Msg: "entry 1 (line 2, emit_inbound): an event, but no response has opened an event stream"}},
		"a response with no request": {`{"type":"emit_inbound","frame":{"http":"response","status":200}}`, HTTPConfig{},
			&Error{Code: ExitBadUsage, Msg: "entry 1 (line 2, emit_inbound): a response, but no request is waiting for one"}},
		"a response to a request not waiting": {`{"type":"emit_inbound","frame":{"http":"response","status":200,"request":"x"}}`, HTTPConfig{},
			&Error{Code: ExitBadUsage, Msg: `entry 1 (line 2, emit_inbound): answers request "x", which is not waiting for an answer`}},
		"arguments expected, none given": {`{"type":"expect_outbound","frame":{"argv":["serve"]}}`, HTTPConfig{},
			&Error{Code: ExitMismatch, Msg: `mismatch at entry 1 (line 2, expect_outbound): the transcript expects the arguments ["serve"], and the peer was given none (after "--")`}},
		"a workspace entry, no workspace": {`{"type":"workspace","op":"delete","path":"a"}`, HTTPConfig{},
			&Error{Code: ExitIO, Msg: "entry 1 (line 2, workspace): workspace entry but no workspace directory"}},
		"stdout fails": {stdout, HTTPConfig{Config: Config{Out: brokenWriter{}}},
			&Error{Code: ExitIO, Msg: "entry 1 (line 2, emit_inbound): write stdout: broken pipe"}},
		"partial frame fails": {`{"type":"runtime_exit","status":"error","partial":"{"}`, HTTPConfig{Config: Config{Out: brokenWriter{}}},
			&Error{Code: ExitIO, Msg: "entry 1 (line 2, runtime_exit): write stdout: broken pipe"}},
		"state file unreadable": {stdout, HTTPConfig{Config: Config{StateFile: dir}},
			&Error{Code: ExitBadUsage, Msg: "read " + dir + ": is a directory"}},
		"state file unwritable": {stdout, HTTPConfig{Config: Config{StateFile: missing}},
			&Error{Code: ExitIO, Msg: "save state: open " + missing + ".tmp: no such file or directory"}},
		"cannot listen": {stdout, HTTPConfig{Listen: "127.0.0.1:99999"},
			&Error{Code: ExitBadUsage, Msg: "listen: " + listenErr.Error()}},
	} {
		t.Run(name, func(t *testing.T) {
			cfg := tc.cfg
			cfg.Transcript = decodeHTTP(t, tc.entry)
			if cfg.Listen == "" {
				cfg.Listen = "127.0.0.1:0"
			}
			var out strings.Builder
			if cfg.Out == nil {
				cfg.Out = &out
			}
			// The client is gone at once: the error comes before the
			// peer looks.
			cfg.In = strings.NewReader("")
			if diff := cmp.Diff(tc.want, asError(ServeHTTP(t.Context(), cfg))); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			// Nothing went out: the cursor is not past it.
			if out.Len() != 0 {
				t.Errorf("stdout %q", out.String())
			}
		})
	}
}

// A response entry the peer cannot send ends the playback with an error
// naming it; the request it was for is told the playback ended.
func TestHTTPResponseCannotBeSent(t *testing.T) {
	t.Run("an event name with a line break", func(t *testing.T) {
		p := startServer(t, t.Context(), HTTPConfig{Config: Config{Transcript: decodeHTTP(t, listening,
			`{"type":"expect_outbound","frame":{"http":"request","method":"GET","path":"/event"}}`,
			`{"type":"emit_inbound","frame":{"http":"response","status":200,"stream":true}}`,
			`{"type":"emit_inbound","frame":{"sse":{"n":1},"event":"a\nb"}}`,
			`{"type":"runtime_exit","status":"success"}`)}})
		events, _ := p.stream(t)
		want := &Error{Code: ExitBadUsage, Msg: `entry 4 (line 5, emit_inbound): sse: event name "a\nb" has a line break`}
		if diff := cmp.Diff(want, asError(p.result(t))); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
		if got := collect(t, events); got != nil {
			t.Errorf("events %q, want none", got)
		}
	})
	t.Run("a text body that is not a string", func(t *testing.T) {
		p := startServer(t, t.Context(), HTTPConfig{Config: Config{Transcript: decodeHTTP(t, listening,
			`{"type":"expect_outbound","frame":{"http":"request","method":"GET","path":"/a"}}`,
			`{"type":"emit_inbound","frame":{"http":"response","status":200,"body":1,"contentType":"text/plain"}}`,
			`{"type":"runtime_exit","status":"success"}`)}})
		code, body := p.do(t, "GET", "/a", "")
		if code != 503 || body != "replay peer: the playback ended before this request was answered\n" {
			t.Errorf("GET /a: %d %q", code, body)
		}
		want := &Error{Code: ExitBadUsage, Msg: "entry 3 (line 4, emit_inbound): a text/plain body must be a JSON string"}
		if diff := cmp.Diff(want, asError(p.result(t))); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
	})
}

// An HTTP provider's runtime_exit: the response before it goes out (200
// when the entry gives no status), then its last frame cut short on
// stdout, its stderr text, stdout closed while it lives on until the
// client goes away, and its exit code.
func TestHTTPExitEntry(t *testing.T) {
	trace := newLineWriter()
	var stderr strings.Builder
	p := startServer(t, t.Context(), HTTPConfig{Config: Config{Err: &stderr, Trace: trace, Transcript: decodeHTTP(t, listening,
		`{"type":"expect_outbound","label":"a","frame":{"http":"request","method":"GET","path":"/a"}}`,
		`{"type":"emit_inbound","frame":{"http":"response","body":{"ok":true}}}`,
		`{"type":"runtime_exit","status":"error","code":9,"partial":"{\"cut","stderr":"bye\n","closeStdout":true,"wait":"stdin_close"}`)}})
	if code, body := p.do(t, "GET", "/a", ""); code != 200 || body != `{"ok":true}` {
		t.Errorf("GET /a: %d %q", code, body)
	}
	if diff := cmp.Diff([]string{`{"cut`}, collect(t, p.stdout)); diff != "" {
		t.Errorf("stdout after the address (-want +got):\n%s", diff)
	}
	trace.await(t, "entry 4 (line 5, runtime_exit): stdout closed")
	p.stdin.Close()
	want := &Error{Code: 9, Msg: "runtime exit (error) at entry 4 (line 5, runtime_exit)", Quiet: true}
	if diff := cmp.Diff(want, asError(p.result(t))); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if stderr.String() != "bye\n" {
		t.Errorf("stderr %q", stderr.String())
	}
	if diff := cmp.Diff([]string{"entry 4 (line 5, runtime_exit): stdin closed"}, trace.all()); diff != "" {
		t.Errorf("trace (-want +got):\n%s", diff)
	}
}

// A runtime_exit waiting for a signal ends at the signal (ctx) even while
// the client's stdin is open.
func TestHTTPSignalWhileStdinIsOpen(t *testing.T) {
	trace := newLineWriter()
	ctx, cancel := context.WithCancel(t.Context())
	inR, inW := io.Pipe()
	defer inW.Close()
	done := make(chan error, 1)
	go func() {
		done <- ServeHTTP(ctx, HTTPConfig{Listen: "127.0.0.1:0", Config: Config{Transcript: decodeHTTP(t,
			`{"type":"runtime_exit","status":"cancelled","wait":"signal"}`), In: inR, Out: io.Discard, Trace: trace}})
	}()
	cancel()
	want := &Error{Code: ExitCancelled, Msg: "runtime exit (cancelled) at entry 1 (line 2, runtime_exit)"}
	if diff := cmp.Diff(want, asError(result(t, done))); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"entry 1 (line 2, runtime_exit): stopped by a signal"}, trace.all()); diff != "" {
		t.Errorf("trace (-want +got):\n%s", diff)
	}
}

// A client that goes away with entries unused is told which: during an
// afterMs wait with a request matched and not answered (which is told the
// playback ended), or with requests expected at once not sent.
func TestHTTPClientGoesAway(t *testing.T) {
	t.Run("during a wait", func(t *testing.T) {
		clk := clock.NewFake(time.Unix(0, 0))
		trace := newLineWriter()
		p := startServer(t, t.Context(), HTTPConfig{Config: Config{Speed: 1, Clock: clk, Trace: trace, Transcript: decodeHTTP(t, listening,
			`{"type":"expect_outbound","label":"a","frame":{"http":"request","method":"GET","path":"/a"}}`,
			`{"type":"emit_inbound","frame":{"http":"response","status":200,"body":1},"afterMs":1000}`,
			`{"type":"runtime_exit","status":"success"}`)}})
		type answer struct {
			Code int
			Body string
		}
		answered := make(chan answer, 1)
		go func() {
			code, body := p.do(t, "GET", "/a", "")
			answered <- answer{code, body}
		}()
		trace.await(t, `entry 2 (line 3, expect_outbound "a"): matched`)
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		if err := clk.WaitTimers(ctx, 1); err != nil {
			t.Fatal(err)
		}
		p.stdin.Close()
		want := &Error{Code: ExitLeftover, Msg: `the client went away with 2 entries unused; the first unused is entry 3 (line 4, emit_inbound): {"http":"response","status":200,"body":1} (1 matched requests unanswered, the oldest "a")`}
		if diff := cmp.Diff(want, asError(p.result(t))); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(answer{503, "replay peer: the playback ended before this request was answered\n"}, <-answered); diff != "" {
			t.Errorf("GET /a (-want +got):\n%s", diff)
		}
	})
	t.Run("requests expected at once", func(t *testing.T) {
		p := startServer(t, t.Context(), HTTPConfig{Config: Config{Transcript: decodeHTTP(t, listening,
			`{"type":"expect_outbound","frame":{"http":"request","method":"GET","path":"/one"}}`,
			`{"type":"expect_outbound","frame":{"http":"request","method":"GET","path":"/two"}}`,
			`{"type":"emit_inbound","frame":{"http":"response","status":200,"body":1}}`,
			`{"type":"emit_inbound","frame":{"http":"response","status":200,"body":2}}`)}})
		p.stdin.Close()
		want := &Error{Code: ExitLeftover, Msg: `the client went away with 4 entries unused; the first unused is entry 2 (line 3, expect_outbound): {"http":"request","method":"GET","path":"/one"} (and 1 more expected with it)`}
		if diff := cmp.Diff(want, asError(p.result(t))); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
	})
}

// An event's afterMs is waited on the Config's clock, scaled by the
// speed; a transcript with no runtime_exit ends when the client goes
// away, with the cursor past its end.
func TestHTTPPacingReadsTheClock(t *testing.T) {
	clk := clock.NewFake(time.Unix(0, 0))
	state := filepath.Join(t.TempDir(), "cursor")
	p := startServer(t, t.Context(), HTTPConfig{Config: Config{Speed: 2, Clock: clk, StateFile: state, Transcript: decodeHTTP(t, listening,
		`{"type":"expect_outbound","frame":{"http":"request","method":"GET","path":"/event"}}`,
		`{"type":"emit_inbound","frame":{"http":"response","status":200,"stream":true}}`,
		`{"type":"emit_inbound","frame":{"sse":{"n":1}},"afterMs":1000}`)}})
	events, _ := p.stream(t)
	var pending [][]time.Duration
	parked := func() {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		if err := clk.WaitTimers(ctx, 1); err != nil {
			t.Fatal(err)
		}
		pending = append(pending, clk.Pending())
	}
	parked()
	clk.Advance(499 * time.Millisecond)
	parked() // a millisecond short: still waiting
	clk.Advance(time.Millisecond)
	select {
	case ev := <-events:
		if ev != `{"n":1}` {
			t.Errorf("event %s", ev)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no event after the wait")
	}
	if diff := cmp.Diff([][]time.Duration{{500 * time.Millisecond}, {time.Millisecond}}, pending); diff != "" {
		t.Errorf("the timers the peer waited on (-want +got):\n%s", diff)
	}
	p.stdin.Close()
	if err := p.result(t); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(state); err != nil || string(b) != `{"cursor":4}` {
		t.Errorf("state file %s %v, want the cursor past the end", b, err)
	}
}

// A request during an afterMs wait when the transcript expects none
// before its next runtime_exit is unexpected: answered 500, and the end
// of the playback.
func TestHTTPRequestDuringAWaitBeforeTheEnd(t *testing.T) {
	p := startServer(t, t.Context(), HTTPConfig{Config: Config{Speed: 1, Clock: clock.NewFake(time.Unix(0, 0)), Transcript: decodeHTTP(t, listening,
		`{"type":"emit_inbound","frame":{"stdout":"late"},"afterMs":1000}`,
		`{"type":"runtime_exit","status":"success"}`)}})
	msg := `unexpected request before entry 2 (line 3, emit_inbound) was played, when the transcript expects none before its end or its next runtime_exit: {"http":"request","method":"GET","path":"/x"}`
	if code, body := p.do(t, "GET", "/x", ""); code != 500 || body != "replay peer: "+msg+"\n" {
		t.Errorf("GET /x: %d %q", code, body)
	}
	if diff := cmp.Diff(&Error{Code: ExitUnexpected, Msg: msg}, asError(p.result(t))); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// A request whose body is cut short (the client stopped sending) is
// answered 400 and is not played: the expectation waits for a whole one.
func TestHTTPRequestBodyCutShort(t *testing.T) {
	p := startServer(t, t.Context(), HTTPConfig{Config: Config{Transcript: decodeHTTP(t, listening,
		`{"type":"expect_outbound","frame":{"http":"request","method":"POST","path":"/a","body":{"x":1}}}`,
		`{"type":"emit_inbound","frame":{"http":"response","status":200,"body":true}}`,
		`{"type":"runtime_exit","status":"success"}`)}})
	c, err := net.Dial("tcp", strings.TrimPrefix(p.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "POST /a HTTP/1.1\r\nHost: peer\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"x\"")
	c.(*net.TCPConn).CloseWrite()
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 400 || string(b) != "replay peer: read body: unexpected EOF\n" {
		t.Errorf("cut short: %d %q", resp.StatusCode, b)
	}
	if code, body := p.do(t, "POST", "/a", `{"x":1}`); code != 200 || body != "true" {
		t.Errorf("POST /a: %d %q", code, body)
	}
	p.stdin.Close()
	if err := p.result(t); err != nil {
		t.Fatal(err)
	}
}

// A client that drops its event stream and opens another gets the events
// that follow on the new one.
func TestHTTPEventStreamReopened(t *testing.T) {
	p := startServer(t, t.Context(), HTTPConfig{Config: Config{Transcript: decodeHTTP(t, listening,
		`{"type":"expect_outbound","label":"events","frame":{"http":"request","method":"GET","path":"/event"}}`,
		`{"type":"emit_inbound","frame":{"http":"response","status":200,"stream":true}}`,
		`{"type":"emit_inbound","frame":{"sse":{"n":1}}}`,
		`{"type":"expect_outbound","label":"reopened","frame":{"http":"request","method":"GET","path":"/event"}}`,
		`{"type":"emit_inbound","frame":{"http":"response","status":200,"stream":true}}`,
		`{"type":"emit_inbound","frame":{"sse":{"n":2}}}`,
		`{"type":"runtime_exit","status":"success"}`)}})
	first, drop := p.stream(t)
	select {
	case ev := <-first:
		if ev != `{"n":1}` {
			t.Fatalf("first stream: event %s", ev)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no event on the first stream")
	}
	drop()
	second, _ := p.stream(t)
	p.stdin.Close()
	if err := p.result(t); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{`{"n":2}`}, collect(t, second)); diff != "" {
		t.Errorf("the second stream's events (-want +got):\n%s", diff)
	}
}

// An HTTP transcript's raw text is an event on the newest stream whose
// data is the text as it is.
func TestHTTPRawTextIsAnEvent(t *testing.T) {
	p := startServer(t, t.Context(), HTTPConfig{Config: Config{Transcript: decodeHTTP(t, listening,
		`{"type":"expect_outbound","label":"events","frame":{"http":"request","method":"GET","path":"/event"}}`,
		`{"type":"emit_inbound","frame":{"http":"response","status":200,"stream":true}}`,
		`{"type":"emit_inbound","raw":"not JSON {\""}`,
		`{"type":"emit_inbound","frame":{"sse":{"n":1}}}`,
		`{"type":"runtime_exit","status":"success"}`)}})
	events, _ := p.stream(t)
	p.stdin.Close()
	if err := p.result(t); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{`not JSON {"`, `{"n":1}`}, collect(t, events)); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

// Raw text with no event stream open is bad usage, as an event is.
func TestHTTPRawTextWithoutAStream(t *testing.T) {
	p := startServer(t, t.Context(), HTTPConfig{Config: Config{Transcript: decodeHTTP(t, listening,
		`{"type":"emit_inbound","raw":"junk"}`)}})
	want := &Error{Code: ExitBadUsage, Msg: "entry 2 (line 3, emit_inbound): an event, but no response has opened an event stream"}
	if diff := cmp.Diff(error(want), p.result(t)); diff != "" {
		t.Errorf("result (-want +got):\n%s", diff)
	}
}

// An HTTP provider floods too: its stdout lines and its events repeat,
// "<n>" each copy's number.
func TestHTTPRepeat(t *testing.T) {
	p := startServer(t, t.Context(), HTTPConfig{Config: Config{Transcript: decodeHTTP(t, listening,
		`{"type":"emit_inbound","label":"log","frame":{"stdout":"log <n>"},"repeat":3}`,
		`{"type":"expect_outbound","label":"events","frame":{"http":"request","method":"GET","path":"/event"}}`,
		`{"type":"emit_inbound","frame":{"http":"response","status":200,"stream":true}}`,
		`{"type":"emit_inbound","label":"junk","raw":"junk <n>","repeat":2}`,
		`{"type":"runtime_exit","status":"success","wait":"now"}`)}})
	events, _ := p.stream(t)
	if diff := cmp.Diff([]string{"junk 1", "junk 2"}, collect(t, events)); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"log 1", "log 2", "log 3"}, collect(t, p.stdout)); diff != "" {
		t.Errorf("stdout after the address (-want +got):\n%s", diff)
	}
	if err := p.result(t); err != nil {
		t.Fatal(err)
	}
}
