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
// When the service shuts down, the stream stops following, sends what was
// committed up to then (the runs a drain ended among it), and ends with
// Unavailable (saying why, when the host's store failed).
//
// The sender is owned by the handler: it stops when its buffer is closed
// and emptied (the handler waits for that), or when the handler's context
// ends (a Send it is blocked in fails once the handler has returned and
// the stream is done).
func (s *Server) Subscribe(req *batonv1.SubscribeRequest, stream grpc.ServerStreamingServer[batonv1.Event]) error {
	ctx, cancel := context.WithCancelCause(stream.Context())
	defer cancel(nil)
	reading, stopReading := context.WithCancel(ctx) // ends at shutdown too
	defer stopReading()
	unhook := context.AfterFunc(s.stopping, stopReading)
	defer unhook()

	after := req.GetAfterSequence()
	id := req.GetThreadId()
	open := func(ctx context.Context, after uint64) iter.Seq2[eventlog.Record, error] {
		return s.host.Events(ctx, after)
	}
	head := s.host.LastSequence
	if id != "" {
		if err := checkID("thread_id", id); err != nil {
			return err
		}
		if _, err := s.host.Thread(id); err != nil {
			return s.toStatus("Subscribe", err)
		}
		open = func(ctx context.Context, after uint64) iter.Seq2[eventlog.Record, error] {
			return s.host.ThreadStream(ctx, id, after)
		}
		head = func() uint64 { _, seq, _ := s.host.Snapshot(id); return seq }
	}

	buf := make(chan *batonv1.Event, s.buffer)
	var sent atomic.Uint64 // the last sequence the sender has sent
	sent.Store(after)
	sender := make(chan struct{})
	go func() {
		defer close(sender)
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
	last := after // the last sequence put in the buffer
	pump := func(events iter.Seq2[eventlog.Record, error], bound uint64) {
		for r, err := range events {
			if err == nil {
				var ev *batonv1.Event
				if ev, err = eventPB(r); err == nil {
					s.enqueue(ctx, cancel, buf, ev)
				}
			}
			if err != nil {
				cancel(s.toStatus("Subscribe", err))
			}
			if ctx.Err() != nil {
				return
			}
			if last = r.Sequence; bound > 0 && last >= bound {
				return
			}
		}
	}
	pump(open(reading, after), 0)
	shuttingDown := s.stopping.Err() != nil && ctx.Err() == nil
	if shuttingDown {
		if bound := head(); last < bound {
			pump(open(ctx, last), bound)
		}
	}
	close(buf)
	slow := errors.Is(context.Cause(ctx), errSlowSubscriber)
	switch {
	case ctx.Err() == nil:
		<-sender // it sends what the buffer holds, then ends
	case slow:
		// A Send it is in may still deliver its event (once the client
		// reads): the status must name the last event the client gets.
		select {
		case <-sender:
		case <-stream.Context().Done():
		}
	} // else a Send it is blocked in fails as this handler returns, and it ends
	switch cause := context.Cause(ctx); {
	case slow:
		last := sent.Load()
		s.log.Warn("subscriber too slow; ended its stream", "last_sent", last, "buffer", cap(buf), "waited", s.slow)
		return status.Errorf(codes.ResourceExhausted,
			"subscriber too slow: %d events waited longer than %s; the last event sent was sequence %d: subscribe again with after_sequence %d",
			cap(buf), s.slow, last, last)
	case cause == nil && shuttingDown:
		return s.shutdownStatus()
	case cause == nil: // the stream ended by itself: the host closed
		return status.Error(codes.Unavailable, "the host closed")
	case stream.Context().Err() != nil:
		return status.FromContextError(stream.Context().Err()).Err()
	default:
		if _, ok := status.FromError(cause); ok {
			return cause
		}
		return status.Error(codeOf(cause), cause.Error()) // the sender's Send failed
	}
}

// errSlowSubscriber ends a subscription whose buffer stayed full for
// SlowSubscriber.
var errSlowSubscriber = errors.New("subscriber too slow")

// enqueue puts an event in the sender's buffer, waiting at most
// SlowSubscriber for room; after that it ends the subscription.
func (s *Server) enqueue(ctx context.Context, cancel context.CancelCauseFunc, buf chan<- *batonv1.Event, ev *batonv1.Event) {
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
		cancel(errSlowSubscriber)
	}
}
