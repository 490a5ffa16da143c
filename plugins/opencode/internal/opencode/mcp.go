package opencode

import (
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
