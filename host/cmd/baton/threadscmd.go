package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	batonv1 "github.com/baton-run/baton/host/api/baton/v1"
	"github.com/baton-run/baton/host/internal/domain"
	"github.com/baton-run/baton/host/internal/ids"
)

// withClient runs fn with a client found by the connection rule.
func withClient(cmd *cobra.Command, g *globals, fn func(ctx context.Context, c *client) error) error {
	ctx := cmd.Context()
	c, err := g.connect(ctx)
	if err != nil {
		return err
	}
	defer c.close()
	return fn(ctx, c)
}

func threadsCommand(g *globals) *cobra.Command {
	var jsonOut bool
	out := outputTable
	var after, state, provider string
	var limit int
	var all bool
	c := &cobra.Command{
		Use:   "threads",
		Short: "List the threads, newest first: id, provider, status, runs, created, updated",
		Long: `Threads lists the threads from the thread index (no thread's events are read),
newest first: by creation time, then by id for threads made in the same
instant. --status and --provider keep only the matching ones, --limit N the
first N, and --after ID those listed after that thread (made before it), to
read the list a page at a time. Archived threads (baton archive) are listed
only with --all. A thread made with --worktree shows its branch.

-o table (the default) is for people: on a terminal its times are ages
("3m ago"), elsewhere instants in RFC 3339 (UTC). -o json prints one JSON
object per thread and line, as --json does; -o ids one id per line, for xargs.

A thread's id begins with the time it was made (thr_ and a ULID), so ids sort
as the threads were made; a thread made by an older baton keeps its id (thr_
and 16 hex digits) and is listed by its creation time all the same.`,
		Example: `  baton threads
  baton threads --status running
  baton threads --all                              # archived ones too
  baton threads -o ids --limit 1                   # the newest thread
  baton threads -o json | jq -r .cwd
  baton threads -o ids --status idle | xargs -n1 baton show`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if limit < 0 {
				return usagef("threads: --limit must be a count of threads (0: all), got %d", limit)
			}
			format, err := formatOf("threads", cmd.Flags(), out, jsonOut)
			if err != nil {
				return err
			}
			return withReader(cmd, g, func(ctx context.Context, c *client) error {
				var from *batonv1.ThreadSummary
				if after != "" {
					at, err := c.GetThread(ctx, &batonv1.GetThreadRequest{ThreadId: after})
					if status.Code(err) == codes.NotFound {
						return usagef("threads: --after %s is not a thread; give an id that baton threads lists", after)
					} else if err != nil {
						return rpcError("threads", err)
					}
					from = at.GetSummary()
				}
				// The order is by creation time, which the index is not
				// in: read it all (a summary per thread), then sort.
				var list []*batonv1.ThreadSummary
				token := ""
				for {
					resp, err := c.ListThreads(ctx, &batonv1.ListThreadsRequest{PageSize: 1000, PageToken: token, Status: state, Provider: provider,
						All: all})
					if err != nil {
						return rpcError("list threads", err)
					}
					list = append(list, resp.GetThreads()...)
					if token = resp.GetNextPageToken(); token == "" {
						break
					}
				}
				return printThreads(g.stdout, listed(list, from, limit), format, time.Now)
			})
		},
	}
	fl := c.Flags()
	fl.VarP(&out, "output", "o", "print `format`: table, json (one object per line, as --json) or ids (one per line)")
	fl.BoolVar(&jsonOut, "json", false, "print one JSON object per thread (-o json)")
	fl.StringVar(&after, "after", "", "list the threads after this thread `id` in the list (those made before it), to page")
	fl.IntVar(&limit, "limit", 0, "list at most `n` threads (0: all)")
	fl.StringVar(&state, "status", "", "keep the threads with this `status` (idle, running, waiting, ...)")
	fl.StringVar(&provider, "provider", "", "keep the threads of this `provider`")
	fl.BoolVar(&all, "all", false, "list archived threads too")
	c.RegisterFlagCompletionFunc("status", fixedCompletion(domain.Strings(domain.ThreadStatuses...)...))
	c.RegisterFlagCompletionFunc("output", fixedCompletion("table", "json", "ids"))
	return c
}

func showCommand(g *globals) *cobra.Command {
	var jsonOut bool
	var handoff string
	c := &cobra.Command{
		Use:   "show THREAD",
		Short: "Show a thread: its runs, messages, requests, checkpoints and handoffs",
		Long: `Show prints a thread: a summary of its runs, messages, requests, checkpoints
and context handoffs (and, once it has switched providers, each provider's
binding: its model, its conversation, the last run it saw and the runs it
ran), or with --json the whole thread as one JSON object. A long thread is
read a page at a time (the service holds its newest runs; the older ones
are read from its store): every run is shown, and with --json each run's
messages, items and turns are together, in run order.`,
		Example: `  baton show thr_123
  baton show --handoff hof_123 thr_123
  baton show --json thr_123 | jq '.runs[] | {ordinal, status}'`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withReader(cmd, g, func(ctx context.Context, c *client) error {
				t, err := c.threadFor(ctx, "show", args[0])
				if err != nil {
					return err
				}
				// The whole thread, a page at a time when the service no
				// longer holds all of it.
				if t.GetPage().GetFirstRun() > 1 || t.GetPage().GetMessagesAfter() > 0 {
					if t, err = c.threadFrom(ctx, args[0], 1); err != nil {
						return rpcError("show", err)
					}
				}
				if handoff != "" {
					for _, h := range t.GetHandoffs() {
						if h.GetId() == handoff {
							fmt.Fprint(g.stdout, h.GetText())
							return nil
						}
					}
					return usagef("show: thread %s has no handoff %q", t.GetId(), handoff)
				}
				if jsonOut {
					fmt.Fprintf(g.stdout, "%s\n", protoJSON(t))
					return nil
				}
				showThread(g, t)
				return nil
			})
		},
	}
	c.Flags().BoolVar(&jsonOut, "json", false, "print the thread's projection as one JSON object")
	c.Flags().StringVar(&handoff, "handoff", "", "print the text of this handoff `id` (what the provider's first turn is told)")
	return c
}

// showThread is a thread for people to read.
func showThread(g *globals, t *batonv1.Thread) {
	w := g.stdout
	fmt.Fprintf(w, "thread %s · %s%s · %s\n", t.GetId(), t.GetProvider(), agentWords(t.GetProviderCommand()), t.GetCwd())
	fmt.Fprintf(w, "  %s; approvals: %s; created %s, updated %s; sequence %d\n", statusWords(t.GetSummary()), t.GetApprovalPolicy(),
		instant(t.GetCreatedAt()).Local().Format(time.DateTime), instant(t.GetUpdatedAt()).Local().Format(time.DateTime), t.GetSequence())
	if t.GetModel() != "" {
		fmt.Fprintf(w, "  model %s\n", t.GetModel())
	}
	showWorktree(w, t)
	showHostLost(w, t, time.Now(), time.Local)
	showLoop(w, t, time.Now(), time.Local)
	switched := len(t.GetProviderBindings()) > 1
	if switched {
		showProviders(w, t)
	}
	showRuns(w, t, switched)
	showUsage(w, t)
	showMCP(w, t)
	showMessages(w, t)
	showRequests(w, t)
	showCheckpoints(w, t)
	if len(t.GetHandoffs()) > 0 {
		showHandoffs(w, t)
	}
}

// showHostLost says, when the thread's owner stopped renewing its lease,
// when, and what becomes of the thread: another host takes it over when
// its cwd is shared; otherwise it waits for its host, where its cwd is.
func showHostLost(w io.Writer, t *batonv1.Thread, now time.Time, loc *time.Location) {
	l := t.GetHostLost()
	if l == nil {
		return
	}
	next := "the thread's cwd is on " + l.GetHost()
	if t.GetSharedCwd() {
		next = "another host takes it over"
	}
	fmt.Fprintf(w, "  host %s lost its lease at %s; %s\n", l.GetHost(), clockTime(instant(l.GetAt()), now, loc), next)
}

// showRuns lists a thread's runs: each one's ordinal, id, how it ended
// (and, once the thread has switched, on which provider) and what it was
// asked.
func showRuns(w io.Writer, t *batonv1.Thread, switched bool) {
	fmt.Fprintf(w, "\nruns (%d):\n", len(t.GetRuns()))
	for _, r := range t.GetRuns() {
		end := r.GetStatus()
		switch {
		case r.GetFailure() != nil:
			end += ": " + oneLine(r.GetFailure().GetMessage(), 80)
		case r.GetStopReason() != "":
			end += " (" + r.GetStopReason() + ")"
		}
		if switched && r.GetProvider() != "" {
			end += " on " + r.GetProvider()
		}
		fmt.Fprintf(w, "  %d  %s  %s  %s\n", r.GetOrdinal(), r.GetId(), end, oneLine(r.GetInput(), 60))
	}
}

// showMessages lists a thread's messages, each with its run's ordinal.
func showMessages(w io.Writer, t *batonv1.Thread) {
	if len(t.GetMessages()) == 0 {
		return
	}
	ordinals := make(map[string]uint32, len(t.GetRuns()))
	for _, r := range t.GetRuns() {
		ordinals[r.GetId()] = r.GetOrdinal()
	}
	fmt.Fprintf(w, "\nmessages (%d):\n", len(t.GetMessages()))
	for _, m := range t.GetMessages() {
		run := ""
		if n, ok := ordinals[m.GetRunId()]; ok {
			run = fmt.Sprintf("run %d ", n)
		}
		fmt.Fprintf(w, "  %s%s: %s\n", run, m.GetRole(), oneLine(m.GetText(), 100))
	}
}

// showRequests lists a thread's requests: their kind, title and how they
// were answered.
func showRequests(w io.Writer, t *batonv1.Thread) {
	if len(t.GetRequests()) == 0 {
		return
	}
	fmt.Fprintf(w, "\nrequests (%d):\n", len(t.GetRequests()))
	for _, q := range t.GetRequests() {
		how := q.GetStatus()
		if q.GetDecision() != "" {
			how += ", " + q.GetDecision()
			if q.GetAnsweredBy() != "" {
				how += " by " + q.GetAnsweredBy()
			}
		}
		fmt.Fprintf(w, "  %s  %s %s: %s\n", q.GetId(), words(q.GetKind()), oneLine(q.GetTitle(), 60), how)
	}
}

// showCheckpoints lists a thread's checkpoints: what each is of, its
// status and how many files it changed.
func showCheckpoints(w io.Writer, t *batonv1.Thread) {
	if len(t.GetCheckpoints()) == 0 {
		return
	}
	fmt.Fprintf(w, "\ncheckpoints (%d):\n", len(t.GetCheckpoints()))
	for _, cp := range t.GetCheckpoints() {
		what := fmt.Sprintf("run %d", cp.GetRunOrdinal())
		if cp.GetRunOrdinal() == 0 {
			what = "baseline"
		}
		fmt.Fprintf(w, "  %s  %s  %s, %s\n", cp.GetId(), what, cp.GetStatus(), plural(len(cp.GetFiles()), "file"))
	}
}

// showLoop shows a thread's continuation policy, where its loop is, its
// armed waits and its last check, at now in loc.
func showLoop(w io.Writer, t *batonv1.Thread, now time.Time, loc *time.Location) {
	l := t.GetLoop()
	if l == nil {
		return
	}
	p := newPrinter(w, false, t)
	p.now, p.loc = func() time.Time { return now }, loc
	fmt.Fprintf(w, "  policy: %s\n", policyLine(l.GetPolicy()))
	fmt.Fprintf(w, "  loop: %s\n", loopLine(l, now, loc))
	for _, wt := range []*batonv1.Wait{l.GetWait(), l.GetReturn()} {
		if wt != nil {
			fmt.Fprintf(w, "  ⏳ %s\n", p.waitLine(wt))
		}
	}
	if l.GetCheck() != nil {
		fmt.Fprintf(w, "  last %s\n", strings.TrimSuffix(checkLine(l.GetCheck())[0], "; last lines:"))
	}
}

// showProviders lists the providers a thread has used: each one's model,
// its own conversation of the thread (the one a return resumes), the last
// run it has seen and the runs it ran.
func showProviders(out io.Writer, t *batonv1.Thread) {
	fmt.Fprintf(out, "\nproviders (%d):\n", len(t.GetProviderBindings()))
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	for _, b := range t.GetProviderBindings() {
		name := b.GetProvider() + agentWords(b.GetCommand())
		if b.GetProvider() == t.GetProvider() {
			name += " (current)"
		}
		model := "default model"
		if b.GetModel() != "" {
			model = "model " + b.GetModel()
		}
		conv := "no conversation"
		if b.GetThreadRef() != "" {
			conv = "conversation " + b.GetThreadRef()
		}
		seen := "has seen no run"
		if b.GetSeenThrough() > 0 {
			seen = fmt.Sprintf("seen through run %d", b.GetSeenThrough())
		}
		fmt.Fprintf(w, "  %s\t%s\t%s\t%s\tran %s\n", name, model, conv, seen, domain.RunList(ints(b.GetRuns())))
	}
	w.Flush()
}

// agentWords names the ACP Registry agent a provider command runs, as
// " (agent ID VERSION)" ("" for a command given as is).
func agentWords(pc *batonv1.ProviderCommand) string {
	if pc.GetAgent() == "" {
		return ""
	}
	return strings.TrimSuffix(fmt.Sprintf(" (agent %s %s", pc.GetAgent(), pc.GetAgentVersion()), " ") + ")"
}

// showHandoffs lists a thread's handoffs: what each covered, for whom, and
// what became of it.
func showHandoffs(out io.Writer, t *batonv1.Thread) {
	fmt.Fprintf(out, "\nhandoffs (%d):\n", len(t.GetHandoffs()))
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	for _, h := range t.GetHandoffs() {
		route := h.GetFromProvider() + " -> " + h.GetToProvider()
		if h.GetRollbackId() != "" {
			route += " (rollback)"
		}
		size := byteSize(cmp.Or(int(h.GetBytes()), len(h.GetText())))
		if h.GetTruncated() {
			size += ", truncated"
		}
		status := h.GetStatus()
		switch st := domain.HandoffStatus(h.GetStatus()); {
		case st == domain.HandoffStatusConsumed:
			status = "consumed by " + runName(t, h.GetRunId())
		case st == domain.HandoffStatusSuperseded && h.GetSupersededBy() != "":
			status += " by " + h.GetSupersededBy()
		}
		if h.GetFallback() != "" {
			status += "; fallback: " + oneLine(h.GetFallback(), 80)
		}
		fmt.Fprintf(w, "  %s\t%s\t%s\t%s\t%s\t%s\n", h.GetId(), h.GetStrategy(), route, domain.RunList(ints(h.GetCoveredRuns())), size, status)
	}
	w.Flush()
}

// runName is "run N", or the run's id when the thread does not show it.
func runName(t *batonv1.Thread, runID string) string {
	if r := runOf(t, runID); r != nil {
		return fmt.Sprintf("run %d", r.GetOrdinal())
	}
	return runID
}

func watchCommand(g *globals) *cobra.Command {
	var after uint64
	var afterSet, jsonOut bool
	c := &cobra.Command{
		Use:   "watch THREAD",
		Short: "Follow a thread's events as they happen (Ctrl-C stops watching, not the thread)",
		Long: `Watch prints where a thread stands (its active run, the run's open items, each
pending request with the command that answers it, the runs queued), then its
events as baton run does, until Ctrl-C; or, with --after SEQ, the events after
that sequence. With --json the first line is the thread's projection
({"kind":"thread",...}), the others its events. Leaving does not stop the
thread.`,
		Example: `  baton watch thr_123
  baton watch --after 0 thr_123   # the whole thread from its creation`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			afterSet = cmd.Flags().Changed("after")
			return withThread(cmd, g, "watch", args[0], func(ctx context.Context, c *client, t *batonv1.Thread) error {
				defer c.followWaits(t.GetId())() // a wait the thread holds fires while it is watched
				start := t.GetSequence()
				if afterSet {
					start = after
				}
				p := scopedPrinter(g.stdout, jsonOut, t)
				if !afterSet {
					if !jsonOut {
						fmt.Fprintf(g.stdout, "● thread %s · %s · %s (watching from sequence %d)\n", t.GetId(), t.GetProvider(), t.GetCwd(), start)
					}
					p.stands(t) // what began before start, which its events will not say
				}
				return printEvents(ctx, c, p, "watch", args[0], start, 0)
			})
		},
	}
	c.Flags().Uint64Var(&after, "after", 0, "print the events after this `sequence` (default: the thread's current one)")
	c.Flags().BoolVar(&jsonOut, "json", false, "print one JSON object per event")
	return c
}

// withThread runs fn for a verb that follows a thread until Ctrl-C: on a
// context the first SIGINT or SIGTERM ends, with a client found by the
// connection rule and the thread as it is now.
func withThread(cmd *cobra.Command, g *globals, verb, threadID string,
	fn func(ctx context.Context, c *client, t *batonv1.Thread) error) error {
	ctx, stop := signalContext(cmd.Context())
	defer stop()
	c, err := g.connect(ctx)
	if err != nil {
		return err
	}
	defer c.close()
	t, err := c.threadFor(ctx, verb, threadID)
	if err != nil {
		return err
	}
	return fn(ctx, c, t)
}

// signalContext ends at the first SIGINT or SIGTERM.
func signalContext(parent context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancel(parent)
	first, stop := signals(ctx, cancel)
	go func() {
		select {
		case <-first:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, stop
}

func sendCommand(g *globals) *cobra.Command {
	var mode, file string
	var target int
	sf := &switchFlags{}
	pf := &policyFlags{}
	c := &cobra.Command{
		Use:   "send THREAD (MESSAGE | - | --file PATH)",
		Short: "Send a message to a thread: a new run, or into the active one (--mode)",
		Long: `Send sends MESSAGE to THREAD (- reads it from stdin, --file PATH from a file;
at most ` + domain.MaxMessageSize + ` of UTF-8 text, not empty). Against a service it returns at once
(follow the run with baton watch); with no service running it follows the run
to its end, as baton run --thread does (nothing else would carry it).
While a run is active, --mode says what the message does: queue (a run of its
own after the active one), steer (added to the active turn), restart (the
active turn stops and starts again with it), or now (interrupt the active run
and start this one). Without --mode: steer where the provider steers natively,
else restart; on an idle thread the message starts a run at once. --run N
names the run a steer or restart is meant for, by its ordinal (as diff,
rollback and cancel take it): refused if another run is active.
--provider (or --model, --provider-command) switches the thread first, as
baton switch does: the message's run starts on that provider.
--on-limit, --until and the budgets set the thread's continuation policy
first, as baton run does (see baton run --help).`,
		Example: `  baton send thr_123 "Also update the changelog"
  baton send --mode queue thr_123 "Then run the tests"
  baton send --mode steer --run 3 thr_123 "Keep the public API as it is"
  baton send thr_123 --file review.md
  baton send --provider claude thr_123 "Take it from here"
  baton send --on-limit wait --until 'make test' --max-hours 8 thr_123 "Finish the migration"`,
		Args: func(cmd *cobra.Command, args []string) error {
			switch {
			case len(args) == 0:
				return usagef("send: give a THREAD id and the MESSAGE (or - to read it from stdin, or --file PATH)")
			case len(args) > 2:
				return usagef("send: unexpected arguments %q (quote a MESSAGE of several words)", args[2:])
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			threadID := args[0]
			if _, ok := domain.ModeWords[mode]; !ok && mode != "" {
				return usagef("send: --mode must be queue, steer, restart or now, got %q", mode)
			}
			if cmd.Flags().Changed("run") {
				if err := checkOrdinal("send", target, 1); err != nil {
					return err
				}
				if mode == "queue" || mode == "now" {
					return usagef("send: --run names the run a steer or restart is meant for; --mode %s sends the message as a run of its own", mode)
				}
			}
			in := messageInput{args: args[1:]}
			if file != "" {
				in.files = []string{file}
			}
			if len(in.args) == 0 && len(in.files) == 0 {
				return usagef("send: give the MESSAGE to send (or - to read it from stdin, or --file PATH)")
			}
			msgs, _, err := in.read("send", g.stdin)
			if err != nil {
				return err
			}
			sf.explicit(cmd.Flags())
			fs := cmd.Flags()
			if err := sf.agentFlag("send", func(name string) bool { return fs.Changed(name) && !fromEnv(fs, name) }); err != nil {
				return err
			}
			pc, err := sf.check("send", g.data)
			if err != nil {
				return err
			}
			pf.collect(cmd.Flags(), true)
			cont, err := pf.check("send")
			if err != nil {
				return err
			}
			ctx, cancel := context.WithCancel(cmd.Context())
			interruptReq, stopSignals := signals(ctx, cancel)
			defer stopSignals()
			c, err := g.connect(ctx)
			if err != nil {
				return err
			}
			defer c.close()
			if c.embedded {
				// No service carries the run once this command exits: follow
				// it to its end, as baton run --thread does.
				fmt.Fprintln(g.stderr, "baton: no service runs (baton serve); following the run to its end")
				return runOn(ctx, g, c, &runFlags{switchFlags: *sf, policyFlags: *pf, thread: threadID},
					runOptions{verb: "send", messages: msgs, mode: mode, target: target, switchCommand: pc, cont: cont}, interruptReq)
			}
			idgen := ids.New()
			var targetID string
			if *sf != (switchFlags{}) || cont != nil || target != 0 {
				// The run meant, the switch and the policy first (each
				// checked before any is written), shown as baton switch
				// shows it.
				t, err := c.threadFor(ctx, "send", threadID)
				if err != nil {
					return err
				}
				if targetID, err = targetRun(ctx, c, "send", t, target); err != nil {
					return err
				}
				if missing := missingCommand(t, cont); missing != "" {
					return noCommand(ctx, "send", c, missing)
				}
				switched, err := switchThread(ctx, "send", c, idgen, t, *sf, pc)
				if err != nil {
					return err
				}
				if err := setPolicy(ctx, "send", c, idgen, t, cont); err != nil {
					return err
				}
				if switched || cont != nil {
					now, err := c.GetThread(ctx, &batonv1.GetThreadRequest{ThreadId: t.GetId()})
					if err != nil {
						return rpcError("send", err)
					}
					if err := printEvents(ctx, c, scopedPrinter(g.stdout, false, t), "read events", t.GetId(), t.GetSequence(), now.GetSequence()); err != nil {
						return err
					}
				}
			}
			rc, err := c.SendMessage(ctx, &batonv1.SendMessageRequest{CommandId: idgen.NewID("cmd"), ThreadId: threadID,
				Text: msgs[0], Mode: mode, TargetRunId: targetID})
			if err != nil {
				return rpcError("send", err)
			}
			fmt.Fprintf(g.stdout, "sent to thread %s (run %s, sequence %d); follow it with: baton watch %s\n", rc.GetThreadId(), rc.GetRunId(), rc.GetSequence(), rc.GetThreadId())
			return nil
		},
	}
	c.Flags().StringVar(&mode, "mode", "", "what the message does while a run is active: queue, steer, restart or now")
	c.Flags().IntVar(&target, "run", 0, "for steer and restart, the `ordinal` of the run meant (refused if another run is active)")
	c.Flags().StringVar(&file, "file", "", "read the message from this `file` (- for stdin) instead of a MESSAGE argument")
	addSwitchFlags(c.Flags(), sf, false)
	addPolicyFlags(c.Flags(), pf)
	c.RegisterFlagCompletionFunc("mode", fixedCompletion("queue", "steer", "restart", "now"))
	return c
}

func interruptCommand(g *globals) *cobra.Command {
	var run int
	var force bool
	c := &cobra.Command{
		Use:   "interrupt THREAD",
		Short: "Stop a thread's active run (or --run N)",
		Long: `Interrupt asks the provider to stop the thread's active run (or run --run N,
its ordinal as baton show prints it; a queued run is cancelled). The run ends
interrupted when the provider confirms. A provider that has not ended the run
within the host's grace (--grace of baton serve, or of the baton run that
holds the run: 10s unless set) has its process ended by the host (SIGTERM to
its process group, then SIGKILL), and the run ends interrupted saying so; the
thread's next run opens a new session, resuming the conversation where the
provider can. --force ends the provider's process at once.

A run waiting for a provider's limit to reset (--on-limit wait) is the active
run: its wait is cancelled. Follow the run's end with baton watch.`,
		Example: `  baton interrupt thr_123
  baton interrupt thr_123 --run 2
  baton interrupt thr_123 --force`,
		Args: threadArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			given := cmd.Flags().Changed("run")
			if given {
				if err := checkOrdinal("interrupt", run, 1); err != nil {
					return err
				}
			}
			return withThread(cmd, g, "interrupt", args[0], func(ctx context.Context, c *client, t *batonv1.Thread) error {
				req := &batonv1.InterruptRequest{CommandId: ids.New().NewID("cmd"), ThreadId: t.GetId(), Force: force}
				if given {
					r, err := c.runAt(ctx, t, run)
					switch {
					case err != nil:
						return rpcError("interrupt", err)
					case r == nil:
						return usagef("interrupt: thread %s has no run %d (it has %s)", t.GetId(), run, plural(int(t.GetSummary().GetRuns()), "run"))
					case runByOrdinal(t, run) == nil:
						// It left the projection the service holds: it has ended.
						return failf(exitFailed, "interrupt: run %d has already ended (%s)", run, r.GetStatus())
					}
					req.RunId = r.GetId()
				} else {
					req.RunId = t.GetActiveRunId() // named, so that the receipt names it
				}
				// A run waiting for a limit's reset has no turn to stop: the
				// interrupt cancels its wait, and says so.
				var waiting *batonv1.Wait
				if w := t.GetLoop().GetWait(); w != nil && (req.RunId == "" || req.RunId == w.GetRunId()) {
					waiting = w
				}
				rc, err := c.Interrupt(ctx, req)
				if err != nil {
					return rpcError("interrupt", err)
				}
				after, err := c.threadFor(ctx, "interrupt", t.GetId())
				if err != nil {
					return err
				}
				fmt.Fprintln(g.stdout, interruptedLine(after, rc.GetRunId(), waiting, force))
				return nil
			})
		},
	}
	c.Flags().IntVar(&run, "run", 0, "the run to stop, by its `ordinal` (default: the active run)")
	c.Flags().BoolVar(&force, "force", false, "end the provider's process now (SIGTERM, then SIGKILL) instead of asking it to stop")
	return c
}

// interruptedLine says what an interrupt of run runID did, as the thread
// shows it after: "run 2 of thread thr_123: interrupt sent; it ends when the
// provider confirms".
func interruptedLine(t *batonv1.Thread, runID string, waiting *batonv1.Wait, force bool) string {
	r := runOf(t, runID)
	if r == nil {
		return fmt.Sprintf("thread %s: interrupt sent", t.GetId())
	}
	head := fmt.Sprintf("run %d of thread %s", r.GetOrdinal(), t.GetId())
	st := statusOf(r)
	switch {
	case waiting != nil && waiting.GetRunId() == r.GetId():
		return fmt.Sprintf("%s: its wait for %s is cancelled", head, describeLimit(waiting.GetLimit(), waiting.GetProvider()))
	case st == domain.RunStatusCancelled:
		return head + ": cancelled before it started"
	case r.GetStop().GetForced() != "" && (st == domain.RunStatusInterrupted || !st.Terminal()),
		force && !st.Terminal():
		// The same line whether the thread is read before the forced
		// stop is done or after: the read races the host's kill.
		return head + ": stopped by force; its provider's process is being ended"
	case st.Terminal():
		return fmt.Sprintf("%s: %s", head, r.GetStatus())
	}
	return head + ": interrupt sent; it ends when the provider confirms (follow it with baton watch " + t.GetId() + ")"
}

// answerCommand is approve or decline: an answer to a pending request
// from any terminal.
func answerCommand(g *globals, verb string) *cobra.Command {
	var session, cancelTurn bool
	var answer string
	decision := map[string]domain.RequestDecision{"approve": domain.DecisionAccept, "decline": domain.DecisionDecline}[verb]
	c := &cobra.Command{
		Use:   verb + " REQUEST",
		Short: map[string]string{"approve": "Accept an agent's pending request", "decline": "Decline an agent's pending request"}[verb],
		Long: fmt.Sprintf(`%s answers a pending request (a command to run, a file to write) by its id,
as baton run, baton show and baton watch print it; the host finds its thread.`, map[string]string{"approve": "Approve", "decline": "Decline"}[verb]),
		Example: fmt.Sprintf("  baton %s req_123", verb),
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			d := decision
			if session {
				d = domain.DecisionAcceptForSession
			}
			if cancelTurn {
				d = domain.DecisionCancel
			}
			var answers map[string]string
			if cmd.Flags().Changed("answer") {
				if session {
					return usagef("approve: give --answer or --for-session, not both")
				}
				d, answers = domain.DecisionAnswer, map[string]string{"answer": answer}
			}
			return withClient(cmd, g, func(ctx context.Context, c *client) error {
				rc, err := c.AnswerRequest(ctx, &batonv1.AnswerRequestRequest{CommandId: ids.New().NewID("cmd"), RequestId: args[0], Decision: string(d),
					Answers: answers})
				if err != nil {
					return rpcError(verb, err)
				}
				fmt.Fprintf(g.stdout, "request %s: %s (thread %s)\n", args[0], d, rc.GetThreadId())
				return nil
			})
		},
	}
	if verb == "approve" {
		c.Flags().BoolVar(&session, "for-session", false, "accept such requests for the rest of the provider session")
		c.Flags().StringVar(&answer, "answer", "", "answer a question (a user_input request) with this `text`")
	} else {
		c.Flags().BoolVar(&cancelTurn, "cancel", false, "decline and cancel the agent's turn")
	}
	return c
}
