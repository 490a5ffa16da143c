// Package v0 is the plugin protocol as it was before sdk v1 (commit
// 7612ad0): pluginpb is its generated code, frozen, and this is its
// go-plugin glue. The wire compatibility tests build oldplugin (a plugin
// built from it) and oldhost (a host's client built from it) and run them
// against the sdk of today. Nothing but those programs imports it.
package v0

import (
	"context"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	pb "github.com/baton-run/baton/sdk/internal/wire/testdata/v0/pluginpb"
)

// Handshake is the handshake of a protocol version, as it was.
func Handshake(version int) plugin.HandshakeConfig {
	return plugin.HandshakeConfig{
		ProtocolVersion:  uint(version),
		MagicCookieKey:   "BATON_PLUGIN",
		MagicCookieValue: "4a1d7c0e2b9f4e51a3c86d07f2e9b815",
	}
}

// Plugin is the go-plugin glue of the provider service.
type Plugin struct {
	plugin.NetRPCUnsupportedPlugin
	Provider pb.ProviderServer
}

func (p *Plugin) GRPCServer(_ *plugin.GRPCBroker, s *grpc.Server) error {
	pb.RegisterProviderServer(s, p.Provider)
	return nil
}

func (p *Plugin) GRPCClient(_ context.Context, _ *plugin.GRPCBroker, c *grpc.ClientConn) (any, error) {
	return pb.NewProviderClient(c), nil
}
