package opencode

import (
	"encoding/json"
	"os"
	"strings"

	"github.com/baton-run/baton/sdk"
)

// permissionPolicy maps the host's runtime policy to opencode's permission
// config. The default asks the host before every command and every edit;
// "allow" lets opencode do both without asking.
func permissionPolicy(runtimePolicy string) (map[string]string, error) {
	switch runtimePolicy {
	case "", "ask":
		return map[string]string{"bash": "ask", "edit": "ask"}, nil
	case "allow":
		return map[string]string{"bash": "allow", "edit": "allow"}, nil
	}
	return nil, sdk.Errorf(sdk.ErrInvalid, "runtime policy %q: want empty or ask (ask the host before commands and edits), or allow", runtimePolicy)
}

// configEnv returns OPENCODE_CONFIG_CONTENT with the permission policy and
// the host's MCP servers set: the value opencode would get otherwise (the
// command's env, else the plugin's own), if any, with "permission"
// replaced and the servers added to its "mcp" (over any of the same name).
// The value holds the servers' secrets: it goes to opencode's environment
// and nowhere else.
func configEnv(env []string, permission map[string]string, servers []sdk.MCPServer) (string, error) {
	cfg := map[string]any{}
	for _, kv := range append(os.Environ(), env...) {
		if v, ok := strings.CutPrefix(kv, "OPENCODE_CONFIG_CONTENT="); ok && strings.TrimSpace(v) != "" {
			cfg = map[string]any{}
			if err := json.Unmarshal([]byte(v), &cfg); err != nil {
				return "", sdk.Errorf(sdk.ErrInvalid, "the provider command's OPENCODE_CONFIG_CONTENT is not a JSON object: %v", err)
			}
		}
	}
	cfg["permission"] = permission
	if mcp := mcpConfig(servers); mcp != nil {
		merged, _ := cfg["mcp"].(map[string]any)
		if merged == nil {
			merged = map[string]any{}
		}
		for name, s := range mcp {
			merged[name] = s
		}
		cfg["mcp"] = merged
	}
	b, _ := json.Marshal(cfg)
	return "OPENCODE_CONFIG_CONTENT=" + string(b), nil
}
