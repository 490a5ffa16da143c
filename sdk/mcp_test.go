package sdk

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var (
	stdioServer = MCPServer{Name: "fs", Transport: MCPStdio, Command: "mcp-fs", Args: []string{"--root", "/w"},
		Env: []NameValue{{Name: "B", Value: "2"}, {Name: "A", Value: "s3cret"}}}
	httpServer = MCPServer{Name: "web", Transport: MCPHTTP, URL: "https://127.0.0.1:9/mcp",
		Headers: []NameValue{{Name: "Authorization", Value: "Bearer tok"}}}
)

func TestMCPServerCheck(t *testing.T) {
	for _, tc := range []struct {
		s    MCPServer
		want string
	}{
		{stdioServer, ""},
		{httpServer, ""},
		{MCPServer{Transport: MCPStdio, Command: "x"}, "an MCP server has no name"},
		{MCPServer{Name: "a b", Transport: MCPStdio, Command: "x"}, `MCP server name "a b": use letters, digits, '-' and '_'`},
		{MCPServer{Name: "a", Transport: MCPStdio}, `MCP server "a" (stdio) has no command`},
		{MCPServer{Name: "a", Transport: MCPStdio, Command: "x", URL: "http://h"}, `MCP server "a" (stdio) has a URL or headers, which only an http server takes`},
		{MCPServer{Name: "a", Transport: MCPHTTP, URL: "ftp://h"}, `MCP server "a" (http): URL "ftp://h" is not an http or https URL`},
		{MCPServer{Name: "a", Transport: MCPHTTP, URL: "http://h", Command: "x"}, `MCP server "a" (http) has a command, which only a stdio server takes`},
		{MCPServer{Name: "a", Transport: "sse", URL: "http://h"}, `MCP server "a": unknown transport "sse" (stdio or http)`},
		{MCPServer{Name: "a", Transport: MCPStdio, Command: "x", Env: []NameValue{{Name: "A=B"}}}, `MCP server "a": env name "A=B" is empty or holds '=' or a line break`},
		{MCPServer{Name: "a", Transport: MCPHTTP, URL: "http://h", Headers: []NameValue{{}}}, `MCP server "a": header name "" is empty or holds '=' or a line break`},
	} {
		got := ""
		if err := tc.s.Check(); err != nil {
			got = err.Error()
		}
		if got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.s, got, tc.want)
		}
	}
}

func TestCheckMCPServers(t *testing.T) {
	if err := CheckMCPServers("acp", []MCPTransport{MCPStdio, MCPHTTP}, []MCPServer{stdioServer, httpServer}); err != nil {
		t.Fatal(err)
	}
	err := CheckMCPServers("claude", []MCPTransport{MCPStdio}, []MCPServer{stdioServer, httpServer})
	var te *MCPTransportError
	if !errors.As(err, &te) || err.Error() != `claude cannot take MCP server "web" over http (it takes only stdio)` {
		t.Errorf("http server to a stdio-only provider: %v", err)
	}
	err = CheckMCPServers("old", nil, []MCPServer{stdioServer})
	if err == nil || err.Error() != `old cannot take MCP server "fs" over stdio (it takes no MCP server at all)` {
		t.Errorf("a server to a plugin that takes none: %v", err)
	}
	err = CheckMCPServers("acp", []MCPTransport{MCPStdio}, []MCPServer{stdioServer, stdioServer})
	if err == nil || err.Error() != `two MCP servers are named "fs"` {
		t.Errorf("two of one name: %v", err)
	}
	if err := CheckMCPServers("acp", []MCPTransport{MCPStdio}, []MCPServer{{Name: "x", Transport: MCPStdio}}); err == nil {
		t.Error("a server without a command passed")
	}
}

func TestMCPServerRedacted(t *testing.T) {
	want := MCPServer{Name: "fs", Transport: MCPStdio, Command: "mcp-fs", Args: []string{"--root", "/w"},
		Env: []NameValue{{Name: "B", Value: "***"}, {Name: "A", Value: "***"}}}
	if diff := cmp.Diff(want, stdioServer.Redacted()); diff != "" {
		t.Errorf("redacted (-want +got):\n%s", diff)
	}
	if stdioServer.Env[1].Value != "s3cret" {
		t.Error("Redacted changed the server it was called on")
	}
	if diff := cmp.Diff([]string{"2", "s3cret", "Bearer tok"}, MCPSecrets([]MCPServer{stdioServer, httpServer})); diff != "" {
		t.Errorf("secrets (-want +got):\n%s", diff)
	}
}

func TestMCPServersJSON(t *testing.T) {
	b, err := MCPServersJSON([]MCPServer{stdioServer, httpServer, {Name: "bare", Transport: MCPStdio, Command: "b"}})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"mcpServers":{"fs":{"type":"stdio","command":"mcp-fs","args":["--root","/w"],"env":{"B":"2","A":"s3cret"}},` +
		`"web":{"type":"http","url":"https://127.0.0.1:9/mcp","headers":{"Authorization":"Bearer tok"}},` +
		`"bare":{"type":"stdio","command":"b","args":[],"env":{}}}}`
	if string(b) != want {
		t.Errorf("got  %s\nwant %s", b, want)
	}
	if _, err := MCPServersJSON([]MCPServer{{Name: "x", Transport: "sse"}}); err == nil {
		t.Error("an unknown transport was written")
	}
}

func TestMCPToolOf(t *testing.T) {
	servers := []string{"gh", "gh_enterprise", "fs"}
	for _, c := range []struct {
		name, prefix, sep string
		want              [3]string
	}{
		{"mcp__fs__read", "mcp__", "__", [3]string{"fs", "read", "ok"}},
		{"mcp__gh__list", "mcp__", "__", [3]string{"gh", "list", "ok"}},
		{"gh_enterprise_list_repos", "", "_", [3]string{"gh_enterprise", "list_repos", "ok"}},
		{"gh_list", "", "_", [3]string{"gh", "list", "ok"}},
		{"mcp__other__x", "mcp__", "__", [3]string{}},
		{"fs__", "", "__", [3]string{}},
		{"Read", "mcp__", "__", [3]string{}},
	} {
		s, tool, ok := MCPToolOf(c.name, c.prefix, c.sep, servers)
		got := [3]string{s, tool, ""}
		if ok {
			got[2] = "ok"
		}
		if got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
	if MCPToolTitle("fs", "read") != "fs/read" {
		t.Error("title")
	}
}
