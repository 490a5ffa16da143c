package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	batonv1 "github.com/baton-run/baton/host/api/baton/v1"
	"github.com/baton-run/baton/host/internal/domain"
	"github.com/baton-run/baton/host/internal/ids"
)

// baton merge and baton archive: a worktree thread's branch brought into
// another, and the thread put away. Each sends its command, then follows
// the thread until the host says how it came out.

func mergeCommand(g *globals) *cobra.Command {
	var into string
	var squash, jsonOut bool
	c := &cobra.Command{
		Use:   "merge THREAD",
		Short: "Bring a worktree thread's branch into another branch (the one its base came from)",
		Long: `Merge brings the branch of a thread made with --worktree into another branch:
--into BRANCH, by default the branch the thread's base came from. --squash
makes one commit of the branch's changes.

The host checks first, without touching any worktree: when the branches
conflict, nothing changes and merge names every path both changed; when the
target is checked out in a worktree with local changes, nothing changes and
merge names them. When the target is checked out in a clean worktree, its
files are updated as git merge would.

merge waits for the outcome and prints it: merged, fast-forwarded or up to
date, naming the target, the commits brought in and the worktree updated.
--json prints the thread's merge as one JSON object.

Exit codes: 0 merged (or up to date), 1 a conflict, local changes in the
target's worktree, or a merge that failed, 2 bad usage (a thread with no
worktree, a target that cannot be one), 130 interrupted (the merge goes
on).`,
		Example: `  baton merge thr_123
  baton merge thr_123 --into release --squash
  baton merge thr_123 --json | jq .status`,
		Args: threadArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			return withThread(cmd, g, "merge", args[0], func(ctx context.Context, c *client, t *batonv1.Thread) error {
				m, err := merge(ctx, c, t, into, squash)
				if err != nil {
					return err
				}
				if jsonOut {
					jsonLine(g.stdout, "merge", m)
				} else {
					printMerge(g, t, m)
				}
				if !domain.MergeStatus(m.GetStatus()).Landed() {
					return silent(exitFailed)
				}
				return nil
			})
		},
	}
	fl := c.Flags()
	fl.StringVar(&into, "into", "", "the `branch` to merge into (default: the branch the thread's base came from)")
	fl.BoolVar(&squash, "squash", false, "make one commit of the branch's changes")
	fl.BoolVar(&jsonOut, "json", false, "print the merge's outcome as one JSON object")
	return c
}

// merge sends thread t's merge into into and waits for its outcome.
func merge(ctx context.Context, c *client, t *batonv1.Thread, into string, squash bool) (*batonv1.Merge, error) {
	idgen := ids.New()
	mergeID := idgen.NewID("mrg")
	recs, errs := follow(ctx, c, t.GetId(), t.GetSequence())
	if _, err := c.Merge(ctx, &batonv1.MergeRequest{CommandId: idgen.NewID("cmd"), ThreadId: t.GetId(), Into: into, Squash: squash,
		MergeId: mergeID}); err != nil {
		return nil, rpcError("merge", err)
	}
	ev, err := awaitEvent(ctx, recs, errs, "merge", t.GetId(), func(ev *batonv1.Event) bool {
		return ev.GetThreadMerged().GetId() == mergeID
	})
	if err != nil {
		return nil, err
	}
	return ev.GetThreadMerged(), nil
}

// awaitEvent reads thread's events until one is what want says. The
// stream's end is verb's exit: the command goes on without it.
func awaitEvent(ctx context.Context, recs <-chan *batonv1.Event, errs <-chan error, verb, thread string,
	want func(*batonv1.Event) bool) (*batonv1.Event, error) {
	for {
		select {
		case ev, ok := <-recs:
			if !ok {
				return nil, failf(exitInterrupted, "%s: stopped watching; the %s goes on", verb, verb)
			}
			if want(ev) {
				return ev, nil
			}
		case err := <-errs:
			if ctx.Err() != nil {
				return nil, failf(exitInterrupted, "%s: stopped watching; the %s goes on", verb, verb)
			}
			return nil, streamEnded(verb, thread, err)
		}
	}
}

// printMerge prints how thread t's merge m came out, with the commits it
// brought in.
func printMerge(g *globals, t *batonv1.Thread, m *batonv1.Merge) {
	for _, l := range mergeLines(m, "branch "+t.GetWorktree().GetBranch()) {
		fmt.Fprintln(g.stdout, l)
	}
	if domain.MergeStatus(m.GetStatus()) == domain.MergeMerged || domain.MergeStatus(m.GetStatus()) == domain.MergeFastForward {
		for _, commit := range m.GetCommits() {
			fmt.Fprintf(g.stdout, "    %s\n", short(commit))
		}
	}
}

func archiveCommand(g *globals) *cobra.Command {
	var deleteBranch bool
	c := &cobra.Command{
		Use:   "archive THREAD",
		Short: "Put a thread away: it takes no more messages, and its worktree is removed",
		Long: `Archive puts a thread away: it takes no more messages, and baton threads lists it
only with --all. A thread made with --worktree has its worktree removed; its
branch is kept (unless --delete-branch), and so are its checkpoints, so its
runs can still be read, diffed and merged.

A thread with an active run is refused: interrupt it first.

Exit codes: 0 archived, 1 the worktree could not be removed (or the host
refused: a run is active, a merge in progress), 2 bad usage, 130
interrupted (the removal goes on).`,
		Example: `  baton archive thr_123
  baton archive thr_123 --delete-branch`,
		Args: threadArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			return withThread(cmd, g, "archive", args[0], func(ctx context.Context, c *client, t *batonv1.Thread) error {
				return archive(ctx, g, c, t, deleteBranch)
			})
		},
	}
	c.Flags().BoolVar(&deleteBranch, "delete-branch", false, "delete the thread's branch too")
	return c
}

// archive puts thread t away, waits for its worktree's removal (when it
// has one to remove), and says what was removed and what is kept.
func archive(ctx context.Context, g *globals, c *client, t *batonv1.Thread, deleteBranch bool) error {
	if t.GetArchived() {
		fmt.Fprintf(g.stdout, "thread %s is archived already\n", t.GetId())
		return nil
	}
	idgen := ids.New()
	recs, errs := follow(ctx, c, t.GetId(), t.GetSequence())
	if _, err := c.Archive(ctx, &batonv1.ArchiveRequest{CommandId: idgen.NewID("cmd"), ThreadId: t.GetId(),
		DeleteBranch: deleteBranch}); err != nil {
		return rpcError("archive", err)
	}
	w := t.GetWorktree()
	st := domain.WorktreeStatus(w.GetStatus())
	removes := w != nil && (st == domain.WorktreeStatusReady || st == domain.WorktreeStatusFailed)
	ev, err := awaitEvent(ctx, recs, errs, "archive", t.GetId(), func(ev *batonv1.Event) bool {
		if removes {
			return ev.GetWorktreeRemoved() != nil
		}
		return ev.GetThreadArchived() != nil
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(g.stdout, "■ thread %s archived\n", t.GetId())
	if !removes {
		fmt.Fprintln(g.stdout, "  its checkpoints are kept")
		return nil
	}
	r := ev.GetWorktreeRemoved()
	if r.GetFailure() != "" {
		fmt.Fprintf(g.stdout, "✖ its worktree %s could not be removed: %s\n", w.GetPath(), r.GetFailure())
		return silent(exitFailed)
	}
	fmt.Fprintf(g.stdout, "  removed: its worktree %s\n", w.GetPath())
	if r.GetBranchDeleted() {
		fmt.Fprintf(g.stdout, "  removed: its branch %s (it was at %s)\n", w.GetBranch(), short(w.GetHead()))
		fmt.Fprintln(g.stdout, "  kept: its checkpoints")
		return nil
	}
	fmt.Fprintf(g.stdout, "  kept: its branch %s at %s (from %s), and its checkpoints\n", w.GetBranch(), short(w.GetHead()), baseName(w))
	return nil
}
