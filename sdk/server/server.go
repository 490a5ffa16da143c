package server

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"

	"github.com/baton-run/baton/sdk"
	"github.com/baton-run/baton/sdk/clock"
	pb "github.com/baton-run/baton/sdk/internal/pluginpb"
	"github.com/baton-run/baton/sdk/internal/wire"
)

// server adapts an Adapter to the generated gRPC service. Every method does
// the same steps: convert in, call the adapter, convert out, map the error.
type server struct {
	pb.UnimplementedProviderServer
	adapter sdk.Adapter
	log     hclog.Logger
	stop    context.Context // cancelled when the plugin shuts down

	mu       sync.Mutex
	sessions map[string]*eventBuffer
}

func newServer(stop context.Context, a sdk.Adapter, log hclog.Logger) *server {
	return &server{adapter: a, log: log, stop: stop, sessions: map[string]*eventBuffer{}}
}

func (s *server) session(id string) (*eventBuffer, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.sessions[id]
	if !ok {
		return nil, sdk.Errorf(sdk.ErrUnknownSession, "session %q", id)
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
		if buf, err := s.session(id); err == nil {
			buf.close()
		}
		wg.Go(func() {
			if err := s.adapter.CloseSession(ctx, id); err != nil {
				s.log.Debug("close session at shutdown", "session", id, "error", err)
			}
		})
	}
	wg.Wait()
}

func (s *server) Describe(context.Context, *pb.DescribeRequest) (*pb.DescribeResponse, error) {
	d := s.adapter.Describe()
	return &pb.DescribeResponse{Name: d.Name, Version: d.Version, WireProtocol: d.WireProtocol,
		Capabilities: wire.CapsToWire(d.Capabilities), Notes: d.Notes, SdkVersion: sdk.Version,
		McpTransports: wire.TransportsToWire(d.MCPTransports)}, nil
}

func (s *server) OpenSession(ctx context.Context, req *pb.OpenSessionRequest) (*pb.OpenSessionResponse, error) {
	r := wire.OpenFromWire(req)
	if r.SessionID == "" {
		return nil, wire.ToStatus(sdk.Errorf(sdk.ErrInvalid, "open session: no session id"))
	}
	s.mu.Lock()
	if _, dup := s.sessions[r.SessionID]; dup {
		s.mu.Unlock()
		return nil, wire.ToStatus(sdk.Errorf(sdk.ErrInvalid, "open session: session %q is already open", r.SessionID))
	}
	buf := newEventBuffer(r.SessionID)
	s.sessions[r.SessionID] = buf
	s.mu.Unlock()

	s.log.Debug("open session", "session", r.SessionID, "cwd", r.Cwd, "argv", r.Command.Argv)
	resp, err := s.open(ctx, r, buf)
	if err != nil {
		s.mu.Lock()
		delete(s.sessions, r.SessionID)
		s.mu.Unlock()
		return nil, wire.ToStatus(err)
	}
	return &pb.OpenSessionResponse{ProviderSessionRef: resp.ProviderSessionRef, ProviderThreadRef: resp.ProviderThreadRef,
		ProviderPid: int64(resp.ProviderPid), Resumed: resp.Resumed}, nil
}

// open opens a session: a Resumer resumes the thread asked for; any other
// adapter opens a fresh session, which the response says did not resume.
func (s *server) open(ctx context.Context, r sdk.OpenSessionRequest, emit sdk.Emitter) (sdk.OpenSessionResponse, error) {
	if r.ResumeThreadRef != "" {
		if rs, ok := s.adapter.(sdk.Resumer); ok {
			return rs.ResumeSession(ctx, r, emit)
		}
		r.ResumeThreadRef = ""
	}
	resp, err := s.adapter.OpenSession(ctx, r, emit)
	resp.Resumed = false
	return resp, err
}

func (s *server) Events(req *pb.EventsRequest, stream pb.Provider_EventsServer) error {
	return s.stream(req, stream.Context(), func(evs []sdk.RuntimeEvent) error {
		for _, ev := range evs {
			if err := stream.Send(wire.EventToWire(ev)); err != nil {
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
	return s.stream(req, stream.Context(), func(evs []sdk.RuntimeEvent) error {
		for len(evs) > 0 {
			n := min(len(evs), maxBatch)
			b := &pb.EventBatch{Events: make([]*pb.RuntimeEvent, n)}
			for i, ev := range evs[:n] {
				b.Events[i] = wire.EventToWire(ev)
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
func (s *server) stream(req *pb.EventsRequest, ctx context.Context, send func([]sdk.RuntimeEvent) error) error {
	buf, err := s.session(req.GetSessionId())
	if err != nil {
		return wire.ToStatus(err)
	}
	after := req.GetAfterSequence()
	buf.ack(after)
	for {
		evs, ended, changed, err := buf.after(after)
		if err != nil {
			return wire.ToStatus(err)
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
			return wire.ToStatus(ctx.Err())
		case <-s.stop.Done():
			return nil
		}
	}
}

func (s *server) StartTurn(ctx context.Context, req *pb.StartTurnRequest) (*pb.StartTurnResponse, error) {
	resp, err := s.adapter.StartTurn(ctx, sdk.StartTurnRequest{SessionID: req.GetSessionId(),
		Input: sdk.TurnInput{Text: req.GetInput().GetText()}, ClientTurnID: req.GetClientTurnId()})
	if err != nil {
		return nil, wire.ToStatus(err)
	}
	return &pb.StartTurnResponse{TurnRef: resp.TurnRef}, nil
}

func (s *server) SteerTurn(ctx context.Context, req *pb.SteerTurnRequest) (*pb.SteerTurnResponse, error) {
	st, ok := s.adapter.(sdk.Steerer)
	if !ok {
		return nil, wire.ToStatus(sdk.Errorf(sdk.ErrUnsupported, "steer turn"))
	}
	err := st.SteerTurn(ctx, sdk.SteerTurnRequest{SessionID: req.GetSessionId(), TurnRef: req.GetTurnRef(),
		Input: sdk.TurnInput{Text: req.GetInput().GetText()}})
	if err != nil {
		return nil, wire.ToStatus(err)
	}
	return &pb.SteerTurnResponse{}, nil
}

func (s *server) InterruptTurn(ctx context.Context, req *pb.InterruptTurnRequest) (*pb.InterruptTurnResponse, error) {
	it, ok := s.adapter.(sdk.Interrupter)
	if !ok {
		return nil, wire.ToStatus(sdk.Errorf(sdk.ErrUnsupported, "interrupt turn"))
	}
	if err := it.InterruptTurn(ctx, sdk.InterruptTurnRequest{SessionID: req.GetSessionId(), TurnRef: req.GetTurnRef()}); err != nil {
		return nil, wire.ToStatus(err)
	}
	return &pb.InterruptTurnResponse{}, nil
}

func (s *server) RespondToRequest(ctx context.Context, req *pb.RespondToRequestRequest) (*pb.RespondToRequestResponse, error) {
	rs, ok := s.adapter.(sdk.Responder)
	if !ok {
		return nil, wire.ToStatus(sdk.Errorf(sdk.ErrUnsupported, "respond to request %s", req.GetRequestRef()))
	}
	err := rs.RespondToRequest(ctx, sdk.RespondToRequestRequest{SessionID: req.GetSessionId(),
		RequestRef: req.GetRequestRef(), Decision: sdk.Decision(req.GetDecision()), Answers: req.GetAnswers()})
	if err != nil {
		return nil, wire.ToStatus(err)
	}
	return &pb.RespondToRequestResponse{}, nil
}

func (s *server) RollbackThread(ctx context.Context, req *pb.RollbackThreadRequest) (*pb.RollbackThreadResponse, error) {
	rb, ok := s.adapter.(sdk.Rollbacker)
	if !ok {
		return nil, wire.ToStatus(sdk.Errorf(sdk.ErrUnsupported, "rollback thread"))
	}
	resp, err := rb.RollbackThread(ctx, wire.RollbackFromWire(req))
	if err != nil {
		return nil, wire.ToStatus(err)
	}
	return &pb.RollbackThreadResponse{ThreadRef: resp.ThreadRef}, nil
}

func (s *server) ReadThreadSnapshot(ctx context.Context, req *pb.ReadThreadSnapshotRequest) (*pb.ReadThreadSnapshotResponse, error) {
	sr, ok := s.adapter.(sdk.SnapshotReader)
	if !ok {
		return nil, wire.ToStatus(sdk.Errorf(sdk.ErrUnsupported, "read thread snapshot"))
	}
	snap, err := sr.ReadThreadSnapshot(ctx, sdk.ReadThreadSnapshotRequest{SessionID: req.GetSessionId(), ThreadRef: req.GetThreadRef()})
	if err != nil {
		return nil, wire.ToStatus(err)
	}
	return &pb.ReadThreadSnapshotResponse{TurnRefs: snap.TurnRefs, Detail: snap.Detail}, nil
}

func (s *server) CloseSession(ctx context.Context, req *pb.CloseSessionRequest) (*pb.CloseSessionResponse, error) {
	buf, err := s.session(req.GetSessionId())
	if err != nil {
		return nil, wire.ToStatus(err)
	}
	if req.GetForce() {
		ctx = sdk.ForceClose(ctx)
	}
	buf.close()
	err = s.adapter.CloseSession(ctx, req.GetSessionId())
	buf.end()
	s.mu.Lock()
	delete(s.sessions, req.GetSessionId())
	s.mu.Unlock()
	if err != nil {
		return nil, wire.ToStatus(err)
	}
	return &pb.CloseSessionResponse{}, nil
}

// Register serves the adapter's provider service on s: what Serve does
// through go-plugin, for a caller that runs its own gRPC server (a test
// that talks to an adapter in process). stop ends the session streams.
func Register(stop context.Context, s *grpc.Server, a sdk.Adapter, log hclog.Logger) {
	pb.RegisterProviderServer(s, newServer(stop, a, log))
}
