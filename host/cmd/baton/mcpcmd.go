package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	batonv1 "github.com/baton-run/baton/host/api/baton/v1"
	"github.com/baton-run/baton/host/internal/mcpconf"
	"github.com/baton-run/baton/sdk"
)

func mcpCommand(g *globals) *cobra.Command {
	c := &cobra.Command{
		Use:   "mcp",
		Short: "Add, list, show and remove the MCP servers every provider's agents may use",
		Long: `MCP keeps the data dir's MCP servers, configured once for every provider:
each plugin passes them to its agent in the agent's own form when a session
opens (ACP session/new, codex's mcp_servers, claude's --mcp-config,
opencode's mcp configuration). A server is for every thread (the default)
or for one (--thread); baton run --mcp NAME,... gives a run those servers
only, and --no-mcp none.

A server reached over stdio is a command the agent starts; one reached over
http is a URL (MCP's streamable HTTP). A provider that cannot take a
server's transport refuses the run before its session opens, naming the
provider and the transport.

The servers are saved in DATA/` + mcpconf.FileName + ` (mode 0600). Env values and headers
may be secrets: they go to the agent and nowhere else; list and show print
them as ***, and the event log names a server by name and revision only.
A change takes effect at each thread's next run, which opens a new session
(resuming the provider's conversation) when its servers changed.`,
		Example: `  baton mcp add fs -- npx -y @modelcontextprotocol/server-filesystem /src
  baton mcp add search --url https://mcp.example/search --header "Authorization=Bearer $TOKEN"
  baton mcp add db --env-file ~/.config/db.env --thread thr_123 -- db-mcp --readonly
  baton mcp list
  baton mcp show fs
  baton mcp remove fs
  baton run --provider claude --mcp fs "List the files under /src"`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return usagef("mcp: give a subcommand: add, list, show or remove (baton mcp --help)")
		},
	}
	c.AddCommand(mcpAddCommand(g), mcpListCommand(g), mcpShowCommand(g), mcpRemoveCommand(g))
	return c
}

func mcpAddCommand(g *globals) *cobra.Command {
	var url, thread string
	var headers, env, envFiles []string
	c := &cobra.Command{
		Use:   "add NAME (-- COMMAND [ARG...] | --url URL)",
		Short: "Save an MCP server: a command (stdio) or a URL (http)",
		Long: `Add saves the MCP server NAME (letters, digits, '-' and '_'): the command
after -- (reached over stdio), or --url (streamable HTTP). --env K=V adds
to a stdio server's environment (--env K alone takes K's value from this
environment), --env-file reads K=V lines (# comments and blank lines
skipped), --header K=V adds an HTTP header. Adding a NAME again replaces
it.`,
		Example: `  baton mcp add fs -- npx -y @modelcontextprotocol/server-filesystem /src
  baton mcp add search --url https://mcp.example/search --header "Authorization=Bearer $TOKEN"
  baton mcp add gh --env GITHUB_TOKEN -- github-mcp-server stdio`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name, command := args[0], []string(nil)
			if dash := cmd.ArgsLenAtDash(); dash >= 0 {
				if dash != 1 {
					return usagef("mcp add: give NAME, then -- and the server's command")
				}
				command = args[1:]
			} else if len(args) > 1 {
				return usagef("mcp add: a server's command goes after --: baton mcp add %s -- %s", name, strings.Join(args[1:], " "))
			}
			s := mcpconf.Server{MCPServer: sdk.MCPServer{Name: name}, Thread: thread}
			switch {
			case len(command) > 0 && url != "":
				return usagef("mcp add: give a command (after --) or --url, not both")
			case len(command) > 0:
				s.Transport, s.Command, s.Args = sdk.MCPStdio, command[0], command[1:]
			case url != "":
				s.Transport, s.URL = sdk.MCPHTTP, url
			default:
				return usagef("mcp add: give the server's command after -- (stdio), or --url URL (http)")
			}
			var err error
			if s.Env, err = envValues(env, envFiles); err != nil {
				return usagef("mcp add: %v", err)
			}
			if s.Headers, err = nameValues("--header", headers); err != nil {
				return usagef("mcp add: %v", err)
			}
			if s.Transport == sdk.MCPHTTP && len(s.Env) > 0 {
				return usagef("mcp add: --env and --env-file are a stdio server's (its command's environment); an http server takes --header")
			}
			if err := s.Check(); err != nil {
				return usagef("mcp add: %v", err)
			}
			if err := g.checkData(); err != nil {
				return err
			}
			if thread != "" { // a server for a thread that is not would never be used
				if err := withReader(cmd, g, func(ctx context.Context, c *client) error {
					_, err := c.GetThread(ctx, &batonv1.GetThreadRequest{ThreadId: thread, MaxRuns: 1})
					if status.Code(err) == codes.NotFound {
						return usagef("mcp add: --thread %s: no such thread (baton threads lists them)", thread)
					} else if err != nil {
						return rpcError("mcp add", err)
					}
					return nil
				}); err != nil {
					return err
				}
			}
			if err := os.MkdirAll(g.data, 0o700); err != nil {
				return failf(exitFailed, "mcp add: %v", err)
			}
			f, err := mcpconf.Load(g.data)
			if err != nil {
				return failf(exitFailed, "mcp add: %v", err)
			}
			replaced, err := f.Add(s)
			if err != nil {
				return usagef("mcp add: %v", err)
			}
			if err := mcpconf.Save(g.data, f); err != nil {
				return failf(exitFailed, "mcp add: %v", err)
			}
			verb := "saved"
			if replaced {
				verb = "replaced"
			}
			fmt.Fprintf(g.stdout, "%s MCP server %s (%s, %s); each thread's next run takes it\n", verb, name, s.Transport, mcpScope(s))
			return nil
		},
	}
	fl := c.Flags()
	fl.StringVar(&url, "url", "", "the server's `URL` (streamable HTTP)")
	fl.StringArrayVar(&headers, "header", nil, "an HTTP header `K=V` (repeatable)")
	fl.StringArrayVar(&env, "env", nil, "an environment variable `K=V` for the server's command, or K for this environment's value (repeatable)")
	fl.StringArrayVar(&envFiles, "env-file", nil, "read K=V lines from this `file` (repeatable)")
	fl.StringVar(&thread, "thread", "", "give the server to this thread `id` only (default: every thread)")
	return c
}

// envValues are --env's and --env-file's variables, the files' first.
func envValues(env, files []string) ([]sdk.NameValue, error) {
	var out []sdk.NameValue
	for _, path := range files {
		vs, err := readEnvFile(path)
		if err != nil {
			return nil, err
		}
		out = append(out, vs...)
	}
	for _, e := range env {
		if !strings.Contains(e, "=") {
			v, ok := os.LookupEnv(e)
			if !ok {
				return nil, fmt.Errorf("--env %s: %s is not set in this environment (give --env %s=VALUE)", e, e, e)
			}
			e += "=" + v
		}
		vs, err := nameValues("--env", []string{e})
		if err != nil {
			return nil, err
		}
		out = append(out, vs...)
	}
	return out, nil
}

// readEnvFile reads K=V lines; blank lines and # comments are skipped,
// and a value in matching quotes loses them.
func readEnvFile(path string) ([]sdk.NameValue, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("--env-file: %w", err)
	}
	defer f.Close()
	var out []sdk.NameValue
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(strings.TrimPrefix(line, "export "), "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return nil, fmt.Errorf("--env-file %s:%d: want KEY=VALUE, got %q", path, n, firstWords(line))
		}
		v = strings.TrimSpace(v)
		if len(v) >= 2 && (v[0] == '"' || v[0] == '\'') && v[len(v)-1] == v[0] {
			v = v[1 : len(v)-1]
		}
		out = append(out, sdk.NameValue{Name: k, Value: v})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("--env-file %s: %w", path, err)
	}
	return out, nil
}

// firstWords is the start of a line an error quotes: never a whole value,
// which may be a secret.
func firstWords(line string) string {
	if k, _, ok := strings.Cut(line, " "); ok {
		return k + " ..."
	}
	if len(line) > 16 {
		return line[:16] + "..."
	}
	return line
}

// nameValues reads K=V words.
func nameValues(flag string, words []string) ([]sdk.NameValue, error) {
	var out []sdk.NameValue
	for _, w := range words {
		k, v, ok := strings.Cut(w, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("%s: want NAME=VALUE, got %q", flag, firstWords(w))
		}
		out = append(out, sdk.NameValue{Name: k, Value: v})
	}
	return out, nil
}

func mcpScope(s mcpconf.Server) string {
	if s.Thread == "" {
		return "every thread"
	}
	return "thread " + s.Thread
}

// mcpTarget is what a server runs or reaches, as list shows it.
func mcpTarget(s sdk.MCPServer) string {
	if s.Transport == sdk.MCPHTTP {
		return s.URL
	}
	return strings.Join(append([]string{s.Command}, s.Args...), " ")
}

// mcpShown is a server as list --json and show print it: redacted.
type mcpShown struct {
	sdk.MCPServer
	Thread   string `json:"thread,omitempty"`
	Revision int    `json:"revision"`
}

func shown(s mcpconf.Server) mcpShown {
	return mcpShown{MCPServer: s.Redacted(), Thread: s.Thread, Revision: s.Revision}
}

func mcpListCommand(g *globals) *cobra.Command {
	var jsonOut bool
	c := &cobra.Command{
		Use:   "list",
		Short: "The MCP servers, with their transport, scope and command or URL",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f, err := mcpconf.Load(g.data)
			if err != nil {
				return failf(exitFailed, "mcp list: %v", err)
			}
			if jsonOut {
				out := make([]mcpShown, len(f.Servers))
				for i, s := range f.Servers {
					out[i] = shown(s)
				}
				return json.NewEncoder(g.stdout).Encode(out)
			}
			if len(f.Servers) == 0 {
				fmt.Fprintln(g.stdout, "no MCP server (baton mcp add NAME -- COMMAND, or --url URL)")
				return nil
			}
			w := tabwriter.NewWriter(g.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "NAME\tTRANSPORT\tFOR\tCOMMAND OR URL")
			for _, s := range f.Servers {
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", s.Name, s.Transport, mcpScope(s), mcpTarget(s.MCPServer))
			}
			return w.Flush()
		},
	}
	c.Flags().BoolVar(&jsonOut, "json", false, "print the servers as a JSON array (env values and headers as ***)")
	return c
}

func mcpShowCommand(g *globals) *cobra.Command {
	var jsonOut bool
	c := &cobra.Command{
		Use:   "show NAME",
		Short: "One MCP server, whole (env values and headers as ***)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			f, err := mcpconf.Load(g.data)
			if err != nil {
				return failf(exitFailed, "mcp show: %v", err)
			}
			s, ok := f.Get(args[0])
			if !ok {
				return usagef("mcp show: no MCP server is named %q (baton mcp list shows them)", args[0])
			}
			if jsonOut {
				return json.NewEncoder(g.stdout).Encode(shown(s))
			}
			r := s.Redacted()
			w := tabwriter.NewWriter(g.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintf(w, "name\t%s\ntransport\t%s\nfor\t%s\nrevision\t%d\n", r.Name, r.Transport, mcpScope(s), s.Revision)
			if r.Transport == sdk.MCPHTTP {
				fmt.Fprintf(w, "url\t%s\n", r.URL)
			} else {
				fmt.Fprintf(w, "command\t%s\n", mcpTarget(r))
			}
			for _, v := range r.Env {
				fmt.Fprintf(w, "env\t%s=%s\n", v.Name, v.Value)
			}
			for _, v := range r.Headers {
				fmt.Fprintf(w, "header\t%s: %s\n", v.Name, v.Value)
			}
			return w.Flush()
		},
	}
	c.Flags().BoolVar(&jsonOut, "json", false, "print the server as JSON")
	return c
}

func mcpRemoveCommand(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "remove NAME",
		Short: "Remove an MCP server",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			f, err := mcpconf.Load(g.data)
			if err != nil {
				return failf(exitFailed, "mcp remove: %v", err)
			}
			if !f.Remove(args[0]) {
				return usagef("mcp remove: no MCP server is named %q (baton mcp list shows them)", args[0])
			}
			if err := mcpconf.Save(g.data, f); err != nil {
				return failf(exitFailed, "mcp remove: %v", err)
			}
			fmt.Fprintf(g.stdout, "removed MCP server %s; each thread's next run goes without it\n", args[0])
			return nil
		},
	}
}

// showMCP says which MCP servers each run's sessions had (by name and
// revision; a thread that never had one shows nothing), and a run's own
// choice (--mcp, --no-mcp).
func showMCP(w io.Writer, t *batonv1.Thread) {
	sessions := make(map[string][]*batonv1.McpServerRef, len(t.GetProviderSessions()))
	some := false
	for _, s := range t.GetProviderSessions() {
		sessions[s.GetId()] = s.GetMcp()
		some = some || len(s.GetMcp()) > 0
	}
	for _, r := range t.GetRuns() {
		some = some || r.GetMcp() != nil
	}
	if !some {
		return
	}
	fmt.Fprintf(w, "\nMCP servers:\n")
	for _, r := range t.GetRuns() {
		var names []string
		seen := map[string]bool{}
		for _, a := range r.GetAttempts() {
			if a.GetSessionId() == "" || seen[a.GetSessionId()] {
				continue
			}
			seen[a.GetSessionId()] = true
			for _, m := range sessions[a.GetSessionId()] {
				names = append(names, fmt.Sprintf("%s (%s, rev %d)", m.GetName(), m.GetTransport(), m.GetRevision()))
			}
		}
		had := "none"
		if len(names) > 0 {
			had = strings.Join(names, ", ")
		}
		switch c := r.GetMcp(); {
		case c.GetNone():
			had += "  (--no-mcp)"
		case len(c.GetNames()) > 0:
			had += "  (--mcp " + strings.Join(c.GetNames(), ",") + ")"
		}
		if len(r.GetAttempts()) == 0 {
			had = "not started"
		}
		fmt.Fprintf(w, "  run %d  %s\n", r.GetOrdinal(), had)
	}
}
