package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"

	batonv1 "github.com/baton-run/baton/host/api/baton/v1"
	"github.com/baton-run/baton/host/internal/domain"
	"github.com/baton-run/baton/host/internal/service"
)

// How baton threads lists: in what order, in which format, with what
// times.

// listOrder is the order baton threads lists threads in: newest first by
// creation time, then by id (descending) for threads made in the same
// instant. Every thread's summary holds its creation time, so the order is
// the same for time-ordered ids and the random ones made before them.
func listOrder(a, b *batonv1.ThreadSummary) int {
	return cmp.Or(instant(b.GetCreatedAt()).Compare(instant(a.GetCreatedAt())), strings.Compare(b.GetId(), a.GetId()))
}

// listed puts threads in list order and keeps those after from (when
// given) and at most limit of them (0: all).
func listed(list []*batonv1.ThreadSummary, from *batonv1.ThreadSummary, limit int) []*batonv1.ThreadSummary {
	slices.SortStableFunc(list, listOrder)
	if from != nil {
		list = slices.DeleteFunc(list, func(t *batonv1.ThreadSummary) bool { return listOrder(from, t) >= 0 })
	}
	if limit > 0 && len(list) > limit {
		list = list[:limit]
	}
	return list
}

// outputFormat is what -o asks for.
type outputFormat string

// The formats of -o.
const (
	outputTable outputFormat = "table" // for people
	outputJSON  outputFormat = "json"  // one JSON object per line
	outputIDs   outputFormat = "ids"   // one id per line, for xargs
)

var outputFormats = []outputFormat{outputTable, outputJSON, outputIDs}

func (o *outputFormat) String() string { return string(*o) }
func (o *outputFormat) Type() string   { return "format" }

// Set takes one of the formats; the error names them (cobra and the
// environment's check put the flag or the variable before it).
func (o *outputFormat) Set(v string) error {
	if !slices.Contains(outputFormats, outputFormat(v)) {
		return fmt.Errorf("want table, json or ids")
	}
	*o = outputFormat(v)
	return nil
}

// formatOf is the format -o and --json ask for together: --json is -o json.
// Both given, and different, is bad usage, unless one of them came from the
// environment: the command line wins.
func formatOf(verb string, fs *pflag.FlagSet, o outputFormat, jsonOut bool) (outputFormat, error) {
	switch {
	case !jsonOut:
		return o, nil
	case !fs.Changed("output") || o == outputJSON:
		return outputJSON, nil
	case fromEnv(fs, "json") && !fromEnv(fs, "output"):
		return o, nil
	case fromEnv(fs, "output") && !fromEnv(fs, "json"):
		return outputJSON, nil
	}
	return "", usagef("%s: --json is -o json, and -o says %s; give one of them", verb, o)
}

// printThreads prints threads in a format; a table's times are ages
// ("3m ago") on a terminal, else instants in RFC 3339 (UTC), which scripts
// can read and which do not change from one run to the next.
func printThreads(w io.Writer, list []*batonv1.ThreadSummary, format outputFormat, now func() time.Time) error {
	switch format {
	case outputJSON:
		enc := json.NewEncoder(w)
		for _, t := range list {
			if err := enc.Encode(summaryJSONOf(t)); err != nil {
				return failf(exitFailed, "threads: %v", err)
			}
		}
		return nil
	case outputIDs:
		for _, t := range list {
			fmt.Fprintln(w, t.GetId())
		}
		return nil
	}
	when := func(t time.Time) string { return t.UTC().Format(time.RFC3339) }
	if writesToTerminal(w) {
		at := now()
		when = func(t time.Time) string { return age(t, at) }
	}
	// The host column is there when a thread listed ran on a log several
	// hosts share, the branch column when one has a branch.
	host := optionalColumn(list, (*batonv1.ThreadSummary).GetHost)
	branch := optionalColumn(list, (*batonv1.ThreadSummary).GetBranch)
	usage := optionalColumn(list, summaryUsageWords)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "THREAD\tPROVIDER\tSTATUS\t"+host.header("HOST")+branch.header("BRANCH")+"RUNS\t"+usage.header("USAGE")+"CREATED\tUPDATED\tCWD")
	for _, t := range list {
		runs := fmt.Sprint(t.GetRuns())
		if t.GetQueued() > 0 {
			runs += fmt.Sprintf(" (%d queued)", t.GetQueued())
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s%s%s\t%s%s\t%s\t%s\n", t.GetId(), t.GetProvider(), statusWords(t), host.cell(t), branch.cell(t), runs,
			usage.cell(t), when(instant(t.GetCreatedAt())), when(instant(t.GetUpdatedAt())), t.GetCwd())
	}
	return tw.Flush()
}

// optional is a column of the thread list shown only when a thread listed
// has a value in it.
type optional struct {
	shown bool
	value func(*batonv1.ThreadSummary) string
}

func optionalColumn(list []*batonv1.ThreadSummary, value func(*batonv1.ThreadSummary) string) optional {
	return optional{shown: slices.ContainsFunc(list, func(t *batonv1.ThreadSummary) bool { return value(t) != "" }), value: value}
}

func (o optional) header(name string) string {
	if !o.shown {
		return ""
	}
	return name + "\t"
}

func (o optional) cell(t *batonv1.ThreadSummary) string {
	if !o.shown {
		return ""
	}
	return orDash(o.value(t)) + "\t"
}

// summaryJSON is a thread's summary as -o json and status --json print
// it: one object, its field names and forms the host's thread index's
// (the same bytes since before the API was typed).
type summaryJSON struct {
	ID        string    `json:"id"`
	Provider  string    `json:"provider"`
	Cwd       string    `json:"cwd"`
	Model     string    `json:"model,omitempty"`
	CreatedAt time.Time `json:"createdAt"`
	UpdatedAt time.Time `json:"updatedAt"`
	// Runs counts the thread's runs; Queued those waiting to start.
	Runs   uint32 `json:"runs"`
	Queued uint32 `json:"queued,omitempty"`
	// Status is the active run's status, or "idle"; LastRun the status
	// of the newest run that has started.
	Status  string `json:"status"`
	LastRun string `json:"lastRun,omitempty"`
	// Sequence is the thread's last event.
	Sequence uint64 `json:"sequence"`
	// Archived: the thread is put away; Branch is its own branch ("": it
	// has no worktree).
	Archived bool   `json:"archived,omitempty"`
	Branch   string `json:"branch,omitempty"`
	// Title is the thread's first message, shortened; Pending counts
	// the requests waiting for a person; Wait is its next armed wait;
	// Worktree its own worktree's directory.
	Title    string           `json:"title,omitempty"`
	Pending  uint32           `json:"pending,omitempty"`
	Wait     *summaryWaitJSON `json:"wait,omitempty"`
	Worktree string           `json:"worktree,omitempty"`
	// Repository is the user's worktree a worktree thread was made from.
	Repository string `json:"repository,omitempty"`
	// Host is the thread's owner, on a log several hosts share; HostLost
	// says the owner stopped renewing its lease.
	Host     string        `json:"host,omitempty"`
	HostLost *hostLostJSON `json:"hostLost,omitempty"`
	// Usage is what the thread's runs used, as their providers reported
	// it (baton usage --by thread).
	Usage *domain.Usage `json:"usage,omitempty"`
}

// hostLostJSON is a summary's lost owner.
type hostLostJSON struct {
	Host string    `json:"host"`
	At   time.Time `json:"at"`
}

// summaryWaitJSON is a summary's armed wait.
type summaryWaitJSON struct {
	At       time.Time `json:"at"`
	Kind     string    `json:"kind"`
	Provider string    `json:"provider"`
	RunID    string    `json:"runId,omitempty"`
}

// summaryJSONOf is the API's summary in its JSON form.
func summaryJSONOf(t *batonv1.ThreadSummary) summaryJSON {
	s := summaryJSON{ID: t.GetId(), Provider: t.GetProvider(), Cwd: t.GetCwd(), Model: t.GetModel(),
		CreatedAt: instant(t.GetCreatedAt()), UpdatedAt: instant(t.GetUpdatedAt()), Runs: t.GetRuns(), Queued: t.GetQueued(),
		Status: t.GetStatus(), LastRun: t.GetLastRun(), Sequence: t.GetSequence(), Archived: t.GetArchived(), Branch: t.GetBranch(),
		Title: t.GetTitle(), Pending: t.GetPending(), Worktree: t.GetWorktree(),
		Repository: t.GetRepository(), Host: t.GetHost()}
	if l := t.GetHostLost(); l != nil {
		s.HostLost = &hostLostJSON{Host: l.GetHost(), At: instant(l.GetAt())}
	}
	if u := t.GetUsage(); u != nil {
		du := service.UsageOf(u)
		s.Usage = &du
	}
	if w := t.GetWait(); w != nil {
		s.Wait = &summaryWaitJSON{At: instant(w.GetAt()), Kind: w.GetKind(), Provider: w.GetProvider(), RunID: w.GetRunId()}
	}
	return s
}

// summaryUsageWords is a thread's usage as a list shows it: its total
// tokens and the stated cost ("": none reported).
func summaryUsageWords(t *batonv1.ThreadSummary) string {
	u := t.GetUsage()
	if u == nil {
		return ""
	}
	s := fmt.Sprintf("%d tok", u.GetTotalTokens())
	if u.GetCostMicros() > 0 {
		s += " " + costWords(u.GetCostMicros())
	}
	return s
}

// statusWords is a thread's status as a list shows it: "running", or
// "idle, last run completed"; "host lost" when its owner stopped renewing
// its lease, whatever it was doing (nothing runs it until a host claims
// it).
func statusWords(t *batonv1.ThreadSummary) string {
	if t.GetHostLost() != nil {
		return "host lost"
	}
	if t.GetLastRun() != "" && domain.ThreadStatus(t.GetStatus()) == domain.ThreadIdle {
		return t.GetStatus() + ", last run " + t.GetLastRun()
	}
	return t.GetStatus()
}

// age is how long before now t was, in its largest whole unit, as people
// say it: "just now", "45s ago", "3m ago", "2h ago", "4d ago"; a t after
// now (another machine's clock) is "in 3m".
func age(t, now time.Time) string {
	d, before, after := now.Sub(t), "", " ago"
	if d < 0 {
		d, before, after = -d, "in ", ""
	}
	var n time.Duration
	var unit string
	switch {
	case d < time.Second:
		return "just now"
	case d < time.Minute:
		n, unit = d/time.Second, "s"
	case d < time.Hour:
		n, unit = d/time.Minute, "m"
	case d < 24*time.Hour:
		n, unit = d/time.Hour, "h"
	default:
		n, unit = d/(24*time.Hour), "d"
	}
	return fmt.Sprintf("%s%d%s%s", before, n, unit, after)
}

// writesToTerminal says whether w is a terminal.
func writesToTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && isTerminal(f)
}
