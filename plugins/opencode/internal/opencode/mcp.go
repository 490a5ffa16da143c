package opencode

import (
	"strings"

	"github.com/baton-run/baton/sdk"
)

// mcpTransports are the host's MCP servers opencode takes: a stdio server
// as a "local" one (opencode starts its command), an http one as a
// "remote" one.
var mcpTransports = []sdk.MCPTransport{sdk.MCPStdio, sdk.MCPHTTP}

// mcpServer is one server in opencode's "mcp" configuration.
type mcpServer struct {
	Type        string            `json:"type"` // local or remote
	Command     []string          `json:"command,omitempty"`
	Environment map[string]string `json:"environment,omitempty"`
	URL         string            `json:"url,omitempty"`
	Headers     map[string]string `json:"headers,omitempty"`
	Enabled     bool              `json:"enabled"`
}

// mcpConfig is the servers in opencode's form, keyed by name (checked by
// sdk.CheckMCPServers first):
//
//	{"NAME":{"type":"local","command":["cmd","arg"...],"environment":{...},"enabled":true},
//	 "NAME":{"type":"remote","url":"...","headers":{...},"enabled":true}}
func mcpConfig(servers []sdk.MCPServer) map[string]mcpServer {
	if len(servers) == 0 {
		return nil
	}
	out := make(map[string]mcpServer, len(servers))
	for _, s := range servers {
		switch s.Transport {
		case sdk.MCPStdio:
			out[s.Name] = mcpServer{Type: "local", Command: append([]string{s.Command}, s.Args...),
				Environment: valueMap(s.Env), Enabled: true}
		case sdk.MCPHTTP:
			out[s.Name] = mcpServer{Type: "remote", URL: s.URL, Headers: valueMap(s.Headers), Enabled: true}
		}
	}
	return out
}

func valueMap(vs []sdk.NameValue) map[string]string {
	if len(vs) == 0 {
		return nil
	}
	m := make(map[string]string, len(vs))
	for _, v := range vs {
		m[v.Name] = v.Value
	}
	return m
}

// mcpTool splits the name opencode gives an MCP server's tool, SERVER_TOOL
// (the server's name with anything but letters, digits, '_' and '-' made
// '_', which the host's names never hold), by the servers the session was
// given: the longest server name that prefixes it wins. ok is false for any
// other tool, among them those of servers the session was not given
// (opencode's own configuration), which cannot be told apart from
// opencode's tools.
func mcpTool(name string, servers []string) (server, tool string, ok bool) {
	for _, s := range servers {
		if t, found := strings.CutPrefix(name, s+"_"); found && t != "" && len(s) > len(server) {
			server, tool, ok = s, t, true
		}
	}
	return server, tool, ok
}
