package main

import (
	"cmp"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	batonv1 "github.com/baton-run/baton/host/api/baton/v1"
	"github.com/baton-run/baton/host/internal/domain"
	"github.com/baton-run/baton/host/internal/scenario"
)

type runFlags struct {
	switchFlags
	policyFlags
	worktree                     worktreeFlags
	cwd, thread, approve, script string
	files                        []string
	json, detach                 bool
	// sharedCwd and onHost are a new thread's: its cwd is the same on
	// every host; the host it runs on.
	sharedCwd bool
	onHost    string
	// mcp and noMCP choose the runs' MCP servers (neither: the
	// configured ones).
	mcp   []string
	noMCP bool
}

func runCommand(g *globals) *cobra.Command {
	f := &runFlags{}
	c := &cobra.Command{
		Use:   "run [flags] MESSAGE...",
		Short: "Run messages on a thread (a new one, or --thread ID) and stream what happens",
		Long: `Run creates a thread (or continues one with --thread), sends each MESSAGE as a
run of its own, streams what happens, and exits when every run it queued has
ended: 0 when all completed, 1 when one did not, 130 when interrupted.

A MESSAGE of - is read from stdin, and --file PATH reads one from a file (as
many as given, in order, instead of MESSAGE arguments): for a message that is
long or spans lines. A message is UTF-8 text of at most ` + domain.MaxMessageSize + `; one that is
empty or only white space, not text, or longer is refused before anything is
written (exit 2).

The first Ctrl-C interrupts the runs: they end when the provider confirms, or,
if it has not within --grace (10s), when the host has ended its process. A
second Ctrl-C (or SIGTERM) exits at once: the runs still going end interrupted
(host shut down), and the summary says so. Against a service, the runs are
the service's: a second Ctrl-C leaves them to it, and --detach makes the first
leave them going (follow them with baton watch).

The agent's requests (a command to run, a file to write) are answered by
--approve: ask (at the terminal, the default on a terminal), accept, or
decline (the default otherwise).

With --thread, --provider (or --model, --provider-command) switches the thread
before its messages, as baton switch does: the runs start on that provider,
the first carrying a handoff of what it has not seen. --handoff-max-bytes
bounds the thread's handoffs (a new thread's too, for those after a rollback
or a later switch).

--on-limit, --until and the budgets (--max-runs, --max-hours, --max-tokens)
set the thread's continuation policy before its messages, and run then follows
the thread until its loop is over: every run, wait and check. A run that hits
a provider's limit waits for the reset (--on-limit wait) or goes on on another
provider (--on-limit switch:claude, and with ,return comes back after the
reset); with --until, runs go on until the check command exits 0. Exit codes:
0 when the check passed (without --until: the last run completed), 1 when the
loop ended blocked, failed or out of budget, 130 when interrupted. Ctrl-C
during a wait cancels it.

--worktree puts the new thread on a git worktree of its own: a new branch
(--branch, default baton/<short thread id>) from --base (default the
repository's HEAD) of the repository --cwd is in, made under DATA/worktrees
(or --worktree-dir). --copy GLOB copies files a fresh worktree lacks (.env)
from your worktree; --setup CMD runs in the new worktree before the first run.
Each completed run that changed files is a commit on the branch (author:
your git config's, or --author); bring it back with baton merge. Not a git
repository, a base that does not resolve or a branch that exists is refused
before anything is written (exit 2).

--provider codex,claude,opencode (any list) makes a thread per provider, all
created before any runs, and runs them in parallel: each line printed is
begun with its thread's provider and short id ([codex 1a2b3c4d]); with --json
each line names its thread. With --worktree each has its own branch (--branch
NAME becomes NAME-<provider>). Exit codes: 0 when every thread's runs
completed, 1 when one did not, 130 when interrupted (Ctrl-C interrupts them
all). Compare them with baton compare and baton diff.

When several hosts share one store (baton serve --store nats://...), each
thread runs on one host: the one the command reached, or --on-host NAME.
--shared-cwd says the thread's directory is the same on every host (a network
file system): if its host stops, another host takes the thread over. Without
it the thread waits for its host to come back.`,
		Example: `  baton run --provider acp "Write hello.txt"
  baton run --provider codex --approve accept --cwd ~/src/app "Fix the failing test"
  baton run --provider codex --file task.md
  baton run --agent gemini "Explain main.go"
  go test ./... 2>&1 | baton run --provider claude -
  baton run --thread thr_123 "Now add a README"
  baton run --thread thr_123 --provider claude "Review what codex did"
  baton run --json --provider acp "Explain main.go" | jq .
  baton run --provider codex --on-limit wait "Migrate the tests to testify"
  baton run --provider codex --on-limit switch:claude,return --until 'go test ./...' --max-runs 10 "Fix the build"
  baton run --worktree --provider codex --copy .env --setup 'npm ci' "Add a dark mode"
  baton run --worktree --branch dark --provider codex,claude,opencode "Add a dark mode"
  baton run --provider codex --on-host build2 --shared-cwd --cwd /mnt/src/app "Fix the build"`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if f.thread != "" {
				f.switchFlags.explicit(cmd.Flags())
			}
			f.policyFlags.collect(cmd.Flags(), f.thread != "")
			fs := cmd.Flags()
			onCommandLine := func(name string) bool { return fs.Changed(name) && !fromEnv(fs, name) }
			if err := f.worktree.check(onCommandLine, f.thread != ""); err != nil {
				return err
			}
			if err := f.agentFlag("run", onCommandLine); err != nil {
				return err
			}
			if f.thread != "" && (onCommandLine("shared-cwd") || onCommandLine("on-host")) {
				return usagef("run: --shared-cwd and --on-host are for a new thread; --thread continues one where it is")
			}
			if strings.Contains(f.provider, ",") && f.model != "" {
				// A model is one provider's: BATON_MODEL is left out, and
				// --model refused.
				if onCommandLine("model") {
					return usagef("run: --model is one provider's; with several providers each runs its default model")
				}
				f.model = ""
			}
			return runRun(cmd.Context(), g, f, args)
		},
	}
	fl := c.Flags()
	addSwitchFlags(fl, &f.switchFlags, true)
	addPolicyFlags(fl, &f.policyFlags)
	addWorktreeFlags(fl, &f.worktree)
	fl.StringVar(&f.cwd, "cwd", "", "the new thread's working `directory` (default: the current directory)")
	fl.StringVar(&f.thread, "thread", "", "continue this thread `id` instead of creating one")
	fl.BoolVar(&f.json, "json", false, "print one JSON object per line; the last is the final thread projection")
	fl.StringVar(&f.approve, "approve", "", "the `policy` for the agent's requests on a new thread: ask, accept or decline (default: ask on a terminal, else decline)")
	fl.StringVar(&f.script, "script", "", "run a scenario `file` of steps (send, waitFor, interrupt, respond) instead of MESSAGE arguments")
	fl.StringArrayVar(&f.files, "file", nil, "read a message from this `file` (- for stdin) instead of MESSAGE arguments (repeatable: a run each, in order)")
	fl.BoolVar(&f.detach, "detach", false, "against a service, Ctrl-C leaves the runs going instead of interrupting them")
	fl.BoolVar(&f.sharedCwd, "shared-cwd", false, "the new thread's directory is the same on every host (a network file system): if its host stops, another takes it over")
	fl.StringSliceVar(&f.mcp, "mcp", nil, "give the runs these MCP `servers` only, comma-separated (default: those baton mcp list shows for every thread and for this one)")
	fl.BoolVar(&f.noMCP, "no-mcp", false, "give the runs no MCP server")
	fl.StringVar(&f.onHost, "on-host", "", "run the new thread on this host `name`, when several hosts share a store (default: the host the command reaches)")
	c.RegisterFlagCompletionFunc("approve", fixedCompletion(domain.Strings(domain.ApprovalPolicies...)...))
	return c
}

// runOptions are run's flags, checked before anything is written.
type runOptions struct {
	verb     string // the verb for errors (default: run)
	messages []string
	mode     string // of the messages (default: queue)
	script   *scenario.Script
	policy   domain.ApprovalPolicy
	cwd      string
	command  *batonv1.ProviderCommand
	// switchCommand is --provider-command's (or --agent's) for a switch
	// of a continued thread (nil: not given).
	switchCommand *batonv1.ProviderCommand
	// noCommand: a new thread of a provider with no default command, and
	// no --provider-command (what is wrong depends on what is installed).
	noCommand bool
	// cont is the continuation policy the flags ask (nil: none given).
	cont *batonv1.ContinuationPolicy
	// target is the ordinal of the run the messages are meant for (send
	// --run; 0: none).
	target int
	// providers are --provider's names: one thread each (run only).
	providers []string
	// mcp and noMCP are the runs' own choice of MCP servers (--mcp,
	// --no-mcp).
	mcp   []string
	noMCP bool
}

func (f *runFlags) check(g *globals, messages []string) (runOptions, error) {
	o := runOptions{mcp: f.mcp, noMCP: f.noMCP}
	if f.noMCP && len(f.mcp) > 0 {
		return o, usagef("run: give --mcp or --no-mcp, not both")
	}
	approve := f.approve
	if f.script != "" {
		if len(messages) > 0 || len(f.files) > 0 {
			return o, usagef("run: give MESSAGE arguments (or --file) or --script, not both")
		}
		s, err := scenario.Load(f.script)
		if err != nil {
			return o, usagef("run: --script: %v", err)
		}
		o.script = &s
		if approve == "" {
			approve = s.Approve
		}
	} else if len(messages) == 0 && len(f.files) == 0 {
		return o, usagef("run: give at least one MESSAGE (or --file PATH, or --script FILE)")
	}
	if f.thread == "" && f.provider == "" {
		return o, usagef("run: --provider is required for a new thread (or continue one with --thread)")
	}
	var err error
	if o.providers, err = f.providerList(approve); err != nil {
		return o, err
	}
	o.policy = domain.ApprovalPolicy(approve)
	if o.policy != "" && !slices.Contains(domain.ApprovalPolicies, o.policy) {
		return o, usagef("run: --approve must be %s, got %q", domain.OneOf(domain.ApprovalPolicies...), approve)
	}
	msgs, usedStdin, err := messageInput{args: messages, files: f.files}.read("run", g.stdin)
	if err != nil {
		return o, err
	}
	o.messages = msgs
	switch {
	case o.policy == "" && isTerminal(g.stdin):
		o.policy = domain.ApproveAsk
	case o.policy == "":
		o.policy = domain.ApproveDecline
	case o.policy == domain.ApproveAsk && usedStdin && !isTerminal(g.stdin):
		return o, usagef("run: --approve ask reads your answers from stdin, which held the message (-); give --approve accept or decline, or the message with --file")
	}
	cwd := f.cwd
	if cwd == "" {
		cwd, _ = os.Getwd()
	}
	if o.cwd, err = filepath.Abs(cwd); err != nil {
		return o, usagef("run: --cwd: %v", err)
	}
	if o.command, err = f.switchFlags.check("run", g.data); err != nil {
		return o, err
	}
	if o.cont, err = f.policyFlags.check("run"); err != nil {
		return o, err
	}
	if f.thread != "" {
		o.switchCommand = o.command
	} else if o.command == nil {
		o.command = commandOfArgv(defaultCommand(f.provider))
		o.noCommand = o.command == nil
	}
	return o, nil
}

// noCommand is the usage error of verb for a provider new to the thread
// (or a new thread) without a provider command: the provider is not
// installed (naming those that are), or it has no default command.
func noCommand(ctx context.Context, verb string, c *client, provider string) error {
	resp, err := c.ListPlugins(ctx, &batonv1.ListPluginsRequest{})
	if err != nil {
		return rpcError("list plugins", err)
	}
	var names []string
	for _, p := range resp.GetPlugins() {
		if p.GetName() == provider {
			return usagef("%s: provider %q has no default command; pass --provider-command", verb, provider)
		}
		names = append(names, p.GetName())
	}
	return usagef("%s: provider %q is not installed; installed: %s", verb, provider, cmp.Or(strings.Join(names, ", "), "none"))
}
