package orchestrator_test

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-run/baton/host/internal/domain"
	"github.com/baton-run/baton/host/internal/orchestrator"
)

// A thread recorded before heads kept the usage ledger (an index of
// layout 1, its head a bare summary) counts all the same: the first host
// to open the store writes its head again from its events, once, and the
// report (by provider, and of the one thread) is what the transcript's
// usage frame said.
func TestUsageOfAThreadFromBeforeTheLedger(t *testing.T) {
	e := newEnv(t)
	e.gitWorkspace()
	threadID, _, _ := e.codexThread("simple", "")
	e.play(threadID, "codex/simple.steps.json")
	if err := e.host.Close(); err != nil {
		t.Fatal(err)
	}
	e.host = nil

	// The store as an older baton left it.
	s := openStore(t, e.data)
	b, _, err := s.Head(threadID)
	if err != nil {
		t.Fatal(err)
	}
	var old domain.ThreadSummary
	if err := json.Unmarshal(b, &old); err != nil {
		t.Fatal(err)
	}
	old.Usage = domain.Usage{}
	if err := s.PutThreadState(threadID, mustJSON(t, old), false, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.SetMeta("layout", []byte("1")); err != nil {
		t.Fatal(err)
	}
	if r, err := orchestrator.ReadUsage(s, orchestrator.UsageQuery{}); err != nil || len(r.Lines) != 0 {
		t.Fatalf("the old store's usage: %+v, %v; want none (its head holds no ledger)", r, err)
	}
	s.Close()

	e.open()
	codex := domain.Usage{InputTokens: 11860, OutputTokens: 16, TotalTokens: 11876}
	want := orchestrator.UsageReport{Lines: []domain.UsageLine{{Key: "codex", Usage: codex}}, Total: codex}
	for _, q := range []orchestrator.UsageQuery{{}, {ThreadID: threadID}} {
		got, err := e.host.Usage(q)
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("usage %+v after the open (-want +got):\n%s", q, d)
		}
	}
	threads, err := e.host.Threads("", 0)
	summary := codex
	summary.Model = "baton-scripted" // the thread's summary keeps the model codex named; a line by provider does not
	if err != nil || len(threads) != 1 || threads[0].Usage != summary {
		t.Errorf("threads after the open: %+v, %v; want its usage %+v", threads, err, summary)
	}
	if _, err := e.host.Usage(orchestrator.UsageQuery{ThreadID: "thr_none"}); err == nil {
		t.Error("the usage of a thread that is not: no error")
	}
}
