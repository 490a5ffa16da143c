package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/hashicorp/go-hclog"

	"github.com/baton-run/baton/host/internal/domain"
	"github.com/baton-run/baton/host/internal/orchestrator"
	"github.com/baton-run/baton/host/internal/scenario"
)

// threadFlags parses a command that takes a THREAD argument and flags in
// any order, and opens the host on the data dir.
type threadCmd struct {
	name       string
	fs         *flag.FlagSet
	data       *string
	logLevel   *string
	pluginDirs stringList
}

func newThreadCmd(name string, stderr io.Writer) *threadCmd {
	c := &threadCmd{name: name, fs: flag.NewFlagSet("baton "+name, flag.ContinueOnError)}
	c.fs.SetOutput(stderr)
	c.data = c.fs.String("data", "", "data `directory` (default: "+defaultDataDir()+")")
	c.logLevel = c.fs.String("log-level", "warn", "host log `level` on stderr")
	c.fs.Var(&c.pluginDirs, "plugin-dir", "extra plugin `directory` (repeatable)")
	return c
}

// parse reads THREAD and the flags; the thread id may come first.
func (c *threadCmd) parse(args []string, stderr io.Writer) (string, bool) {
	var thread string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		thread, args = args[0], args[1:]
	}
	if err := c.fs.Parse(args); err != nil {
		return "", false
	}
	if thread == "" && c.fs.NArg() == 1 {
		thread = c.fs.Arg(0)
	} else if c.fs.NArg() > 0 {
		fmt.Fprintf(stderr, "baton %s: unexpected arguments %q\n", c.name, c.fs.Args())
		return "", false
	}
	if thread == "" {
		fmt.Fprintf(stderr, "baton %s: give a THREAD id\n", c.name)
		return "", false
	}
	if *c.data == "" {
		*c.data = defaultDataDir()
	}
	return thread, true
}

func (c *threadCmd) open(stderr io.Writer) (*orchestrator.Host, bool) {
	log := hclog.New(&hclog.LoggerOptions{Name: "baton", Output: stderr, Level: hclog.LevelFromString(*c.logLevel)})
	h, err := orchestrator.Open(orchestrator.Config{DataDir: *c.data, PluginDirs: append(c.pluginDirs, pluginSearchPath(*c.data)...), Logger: log})
	if err != nil {
		fmt.Fprintf(stderr, "baton %s: %v\n", c.name, err)
		return nil, false
	}
	return h, true
}

// diffCmd prints the unified diff of a run's checkpoint against the one
// before it.
func diffCmd(args []string, stdout, stderr io.Writer) int {
	c := newThreadCmd("diff", stderr)
	run := c.fs.Int("run", 0, "the run `ordinal` (default: the newest run with a checkpoint)")
	max := c.fs.Int("max-bytes", 1<<20, "cut the diff after this many `bytes`")
	thread, ok := c.parse(args, stderr)
	if !ok {
		return exitUsage
	}
	h, ok := c.open(stderr)
	if !ok {
		return exitFailed
	}
	defer h.Close()
	d, cp, err := h.Diff(context.Background(), thread, *run, *max)
	if err != nil {
		fmt.Fprintf(stderr, "baton diff: %v\n", err)
		if errors.Is(err, domain.ErrNotFound) {
			return exitUsage
		}
		return exitFailed
	}
	fmt.Fprintf(stderr, "run %d: checkpoint %s (commit %s), %s changed\n", cp.RunOrdinal, cp.ID, cp.Commit, plural(len(cp.Files), "file"))
	io.WriteString(stdout, d.Text)
	return exitOK
}

// rollbackCmd rolls a thread back to a run's checkpoint and reports how.
func rollbackCmd(args []string, stdout, stderr io.Writer) int {
	c := newThreadCmd("rollback", stderr)
	run := c.fs.Int("run", -1, "the run `ordinal` to go back to (0: before the first run)")
	thread, ok := c.parse(args, stderr)
	if !ok {
		return exitUsage
	}
	if *run < 0 {
		fmt.Fprintln(stderr, "baton rollback: --run N is required")
		return exitUsage
	}
	h, ok := c.open(stderr)
	if !ok {
		return exitFailed
	}
	defer h.Close()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	t, seq, err := h.Snapshot(thread)
	if err != nil {
		fmt.Fprintf(stderr, "baton rollback: %v\n", err)
		return exitUsage
	}
	p := newPrinter(stdout, false, t)
	for _, sc := range t.CheckpointScopes { // the printer names checkpoints by their scopes
		p.scopes[sc.ID] = sc.Kind
	}
	rb, err := scenario.RollbackToRun(ctx, h, thread, fmt.Sprintf("rollback:%s:%d:%d", thread, *run, seq), *run)
	if recs, rerr := h.ThreadEvents(thread, seq); rerr == nil {
		for _, rec := range recs {
			if pl, err := domain.DecodePayload(rec.Type, rec.Data); err == nil {
				p.event(rec, pl)
			}
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "baton rollback: %v\n", err)
		if errors.Is(err, domain.ErrConflict) || errors.Is(err, domain.ErrNotFound) || errors.Is(err, domain.ErrUnsupported) {
			return exitUsage
		}
		return exitFailed
	}
	if rb.Status != domain.RollbackDone {
		return exitFailed
	}
	return exitOK
}
