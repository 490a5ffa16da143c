package domain

import (
	"fmt"
	"slices"
	"strings"
)

// MCP servers in a thread. The host keeps the servers its user configured
// (for every thread, or for one) with their secrets; the domain sees them
// as MCPServerRefs, by name, transport and revision, and decides which a
// run's session gets: the run's own choice (MCPChoice) or the configured
// ones. A session keeps the servers it was opened with; a run whose
// servers differ (one added, removed or changed since) gets a new session,
// which resumes the provider's conversation.

// MCPServerRef is an MCP server as the log names it: never its secrets.
type MCPServerRef struct {
	Name string `json:"name"`
	// Transport is how the provider reaches it: stdio or http.
	Transport string `json:"transport"`
	// Thread, when set, is the one thread the server is configured for.
	Thread string `json:"thread,omitempty"`
	// Revision is bumped by every change to the server's configuration.
	Revision int `json:"revision"`
}

// MCPChoice is a run's own choice of MCP servers: those Names, or None.
type MCPChoice struct {
	Names []string `json:"names,omitempty"`
	None  bool     `json:"none,omitempty"`
}

// check refuses a choice of both servers and none, or of a server the
// host has not configured (naming those it has).
func (c *MCPChoice) check(env Env) error {
	if c == nil {
		return nil
	}
	if c.None && len(c.Names) > 0 {
		return fmt.Errorf("%w: mcp: choose MCP servers or none, not both", ErrInvalid)
	}
	var have []MCPServerRef
	if env.MCP != nil {
		have = env.MCP()
	}
	for _, n := range c.Names {
		if !slices.ContainsFunc(have, func(r MCPServerRef) bool { return r.Name == n }) {
			return fmt.Errorf("%w: mcp: no MCP server is named %q (configured: %s; baton mcp add adds one)", ErrInvalid, n, mcpNames(have))
		}
	}
	return nil
}

// MCPFor is the MCP servers the run runID's session gets: the run's
// choice (a server it named that is no longer configured is left out,
// saying so), else every server configured for all threads or for this
// one. No run (a rollback's session) gets the configured ones.
func (t *Thread) MCPFor(runID string, env Env, d *Decision) []MCPServerRef {
	if env.MCP == nil {
		return nil
	}
	all := env.MCP()
	c := t.runMCP(runID)
	var out []MCPServerRef
	switch {
	case c == nil:
		for _, r := range all {
			if r.Thread == "" || r.Thread == t.ID {
				out = append(out, r)
			}
		}
	case c.None:
	default:
		for _, n := range c.Names {
			i := slices.IndexFunc(all, func(r MCPServerRef) bool { return r.Name == n })
			if i < 0 {
				d.emit(DiagnosticRecorded{RunID: runID, Title: "an MCP server the run named is no longer configured",
					Text: fmt.Sprintf("the run asked for MCP server %q, which was removed; it runs without it", n)})
				continue
			}
			out = append(out, all[i])
		}
		slices.SortFunc(out, func(a, b MCPServerRef) int { return strings.Compare(a.Name, b.Name) })
	}
	return out
}

// runMCP is the run's own choice of MCP servers (nil: none, or no run).
func (t *Thread) runMCP(runID string) *MCPChoice {
	if r := t.run(runID); r != nil {
		return r.MCP
	}
	return nil
}

// lastRunMCP is the last run's own choice of MCP servers.
func (t *Thread) lastRunMCP() *MCPChoice {
	if n := len(t.Runs); n > 0 {
		return t.Runs[n-1].MCP
	}
	return nil
}

// mcpNames names servers for a message: "a, b", or "none".
func mcpNames(rs []MCPServerRef) string {
	if len(rs) == 0 {
		return "none"
	}
	names := make([]string, len(rs))
	for i, r := range rs {
		names[i] = r.Name
	}
	return strings.Join(names, ", ")
}
