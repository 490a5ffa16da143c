package service

import (
	"context"
	"errors"
	"iter"
	"sync"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	batonv1 "github.com/baton-run/baton/host/api/baton/v1"
	"github.com/baton-run/baton/host/internal/eventlog"
)

// Subscribe streams events after a sequence, of one thread or of all.
//
// Subscriptions are bounded, of the service and of each thread
// (Options.MaxSubscribers, MaxThreadSubscribers): one more is refused with
// ResourceExhausted, saying which bound. A subscription holds a sequence
// and reads the log from it (orchestrator.ThreadStream), never the
// thread's projection, so what it costs does not follow the thread's size.
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
		if _, err := s.host.ThreadSequence(id); err != nil {
			return s.toStatus("Subscribe", err)
		}
		open = func(ctx context.Context, after uint64) iter.Seq2[eventlog.Record, error] {
			return s.host.ThreadStream(ctx, id, after)
		}
		head = func() uint64 { seq, _ := s.host.ThreadSequence(id); return seq }
	}
	leave, err := s.subs.join(id)
	if err != nil {
		s.log.Warn("subscriber refused", "thread", id, "reason", status.Convert(err).Message())
		return err
	}
	defer leave()
	// The headers go now, not with the first event: a client learns from
	// them that the stream is open (the dashboard shows itself live), also
	// on a thread where nothing happens.
	if err := stream.SendHeader(metadata.MD{}); err != nil {
		return err
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
	// A host whose store failed ends its streams (nothing more is
	// published) before its watcher may have shut the service down: that
	// is the service stopping too.
	shuttingDown := (s.stopping.Err() != nil || s.host.Failure() != nil) && ctx.Err() == nil
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
		s.log.Info("subscriber cut off", "thread", id, "last_sent", last)
		return status.Errorf(codes.ResourceExhausted,
			"subscriber too slow: %d events waited longer than %s; the last event sent was sequence %d: subscribe again with after_sequence %d",
			cap(buf), s.slow, last, last)
	case cause == nil && shuttingDown:
		if s.host.Failure() != nil {
			s.health.Shutdown() // as the watcher will: a client told the service stops finds health saying so
		}
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
		// Said now: the stream ends once the Send in flight is done,
		// which waits for the client to read.
		s.log.Warn("subscriber too slow; ending its stream", "buffer", cap(buf), "waited", s.slow)
		cancel(errSlowSubscriber)
	}
}

// subscribers counts the open subscriptions, of the service and of each
// thread, against their bounds.
type subscribers struct {
	max, perThread int

	mu       sync.Mutex
	open     int
	byThread map[string]int // "" is the whole log's, bounded by max only
}

// join counts a subscription to a thread ("": the whole log), or refuses
// it with ResourceExhausted saying which bound it would pass; leave ends
// it.
func (s *subscribers) join(threadID string) (leave func(), err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.open >= s.max {
		return nil, status.Errorf(codes.ResourceExhausted,
			"too many subscribers: the service takes %d at once (baton serve --max-subscribers), and that many are open; end one, or subscribe again later", s.max)
	}
	if threadID != "" && s.byThread[threadID] >= s.perThread {
		return nil, status.Errorf(codes.ResourceExhausted,
			"too many subscribers to thread %s: it takes %d at once (baton serve --max-thread-subscribers), and that many are open; end one, or subscribe again later", threadID, s.perThread)
	}
	s.open++
	s.byThread[threadID]++
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.open--
		if s.byThread[threadID]--; s.byThread[threadID] == 0 {
			delete(s.byThread, threadID)
		}
	}, nil
}
