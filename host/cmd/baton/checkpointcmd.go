package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	batonv1 "github.com/baton-run/baton/host/api/baton/v1"
)

// threadArg takes the one THREAD argument, saying so when it is missing.
func threadArg(cmd *cobra.Command, args []string) error {
	switch len(args) {
	case 1:
		return nil
	case 0:
		return usagef("%s: give a THREAD id", cmd.Name())
	}
	return usagef("%s: unexpected arguments %q", cmd.Name(), args[1:])
}

// checkOrdinal refuses a --run ordinal below least (1; or 0 where 0 is the
// baseline before the first run), naming the flag: a usage error.
func checkOrdinal(verb string, n, least int) error {
	if n >= least {
		return nil
	}
	from := "1"
	if least == 0 {
		from = "0 (0: before the first run)"
	}
	return usagef("%s: --run must be a run ordinal from %s, got %d", verb, from, n)
}

func diffCommand(g *globals) *cobra.Command {
	var run, maxBytes int
	c := &cobra.Command{
		Use:   "diff THREAD [THREAD_B]",
		Short: "Print a run's changes (its checkpoint against the one before), or the difference between two threads' results",
		Long: `Diff prints, as a unified diff, what a run changed in the thread's working
directory: the run's checkpoint against the one before it. A summary line goes
to stderr.

With two threads, it prints the difference between their results, from the
first's to the second's, as git diff computes it in the first's repository
(on this machine): a thread made with --worktree's result is its branch's
head, another thread's its newest ready checkpoint.

Exit codes: 0 done, 1 failed (no result to compare, a repository not on this
machine), 2 bad usage.`,
		Example: `  baton diff thr_123            # the newest run with a checkpoint
  baton diff thr_123 --run 2 | git apply -R
  baton diff thr_codex thr_claude  # what claude did differently`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 2 {
				return nil
			}
			return threadArg(cmd, args)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 2 {
				fs := cmd.Flags()
				for _, name := range []string{"run", "max-bytes"} {
					if fs.Changed(name) && !fromEnv(fs, name) {
						return usagef("diff: --%s is one thread's; two threads are compared whole", name)
					}
				}
				return withReader(cmd, g, func(ctx context.Context, c *client) error {
					return threadsDiff(ctx, g, c, args[0], args[1])
				})
			}
			if cmd.Flags().Changed("run") {
				if err := checkOrdinal("diff", run, 1); err != nil {
					return err
				}
			}
			if maxBytes < 0 {
				return usagef("diff: --max-bytes cannot be negative, got %d", maxBytes)
			}
			return withClient(cmd, g, func(ctx context.Context, c *client) error {
				d, err := c.Diff(ctx, &batonv1.DiffRequest{ThreadId: args[0], Run: uint32(run), MaxBytes: uint32(maxBytes)})
				if err != nil {
					return rpcError("diff", err)
				}
				fmt.Fprintf(g.stderr, "run %d: checkpoint %s (commit %s), %s changed\n", d.GetRun(), d.GetCheckpointId(), d.GetCommit(), plural(len(d.GetFiles()), "file"))
				io.WriteString(g.stdout, d.GetPatch())
				return nil
			})
		},
	}
	c.Flags().IntVar(&run, "run", 0, "the run `ordinal`, from 1 (default: the newest run with a checkpoint)")
	c.Flags().IntVar(&maxBytes, "max-bytes", 1<<20, "cut the diff after this many `bytes`")
	return c
}

func rollbackCommand(g *globals) *cobra.Command {
	var run int
	c := &cobra.Command{
		Use:   "rollback THREAD --run N",
		Short: "Put a thread's files and provider conversation back to run N's checkpoint",
		Long: `Rollback puts the thread's working directory back to run N's checkpoint (0: as it
was before the first run), and the provider's conversation with it: natively
where the provider can, else the next run starts a fresh conversation that
carries a summary of the runs that remain. The runs after N are marked rolled
back.`,
		Example: `  baton rollback thr_123 --run 1
  baton rollback thr_123 --run 0   # before the first run`,
		Args: threadArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			if !cmd.Flags().Changed("run") {
				return usagef("rollback: --run N is required")
			}
			if err := checkOrdinal("rollback", run, 0); err != nil {
				return err
			}
			return withThread(cmd, g, "rollback", args[0], func(ctx context.Context, c *client, t *batonv1.Thread) error {
				p := scopedPrinter(g.stdout, false, t)
				recs, errs := follow(ctx, c, args[0], t.GetSequence())
				if _, err := c.Rollback(ctx, &batonv1.RollbackRequest{CommandId: fmt.Sprintf("rollback:%s:%d:%d", args[0], run, t.GetSequence()),
					ThreadId: args[0], Run: uint32(run)}); err != nil {
					return rpcError("rollback", err)
				}
				for {
					select {
					case rec, ok := <-recs:
						if !ok {
							return failf(exitInterrupted, "rollback: stopped watching; the rollback goes on")
						}
						p.event(rec)
						switch rec.GetPayload().(type) {
						case *batonv1.Event_RollbackCompleted:
							return nil
						case *batonv1.Event_RollbackFailed:
							return silent(exitFailed)
						}
					case err := <-errs:
						if ctx.Err() != nil {
							return failf(exitInterrupted, "rollback: stopped watching; the rollback goes on")
						}
						return rpcError("rollback", err)
					}
				}
			})
		},
	}
	c.Flags().IntVar(&run, "run", 0, "the run `ordinal` to go back to (required; 0: before the first run)")
	return c
}
