package acp

import (
	"encoding/json"
	"fmt"

	"github.com/baton-run/baton/sdk"
)

// mcpTransports are the MCP transports ACP can pass on: every agent takes
// stdio servers; an http one only an agent whose initialize answer sets
// agentCapabilities.mcpCapabilities.http (checked by mcpServers).
var mcpTransports = []sdk.MCPTransport{sdk.MCPStdio, sdk.MCPHTTP}

// stdioServer and httpServer are an MCP server in ACP's form (the
// "mcpServers" of session/new and session/load): a stdio server has no
// type, an http one is "type":"http"; env and headers are lists of
// {name, value}, an empty list [] (ACP requires every field).
type stdioServer struct {
	Name    string          `json:"name"`
	Command string          `json:"command"`
	Args    []string        `json:"args"`
	Env     []sdk.NameValue `json:"env"`
}

type httpServer struct {
	Type    string          `json:"type"`
	Name    string          `json:"name"`
	URL     string          `json:"url"`
	Headers []sdk.NameValue `json:"headers"`
}

// mcpServers turns the host's servers into ACP's form for an agent whose
// initialize answer said whether it takes http servers. A server the agent
// cannot take is an error naming the agent, the server and the transport:
// a server is never dropped. No servers is [] (mcpServers is required).
func mcpServers(agent string, takesHTTP bool, servers []sdk.MCPServer) ([]any, error) {
	out := make([]any, 0, len(servers))
	for _, s := range servers {
		switch s.Transport {
		case sdk.MCPStdio:
			out = append(out, stdioServer{Name: s.Name, Command: s.Command, Args: nonNil(s.Args), Env: nonNil(s.Env)})
		case sdk.MCPHTTP:
			if !takesHTTP {
				return nil, &sdk.MCPTransportError{Provider: agent, Server: s.Name, Transport: s.Transport,
					Takes: []sdk.MCPTransport{sdk.MCPStdio}}
			}
			out = append(out, httpServer{Type: "http", Name: s.Name, URL: s.URL, Headers: nonNil(s.Headers)})
		default:
			return nil, fmt.Errorf("MCP server %q: unknown transport %q", s.Name, s.Transport)
		}
	}
	return out, nil
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// serverNames are the servers' names, what mcpTool matches tool names
// against.
func serverNames(servers []sdk.MCPServer) []string {
	names := make([]string, len(servers))
	for i, s := range servers {
		names[i] = s.Name
	}
	return names
}

// agentName names the agent by its initialize answer's agentInfo, for
// errors: "the ACP agent NAME", or "the ACP agent" when it gave none.
func agentName(info json.RawMessage) string {
	var a struct {
		Name string `json:"name"`
	}
	if json.Unmarshal(info, &a) != nil || a.Name == "" {
		return "the ACP agent"
	}
	return fmt.Sprintf("the ACP agent %q", a.Name)
}
