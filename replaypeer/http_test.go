package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/baton-run/baton/sdk/sse"
)

const httpHeader = `{"type":"transcript_start","provider":"opencode","protocol":"http","version":"1","scenario":"t","metadata":{"source":"authored"}}`

// httpPeer is the real replaypeer binary serving an HTTP transcript.
type httpPeer struct {
	t      *testing.T
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	url    string
	stderr bytes.Buffer
	done   chan struct{}
	code   int
	// steps is the peer's trace, when it was started with
	// "--trace /dev/fd/3".
	steps <-chan string
}

// startHTTPPeer starts the peer on transcript with args after "--", and
// reads the address from the first line it prints ("... listening on URL").
func startHTTPPeer(t *testing.T, transcript string, args ...string) *httpPeer {
	t.Helper()
	f := filepath.Join(t.TempDir(), "t.ndjson")
	if err := os.WriteFile(f, []byte(transcript), 0o644); err != nil {
		t.Fatal(err)
	}
	argv := []string{"--transcript", f, "--workspace", t.TempDir(), "--speed", "0", "--listen", "127.0.0.1:0", "--trace", "/dev/fd/3"}
	if args != nil {
		argv = append(append(argv, "--"), args...)
	}
	return startProc(t, argv...)
}

// startProc starts the replaypeer binary with argv and reads the address
// it prints.
func startProc(t *testing.T, argv ...string) *httpPeer {
	t.Helper()
	p := &httpPeer{t: t, cmd: exec.Command(bin, argv...), done: make(chan struct{})}
	p.cmd.Stderr = &p.stderr
	var err error
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	steps, started := trace(t, p.cmd)
	p.steps = steps
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	started()
	t.Cleanup(func() { _ = p.cmd.Process.Kill(); <-p.done })
	lines := make(chan string, 8)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	go func() {
		err := p.cmd.Wait()
		if ee, ok := err.(*exec.ExitError); ok {
			p.code = ee.ExitCode()
		}
		close(p.done)
	}()
	select {
	case l, ok := <-lines:
		if !ok {
			<-p.done
			t.Fatalf("the peer printed no address (exit %d): %s", p.code, p.stderr.String())
		}
		_, url, found := strings.Cut(l, "listening on ")
		if !found {
			t.Fatalf("first line %q names no address", l)
		}
		p.url = url
	case <-time.After(10 * time.Second):
		t.Fatal("the peer printed nothing")
	}
	return p
}

// exit closes the peer's stdin (the client going away) and returns its
// exit code and stderr.
func (p *httpPeer) exit() (int, string) {
	p.t.Helper()
	p.stdin.Close()
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		p.t.Fatal("the peer did not exit after its stdin closed")
	}
	return p.code, p.stderr.String()
}

func (p *httpPeer) do(method, path, body string) (int, string) {
	p.t.Helper()
	req, err := http.NewRequest(method, p.url+path, strings.NewReader(body))
	if err != nil {
		p.t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	// A request the peer holds for longer than this is stuck.
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		p.t.Errorf("%s %s: %v", method, path, err)
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// events opens the event stream and returns a channel of event data.
func (p *httpPeer) events() <-chan string {
	p.t.Helper()
	resp, err := http.Get(p.url + "/event")
	if err != nil {
		p.t.Fatal(err)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		p.t.Fatalf("event stream content type %q", ct)
	}
	ch := make(chan string, 64)
	go func() {
		defer resp.Body.Close()
		defer close(ch)
		d := sse.NewDecoder(resp.Body)
		for {
			ev, err := d.Next()
			if err != nil {
				return
			}
			ch <- string(ev.Data)
		}
	}()
	return ch
}

func next(t *testing.T, ch <-chan string) string {
	t.Helper()
	select {
	case s := <-ch:
		return s
	case <-time.After(10 * time.Second):
		t.Fatal("no event")
	}
	return ""
}

var httpPrelude = []string{httpHeader,
	`{"type":"expect_outbound","frame":{"argv":["serve","--port","<any>"]}}`,
	`{"type":"emit_inbound","frame":{"stdout":"fake server listening on <listen>"}}`,
	`{"type":"expect_outbound","label":"events","frame":{"http":"request","method":"GET","path":"/event"}}`,
	`{"type":"emit_inbound","frame":{"http":"response","status":200,"stream":true}}`,
	`{"type":"emit_inbound","frame":{"sse":{"type":"server.connected"}}}`,
}

// TestHTTPRaces plays the server's races: events a request caused before
// its response, a terminal event before the response to the request that
// caused it, a response naming its request, and two requests the client
// sends at once, matched by what they are, not by when they come: here
// they come in the order the transcript does not have them.
func TestHTTPRaces(t *testing.T) {
	tr := lines(append(httpPrelude,
		`{"type":"expect_outbound","label":"create","frame":{"http":"request","method":"POST","path":"/session","query":{"directory":"<workspace>"},"body":{}}}`,
		`{"type":"emit_inbound","frame":{"sse":{"type":"session.created","id":"ses_1"}}}`,
		`{"type":"emit_inbound","frame":{"http":"response","status":200,"body":{"id":"ses_1","dir":"<workspace>"}}}`,
		`{"type":"expect_outbound","label":"prompt","frame":{"http":"request","method":"POST","path":"/session/ses_1/prompt_async","body":{"text":"<any>"}}}`,
		`{"type":"expect_outbound","label":"status","frame":{"http":"request","method":"GET","path":"/session/status"}}`,
		`{"type":"emit_inbound","frame":{"sse":{"type":"session.idle"}}}`,
		`{"type":"emit_inbound","frame":{"http":"response","status":200,"body":{"ses_1":"idle"},"request":"status"}}`,
		`{"type":"workspace","op":"write","path":"a.txt","content":"a\n"}`,
		`{"type":"emit_inbound","frame":{"http":"response","status":204}}`,
		`{"type":"expect_outbound","frame":{"http":"request","method":"GET","path":"/text"}}`,
		`{"type":"emit_inbound","frame":{"http":"response","status":200,"body":"plain text","contentType":"text/plain"}}`,
		`{"type":"runtime_exit","status":"success"}`)...)
	p := startHTTPPeer(t, tr, "serve", "--port", "4242")
	evs := p.events()
	if got := next(t, evs); got != `{"type":"server.connected"}` {
		t.Fatalf("first event %s", got)
	}
	ws := ""
	{
		dir := p.cmd.Args[4]
		code, body := p.do("POST", "/session?directory="+dir, "{}")
		var r struct{ ID, Dir string }
		_ = json.Unmarshal([]byte(body), &r)
		if code != 200 || r.ID != "ses_1" || r.Dir != dir {
			t.Fatalf("create: %d %s", code, body)
		}
		ws = dir
	}
	// The session.created event was sent before the response.
	if got := next(t, evs); !strings.Contains(got, "session.created") {
		t.Fatalf("event %s", got)
	}
	// Both requests at once, the status first: the peer has taken it (its
	// trace says so) before the prompt is sent. The status's answer comes
	// only once the prompt is there too, and the idle event is out.
	var wg sync.WaitGroup
	var statusCode int
	var statusBody string
	wg.Add(1)
	go func() {
		defer wg.Done()
		statusCode, statusBody = p.do("GET", "/session/status", "")
	}()
	awaitTrace(t, p.steps, `expect_outbound "status"): matched`)
	promptCode, _ := p.do("POST", "/session/ses_1/prompt_async", `{"text":"hi"}`)
	wg.Wait()
	if statusCode != 200 || statusBody != `{"ses_1":"idle"}` {
		t.Fatalf("status: %d %s", statusCode, statusBody)
	}
	if promptCode != 204 {
		t.Fatalf("prompt: %d", promptCode)
	}
	if got := next(t, evs); !strings.Contains(got, "session.idle") {
		t.Fatalf("event %s", got)
	}
	if b, err := os.ReadFile(filepath.Join(ws, "a.txt")); err != nil || string(b) != "a\n" {
		t.Fatalf("workspace entry: %q %v", b, err)
	}
	if code, body := p.do("GET", "/text", ""); code != 200 || body != "plain text" {
		t.Fatalf("text: %d %q", code, body)
	}
	if code, stderr := p.exit(); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
}

// A request that differs from its expectation is answered 500 and ends
// the peer with a mismatch; the cursor stays at the entry that failed.
func TestHTTPMismatch(t *testing.T) {
	tr := lines(append(httpPrelude,
		`{"type":"expect_outbound","label":"create","frame":{"http":"request","method":"POST","path":"/session","body":{"title":"a"}}}`,
		`{"type":"emit_inbound","frame":{"http":"response","status":200,"body":{}}}`,
		`{"type":"runtime_exit","status":"success"}`)...)
	state := filepath.Join(t.TempDir(), "cursor")
	p := startProc(t, "--transcript", writeTranscript(t, tr), "--workspace", t.TempDir(), "--speed", "0", "--listen", "127.0.0.1:0",
		"--state", state, "--", "serve", "--port", "1")
	p.events()
	code, body := p.do("POST", "/session", `{"title":"b"}`)
	if code != 500 || !strings.Contains(body, `$.body.title: expected "a", got "b"`) {
		t.Fatalf("mismatch answered %d %q", code, body)
	}
	exit, stderr := p.exit()
	if exit != 3 || !strings.Contains(stderr, "mismatch at entry 6") {
		t.Fatalf("exit %d: %s", exit, stderr)
	}
	if b, _ := os.ReadFile(state); string(b) != `{"cursor":5,"next":"entry 6 (line 7, expect_outbound \"create\")"}` {
		t.Errorf("state file %s, want the cursor at entry 6", b)
	}
}

// Requests the client may send at once are matched by content; one that
// matches none of them is a mismatch that says so.
func TestHTTPMismatchAmongRequestsAtOnce(t *testing.T) {
	tr := lines(append(httpPrelude,
		`{"type":"expect_outbound","label":"one","frame":{"http":"request","method":"GET","path":"/one"}}`,
		`{"type":"expect_outbound","label":"two","frame":{"http":"request","method":"GET","path":"/two"}}`,
		`{"type":"emit_inbound","frame":{"http":"response","status":200,"body":1}}`,
		`{"type":"emit_inbound","frame":{"http":"response","status":200,"body":2}}`,
		`{"type":"runtime_exit","status":"success"}`)...)
	for _, tc := range []struct {
		name   string
		first  string // a request sent and taken first, if any
		want   string
		cursor string
	}{
		{"none taken", "", `mismatch at entry 6 (line 7, expect_outbound "one"): the request matches none of the 2 expected now (entries 6, 7); against the first, frame differs`,
			`{"cursor":5,"next":"entry 6 (line 7, expect_outbound \"one\")"}`},
		{"one taken", "/one", `mismatch at entry 7 (line 8, expect_outbound "two"): frame differs`,
			`{"cursor":6,"next":"entry 7 (line 8, expect_outbound \"two\")"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			state := filepath.Join(t.TempDir(), "cursor")
			p := startProc(t, "--transcript", writeTranscript(t, tr), "--workspace", t.TempDir(), "--speed", "0", "--listen", "127.0.0.1:0",
				"--state", state, "--trace", "/dev/fd/3", "--", "serve", "--port", "1")
			p.events()
			var wg sync.WaitGroup
			if tc.first != "" {
				wg.Add(1)
				go func() { defer wg.Done(); p.do("GET", tc.first, "") }() // unanswered: the peer ends first
				awaitTrace(t, p.steps, `expect_outbound "one"): matched`)
			}
			code, body := p.do("GET", "/three", "")
			if code != 500 || !strings.Contains(body, tc.want) {
				t.Fatalf("answered %d %q, want 500 and %q", code, body, tc.want)
			}
			if exit, stderr := p.exit(); exit != 3 || !strings.Contains(stderr, tc.want) {
				t.Fatalf("exit %d: %s", exit, stderr)
			}
			wg.Wait()
			// The cursor is at the first expectation not taken.
			if b, _ := os.ReadFile(state); string(b) != tc.cursor {
				t.Errorf("state file %s, want %s", b, tc.cursor)
			}
		})
	}
}

func TestHTTPLeftover(t *testing.T) {
	tr := lines(append(httpPrelude,
		`{"type":"expect_outbound","frame":{"http":"request","method":"POST","path":"/session/ses_1/abort"}}`,
		`{"type":"emit_inbound","frame":{"http":"response","status":200,"body":true}}`,
		`{"type":"runtime_exit","status":"success"}`)...)
	p := startHTTPPeer(t, tr, "serve", "--port", "1")
	p.events()
	exit, stderr := p.exit()
	if exit != 4 || !strings.Contains(stderr, "the client went away with 3 entries unused") || !strings.Contains(stderr, "/abort") {
		t.Fatalf("exit %d: %s", exit, stderr)
	}
}

func TestHTTPUnexpectedRequest(t *testing.T) {
	tr := lines(append(httpPrelude, `{"type":"runtime_exit","status":"success"}`)...)
	p := startHTTPPeer(t, tr, "serve", "--port", "1")
	p.events()
	code, body := p.do("DELETE", "/session/ses_1", "")
	if code != 500 || !strings.Contains(body, "unexpected request") {
		t.Fatalf("answered %d %q", code, body)
	}
	exit, stderr := p.exit()
	if exit != 5 || !strings.Contains(stderr, `"method":"DELETE"`) {
		t.Fatalf("exit %d: %s", exit, stderr)
	}
}

func TestHTTPInvocation(t *testing.T) {
	tr := lines(append(httpPrelude, `{"type":"runtime_exit","status":"success"}`)...)
	f := filepath.Join(t.TempDir(), "t.ndjson")
	if err := os.WriteFile(f, []byte(tr), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--transcript", f, "--speed", "0", "--listen", "127.0.0.1:0", "--", "run", "--port", "1")
	var errb bytes.Buffer
	cmd.Stderr = &errb
	err := cmd.Run()
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != 3 || !strings.Contains(errb.String(), `$.argv[0]: expected "serve", got "run"`) {
		t.Fatalf("got %v: %s", err, errb.String())
	}
}

// TestHTTPStateFile: a second peer with the same state file continues
// after the runtime_exit where the first ended (a restarted server).
func TestHTTPStateFile(t *testing.T) {
	tr := lines(httpHeader,
		`{"type":"emit_inbound","frame":{"stdout":"listening on <listen>"}}`,
		`{"type":"expect_outbound","frame":{"http":"request","method":"GET","path":"/one"}}`,
		`{"type":"emit_inbound","frame":{"http":"response","status":200,"body":1}}`,
		`{"type":"runtime_exit","status":"success"}`,
		`{"type":"emit_inbound","frame":{"stdout":"listening on <listen>"}}`,
		`{"type":"expect_outbound","frame":{"http":"request","method":"GET","path":"/two"}}`,
		`{"type":"emit_inbound","frame":{"http":"response","status":200,"body":2}}`,
		`{"type":"runtime_exit","status":"success"}`)
	f := filepath.Join(t.TempDir(), "t.ndjson")
	state := filepath.Join(t.TempDir(), "cursor")
	if err := os.WriteFile(f, []byte(tr), 0o644); err != nil {
		t.Fatal(err)
	}
	for i, path := range []string{"/one", "/two"} {
		p := &httpPeer{t: t, done: make(chan struct{})}
		p.cmd = exec.Command(bin, "--transcript", f, "--speed", "0", "--state", state, "--listen", "127.0.0.1:0")
		p.cmd.Stderr = &p.stderr
		p.stdin, _ = p.cmd.StdinPipe()
		out, _ := p.cmd.StdoutPipe()
		if err := p.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		l, _ := bufio.NewReader(out).ReadString('\n')
		_, p.url, _ = strings.Cut(strings.TrimSpace(l), "listening on ")
		go func() {
			err := p.cmd.Wait()
			if ee, ok := err.(*exec.ExitError); ok {
				p.code = ee.ExitCode()
			}
			close(p.done)
		}()
		if code, body := p.do("GET", path, ""); code != 200 || body != []string{"1", "2"}[i] {
			t.Fatalf("%s: %d %s (%s)", path, code, body, p.stderr.String())
		}
		if code, stderr := p.exit(); code != 0 {
			t.Fatalf("exit %d: %s", code, stderr)
		}
	}
}

// TestRecordHTTP records a session through `replaypeer record --http-proxy`
// around a server (the replay peer itself, playing an authored transcript),
// and replays the recording with the same client.
func TestRecordHTTP(t *testing.T) {
	tr := lines(append(httpPrelude,
		`{"type":"expect_outbound","frame":{"http":"request","method":"POST","path":"/session","body":{}}}`,
		`{"type":"emit_inbound","frame":{"sse":{"type":"session.created"}}}`,
		`{"type":"workspace","op":"write","path":"made.txt","content":"by the server\n"}`,
		`{"type":"emit_inbound","frame":{"http":"response","status":200,"body":{"id":"ses_1","directory":"<workspace>"}}}`,
		`{"type":"expect_outbound","frame":{"http":"request","method":"GET","path":"/text","query":{"a":"1"}}}`,
		`{"type":"emit_inbound","frame":{"http":"response","status":200,"body":"plain","contentType":"text/plain"}}`,
		`{"type":"runtime_exit","status":"success"}`)...)
	dir := t.TempDir()
	f := filepath.Join(dir, "server.ndjson")
	out := filepath.Join(dir, "recorded.ndjson")
	ws := t.TempDir()
	if err := os.WriteFile(f, []byte(tr), 0o644); err != nil {
		t.Fatal(err)
	}
	client := func(p *httpPeer) {
		evs := p.events()
		if got := next(t, evs); !strings.Contains(got, "server.connected") {
			t.Fatalf("event %s", got)
		}
		code, body := p.do("POST", "/session", "{}")
		if code != 200 || !strings.Contains(body, `"id":"ses_1"`) || !strings.Contains(body, ws) {
			t.Fatalf("create: %d %s", code, body)
		}
		if got := next(t, evs); !strings.Contains(got, "session.created") {
			t.Fatalf("event %s", got)
		}
		if code, body := p.do("GET", "/text?a=1", ""); code != 200 || body != "plain" {
			t.Fatalf("text: %d %q", code, body)
		}
	}
	rec := startProc(t, "record", "--http-proxy", "--out", out, "--provider", "fake", "--protocol", "http", "--scenario", "t",
		"--workspace", ws, "--meta", "agentVersion=1.0.0", "--meta", "model=scripted", "--", "sh", "-c", `t=$1 w=$2; shift 2; exec "$0" --transcript "$t" --workspace "$w" --speed 0 --listen 127.0.0.1:0 -- "$@"`,
		bin, f, ws, "--", "serve", "--port", "4096")
	if !strings.Contains(rec.url, "127.0.0.1") {
		t.Fatalf("recorder address %q", rec.url)
	}
	client(rec)
	if code, stderr := rec.exit(); code != 0 {
		t.Fatalf("recorder exit %d: %s", code, stderr)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`{"argv":["serve","--port","<any>"]}`, `"frame":{"stdout":"fake server listening on <listen>"}`,
		`"label":"3.GET /event"`, `{"http":"response","status":200,"stream":true}`, `"frame":{"sse":{"type":"session.created"}}`,
		`"op":"write","path":"made.txt"`, `"directory":"<workspace>"`, `"query":{"a":"1"}`, `"body":"plain","contentType":"text/plain`,
		`{"type":"runtime_exit","status":"success"}`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("recording lacks %s:\n%s", want, b)
		}
	}
	// The recording replays with the same client, in a fresh workspace.
	ws = t.TempDir()
	p := startProc(t, "--transcript", out, "--workspace", ws, "--speed", "0", "--listen", "127.0.0.1:0", "--", "serve", "--port", "1")
	client(p)
	if code, stderr := p.exit(); code != 0 {
		t.Fatalf("replay exit %d: %s", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(ws, "made.txt")); err != nil {
		t.Errorf("the replay did not make the server's file: %v", err)
	}
}

// TestHTTPSentTooEarly: a request that arrives while the peer has still
// to play the entries before its expectation (here it waits out the
// afterMs of an event) came too early: it is answered 500 and ends the
// peer with a mismatch.
func TestHTTPSentTooEarly(t *testing.T) {
	tr := lines(httpHeader,
		`{"type":"emit_inbound","frame":{"stdout":"listening on <listen>"}}`,
		`{"type":"expect_outbound","frame":{"http":"request","method":"GET","path":"/event"}}`,
		`{"type":"emit_inbound","frame":{"http":"response","status":200,"stream":true}}`,
		`{"type":"emit_inbound","label":"late","frame":{"sse":{"type":"late"}},"afterMs":600000}`,
		`{"type":"expect_outbound","label":"early","frame":{"http":"request","method":"POST","path":"/early"}}`,
		`{"type":"emit_inbound","frame":{"http":"response","status":200,"body":{"ok":true}}}`,
		`{"type":"runtime_exit","status":"success"}`)
	p := startProc(t, "--transcript", writeTranscript(t, tr), "--workspace", t.TempDir(), "--speed", "1", "--listen", "127.0.0.1:0")
	p.events()
	code, body := p.do("POST", "/early", "")
	want := `mismatch at entry 5 (line 6, expect_outbound "early"): sent too early: the request arrived before entry 4 (line 5, emit_inbound "late") was played, which the transcript has before it`
	if code != 500 || !strings.Contains(body, want) {
		t.Fatalf("early request answered %d %q, want 500 and %q", code, body, want)
	}
	if code, stderr := p.exit(); code != 3 || !strings.Contains(stderr, want) {
		t.Fatalf("exit %d: %s", code, stderr)
	}
}

// An HTTP provider ends as its runtime_exit says too: the stderr text and
// the exit code.
func TestHTTPExitCodeAndStderr(t *testing.T) {
	tr := lines(httpHeader,
		`{"type":"emit_inbound","frame":{"stdout":"listening on <listen>"}}`,
		`{"type":"runtime_exit","status":"error","code":7,"stderr":"Error: port in use\n"}`)
	p := startHTTPPeer(t, tr)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		t.Fatal("the peer did not end")
	}
	if p.code != 7 || p.stderr.String() != "Error: port in use\n" {
		t.Fatalf("exit %d, stderr %q; want 7 and the entry's text alone", p.code, p.stderr.String())
	}
}

// TestHTTPRuntimeExitWaitsForASignal: as on stdio, a runtime_exit that
// waits for a signal keeps the server up after its client's stdin ends,
// until SIGTERM, and then exits as the entry says.
func TestHTTPRuntimeExitWaitsForASignal(t *testing.T) {
	tr := lines(httpHeader,
		`{"type":"emit_inbound","frame":{"stdout":"listening on <listen>"}}`,
		`{"type":"runtime_exit","status":"cancelled","wait":"signal"}`)
	p := startHTTPPeer(t, tr)
	p.stdin.Close()
	// The peer saw its stdin end and waits on: only a signal ends it.
	awaitTrace(t, p.steps, "entry 2 (line 3, runtime_exit): stdin closed, waiting for a signal")
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	awaitTrace(t, p.steps, "entry 2 (line 3, runtime_exit): stopped by a signal")
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		t.Fatal("the peer did not exit at SIGTERM")
	}
	if p.code != 130 {
		t.Fatalf("exit %d, want 130 (cancelled): %s", p.code, p.stderr.String())
	}
}
