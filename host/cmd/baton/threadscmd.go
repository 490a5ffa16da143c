package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	batonv1 "github.com/baton-run/baton/host/api/baton/v1"
	"github.com/baton-run/baton/host/internal/domain"
	"github.com/baton-run/baton/host/internal/ids"
	"github.com/baton-run/baton/sdk"
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

func summary(t *batonv1.ThreadSummary) domain.ThreadSummary {
	return domain.ThreadSummary{ID: t.GetId(), Provider: t.GetProvider(), Cwd: t.GetCwd(), Model: t.GetModel(),
		CreatedAt: t.GetCreatedAt().AsTime(), UpdatedAt: t.GetUpdatedAt().AsTime(), Runs: int(t.GetRuns()), Queued: int(t.GetQueued()),
		Status: domain.ThreadStatus(t.GetStatus()), LastRun: domain.RunStatus(t.GetLastRun()), Sequence: t.GetSequence()}
}

func threadsCommand(g *globals) *cobra.Command {
	var jsonOut bool
	var after, status, provider string
	var limit int
	c := &cobra.Command{
		Use:   "threads",
		Short: "List the threads: id, provider, status, runs, last update",
		Long: `Threads lists the threads, in id order (oldest first), from the thread index: no
thread's events are read. --status and --provider keep only the matching ones.`,
		Example: `  baton threads
  baton threads --status running
  baton threads --json | jq -r .id`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withReader(cmd, g, func(ctx context.Context, c *client) error {
				var list []domain.ThreadSummary
				token := after
				for {
					size := uint32(1000)
					if limit > 0 {
						size = uint32(min(limit-len(list), 1000))
					}
					resp, err := c.ListThreads(ctx, &batonv1.ListThreadsRequest{PageSize: size, PageToken: token, Status: status, Provider: provider})
					if err != nil {
						return rpcError("list threads", err)
					}
					for _, t := range resp.GetThreads() {
						list = append(list, summary(t))
					}
					token = resp.GetNextPageToken()
					if token == "" || (limit > 0 && len(list) >= limit) {
						break
					}
				}
				return printThreads(g, list, jsonOut)
			})
		},
	}
	fl := c.Flags()
	fl.BoolVar(&jsonOut, "json", false, "print one JSON object per thread")
	fl.StringVar(&after, "after", "", "list the threads after this thread `id` (ids are in order)")
	fl.IntVar(&limit, "limit", 0, "list at most `n` threads (0: all)")
	fl.StringVar(&status, "status", "", "keep the threads with this `status` (idle, running, waiting, ...)")
	fl.StringVar(&provider, "provider", "", "keep the threads of this `provider`")
	c.RegisterFlagCompletionFunc("status", fixedCompletion("idle", "starting", "running", "waiting"))
	return c
}

func printThreads(g *globals, list []domain.ThreadSummary, jsonOut bool) error {
	if jsonOut {
		enc := json.NewEncoder(g.stdout)
		for _, t := range list {
			enc.Encode(t)
		}
		return nil
	}
	w := tabwriter.NewWriter(g.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "THREAD\tPROVIDER\tSTATUS\tRUNS\tUPDATED\tCWD")
	for _, t := range list {
		runs := fmt.Sprint(t.Runs)
		if t.Queued > 0 {
			runs += fmt.Sprintf(" (%d queued)", t.Queued)
		}
		status := string(t.Status)
		if t.LastRun != "" && t.Status == "idle" {
			status += ", last run " + string(t.LastRun)
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", t.ID, t.Provider, status, runs, t.UpdatedAt.Local().Format(time.DateTime), t.Cwd)
	}
	return w.Flush()
}

func showCommand(g *globals) *cobra.Command {
	var jsonOut bool
	var handoff string
	c := &cobra.Command{
		Use:   "show THREAD",
		Short: "Show a thread: its runs, messages, requests, checkpoints and handoffs",
		Long: `Show prints a thread's projection: a summary of its runs, messages, requests,
checkpoints and context handoffs (and, once it has switched providers, each
provider's binding: its model, its conversation, the last run it saw and the
runs it ran), or with --json the whole projection as one JSON object.`,
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
					b, err := json.Marshal(t)
					if err != nil {
						return failf(exitFailed, "%v", err)
					}
					fmt.Fprintln(g.stdout, string(b))
					return nil
				}
				showThread(g, t, summary(at.GetSummary()))
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
	status := string(s.Status)
	if s.LastRun != "" && s.Status == "idle" {
		status += ", last run " + string(s.LastRun)
	}
	fmt.Fprintf(w, "  %s; approvals: %s; created %s, updated %s; sequence %d\n", status, t.ApprovalPolicy,
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
				c.followWaits(t.ID) // a wait the thread holds fires while it is watched
				start := at.GetSequence()
				if afterSet {
					start = after
				}
				p := scopedPrinter(g.stdout, jsonOut, t)
				if !afterSet {
					if !jsonOut {
						fmt.Fprintf(g.stdout, "● thread %s · %s · %s (watching from sequence %d)\n", t.ID, t.Provider, t.Cwd, start)
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
	var mode, target string
	sf := &switchFlags{}
	pf := &policyFlags{}
	c := &cobra.Command{
		Use:   "send THREAD MESSAGE",
		Short: "Send a message to a thread: a new run, or into the active one (--mode)",
		Long: `Send sends MESSAGE to THREAD. Against a service it returns at once (follow the
run with baton watch); with no service running it follows the run to its end,
as baton run --thread does (nothing else would carry it).
While a run is active, --mode says what the message does: queue (a run of its
own after the active one), steer (added to the active turn), restart (the
active turn stops and starts again with it), or now (interrupt the active run
and start this one). Without --mode: steer where the provider steers natively,
else restart; on an idle thread the message starts a run at once.
--provider (or --model, --provider-command) switches the thread first, as
baton switch does: the message's run starts on that provider.
--on-limit, --until and the budgets set the thread's continuation policy
first, as baton run does (see baton run --help).`,
		Example: `  baton send thr_123 "Also update the changelog"
  baton send --mode queue thr_123 "Then run the tests"
  baton send --provider claude thr_123 "Take it from here"
  baton send --on-limit wait --until 'make test' --max-hours 8 thr_123 "Finish the migration"`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			switch mode {
			case "", "queue", "steer", "restart", "now":
			default:
				return usagef("send: --mode must be queue, steer, restart or now, got %q", mode)
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
				return runOn(ctx, g, c, &runFlags{switchFlags: *sf, policyFlags: *pf, thread: args[0]},
					runOptions{verb: "send", messages: args[1:], mode: mode, switchArgv: argv, cont: cont}, interruptReq)
			}
			idgen := ids.New()
			if *sf != (switchFlags{}) || cont != nil {
				// The switch and the policy first, shown as baton switch
				// shows it.
				at, t, err := c.threadFor(ctx, "send", args[0])
				if err != nil {
					return err
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
			rc, err := c.SendMessage(ctx, &batonv1.SendMessageRequest{CommandId: idgen.NewID("cmd"), ThreadId: args[0],
				Text: args[1], Mode: mode, TargetRunId: target})
			if err != nil {
				return rpcError("send", err)
			}
			fmt.Fprintf(g.stdout, "sent to thread %s (run %s, sequence %d); follow it with: baton watch %s\n", rc.GetThreadId(), rc.GetRunId(), rc.GetSequence(), rc.GetThreadId())
			return nil
		},
	}
	c.Flags().StringVar(&mode, "mode", "", "what the message does while a run is active: queue, steer, restart or now")
	c.Flags().StringVar(&target, "run", "", "for steer and restart, the run `id` meant (refused if another is active)")
	addSwitchFlags(c.Flags(), sf, false)
	addPolicyFlags(c.Flags(), pf)
	c.RegisterFlagCompletionFunc("provider", fixedCompletion("acp", "claude", "codex", "cursor", "opencode"))
	c.RegisterFlagCompletionFunc("mode", fixedCompletion("queue", "steer", "restart", "now"))
	c.RegisterFlagCompletionFunc("on-limit", fixedCompletion("wait", "stop", "switch:acp", "switch:claude", "switch:codex", "switch:cursor", "switch:opencode"))
	return c
}

func interruptCommand(g *globals) *cobra.Command {
	var run string
	c := &cobra.Command{
		Use:   "interrupt THREAD",
		Short: "Ask the provider to stop a thread's active run (or --run ID)",
		Long: `Interrupt asks the provider to stop the thread's active run (or the run --run
names; a queued run is cancelled). The run ends interrupted when the provider
confirms; follow it with baton watch. A run waiting for a provider's limit to
reset (--on-limit wait) is the active run: its wait is cancelled.`,
		Example: `  baton interrupt thr_123`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withClient(cmd, g, func(ctx context.Context, c *client) error {
				// A run waiting for a limit's reset has no turn to stop: the
				// interrupt cancels its wait, and says so.
				var waiting *domain.Wait
				if _, t, err := c.thread(ctx, args[0]); err == nil && t.Loop != nil && t.Loop.Wait != nil {
					if w := *t.Loop.Wait; run == "" || run == w.RunID {
						waiting = &w
					}
				}
				rc, err := c.Interrupt(ctx, &batonv1.InterruptRequest{CommandId: ids.New().NewID("cmd"), ThreadId: args[0], RunId: run})
				if err != nil {
					return rpcError("interrupt", err)
				}
				if waiting != nil {
					fmt.Fprintf(g.stdout, "interrupt sent to thread %s (run %s): its wait for %s is cancelled\n", rc.GetThreadId(), waiting.RunID,
						domain.DescribeLimit(waiting.Limit, waiting.Provider))
					return nil
				}
				fmt.Fprintf(g.stdout, "interrupt sent to thread %s (run %s)\n", rc.GetThreadId(), rc.GetRunId())
				return nil
			})
		},
	}
	c.Flags().StringVar(&run, "run", "", "the run `id` to stop (default: the active run)")
	return c
}

// answerCommand is approve or decline: an answer to a pending request
// from any terminal.
func answerCommand(g *globals, verb string) *cobra.Command {
	var session, cancelTurn bool
	var answer string
	decision := map[string]sdk.Decision{"approve": sdk.DecisionAccept, "decline": sdk.DecisionDecline}[verb]
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
				d = sdk.DecisionAcceptForSession
			}
			if cancelTurn {
				d = sdk.DecisionCancel
			}
			var answers map[string]string
			if cmd.Flags().Changed("answer") {
				if session {
					return usagef("approve: give --answer or --for-session, not both")
				}
				d, answers = sdk.DecisionAnswer, map[string]string{"answer": answer}
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
