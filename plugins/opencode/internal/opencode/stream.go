package opencode

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sync"
	"syscall"
	"time"

	"github.com/baton-run/baton/sdk"
	"github.com/baton-run/baton/sdk/framelog"
	"github.com/baton-run/baton/sdk/sse"
)

// streamEndGrace is how long an event stream that ended waits for the
// server's exit before it takes the server for stuck and stops it.
const streamEndGrace = 2 * time.Second

// openEvents opens the /event stream and waits for its first event
// (server.connected): from then on, every event of the server reaches the
// session, in order, on one reader.
func (s *session) openEvents(ctx context.Context) error {
	streamCtx, cancel := context.WithCancel(context.Background())
	s.mu.Lock()
	s.endStream = cancel
	s.mu.Unlock()
	req, err := http.NewRequestWithContext(streamCtx, http.MethodGet, s.base+"/event", nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "text/event-stream")
	s.proc.Frames.Append(framelog.Out, requestFrame(http.MethodGet, "/event", nil))
	resp, err := s.client.Do(req)
	if err != nil {
		return fmt.Errorf("GET /event: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		resp.Body.Close()
		return &httpError{method: http.MethodGet, path: "/event", status: resp.StatusCode, body: string(bytes.TrimSpace(b))}
	}
	first := make(chan struct{})
	s.streaming.Store(true)
	go s.readEvents(resp.Body, first)
	select {
	case <-first:
		return nil
	case <-s.events:
		return errors.New("the event stream ended before its first event")
	case <-ctx.Done():
		return fmt.Errorf("no event on the event stream: %w", ctx.Err())
	}
}

// readEvents reads the event stream until it ends, normalizing each event.
func (s *session) readEvents(body io.ReadCloser, first chan<- struct{}) {
	defer close(s.events)
	defer body.Close()
	d := sse.NewDecoder(body)
	once := sync.OnceFunc(func() { close(first) })
	for {
		ev, err := d.Next()
		if errors.Is(err, sse.ErrLineTooLong) {
			// Dropped whole; the events after it still come.
			s.emit.Emit(sdk.RuntimeEvent{Kind: sdk.EventDiagnostic, Title: "malformed event", Text: err.Error()})
			continue
		}
		if err != nil {
			s.streamEnded(err)
			return
		}
		frame := s.proc.Frames.Append(framelog.In, ev.Data)
		once()
		s.handle(ev.Data, frame)
	}
}

// streamEnded handles the end of the event stream. It ends with the server
// (or the session); a stream that ends while the server goes on would leave
// turns without their end, so the server is stopped, and its exit ends
// them as failed.
func (s *session) streamEnded(err error) {
	if s.ctx.Err() != nil {
		return
	}
	t := s.clock.NewTimer(streamEndGrace)
	defer t.Stop()
	select {
	case <-s.proc.Done(): // the server ended: watch reports it
		return
	case <-s.ctx.Done():
		return
	case <-t.C():
	}
	if s.life.Closed() {
		return
	}
	s.log.Warn("the event stream ended while opencode runs; stopping it", "error", err)
	s.emit.Emit(sdk.RuntimeEvent{Kind: sdk.EventDiagnostic, Title: "opencode's event stream ended while it runs; stopping it",
		Text: fmt.Sprint(err)})
	_ = s.proc.Signal(syscall.SIGTERM)
}

// pendingRequest is a permission request waiting for the host's answer.
type pendingRequest struct {
	ref, thread, turn, callID string
	kind                      sdk.RequestKind
}

// handle normalizes one event and emits what it says.
func (s *session) handle(data []byte, frame uint64) {
	e, err := decodeEvent(data)
	if err != nil {
		s.emit.Emit(sdk.RuntimeEvent{Kind: sdk.EventDiagnostic, RawFrame: frame, Title: "malformed event", Text: err.Error()})
		return
	}
	var evs []sdk.RuntimeEvent
	s.mu.Lock()
	switch e.Type {
	case "permission.asked":
		var p permissionAsked
		if err := json.Unmarshal(e.Properties, &p); err != nil {
			evs = []sdk.RuntimeEvent{{Kind: sdk.EventDiagnostic, Title: "malformed event", Text: "permission.asked: " + err.Error()}}
			break
		}
		if ev, ok := s.norm.permissionAsked(p, e.Properties); ok {
			q := &pendingRequest{ref: p.ID, thread: ev.ThreadRef, turn: ev.TurnRef, kind: ev.RequestKind}
			if p.Tool != nil {
				q.callID = p.Tool.CallID
			}
			s.pending.Open(p.ID, q)
			evs = []sdk.RuntimeEvent{ev}
		}
	case "permission.replied":
		var p permissionReplied
		if json.Unmarshal(e.Properties, &p) == nil {
			if q, ok := s.pending.Take(p.RequestID); ok {
				// Answered without the host: opencode withdrew it (an
				// abort rejects what is pending).
				if p.Reply == "reject" {
					s.norm.rejectedCall(q.callID)
				}
				evs = []sdk.RuntimeEvent{{Kind: sdk.EventRequestResolved, ThreadRef: q.thread, TurnRef: q.turn, RequestRef: p.RequestID,
					RequestKind: q.kind, Status: sdk.DecisionCancel, Text: "opencode resolved the request itself (" + p.Reply + ")"}}
			}
		}
	default:
		evs = s.norm.event(e)
	}
	abort := s.norm.takeAbort()
	s.mu.Unlock()
	if abort != "" {
		go s.abortLate(abort)
	}
	for _, ev := range evs {
		ev.RawFrame = frame
		s.emit.Emit(ev)
	}
}

// abortLate aborts a session whose turn the client interrupted before it
// started. It runs on its own: the event stream goes on meanwhile.
func (s *session) abortLate(session string) {
	ctx, cancel := context.WithTimeout(s.ctx, callTimeout)
	defer cancel()
	if _, err := s.call(ctx, http.MethodPost, "/session/"+url.PathEscape(session)+"/abort", nil, nil); err != nil && s.ctx.Err() == nil {
		s.log.Warn("abort failed", "session", session, "error", err)
		s.emit.Emit(sdk.RuntimeEvent{Kind: sdk.EventDiagnostic, ThreadRef: session, Title: "opencode was not told to stop the interrupted turn",
			Text: err.Error()})
	}
}
