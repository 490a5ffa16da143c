package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	batonv1 "github.com/baton-run/baton/host/api/baton/v1"
	"github.com/baton-run/baton/host/internal/domain"
	"github.com/baton-run/baton/host/internal/worktree"
)

// baton compare and baton diff THREAD_A THREAD_B: what several threads
// did, side by side, and the difference between two threads' results.

func compareCommand(g *globals) *cobra.Command {
	var jsonOut bool
	c := &cobra.Command{
		Use:   "compare THREAD...",
		Short: "Compare threads: status, runs, files changed, lines added and removed, tokens and time",
		Long: `Compare shows, for each thread, its provider, status, runs, the files its work
changed with the lines added and removed, the tokens its runs used, and its
time (from its first run's start to its last run's end).

The changes of a thread made with --worktree are its branch's against its
base, as git diff --numstat BASE HEAD counts them in the thread's
repository, when that repository is on this machine; otherwise (and for a
thread without a worktree) they are the sum of its runs' checkpoints that
were not rolled back. --json prints one object per thread, whose "changesFrom"
says which: "branch" or "checkpoints".

Exit codes: 0 done, 1 failed, 2 bad usage (a thread that does not exist).`,
		Example: `  baton compare thr_1 thr_2 thr_3
  baton compare --json $(baton threads -o ids --limit 3)`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usagef("compare: give one THREAD id or more")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return withReader(cmd, g, func(ctx context.Context, c *client) error {
				var rows []comparison
				for _, id := range args {
					t, err := c.threadFrom(ctx, id, 1)
					if err != nil {
						return rpcError("compare", err)
					}
					rows = append(rows, compare(ctx, t))
				}
				if jsonOut {
					enc := json.NewEncoder(g.stdout)
					for _, r := range rows {
						if err := enc.Encode(r); err != nil {
							return failf(exitFailed, "compare: %v", err)
						}
					}
					return nil
				}
				return printComparison(g.stdout, rows)
			})
		},
	}
	c.Flags().BoolVar(&jsonOut, "json", false, "print one JSON object per thread")
	return c
}

// comparison is one thread's line of baton compare.
type comparison struct {
	Thread   string `json:"thread"`
	Provider string `json:"provider"`
	Status   string `json:"status"`
	Branch   string `json:"branch,omitempty"`
	Runs     int    `json:"runs"`
	// Completed counts the runs that completed.
	Completed int `json:"completed"`
	Files     int `json:"files"`
	Added     int `json:"added"`
	Removed   int `json:"removed"`
	// ChangesFrom says what Files, Added and Removed count: "branch" (git
	// diff --numstat of the branch against its base) or "checkpoints".
	ChangesFrom string `json:"changesFrom"`
	Tokens      int64  `json:"tokens"`
	// Seconds is from the first run's start to the last run's end (0: no
	// run has ended).
	Seconds float64 `json:"seconds"`
}

// compare is what thread t did.
func compare(ctx context.Context, t *batonv1.Thread) comparison {
	s := t.GetSummary()
	c := comparison{Thread: t.GetId(), Provider: s.GetProvider(), Status: statusWords(s), Branch: t.GetWorktree().GetBranch(),
		Runs: len(t.GetRuns())}
	var first, last time.Time
	for _, r := range t.GetRuns() {
		if statusOf(r) == domain.RunStatusCompleted {
			c.Completed++
		}
		c.Tokens += tokens(r.GetUsage())
		if at := instant(r.GetStartedAt()); !at.IsZero() && (first.IsZero() || at.Before(first)) {
			first = at
		}
		if at := instant(r.GetEndedAt()); at.After(last) {
			last = at
		}
	}
	if !first.IsZero() && last.After(first) {
		c.Seconds = last.Sub(first).Round(time.Millisecond).Seconds()
	}
	if stat, ok := branchStat(ctx, t.GetWorktree()); ok {
		c.Files, c.Added, c.Removed, c.ChangesFrom = stat.Files, stat.Added, stat.Removed, "branch"
		return c
	}
	stat := checkpointStat(t)
	c.Files, c.Added, c.Removed, c.ChangesFrom = stat.Files, stat.Added, stat.Removed, "checkpoints"
	return c
}

// tokens is a run's tokens: its total, else input and output.
func tokens(u *batonv1.Usage) int64 {
	if u.GetTotalTokens() > 0 {
		return u.GetTotalTokens()
	}
	return u.GetInputTokens() + u.GetOutputTokens()
}

// branchStat counts the changes of a worktree's branch (its head as the
// thread made it) against its base, in its repository; false when there
// is no worktree or its repository is not on this machine.
func branchStat(ctx context.Context, w *batonv1.Worktree) (worktree.Stat, bool) {
	if w == nil || w.GetBase() == "" || w.GetHead() == "" || !isDir(w.GetRepository()) {
		return worktree.Stat{}, false
	}
	s, err := worktree.DiffStat(ctx, w.GetRepository(), w.GetBase(), w.GetHead())
	return s, err == nil
}

// checkpointStat sums the files of thread t's runs' checkpoints, of the
// runs not rolled back: the files (each path once), the lines added and
// removed.
func checkpointStat(t *batonv1.Thread) worktree.Stat {
	var s worktree.Stat
	paths := map[string]bool{}
	for _, cp := range runCheckpoints(t) {
		if cp.GetRunOrdinal() == 0 {
			continue // the baseline: what was there before
		}
		for _, f := range cp.GetFiles() {
			if !paths[f.GetPath()] {
				paths[f.GetPath()] = true
				s.Files++
			}
			s.Added += int(f.GetAdditions())
			s.Removed += int(f.GetDeletions())
		}
	}
	return s
}

// runCheckpoints are thread t's ready checkpoints of whole runs (and the
// baseline), of the runs not rolled back, oldest first.
func runCheckpoints(t *batonv1.Thread) []*batonv1.Checkpoint {
	roots := map[string]bool{}
	for _, sc := range t.GetCheckpointScopes() {
		roots[sc.GetId()] = domain.ScopeKind(sc.GetKind()) == domain.ScopeRootRun
	}
	var out []*batonv1.Checkpoint
	for _, cp := range t.GetCheckpoints() {
		r := runOf(t, cp.GetRunId())
		if !roots[cp.GetScopeId()] || domain.CheckpointStatus(cp.GetStatus()) != domain.CheckpointReady ||
			(r != nil && statusOf(r) == domain.RunStatusRolledBack) {
			continue
		}
		out = append(out, cp)
	}
	return out
}

// printComparison prints the comparison's table.
func printComparison(w io.Writer, rows []comparison) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "THREAD\tPROVIDER\tSTATUS\tBRANCH\tRUNS\tFILES\t+\t-\tTOKENS\tTIME")
	for _, r := range rows {
		runs := fmt.Sprint(r.Runs)
		if r.Completed != r.Runs {
			runs = fmt.Sprintf("%d (%d completed)", r.Runs, r.Completed)
		}
		took := "-"
		if r.Seconds > 0 {
			took = fmtDuration(time.Duration(r.Seconds * float64(time.Second)))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t+%d\t-%d\t%d\t%s\n", r.Thread, r.Provider, r.Status, orDash(r.Branch), runs,
			r.Files, r.Added, r.Removed, r.Tokens, took)
	}
	return tw.Flush()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// threadsDiff prints the unified diff from thread a's result to thread
// b's (see result), computed by git in a's repository.
func threadsDiff(ctx context.Context, g *globals, c *client, a, b string) error {
	ta, err := c.threadFrom(ctx, a, 1)
	if err != nil {
		return rpcError("diff", err)
	}
	tb, err := c.threadFrom(ctx, b, 1)
	if err != nil {
		return rpcError("diff", err)
	}
	ra, rb := result(ta), result(tb)
	for _, r := range []threadResult{ra, rb} {
		if r.commit == "" {
			return failf(exitFailed, "diff: thread %s has no result to compare: no branch and no checkpoint ready", r.thread)
		}
		if !isDir(r.repository) {
			return failf(exitFailed, "diff: thread %s's repository %s is not on this machine; run diff where it is", r.thread, r.repository)
		}
	}
	out, _, err := worktree.DiffText(ctx, ra.repository, ra.commit, rb.commit, 0)
	if err != nil {
		return failf(exitFailed, "diff: %s and %s: %v (are both threads' results in one repository?)", a, b, err)
	}
	fmt.Fprintf(g.stderr, "%s → %s\n", ra, rb)
	_, err = io.WriteString(g.stdout, out)
	return err
}

// threadResult is where a thread's work stands: a commit and the
// repository that holds it.
type threadResult struct {
	thread, repository, commit string
	// what it is, in words: "branch baton/1a2b3c4d" or "run 2's checkpoint".
	what string
}

func (r threadResult) String() string {
	return fmt.Sprintf("thread %s (%s, %s)", r.thread, r.what, short(r.commit))
}

// result is thread t's result: its branch's head for a thread made with
// --worktree, else its newest ready checkpoint's commit (of a run not
// rolled back) in its directory's repository.
func result(t *batonv1.Thread) threadResult {
	if w := t.GetWorktree(); w != nil {
		return threadResult{thread: t.GetId(), repository: w.GetRepository(), commit: w.GetHead(), what: "branch " + w.GetBranch()}
	}
	r := threadResult{thread: t.GetId(), repository: t.GetSummary().GetCwd()}
	for _, cp := range runCheckpoints(t) {
		r.commit, r.what = cp.GetCommit(), checkpointOf("", int(cp.GetRunOrdinal()))+"'s checkpoint"
	}
	return r
}

func isDir(p string) bool {
	fi, err := os.Stat(p)
	return p != "" && err == nil && fi.IsDir()
}
