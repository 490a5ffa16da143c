package jsonrpcproc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/sourcegraph/jsonrpc2"

	"github.com/baton-run/baton/sdk"
	"github.com/baton-run/baton/sdk/clock"
	"github.com/baton-run/baton/sdk/clock/clocktest"
	"github.com/baton-run/baton/sdk/lineproc"
	"github.com/baton-run/baton/sdk/ndjson"
)

type noHandler struct{}

func (noHandler) Handle(context.Context, *jsonrpc2.Conn, *jsonrpc2.Request) {}

// A provider that prints a banner, answers one call without a "jsonrpc"
// member, complains on stderr and exits 3: the banner is reported and
// skipped, the answer arrives, a second call fails with the exit report.
func TestCallBannerAndExitReport(t *testing.T) {
	script := `read line; echo "Welcome to the agent"; echo '{"id":0,"result":{"ok":true}}'; echo "out of tea" >&2; read line; exit 3`
	var malformed atomic.Int32
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c, err := Start(ctx, Config{Name: "the agent", Command: sdk.ProviderCommand{Argv: []string{"sh", "-c", script}},
		Dir: t.TempDir(), Handler: noHandler{}, OnMalformed: func(frame uint64, err error) {
			if frame == 0 || !strings.Contains(err.Error(), "not JSON") {
				t.Errorf("malformed frame %d: %v", frame, err)
			}
			malformed.Add(1)
		}})
	if err != nil {
		t.Fatal(err)
	}
	var res struct{ OK bool }
	if err := c.Call(ctx, "ping", nil, &res); err != nil || !res.OK {
		t.Fatalf("ping: %+v %v", res, err)
	}
	if c.Frame() == 0 || malformed.Load() != 1 {
		t.Fatalf("frame %d, malformed %d", c.Frame(), malformed.Load())
	}
	cctx, ccancel := context.WithTimeout(ctx, 10*time.Second)
	defer ccancel()
	id, err := c.CallID(cctx, "again", nil, nil)
	if !errors.Is(err, sdk.ErrProviderExited) || id.Num != 1 {
		t.Fatalf("call after exit: id %v, %v", id, err)
	}
	if diff := cmp.Diff("the agent exited with status 3 before answering again: out of tea", err.Error()); diff != "" {
		t.Errorf("call after exit (-want +got):\n%s", diff)
	}
	<-c.Proc.Done()
	if diff := cmp.Diff("the agent exited with status 3: out of tea", c.ExitReport("")); diff != "" {
		t.Errorf("exit report (-want +got):\n%s", diff)
	}
}

// A provider that exits before it answers: the call's error says, in one
// sentence, how it exited, before answering what, and why as far as the
// provider said: the first stdout line since its last frame that is not
// one (quoted, its first 200 bytes, with its length when cut) and the end
// of its stderr (bounded, on one line), escaping what is not text.
func TestExitBeforeAnswering(t *testing.T) {
	long := strings.Repeat("x", 600)
	tenMB := 10 << 20
	for name, tc := range map[string]struct{ script, want string }{
		"stderr": {`read line; echo 'Error: no API key' >&2; exit 1`,
			"the agent exited with status 1 before answering initialize: Error: no API key"},
		"the last stderr lines": {`read line; printf 'one\n\ntwo\nthree\nfour\nfive\nsix\n' >&2; exit 1`,
			"the agent exited with status 1 before answering initialize: two; three; four; five; six (the last 5 of 6 lines of its stderr)"},
		"a long stderr": {`read line; echo start` + long + `end >&2; exit 1`,
			"the agent exited with status 1 before answering initialize: …" + long[:512-len("end")] + "end"},
		"stdout": {`read line; echo '{"jsonrpc":"2.0","method":"log"}'; echo 'Please log in first.'; echo 'Then again.'; exit 0`,
			`the agent exited with status 0 before answering initialize: it printed "Please log in first.", not JSON-RPC, and 1 more line that was not a frame`},
		"stdout and stderr": {`read line; echo 'Welcome to garbage'; echo 'Error: no API key' >&2; echo 'see the docs' >&2; exit 1`,
			`the agent exited with status 1 before answering initialize: it printed "Welcome to garbage", not JSON-RPC; its stderr ends: Error: no API key; see the docs`},
		"a 10 MB line": {fmt.Sprintf(`read line; head -c %d /dev/zero | tr '\0' x; echo; echo 'Error: out of memory' >&2; exit 1`, tenMB),
			fmt.Sprintf(`the agent exited with status 1 before answering initialize: it printed "%s…" (10485760 bytes in all), not JSON-RPC; its stderr ends: Error: out of memory`, strings.Repeat("x", 200))},
		"not UTF-8": {`read line; printf '\377\376garbage\200\033[0m\n'; printf '\033[31mError:\377 bad\n' >&2; exit 1`,
			`the agent exited with status 1 before answering initialize: it printed "\xff\xfegarbage\x80\x1b[0m", not JSON-RPC; its stderr ends: \x1b[31mError:\xff bad`},
		"JSON that is not JSON-RPC": {`read line; echo '{"error":"no key"}'; exit 1`,
			`the agent exited with status 1 before answering initialize: it printed "{\"error\":\"no key\"}", not JSON-RPC`},
		// A line that was not a frame, then frames: a banner, not why.
		"a banner before frames": {`read line; echo 'Starting'; echo '{"method":"log"}'; echo 'Error: gone' >&2; exit 1`,
			"the agent exited with status 1 before answering initialize: Error: gone"},
		"nothing said": {`read line; exit 7`, "the agent exited with status 7 before answering initialize"},
		// Gone before the call is written, or after: the same sentence.
		"before it reads": {`echo 'Error: gone' >&2; exit 1`, "the agent exited with status 1 before answering initialize: Error: gone"},
		"a long stdout line": {`read line; echo start` + long + `end; exit 1`,
			`the agent exited with status 1 before answering initialize: it printed "start` + long[:200-len("start")] + `…" (608 bytes in all), not JSON-RPC`},
		"killed": {`read line; kill -9 $$`, "the agent was killed by SIGKILL before answering initialize"},
	} {
		t.Run(name, func(t *testing.T) {
			c, err := Start(t.Context(), Config{Name: "the agent", Command: sdk.ProviderCommand{Argv: []string{"sh", "-c", tc.script}},
				Dir: t.TempDir(), Handler: noHandler{}})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Proc.Close(context.Background()) })
			err = c.Call(t.Context(), "initialize", nil, nil)
			if !errors.Is(err, sdk.ErrProviderExited) {
				t.Fatalf("initialize: %v; want ErrProviderExited", err)
			}
			if diff := cmp.Diff(tc.want, err.Error()); diff != "" {
				t.Errorf("initialize (-want +got):\n%s", diff)
			}
		})
	}
}

// A notification to a provider that is gone fails with its exit, as a
// call does: not jsonrpc2's "connection is closed".
func TestNotifyAfterTheExit(t *testing.T) {
	c, err := Start(t.Context(), Config{Name: "codex", Command: sdk.ProviderCommand{Argv: []string{"sh", "-c", `echo 'fatal: crashed' >&2; exit 3`}},
		Dir: t.TempDir(), Handler: noHandler{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Proc.Close(context.Background()) })
	<-c.Proc.Done()
	<-c.RPC.DisconnectNotify()
	err = c.Notify(t.Context(), "initialized", nil)
	var exit *sdk.ProviderExit
	if !errors.As(err, &exit) {
		t.Fatalf("initialized: %v; want the exit", err)
	}
	if diff := cmp.Diff("codex exited with status 3 before it was sent initialized: fatal: crashed", err.Error()); diff != "" {
		t.Errorf("initialized (-want +got):\n%s", diff)
	}
}

func TestDecodeFrame(t *testing.T) {
	var v map[string]any
	for in, want := range map[string]string{`nope`: "not JSON", `[1]`: "not a JSON-RPC message", `{"id":1}`: ""} {
		err := DecodeFrame([]byte(in), &v)
		if (want == "" && err != nil) || (want != "" && (err == nil || !strings.Contains(err.Error(), want))) {
			t.Errorf("%s: %v, want %q", in, err, want)
		}
	}
	if _, err := Start(context.Background(), Config{Command: sdk.ProviderCommand{Argv: []string{"/nonexistent/agent"}}}); err == nil {
		t.Error("a missing program started")
	}
}

var epoch = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)

// startOn starts script with its timeouts on f.
func startOn(t *testing.T, f *clock.Fake, h jsonrpc2.Handler, script string) *Conn {
	t.Helper()
	c, err := Start(t.Context(), Config{Name: "the agent", Command: sdk.ProviderCommand{Argv: []string{"sh", "-c", script}},
		Dir: t.TempDir(), Handler: h, Clock: f})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-c.Proc.Pid(), syscall.SIGKILL); <-c.Proc.Done() })
	return c
}

// A provider that closes its stdout and lives on is stopped DrainTimeout
// later, and Wait returns.
func TestWaitStopsAProviderThatStoppedTalking(t *testing.T) {
	f := clock.NewFake(epoch)
	c := startOn(t, f, noHandler{}, "exec >&-; exec sleep 300")
	done := make(chan struct{})
	go func() { c.Wait(); close(done) }()
	clocktest.Pending(t, f, "stdout ended", lineproc.DrainTimeout)
	f.Advance(lineproc.DrainTimeout - time.Millisecond)
	select {
	case <-c.Proc.Done():
		t.Fatalf("the provider was stopped before DrainTimeout: %v", c.Proc.Err())
	default:
	}
	f.Advance(time.Millisecond)
	clocktest.Within(t, done)
	if err := c.Proc.Err(); err == nil || err.Error() != "signal: terminated" {
		t.Fatalf("exit %v, want SIGTERM's", err)
	}
}

// bigReply answers every request with more than a pipe holds.
type bigReply struct{}

func (bigReply) Handle(ctx context.Context, c *jsonrpc2.Conn, r *jsonrpc2.Request) {
	println("reply")
	err := c.Reply(ctx, r.ID, strings.Repeat("x", 1<<20))
	println("replied", fmt.Sprint(err))
}

// A reply in flight when the provider exits, blocked on its stdin that
// something it started holds and does not read, does not hold Wait: the
// exit closes stdin, which ends the write. (The provider reads a byte of
// the reply first, so the write is under way before it exits; the sleep
// takes stdin through fd 3, as sh gives a background command /dev/null.)
func TestAReplyInFlightAtTheExitDoesNotHoldWait(t *testing.T) {
	f := clock.NewFake(epoch)
	c := startOn(t, f, bigReply{}, `exec 3<&0; sleep 300 <&3 >/dev/null 2>&1 3<&- &
		echo '{"jsonrpc":"2.0","id":"a","method":"ask"}'; head -c 1 >/dev/null; exit 0`)
	done := make(chan struct{})
	go func() { c.Wait(); close(done) }()
	clocktest.Within(t, done)
	if got := f.Now(); !got.Equal(epoch) {
		t.Fatalf("the clock moved to %v", got)
	}
}

// A call the connection's end failed while the provider lives on waits
// for its exit (to report it) only so long, or until its context ends.
func TestCallWaitsForTheExitReportSoLong(t *testing.T) {
	for _, cancelled := range []bool{false, true} {
		f := clock.NewFake(epoch)
		c := startOn(t, f, noHandler{}, "read line; exec >&-; exec sleep 300")
		ctx, cancel := context.WithCancel(t.Context())
		errc := make(chan error, 1)
		go func() { errc <- c.Call(ctx, "ping", nil, nil) }()
		clocktest.Pending(t, f, "the connection ended", exitReportWait)
		if cancelled {
			cancel()
		} else {
			f.Advance(exitReportWait - time.Millisecond)
			select {
			case err := <-errc:
				t.Fatalf("the call returned %v before exitReportWait", err)
			default:
			}
			f.Advance(time.Millisecond)
		}
		err := clocktest.Within(t, errc)
		cancel()
		if !errors.Is(err, sdk.ErrProviderExited) || err.Error() != "the agent closed its output before answering ping" {
			t.Fatalf("cancelled %v: call = %v, want ErrProviderExited saying the output closed", cancelled, err)
		}
		select {
		case <-c.Proc.Done():
			t.Fatal("the provider exited; the test wants it alive")
		default:
		}
		if p := f.Pending(); len(p) != 0 {
			t.Fatalf("cancelled %v: timers left pending: %v", cancelled, p)
		}
	}
}

// An over-long line is reported and skipped, like a banner: the answer
// after it still arrives (it used to end the connection).
func TestOverLongLineIsSkipped(t *testing.T) {
	script := fmt.Sprintf(`read line; head -c %d /dev/zero | tr '\0' x; echo; echo '{"id":0,"result":{"ok":true}}'; read line`,
		ndjson.DefaultMaxLine+1)
	var tooLong atomic.Int32
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c, err := Start(ctx, Config{Name: "the agent", Command: sdk.ProviderCommand{Argv: []string{"sh", "-c", script}},
		Dir: t.TempDir(), Handler: noHandler{}, OnMalformed: func(frame uint64, err error) {
			if !errors.Is(err, ndjson.ErrLineTooLong) {
				t.Errorf("malformed frame %d: %v; want ErrLineTooLong", frame, err)
			}
			tooLong.Add(1)
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Proc.Close(context.Background()) })
	var res struct{ OK bool }
	if err := c.Call(ctx, "ping", nil, &res); err != nil || !res.OK {
		t.Fatalf("ping after an over-long line: %+v %v", res, err)
	}
	if n := tooLong.Load(); n != 1 {
		t.Fatalf("over-long lines reported: %d, want 1", n)
	}
}

// Property: a line read as a notification by the fast path is one jsonrpc2
// reads as a notification, with the same method and params (as JSON
// values); a line jsonrpc2 reads as a notification the fast path takes too.
func FuzzNotification(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"text":"hi"}}}`,
		`{"method":"m","params":null}`, `{"method":"m"}`, `{"method":"m","id":null,"error":null}`,
		`{"method":"m","id":1}`, `{"id":1,"result":null}`, `{"Method":"m"}`, `{"method":3}`, `[{"method":"m"}]`,
		`{"method":"m","params":[1,2.50,"<&>"],"meta":{"a":1}}`, `{"method":"m","result":null}`, `not json`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		got, ok := decodeNotification(line)
		var want jsonrpc2.Request
		jerr := want.UnmarshalJSON(line)
		viaLib := jerr == nil && want.Notif && isRequest(line)
		if ok != viaLib {
			t.Fatalf("%s: fast path %v, jsonrpc2 %v (%v)", line, ok, viaLib, jerr)
		}
		if !ok {
			return
		}
		if got.Method != want.Method || !sameJSON(got.Params, want.Params) {
			t.Fatalf("%s: fast path %s %s, jsonrpc2 %s %s", line, got.Method, deref(got.Params), want.Method, deref(want.Params))
		}
	})
}

// isRequest says whether jsonrpc2's connection would take a line for a
// request (its message type check), not a response.
func isRequest(line []byte) bool {
	var m map[string]json.RawMessage
	if json.Unmarshal(line, &m) != nil {
		return false
	}
	_, result := m["result"]
	e, hasErr := m["error"]
	return !result && (!hasErr || string(e) == "null")
}

func deref(p *json.RawMessage) string {
	if p == nil {
		return "<absent>"
	}
	return string(*p)
}

func sameJSON(a, b *json.RawMessage) bool {
	if a == nil || b == nil {
		// jsonrpc2 says null params with a pointer to "null".
		return (a == nil) == (b == nil) || (a != nil && string(*a) == "null") || (b != nil && string(*b) == "null")
	}
	var x, y any
	dx, dy := json.NewDecoder(bytes.NewReader(*a)), json.NewDecoder(bytes.NewReader(*b))
	dx.UseNumber()
	dy.UseNumber()
	return dx.Decode(&x) == nil && dy.Decode(&y) == nil && reflect.DeepEqual(x, y)
}

// DispatchID returns once the request is written, before its answer: the
// provider reads the request, then a notification sent after DispatchID
// returned, and only then answers the request (with what it read); wait
// gives the answer. A provider gone before it answers is CallID's error.
func TestDispatchID(t *testing.T) {
	script := `read req; read note; printf '{"id":0,"result":{"second":%s}}\n' "$(printf '%s' "$note" | sed 's/.*"method":"\([a-z]*\)".*/"\1"/')"; read line; exit 3`
	c, err := Start(t.Context(), Config{Name: "the agent", Command: sdk.ProviderCommand{Argv: []string{"sh", "-c", script}},
		Dir: t.TempDir(), Handler: noHandler{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Proc.Close(context.Background()) })
	id, wait, err := c.DispatchID(t.Context(), "prompt", nil)
	if err != nil || id.Num != 0 {
		t.Fatalf("dispatch: %v, %v", id, err)
	}
	if err := c.Notify(t.Context(), "cancel", nil); err != nil {
		t.Fatal(err)
	}
	var res struct{ Second string }
	if err := wait(t.Context(), &res); err != nil || res.Second != "cancel" {
		t.Fatalf("answer %+v, %v; want the notification read after the request", res, err)
	}
	id, wait, err = c.DispatchID(t.Context(), "again", nil)
	if err == nil {
		err = wait(t.Context(), nil)
	}
	if !errors.Is(err, sdk.ErrProviderExited) || id.Num != 1 {
		t.Fatalf("a call the provider never answers: %v, %v", id, err)
	}
}
