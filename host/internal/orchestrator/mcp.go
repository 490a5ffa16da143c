package orchestrator

import (
	"fmt"

	"github.com/baton-run/baton/host/internal/domain"
	"github.com/baton-run/baton/host/internal/mcpconf"
	"github.com/baton-run/baton/sdk"
)

// mcpRefs is the MCP servers configured in the data dir, as the domain
// sees them (Env.MCP). A file that cannot be read gives none here: the
// session that would have had them fails to open, saying why (mcpServers).
func (h *Host) mcpRefs() []domain.MCPServerRef {
	f, err := h.mcp.Current()
	if err != nil {
		h.log.Error("MCP servers", "error", err)
		return nil
	}
	return f.Refs()
}

// mcpServers is what the session e opens is given of the MCP servers it
// names, as they are configured now, and their refs as now (what the
// session is recorded with). A server the provider's plugin cannot pass
// on is refused here, before the session opens, naming the provider, the
// server and its transport; so is one removed since the run started.
func (h *Host) mcpServers(e domain.OpenSession, d sdk.Description) ([]sdk.MCPServer, []domain.MCPServerRef, error) {
	if len(e.MCP) == 0 {
		return nil, nil, nil
	}
	f, err := h.mcp.Current()
	if err != nil {
		return nil, nil, fmt.Errorf("the MCP servers cannot be read (fix or remove %s): %w", mcpconf.FileName, err)
	}
	servers, err := f.Resolve(e.MCP)
	if err != nil {
		return nil, nil, err
	}
	if err := sdk.CheckMCPServers(e.Provider, d.MCPTransports, servers); err != nil {
		return nil, nil, fmt.Errorf("%w; choose other servers for the run (baton run --mcp, --no-mcp) or another provider", err)
	}
	refs := make([]domain.MCPServerRef, len(servers))
	for i, s := range servers {
		r, _ := f.Get(s.Name)
		refs[i] = r.Ref()
	}
	return servers, refs, nil
}
