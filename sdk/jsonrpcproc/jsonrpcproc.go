// Package jsonrpcproc runs a provider process that speaks JSON-RPC over
// NDJSON on its stdio (Codex app-server, ACP agents): a lineproc process
// (its own group, a raw-frame log of every line both ways and of its
// stderr, an exit report) with a jsonrpc2 connection over its lines. A
// plugin adds its protocol on top.
package jsonrpcproc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	fastjson "github.com/segmentio/encoding/json"

	_ "github.com/baton-run/baton/sdk/internal/jsoncpu" // segmentio's scalar routines
	"github.com/sourcegraph/jsonrpc2"

	"github.com/baton-run/baton/sdk"
	"github.com/baton-run/baton/sdk/clock"
	"github.com/baton-run/baton/sdk/framelog"
	"github.com/baton-run/baton/sdk/lineproc"
	"github.com/baton-run/baton/sdk/providerproc"
)

// Config says what to start and how to talk to it.
type Config struct {
	// Name is how reports name the provider ("codex", "the agent").
	Name    string
	Command sdk.ProviderCommand
	Dir     string
	// RawFrameLog is the raw-frame log's path; empty keeps none.
	RawFrameLog string
	// Redact are secrets kept out of the raw-frame log (lineproc.Config).
	Redact []string
	Log    hclog.Logger
	// Handler handles the provider's requests and notifications.
	Handler jsonrpc2.Handler
	// OnRecv, if set, runs on the read loop for every message (after
	// Frame names the frame it came in).
	OnRecv func(*jsonrpc2.Request, *jsonrpc2.Response)
	// OnMalformed is told of a line that is not a JSON-RPC message (a
	// banner, a log line): it is kept in the log and skipped, never fatal.
	// An over-long line is skipped too (frame 0: it is not in the log).
	OnMalformed func(frame uint64, err error)
	// Clock times the wait of a call for the provider's exit, and
	// lineproc's timeouts (nil: the system clock).
	Clock clock.Clock
}

// Conn is a running provider process and the connection to it.
type Conn struct {
	Proc   *providerproc.Process
	Frames *framelog.Log
	RPC    *jsonrpc2.Conn

	lines  *lineproc.Process
	name   string
	clock  clock.Clock
	frame  atomic.Uint64 // raw-frame index of the frame being handled
	nextID atomic.Uint64 // our request ids
}

// Start starts the process and the connection; ctx bounds the connection
// (cancel it to close).
func Start(ctx context.Context, cfg Config) (*Conn, error) {
	if cfg.Log == nil {
		cfg.Log = hclog.NewNullLogger()
	}
	lines, err := lineproc.Start(lineproc.Config{Name: cfg.Name, Protocol: "JSON-RPC", Command: cfg.Command, Dir: cfg.Dir,
		RawFrameLog: cfg.RawFrameLog, Redact: cfg.Redact, Log: cfg.Log, Stdin: true, Clock: cfg.Clock, OnLineTooLong: func(err error) {
			// Skipped like a banner: the connection reads on.
			if cfg.OnMalformed != nil {
				cfg.OnMalformed(0, err)
			}
		}})
	if err != nil {
		return nil, err
	}
	c := &Conn{Proc: lines.Cmd, Frames: lines.Frames, lines: lines, name: cfg.Name, clock: clock.Or(cfg.Clock)}
	opts := []jsonrpc2.ConnOpt{jsonrpc2.SetLogger(cfg.Log.StandardLogger(&hclog.StandardLoggerOptions{InferLevels: true}))}
	if cfg.OnRecv != nil {
		opts = append(opts, jsonrpc2.OnRecv(cfg.OnRecv))
	}
	st := &stream{c: c, onMalformed: cfg.OnMalformed, ctx: ctx, handler: cfg.Handler, onRecv: cfg.OnRecv, ready: make(chan struct{})}
	c.RPC = jsonrpc2.NewConn(ctx, st, cfg.Handler, opts...)
	close(st.ready)
	return c, nil
}

// exitReportWait bounds how long a call the connection's end failed waits
// for the provider's exit, to say how it exited.
const exitReportWait = 5 * time.Second

// Frame is the raw-frame index of the frame being handled (the latest
// read), for events to name the frame they came from.
func (c *Conn) Frame() uint64 { return c.frame.Load() }

// Call sends a request with our own id (0, 1, 2, …) and waits for its
// answer. A JSON-RPC error comes back as a *jsonrpc2.Error wrapped with the
// method; a provider that went away is sdk.ErrProviderExited, with its
// exit report.
func (c *Conn) Call(ctx context.Context, method string, params, result any) error {
	_, err := c.CallID(ctx, method, params, result)
	return err
}

// CallID is Call that also says which id the request had, so that its
// response frame can be found again (see Config.OnRecv). A connection that
// closed under the call waits up to exitReportWait (or until ctx ends) for
// the provider's exit, to report it in one sentence (an *sdk.ProviderExit):
// "the agent exited with status 1 before answering initialize: <the end of
// its stderr>".
func (c *Conn) CallID(ctx context.Context, method string, params, result any) (jsonrpc2.ID, error) {
	id := jsonrpc2.ID{Num: c.nextID.Add(1) - 1}
	err := c.RPC.Call(ctx, method, params, result, jsonrpc2.PickID(id))
	if closed(err) {
		return id, c.exited(ctx, "before answering "+method)
	}
	if err != nil {
		return id, fmt.Errorf("%s: %w", method, err)
	}
	return id, nil
}

// DispatchID sends a request and returns once it is written, before its
// answer: wait waits for the answer into result, with CallID's errors. A
// caller that must order a later frame after the request (a cancel after
// its prompt) sends that frame after DispatchID returns.
func (c *Conn) DispatchID(ctx context.Context, method string, params any) (id jsonrpc2.ID, wait func(ctx context.Context, result any) error, err error) {
	id = jsonrpc2.ID{Num: c.nextID.Add(1) - 1}
	w, err := c.RPC.DispatchCall(ctx, method, params, jsonrpc2.PickID(id))
	answer := func(err error) error {
		if closed(err) {
			return c.exited(ctx, "before answering "+method)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", method, err)
		}
		return nil
	}
	if err != nil {
		return id, nil, answer(err)
	}
	return id, func(ctx context.Context, result any) error { return answer(w.Wait(ctx, result)) }, nil
}

// Notify sends a notification. A connection that closed before it was
// sent is reported as CallID reports it: "codex exited with status 1
// before it was sent initialized: …".
func (c *Conn) Notify(ctx context.Context, method string, params any) error {
	err := c.RPC.Notify(ctx, method, params)
	if closed(err) {
		return c.exited(ctx, "before it was sent "+method)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", method, err)
	}
	return nil
}

// closed says whether a call's error is the connection's end: ended, or
// the provider gone before the write.
func closed(err error) bool {
	return errors.Is(err, jsonrpc2.ErrClosed) || errors.Is(err, sdk.ErrProviderExited)
}

// exited is the error for a call or notification that failed because the
// connection closed: the provider's exit (when says when), once it has
// exited and its output has been read to the end (a write can fail on the
// exit before the read loop has reached the lines before it), or that it
// closed its output, if it has not exited within exitReportWait (or ctx).
func (c *Conn) exited(ctx context.Context, when string) error {
	t := c.clock.NewTimer(exitReportWait)
	defer t.Stop()
	// done wins over the timer and ctx when both are ready: a session
	// ends its context as its provider exits, so an exit that has come is
	// reported, whichever select case Go would pick.
	wait := func(done <-chan struct{}) bool {
		select {
		case <-done:
			return true
		default:
		}
		select {
		case <-done:
			return true
		case <-t.C():
		case <-ctx.Done():
		}
		select {
		case <-done:
			return true
		default:
			return false
		}
	}
	if !wait(c.Proc.Done()) {
		return sdk.Kindf(sdk.ErrProviderExited, "%s closed its output %s", c.name, when)
	}
	// An exit is reported even if the read does not end in time.
	wait(c.RPC.DisconnectNotify())
	return c.lines.Exit(when)
}

// Wait waits for the provider to exit and for every frame it wrote before
// that to be read and handled, then closes the connection. Call it before
// reporting the exit, so that no frame is lost or handled after it.
//
// A provider that closes its stdout but lives on can no longer be talked
// to: after a grace period it is stopped (its whole group). Something that
// keeps the pipes open after the provider exited (a grandchild) does not
// hold Wait either: lineproc ends stdout at most DrainTimeout after the
// exit, which ends the read loop, and the exit closed stdin (os/exec does),
// which ends a reply blocked on a pipe nothing reads.
func (c *Conn) Wait() {
	select {
	case <-c.Proc.Done():
	case <-c.RPC.DisconnectNotify():
		c.lines.Wait() // stdout ended: a provider that lives on is stopped
	}
	<-c.RPC.DisconnectNotify()
	c.RPC.Close()
}

// ExitEvent is the runtime_exited event for the provider's exit (after
// Wait): closed says the session was closed by the host; an exit with an
// error carries the exit report. It closes the raw-frame log: the exit is
// a session's last event.
func (c *Conn) ExitEvent(threadRef string, closed bool) sdk.RuntimeEvent {
	return c.lines.ExitEvent(threadRef, closed)
}

// MalformedDiagnostic is a Config.OnMalformed that reports each line that
// is not a JSON-RPC message as a diagnostic naming its raw frame.
func MalformedDiagnostic(emit sdk.Emitter) func(uint64, error) {
	return func(frame uint64, err error) {
		emit.Emit(sdk.RuntimeEvent{Kind: sdk.EventDiagnostic, RawFrame: frame, Title: "malformed frame", Text: err.Error()})
	}
}

// ExitReport says how the provider exited, when (if given) and why, as
// lineproc.Process.ExitReport does.
func (c *Conn) ExitReport(when string) string { return c.lines.ExitReport(when) }

// Exit is the provider's exit as an error, as lineproc.Process.Exit makes
// it. Call it once the process exited.
func (c *Conn) Exit(when string) *sdk.ProviderExit { return c.lines.Exit(when) }

// Failed is the error for a step that failed with err while the provider
// ran: its exit, if it is on its way out, as lineproc.Process.Failed says.
func (c *Conn) Failed(err error, when string) error { return c.lines.Failed(err, when) }

// stream is the jsonrpc2 object stream over the provider's stdio: NDJSON
// lines, each recorded in the raw-frame log.
//
// A notification (most of what a provider sends while it works: every
// chunk of an answer) is decoded here in one pass and handed to the handler
// as jsonrpc2 would hand it, in order, on the same read loop; jsonrpc2
// decodes a message into a generic map and encodes its params again, which
// made it most of a plugin's work. Requests and responses go to jsonrpc2.
type stream struct {
	c           *Conn
	onMalformed func(uint64, error)
	ctx         context.Context
	handler     jsonrpc2.Handler
	onRecv      func(*jsonrpc2.Request, *jsonrpc2.Response)
	ready       chan struct{} // closed once c.RPC is set
}

func (st *stream) WriteObject(obj any) error {
	b, err := json.Marshal(obj)
	if err != nil {
		return err
	}
	return st.c.lines.Write(b)
}

func (st *stream) ReadObject(v any) error {
	<-st.ready
	for {
		b, idx, err := st.c.lines.Next()
		if err != nil {
			return err
		}
		if n, ok := decodeNotification(b); ok {
			st.c.frame.Store(idx)
			if st.onRecv != nil {
				st.onRecv(n, nil)
			}
			st.handler.Handle(st.ctx, st.c.RPC, n)
			continue
		}
		if err := DecodeFrame(b, v); err != nil {
			st.c.lines.NotFrame(b) // for the exit report
			if st.onMalformed != nil {
				st.onMalformed(idx, err)
			}
			continue
		}
		st.c.frame.Store(idx)
		return nil
	}
}

func (st *stream) Close() error { return st.c.lines.CloseStdin() }

// decodeNotification reads a line that is a JSON-RPC notification (a
// method, no id, no result or error) as jsonrpc2 would, but in one pass
// and with its params as they came; ok is false for anything else, which
// jsonrpc2 then reads. Members are matched by their exact names, as
// jsonrpc2 matches them.
func decodeNotification(line []byte) (*jsonrpc2.Request, bool) {
	// One pass of a decoder several times faster than encoding/json's (it
	// does not scan the line before decoding it), into the members that
	// matter; a member absent stays nil, a null one is "null".
	var m struct {
		Method json.RawMessage `json:"method"`
		ID     json.RawMessage `json:"id"`
		Error  json.RawMessage `json:"error"`
		Result json.RawMessage `json:"result"`
		Params json.RawMessage `json:"params"`
	}
	if rest, err := fastjson.Parse(line, &m, fastjson.DontMatchCaseInsensitiveStructFields); err != nil ||
		len(strings.TrimLeft(string(rest), " \t\r\n")) > 0 {
		return nil, false
	}
	var method string
	if m.Method == nil || string(m.Method) == "null" || fastjson.Unmarshal(m.Method, &method) != nil {
		return nil, false // none, or not a string
	}
	// jsonrpc2 takes a null id for none, a null result for a result, and
	// a null error for none.
	if m.ID != nil && string(m.ID) != "null" {
		return nil, false
	}
	if m.Error != nil && string(m.Error) != "null" {
		return nil, false
	}
	if m.Result != nil {
		return nil, false
	}
	r := &jsonrpc2.Request{Method: method, Notif: true}
	if m.Params != nil {
		p := json.RawMessage(m.Params)
		r.Params = &p
	}
	return r, true
}

// DecodeFrame decodes one line from a provider into v (jsonrpc2's message),
// with an error that says what is wrong with the line. A "jsonrpc" member
// is not required (codex sends none).
func DecodeFrame(line []byte, v any) error {
	// jsonrpc2's message decodes itself, checking the syntax as it does:
	// json.Unmarshal would scan the line once more first.
	var err error
	if u, ok := v.(json.Unmarshaler); ok {
		err = u.UnmarshalJSON(line)
	} else {
		err = json.Unmarshal(line, v)
	}
	if err != nil {
		if se := (*json.SyntaxError)(nil); errors.As(err, &se) {
			return fmt.Errorf("not JSON: %.120q", line)
		}
		return fmt.Errorf("not a JSON-RPC message (%v): %.120q", err, line)
	}
	return nil
}
