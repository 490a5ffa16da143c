package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	batonv1 "github.com/baton-run/baton/host/api/baton/v1"
	"github.com/baton-run/baton/host/internal/pluginhost"
	"github.com/baton-run/baton/sdk"
)

func pluginCommand(g *globals) *cobra.Command {
	c := &cobra.Command{
		Use:   "plugin",
		Short: "Install, list, verify, upgrade and remove provider plugins",
		Long: `A plugin is an executable baton-plugin-NAME in a plugin directory (beside
baton, then DATA/plugins, after any --plugin-dir) whose SHA-256, source and
self-description are recorded in the directory's plugins.lock. A binary
that differs from its record, or a directory or binary that group or
others may write, is refused at every start.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return usagef("plugin: give a subcommand: list, install, verify, upgrade, remove or lock (baton plugin --help)")
		},
	}
	var markdown, asJSON bool
	list := &cobra.Command{
		Use:   "list",
		Short: "What each installed provider plugin is and can do",
		Long: `List starts each installed plugin, asks it to describe itself, and prints
its name, version, plugin protocol version, source (from plugins.lock) and
capabilities. --markdown prints the README's capability matrix; a service
that answers (--server, or on the data directory's socket) lists its own
plugins for it.`,
		Example: `  baton plugin list
  baton plugin list --json
  baton plugin list --markdown > capabilities.md`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if markdown {
				descs, err := g.plugins(cmd.Context())
				if descs != nil {
					printPlugins(g.stdout, descs, true)
				}
				return err
			}
			rows, err := g.localPlugins(cmd.Context())
			printPluginRows(g.stdout, rows, asJSON)
			return err
		},
	}
	list.Flags().BoolVar(&markdown, "markdown", false, "print the capability matrix as Markdown")
	list.Flags().BoolVar(&asJSON, "json", false, "print one JSON object per plugin")
	list.MarkFlagsMutuallyExclusive("markdown", "json")
	lock := &cobra.Command{
		Use:     "lock DIR",
		Short:   "Record the SHA-256 of every plugin in DIR",
		Example: `  baton plugin lock ./bin`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			names, err := pluginhost.Lock(args[0])
			if err != nil {
				return failf(exitFailed, "%v", err)
			}
			fmt.Fprintf(g.stdout, "recorded %d plugins in %s: %v\n", len(names), filepath.Join(args[0], pluginhost.LockfileName), names)
			return nil
		},
	}
	var dir, name string
	install := &cobra.Command{
		Use:   "install (NAME FILE | PACKAGE@VERSION) [DIR]",
		Short: "Install a plugin from a binary or a Go module (default DIR: DATA/plugins)",
		Long: `Install copies a plugin binary into DIR as baton-plugin-NAME, or builds
PACKAGE@VERSION with 'go install' (your go command, GOPROXY, GOSUMDB and
GOFLAGS: by default the Go module proxy and checksum database) and copies
what it built. The binary is started first: one that is not a Baton plugin,
or speaks another plugin protocol version, is refused. Its SHA-256, source,
version and capabilities are then recorded in DIR/plugins.lock.

A module's plugin is named after its binary (X for baton-plugin-X, else the
binary's name); --name names it otherwise.`,
		Example: `  baton plugin install myagent ./baton-plugin-myagent
  baton plugin install github.com/you/baton-plugin-myagent@v1.2.0
  baton plugin install --name mine example.com/agents/cmd/agent@latest`,
		Args: cobra.RangeArgs(1, 3),
		RunE: func(cmd *cobra.Command, args []string) error {
			target := dir
			if target == "" {
				target = filepath.Join(g.data, "plugins")
			}
			var e pluginhost.LockEntry
			var err error
			installed := name
			if strings.Contains(args[0], "@") {
				if len(args) > 2 {
					return usagef("plugin install: PACKAGE@VERSION takes at most a DIR after it")
				}
				if len(args) == 2 {
					target = args[1]
				}
				e, installed, err = pluginhost.InstallModule(cmd.Context(), args[0], target, name, pluginhost.GoInstall{Output: g.stderr})
			} else {
				if len(args) < 2 {
					return usagef("plugin install: give NAME FILE, or PACKAGE@VERSION")
				}
				if name != "" {
					return usagef("plugin install: --name is for PACKAGE@VERSION; NAME FILE names the plugin already")
				}
				if len(args) == 3 {
					target = args[2]
				}
				installed = args[0]
				e, err = pluginhost.InstallFile(cmd.Context(), args[1], target, args[0])
			}
			if err != nil {
				return failf(exitFailed, "%v", err)
			}
			fmt.Fprintf(g.stdout, "installed plugin %s %s (%s) in %s\n", installed, e.Version, e.Source, target)
			return nil
		},
	}
	install.Flags().StringVar(&name, "name", "", "the plugin's `name` (PACKAGE@VERSION only; default: from the binary's name)")
	install.Flags().StringVar(&dir, "dir", "", "the plugin `directory` (default DATA/plugins)")
	verify := &cobra.Command{
		Use:   "verify [DIR...]",
		Short: "Check every plugin binary against its lockfile",
		Long: `Verify checks, without starting anything, that every plugin binary in each
DIR (default: the plugin search path) has the SHA-256 its plugins.lock
records, that every locked plugin is there, and that no directory or binary
is writable by group or others. It exits 1 naming each plugin that fails.`,
		Example: `  baton plugin verify
  baton plugin verify ./bin`,
		RunE: func(cmd *cobra.Command, args []string) error {
			dirs := args
			if len(dirs) == 0 {
				for _, d := range g.searchPath() {
					if fi, err := os.Stat(d); err == nil && fi.IsDir() {
						dirs = append(dirs, d)
					}
				}
			}
			return verifyPlugins(g, dirs)
		},
	}
	var pdir string
	upgrade := &cobra.Command{
		Use:   "upgrade NAME [VERSION]",
		Short: "Rebuild a plugin installed from a module, at its latest version or VERSION",
		Long: `Upgrade runs 'go install PACKAGE@latest' (or @VERSION) for a plugin installed
from a module, checks the new binary as install does, and replaces the old
one in a single rename. If anything fails, the old binary and its record stay.`,
		Example: `  baton plugin upgrade myagent
  baton plugin upgrade myagent v1.3.0`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			target := cmp.Or(pdir, filepath.Join(g.data, "plugins"))
			version := ""
			if len(args) == 2 {
				version = args[1]
			}
			old, e, err := pluginhost.Upgrade(cmd.Context(), target, args[0], version, pluginhost.GoInstall{Output: g.stderr})
			if err != nil {
				return failf(exitFailed, "%v", err)
			}
			fmt.Fprintf(g.stdout, "upgraded plugin %s: %s -> %s\n", args[0], old.Source, e.Source)
			return nil
		},
	}
	upgrade.Flags().StringVar(&pdir, "dir", "", "the plugin `directory` (default DATA/plugins)")
	remove := &cobra.Command{
		Use:     "remove NAME",
		Short:   "Delete a plugin and its record",
		Example: `  baton plugin remove myagent`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			target := cmp.Or(pdir, filepath.Join(g.data, "plugins"))
			if err := pluginhost.Remove(target, args[0]); err != nil {
				return failf(exitFailed, "%v", err)
			}
			fmt.Fprintf(g.stdout, "removed plugin %s from %s\n", args[0], target)
			return nil
		},
	}
	remove.Flags().StringVar(&pdir, "dir", "", "the plugin `directory` (default DATA/plugins)")
	c.AddCommand(list, install, verify, upgrade, remove, lock)
	return c
}

// searchPath is where this command's host looks for plugins, in order.
func (g *globals) searchPath() []string {
	return append(append([]string(nil), g.pluginDirs...), pluginSearchPath(g.data)...)
}

// verifyPlugins prints each plugin of dirs, a line each (NAME: ok: PATH,
// or NAME: PROBLEM: what is wrong and what to do), and fails naming the
// plugins that are not as locked.
func verifyPlugins(g *globals, dirs []string) error {
	var bad []string
	var failed error
	for _, d := range dirs {
		checks, err := pluginhost.Verify(d)
		if err != nil {
			fmt.Fprintf(g.stderr, "baton: %v\n", err)
			failed = silent(exitFailed)
			continue
		}
		for _, c := range checks {
			if c.Problem == "" {
				fmt.Fprintf(g.stdout, "%s: ok: %s\n", c.Name, c.Path)
				continue
			}
			fmt.Fprintf(g.stdout, "%s: %s: %s\n", c.Name, c.Problem, c.Detail)
			bad = append(bad, c.Name+" ("+c.Problem+")")
		}
	}
	if len(bad) > 0 {
		return failf(exitFailed, "plugin verify: %d failed: %s", len(bad), strings.Join(bad, ", "))
	}
	return failed
}

// pluginRow is one line of `baton plugin list`.
type pluginRow struct {
	Name         string   `json:"name"`
	Version      string   `json:"version"`
	SDKVersion   string   `json:"sdkVersion,omitempty"`
	Protocol     int      `json:"protocol"`
	WireProtocol string   `json:"wireProtocol"`
	Source       string   `json:"source,omitempty"`
	Capabilities []string `json:"capabilities"`
	Path         string   `json:"path"`
}

// localPlugins starts each plugin of this machine's search path and
// describes it, with where it came from (its lockfile record).
func (g *globals) localPlugins(ctx context.Context) ([]pluginRow, error) {
	rows := []pluginRow{}
	failed := g.eachLocalPlugin(ctx, func(name string, p *pluginhost.Plugin) {
		d := p.Description
		r := pluginRow{Name: name, Version: d.Version, SDKVersion: d.SDKVersion, Protocol: sdk.ProtocolVersion, WireProtocol: d.WireProtocol,
			Capabilities: append([]string{}, pluginhost.CapabilityNames(d.Capabilities)...), Path: p.Path}
		if lf, err := pluginhost.ReadLockfile(filepath.Dir(p.Path)); err == nil {
			r.Source = lf.Plugins[name].Source
		}
		rows = append(rows, r)
	})
	return rows, failed
}

// eachLocalPlugin starts each plugin of this machine's search path and
// gives it to fn; a plugin that does not start is reported on stderr, and
// the error says one did not.
func (g *globals) eachLocalPlugin(ctx context.Context, fn func(name string, p *pluginhost.Plugin)) error {
	m := pluginhost.New(pluginhost.Config{Dirs: g.searchPath()})
	defer m.Close()
	var failed error
	for _, name := range m.Installed() {
		pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		p, err := m.Get(pctx, name)
		cancel()
		if err != nil {
			fmt.Fprintf(g.stderr, "baton: %v\n", err)
			failed = silent(exitFailed)
			continue
		}
		fn(name, p)
	}
	return failed
}

func printPluginRows(w io.Writer, rows []pluginRow, asJSON bool) {
	if asJSON {
		enc := json.NewEncoder(w)
		for _, r := range rows {
			enc.Encode(r)
		}
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tVERSION\tPROTOCOL\tSOURCE\tCAPABILITIES")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", r.Name, cmp.Or(r.Version, "-"), r.Protocol, cmp.Or(r.Source, "-"),
			cmp.Or(strings.Join(r.Capabilities, ","), "-"))
	}
	tw.Flush()
}

// plugins describes the installed plugins: the service's, when one
// answers; else those on this machine's search path, each started to ask
// (no host is embedded: the data dir stays free). The descriptions that
// could be had come back with the error of the rest.
func (g *globals) plugins(ctx context.Context) ([]sdk.Description, error) {
	c, err := g.findService(ctx)
	if err != nil {
		return nil, err
	}
	if c != nil {
		defer c.close()
		resp, err := c.ListPlugins(ctx, &batonv1.ListPluginsRequest{})
		if err != nil {
			return nil, rpcError("list plugins", err)
		}
		descs := []sdk.Description{}
		for _, p := range resp.GetPlugins() {
			cp := p.GetCapabilities()
			descs = append(descs, sdk.Description{Name: p.GetName(), Version: p.GetVersion(), WireProtocol: p.GetWireProtocol(), Notes: p.GetNotes(),
				Capabilities: sdk.Capabilities{NativeSteering: cp.GetNativeSteering(), Interrupt: cp.GetInterrupt(), Approvals: cp.GetApprovals(),
					Subagents: cp.GetSubagents(), NativeRollback: cp.GetNativeRollback(), Resume: cp.GetResume(),
					ThreadSnapshot: cp.GetThreadSnapshot()}, MCPTransports: mcpTransportsOf(p.GetMcpTransports())})
		}
		return descs, nil
	}
	descs := []sdk.Description{}
	failed := g.eachLocalPlugin(ctx, func(name string, p *pluginhost.Plugin) {
		d := p.Description
		d.Name = name // the name the host knows it by
		descs = append(descs, d)
	})
	return descs, failed
}

// mcpTransportsOf are the MCP transports the API names for a plugin.
func mcpTransportsOf(names []string) []sdk.MCPTransport {
	var ts []sdk.MCPTransport
	for _, n := range names {
		ts = append(ts, sdk.MCPTransport(n))
	}
	return ts
}
