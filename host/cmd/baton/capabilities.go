package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/baton-run/baton/sdk"
)

// printPlugins prints what each provider can do; markdown prints the
// README's capability matrix, with what the host does where a capability is
// missing.
func printPlugins(w io.Writer, descs []sdk.Description, markdown bool) {
	if markdown {
		fmt.Fprint(w, capabilityMatrix(descs))
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PROVIDER\tVERSION\tSTEERING\tINTERRUPT\tAPPROVALS\tSUBAGENTS\tROLLBACK\tRESUME\tMCP\tWIRE PROTOCOL")
	for _, d := range descs {
		c := d.Capabilities
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", d.Name, d.Version, steering(c), yesNo(c.Interrupt),
			yesNo(c.Approvals), yesNo(c.Subagents), rollback(c), yesNo(c.Resume), mcpTransports(d), d.WireProtocol)
	}
	tw.Flush()
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func steering(c sdk.Capabilities) string {
	if c.NativeSteering {
		return "native"
	}
	return "by restart"
}

func rollback(c sdk.Capabilities) string {
	if c.NativeRollback {
		return "native"
	}
	return "fresh thread + handoff"
}

// capabilityMatrix is the README's table: one row per provider, then what
// the host does for each capability a provider lacks.
func capabilityMatrix(descs []sdk.Description) string {
	var b strings.Builder
	b.WriteString("| provider | plugin version | wire protocol | steering | interrupt | approvals | subagents | rollback | resume | MCP servers |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|\n")
	for _, d := range descs {
		c := d.Capabilities
		note := func(key, cell string) string {
			if n := d.Notes[key]; n != "" {
				return cell + " (" + strings.ReplaceAll(n, "|", "\\|") + ")"
			}
			return cell
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", d.Name, d.Version, d.WireProtocol,
			note(sdk.NoteSteering, steering(c)), note(sdk.NoteInterrupt, yesNo(c.Interrupt)), note(sdk.NoteApprovals, yesNo(c.Approvals)),
			note(sdk.NoteSubagents, yesNo(c.Subagents)), note(sdk.NoteRollback, rollback(c)), note(sdk.NoteResume, yesNo(c.Resume)),
			note(sdk.NoteMCP, mcpTransports(d)))
	}
	var lacking []string
	for _, l := range degradations {
		for _, d := range descs {
			if l.lacks(d.Capabilities) {
				lacking = append(lacking, l.text)
				break
			}
		}
	}
	if len(lacking) > 0 {
		b.WriteString("\nWhere a provider lacks a capability, the host degrades by policy (the plugin never pretends):\n\n")
		for _, l := range lacking {
			b.WriteString("- " + l + "\n")
		}
	}
	return b.String()
}

// degradations say what the host does where a provider lacks a capability.
var degradations = []struct {
	lacks func(sdk.Capabilities) bool
	text  string
}{
	{func(c sdk.Capabilities) bool { return !c.NativeSteering },
		"**steering by restart**: a message sent to a running run interrupts the active attempt and starts a replacement attempt of the same run that carries it (no new run)."},
	{func(c sdk.Capabilities) bool { return !c.Interrupt },
		"**interrupt no**: the plugin refuses an interrupt; the run ends when the provider ends its turn."},
	{func(c sdk.Capabilities) bool { return !c.Approvals },
		"**approvals no**: the provider asks nothing while it runs; what it may do is fixed when it starts (its own permission settings), so `--approve` has nothing to answer."},
	{func(c sdk.Capabilities) bool { return !c.Subagents },
		"**subagents no**: work the provider delegates shows as items of the root turn, with no child turns or checkpoints of its own."},
	{func(c sdk.Capabilities) bool { return !c.NativeRollback },
		"**rollback fresh thread + handoff**: files are restored from the checkpoint as for every provider; the provider's conversation is left behind, and the next run starts a fresh one whose first turn carries a handoff (what was asked, answered and changed in the runs that remain)."},
	{func(c sdk.Capabilities) bool { return !c.Resume },
		"**resume no**: a thread continued in a new session (a restarted host) starts a new provider conversation; a thread that switches back to the provider gets a fresh conversation whose first turn carries a full summary (`full_thread_summary`), not a delta."},
}

// mcpTransports is how a plugin passes on MCP servers: "stdio, http", or
// "no".
func mcpTransports(d sdk.Description) string {
	if len(d.MCPTransports) == 0 {
		return "no"
	}
	w := make([]string, len(d.MCPTransports))
	for i, t := range d.MCPTransports {
		w[i] = string(t)
	}
	return strings.Join(w, ", ")
}
