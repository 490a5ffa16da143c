package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/shlex"

	"github.com/baton-run/baton/host/internal/domain"
	"github.com/baton-run/baton/host/internal/orchestrator"
)

// usageOut is baton usage -o json.
func usageOut(t *testing.T, out string) usageJSON {
	t.Helper()
	var u usageJSON
	if err := json.Unmarshal([]byte(out), &u); err != nil {
		t.Fatalf("usage -o json: %v\n%s", err, out)
	}
	return u
}

// One recorded turn on each of three providers, each through its real
// plugin with the replay peer as the provider: the ledger is what the
// transcripts' usage frames say (claude's result, codex's
// thread/tokenUsage/updated, opencode's step-finish), whole, by provider;
// by thread, by model and by day it sums to the same; threads and show
// say the same per thread and per run.
func TestUsageLedgerFromTranscripts(t *testing.T) {
	path := providerPath(t, simpleTranscripts)
	data, ws := t.TempDir(), t.TempDir()
	os.Chmod(data, 0o700)
	baton := func(args ...string) string {
		t.Helper()
		out, errOut, code := batonPath(t, path, append([]string{"--data", data}, args...)...)
		if code != exitOK {
			t.Fatalf("baton %s: exit %d\n%s\n%s", strings.Join(args, " "), code, out, errOut)
		}
		return out
	}
	threads := map[string]string{}
	began := time.Now()
	for _, p := range []string{"codex", "claude", "opencode"} {
		threads[p] = threadOf(t, baton("run", "--cwd", ws, "--provider", p, "Say hello"))
	}

	// claude states a cost (its result's total_cost_usd); codex and
	// opencode (no price in its config) state none, and none is invented.
	claude := domain.Usage{InputTokens: 13595, OutputTokens: 16, TotalTokens: 13611, CostMicros: 54700}
	codex := domain.Usage{InputTokens: 11860, OutputTokens: 16, TotalTokens: 11876}
	opencode := domain.Usage{InputTokens: 7996, OutputTokens: 8, TotalTokens: 8004}
	total := domain.Usage{InputTokens: 33451, OutputTokens: 40, TotalTokens: 33491, CostMicros: 54700}
	want := usageJSON{By: domain.UsageByProvider, Lines: []domain.UsageLine{{Key: "claude", Usage: claude}, {Key: "codex", Usage: codex},
		{Key: "opencode", Usage: opencode}}, Total: total}
	if d := cmp.Diff(want, usageOut(t, baton("usage", "--by", "provider", "-o", "json"))); d != "" {
		t.Errorf("usage by provider (-want +got):\n%s", d)
	}
	wantTable := strings.Join([]string{
		"PROVIDER  INPUT  OUTPUT  CACHED  REASONING  TOTAL     COST",
		"claude    13595      16       0          0  13611  $0.0547",
		"codex     11860      16       0          0  11876        -",
		"opencode   7996       8       0          0   8004        -",
		"total     33451      40       0          0  33491  $0.0547",
	}, "\n") + "\n"
	if d := cmp.Diff(wantTable, baton("usage")); d != "" {
		t.Errorf("usage's table (-want +got):\n%s", d)
	}

	// By thread, each thread is its provider's line; by model and by day
	// the lines differ, the total does not.
	byThread := usageOut(t, baton("usage", "--by", "thread", "-o", "json"))
	wantThreads := map[string]domain.Usage{threads["claude"]: claude, threads["codex"]: codex, threads["opencode"]: opencode}
	gotThreads := map[string]domain.Usage{}
	for _, l := range byThread.Lines {
		gotThreads[l.Key] = l.Usage
	}
	if d := cmp.Diff(wantThreads, gotThreads); d != "" || byThread.Total != total {
		t.Errorf("usage by thread (-want +got), total %+v:\n%s", byThread.Total, d)
	}
	// Each provider named its model: codex and opencode the scripted
	// model's name in their own spelling, claude the one the model
	// server answered with.
	wantModels := usageJSON{By: domain.UsageByModel, Lines: []domain.UsageLine{{Key: "baton-scripted", Usage: codex},
		{Key: "baton/scripted", Usage: opencode}, {Key: "claude-opus-5-5", Usage: claude}}, Total: total}
	if d := cmp.Diff(wantModels, usageOut(t, baton("usage", "--by", "model", "-o", "json"))); d != "" {
		t.Errorf("usage by model (-want +got):\n%s", d)
	}
	day := func(at time.Time) string { return at.UTC().Format(time.DateOnly) }
	if u := usageOut(t, baton("usage", "--by", "day", "-o", "json")); u.Total != total || len(u.Lines) != 1 || u.Lines[0].Key != day(began) && u.Lines[0].Key != day(time.Now()) {
		t.Errorf("usage by day: %+v, want one day's line of the total %+v", u, total)
	}
	if u := usageOut(t, baton("usage", "--since", "1h", "-o", "json")); u.Total != total {
		t.Errorf("usage since an hour ago: %+v, want %+v", u.Total, total)
	}
	if u := usageOut(t, baton("usage", "--since", "2999-01-01", "-o", "json")); u.Total != (domain.Usage{}) || len(u.Lines) != 0 {
		t.Errorf("usage since 2999: %+v, want none", u)
	}
	one := usageOut(t, baton("usage", "--thread", threads["claude"], "--by", "thread", "-o", "json"))
	if d := cmp.Diff(usageJSON{By: domain.UsageByThread, Lines: []domain.UsageLine{{Key: threads["claude"], Usage: claude}}, Total: claude}, one); d != "" {
		t.Errorf("usage of one thread (-want +got):\n%s", d)
	}

	// The thread list's column and JSON, and show.
	// A thread's summary keeps the model its provider named.
	wantSummary := map[string]domain.Usage{}
	for _, l := range wantModels.Lines {
		u := l.Usage
		u.Model = l.Key
		for id, tu := range wantThreads {
			if tu == l.Usage {
				wantSummary[id] = u
			}
		}
	}
	gotSummary := map[string]domain.Usage{}
	for _, s := range threadsJSON(t, baton("threads", "-o", "json")) {
		gotSummary[s.ID] = s.Usage
	}
	if d := cmp.Diff(wantSummary, gotSummary); d != "" {
		t.Errorf("threads -o json: usage by thread (-want +got):\n%s", d)
	}
	if list := baton("threads"); !regexp.MustCompile(`(?m)^` + threads["claude"] + ` +claude +idle, last run completed +1 +13611 tok `).MatchString(list) {
		t.Errorf("threads: no usage column of 13611 tokens for the claude thread:\n%s", list)
	}
	show := baton("show", threads["codex"])
	for _, line := range []string{"usage: 11876 tokens (input 11860, output 16, cached 0, reasoning 0)\n",
		"  run 1  11876 tokens (input 11860, output 16, cached 0, reasoning 0)\n"} {
		if !strings.Contains(show, line) {
			t.Errorf("show: no line %q in:\n%s", line, show)
		}
	}
}

// baton limits after codex's recorded usage limit: its primary and
// secondary windows, how full and (the primary) when it resets, as the
// transcript's rate-limit frames say, with when it said so.
func TestLimitsFromATranscript(t *testing.T) {
	data := t.TempDir()
	before := time.Now()
	_, errOut, code := baton(t, "run", "--data", data, "--cwd", t.TempDir(), "--provider", "codex", "--provider-command",
		peerCommand(t, "codex/usage_limit.ndjson"), lines(t, "codex/usage_limit.messages")[0])
	if code != exitFailed {
		t.Fatalf("run: exit %d, want %d (blocked)\n%s", code, exitFailed, errOut)
	}
	out, errOut, code := baton(t, "limits", "--data", data, "-o", "json")
	if code != exitOK {
		t.Fatalf("limits: exit %d\n%s", code, errOut)
	}
	var got limitsJSON
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("limits -o json: %v\n%s", err, out)
	}
	for i, l := range got.Limits {
		if l.At.Before(before.Add(-time.Second)) || l.At.After(time.Now()) {
			t.Errorf("limit %d reported at %s, not during the run", i, l.At)
		}
		got.Limits[i].At = time.Time{}
	}
	want := []domain.RateLimit{
		{Provider: "codex", Scope: "codex/primary", UsedPercent: 100, ResetsAt: time.Date(2026, 12, 1, 19, 12, 45, 0, time.UTC)},
		{Provider: "codex", Scope: "codex/secondary", UsedPercent: 41},
	}
	if d := cmp.Diff(want, got.Limits); d != "" {
		t.Errorf("limits (-want +got):\n%s", d)
	}
	table, _, _ := baton(t, "limits", "--data", data)
	if !regexp.MustCompile(`(?m)^PROVIDER +SCOPE +USED +RESETS +REPORTED\ncodex +codex/primary +100% +Dec 1 \d\d:\d\d \(passed\) +\d\d:\d\d\ncodex +codex/secondary +41% +- +\d\d:\d\d\n$`).MatchString(table) {
		t.Errorf("limits' table:\n%s", table)
	}
}

// The tables of usage and limits, whole: a key a row, sorted, the totals
// last, "-" where no provider stated a cost; limits the latest first,
// with how far off each reset is.
func TestUsageAndLimitsTables(t *testing.T) {
	var b strings.Builder
	r := orchestrator.UsageReport{Lines: []domain.UsageLine{
		{Key: "", Usage: domain.Usage{InputTokens: 5, TotalTokens: 5}},
		{Key: "claude-opus-5-5", Usage: domain.Usage{InputTokens: 1200, OutputTokens: 300, CachedInputTokens: 1000, ReasoningTokens: 20,
			TotalTokens: 1500, CostMicros: 12_345_600}},
		{Key: "gpt-5", Usage: domain.Usage{InputTokens: 10, OutputTokens: 2, TotalTokens: 12, CostMicros: 1}},
	}, Total: domain.Usage{InputTokens: 1215, OutputTokens: 302, CachedInputTokens: 1000, ReasoningTokens: 20, TotalTokens: 1517,
		CostMicros: 12_345_601}}
	if err := printUsage(&b, r, domain.UsageByModel, "table"); err != nil {
		t.Fatal(err)
	}
	want := strings.Join([]string{
		"MODEL            INPUT  OUTPUT  CACHED  REASONING  TOTAL        COST",
		"-                    5       0       0          0      5           -",
		"claude-opus-5-5   1200     300    1000         20   1500    $12.3456",
		"gpt-5               10       2       0          0     12   $0.000001",
		"total             1215     302    1000         20   1517  $12.345601",
	}, "\n") + "\n"
	if d := cmp.Diff(want, b.String()); d != "" {
		t.Errorf("usage table (-want +got):\n%s", d)
	}

	now := time.Date(2026, 12, 4, 9, 0, 0, 0, time.UTC)
	b.Reset()
	printLimits(&b, []domain.RateLimit{
		{Provider: "claude", Scope: "five_hour", UsedPercent: 91, ResetsAt: now.Add(2*time.Hour + 13*time.Minute), At: now.Add(-time.Minute)},
		{Provider: "codex", Scope: "codex/secondary", UsedPercent: 41.5, At: now.Add(-48 * time.Hour)},
	}, "table", now, time.UTC)
	want = strings.Join([]string{
		"PROVIDER  SCOPE            USED   RESETS            REPORTED",
		"claude    five_hour        91%    11:13 (in 2h13m)  08:59",
		"codex     codex/secondary  41.5%  -                 Dec 2 09:00",
	}, "\n") + "\n"
	if d := cmp.Diff(want, b.String()); d != "" {
		t.Errorf("limits table (-want +got):\n%s", d)
	}
	b.Reset()
	printLimits(&b, nil, "table", now, time.UTC)
	if b.String() != "no provider has reported a rate limit\n" {
		t.Errorf("no limits: %q", b.String())
	}
}

// --since takes a duration back, whole days, a date or an instant.
func TestUsageSince(t *testing.T) {
	now := time.Date(2026, 12, 4, 9, 30, 0, 0, time.UTC)
	for in, want := range map[string]time.Time{
		"":                     {},
		"24h":                  now.Add(-24 * time.Hour),
		"7d":                   now.Add(-7 * 24 * time.Hour),
		"2026-12-01":           time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC),
		"2026-12-01T10:00:00Z": time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC),
	} {
		if got, err := sinceOf(in, now); err != nil || !got.Equal(want) {
			t.Errorf("--since %q: %s, %v; want %s", in, got, err, want)
		}
	}
	for _, in := range []string{"yesterday", "-3h", "1w"} {
		if _, err := sinceOf(in, now); err == nil {
			t.Errorf("--since %q: no error", in)
		}
	}
	if _, errOut, code := baton(t, "usage", "--by", "week"); code != exitUsage || !strings.Contains(errOut, `--by "week"`) {
		t.Errorf("usage --by week: exit %d, %s", code, errOut)
	}
}

// The continuation policy's token budget counts what the ledger counts:
// codex's recorded loop of three runs, the loop's tokens against the
// thread's usage and its runs'.
func TestTokenBudgetReadsTheLedger(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(root, "testdata", "codex", "until_loop.flags"))
	if err != nil {
		t.Fatal(err)
	}
	flags, err := shlex.Split(string(b))
	if err != nil {
		t.Fatal(err)
	}
	data := t.TempDir()
	args := append([]string{"run", "--data", data, "--cwd", t.TempDir(), "--provider", "codex", "--provider-command",
		peerCommand(t, "codex/until_loop.ndjson"), "--max-tokens", "100000000"}, append(flags, lines(t, "codex/until_loop.messages")[0])...)
	out, errOut, code := baton(t, args...)
	if code != exitOK {
		t.Fatalf("run: exit %d\n%s\n%s", code, out, errOut)
	}
	thread := threadOf(t, out)
	th := showJSON(t, data, thread)
	var runs int64
	for _, r := range th.Runs {
		if r.Usage != nil {
			runs += r.Usage.TotalTokens
		}
	}
	out, errOut, code = baton(t, "usage", "--data", data, "--thread", thread, "-o", "json")
	if code != exitOK {
		t.Fatalf("usage: exit %d\n%s", code, errOut)
	}
	ledger := usageOut(t, out).Total.TotalTokens
	if th.Loop == nil || ledger == 0 || th.Loop.Tokens != ledger || runs != ledger {
		t.Errorf("the loop counted %+v tokens, its runs %d, the ledger %d: want one number, not 0", th.Loop, runs, ledger)
	}
}
