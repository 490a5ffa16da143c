package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	batonv1 "github.com/baton-run/baton/host/api/baton/v1"
	"github.com/baton-run/baton/host/internal/domain"
	"github.com/baton-run/baton/host/internal/ids"
)

// cancelReason is the stop reason of the runs baton cancel drops.
const cancelReason = "dropped with baton cancel"

func cancelCommand(g *globals) *cobra.Command {
	var queued bool
	var run int
	c := &cobra.Command{
		Use:   "cancel THREAD (--queued | --run N)",
		Short: "Drop a thread's queued runs before they start (--queued), or one of them (--run N)",
		Long: `Cancel drops runs that are queued and have not started: nothing of them has
reached the agent, and nothing will. --queued cancels every queued run of
THREAD; --run N cancels run N, which must still be queued. Each ends cancelled,
with the reason "` + cancelReason + `". Cancel prints what it dropped.

A run that has started is not cancelled: stop it with baton interrupt THREAD.

When a host stops (killed, say) with runs queued, they are sent later with no
new message: by baton serve as it starts again, or, without a service, before
the thread's next message. The stream says so and names them
(run.queue.resumed); baton cancel THREAD --queued drops them first.

Exit codes: 0 dropped (or nothing was queued), 1 failed (run N has started),
2 bad usage (neither or both of --queued and --run, an unknown thread or run).`,
		Example: `  baton cancel thr_123 --queued
  baton cancel thr_123 --run 4`,
		Args: threadArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			given := cmd.Flags().Changed("run")
			switch {
			case queued && given:
				return usagef("cancel: give --queued or --run N, not both")
			case !queued && !given:
				return usagef("cancel: say what to drop: --queued (every queued run) or --run N (one queued run); to stop the active run, use baton interrupt %s", args[0])
			case given:
				if err := checkOrdinal("cancel", run, 1); err != nil {
					return err
				}
			}
			return withThread(cmd, g, "cancel", args[0], func(ctx context.Context, c *client, t *batonv1.Thread) error {
				req := &batonv1.CancelQueuedRequest{CommandId: ids.New().NewID("cmd"), ThreadId: t.GetId(), Reason: cancelReason}
				if given {
					r, err := c.runAt(ctx, t, run)
					switch {
					case err != nil:
						return rpcError("cancel", err)
					case r == nil:
						return usagef("cancel: thread %s has no run %d (it has %s)", t.GetId(), run, plural(int(t.GetSummary().GetRuns()), "run"))
					case statusOf(r) != domain.RunStatusQueued:
						return failf(exitFailed, "cancel: run %d of thread %s is %s, not queued; only a run that has not started can be dropped (stop a running one with baton interrupt %s --run %d)",
							run, t.GetId(), r.GetStatus(), t.GetId(), r.GetOrdinal())
					}
					req.RunIds = []string{r.GetId()}
				}
				if _, err := c.CancelQueued(ctx, req); err != nil {
					return rpcError("cancel", err)
				}
				after, err := c.threadFor(ctx, "cancel", t.GetId())
				if err != nil {
					return err
				}
				fmt.Fprintln(g.stdout, cancelledLine(t, after))
				return nil
			})
		},
	}
	c.Flags().BoolVar(&queued, "queued", false, "drop every queued run of the thread")
	c.Flags().IntVar(&run, "run", 0, "drop the queued run of this `ordinal`")
	return c
}

// targetRun is the id of thread t's run of ordinal, the active run a
// steer or restart is meant for (send --run; 0: none, ""). A run the
// thread does not have is bad usage; one that is not active is refused
// (the domain refuses it too, by its id).
func targetRun(ctx context.Context, c *client, verb string, t *batonv1.Thread, ordinal int) (string, error) {
	if ordinal == 0 {
		return "", nil
	}
	r, err := c.runAt(ctx, t, ordinal)
	switch {
	case err != nil:
		return "", rpcError(verb, err)
	case r == nil:
		return "", usagef("%s: thread %s has no run %d (it has %s)", verb, t.GetId(), ordinal, plural(int(t.GetSummary().GetRuns()), "run"))
	case !statusOf(r).Active():
		active := "none is"
		if a := activeRun(t); a != nil {
			active = fmt.Sprintf("run %d is", a.GetOrdinal())
		}
		return "", failf(exitFailed, "%s: run %d of thread %s is %s, not the active run (%s); --run names the run a steer or restart is meant for",
			verb, ordinal, t.GetId(), r.GetStatus(), active)
	}
	return r.GetId(), nil
}

// cancelledLine says which runs baton cancel dropped: those cancelled
// with its reason in after that had not ended in before.
func cancelledLine(before, after *batonv1.Thread) string {
	var runs []string
	for _, r := range after.GetRuns() {
		if statusOf(r) != domain.RunStatusCancelled || r.GetStopReason() != cancelReason {
			continue
		}
		if b := runByOrdinal(before, int(r.GetOrdinal())); b != nil && statusOf(b).Terminal() {
			continue // dropped before
		}
		runs = append(runs, fmt.Sprintf("run %d %q", r.GetOrdinal(), oneLine(r.GetInput(), 60)))
	}
	if len(runs) == 0 {
		return fmt.Sprintf("thread %s has no queued runs; nothing dropped", after.GetId())
	}
	return fmt.Sprintf("dropped %s of thread %s: %s", plural(len(runs), "queued run"), after.GetId(), strings.Join(runs, ", "))
}
