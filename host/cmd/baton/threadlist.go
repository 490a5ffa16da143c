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

	"github.com/baton-run/baton/host/internal/domain"
)

// How baton threads lists: in what order, in which format, with what
// times.

// listOrder is the order baton threads lists threads in: newest first by
// creation time, then by id (descending) for threads made in the same
// instant. Every thread's summary holds its creation time, so the order is
// the same for time-ordered ids and the random ones made before them.
func listOrder(a, b domain.ThreadSummary) int {
	return cmp.Or(b.CreatedAt.Compare(a.CreatedAt), strings.Compare(b.ID, a.ID))
}

// listed puts threads in list order and keeps those after from (when
// given) and at most limit of them (0: all).
func listed(list []domain.ThreadSummary, from *domain.ThreadSummary, limit int) []domain.ThreadSummary {
	slices.SortStableFunc(list, listOrder)
	if from != nil {
		list = slices.DeleteFunc(list, func(t domain.ThreadSummary) bool { return listOrder(*from, t) >= 0 })
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
func printThreads(w io.Writer, list []domain.ThreadSummary, format outputFormat, now func() time.Time) error {
	switch format {
	case outputJSON:
		enc := json.NewEncoder(w)
		for _, t := range list {
			if err := enc.Encode(t); err != nil {
				return failf(exitFailed, "threads: %v", err)
			}
		}
		return nil
	case outputIDs:
		for _, t := range list {
			fmt.Fprintln(w, t.ID)
		}
		return nil
	}
	when := func(t time.Time) string { return t.UTC().Format(time.RFC3339) }
	if writesToTerminal(w) {
		at := now()
		when = func(t time.Time) string { return age(t, at) }
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "THREAD\tPROVIDER\tSTATUS\tRUNS\tCREATED\tUPDATED\tCWD")
	for _, t := range list {
		runs := fmt.Sprint(t.Runs)
		if t.Queued > 0 {
			runs += fmt.Sprintf(" (%d queued)", t.Queued)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", t.ID, t.Provider, statusWords(t), runs, when(t.CreatedAt), when(t.UpdatedAt), t.Cwd)
	}
	return tw.Flush()
}

// statusWords is a thread's status as a list shows it: "running", or
// "idle, last run completed".
func statusWords(t domain.ThreadSummary) string {
	if t.LastRun != "" && t.Status == domain.ThreadIdle {
		return string(t.Status) + ", last run " + string(t.LastRun)
	}
	return string(t.Status)
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
