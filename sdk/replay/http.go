package replay

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/baton-run/baton/sdk/clock"
	"github.com/baton-run/baton/sdk/sse"
	"github.com/baton-run/baton/sdk/transcript"
)

// HTTPConfig is one playback of an HTTP transcript (see the transcript
// package for its frames): the peer is an HTTP server, as the provider is.
type HTTPConfig struct {
	Config
	// Listen is the address to listen on ("127.0.0.1:0": a free port).
	Listen string
}

// maxStreamEvents bounds the events queued on one stream for a client that
// does not read them.
const maxStreamEvents = 1 << 16

// streamDrain bounds how long the playback's end waits for its event
// streams to send the events queued on them.
const streamDrain = 10 * time.Second

// httpRequest is a request from the client waiting for its answer.
type httpRequest struct {
	frame  json.RawMessage
	answer chan httpAnswer // buffered: the peer never waits on a handler
	phase  int64           // the peer's phase when it arrived (see peer.phase)
}

type httpAnswer struct {
	status int
	body   []byte
	ctype  string
	stream *eventStream
}

// eventStream is an open text/event-stream response.
type eventStream struct {
	events chan []byte // encoded events, closed when the peer ends
}

// httpPeer is the state of one HTTP playback.
type httpPeer struct {
	cfg     HTTPConfig
	m       *transcript.Matcher
	signal  context.Context // ends at SIGTERM or SIGINT (Main's ctx)
	arrived chan *httpRequest
	ended   chan struct{} // closed when the playback ends

	// phase counts the runs of expectations taken and the waits ended
	// (see peer.phase).
	phase atomic.Int64

	// the playback loop's own
	matched []matchedRequest // matched, not yet answered, in the transcript's order
	streams []*eventStream
	held    *httpRequest // taken from arrived to look at its stamp, first in line
}

type matchedRequest struct {
	label string
	req   *httpRequest
}

// ServeHTTP plays an HTTP transcript: it listens on cfg.Listen, checks
// each request against the expect_outbound entries at the cursor (the
// requests of consecutive expect_outbound entries may come in any order:
// each is matched by content), and sends responses, event stream events
// and stdout lines when their entries come. A request that arrives before
// the emit_inbound entries before its expectation were played came too
// early. cfg.In is the client's end of the peer's stdin: it closing (or ctx
// ending) is the client going away. A mismatch or an unexpected request is
// answered with status 500 and the explanation, and ends the playback with
// that error.
func ServeHTTP(ctx context.Context, cfg HTTPConfig) error {
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return &Error{Code: ExitBadUsage, Msg: fmt.Sprintf("listen: %v", err)}
	}
	p := &httpPeer{cfg: cfg, m: transcript.NewMatcher(cfg.Workspace), signal: ctx, arrived: make(chan *httpRequest, 1024),
		ended: make(chan struct{})}
	srv := &http.Server{Handler: http.HandlerFunc(p.handle), ReadHeaderTimeout: 10 * time.Second}
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = srv.Serve(ln)
	}()
	// The client going away: stdin reaching its end, or ctx (SIGTERM).
	gone := make(chan struct{})
	go func() {
		if cfg.In != nil {
			_, _ = io.Copy(io.Discard, cfg.In)
		}
		close(gone)
	}()
	goneCtx, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		select {
		case <-gone:
			stop()
		case <-goneCtx.Done():
		}
	}()

	err = p.play(goneCtx, "http://"+ln.Addr().String())
	close(p.ended)
	for _, s := range p.streams {
		close(s.events)
	}
	// The events played before the end reach the client before the
	// process ends (a flood of them too), as they did when recorded; a
	// client that stopped reading holds the end no longer than this.
	sctx, cancel := context.WithTimeout(context.Background(), streamDrain)
	defer cancel()
	_ = srv.Shutdown(sctx)
	_ = srv.Close()
	<-served
	return err
}

// handle queues a request for the playback and writes its answer.
func (p *httpPeer) handle(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 64<<20))
	if err != nil {
		http.Error(w, "replay peer: read body: "+err.Error(), http.StatusBadRequest)
		return
	}
	req := &httpRequest{frame: transcript.RequestFrame(r, body), answer: make(chan httpAnswer, 1), phase: p.phase.Load()}
	select {
	case p.arrived <- req:
	case <-p.ended:
		http.Error(w, "replay peer: the playback has ended", http.StatusServiceUnavailable)
		return
	}
	var a httpAnswer
	select {
	case a = <-req.answer:
	case <-p.ended:
		select {
		case a = <-req.answer:
		default:
			http.Error(w, "replay peer: the playback ended before this request was answered", http.StatusServiceUnavailable)
			return
		}
	case <-r.Context().Done():
		return
	}
	if a.stream != nil {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Cache-Control", "no-cache")
		w.WriteHeader(a.status)
		fl, _ := w.(http.Flusher)
		if fl != nil {
			fl.Flush()
		}
		for {
			select {
			case ev, ok := <-a.stream.events:
				if !ok {
					return
				}
				if _, err := w.Write(ev); err != nil {
					return
				}
				if fl != nil {
					fl.Flush()
				}
			case <-r.Context().Done():
				return
			}
		}
	}
	if a.ctype != "" {
		w.Header().Set("Content-Type", a.ctype)
	}
	w.WriteHeader(a.status)
	_, _ = w.Write(a.body)
}

// play walks the transcript; addr is the peer's own URL.
func (p *httpPeer) play(ctx context.Context, addr string) error {
	t := p.cfg.Transcript
	start, err := p.cfg.start()
	if err != nil {
		return err
	}
	for i := start; i < len(t.Entries); i++ {
		e := t.Entries[i]
		switch e.Type {
		case transcript.TypeEmitInbound:
			// The first of a run of entries played together waits its
			// afterMs, and a request there by then came too early.
			if i == start || t.Entries[i-1].Type != transcript.TypeEmitInbound || Delay(e.AfterMs, p.cfg.Speed) > 0 {
				if err := p.pace(ctx, i, e); err != nil {
					return err
				}
			}
			// The cursor moves first: what the client has seen is behind it.
			if err := p.cfg.save(i + 1); err != nil {
				return err
			}
			if err := p.emit(i, e, addr); err != nil {
				return err
			}
		case transcript.TypeExpectOutbound:
			j := i + 1
			for j < len(t.Entries) && t.Entries[j].Type == transcript.TypeExpectOutbound {
				j++
			}
			if err := p.expect(ctx, i, j); err != nil {
				return err
			}
			i = j - 1
		case transcript.TypeWorkspace:
			if err := apply(p.cfg.Workspace, e); err != nil {
				return &Error{Code: ExitIO, Msg: fmt.Sprintf("%s: %v", e.Name(i), err)}
			}
			if err := p.cfg.save(i + 1); err != nil {
				return err
			}
		case transcript.TypeRuntimeExit:
			if e.Partial != "" {
				if _, err := io.WriteString(p.cfg.Out, e.Partial); err != nil {
					return &Error{Code: ExitIO, Msg: fmt.Sprintf("%s: write stdout: %v", e.Name(i), err)}
				}
			}
			if err := p.cfg.ending(i, e); err != nil {
				return err
			}
			switch e.ExitWait() {
			case transcript.WaitStdinClose:
				if err := p.drain(ctx, i); err != nil {
					return err
				}
				p.cfg.tracef("%s: stdin closed", e.Name(i))
			case transcript.WaitSignal:
				// The server runs until it is stopped; its client's stdin
				// ending does not stop it.
				select {
				case <-p.signal.Done():
				case <-ctx.Done():
					if p.signal.Err() == nil {
						p.cfg.tracef("%s: stdin closed, waiting for a signal", e.Name(i))
					}
					<-p.signal.Done()
				}
				if p.signal.Err() != nil {
					p.cfg.tracef("%s: stopped by a signal", e.Name(i))
				}
			case transcript.WaitKill:
				// The server will not stop: requests wait unanswered, and
				// neither its client's stdin ending nor SIGTERM ends it.
				if err := p.cfg.save(i + 1); err != nil { // its end is SIGKILL: see Run
					return err
				}
				p.cfg.waitKilled(i, e, nil, p.signal.Done())
			}
			if err := p.cfg.save(i + 1); err != nil {
				return err
			}
			return exitResult(e, i)
		}
	}
	// Every entry saved the cursor past itself as it was played.
	return p.drain(ctx, len(t.Entries)-1)
}

// pace waits the time before emit_inbound entry i, the first of a run
// played together. A request that arrives meanwhile came too early, as did
// one that arrived before the peer's current phase.
func (p *httpPeer) pace(ctx context.Context, i int, e transcript.Entry) error {
	if d := Delay(e.AfterMs, p.cfg.Speed); d > 0 {
		if p.held != nil {
			return p.early(i, p.held)
		}
		tm := clock.Or(p.cfg.Clock).NewTimer(d)
		defer tm.Stop()
		select {
		case <-tm.C():
		case req := <-p.arrived:
			return p.early(i, req)
		case <-ctx.Done():
			return p.leftover(i, nil)
		}
		p.phase.Add(1)
	}
	if p.held == nil {
		select {
		case req := <-p.arrived:
			p.held = req
		default:
		}
	}
	if p.held != nil && p.held.phase < p.phase.Load() {
		return p.early(i, p.held)
	}
	return nil
}

// take is the next request: the one held, or the next to arrive; nil when
// ctx ends first.
func (p *httpPeer) take(ctx context.Context) *httpRequest {
	if req := p.held; req != nil {
		p.held = nil
		return req
	}
	select {
	case req := <-p.arrived:
		return req
	case <-ctx.Done():
		return nil
	}
}

// early answers and reports a request that arrived before emit_inbound
// entry i was played.
func (p *httpPeer) early(i int, req *httpRequest) error {
	t := p.cfg.Transcript
	e := t.Entries[i]
	k := nextExpectation(t, i)
	if k < 0 {
		return p.fail(req, &Error{Code: ExitUnexpected, Msg: fmt.Sprintf("unexpected request before %s was played, when the transcript expects none before its end or its next runtime_exit: %s",
			e.Name(i), req.frame)})
	}
	// Name the expectation it is for: the first of the next run it matches.
	for j := k; j < len(t.Entries) && t.Entries[j].Type == transcript.TypeExpectOutbound; j++ {
		if transcript.NewMatcher(p.cfg.Workspace).Match(t.Entries[j].Frame, req.frame) == nil {
			k = j
			break
		}
	}
	return p.fail(req, &Error{Code: ExitMismatch, Msg: fmt.Sprintf("mismatch at %s: sent too early: the request arrived before %s was played, which the transcript has before it\n  expected: %s\n  actual:   %s",
		t.Entries[k].Name(k), e.Name(i), t.Entries[k].Frame, req.frame)})
}

// fail answers req with err's explanation (status 500) and returns err.
func (p *httpPeer) fail(req *httpRequest, err *Error) error {
	req.answer <- httpAnswer{status: http.StatusInternalServerError, body: []byte("replay peer: " + err.Msg + "\n"), ctype: "text/plain; charset=utf-8"}
	return err
}

// leftover is the error for a client that went away with entry i the
// first unused, or, for a run of expectations, those in pending.
func (p *httpPeer) leftover(i int, pending []int) error {
	t := p.cfg.Transcript
	e := t.Entries[i]
	msg := fmt.Sprintf("the client went away with %d entries unused; the first unused is %s", len(t.Entries)-i, e.Name(i))
	if len(e.Frame) > 0 {
		msg += ": " + string(e.Frame)
	}
	if len(pending) > 1 {
		msg += fmt.Sprintf(" (and %d more expected with it)", len(pending)-1)
	}
	if n := len(p.matched); n > 0 {
		msg += fmt.Sprintf(" (%d matched requests unanswered, the oldest %q)", n, p.matched[0].label)
	}
	return &Error{Code: ExitLeftover, Msg: msg}
}

// expect takes the requests of expect_outbound entries i to j-1, a run the
// client may send at once: each request is matched by content against the
// entries not matched yet, first to last, and takes the first it matches.
// An invocation entry is checked against the peer's arguments.
func (p *httpPeer) expect(ctx context.Context, i, j int) error {
	t := p.cfg.Transcript
	var pending []int
	for k := i; k < j; k++ {
		e := t.Entries[k]
		var probe struct {
			Argv json.RawMessage `json:"argv"`
		}
		_ = json.Unmarshal(e.Frame, &probe)
		if probe.Argv == nil {
			pending = append(pending, k)
			continue
		}
		if p.cfg.Invocation == nil {
			return &Error{Code: ExitMismatch, Msg: fmt.Sprintf("mismatch at %s: the transcript expects the arguments %s, and the peer was given none (after \"--\")",
				e.Name(k), probe.Argv)}
		}
		if err := p.m.Match(e.Frame, transcript.InvocationFrame(p.cfg.Invocation)); err != nil {
			return &Error{Code: ExitMismatch, Msg: fmt.Sprintf("mismatch at %s: %v", e.Name(k), err)}
		}
	}
	if err := p.cfg.save(first(pending, j)); err != nil {
		return err
	}
	got := map[int]*httpRequest{}
	for len(pending) > 0 {
		req := p.take(ctx)
		if req == nil {
			return p.leftover(pending[0], pending)
		}
		var firstErr error
		taken := -1
		for n, k := range pending {
			err := p.m.Match(t.Entries[k].Frame, req.frame)
			if err == nil {
				taken = n
				break
			}
			if firstErr == nil {
				firstErr = err
			}
		}
		if taken < 0 {
			k := pending[0]
			msg := fmt.Sprintf("mismatch at %s: %v", t.Entries[k].Name(k), firstErr)
			if len(pending) > 1 {
				msg = fmt.Sprintf("mismatch at %s: the request matches none of the %d expected now (entries %s); against the first, %v",
					t.Entries[k].Name(k), len(pending), entryNumbers(pending), firstErr)
			}
			return p.fail(req, &Error{Code: ExitMismatch, Msg: msg})
		}
		k := pending[taken]
		got[k] = req
		pending = append(pending[:taken], pending[taken+1:]...)
		p.cfg.tracef("%s: matched", t.Entries[k].Name(k))
		if err := p.cfg.save(first(pending, j)); err != nil {
			return err
		}
	}
	p.phase.Add(1)
	// Responses answer them in the transcript's order.
	for k := i; k < j; k++ {
		if req, ok := got[k]; ok {
			label := t.Entries[k].Label
			if label == "" {
				label = fmt.Sprintf("line %d", t.Entries[k].Line)
			}
			p.matched = append(p.matched, matchedRequest{label: label, req: req})
		}
	}
	return nil
}

// first is the first of pending, or else end.
func first(pending []int, end int) int {
	if len(pending) > 0 {
		return pending[0]
	}
	return end
}

// entryNumbers names entries by number, from 1: "3, 4".
func entryNumbers(idx []int) string {
	s := make([]string, len(idx))
	for n, k := range idx {
		s[n] = fmt.Sprint(k + 1)
	}
	return strings.Join(s, ", ")
}

// emit plays an emit_inbound entry: a response, an event or a stdout line.
func (p *httpPeer) emit(i int, e transcript.Entry, addr string) error {
	for k := 1; k <= e.Copies(); k++ {
		if err := p.emitCopy(i, e, k, addr); err != nil {
			return err
		}
	}
	return nil
}

// emitCopy plays copy k of emit_inbound entry i (see Entry.Repeat).
func (p *httpPeer) emitCopy(i int, e transcript.Entry, k int, addr string) error {
	if e.Raw != "" {
		return p.event(i, e, sse.Event{Data: e.Copy([]byte(e.Raw), k)})
	}
	raw, err := p.m.Rewrite(e.Frame)
	if err != nil {
		return &Error{Code: ExitBadUsage, Msg: fmt.Sprintf("%s: %v", e.Name(i), err)}
	}
	f, err := transcript.DecodeHTTPFrame(e.Copy(raw, k))
	if err != nil {
		return &Error{Code: ExitBadUsage, Msg: fmt.Sprintf("%s: %v", e.Name(i), err)}
	}
	switch f.Kind() {
	case transcript.HTTPResponse:
		return p.respond(i, e, f)
	case "sse":
		return p.event(i, e, sse.Event{Data: f.SSE, Event: f.Event, ID: f.ID})
	case "stdout":
		line := strings.ReplaceAll(*f.Stdout, transcript.Listen, addr)
		if _, err := io.WriteString(p.cfg.Out, line+"\n"); err != nil {
			return &Error{Code: ExitIO, Msg: fmt.Sprintf("%s: write stdout: %v", e.Name(i), err)}
		}
	default:
		return &Error{Code: ExitBadUsage, Msg: fmt.Sprintf("%s: an HTTP transcript's emit_inbound frame must be a response, an sse event or a stdout line: %s", e.Name(i), e.Frame)}
	}
	return nil
}

// event sends an event on the newest event stream: emit_inbound entry i's.
func (p *httpPeer) event(i int, e transcript.Entry, ev sse.Event) error {
	if len(p.streams) == 0 {
		return &Error{Code: ExitBadUsage, Msg: fmt.Sprintf("%s: an event, but no response has opened an event stream", e.Name(i))}
	}
	var buf bytes.Buffer
	if err := sse.NewEncoder(&buf).Encode(ev); err != nil {
		return &Error{Code: ExitBadUsage, Msg: fmt.Sprintf("%s: %v", e.Name(i), err)}
	}
	s := p.streams[len(p.streams)-1]
	select {
	case s.events <- buf.Bytes():
	default:
		return &Error{Code: ExitIO, Msg: fmt.Sprintf("%s: the client reads no events (%d queued)", e.Name(i), maxStreamEvents)}
	}
	return nil
}

// respond answers a matched request with a response entry.
func (p *httpPeer) respond(i int, e transcript.Entry, f transcript.HTTPFrame) error {
	k := 0
	if f.Request != "" {
		k = -1
		for j, m := range p.matched {
			if m.label == f.Request {
				k = j
				break
			}
		}
		if k < 0 {
			return &Error{Code: ExitBadUsage, Msg: fmt.Sprintf("%s: answers request %q, which is not waiting for an answer", e.Name(i), f.Request)}
		}
	} else if len(p.matched) == 0 {
		return &Error{Code: ExitBadUsage, Msg: fmt.Sprintf("%s: a response, but no request is waiting for one", e.Name(i))}
	}
	m := p.matched[k]
	p.matched = append(p.matched[:k], p.matched[k+1:]...)
	status := f.Status
	if status == 0 {
		status = http.StatusOK
	}
	a := httpAnswer{status: status}
	switch {
	case f.Stream:
		a.stream = &eventStream{events: make(chan []byte, maxStreamEvents)}
		p.streams = append(p.streams, a.stream)
	case len(f.Body) > 0 && f.ContentType != "":
		// A body that is not JSON is recorded as a string.
		var s string
		if json.Unmarshal(f.Body, &s) != nil {
			return &Error{Code: ExitBadUsage, Msg: fmt.Sprintf("%s: a %s body must be a JSON string", e.Name(i), f.ContentType)}
		}
		a.body, a.ctype = []byte(s), f.ContentType
	case len(f.Body) > 0:
		a.body, a.ctype = f.Body, "application/json"
	}
	m.req.answer <- a
	return nil
}

// drain waits for the client to go away; any request is unexpected.
func (p *httpPeer) drain(ctx context.Context, last int) error {
	req := p.take(ctx)
	if req == nil {
		return nil
	}
	return p.fail(req, unexpected(p.cfg.Transcript, last, "request", req.frame))
}
