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
	"time"

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

// httpRequest is a request from the client waiting for its answer.
type httpRequest struct {
	frame  json.RawMessage
	answer chan httpAnswer // buffered: the peer never waits on a handler
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

	// the playback loop's own
	matched []matchedRequest // matched, not yet answered, oldest first
	streams []*eventStream
}

type matchedRequest struct {
	label string
	req   *httpRequest
}

// ServeHTTP plays an HTTP transcript: it listens on cfg.Listen, checks
// each request against the expect_outbound entry at the cursor (requests
// that come early wait, in order of arrival), and sends responses, event
// stream events and stdout lines when their entries come. cfg.In is the
// client's end of the peer's stdin: it closing (or ctx ending) is the
// client going away. A mismatch or an unexpected request is answered with
// status 500 and the explanation, and ends the playback with that error.
func ServeHTTP(ctx context.Context, cfg HTTPConfig) error {
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return &Error{ExitBadUsage, fmt.Sprintf("listen: %v", err)}
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
	sctx, cancel := context.WithTimeout(context.Background(), time.Second)
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
	req := &httpRequest{frame: transcript.RequestFrame(r, body), answer: make(chan httpAnswer, 1)}
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
			if !p.cfg.wait(ctx, e) {
				return p.leftover(i)
			}
			if err := p.emit(i, e, addr); err != nil {
				return err
			}
		case transcript.TypeExpectOutbound:
			if err := p.expect(ctx, i, e); err != nil {
				return err
			}
		case transcript.TypeWorkspace:
			if err := apply(p.cfg.Workspace, e); err != nil {
				return &Error{ExitIO, fmt.Sprintf("%s: %v", e.Name(i), err)}
			}
		case transcript.TypeRuntimeExit:
			switch e.ExitWait() {
			case transcript.WaitStdinClose:
				if err := p.drain(ctx, i); err != nil {
					return err
				}
			case transcript.WaitSignal:
				// The server runs until it is stopped; its client's stdin
				// ending does not stop it.
				<-p.signal.Done()
			}
			if err := p.cfg.save(i + 1); err != nil {
				return err
			}
			return exitResult(e, i)
		}
	}
	if err := p.drain(ctx, len(t.Entries)-1); err != nil {
		return err
	}
	return p.cfg.save(len(t.Entries))
}

// leftover is the error for a client that went away at entry i.
func (p *httpPeer) leftover(i int) error {
	t := p.cfg.Transcript
	e := t.Entries[i]
	msg := fmt.Sprintf("the client went away with %d entries unused; the first unused is %s", len(t.Entries)-i, e.Name(i))
	if len(e.Frame) > 0 {
		msg += ": " + string(e.Frame)
	}
	if n := len(p.matched); n > 0 {
		msg += fmt.Sprintf(" (%d matched requests unanswered, the oldest %q)", n, p.matched[0].label)
	}
	return &Error{ExitLeftover, msg}
}

// expect takes the next request (or checks the invocation) against entry i.
func (p *httpPeer) expect(ctx context.Context, i int, e transcript.Entry) error {
	var probe struct {
		Argv json.RawMessage `json:"argv"`
	}
	_ = json.Unmarshal(e.Frame, &probe)
	if probe.Argv != nil {
		if p.cfg.Invocation == nil {
			return &Error{ExitMismatch, fmt.Sprintf("mismatch at %s: the transcript expects the arguments %s, and the peer was given none (after \"--\")",
				e.Name(i), probe.Argv)}
		}
		if err := p.m.Match(e.Frame, transcript.InvocationFrame(p.cfg.Invocation)); err != nil {
			return &Error{ExitMismatch, fmt.Sprintf("mismatch at %s: %v", e.Name(i), err)}
		}
		return nil
	}
	var req *httpRequest
	select {
	case req = <-p.arrived:
	case <-ctx.Done():
		return p.leftover(i)
	}
	if err := p.m.Match(e.Frame, req.frame); err != nil {
		msg := fmt.Sprintf("mismatch at %s: %v", e.Name(i), err)
		req.answer <- httpAnswer{status: http.StatusInternalServerError, body: []byte("replay peer: " + msg + "\n"), ctype: "text/plain; charset=utf-8"}
		return &Error{ExitMismatch, msg}
	}
	label := e.Label
	if label == "" {
		label = fmt.Sprintf("line %d", e.Line)
	}
	p.matched = append(p.matched, matchedRequest{label: label, req: req})
	return nil
}

// emit plays an emit_inbound entry: a response, an event or a stdout line.
func (p *httpPeer) emit(i int, e transcript.Entry, addr string) error {
	raw, err := p.m.Rewrite(e.Frame)
	if err != nil {
		return &Error{ExitBadUsage, fmt.Sprintf("%s: %v", e.Name(i), err)}
	}
	f, err := transcript.DecodeHTTPFrame(raw)
	if err != nil {
		return &Error{ExitBadUsage, fmt.Sprintf("%s: %v", e.Name(i), err)}
	}
	switch f.Kind() {
	case transcript.HTTPResponse:
		return p.respond(i, e, f)
	case "sse":
		if len(p.streams) == 0 {
			return &Error{ExitBadUsage, fmt.Sprintf("%s: an event, but no response has opened an event stream", e.Name(i))}
		}
		var buf bytes.Buffer
		if err := sse.NewEncoder(&buf).Encode(sse.Event{Data: f.SSE, Event: f.Event, ID: f.ID}); err != nil {
			return &Error{ExitBadUsage, fmt.Sprintf("%s: %v", e.Name(i), err)}
		}
		s := p.streams[len(p.streams)-1]
		select {
		case s.events <- buf.Bytes():
		default:
			return &Error{ExitIO, fmt.Sprintf("%s: the client reads no events (%d queued)", e.Name(i), maxStreamEvents)}
		}
	case "stdout":
		line := strings.ReplaceAll(*f.Stdout, transcript.Listen, addr)
		if _, err := io.WriteString(p.cfg.Out, line+"\n"); err != nil {
			return &Error{ExitIO, fmt.Sprintf("%s: write stdout: %v", e.Name(i), err)}
		}
	default:
		return &Error{ExitBadUsage, fmt.Sprintf("%s: an HTTP transcript's emit_inbound frame must be a response, an sse event or a stdout line: %s", e.Name(i), e.Frame)}
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
			return &Error{ExitBadUsage, fmt.Sprintf("%s: answers request %q, which is not waiting for an answer", e.Name(i), f.Request)}
		}
	} else if len(p.matched) == 0 {
		return &Error{ExitBadUsage, fmt.Sprintf("%s: a response, but no request is waiting for one", e.Name(i))}
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
			return &Error{ExitBadUsage, fmt.Sprintf("%s: a %s body must be a JSON string", e.Name(i), f.ContentType)}
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
	select {
	case <-ctx.Done():
		return nil
	case req := <-p.arrived:
		after := "the start"
		if last >= 0 {
			after = p.cfg.Transcript.Entries[last].Name(last)
		}
		msg := fmt.Sprintf("unexpected request after the transcript's last expectation (%s): %s", after, req.frame)
		req.answer <- httpAnswer{status: http.StatusInternalServerError, body: []byte("replay peer: " + msg + "\n"), ctype: "text/plain; charset=utf-8"}
		return &Error{ExitUnexpected, msg}
	}
}
