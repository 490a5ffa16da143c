package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/types/known/timestamppb"

	batonv1 "github.com/baton-run/baton/host/api/baton/v1"
	"github.com/baton-run/baton/host/internal/domain"
	"github.com/baton-run/baton/host/internal/orchestrator"
	"github.com/baton-run/baton/host/internal/service"
)

// baton usage and baton limits: the usage ledger and the providers' rate
// limits, as the service reads them from every thread's head (see
// orchestrator/usage.go). Costs are the providers' own; "-" where none
// stated one.

func usageCommand(g *globals) *cobra.Command {
	var since, by, out string
	var thread string
	c := &cobra.Command{
		Use:   "usage",
		Short: "What the runs used, as the providers reported it: tokens and stated costs, by provider, thread, model or day",
		Long: `Usage prints what every thread's runs used, as each provider reported it: input,
output, cached and reasoning tokens, their total, and the cost where the
provider stated one (claude's total cost, opencode's message cost; "-" where
none did: Baton never works a cost out). An attempt's latest report counts,
in the hour it was reported. One row a key, sorted, then the totals.

--by groups the rows: provider (the default), thread, model or day (UTC).
--since leaves out what was reported before a duration ago (24h, 7d) or a
date (2026-12-01, UTC midnight), counting from the start of its hour.
--thread reports one thread. -o json prints one JSON object: the rows, each
with its counts and costMicros (millionths of a US dollar), and the total.`,
		Example: `  baton usage
  baton usage --since 24h --by model
  baton usage --by day --since 2026-12-01
  baton usage --by thread -o json | jq '.lines[] | select(.usage.totalTokens > 100000)'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !slices.Contains(domain.UsageBys, domain.UsageBy(by)) {
				return usagef("usage: --by %q: want %s", by, domain.OneOf(domain.UsageBys...))
			}
			if out != "table" && out != "json" {
				return usagef("usage: -o %q: want table or json", out)
			}
			from, err := sinceOf(since, time.Now())
			if err != nil {
				return usagef("usage: --since %s", err)
			}
			return withReader(cmd, g, func(ctx context.Context, c *client) error {
				req := &batonv1.UsageRequest{By: by, ThreadId: thread}
				if !from.IsZero() {
					req.Since = timestamppb.New(from)
				}
				resp, err := c.Usage(ctx, req)
				if err != nil {
					return rpcError("usage", err)
				}
				return printUsage(g.stdout, service.UsageReportOf(resp), domain.UsageBy(by), out)
			})
		},
	}
	fl := c.Flags()
	fl.StringVar(&since, "since", "", "count what was reported since a `duration` ago (24h, 7d) or a date (2026-12-01)")
	fl.StringVar(&by, "by", string(domain.UsageByProvider), "group the rows by `key`: provider, thread, model or day")
	fl.StringVarP(&out, "output", "o", "table", "print `format`: table or json")
	fl.StringVar(&thread, "thread", "", "report this thread `id` alone")
	c.RegisterFlagCompletionFunc("by", fixedCompletion(domain.Strings(domain.UsageBys...)...))
	c.RegisterFlagCompletionFunc("output", fixedCompletion("table", "json"))
	return c
}

// sinceOf is what --since says, at now: a duration back (Go's, or whole
// days as 7d), a date (UTC midnight) or an RFC 3339 instant ("": none).
func sinceOf(s string, now time.Time) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if d, ok := strings.CutSuffix(s, "d"); ok {
		if n, err := strconv.Atoi(d); err == nil && n >= 0 {
			return now.Add(-time.Duration(n) * 24 * time.Hour), nil
		}
	}
	if d, err := time.ParseDuration(s); err == nil && d >= 0 {
		return now.Add(-d), nil
	}
	if t, err := time.Parse(time.DateOnly, s); err == nil {
		return t, nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	return time.Time{}, fmt.Errorf("%q: want a duration (24h, 7d), a date (2026-12-01) or an instant (RFC 3339)", s)
}

// usageJSON is a usage report as -o json prints it.
type usageJSON struct {
	By    domain.UsageBy     `json:"by"`
	Lines []domain.UsageLine `json:"lines"`
	Total domain.Usage       `json:"total"`
}

// printUsage prints a usage report as a table (or JSON).
func printUsage(w io.Writer, r orchestrator.UsageReport, by domain.UsageBy, format string) error {
	if format == "json" {
		lines := r.Lines
		if lines == nil {
			lines = []domain.UsageLine{}
		}
		b, _ := json.Marshal(usageJSON{By: by, Lines: lines, Total: r.Total}) // a report always encodes
		fmt.Fprintf(w, "%s\n", b)
		return nil
	}
	// The key's column is left-aligned, the counts' right-aligned.
	rows := [][]string{{strings.ToUpper(string(by)), "INPUT", "OUTPUT", "CACHED", "REASONING", "TOTAL", "COST"}}
	row := func(key string, u domain.Usage) {
		rows = append(rows, []string{key, fmt.Sprint(u.InputTokens), fmt.Sprint(u.OutputTokens), fmt.Sprint(u.CachedInputTokens),
			fmt.Sprint(u.ReasoningTokens), fmt.Sprint(u.TotalTokens), costWords(u.CostMicros)})
	}
	for _, l := range r.Lines {
		row(orDash(l.Key), l.Usage)
	}
	row("total", r.Total)
	widths := make([]int, len(rows[0]))
	for _, r := range rows {
		for i, c := range r {
			widths[i] = max(widths[i], len(c))
		}
	}
	for _, r := range rows {
		line := fmt.Sprintf("%-*s", widths[0], r[0])
		for i, c := range r[1:] {
			line += fmt.Sprintf("  %*s", widths[i+1], c)
		}
		fmt.Fprintln(w, line)
	}
	return nil
}

// costWords is a stated cost in US dollars ("-": none stated): at least
// cents, to the micro-dollar where it has them.
func costWords(micros int64) string {
	if micros <= 0 {
		return "-"
	}
	s := fmt.Sprintf("%d.%06d", micros/1e6, micros%1e6)
	for len(s)-strings.Index(s, ".") > 3 && strings.HasSuffix(s, "0") {
		s = s[:len(s)-1]
	}
	return "$" + s
}

// usageWords is usage in a line: its total tokens, how they split, and
// the stated cost.
func usageWords(u *batonv1.Usage) string {
	s := fmt.Sprintf("%s (input %d, output %d, cached %d, reasoning %d)", plural(int(u.GetTotalTokens()), "token"),
		u.GetInputTokens(), u.GetOutputTokens(), u.GetCachedInputTokens(), u.GetReasoningTokens())
	if u.GetCostMicros() > 0 {
		s += ", cost " + costWords(u.GetCostMicros())
	}
	return s
}

func limitsCommand(g *globals) *cobra.Command {
	var out string
	c := &cobra.Command{
		Use:   "limits",
		Short: "Each provider's rate-limit windows: how full, when they reset",
		Long: `Limits prints each provider's latest word on its rate limits, the latest first:
the window (codex's primary and secondary, claude's five-hour and seven-day
windows, ...), how much of it is used, when it resets and when the provider
said so. A provider that has not reported a limit is not listed. -o json
prints one JSON object with every limit.`,
		Example: `  baton limits
  baton limits -o json | jq '.limits[] | select(.usedPercent > 80)'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if out != "table" && out != "json" {
				return usagef("limits: -o %q: want table or json", out)
			}
			return withReader(cmd, g, func(ctx context.Context, c *client) error {
				resp, err := c.Limits(ctx, &batonv1.LimitsRequest{})
				if err != nil {
					return rpcError("limits", err)
				}
				return printLimits(g.stdout, service.LimitsOf(resp), out, time.Now(), time.Local)
			})
		},
	}
	c.Flags().StringVarP(&out, "output", "o", "table", "print `format`: table or json")
	c.RegisterFlagCompletionFunc("output", fixedCompletion("table", "json"))
	return c
}

// limitsJSON is the limits as -o json prints them.
type limitsJSON struct {
	Limits []domain.RateLimit `json:"limits"`
}

// printLimits prints rate limits as a table at now in loc (or JSON).
func printLimits(w io.Writer, limits []domain.RateLimit, format string, now time.Time, loc *time.Location) error {
	if format == "json" {
		if limits == nil {
			limits = []domain.RateLimit{}
		}
		b, _ := json.Marshal(limitsJSON{Limits: limits}) // limits always encode
		fmt.Fprintf(w, "%s\n", b)
		return nil
	}
	if len(limits) == 0 {
		fmt.Fprintln(w, "no provider has reported a rate limit")
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PROVIDER\tSCOPE\tUSED\tRESETS\tREPORTED")
	for _, l := range limits {
		used := strconv.FormatFloat(l.UsedPercent, 'f', -1, 64) + "%"
		resets := "-"
		if !l.ResetsAt.IsZero() {
			in := "passed"
			if d := l.ResetsAt.Sub(now); d > 0 {
				in = "in " + fmtDuration(d)
			}
			resets = fmt.Sprintf("%s (%s)", clockTime(l.ResetsAt, now, loc), in)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", l.Provider, orDash(l.Scope), used, resets, clockTime(l.At, now, loc))
	}
	return tw.Flush()
}

// showUsage is what a thread's runs used, as baton show prints it: the
// thread's total, then each run's that reported any (nothing when none
// did).
func showUsage(w io.Writer, t *batonv1.Thread) {
	u := t.GetSummary().GetUsage()
	if u == nil {
		return
	}
	fmt.Fprintf(w, "\nusage: %s\n", usageWords(u))
	for _, r := range t.GetRuns() {
		if r.GetUsage().GetTotalTokens() > 0 || r.GetUsage().GetCostMicros() > 0 {
			fmt.Fprintf(w, "  run %d  %s\n", r.GetOrdinal(), usageWords(r.GetUsage()))
		}
	}
}
