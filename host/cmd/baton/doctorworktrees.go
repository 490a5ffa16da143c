package main

import (
	"context"
	"fmt"
	"slices"

	"github.com/hashicorp/go-hclog"

	batonv1 "github.com/baton-run/baton/host/api/baton/v1"
	"github.com/baton-run/baton/host/internal/domain"
	"github.com/baton-run/baton/host/internal/orchestrator"
	"github.com/baton-run/baton/host/internal/service"
	"github.com/baton-run/baton/host/internal/worktree"
)

// doctor's look at worktree threads: those, not archived, whose worktree
// directory is gone (deleted by hand), and, with --prune, git told to
// forget them in their repositories.

// goneWorktree is a thread whose worktree directory is gone.
type goneWorktree struct {
	thread string
	w      *batonv1.Worktree
}

// checkWorktrees reports the worktree threads whose worktree is gone, and
// with prune runs git worktree prune in their repositories. It reads the
// threads from the service on the data dir when one answers, else from a
// host it opens read-only: doctor writes nothing to the store.
func (g *globals) checkWorktrees(ctx context.Context, prune bool) error {
	c, err := g.readOnlyClient(ctx)
	if err != nil {
		// The store is healthy: that is doctor's answer, and this look
		// could not be had.
		fmt.Fprintf(g.stderr, "baton: the worktree threads were not checked: %v\n", err)
		return nil
	}
	defer c.close()
	gone, err := goneWorktrees(ctx, c)
	if err != nil {
		return err
	}
	if len(gone) == 0 {
		return nil
	}
	out := g.stdout
	fmt.Fprintf(out, "%s whose worktree is gone (deleted by hand?):\n", plural(len(gone), "thread"))
	var repos []string
	for _, t := range gone {
		fmt.Fprintf(out, "  - %s (branch %s): %s\n", t.thread, t.w.GetBranch(), t.w.GetPath())
		if !slices.Contains(repos, t.w.GetRepository()) {
			repos = append(repos, t.w.GetRepository())
		}
	}
	if !prune {
		fmt.Fprintln(out, "their branches are kept; `baton doctor --prune` makes git forget the worktrees (git worktree prune), and baton archive THREAD puts a thread away")
		return silent(exitFailed)
	}
	failed := false
	for _, repo := range repos {
		if err := worktree.Prune(ctx, repo); err != nil {
			fmt.Fprintf(out, "✖ %s: %v\n", repo, err)
			failed = true
			continue
		}
		fmt.Fprintf(out, "pruned: git worktree prune in %s\n", repo)
	}
	if failed {
		return silent(exitFailed)
	}
	return nil
}

// goneWorktrees lists the threads, not archived, whose worktree was made
// and whose directory is gone.
func goneWorktrees(ctx context.Context, c *client) ([]goneWorktree, error) {
	var gone []goneWorktree
	token := ""
	for {
		resp, err := c.ListThreads(ctx, &batonv1.ListThreadsRequest{PageSize: 1000, PageToken: token})
		if err != nil {
			return nil, rpcError("doctor: list threads", err)
		}
		for _, s := range resp.GetThreads() {
			if s.GetBranch() == "" {
				continue
			}
			t, err := c.thread(ctx, s.GetId())
			if err != nil {
				return nil, rpcError("doctor: thread "+s.GetId(), err)
			}
			if w := t.GetWorktree(); domain.WorktreeStatus(w.GetStatus()) == domain.WorktreeStatusReady && !isDir(w.GetPath()) {
				gone = append(gone, goneWorktree{thread: t.GetId(), w: w})
			}
		}
		if token = resp.GetNextPageToken(); token == "" {
			return gone, nil
		}
	}
}

// readOnlyClient is the service on the data dir (or --server) when one
// answers, else a host of this command's own that reads the data dir
// read-only: it resumes nothing and writes nothing.
func (g *globals) readOnlyClient(ctx context.Context) (*client, error) {
	if c, err := g.findService(ctx); c != nil || err != nil {
		return c, err
	}
	log := hclog.New(&hclog.LoggerOptions{Name: "baton", Output: g.stderr, Level: g.hostLogLevel()})
	h, err := orchestrator.Open(orchestrator.Config{DataDir: g.data, ReadOnly: true, Logger: log})
	if err != nil {
		return nil, failf(exitFailed, "doctor: %v", err)
	}
	conn, stop, err := service.InProcess(h, service.Options{Logger: log})
	if err != nil {
		h.Close()
		return nil, failf(exitFailed, "doctor: %v", err)
	}
	return &client{BatonClient: batonv1.NewBatonClient(conn), embedded: true, close: func() {
		stop()
		h.Close()
	}}, nil
}
