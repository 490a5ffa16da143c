// Command oldhost is a host's client built from the protocol before sdk v1
// (testdata/v0): it starts the plugin binary named by its argument, asks
// Describe, opens a session, starts a turn, closes the session, reads the
// session's events to their end, and prints what it read as JSON.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"

	"github.com/hashicorp/go-plugin"

	v0 "github.com/baton-run/baton/sdk/internal/wire/testdata/v0"
	pb "github.com/baton-run/baton/sdk/internal/wire/testdata/v0/pluginpb"
)

// Read is what the old host read.
type Read struct {
	Describe *pb.DescribeResponse
	// DescribeUnknown is what of Describe's answer this protocol has no
	// field for (a newer plugin's added fields), as it came.
	DescribeUnknown []byte
	Open            *pb.OpenSessionResponse
	Turn            *pb.StartTurnResponse
	Events          []*pb.RuntimeEvent
}

func main() {
	if err := run(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "oldhost:", err)
		os.Exit(1)
	}
}

func run(bin string) error {
	c := plugin.NewClient(&plugin.ClientConfig{
		HandshakeConfig:  v0.Handshake(1),
		VersionedPlugins: map[int]plugin.PluginSet{1: {"provider": &v0.Plugin{}}},
		Cmd:              exec.Command(bin),
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		AutoMTLS:         true,
	})
	defer c.Kill()
	rpc, err := c.Client()
	if err != nil {
		return err
	}
	raw, err := rpc.Dispense("provider")
	if err != nil {
		return err
	}
	p := raw.(pb.ProviderClient)
	ctx := context.Background()
	var r Read
	if r.Describe, err = p.Describe(ctx, &pb.DescribeRequest{}); err != nil {
		return fmt.Errorf("describe: %w", err)
	}
	r.DescribeUnknown = r.Describe.ProtoReflect().GetUnknown()
	if r.Open, err = p.OpenSession(ctx, &pb.OpenSessionRequest{SessionId: "s1", Cwd: os.TempDir()}); err != nil {
		return fmt.Errorf("open: %w", err)
	}
	if r.Turn, err = p.StartTurn(ctx, &pb.StartTurnRequest{SessionId: "s1", Input: &pb.TurnInput{Text: "hi"}, ClientTurnId: "ct1"}); err != nil {
		return fmt.Errorf("start turn: %w", err)
	}
	st, err := p.EventBatches(ctx, &pb.EventsRequest{SessionId: "s1"})
	if err != nil {
		return fmt.Errorf("events: %w", err)
	}
	closed := false
	for {
		b, err := st.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("events: %w", err)
		}
		r.Events = append(r.Events, b.GetEvents()...)
		if !closed && len(r.Events) > 0 && r.Events[len(r.Events)-1].GetKind() == pb.EventKind_EVENT_KIND_TURN_TERMINAL {
			closed = true
			if _, err := p.CloseSession(ctx, &pb.CloseSessionRequest{SessionId: "s1"}); err != nil {
				return fmt.Errorf("close: %w", err)
			}
		}
	}
	return json.NewEncoder(os.Stdout).Encode(r)
}
