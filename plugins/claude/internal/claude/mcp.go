package claude

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/baton-run/baton/sdk"
)

// mcpTransports are the MCP transports Claude Code takes in its
// --mcp-config: a command it starts (stdio) and a URL (streamable http).
var mcpTransports = []sdk.MCPTransport{sdk.MCPStdio, sdk.MCPHTTP}

// mcpStrictEnv, set to 1 in the provider command's environment, adds
// --strict-mcp-config: the CLI then uses the host's MCP servers only, none
// of the user's or the project's own.
const mcpStrictEnv = "BATON_MCP_STRICT"

// mcpConfigFile is the name of the file --mcp-config reads, in the
// session's private directory.
const mcpConfigFile = "mcp.json"

// mcpConfig is where a session's MCP servers are for the CLI: a file
// readable by its owner only, in a directory of its own that lives as long
// as the session (every CLI process of it reads the same file), so that
// the servers' env values and headers are in no process's argv.
type mcpConfig struct {
	dir  string // "" when there is no file
	args []string
}

// writeMCPConfig writes servers where the CLI reads them and returns the
// arguments that name them; strict adds --strict-mcp-config (with no
// server, the CLI then uses none). No servers and not strict: nothing.
func writeMCPConfig(servers []sdk.MCPServer, strict bool) (*mcpConfig, error) {
	c := &mcpConfig{}
	if len(servers) > 0 {
		js, err := sdk.MCPServersJSON(servers)
		if err != nil {
			return nil, fmt.Errorf("mcp config: %w", err)
		}
		dir, err := os.MkdirTemp("", "baton-claude-mcp-") // 0700
		if err != nil {
			return nil, fmt.Errorf("mcp config: %w", err)
		}
		file := filepath.Join(dir, mcpConfigFile)
		if err := os.WriteFile(file, js, 0o600); err != nil {
			_ = os.RemoveAll(dir)
			return nil, fmt.Errorf("mcp config: %w", err)
		}
		c.dir = dir
		c.args = []string{"--mcp-config", file}
	}
	if strict {
		c.args = append(c.args, "--strict-mcp-config")
	}
	return c, nil
}

// remove deletes the file and its directory.
func (c *mcpConfig) remove() error {
	if c == nil || c.dir == "" {
		return nil
	}
	if err := os.RemoveAll(c.dir); err != nil {
		return fmt.Errorf("remove mcp config: %w", err)
	}
	return nil
}

// mcpStrict says whether the provider command's environment asks for
// --strict-mcp-config (the last setting of mcpStrictEnv wins, as in exec).
func mcpStrict(env []string) bool {
	v := ""
	for _, kv := range env {
		if name, val, ok := strings.Cut(kv, "="); ok && name == mcpStrictEnv {
			v = val
		}
	}
	return v == "1"
}
