package main

import (
	"cmp"
	"context"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/google/shlex"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	batonv1 "github.com/baton-run/baton/host/api/baton/v1"
	"github.com/baton-run/baton/host/internal/domain"
	"github.com/baton-run/baton/host/internal/ids"
)

// Provider switch: run --thread, send and switch take --provider, --model,
// --provider-command and --handoff-max-bytes, and send the thread a
// SwitchProvider (before any message) when they change what its next run
// starts on.

// switchFlags are the flags that switch a thread's provider.
type switchFlags struct {
	provider, model, command string
	// agent is an ACP Registry agent installed in the data dir: the
	// provider is acp, the command the agent's.
	agent      string
	handoffMax int
}

// addSwitchFlags declares the switch flags on fs; newThread says whether
// the verb also makes threads (run), whose --provider names the new one's.
func addSwitchFlags(fs *pflag.FlagSet, f *switchFlags, newThread bool) {
	provider := "switch the thread to this provider `name` (an installed plugin baton-plugin-NAME): its next run starts on it"
	if newThread {
		provider = "provider `name` of a new thread (an installed plugin baton-plugin-NAME); with --thread, switch the thread to it"
	}
	fs.StringVar(&f.provider, "provider", "", provider)
	fs.StringVar(&f.command, "provider-command", "", "the provider process to run, split into words like a shell would (no shell runs); on a switch, default: the command the thread used for the provider, else the provider's usual one")
	fs.StringVar(&f.agent, "agent", "", "run the ACP Registry agent `id` that baton agents install installed: the provider is acp, the command the agent's pinned one")
	fs.StringVar(&f.model, "model", "", "provider `model` (on a switch to another provider, default: the one the thread used with it)")
	fs.IntVar(&f.handoffMax, "handoff-max-bytes", 0, fmt.Sprintf("bound the thread's context handoffs to `n` bytes (at least %d; default %d): the newest runs are kept whole, older ones shortened",
		domain.MinHandoffMaxBytes, domain.DefaultHandoffMaxBytes))
}

// explicit keeps only the switch flags given on the command line: an
// environment meant for new threads (BATON_PROVIDER, BATON_MODEL,
// BATON_PROVIDER_COMMAND, BATON_HANDOFF_MAX_BYTES) never changes a thread
// that goes on.
func (f *switchFlags) explicit(fs *pflag.FlagSet) {
	if fromEnv(fs, "provider") {
		f.provider = ""
	}
	if fromEnv(fs, "model") {
		f.model = ""
	}
	if fromEnv(fs, "provider-command") {
		f.command = ""
	}
	if fromEnv(fs, "agent") {
		f.agent = ""
	}
	if fromEnv(fs, "handoff-max-bytes") {
		f.handoffMax = 0
	}
}

// check checks the switch flags of verb and returns the provider command
// given (nil: none): --provider-command's, or that of the --agent
// installed in the data dir.
func (f *switchFlags) check(verb, data string) (*batonv1.ProviderCommand, error) {
	if f.handoffMax != 0 && f.handoffMax < domain.MinHandoffMaxBytes {
		return nil, usagef("%s: --handoff-max-bytes must be at least %d, got %d", verb, domain.MinHandoffMaxBytes, f.handoffMax)
	}
	if f.agent != "" {
		return agentCommand(verb, data, f.agent)
	}
	if f.command == "" {
		return nil, nil
	}
	argv, err := splitCommand(verb, f.command)
	if err != nil {
		return nil, err
	}
	return &batonv1.ProviderCommand{Argv: argv}, nil
}

// agentFlag checks --agent against the other flags given on the command
// line (onCommandLine): it runs on the acp provider, with the agent's own
// command. It sets the provider, and drops a provider command the
// environment gave.
func (f *switchFlags) agentFlag(verb string, onCommandLine func(string) bool) error {
	if f.agent == "" {
		return nil
	}
	if onCommandLine("provider") && f.provider != agentProvider {
		return usagef("%s: --agent runs on the %s provider; drop --provider %s", verb, agentProvider, f.provider)
	}
	if onCommandLine("provider-command") {
		return usagef("%s: --agent runs the agent's installed command; drop --provider-command", verb)
	}
	f.provider, f.command = agentProvider, ""
	return nil
}

// splitCommand splits a --provider-command into words.
func splitCommand(verb, command string) ([]string, error) {
	argv, err := shlex.Split(command)
	if err != nil || len(argv) == 0 {
		return nil, usagef("%s: --provider-command %q: cannot split it into words: %v", verb, command, err)
	}
	// A relative path to the program means here, not the thread's cwd
	// (where the plugin starts it).
	if strings.ContainsRune(argv[0], '/') && !filepath.IsAbs(argv[0]) {
		if abs, err := filepath.Abs(argv[0]); err == nil {
			argv[0] = abs
		}
	}
	return argv, nil
}

// switchRequest is the SwitchProvider that makes thread t what the flags
// ask (nil when they ask nothing new). pc is the provider command given
// (--provider-command's or --agent's; nil: none). A provider the thread
// has not used, with no command given, runs its usual command; noCommand
// names such a provider that has none.
func switchRequest(t *batonv1.Thread, f switchFlags, pc *batonv1.ProviderCommand) (req *batonv1.SwitchProviderRequest, noCommand string) {
	provider := cmp.Or(f.provider, t.GetProvider())
	if provider == t.GetProvider() && (f.model == "" || f.model == t.GetModel()) && pc == nil &&
		(f.handoffMax == 0 || f.handoffMax == int(t.GetHandoffMaxBytes())) {
		return nil, ""
	}
	req = &batonv1.SwitchProviderRequest{ThreadId: t.GetId(), Provider: provider, Model: f.model, HandoffMaxBytes: uint32(f.handoffMax)}
	if pc == nil && !usedProvider(t, provider) {
		if pc = commandOfArgv(defaultCommand(provider)); pc == nil {
			return nil, provider
		}
	}
	req.ProviderCommand = pc
	return req, ""
}

// switchThread sends thread t the switch the flags ask, if any; it says
// whether it sent one.
func switchThread(ctx context.Context, verb string, c *client, idgen *ids.Allocator, t *batonv1.Thread, f switchFlags, pc *batonv1.ProviderCommand) (bool, error) {
	req, missing := switchRequest(t, f, pc)
	if missing != "" {
		return false, noCommand(ctx, verb, c, missing)
	}
	if req == nil {
		return false, nil
	}
	req.CommandId = idgen.NewID("cmd")
	if _, err := c.SwitchProvider(ctx, req); err != nil {
		return false, rpcError("switch provider", err)
	}
	return true, nil
}

func switchCommand(g *globals) *cobra.Command {
	f := &switchFlags{}
	c := &cobra.Command{
		Use:   "switch THREAD --provider NAME",
		Short: "Switch a thread to another provider or model: its next run starts there, with a handoff",
		Long: `Switch changes the provider (or model) a thread's next runs start on, without
sending anything yet; baton run --thread and baton send take the same flags and
switch before their messages. A run going on is not changed.

The first run on the new provider carries a context handoff of what it has not
seen: the whole thread for a provider new to it (full_thread_summary), or, for a
provider the thread used before, only the runs since it last saw the thread,
in its own conversation resumed (delta_since_target_last_seen). The handoff is
printed here; baton show lists each provider's binding and every handoff.`,
		Example: `  baton switch thr_123 --provider claude
  baton switch thr_123 --provider codex --model gpt-5-codex
  baton switch thr_123 --provider acp --provider-command "claude-code-acp --debug"
  baton switch thr_123 --agent gemini`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if f.provider == "" && f.model == "" && f.command == "" && f.agent == "" && f.handoffMax == 0 {
				return usagef("switch: give --provider (or --agent, --model, --provider-command, --handoff-max-bytes)")
			}
			fs := cmd.Flags()
			if err := f.agentFlag("switch", func(name string) bool { return fs.Changed(name) }); err != nil {
				return err
			}
			pc, err := f.check("switch", g.data)
			if err != nil {
				return err
			}
			return withThread(cmd, g, "switch", args[0], func(ctx context.Context, c *client, t *batonv1.Thread) error {
				switched, err := switchThread(ctx, "switch", c, ids.New(), t, *f, pc)
				if err != nil {
					return err
				}
				if !switched {
					fmt.Fprintf(g.stdout, "thread %s already runs on %s%s; nothing changed\n", t.GetId(), t.GetProvider(), modelNote(t.GetModel()))
					return nil
				}
				now, err := c.GetThread(ctx, &batonv1.GetThreadRequest{ThreadId: t.GetId()})
				if err != nil {
					return rpcError("switch", err)
				}
				return printEvents(ctx, c, scopedPrinter(g.stdout, false, t), "read events", t.GetId(), t.GetSequence(), now.GetSequence())
			})
		},
	}
	addSwitchFlags(c.Flags(), f, false)
	return c
}

// printEvents prints a thread's events after a sequence, through upto (0:
// until ctx ends, which is no error: the thread goes on). what names the
// reading in an error.
func printEvents(ctx context.Context, c *client, p *printer, what, threadID string, after, upto uint64) error {
	if upto != 0 && upto <= after {
		return nil
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	recs, errs := follow(ctx, c, threadID, after)
	for {
		select {
		case rec, ok := <-recs:
			if !ok {
				return nil
			}
			p.event(rec)
			if upto != 0 && rec.GetSequence() >= upto {
				return nil
			}
		case err := <-errs:
			if ctx.Err() != nil {
				return nil // Ctrl-C: the thread goes on
			}
			return streamEnded(what, threadID, err)
		case <-ctx.Done():
			return nil
		}
	}
}

// modelNote is " (model M)", or nothing for the provider's default.
func modelNote(model string) string {
	if model == "" {
		return ""
	}
	return " (model " + model + ")"
}
