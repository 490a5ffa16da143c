package sdk

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/baton-run/baton/sdk/clock"
	pb "github.com/baton-run/baton/sdk/internal/pluginpb"
)

// server adapts an Adapter to the generated gRPC service. Every method does
// the same steps: convert in, call the adapter, convert out, map the error.
type server struct {
	pb.UnimplementedProviderServer
	adapter Adapter
	log     hclog.Logger
	stop    context.Context // cancelled when the plugin shuts down

	mu       sync.Mutex
	sessions map[string]*eventBuffer
}

func newServer(stop context.Context, a Adapter, log hclog.Logger) *server {
	return &server{adapter: a, log: log, stop: stop, sessions: map[string]*eventBuffer{}}
}

func (s *server) session(id string) (*eventBuffer, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.sessions[id]
	if !ok {
		return nil, Errorf(ErrUnknownSession, "session %q", id)
	}
	return b, nil
}

// forget drops a session whose stream has ended and been read to its end.
func (s *server) forget(buf *eventBuffer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sessions[buf.sessionID] == buf {
		delete(s.sessions, buf.sessionID)
	}
}

// closeAll closes every open session, so that no provider process outlives
// the plugin when the host goes away without closing them.
// The adapter's CloseSession calls share a context that ends timeout
// after, on clk.
func (s *server) closeAll(clk clock.Clock, timeout time.Duration) {
	s.mu.Lock()
	ids := make([]string, 0, len(s.sessions))
	for id := range s.sessions {
		ids = append(ids, id)
	}
	s.mu.Unlock()
	ctx, cancel := clock.WithTimeout(context.Background(), clk, timeout,
		fmt.Errorf("closing sessions at shutdown: %w after %v", context.DeadlineExceeded, timeout))
	defer cancel()
	var wg sync.WaitGroup
	for _, id := range ids {
		wg.Go(func() {
			if err := s.adapter.CloseSession(ctx, id); err != nil {
				s.log.Debug("close session at shutdown", "session", id, "error", err)
			}
		})
	}
	wg.Wait()
}

func (s *server) Describe(context.Context, *pb.DescribeRequest) (*pb.DescribeResponse, error) {
	d := describe(s.adapter)
	return &pb.DescribeResponse{Name: d.Name, Version: d.Version, WireProtocol: d.WireProtocol,
		Capabilities: capsToWire(d.Capabilities), Notes: d.Notes}, nil
}

func (s *server) OpenSession(ctx context.Context, req *pb.OpenSessionRequest) (*pb.OpenSessionResponse, error) {
	r := openFromWire(req)
	if r.SessionID == "" {
		return nil, toStatus(Errorf(ErrInvalid, "open session: no session id"))
	}
	s.mu.Lock()
	if _, dup := s.sessions[r.SessionID]; dup {
		s.mu.Unlock()
		return nil, toStatus(Errorf(ErrInvalid, "open session: session %q is already open", r.SessionID))
	}
	buf := newEventBuffer(r.SessionID)
	s.sessions[r.SessionID] = buf
	s.mu.Unlock()

	s.log.Debug("open session", "session", r.SessionID, "cwd", r.Cwd, "argv", r.Command.Argv)
	resp, err := s.adapter.OpenSession(ctx, r, buf)
	if err != nil {
		s.mu.Lock()
		delete(s.sessions, r.SessionID)
		s.mu.Unlock()
		return nil, toStatus(err)
	}
	return &pb.OpenSessionResponse{ProviderSessionRef: resp.ProviderSessionRef, ProviderThreadRef: resp.ProviderThreadRef,
		ProviderPid: int64(resp.ProviderPid), Resumed: resp.Resumed}, nil
}

func (s *server) Events(req *pb.EventsRequest, stream pb.Provider_EventsServer) error {
	return s.stream(req, stream.Context(), func(evs []RuntimeEvent) error {
		for _, ev := range evs {
			if err := stream.Send(eventToWire(ev)); err != nil {
				return err
			}
		}
		return nil
	})
}

// AckEvents drops the events the host has stored from the session's
// buffer. A session already gone is not an error: its events are too.
func (s *server) AckEvents(_ context.Context, req *pb.AckEventsRequest) (*pb.AckEventsResponse, error) {
	if buf, err := s.session(req.GetSessionId()); err == nil {
		buf.ack(req.GetSequence())
	}
	return &pb.AckEventsResponse{}, nil
}

// maxBatch bounds how many events one EventBatch carries.
const maxBatch = 512

func (s *server) EventBatches(req *pb.EventsRequest, stream pb.Provider_EventBatchesServer) error {
	return s.stream(req, stream.Context(), func(evs []RuntimeEvent) error {
		for len(evs) > 0 {
			n := min(len(evs), maxBatch)
			b := &pb.EventBatch{Events: make([]*pb.RuntimeEvent, n)}
			for i, ev := range evs[:n] {
				b.Events[i] = eventToWire(ev)
			}
			if err := stream.Send(b); err != nil {
				return err
			}
			evs = evs[n:]
		}
		return nil
	})
}

// stream sends a session's events after req's sequence, as they come,
// until the session ends (then it forgets the session) or the host goes
// away; send sends the events ready at one time.
func (s *server) stream(req *pb.EventsRequest, ctx context.Context, send func([]RuntimeEvent) error) error {
	buf, err := s.session(req.GetSessionId())
	if err != nil {
		return toStatus(err)
	}
	after := req.GetAfterSequence()
	buf.ack(after)
	for {
		evs, ended, changed, err := buf.after(after)
		if err != nil {
			return toStatus(err)
		}
		if len(evs) > 0 {
			if err := send(evs); err != nil {
				return err
			}
			after = evs[len(evs)-1].Sequence
			continue
		}
		if ended {
			// Everything, the exit included, is delivered: the session's
			// buffer is no longer needed.
			s.forget(buf)
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return toStatus(ctx.Err())
		case <-s.stop.Done():
			return nil
		}
	}
}

func (s *server) StartTurn(ctx context.Context, req *pb.StartTurnRequest) (*pb.StartTurnResponse, error) {
	resp, err := s.adapter.StartTurn(ctx, StartTurnRequest{SessionID: req.GetSessionId(),
		Input: TurnInput{Text: req.GetInput().GetText()}, ClientTurnID: req.GetClientTurnId()})
	if err != nil {
		return nil, toStatus(err)
	}
	return &pb.StartTurnResponse{TurnRef: resp.TurnRef}, nil
}

func (s *server) SteerTurn(ctx context.Context, req *pb.SteerTurnRequest) (*pb.SteerTurnResponse, error) {
	st, ok := s.adapter.(Steerer)
	if !ok {
		return nil, toStatus(Errorf(ErrUnsupported, "steer turn"))
	}
	err := st.SteerTurn(ctx, SteerTurnRequest{SessionID: req.GetSessionId(), TurnRef: req.GetTurnRef(),
		Input: TurnInput{Text: req.GetInput().GetText()}})
	if err != nil {
		return nil, toStatus(err)
	}
	return &pb.SteerTurnResponse{}, nil
}

func (s *server) InterruptTurn(ctx context.Context, req *pb.InterruptTurnRequest) (*pb.InterruptTurnResponse, error) {
	if err := s.adapter.InterruptTurn(ctx, InterruptTurnRequest{SessionID: req.GetSessionId(), TurnRef: req.GetTurnRef()}); err != nil {
		return nil, toStatus(err)
	}
	return &pb.InterruptTurnResponse{}, nil
}

func (s *server) RespondToRequest(ctx context.Context, req *pb.RespondToRequestRequest) (*pb.RespondToRequestResponse, error) {
	err := s.adapter.RespondToRequest(ctx, RespondToRequestRequest{SessionID: req.GetSessionId(),
		RequestRef: req.GetRequestRef(), Decision: Decision(req.GetDecision()), Answers: req.GetAnswers()})
	if err != nil {
		return nil, toStatus(err)
	}
	return &pb.RespondToRequestResponse{}, nil
}

func (s *server) RollbackThread(ctx context.Context, req *pb.RollbackThreadRequest) (*pb.RollbackThreadResponse, error) {
	rb, ok := s.adapter.(Rollbacker)
	if !ok {
		return nil, toStatus(Errorf(ErrUnsupported, "rollback thread"))
	}
	resp, err := rb.RollbackThread(ctx, rollbackFromWire(req))
	if err != nil {
		return nil, toStatus(err)
	}
	return &pb.RollbackThreadResponse{ThreadRef: resp.ThreadRef}, nil
}

func (s *server) ReadThreadSnapshot(ctx context.Context, req *pb.ReadThreadSnapshotRequest) (*pb.ReadThreadSnapshotResponse, error) {
	sr, ok := s.adapter.(SnapshotReader)
	if !ok {
		return nil, toStatus(Errorf(ErrUnsupported, "read thread snapshot"))
	}
	snap, err := sr.ReadThreadSnapshot(ctx, ReadThreadSnapshotRequest{SessionID: req.GetSessionId(), ThreadRef: req.GetThreadRef()})
	if err != nil {
		return nil, toStatus(err)
	}
	return &pb.ReadThreadSnapshotResponse{TurnRefs: snap.TurnRefs, Detail: snap.Detail}, nil
}

func (s *server) CloseSession(ctx context.Context, req *pb.CloseSessionRequest) (*pb.CloseSessionResponse, error) {
	buf, err := s.session(req.GetSessionId())
	if err != nil {
		return nil, toStatus(err)
	}
	err = s.adapter.CloseSession(ctx, req.GetSessionId())
	buf.end()
	s.mu.Lock()
	delete(s.sessions, req.GetSessionId())
	s.mu.Unlock()
	if err != nil {
		return nil, toStatus(err)
	}
	return &pb.CloseSessionResponse{}, nil
}
