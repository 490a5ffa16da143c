package codex

import "github.com/baton-run/baton/sdk"

// mcpTransports are the MCP transports codex takes: a command it starts
// (stdio) and a URL (streamable http, with http_headers).
var mcpTransports = []sdk.MCPTransport{sdk.MCPStdio, sdk.MCPHTTP}

// mcpConfig is the host's MCP servers as thread/start's (and
// thread/resume's) config overrides: one key a server,
// mcp_servers.NAME, so that each is added to the servers of codex's own
// configuration and none of those is dropped:
//
//	"mcp_servers.NAME": {"command": …, "args": […], "env": {…}}
//	"mcp_servers.NAME": {"url": …, "http_headers": {…}}
//
// Env and headers keep the host's order. No servers: nil (no config).
func mcpConfig(servers []sdk.MCPServer) map[string]any {
	if len(servers) == 0 {
		return nil
	}
	config := make(map[string]any, len(servers))
	for _, s := range servers {
		var v map[string]any
		switch s.Transport {
		case sdk.MCPStdio:
			args := s.Args
			if args == nil {
				args = []string{}
			}
			v = map[string]any{"command": s.Command, "args": args}
			if len(s.Env) > 0 {
				v["env"] = sdk.NameValueMap(s.Env)
			}
		case sdk.MCPHTTP:
			v = map[string]any{"url": s.URL}
			if len(s.Headers) > 0 {
				v["http_headers"] = sdk.NameValueMap(s.Headers)
			}
		}
		config["mcp_servers."+s.Name] = v
	}
	return config
}
