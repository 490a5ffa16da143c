package orchestrator

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/baton-run/baton/host/internal/domain"
	"github.com/baton-run/baton/host/internal/eventlog"
)

// Usage and rate limits over threads. Each thread's head (its summary in
// the thread index, written with every commit) carries the thread's usage
// ledger and its providers' latest rate limits (domain/ledger.go), so a
// report over every thread reads one head a thread, never a history, and
// a report of one thread reads its head alone. The ledger is part of the
// thread's projection: rebuilt from the log like the rest (a store whose
// heads were written before they held it has them written again once:
// rehead).

// UsageQuery is what a usage report asks for.
type UsageQuery struct {
	// By groups the report's lines (zero: by provider).
	By domain.UsageBy
	// Since leaves out what was reported before its hour (zero: all).
	Since time.Time
	// ThreadID reports one thread ("": every thread).
	ThreadID string
}

// UsageReport is a report's lines, one a key sorted by key, and their
// total.
type UsageReport struct {
	Lines []domain.UsageLine
	Total domain.Usage
}

// Usage reports what threads used, from their heads.
func (h *Host) Usage(q UsageQuery) (UsageReport, error) {
	return ReadUsage(h.store, q)
}

// Limits is every provider's latest word on its limits, the latest first,
// from the threads' heads.
func (h *Host) Limits() ([]domain.RateLimit, error) {
	return ReadLimits(h.store)
}

// head is a thread's entry in the thread index: its summary, and beside
// it what a report over threads reads of it (a list of threads decodes the
// summary alone).
type head struct {
	domain.ThreadSummary
	Ledger     []domain.LedgerRow `json:"ledger,omitempty"`
	RateLimits []domain.RateLimit `json:"rateLimits,omitempty"`
}

// ReadUsage is Host.Usage of a store without a host.
func ReadUsage(store eventlog.Log, q UsageQuery) (UsageReport, error) {
	var ledgers []domain.ThreadLedger
	err := eachHead(store, q.ThreadID, func(id string, hd struct {
		Ledger []domain.LedgerRow `json:"ledger"`
	}) {
		ledgers = append(ledgers, domain.ThreadLedger{ThreadID: id, Rows: hd.Ledger})
	})
	if err != nil {
		return UsageReport{}, fmt.Errorf("usage: %w", err)
	}
	var r UsageReport
	r.Lines, r.Total = domain.Tally(ledgers, q.By, q.Since)
	return r, nil
}

// ReadLimits is Host.Limits of a store without a host.
func ReadLimits(store eventlog.Log) ([]domain.RateLimit, error) {
	var limits [][]domain.RateLimit
	err := eachHead(store, "", func(_ string, hd struct {
		RateLimits []domain.RateLimit `json:"rateLimits"`
	}) {
		limits = append(limits, hd.RateLimits)
	})
	if err != nil {
		return nil, fmt.Errorf("rate limits: %w", err)
	}
	return domain.LatestLimits(limits...), nil
}

// headPage is how many heads a report over every thread reads at once.
const headPage = 1024

// eachHead calls f with a thread's id and its head, decoded into the part
// of it f reads (id "": every thread's, a page at a time, in id order).
func eachHead[T any](store eventlog.Log, id string, f func(string, T)) error {
	decode := func(id string, b []byte) error {
		var hd T
		if err := json.Unmarshal(b, &hd); err != nil {
			return fmt.Errorf("head of %s: %w", id, err)
		}
		f(id, hd)
		return nil
	}
	if id != "" {
		b, found, err := store.Head(id)
		if err != nil {
			return fmt.Errorf("head of %s: %w", id, err)
		}
		if !found {
			return fmt.Errorf("%w: thread %q", domain.ErrNotFound, id)
		}
		return decode(id, b)
	}
	for after := ""; ; {
		heads, err := store.Heads(after, headPage)
		if err != nil {
			return fmt.Errorf("list threads: %w", err)
		}
		for _, hd := range heads {
			if err := decode(hd.ThreadID, hd.Data); err != nil {
				return err
			}
		}
		if len(heads) < headPage {
			return nil
		}
		after = heads[len(heads)-1].ThreadID
	}
}

// rehead writes every thread's head and snapshot again from its events,
// for an index of an older layout whose heads hold less than this baton's
// (layoutVersion): one thread at a time, once.
func (h *Host) rehead() error {
	n := 0
	for after := ""; ; {
		heads, err := h.store.Heads(after, headPage)
		if err != nil {
			return fmt.Errorf("rehead the thread index: %w", err)
		}
		for _, hd := range heads {
			t, _, err := loadThread(h.store, h.log, hd.ThreadID, partsWrite)
			if err != nil {
				return fmt.Errorf("rehead the thread index: %w", err)
			}
			body, _ := json.Marshal(t) // a thread always encodes
			sn := &eventlog.Snapshot{Schema: projectionSchema, Seq: t.Sequence, Body: body}
			if err := h.store.PutThreadState(hd.ThreadID, encodeHead(t.Summary(), t), t.Live(), sn); err != nil {
				return fmt.Errorf("rehead thread %s: %w", hd.ThreadID, err)
			}
			n++
		}
		if len(heads) < headPage {
			break
		}
		after = heads[len(heads)-1].ThreadID
	}
	if n > 0 {
		h.log.Info("wrote the thread index's heads again", "threads", n)
	}
	return h.store.SetMeta("layout", []byte(fmt.Sprint(layoutVersion)))
}
