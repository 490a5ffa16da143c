package main

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/baton-run/baton/host/internal/domain"
	"github.com/baton-run/baton/host/internal/eventlog"
	"github.com/baton-run/baton/host/internal/notify"
)

func notifyCommand(g *globals) *cobra.Command {
	c := &cobra.Command{
		Use:   "notify",
		Short: "Add, list and remove the webhooks baton serve posts to",
		Long: `Notify keeps the webhook targets of the data dir: baton serve posts one
signed JSON document to each for every event that needs a person (a request
pending, a run's end, a usage-limit wait begun and ended; see baton serve
--help for the delivery, its signature and its retries).

The targets are saved in DATA/` + notify.FileName + ` (mode 0600), beside those baton serve is
given with --notify. A running service reads them as it starts: restart it
for an added or removed target to take effect. A service drops, as it
starts, the deliveries still waiting for a URL that is no longer a target.

list shows each target, how many deliveries it took (and when the last),
and its deliveries still in the event log: pending (not tried yet), failing
(tried: how many times, the next try and the last error) and failed (given
up, with the last error).`,
		Example: `  baton notify add http://127.0.0.1:9000/baton
  baton notify add https://hooks.example/baton --events request.pending,run.ended
  baton notify list
  baton notify list --json | jq .deliveries
  baton notify remove http://127.0.0.1:9000/baton`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return usagef("notify: give a subcommand: add, list or remove (baton notify --help)")
		},
	}
	c.AddCommand(notifyAddCommand(g), notifyListCommand(g), notifyRemoveCommand(g))
	return c
}

func notifyAddCommand(g *globals) *cobra.Command {
	var events []string
	c := &cobra.Command{
		Use:   "add URL",
		Short: "Save a webhook target, for every event or those --events names",
		Long: `Add saves URL (http:// or https://) as a webhook target in the data dir,
taking the events --events names (request.pending, run.ended, wait.started,
wait.ended; default: all). Adding a URL again replaces its events.`,
		Example: `  baton notify add http://127.0.0.1:9000/baton
  baton notify add https://hooks.example/baton --events run.ended`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			url := args[0]
			if err := notify.CheckURL(url); err != nil {
				return usagef("notify add: %v", err)
			}
			types, err := notify.ParseEvents(events)
			if err != nil {
				return usagef("notify add: --events: %v", err)
			}
			if err := g.checkData(); err != nil {
				return err
			}
			if err := os.MkdirAll(g.data, 0o700); err != nil {
				return failf(exitFailed, "notify add: %v", err)
			}
			saved, err := notify.LoadTargets(g.data)
			if err != nil {
				return failf(exitFailed, "notify add: %v", err)
			}
			t := notify.Target{URL: url, Events: types}
			if i := slices.IndexFunc(saved, func(s notify.Target) bool { return s.URL == url }); i >= 0 {
				saved[i] = t
			} else {
				saved = append(saved, t)
			}
			if err := notify.SaveTargets(g.data, saved); err != nil {
				return failf(exitFailed, "notify add: %v", err)
			}
			fmt.Fprintf(g.stdout, "saved %s (%s); a running baton serve takes it when it next starts\n", url, eventsOf(t))
			return nil
		},
	}
	c.Flags().StringSliceVar(&events, "events", nil, "the `events` to post, comma-separated: request.pending, run.ended, wait.started, wait.ended (default: all)")
	c.RegisterFlagCompletionFunc("events", commaList(func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		names := make([]string, len(domain.NoticeTypes))
		for i, t := range domain.NoticeTypes {
			names[i] = string(t)
		}
		return names, cobra.ShellCompDirectiveNoFileComp
	}))
	return c
}

func notifyRemoveCommand(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "remove URL",
		Short: "Remove a saved webhook target",
		Long: `Remove removes URL from the data dir's saved targets. The deliveries still
waiting for it are dropped by the next baton serve that starts without it.`,
		Example: `  baton notify remove http://127.0.0.1:9000/baton`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			url := args[0]
			saved, err := notify.LoadTargets(g.data)
			if err != nil {
				return failf(exitFailed, "notify remove: %v", err)
			}
			i := slices.IndexFunc(saved, func(s notify.Target) bool { return s.URL == url })
			if i < 0 {
				return usagef("notify remove: %s is not a saved target (baton notify list shows them; one given to baton serve --notify goes when serve starts without it)", url)
			}
			if err := notify.SaveTargets(g.data, slices.Delete(saved, i, i+1)); err != nil {
				return failf(exitFailed, "notify remove: %v", err)
			}
			fmt.Fprintf(g.stdout, "removed %s; a running baton serve drops its deliveries when it next starts\n", url)
			return nil
		},
	}
}

func notifyListCommand(g *globals) *cobra.Command {
	var jsonOut bool
	c := &cobra.Command{
		Use:   "list",
		Short: "The webhook targets and their deliveries: pending, failing, failed",
		Long: `List prints each webhook target (saved, or with deliveries in the event log)
and its deliveries still in the event log, oldest first. The log is read as
it is on disk, also while a service holds it. --json prints one JSON object
per target and line.`,
		Example: `  baton notify list
  baton notify list --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			targets, err := listTargets(g.data)
			if err != nil {
				return failf(exitFailed, "notify list: %v", err)
			}
			if jsonOut {
				enc := json.NewEncoder(g.stdout)
				for _, t := range targets {
					enc.Encode(t)
				}
				return nil
			}
			printTargets(g.stdout, targets)
			return nil
		},
	}
	c.Flags().BoolVar(&jsonOut, "json", false, "print one JSON object per target and line")
	return c
}

// listedTarget is a target as notify list shows it.
type listedTarget struct {
	URL string `json:"url"`
	// Events are the events it takes (none: all); Saved says whether it
	// is in the data dir's file (else it was given to serve --notify).
	Events []domain.NoticeType `json:"events,omitempty"`
	Saved  bool                `json:"saved"`
	// Delivered counts the deliveries its receiver took (since it was
	// last added); LastDelivered is when it took the last one.
	Delivered     int64            `json:"delivered"`
	LastDelivered time.Time        `json:"last_delivered,omitzero"`
	Deliveries    []listedDelivery `json:"deliveries"`
}

// listedDelivery is a delivery as notify list shows it.
type listedDelivery struct {
	ID        string            `json:"id"`
	Type      domain.NoticeType `json:"type"`
	Sequence  uint64            `json:"sequence"`
	At        time.Time         `json:"at"`
	State     string            `json:"state"`
	Attempts  int               `json:"attempts"`
	NextTry   time.Time         `json:"next_try,omitzero"`
	LastError string            `json:"last_error,omitempty"`
}

// Delivery states.
const (
	statePending = "pending" // not tried yet
	stateFailing = "failing" // tried, and to be tried again
	stateFailed  = "failed"  // given up
)

// listTargets reads the saved targets and the event log's deliveries: the
// saved targets first, in the order they were added, then the other URLs
// with deliveries, in URL order.
func listTargets(data string) ([]listedTarget, error) {
	saved, err := notify.LoadTargets(data)
	if err != nil {
		return nil, err
	}
	var out []listedTarget
	index := map[string]int{}
	for _, t := range saved {
		index[t.URL] = len(out)
		out = append(out, listedTarget{URL: t.URL, Events: t.Events, Saved: true, Deliveries: []listedDelivery{}})
	}
	stored, states, err := storedDeliveries(data)
	if err != nil {
		return nil, err
	}
	target := func(url string) *listedTarget {
		i, ok := index[url]
		if !ok {
			i = len(out)
			index[url] = i
			out = append(out, listedTarget{URL: url, Deliveries: []listedDelivery{}})
		}
		return &out[i]
	}
	for _, st := range states {
		d, err := notify.DecodeDelivered(st.Value)
		if err != nil {
			return nil, fmt.Errorf("target %s: %w", st.Target, err)
		}
		t := target(st.Target)
		t.Delivered, t.LastDelivered = d.Count, d.LastAt
	}
	for _, sd := range stored {
		e, err := notify.DecodeEntry(sd.Value)
		if err != nil {
			return nil, fmt.Errorf("delivery of event %d to %s: %w", sd.Seq, sd.Target, err)
		}
		t := target(sd.Target)
		t.Deliveries = append(t.Deliveries, listedDelivery{ID: e.ID, Type: e.Type, Sequence: sd.Seq, At: e.At,
			State: deliveryState(e), Attempts: e.Attempts, NextTry: e.NextTry, LastError: e.LastError})
	}
	return out, nil
}

// storedDeliveries reads every delivery and target state in the data
// dir's event log, read only (none when it has no log yet).
func storedDeliveries(data string) ([]eventlog.StoredDelivery, []eventlog.TargetState, error) {
	s, err := openStoreReadOnly(data)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	defer s.Close()
	stored, err := s.Deliveries("")
	if err != nil {
		return nil, nil, err
	}
	states, err := s.TargetStates()
	return stored, states, err
}

// deliveryState is a stored delivery's state.
func deliveryState(e notify.Entry) string {
	switch {
	case e.Failed:
		return stateFailed
	case e.Attempts > 0:
		return stateFailing
	}
	return statePending
}

// eventsOf names the events a target takes.
func eventsOf(t notify.Target) string {
	if len(t.Events) == 0 {
		return "all events"
	}
	names := make([]string, len(t.Events))
	for i, e := range t.Events {
		names[i] = string(e)
	}
	return strings.Join(names, ", ")
}

// printTargets writes the targets for people: a line per target, then a
// table of its deliveries.
func printTargets(w io.Writer, targets []listedTarget) {
	if len(targets) == 0 {
		fmt.Fprintln(w, "no saved webhook targets and no deliveries waiting (baton notify add URL, or baton serve --notify URL)")
		return
	}
	for _, t := range targets {
		from := "saved"
		if !t.Saved {
			from = "given to baton serve --notify"
		}
		fmt.Fprintf(w, "%s (%s; %s)", t.URL, eventsOf(notify.Target{Events: t.Events}), from)
		if t.Delivered > 0 {
			fmt.Fprintf(w, ": %d delivered, the last at %s", t.Delivered, t.LastDelivered.UTC().Format(time.RFC3339))
		}
		fmt.Fprintln(w)
		if len(t.Deliveries) == 0 {
			fmt.Fprintln(w, "  no deliveries waiting")
			continue
		}
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  ID\tTYPE\tSTATE\tTRIES\tNEXT TRY\tLAST ERROR")
		for _, d := range t.Deliveries {
			next := "-"
			if !d.NextTry.IsZero() {
				next = d.NextTry.UTC().Format(time.RFC3339)
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%d\t%s\t%s\n", d.ID, d.Type, d.State, d.Attempts, next, cmp.Or(d.LastError, "-"))
		}
		tw.Flush()
	}
}
