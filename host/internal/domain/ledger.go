package domain

import (
	"cmp"
	"slices"
	"time"
)

// The usage ledger: what a thread's runs used, as their providers reported
// it, in rows of one hour, one provider and one model. It is part of the
// thread's projection, so it is rebuilt from the log like the rest, and it
// stays when runs leave the projection; the host keeps it beside the
// thread's summary, so a reader of every thread's usage reads each
// thread's head, not its history.
//
// State kept: each attempt keeps the rows its last report put in the
// ledger (Attempt.Ledger). A provider's usage report replaces the
// attempt's earlier one (it is the turn's usage so far), so a report takes
// the attempt's rows out of the ledger and puts its own in, in the hour of
// the event that carried it. A run's usage (Run.Usage, which the
// continuation policy's token budget counts) is the sum of its attempts'
// rows: the ledger and the budget read the same numbers.
//
// A report's rows are its breakdown by model when the provider gives one,
// and one row of what the breakdown leaves of the report's total (the
// whole report, in its model's row, when there is no breakdown). Costs
// are the provider's own (CostMicros); the ledger adds them and never
// works one out.

// LedgerRow is usage in one hour of one provider's model.
type LedgerRow struct {
	// Hour is the hour (UTC) of the report that last counted it.
	Hour     time.Time `json:"hour"`
	Provider string    `json:"provider"`
	Model    string    `json:"model,omitempty"`
	// Usage is the row's counts; its Model is the row's.
	Usage Usage `json:"usage"`
}

// ledgerHour is the hour a report at at counts in.
func ledgerHour(at time.Time) time.Time { return at.UTC().Truncate(time.Hour) }

// compareRows orders rows by hour, provider and model: a ledger's order.
func compareRows(a, b LedgerRow) int {
	return cmp.Or(a.Hour.Compare(b.Hour), cmp.Compare(a.Provider, b.Provider), cmp.Compare(a.Model, b.Model))
}

// ledgerRows is a report as the ledger counts it, in hour, for provider.
func ledgerRows(u Usage, models []Usage, hour time.Time, provider string) []LedgerRow {
	var rows []LedgerRow
	put := func(model string, v Usage) {
		v.Model = model
		if v == (Usage{Model: model}) {
			return
		}
		i, found := slices.BinarySearchFunc(rows, model, func(r LedgerRow, m string) int { return cmp.Compare(r.Model, m) })
		if found {
			rows[i].Usage.Add(v)
			return
		}
		rows = slices.Insert(rows, i, LedgerRow{Hour: hour, Provider: provider, Model: model, Usage: v})
	}
	if len(models) == 0 {
		put(u.Model, u)
		return rows
	}
	var sum Usage
	for _, m := range models {
		put(m.Model, m)
		sum.Add(m)
	}
	put("", Usage{InputTokens: less(u.InputTokens, sum.InputTokens), OutputTokens: less(u.OutputTokens, sum.OutputTokens),
		CachedInputTokens: less(u.CachedInputTokens, sum.CachedInputTokens), ReasoningTokens: less(u.ReasoningTokens, sum.ReasoningTokens),
		TotalTokens: less(u.TotalTokens, sum.TotalTokens), CostMicros: less(u.CostMicros, sum.CostMicros)})
	return rows
}

// less is a-b over counts, never below none.
func less(a, b int64) int64 { return max(a-max(b, 0), 0) }

// sub takes o's counts from u (the rows a report put in the ledger, taken
// out again when a later report replaces it).
func (u *Usage) sub(o Usage) {
	u.InputTokens = less(u.InputTokens, o.InputTokens)
	u.OutputTokens = less(u.OutputTokens, o.OutputTokens)
	u.CachedInputTokens = less(u.CachedInputTokens, o.CachedInputTokens)
	u.ReasoningTokens = less(u.ReasoningTokens, o.ReasoningTokens)
	u.TotalTokens = less(u.TotalTokens, o.TotalTokens)
	u.CostMicros = less(u.CostMicros, o.CostMicros)
}

// ledgerMove is ledger with the rows out taken out and those in put in, as
// a new ledger (a scratch thread shares its ledger with the projection).
// Rows left with no usage go.
func ledgerMove(ledger, out, in []LedgerRow) []LedgerRow {
	next := slices.Clone(ledger)
	find := func(r LedgerRow) (int, bool) { return slices.BinarySearchFunc(next, r, compareRows) }
	for _, r := range out {
		if i, found := find(r); found {
			next[i].Usage.sub(r.Usage)
			if next[i].Usage == (Usage{Model: r.Model}) {
				next = slices.Delete(next, i, i+1)
			}
		}
	}
	for _, r := range in {
		if i, found := find(r); found {
			next[i].Usage.Add(r.Usage)
		} else {
			next = slices.Insert(next, i, r)
		}
	}
	return next
}

// LedgerTotal is what rows add up to.
func LedgerTotal(rows []LedgerRow) Usage {
	var sum Usage
	for _, r := range rows {
		sum.Add(r.Usage)
	}
	return sum
}

// usageReported applies an attempt's usage report (see the top of the
// file) at at.
func (t *Thread) usageReported(r *Run, p UsageReported, at time.Time) {
	u := p.Usage
	a := r.attempt(p.AttemptID)
	if a == nil {
		// A log from before attempts reported usage: the run's usage as
		// reported, counted in the hour the run was queued (which a later
		// report does not move, so the earlier rows are found again).
		hour := ledgerHour(r.QueuedAt)
		var was []LedgerRow
		if r.Usage != nil {
			was = ledgerRows(*r.Usage, nil, hour, r.Provider)
		}
		t.Ledger = ledgerMove(t.Ledger, was, ledgerRows(u, nil, hour, r.Provider))
		r.Usage = &u
		return
	}
	rows := ledgerRows(u, p.Models, ledgerHour(at), a.provider(r))
	t.Ledger = ledgerMove(t.Ledger, a.Ledger, rows)
	a.Usage, a.Ledger = &u, rows
	// A run's usage is its attempts': a limit's continuation or a
	// steering restart adds to what the attempts before it used.
	var sum Usage
	for _, at := range r.Attempts {
		sum.Add(LedgerTotal(at.Ledger))
	}
	r.Usage = &sum
}

// rateLimitReported is the thread's rate limits with l, reported at at, in
// place of the provider's earlier word on the same limit (a log from
// before named no provider: the thread's then).
func (t *Thread) rateLimitReported(l RateLimit, at time.Time) []RateLimit {
	l.Provider = cmp.Or(l.Provider, t.Provider)
	l.At = at
	limits := slices.Clone(t.RateLimits)
	i := slices.IndexFunc(limits, func(m RateLimit) bool { return m.Scope == l.Scope && cmp.Or(m.Provider, t.Provider) == l.Provider })
	if i < 0 {
		return append(limits, l)
	}
	limits[i] = l
	return limits
}

// LatestLimits is the latest word on each provider's limits in limits
// (several threads' together): one a provider and scope, the latest first
// (then by provider and scope).
func LatestLimits(limits ...[]RateLimit) []RateLimit {
	var out []RateLimit
	for _, ls := range limits {
		for _, l := range ls {
			i := slices.IndexFunc(out, func(m RateLimit) bool { return m.Provider == l.Provider && m.Scope == l.Scope })
			switch {
			case i < 0:
				out = append(out, l)
			case l.At.After(out[i].At):
				out[i] = l
			}
		}
	}
	slices.SortFunc(out, func(a, b RateLimit) int {
		return cmp.Or(b.At.Compare(a.At), cmp.Compare(a.Provider, b.Provider), cmp.Compare(a.Scope, b.Scope))
	})
	return out
}

// UsageBy is what a usage report groups its lines by.
type UsageBy string

// What a usage report groups by.
const (
	UsageByProvider UsageBy = "provider"
	UsageByThread   UsageBy = "thread"
	UsageByModel    UsageBy = "model"
	UsageByDay      UsageBy = "day"
)

// UsageBys are every grouping, in the order a help text lists them.
var UsageBys = []UsageBy{UsageByProvider, UsageByThread, UsageByModel, UsageByDay}

// ThreadLedger is one thread's ledger, for a report over threads.
type ThreadLedger struct {
	ThreadID string
	Rows     []LedgerRow
}

// UsageLine is one line of a usage report: a key (a provider, a thread
// id, a model ("": the provider named none) or a day, YYYY-MM-DD in UTC)
// and what its rows add up to.
type UsageLine struct {
	Key   string `json:"key"`
	Usage Usage  `json:"usage"`
}

// Tally is the usage report of ledgers grouped by by: one line a key,
// sorted by key, and their total. Rows of an hour that ends at or before
// since do not count (zero since: all count), so since counts from the
// start of its hour.
func Tally(ledgers []ThreadLedger, by UsageBy, since time.Time) (lines []UsageLine, total Usage) {
	sums := map[string]*Usage{}
	for _, l := range ledgers {
		for _, r := range l.Rows {
			if !since.IsZero() && !r.Hour.Add(time.Hour).After(since) {
				continue
			}
			var key string
			switch by {
			case UsageByThread:
				key = l.ThreadID
			case UsageByModel:
				key = r.Model
			case UsageByDay:
				key = r.Hour.UTC().Format(time.DateOnly)
			default:
				key = r.Provider
			}
			u := sums[key]
			if u == nil {
				u = &Usage{}
				sums[key] = u
			}
			u.Add(r.Usage)
			total.Add(r.Usage)
		}
	}
	for key, u := range sums {
		u.Model = ""
		lines = append(lines, UsageLine{Key: key, Usage: *u})
	}
	slices.SortFunc(lines, func(a, b UsageLine) int { return cmp.Compare(a.Key, b.Key) })
	total.Model = ""
	return lines, total
}
