package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	batonv1 "github.com/baton-run/baton/host/api/baton/v1"
	"github.com/baton-run/baton/host/internal/agents"
)

// agentProvider is the provider an ACP Registry agent runs on.
const agentProvider = "acp"

func agentsCommand(g *globals) *cobra.Command {
	var registry string
	c := &cobra.Command{
		Use:   "agents",
		Short: "List, show, install, upgrade and remove ACP agents from the ACP Registry",
		Long: `Agents is a catalog of the agents that speak the Agent Client Protocol, read
from the ACP Registry, and pinned installs of them that baton run --agent ID
runs on the acp provider.

The registry is fetched from its address (or --registry URL|FILE, or
BATON_REGISTRY) and kept in DATA/agents with the time it was fetched; when it
cannot be reached, the kept copy is used and its age said. An install is
pinned: an npx agent is installed once with npm, at its exact version, into
DATA/agents/ID/VERSION (never npx at each run, which would take whatever is
newest); a binary agent's archive for this platform is downloaded, checked
against its SHA-256 when the registry gives one, and unpacked there. Each
install is recorded in DATA/agents/agents.lock (version, source, SHA-256,
command). A uvx agent is not installed yet: install it yourself and give
baton run --provider acp --provider-command its command.`,
		Example: `  baton agents list
  baton agents show gemini
  baton agents install gemini
  baton run --agent gemini "Explain main.go"
  baton agents upgrade gemini
  baton agents remove gemini`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return usagef("agents: give a subcommand: list, show, install, upgrade or remove (baton agents --help)")
		},
	}
	c.PersistentFlags().StringVar(&registry, "registry", "", "read the ACP Registry from this `url or file` (default: the registry's own address)")
	load := func(ctx context.Context) (*agents.Catalog, error) {
		cat, err := agents.Load(ctx, agents.Options{DataDir: g.data, Source: registry}) // BATON_REGISTRY fills --registry
		if err != nil {
			return nil, failf(exitFailed, "agents: %v", err)
		}
		if cat.FromCache {
			fmt.Fprintf(g.stderr, "baton: the ACP Registry cannot be read (%v); using the copy fetched %s\n", cat.FetchErr, ago(cat.Age()))
		}
		return cat, nil
	}
	c.AddCommand(agentsListCommand(g, load), agentsShowCommand(g, load), agentsInstallCommand(g, load),
		agentsUpgradeCommand(g, load), agentsRemoveCommand(g))
	return c
}

// distributionKinds are the ways an agent is distributed, as the registry
// names them.
func distributionKinds(d agents.Distribution) []string {
	var kinds []string
	if len(d.Binary) > 0 {
		kinds = append(kinds, string(agents.KindBinary))
	}
	if d.NPX != nil {
		kinds = append(kinds, string(agents.KindNPX))
	}
	if d.UVX != nil {
		kinds = append(kinds, string(agents.KindUVX))
	}
	return kinds
}

// distributionLines says each of an agent's distributions, and which one
// an install takes on platform.
func distributionLines(d agents.Distribution, platform string) []string {
	chosen, _ := agents.Distribution.Choose(d, platform)
	mark := func(k agents.Kind) string {
		if k == chosen {
			return " (what install takes here)"
		}
		return ""
	}
	withArgs := func(s string, args []string) string { return strings.Join(append([]string{s}, args...), " ") }
	var lines []string
	if len(d.Binary) > 0 {
		if t, ok := d.Binary[platform]; ok {
			lines = append(lines, fmt.Sprintf("binary: %s, runs %s%s", t.Archive, withArgs(t.Cmd, t.Args), mark(agents.KindBinary)))
		} else {
			lines = append(lines, fmt.Sprintf("binary: none for %s (only %s)", platform, strings.Join(slices.Sorted(maps.Keys(d.Binary)), ", ")))
		}
	}
	if d.NPX != nil {
		lines = append(lines, fmt.Sprintf("npx: %s%s", withArgs(d.NPX.Package, d.NPX.Args), mark(agents.KindNPX)))
	}
	if d.UVX != nil {
		lines = append(lines, fmt.Sprintf("uvx: %s (not installed by baton yet)", withArgs(d.UVX.Package, d.UVX.Args)))
	}
	return lines
}

// ago says how long ago, in words: "less than a minute ago", "3h0m ago".
func ago(d time.Duration) string {
	if d < time.Minute {
		return "less than a minute ago"
	}
	return strings.TrimSuffix(d.Round(time.Minute).String(), "0s") + " ago"
}

type loadCatalog func(context.Context) (*agents.Catalog, error)

// agentRow is an agent as list prints it.
type agentRow struct {
	ID           string `json:"id"`
	Name         string `json:"name"`
	Version      string `json:"version"`
	Distribution string `json:"distribution"`
	Installed    string `json:"installed,omitempty"` // the version installed
	Description  string `json:"description"`
}

func agentsListCommand(g *globals, load loadCatalog) *cobra.Command {
	var jsonOut bool
	c := &cobra.Command{
		Use:   "list",
		Short: "List the ACP Registry's agents and which are installed",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cat, err := load(cmd.Context())
			if err != nil {
				return err
			}
			installed, err := agents.Installed(g.data)
			if err != nil {
				return failf(exitFailed, "agents list: %v", err)
			}
			rows := []agentRow{}
			for _, a := range cat.Registry.Agents {
				rows = append(rows, agentRow{ID: a.ID, Name: a.Name, Version: a.Version, Distribution: strings.Join(distributionKinds(a.Distribution), ","),
					Installed: installed[a.ID].Version, Description: a.Description})
			}
			if jsonOut {
				b, _ := json.Marshal(rows)
				fmt.Fprintf(g.stdout, "%s\n", b)
				return nil
			}
			w := tabwriter.NewWriter(g.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "ID\tVERSION\tDISTRIBUTION\tINSTALLED\tNAME")
			for _, r := range rows {
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", r.ID, r.Version, r.Distribution, orDash(r.Installed), r.Name)
			}
			return w.Flush()
		},
	}
	c.Flags().BoolVar(&jsonOut, "json", false, "print the agents as one JSON array")
	return c
}

func agentsShowCommand(g *globals, load loadCatalog) *cobra.Command {
	return &cobra.Command{
		Use:   "show ID",
		Short: "Show one agent: its distributions, and its install if any",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cat, err := load(cmd.Context())
			if err != nil {
				return err
			}
			a, ok := cat.Registry.Agent(args[0])
			if !ok {
				return usagef("agents show: the ACP Registry has no agent %q (baton agents list lists them)", args[0])
			}
			in, err := agents.Lookup(g.data, a.ID)
			if err != nil && !errors.Is(err, agents.ErrNotInstalled) {
				return failf(exitFailed, "agents show: %v", err)
			}
			showAgent(g.stdout, a, in, err == nil)
			return nil
		},
	}
}

// showAgent prints an agent of the registry and its install.
func showAgent(w io.Writer, a agents.Agent, in agents.Installation, installed bool) {
	fmt.Fprintf(w, "%s · %s %s\n", a.ID, a.Name, a.Version)
	fmt.Fprintf(w, "  %s\n", a.Description)
	if a.Repository != "" {
		fmt.Fprintf(w, "  repository %s\n", a.Repository)
	}
	if a.License != "" {
		fmt.Fprintf(w, "  license %s\n", a.License)
	}
	for _, line := range distributionLines(a.Distribution, agents.Platform()) {
		fmt.Fprintf(w, "  %s\n", line)
	}
	if !installed {
		fmt.Fprintf(w, "  not installed (baton agents install %s)\n", a.ID)
		return
	}
	fmt.Fprintf(w, "  installed %s from %s", in.Version, in.Source)
	if in.SHA256 != "" {
		fmt.Fprintf(w, " (sha256 %s)", in.SHA256)
	}
	fmt.Fprintf(w, "\n  command %s\n", strings.Join(in.Command, " "))
	if in.Version != a.Version {
		fmt.Fprintf(w, "  the registry has %s: baton agents upgrade %s\n", a.Version, a.ID)
	}
}

func agentsInstallCommand(g *globals, load loadCatalog) *cobra.Command {
	var version string
	c := &cobra.Command{
		Use:   "install ID",
		Short: "Install an agent, pinned, into the data dir",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cat, err := load(cmd.Context())
			if err != nil {
				return err
			}
			if _, ok := cat.Registry.Agent(args[0]); !ok {
				return usagef("agents install: the ACP Registry has no agent %q (baton agents list lists them)", args[0])
			}
			in, err := agents.Install(cmd.Context(), cat, args[0], version)
			if err != nil {
				return failf(exitFailed, "agents install %s: %v", args[0], err)
			}
			fmt.Fprintf(g.stdout, "installed %s %s: %s\nrun it with: baton run --agent %s MESSAGE\n", in.ID, in.Version, strings.Join(in.Command, " "), in.ID)
			return nil
		},
	}
	c.Flags().StringVar(&version, "version", "", "install this `version` (default: the registry's)")
	return c
}

func agentsUpgradeCommand(g *globals, load loadCatalog) *cobra.Command {
	return &cobra.Command{
		Use:   "upgrade ID",
		Short: "Install the registry's version of an installed agent, and remove the old one",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if _, err := agents.Lookup(g.data, args[0]); errors.Is(err, agents.ErrNotInstalled) {
				return usagef("agents upgrade: %v", err)
			}
			cat, err := load(cmd.Context())
			if err != nil {
				return err
			}
			from, in, err := agents.Upgrade(cmd.Context(), cat, args[0])
			if err != nil {
				return failf(exitFailed, "agents upgrade %s: %v", args[0], err)
			}
			if in.Version == from {
				fmt.Fprintf(g.stdout, "%s %s is the registry's version; nothing changed\n", in.ID, in.Version)
				return nil
			}
			fmt.Fprintf(g.stdout, "upgraded %s %s -> %s: %s\n", in.ID, from, in.Version, strings.Join(in.Command, " "))
			return nil
		},
	}
}

func agentsRemoveCommand(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "remove ID",
		Short: "Remove an installed agent (threads that ran it keep their history)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			// The lock's entry, not Lookup: an install whose files are gone
			// is removed too.
			all, err := agents.Installed(g.data)
			if err != nil {
				return failf(exitFailed, "agents remove %s: %v", args[0], err)
			}
			version := all[args[0]].Version
			err = agents.Remove(g.data, args[0])
			switch {
			case errors.Is(err, agents.ErrNotInstalled):
				return usagef("agents remove: agent %s is not installed", args[0])
			case err != nil:
				return failf(exitFailed, "agents remove %s: %v", args[0], err)
			}
			fmt.Fprintf(g.stdout, "removed %s %s\n", args[0], version)
			return nil
		},
	}
}

// agentCommand is the provider command of the agent id installed in the
// data dir: refused, before anything is written, when it is not
// installed.
func agentCommand(verb, data, id string) (*batonv1.ProviderCommand, error) {
	in, err := agents.Lookup(data, id)
	if err != nil {
		return nil, usagef("%s: %v", verb, err)
	}
	return &batonv1.ProviderCommand{Argv: in.Command, Env: in.Environ(nil), Agent: in.ID, AgentVersion: in.Version}, nil
}
