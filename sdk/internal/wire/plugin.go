// Package wire is the plugin protocol's edge: conversions between the sdk's
// Go types and the generated gRPC types, the one table of errors and gRPC
// codes, and the go-plugin handshake. The server (plugin side) and
// pluginclient (host side) are its only users; nothing else sees pluginpb.
package wire

import (
	"context"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/baton-run/baton/sdk"
	pb "github.com/baton-run/baton/sdk/internal/pluginpb"
)

// PluginKey names the one plugin a Baton plugin binary serves.
const PluginKey = "provider"

// Handshake is the go-plugin handshake of a protocol version. The cookie
// only keeps a user from running a plugin binary by hand by mistake; it is
// not a secret.
func Handshake(version int) plugin.HandshakeConfig {
	return plugin.HandshakeConfig{
		ProtocolVersion:  uint(version),
		MagicCookieKey:   "BATON_PLUGIN",
		MagicCookieValue: "4a1d7c0e2b9f4e51a3c86d07f2e9b815",
	}
}

// Plugins is the plugin set of the sdk's protocol version, for one side:
// srv on the plugin side, client on the host side.
func Plugins(srv pb.ProviderServer, client func(exited context.Context, rpc pb.ProviderClient) any) map[int]plugin.PluginSet {
	return map[int]plugin.PluginSet{sdk.ProtocolVersion: {PluginKey: &Plugin{Provider: srv, NewClient: client}}}
}

// Plugin is the go-plugin glue: the plugin side sets Provider, the host
// side NewClient.
type Plugin struct {
	plugin.NetRPCUnsupportedPlugin
	Provider  pb.ProviderServer
	NewClient func(exited context.Context, rpc pb.ProviderClient) any
}

// GRPCServer registers the provider service.
func (p *Plugin) GRPCServer(_ *plugin.GRPCBroker, s *grpc.Server) error {
	pb.RegisterProviderServer(s, p.Provider)
	return nil
}

// GRPCClient's ctx is cancelled when the plugin process exits.
func (p *Plugin) GRPCClient(ctx context.Context, _ *plugin.GRPCBroker, c *grpc.ClientConn) (any, error) {
	return p.NewClient(ctx, pb.NewProviderClient(c)), nil
}
