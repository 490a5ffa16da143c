package service

import (
	"context"
	"errors"
	"iter"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	batonv1 "github.com/baton-run/baton/host/api/baton/v1"
	"github.com/baton-run/baton/host/internal/eventlog"
)

// Subscribe streams events after a sequence, of one thread or of all.
//
// A slow subscriber never holds the host up: this handler reads the host's
// stream into a bounded buffer, and a sender goroutine of its own takes
// them out and sends them. When the buffer stays full for SlowSubscriber,
// the stream ends with ResourceExhausted, saying the last sequence sent,
// after which the client subscribes again.
//
// The sender is owned by the handler: it stops when the handler ends (its
// context is cancelled and its buffer closed; a Send it is blocked in
// fails once the stream is done).
func (s *Server) Subscribe(req *batonv1.SubscribeRequest, stream grpc.ServerStreamingServer[batonv1.Event]) error {
	ctx, cancel := context.WithCancelCause(stream.Context())
	defer cancel(nil)
	unhook := context.AfterFunc(s.stopping, func() { cancel(errShuttingDown) })
	defer unhook()

	after := req.GetAfterSequence()
	var events iter.Seq2[eventlog.Record, error]
	if id := req.GetThreadId(); id != "" {
		if err := checkID("thread_id", id); err != nil {
			return err
		}
		if _, err := s.host.Thread(id); err != nil {
			return s.toStatus("Subscribe", err)
		}
		events = s.host.ThreadStream(ctx, id, after)
	} else {
		events = s.host.Events(ctx, after)
	}

	buf := make(chan *batonv1.Event, s.buffer)
	var sent atomic.Uint64 // the last sequence the sender has sent
	sent.Store(after)
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case ev, ok := <-buf:
				if !ok || ctx.Err() != nil {
					return
				}
				if err := stream.Send(ev); err != nil {
					cancel(err)
					return
				}
				sent.Store(ev.GetSequence())
			}
		}
	}()
	defer close(buf)

	for r, err := range events {
		if err == nil {
			var ev *batonv1.Event
			if ev, err = eventPB(r); err == nil {
				s.enqueue(ctx, cancel, buf, ev, &sent)
			}
		}
		if err != nil {
			cancel(s.toStatus("Subscribe", err))
		}
		if ctx.Err() != nil {
			break
		}
	}
	if ctx.Err() == nil { // the stream ended by itself: the host closed
		cancel(nil)
		return status.Error(codes.Unavailable, "the host closed")
	}
	cause := context.Cause(ctx)
	switch {
	case errors.Is(cause, errShuttingDown):
		return status.Error(codes.Unavailable, "service shutting down; subscribe again after the last sequence you received")
	case stream.Context().Err() != nil:
		return status.FromContextError(stream.Context().Err()).Err()
	}
	if _, ok := status.FromError(cause); ok {
		return cause
	}
	return status.Error(codeOf(cause), cause.Error()) // the sender's Send failed
}

var errShuttingDown = errors.New("service shutting down")

// enqueue puts an event in the sender's buffer, waiting at most
// SlowSubscriber for room; after that it ends the subscription.
func (s *Server) enqueue(ctx context.Context, cancel context.CancelCauseFunc, buf chan<- *batonv1.Event, ev *batonv1.Event, sent *atomic.Uint64) {
	select {
	case buf <- ev:
		return
	default:
	}
	t := s.clk.NewTimer(s.slow)
	defer t.Stop()
	select {
	case buf <- ev:
	case <-ctx.Done():
	case <-t.C():
		last := sent.Load()
		s.log.Warn("subscriber too slow; ending its stream", "last_sent", last, "buffer", cap(buf), "waited", s.slow)
		cancel(status.Errorf(codes.ResourceExhausted,
			"subscriber too slow: %d events waited longer than %s; the last event sent was sequence %d: subscribe again with after_sequence %d",
			cap(buf), s.slow, last, last))
	}
}
