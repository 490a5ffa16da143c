package sdk

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// MCPTransport is how a provider reaches an MCP server.
type MCPTransport string

// MCP transports.
const (
	// MCPStdio: the provider starts the server's command and speaks to it
	// over its stdin and stdout.
	MCPStdio MCPTransport = "stdio"
	// MCPHTTP: the server is at a URL (MCP's streamable HTTP).
	MCPHTTP MCPTransport = "http"
)

// NameValue is one environment variable or HTTP header. The host gives
// them sorted by name, so that a provider's configuration is the same
// from one session to the next.
type NameValue struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// MCPServer is an MCP server a session's provider may use: configured once
// on the host for every provider, and turned by each plugin into its
// provider's own form when the session opens. Env values and headers may
// hold secrets: a plugin passes them to its provider and nowhere else (see
// MCPSecrets, and Redacted for what may be shown).
type MCPServer struct {
	Name      string       `json:"name"`
	Transport MCPTransport `json:"transport"`
	// Command and Args start a stdio server; Env is added to its
	// environment.
	Command string      `json:"command,omitempty"`
	Args    []string    `json:"args,omitempty"`
	Env     []NameValue `json:"env,omitempty"`
	// URL and Headers reach an http server.
	URL     string      `json:"url,omitempty"`
	Headers []NameValue `json:"headers,omitempty"`
}

// Redacted is the server with every env and header value shown as ***:
// what logs, events and `show` may carry.
func (s MCPServer) Redacted() MCPServer {
	s.Env, s.Headers = redactValues(s.Env), redactValues(s.Headers)
	s.Args = slices.Clone(s.Args)
	return s
}

func redactValues(vs []NameValue) []NameValue {
	if vs == nil {
		return nil
	}
	out := make([]NameValue, len(vs))
	for i, v := range vs {
		out[i] = NameValue{Name: v.Name, Value: "***"}
	}
	return out
}

// Check says what is wrong with the server, naming it: a name that a
// provider's configuration could not key it by, a transport this sdk does
// not know, a stdio server without a command, an http one without an
// http(s) URL, or an env or header name that is empty or holds '='.
func (s MCPServer) Check() error {
	if s.Name == "" {
		return errors.New("an MCP server has no name")
	}
	for _, r := range s.Name {
		if !(r == '-' || r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return fmt.Errorf("MCP server name %q: use letters, digits, '-' and '_'", s.Name)
		}
	}
	switch s.Transport {
	case MCPStdio:
		if s.Command == "" {
			return fmt.Errorf("MCP server %q (stdio) has no command", s.Name)
		}
		if s.URL != "" || len(s.Headers) > 0 {
			return fmt.Errorf("MCP server %q (stdio) has a URL or headers, which only an http server takes", s.Name)
		}
	case MCPHTTP:
		if !strings.HasPrefix(s.URL, "http://") && !strings.HasPrefix(s.URL, "https://") {
			return fmt.Errorf("MCP server %q (http): URL %q is not an http or https URL", s.Name, s.URL)
		}
		if s.Command != "" || len(s.Args) > 0 {
			return fmt.Errorf("MCP server %q (http) has a command, which only a stdio server takes", s.Name)
		}
	default:
		return fmt.Errorf("MCP server %q: unknown transport %q (stdio or http)", s.Name, s.Transport)
	}
	for _, kv := range [...]struct {
		what string
		vs   []NameValue
	}{{"env", s.Env}, {"header", s.Headers}} {
		for _, v := range kv.vs {
			if v.Name == "" || strings.ContainsAny(v.Name, "=\n\r") {
				return fmt.Errorf("MCP server %q: %s name %q is empty or holds '=' or a line break", s.Name, kv.what, v.Name)
			}
		}
	}
	return nil
}

// CheckMCPServers refuses servers that a provider's plugin cannot pass on:
// one the plugin's transports (Description.MCPTransports) do not include,
// naming the provider, the server and the transport; a server that fails
// its Check; two servers of one name. A plugin calls it in OpenSession
// before its provider starts, so that no server is ever dropped silently.
func CheckMCPServers(provider string, takes []MCPTransport, servers []MCPServer) error {
	seen := make(map[string]bool, len(servers))
	for _, s := range servers {
		if err := s.Check(); err != nil {
			return err
		}
		if seen[s.Name] {
			return fmt.Errorf("two MCP servers are named %q", s.Name)
		}
		seen[s.Name] = true
		if !slices.Contains(takes, s.Transport) {
			return &MCPTransportError{Provider: provider, Server: s.Name, Transport: s.Transport, Takes: takes}
		}
	}
	return nil
}

// MCPTransportError is a server whose transport a provider cannot take.
type MCPTransportError struct {
	Provider  string
	Server    string
	Transport MCPTransport
	Takes     []MCPTransport
}

func (e *MCPTransportError) Error() string {
	takes := "no MCP server at all"
	if len(e.Takes) > 0 {
		w := make([]string, len(e.Takes))
		for i, t := range e.Takes {
			w[i] = string(t)
		}
		takes = "only " + strings.Join(w, " and ")
	}
	return fmt.Sprintf("%s cannot take MCP server %q over %s (it takes %s)", e.Provider, e.Server, e.Transport, takes)
}

// MCPSecrets are the values of the servers' env and headers: what a
// plugin keeps out of its raw-frame log (framelog.Log.Redact) and its own
// log lines.
func MCPSecrets(servers []MCPServer) []string {
	var out []string
	for _, s := range servers {
		for _, v := range s.Env {
			out = append(out, v.Value)
		}
		for _, v := range s.Headers {
			out = append(out, v.Value)
		}
	}
	return out
}

// MCPServersJSON is the servers in the "mcpServers" form that Claude
// Code's --mcp-config and Cursor's mcp.json read:
//
//	{"mcpServers":{"NAME":{"type":"stdio","command":…,"args":[…],"env":{…}},
//	               "NAME":{"type":"http","url":…,"headers":{…}}}}
//
// with the servers in the order given and env and headers as objects.
func MCPServersJSON(servers []MCPServer) ([]byte, error) {
	var b strings.Builder
	b.WriteString(`{"mcpServers":{`)
	for i, s := range servers {
		if i > 0 {
			b.WriteByte(',')
		}
		name, err := json.Marshal(s.Name)
		if err != nil {
			return nil, err
		}
		b.Write(name)
		b.WriteByte(':')
		var v any
		switch s.Transport {
		case MCPStdio:
			v = struct {
				Type    string       `json:"type"`
				Command string       `json:"command"`
				Args    []string     `json:"args"`
				Env     nameValueMap `json:"env"`
			}{"stdio", s.Command, nonNil(s.Args), nameValueMap(s.Env)}
		case MCPHTTP:
			v = struct {
				Type    string       `json:"type"`
				URL     string       `json:"url"`
				Headers nameValueMap `json:"headers"`
			}{"http", s.URL, nameValueMap(s.Headers)}
		default:
			return nil, fmt.Errorf("MCP server %q: unknown transport %q", s.Name, s.Transport)
		}
		js, err := json.Marshal(v)
		if err != nil {
			return nil, err
		}
		b.Write(js)
	}
	b.WriteString(`}}`)
	return []byte(b.String()), nil
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// nameValueMap marshals as a JSON object in the slice's order.
type nameValueMap []NameValue

func (m nameValueMap) MarshalJSON() ([]byte, error) {
	var b strings.Builder
	b.WriteByte('{')
	for i, v := range m {
		if i > 0 {
			b.WriteByte(',')
		}
		k, err := json.Marshal(v.Name)
		if err != nil {
			return nil, err
		}
		val, err := json.Marshal(v.Value)
		if err != nil {
			return nil, err
		}
		b.Write(k)
		b.WriteByte(':')
		b.Write(val)
	}
	b.WriteByte('}')
	return []byte(b.String()), nil
}

// NameValueMap is vs as a JSON object (name to value) in vs's order: the
// form env and headers take in most providers' configurations.
func NameValueMap(vs []NameValue) json.Marshaler { return nameValueMap(vs) }

// MCPToolTitle is the title of a call of an MCP server's tool, the same
// for every provider: "SERVER/TOOL". A plugin puts the server and the
// tool in the item's detail as "mcpServer" and "mcpTool".
func MCPToolTitle(server, tool string) string { return server + "/" + tool }

// MCPToolOf reads an agent's name for an MCP tool, prefix + SERVER + sep
// + TOOL (claude-code-acp: "mcp__", "__"; opencode: "", "_"), as the tool
// of one of the servers named: the longest name that fits, since a name
// may hold sep. ok is false for a name of no server's tool.
func MCPToolOf(name, prefix, sep string, servers []string) (server, tool string, ok bool) {
	rest, found := strings.CutPrefix(name, prefix)
	if !found {
		return "", "", false
	}
	for _, s := range servers {
		if t, found := strings.CutPrefix(rest, s+sep); found && t != "" && len(s) > len(server) {
			server, tool, ok = s, t, true
		}
	}
	return server, tool, ok
}
