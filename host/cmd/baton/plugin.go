package main

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc/status"

	batonv1 "github.com/baton-run/baton/host/api/baton/v1"
	"github.com/baton-run/baton/host/internal/pluginhost"
	"github.com/baton-run/baton/sdk"
)

func pluginCommand(g *globals) *cobra.Command {
	c := &cobra.Command{
		Use:   "plugin",
		Short: "List, lock and install provider plugins",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return usagef("plugin: give a subcommand: list, lock or install (baton plugin --help)")
		},
	}
	var markdown bool
	list := &cobra.Command{
		Use:   "list",
		Short: "What each installed provider plugin can do",
		Long: `List starts each installed plugin, asks it to describe itself, and prints what
each provider can do. A service that answers (--server, or on the data
directory's socket) lists its own plugins.`,
		Example: `  baton plugin list
  baton plugin list --markdown > capabilities.md`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			descs, err := g.plugins(cmd.Context())
			if descs != nil {
				printPlugins(g.stdout, descs, markdown)
			}
			return err
		},
	}
	list.Flags().BoolVar(&markdown, "markdown", false, "print the capability matrix as Markdown")
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
	install := &cobra.Command{
		Use:     "install NAME FILE [DIR]",
		Short:   "Install a plugin binary (default DIR: DATA/plugins)",
		Example: `  baton plugin install myagent ./baton-plugin-myagent`,
		Args:    cobra.RangeArgs(2, 3),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := filepath.Join(g.data, "plugins")
			if len(args) == 3 {
				dir = args[2]
			}
			if err := pluginhost.Install(args[1], dir, args[0]); err != nil {
				return failf(exitFailed, "%v", err)
			}
			fmt.Fprintf(g.stdout, "installed plugin %s in %s\n", args[0], dir)
			return nil
		},
	}
	c.AddCommand(list, lock, install)
	return c
}

// plugins describes the installed plugins: the service's, when one
// answers; else those on this machine's search path, each started to ask
// (no host is embedded: the data dir stays free). The descriptions that
// could be had come back with the error of the rest.
func (g *globals) plugins(ctx context.Context) ([]sdk.Description, error) {
	var c *client
	if g.server != "" {
		var err error
		if c, err = g.dial(ctx, g.server, serverCheckTimeout); err != nil {
			return nil, failf(exitFailed, "server %s does not answer: %s", g.server, status.Convert(err).Message())
		}
	} else {
		c = g.local(ctx)
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
					ThreadSnapshot: cp.GetThreadSnapshot()}})
		}
		return descs, nil
	}
	m := pluginhost.New(pluginhost.Config{Dirs: append(append([]string(nil), g.pluginDirs...), pluginSearchPath(g.data)...)})
	defer m.Close()
	descs := []sdk.Description{}
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
		d := p.Description
		d.Name = name // the name the host knows it by
		descs = append(descs, d)
	}
	return descs, failed
}
