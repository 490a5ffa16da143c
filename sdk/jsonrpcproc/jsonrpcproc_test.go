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
	"testing"
	"time"

	"github.com/sourcegraph/jsonrpc2"

	"github.com/baton-run/baton/sdk"
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
	<-c.Proc.Done()
	if r := c.ExitReport(); !strings.Contains(r, "the agent exited: exit status 3") || !strings.Contains(r, "out of tea") {
		t.Fatalf("exit report: %s", r)
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

// A provider that closes its stdout and lives on is stopped, and Wait
// returns.
func TestWaitStopsAProviderThatStoppedTalking(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c, err := Start(ctx, Config{Name: "the agent", Command: sdk.ProviderCommand{Argv: []string{"sh", "-c", "exec >&-; sleep 60"}},
		Dir: t.TempDir(), Handler: noHandler{}})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { c.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("Wait did not return")
	}
	<-c.Proc.Done()
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
