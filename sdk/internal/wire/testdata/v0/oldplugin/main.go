// Command oldplugin is a plugin built from the protocol before sdk v1
// (testdata/v0): its Describe has no sdk_version and sets the fork
// capability that sdk v1 dropped. A session's turn emits turn_started,
// a content delta and turn_terminal; CloseSession ends the stream with
// runtime_exited. With BATON_TEST_PROTOCOL=2 it offers protocol version 2
// instead of 1 (a plugin built for another protocol).
package main

import (
	"context"
	"os"
	"strconv"
	"sync"

	"github.com/hashicorp/go-plugin"

	v0 "github.com/baton-run/baton/sdk/internal/wire/testdata/v0"
	pb "github.com/baton-run/baton/sdk/internal/wire/testdata/v0/pluginpb"
)

func main() {
	version := 1
	if v, err := strconv.Atoi(os.Getenv("BATON_TEST_PROTOCOL")); err == nil {
		version = v
	}
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig:  v0.Handshake(version),
		VersionedPlugins: map[int]plugin.PluginSet{version: {"provider": &v0.Plugin{Provider: &provider{sessions: map[string]chan *pb.RuntimeEvent{}}}}},
		GRPCServer:       plugin.DefaultGRPCServer,
	})
}

type provider struct {
	pb.UnimplementedProviderServer
	mu       sync.Mutex
	sessions map[string]chan *pb.RuntimeEvent
	seq      map[string]uint64
}

func (p *provider) Describe(context.Context, *pb.DescribeRequest) (*pb.DescribeResponse, error) {
	return &pb.DescribeResponse{Name: "oldplugin", Version: "0.9.0", WireProtocol: "none",
		Capabilities: &pb.Capabilities{Interrupt: true, Fork: true, Resume: true},
		Notes:        map[string]string{"interrupt": "asks nicely"}}, nil
}

func (p *provider) emit(id string, ev *pb.RuntimeEvent) {
	p.mu.Lock()
	if p.seq == nil {
		p.seq = map[string]uint64{}
	}
	p.seq[id]++
	ev.SessionId, ev.Sequence = id, p.seq[id]
	ch := p.sessions[id]
	p.mu.Unlock()
	ch <- ev
}

func (p *provider) OpenSession(_ context.Context, r *pb.OpenSessionRequest) (*pb.OpenSessionResponse, error) {
	p.mu.Lock()
	p.sessions[r.GetSessionId()] = make(chan *pb.RuntimeEvent, 64)
	p.mu.Unlock()
	return &pb.OpenSessionResponse{ProviderSessionRef: "old-" + r.GetSessionId(), ProviderThreadRef: "old-thread"}, nil
}

func (p *provider) StartTurn(_ context.Context, r *pb.StartTurnRequest) (*pb.StartTurnResponse, error) {
	id := r.GetSessionId()
	p.emit(id, &pb.RuntimeEvent{Kind: pb.EventKind_EVENT_KIND_TURN_STARTED, ThreadRef: "old-thread", TurnRef: "t1", ClientTurnId: r.GetClientTurnId()})
	p.emit(id, &pb.RuntimeEvent{Kind: pb.EventKind_EVENT_KIND_CONTENT_DELTA, TurnRef: "t1", ItemRef: "m1", ItemKind: "assistant_message",
		Text: "you said: " + r.GetInput().GetText()})
	p.emit(id, &pb.RuntimeEvent{Kind: pb.EventKind_EVENT_KIND_TURN_TERMINAL, TurnRef: "t1", Status: "completed",
		Usage: &pb.Usage{InputTokens: 3, OutputTokens: 4}})
	return &pb.StartTurnResponse{TurnRef: "t1"}, nil
}

func (p *provider) CloseSession(_ context.Context, r *pb.CloseSessionRequest) (*pb.CloseSessionResponse, error) {
	p.emit(r.GetSessionId(), &pb.RuntimeEvent{Kind: pb.EventKind_EVENT_KIND_RUNTIME_EXITED, Status: "closed"})
	return &pb.CloseSessionResponse{}, nil
}

func (p *provider) EventBatches(r *pb.EventsRequest, st pb.Provider_EventBatchesServer) error {
	p.mu.Lock()
	ch := p.sessions[r.GetSessionId()]
	p.mu.Unlock()
	for {
		select {
		case ev := <-ch:
			if err := st.Send(&pb.EventBatch{Events: []*pb.RuntimeEvent{ev}}); err != nil {
				return err
			}
			if ev.GetKind() == pb.EventKind_EVENT_KIND_RUNTIME_EXITED {
				return nil
			}
		case <-st.Context().Done():
			return st.Context().Err()
		}
	}
}
