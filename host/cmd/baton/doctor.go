package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/spf13/cobra"

	"github.com/baton-run/baton/host/internal/domain"
	"github.com/baton-run/baton/host/internal/eventlog"
	"github.com/baton-run/baton/host/internal/orchestrator"
)

func doctorCommand(g *globals) *cobra.Command {
	var rebuild, prune bool
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Check the event store and, on request, rebuild it from what is intact",
		Long: `doctor reads the whole event store (DATA/events) read-only: the checksums of
every table and write-ahead log, the seal that records the last committed
event, and Baton's own consistency (every event decodes, sequences have no
gaps, the thread index, outbox, thread heads and snapshots agree with the
events). It prints what is damaged and which threads it touches, and exits 0
when the store is healthy, 1 when it is damaged.

With --rebuild it builds a new store from every event that reads intact (a
thread whose creation event is lost is dropped whole), keeping each event's
sequence, rebuilds the thread heads and snapshots from the events, moves the
damaged store aside to DATA/events.damaged-TIME (never changed or deleted)
and puts the new one in its place. It says what each thread lost. Runs left
in flight are ended, with a reason, by the next baton to open the store, as
after any restart.

The check may run while another process holds the data directory (baton
serve): the store is read as it stands, read-only, and read again when what
that process wrote meanwhile reads as damage. --rebuild needs the data
directory free: stop baton serve first.

Once the store is healthy, doctor looks at the threads made with --worktree
that are not archived: one whose worktree directory is gone (deleted by
hand) is named, with its branch, and doctor exits 1; --prune then makes git
forget such worktrees in their repositories (git worktree prune; the
branches are kept) and exits 0.`,
		Example: `  baton doctor
  baton doctor --rebuild
  baton doctor --prune`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := g.checkData(); err != nil {
				return err
			}
			return g.doctor(cmd.Context(), rebuild, prune)
		},
	}
	cmd.Flags().BoolVar(&rebuild, "rebuild", false, "build a new store from what is intact and keep the damaged one aside")
	cmd.Flags().BoolVar(&prune, "prune", false, "make git forget the worktrees of threads whose worktree directory is gone (git worktree prune)")
	return cmd
}

func (g *globals) doctor(ctx context.Context, rebuild, prune bool) error {
	dir := filepath.Join(g.data, "events")
	var holder *orchestrator.BusyError
	if rebuild {
		// A rebuild puts another store in this one's place: it holds the
		// store's lock throughout, as any writer does.
		lock, err := eventlog.Lock(dir)
		busy := orchestrator.Busy(g.data, err)
		switch {
		case err == nil:
			defer lock.Close()
		case busy != nil:
			return failf(exitFailed, "%v; stop it, then run doctor again", busy)
		case unholdable(g.data, err) != "":
			return failf(exitFailed, "doctor --rebuild: %s, and a rebuild writes a new store beside the damaged one", unholdable(g.data, err))
		case !errors.Is(err, fs.ErrNotExist): // none: Verify says there is no store
			return failf(exitFailed, "doctor: %v", err)
		}
	} else if holder = orchestrator.Holder(g.data); holder != nil {
		fmt.Fprintf(g.stderr, "baton: %v; its event store is checked read-only, as it stands now\n", holder)
	}
	r, s, err := verify(dir, holder != nil)
	if err != nil {
		return failf(exitFailed, "doctor: %v", err)
	}
	if s != nil {
		defer s.Close()
	}
	out := g.stdout
	threads := r.ThreadOf
	if r.Healthy() {
		n := len(r.Heads)
		fmt.Fprintf(out, "the event store %s is healthy: %s (last sequence %d), %s\n", dir, plural(r.Events, "event"), r.Last, plural(n, "thread"))
		if len(r.Lost) > 0 {
			fmt.Fprintf(out, "events lost in an earlier rebuild: %s\n", eventlog.Ranges(r.Lost))
		}
		if n == 0 || rebuild || s == nil {
			return nil
		}
		return g.checkWorktrees(ctx, s, prune)
	}
	fmt.Fprintf(out, "the event store %s is damaged:\n", dir)
	touched := map[string][]uint64{}
	for _, p := range r.Problems {
		where := ""
		if p.File != "" {
			where = p.File + ": "
		}
		fmt.Fprintf(out, "  - %s%s\n", where, p.What)
		if len(p.Seqs) > 0 {
			fmt.Fprintf(out, "    events %s\n", eventlog.Ranges(p.Seqs))
		}
		for _, t := range p.Threads {
			touched[t] = append(touched[t], seqsOf(p.Seqs, t, threads)...)
		}
		if len(p.Threads) == 0 && len(p.Seqs) > 0 {
			touched[""] = append(touched[""], seqsOf(p.Seqs, "", threads)...)
		}
	}
	printTouched(out, "threads it touches:", touched, r.Heads)
	if holder != nil {
		fmt.Fprintf(out, "the store was read while %v, and what it wrote meanwhile can read as damage: stop it and run `baton doctor` again to be sure\n", holder)
	}
	if !rebuild {
		fmt.Fprintln(out, "`baton doctor --rebuild` builds a new store from what is intact; the damaged one is kept aside")
		return silent(exitFailed)
	}
	if s == nil {
		return failf(exitFailed, "the event store %s cannot be opened even to read it, so nothing can be rebuilt from it; keep a copy and restore the data directory from a backup", dir)
	}
	return g.rebuild(dir, r, s)
}

// verify is eventlog.Verify. A store another process holds changes as it
// is read (files its compactions remove, a log it is writing), which can
// read as damage for a moment: such a store is read again, up to
// heldRetries times, until a read finds nothing wrong.
func verify(dir string, held bool) (*eventlog.Report, *eventlog.Store, error) {
	for try := 1; ; try++ {
		r, s, err := eventlog.Verify(dir)
		if err != nil || r.Healthy() || !held || try == heldRetries {
			return r, s, err
		}
		if s != nil {
			s.Close()
		}
	}
}

// heldRetries bounds how often doctor reads a store another process holds.
const heldRetries = 3

// seqsOf are the sequences of seqs that are thread's ("" : of no known
// thread).
func seqsOf(seqs []uint64, thread string, threadOf map[uint64]string) []uint64 {
	var out []uint64
	for _, q := range seqs {
		if threadOf[q] == thread {
			out = append(out, q)
		}
	}
	return out
}

// printTouched lists threads with the events of each a problem touches.
func printTouched(out io.Writer, title string, touched map[string][]uint64, heads map[string][]byte) {
	if len(touched) == 0 {
		return
	}
	fmt.Fprintln(out, title)
	ids := make([]string, 0, len(touched))
	for id := range touched {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		seqs := touched[id]
		slices.Sort(seqs)
		seqs = slices.Compact(seqs)
		name := id
		if id == "" {
			name = "(thread unknown)"
		}
		var sum domain.ThreadSummary
		if json.Unmarshal(heads[id], &sum) == nil && sum.ID != "" {
			name += fmt.Sprintf("  %s  %s", sum.Provider, sum.Cwd)
		}
		if len(seqs) > 0 {
			fmt.Fprintf(out, "  %s: events %s\n", name, eventlog.Ranges(seqs))
		} else {
			fmt.Fprintf(out, "  %s\n", name)
		}
	}
}

// rebuild salvages the store into a new directory, indexes it, moves the
// damaged store aside and puts the new one in its place.
func (g *globals) rebuild(dir string, r *eventlog.Report, s *eventlog.Store) error {
	stamp := time.Now().UTC().Format("20060102T150405Z")
	fresh := dir + ".rebuild-" + stamp
	aside := dir + ".damaged-" + stamp
	// A thread whose creation event is lost cannot be rebuilt: its events
	// are dropped with it (and listed as lost).
	dropped := map[string]bool{}
	seen := map[string]bool{}
	keep := func(rec eventlog.Record) bool {
		if dropped[rec.ThreadID] {
			return false
		}
		if !seen[rec.ThreadID] {
			seen[rec.ThreadID] = true
			if rec.Type != (domain.ThreadCreated{}).EventType() {
				dropped[rec.ThreadID] = true
				return false
			}
		}
		return true
	}
	lost, err := s.Salvage(fresh, r.Last, keep)
	if err != nil {
		return failf(exitFailed, "rebuild the event store into %s: %v (the damaged store is unchanged)", fresh, err)
	}
	s.Close()
	ns, err := eventlog.Open(fresh, nil)
	if err == nil {
		err = orchestrator.Reindex(ns, hclog.NewNullLogger())
		if cerr := ns.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		return failf(exitFailed, "index the rebuilt store %s: %v (the damaged store is unchanged)", fresh, err)
	}
	if err := os.Rename(dir, aside); err != nil {
		return failf(exitFailed, "move the damaged store aside: %v (the rebuilt store is %s)", err, fresh)
	}
	if err := os.Rename(fresh, dir); err != nil {
		return failf(exitFailed, "put the rebuilt store in place: %v (it is %s; the damaged one is %s)", err, fresh, aside)
	}
	fmt.Fprintf(g.stdout, "rebuilt %s from what was intact; the damaged store is %s\n", dir, aside)
	if len(lost) == 0 {
		fmt.Fprintln(g.stdout, "no event was lost")
		return nil
	}
	touched := map[string][]uint64{}
	for _, q := range lost {
		touched[r.ThreadOf[q]] = append(touched[r.ThreadOf[q]], q)
	}
	printTouched(g.stdout, fmt.Sprintf("lost %s (%s):", plural(len(lost), "event"), eventlog.Ranges(lost)), touched, r.Heads)
	for id := range dropped {
		fmt.Fprintf(g.stdout, "thread %s lost its creation event and was dropped whole\n", id)
	}
	return nil
}
