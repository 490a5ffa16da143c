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
	"github.com/baton-run/baton/host/internal/service"
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
	c := &cobra.Command{
		Use:   "threads",
		Short: "List the threads, newest first: id, provider, status, runs, created, updated",
		Long: `Threads lists the threads from the thread index (no thread's events are read),
newest first: by creation time, then by id for threads made in the same
instant. --status and --provider keep only the matching ones, --limit N the
first N, and --after ID those listed after that thread (made before it), to
read the list a page at a time.

-o table (the default) is for people: on a terminal its times are ages
("3m ago"), elsewhere instants in RFC 3339 (UTC). -o json prints one JSON
object per thread and line, as --json does; -o ids one id per line, for xargs.

A thread's id begins with the time it was made (thr_ and a ULID), so ids sort
as the threads were made; a thread made by an older baton keeps its id (thr_
and 16 hex digits) and is listed by its creation time all the same.`,
		Example: `  baton threads
  baton threads --status running
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
				var from *domain.ThreadSummary
				if after != "" {
					at, err := c.GetThread(ctx, &batonv1.GetThreadRequest{ThreadId: after})
					if status.Code(err) == codes.NotFound {
						return usagef("threads: --after %s is not a thread; give an id that baton threads lists", after)
					} else if err != nil {
						return rpcError("threads", err)
					}
					s := service.SummaryOf(at.GetSummary())
					from = &s
				}
				// The order is by creation time, which the index is not
				// in: read it all (a summary per thread), then sort.
				var list []domain.ThreadSummary
				token := ""
				for {
					resp, err := c.ListThreads(ctx, &batonv1.ListThreadsRequest{PageSize: 1000, PageToken: token, Status: state, Provider: provider})
					if err != nil {
						return rpcError("list threads", err)
					}
					for _, t := range resp.GetThreads() {
						list = append(list, service.SummaryOf(t))
					}
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
				at, t, err := c.threadFor(ctx, "show", args[0])
				if err != nil {
					return err
				}
				// The whole thread, a page at a time when the service no
				// longer holds all of it.
				if at.GetPage().GetFirstRun() > 1 || at.GetPage().GetMessagesAfter() > 0 {
					if at, t, err = c.threadFrom(ctx, args[0], 1); err != nil {
						return rpcError("show", err)
					}
				}
				if handoff != "" {
					for _, h := range t.Handoffs {
						if h.ID == handoff {
							fmt.Fprint(g.stdout, h.Text)
							return nil
						}
					}
					return usagef("show: thread %s has no handoff %q", t.ID, handoff)
				}
				if jsonOut {
					fmt.Fprintf(g.stdout, "%s\n", protoJSON(at))
					return nil
				}
				showThread(g, t, service.SummaryOf(at.GetSummary()))
				return nil
			})
		},
	}
	c.Flags().BoolVar(&jsonOut, "json", false, "print the thread's projection as one JSON object")
	c.Flags().StringVar(&handoff, "handoff", "", "print the text of this handoff `id` (what the provider's first turn is told)")
	return c
}

// showThread is a thread for people to read.
func showThread(g *globals, t domain.Thread, s domain.ThreadSummary) {
	w := g.stdout
	fmt.Fprintf(w, "thread %s · %s · %s\n", t.ID, t.Provider, t.Cwd)
	fmt.Fprintf(w, "  %s; approvals: %s; created %s, updated %s; sequence %d\n", statusWords(s), t.ApprovalPolicy,
		t.CreatedAt.Local().Format(time.DateTime), t.UpdatedAt.Local().Format(time.DateTime), t.Sequence)
	if t.Model != "" {
		fmt.Fprintf(w, "  model %s\n", t.Model)
	}
	showLoop(w, t, time.Now(), time.Local)
	switched := len(t.ProviderBindings) > 1
	if switched {
		showProviders(w, t)
	}
	fmt.Fprintf(w, "\nruns (%d):\n", len(t.Runs))
	for _, r := range t.Runs {
		end := string(r.Status)
		switch {
		case r.Failure != nil:
			end += ": " + oneLine(r.Failure.Message, 80)
		case r.StopReason != "":
			end += " (" + r.StopReason + ")"
		}
		if switched && r.Provider != "" {
			end += " on " + r.Provider
		}
		fmt.Fprintf(w, "  %d  %s  %s  %s\n", r.Ordinal, r.ID, end, oneLine(r.Input, 60))
	}
	if len(t.Messages) > 0 {
		fmt.Fprintf(w, "\nmessages (%d):\n", len(t.Messages))
		for _, m := range t.Messages {
			run := ""
			if r := runOf(t, m.RunID); r != nil {
				run = fmt.Sprintf("run %d ", r.Ordinal)
			}
			fmt.Fprintf(w, "  %s%s: %s\n", run, m.Role, oneLine(m.Text.String(), 100))
		}
	}
	if len(t.Requests) > 0 {
		fmt.Fprintf(w, "\nrequests (%d):\n", len(t.Requests))
		for _, q := range t.Requests {
			how := string(q.Status)
			if q.Decision != "" {
				how += ", " + string(q.Decision)
				if q.AnsweredBy != "" {
					how += " by " + string(q.AnsweredBy)
				}
			}
			fmt.Fprintf(w, "  %s  %s %s: %s\n", q.ID, words(string(q.Kind)), oneLine(q.Title, 60), how)
		}
	}
	if len(t.Checkpoints) > 0 {
		fmt.Fprintf(w, "\ncheckpoints (%d):\n", len(t.Checkpoints))
		for _, cp := range t.Checkpoints {
			what := fmt.Sprintf("run %d", cp.RunOrdinal)
			if cp.RunOrdinal == 0 {
				what = "baseline"
			}
			fmt.Fprintf(w, "  %s  %s  %s, %s\n", cp.ID, what, cp.Status, plural(len(cp.Files), "file"))
		}
	}
	if len(t.Handoffs) > 0 {
		showHandoffs(w, t)
	}
}

// showLoop shows a thread's continuation policy, where its loop is, its
// armed waits and its last check, at now in loc.
func showLoop(w io.Writer, t domain.Thread, now time.Time, loc *time.Location) {
	l := t.Loop
	if l == nil {
		return
	}
	p := newPrinter(w, false, t)
	p.now, p.loc = func() time.Time { return now }, loc
	fmt.Fprintf(w, "  policy: %s\n", policyLine(l.Policy))
	fmt.Fprintf(w, "  loop: %s\n", loopLine(*l, now, loc))
	for _, wt := range []*domain.Wait{l.Wait, l.Return} {
		if wt != nil {
			fmt.Fprintf(w, "  ⏳ %s\n", p.waitLine(*wt))
		}
	}
	if l.Check != nil {
		fmt.Fprintf(w, "  last %s\n", strings.TrimSuffix(checkLine(*l.Check)[0], "; last lines:"))
	}
}

// showProviders lists the providers a thread has used: each one's model,
// its own conversation of the thread (the one a return resumes), the last
// run it has seen and the runs it ran.
func showProviders(out io.Writer, t domain.Thread) {
	fmt.Fprintf(out, "\nproviders (%d):\n", len(t.ProviderBindings))
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	for _, b := range t.ProviderBindings {
		name := b.Provider
		if name == t.Provider {
			name += " (current)"
		}
		model := "default model"
		if b.Model != "" {
			model = "model " + b.Model
		}
		conv := "no conversation"
		if b.ThreadRef != "" {
			conv = "conversation " + b.ThreadRef
		}
		seen := "has seen no run"
		if b.SeenThrough > 0 {
			seen = fmt.Sprintf("seen through run %d", b.SeenThrough)
		}
		fmt.Fprintf(w, "  %s\t%s\t%s\t%s\tran %s\n", name, model, conv, seen, domain.RunList(b.Runs))
	}
	w.Flush()
}

// showHandoffs lists a thread's handoffs: what each covered, for whom, and
// what became of it.
func showHandoffs(out io.Writer, t domain.Thread) {
	fmt.Fprintf(out, "\nhandoffs (%d):\n", len(t.Handoffs))
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	for _, h := range t.Handoffs {
		route := h.FromProvider + " -> " + h.ToProvider
		if h.RollbackID != "" {
			route += " (rollback)"
		}
		size := byteSize(cmp.Or(h.Bytes, len(h.Text)))
		if h.Truncated {
			size += ", truncated"
		}
		status := string(h.Status)
		switch {
		case h.Status == domain.HandoffStatusConsumed:
			status = "consumed by " + runName(t, h.RunID)
		case h.Status == domain.HandoffStatusSuperseded && h.SupersededBy != "":
			status += " by " + h.SupersededBy
		}
		if h.Fallback != "" {
			status += "; fallback: " + oneLine(h.Fallback, 80)
		}
		fmt.Fprintf(w, "  %s\t%s\t%s\t%s\t%s\t%s\n", h.ID, h.Strategy, route, domain.RunList(domain.HandoffOrdinals(h.Runs, h.FromRun, h.ToRun)), size, status)
	}
	w.Flush()
}

// runName is "run N", or the run's id when the thread does not show it.
func runName(t domain.Thread, runID string) string {
	if r := runOf(t, runID); r != nil {
		return fmt.Sprintf("run %d", r.Ordinal)
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
			return withThread(cmd, g, "watch", args[0], func(ctx context.Context, c *client, at *batonv1.Thread, t domain.Thread) error {
				defer c.followWaits(t.ID)() // a wait the thread holds fires while it is watched
				start := at.GetSequence()
				if afterSet {
					start = after
				}
				p := scopedPrinter(g.stdout, jsonOut, t)
				if !afterSet {
					if !jsonOut {
						fmt.Fprintf(g.stdout, "● thread %s · %s · %s (watching from sequence %d)\n", t.ID, t.Provider, t.Cwd, start)
					}
					p.stands(at, t) // what began before start, which its events will not say
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
	fn func(ctx context.Context, c *client, at *batonv1.Thread, t domain.Thread) error) error {
	ctx, stop := signalContext(cmd.Context())
	defer stop()
	c, err := g.connect(ctx)
	if err != nil {
		return err
	}
	defer c.close()
	at, t, err := c.threadFor(ctx, verb, threadID)
	if err != nil {
		return err
	}
	return fn(ctx, c, at, t)
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
			argv, err := sf.check("send")
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
					runOptions{verb: "send", messages: msgs, mode: mode, target: target, switchArgv: argv, cont: cont}, interruptReq)
			}
			idgen := ids.New()
			var targetID string
			if *sf != (switchFlags{}) || cont != nil || target != 0 {
				// The run meant, the switch and the policy first (each
				// checked before any is written), shown as baton switch
				// shows it.
				at, t, err := c.threadFor(ctx, "send", threadID)
				if err != nil {
					return err
				}
				if targetID, err = targetRun(ctx, c, "send", at, t, target); err != nil {
					return err
				}
				if missing := missingCommand(t, cont); missing != "" {
					return noCommand(ctx, "send", c, missing)
				}
				switched, err := switchThread(ctx, "send", c, idgen, t, *sf, argv)
				if err != nil {
					return err
				}
				if err := setPolicy(ctx, "send", c, idgen, t, cont); err != nil {
					return err
				}
				if switched || cont != nil {
					now, err := c.GetThread(ctx, &batonv1.GetThreadRequest{ThreadId: t.ID})
					if err != nil {
						return rpcError("send", err)
					}
					if err := printEvents(ctx, c, scopedPrinter(g.stdout, false, t), "read events", t.ID, at.GetSequence(), now.GetSequence()); err != nil {
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
			return withThread(cmd, g, "interrupt", args[0], func(ctx context.Context, c *client, at *batonv1.Thread, t domain.Thread) error {
				req := &batonv1.InterruptRequest{CommandId: ids.New().NewID("cmd"), ThreadId: t.ID, Force: force}
				if given {
					r, err := c.runAt(ctx, at, t, run)
					switch {
					case err != nil:
						return rpcError("interrupt", err)
					case r == nil:
						return usagef("interrupt: thread %s has no run %d (it has %s)", t.ID, run, plural(int(at.GetSummary().GetRuns()), "run"))
					case runByOrdinal(t, run) == nil:
						// It left the projection the service holds: it has ended.
						return failf(exitFailed, "interrupt: run %d has already ended (%s)", run, r.Status)
					}
					req.RunId = r.ID
				} else if r := t.ActiveRun(); r != nil {
					req.RunId = r.ID // named, so that the receipt names it
				}
				// A run waiting for a limit's reset has no turn to stop: the
				// interrupt cancels its wait, and says so.
				var waiting *domain.Wait
				if t.Loop != nil && t.Loop.Wait != nil {
					if w := *t.Loop.Wait; req.RunId == "" || req.RunId == w.RunID {
						waiting = &w
					}
				}
				rc, err := c.Interrupt(ctx, req)
				if err != nil {
					return rpcError("interrupt", err)
				}
				_, after, err := c.threadFor(ctx, "interrupt", t.ID)
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
func interruptedLine(t domain.Thread, runID string, waiting *domain.Wait, force bool) string {
	r := runOf(t, runID)
	if r == nil {
		return fmt.Sprintf("thread %s: interrupt sent", t.ID)
	}
	head := fmt.Sprintf("run %d of thread %s", r.Ordinal, t.ID)
	switch {
	case waiting != nil && waiting.RunID == r.ID:
		return fmt.Sprintf("%s: its wait for %s is cancelled", head, domain.DescribeLimit(waiting.Limit, waiting.Provider))
	case r.Status == domain.RunStatusCancelled:
		return head + ": cancelled before it started"
	case r.Stop.Forced != "" && (r.Status == domain.RunStatusInterrupted || !r.Status.Terminal()),
		force && !r.Status.Terminal():
		// The same line whether the thread is read before the forced
		// stop is done or after: the read races the host's kill.
		return head + ": stopped by force; its provider's process is being ended"
	case r.Status.Terminal():
		return fmt.Sprintf("%s: %s", head, r.Status)
	}
	return head + ": interrupt sent; it ends when the provider confirms (follow it with baton watch " + t.ID + ")"
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
