package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/baton-run/baton/host/internal/orchestrator"
)

// threadsCmd lists the data dir's threads from the thread index: no
// thread's events are read.
func threadsCmd(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("baton threads", flag.ContinueOnError)
	fs.SetOutput(stderr)
	data := fs.String("data", "", "data `directory` (default: "+defaultDataDir()+")")
	jsonOut := fs.Bool("json", false, "print one JSON object per thread")
	after := fs.String("after", "", "list the threads after this thread `id` (ids are in order)")
	limit := fs.Int("limit", 0, "list at most `n` threads (0: all)")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "baton threads: unexpected arguments %q\n", fs.Args())
		return exitUsage
	}
	if *data == "" {
		*data = defaultDataDir()
	}
	h, err := orchestrator.Open(orchestrator.Config{DataDir: *data, Logger: hclog.New(&hclog.LoggerOptions{Output: stderr, Level: hclog.Warn})})
	if err != nil {
		fmt.Fprintf(stderr, "baton threads: %v\n", err)
		return exitFailed
	}
	defer h.Close()
	list, err := h.Threads(*after, *limit)
	if err != nil {
		fmt.Fprintf(stderr, "baton threads: %v\n", err)
		return exitFailed
	}
	if *jsonOut {
		enc := json.NewEncoder(stdout)
		for _, t := range list {
			enc.Encode(t)
		}
		return exitOK
	}
	w := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
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
	w.Flush()
	return exitOK
}
