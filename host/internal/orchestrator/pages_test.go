package orchestrator_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	gocmp "github.com/google/go-cmp/cmp"

	"github.com/baton-run/baton/host/internal/domain"
	"github.com/baton-run/baton/host/internal/domain/domaintest"
	"github.com/baton-run/baton/host/internal/eventlog"
	"github.com/baton-run/baton/host/internal/orchestrator"
)

// A thread longer than its projection keeps, through the real acp plugin
// and the replay peer, in a git workspace. The projection holds what is
// live and the newest runs; the thread's pages, put end to end, are the
// whole thread its log rebuilds (every run, message, item, turn and
// checkpoint once), before and after a restart (its projection loaded
// from its snapshot) and a rebuild (its snapshot not trusted: the parts
// written again). A run that left is diffed and rolled back to; the pages
// say what the rollback did to the runs after it.
func TestLongThreadIsReadInPages(t *testing.T) {
	e := newEnv(t)
	e.gitWorkspace()
	th := e.createThread("acp", "acp/long_thread.ndjson")
	msgs := messages(t, "acp/long_thread.messages")
	for i, m := range msgs {
		e.dispatch(domain.Command{ID: fmt.Sprintf("send-%d", i), ThreadID: th, Payload: domain.DispatchMessage{Text: m, Mode: domain.ModeQueueAfterActive}})
	}
	e.waitFor(th, "every run to end", allRunsEnded(len(msgs)))

	held, err := e.host.Thread(th)
	if err != nil {
		t.Fatal(err)
	}
	var ords []int
	for _, r := range held.Runs {
		ords = append(ords, r.Ordinal)
	}
	if held.Earlier == nil || held.Earlier.Runs != 12 || fmt.Sprint(ords) != "[13 14 15 16 17 18 19 20]" || held.Summary().Runs != 20 {
		t.Fatalf("the projection holds runs %v; earlier %+v", ords, held.Earlier)
	}
	whole := func(what string) {
		t.Helper()
		for _, size := range []int{1, 7, 100} {
			got := readPages(t, e.host, th, size)
			if d := gocmp.Diff(domaintest.Normal(rebuilt(t, e.host, th)), domaintest.Normal(&got)); d != "" {
				t.Fatalf("%s, pages of %d runs end to end (-the log +pages):\n%s", what, size, d)
			}
		}
	}
	whole("after 20 runs")
	page, pg, err := e.host.ThreadPage(th, orchestrator.PageQuery{FromRun: 3, ToRun: 3})
	if err != nil {
		t.Fatal(err)
	}
	if want := (orchestrator.Page{FirstRun: 3, LastRun: 3, Runs: 20, Messages: 2, Summary: held.Summary()}); pg != want || len(page.Runs) != 1 ||
		assistantText(page, page.Runs[0].ID) != "Logged step 3." {
		t.Fatalf("page of run 3: %+v, runs %d", pg, len(page.Runs))
	}

	e.restart()
	whole("after a restart")

	// A store from before parts were kept (none), and a snapshot the host
	// does not trust: the thread is rebuilt from its events, and the parts
	// written.
	if err := e.host.Close(); err != nil {
		t.Fatal(err)
	}
	e.host = nil
	dropParts(t, e.data)
	s := openStore(t, e.data)
	head, _, err := s.Head(th)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.PutThreadState(th, head, false, &eventlog.Snapshot{Schema: orchestrator.ProjectionSchema + 1, Seq: held.Sequence, Body: []byte("{}")}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	e.open()
	whole("after a rebuild")

	// Run 3 left the projection long ago: its diff, and a rollback to it.
	d, c, err := e.host.Diff(context.Background(), th, 3, 0)
	if err != nil || c.RunOrdinal != 3 || !strings.Contains(d.Text, "+++ b/log/step-3.txt") || strings.Contains(d.Text, "step-2.txt") {
		t.Fatalf("diff of run 3 (%+v, %v):\n%s", c, err, d.Text)
	}
	scope, err := e.host.RunScope(th, 3)
	if err != nil {
		t.Fatal(err)
	}
	e.dispatch(domain.Command{ID: "rollback", ThreadID: th, Payload: domain.RollbackToCheckpoint{ScopeID: scope}})
	after := e.waitFor(th, "the rollback to end", func(t domain.Thread) bool { return len(t.Rollbacks) > 0 && !t.RollingBack() })
	if rb := after.Rollbacks[len(after.Rollbacks)-1]; rb.Status != domain.RollbackDone || len(rb.Runs) != 17 || len(rb.Checkpoints) != 17 {
		t.Fatalf("rollback: %s, %d runs, %d checkpoints", rb.Status, len(rb.Runs), len(rb.Checkpoints))
	}
	var logs []string
	for name := range e.files() {
		if strings.HasPrefix(name, "log/") {
			logs = append(logs, name)
		}
	}
	slices.Sort(logs)
	if fmt.Sprint(logs) != "[log/step-1.txt log/step-2.txt log/step-3.txt]" {
		t.Fatalf("files after the rollback to run 3: %v", logs)
	}
	all := readPages(t, e.host, th, 100)
	var statuses []string
	for _, r := range all.Runs {
		statuses = append(statuses, fmt.Sprintf("%d %s", r.Ordinal, r.Status))
	}
	stale := 0
	for _, c := range all.Checkpoints {
		if c.Status == domain.CheckpointStale {
			stale++
		}
	}
	if statuses[2] != "3 completed" || statuses[3] != "4 rolled_back" || statuses[19] != "20 rolled_back" || stale != 17 {
		t.Fatalf("after the rollback: runs %v, %d stale checkpoints", statuses, stale)
	}
	whole("after the rollback")

	// ReadThread, a store read with no host, is the projection a host
	// loads: its newest runs, not every run its events replayed (its
	// snapshot not trusted: all of them).
	held, err = e.host.Thread(th)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.host.Close(); err != nil {
		t.Fatal(err)
	}
	e.host = nil
	s = openStore(t, e.data)
	defer s.Close()
	if head, _, err = s.Head(th); err != nil {
		t.Fatal(err)
	}
	if err := s.PutThreadState(th, head, false, &eventlog.Snapshot{Schema: orchestrator.ProjectionSchema + 1, Seq: held.Sequence, Body: []byte("{}")}); err != nil {
		t.Fatal(err)
	}
	read, err := orchestrator.ReadThread(s, th)
	if err != nil {
		t.Fatal(err)
	}
	if d := gocmp.Diff(jsonTree(t, held), jsonTree(t, read)); d != "" {
		t.Fatalf("ReadThread (-the host's projection +read):\n%s", d)
	}
}

// jsonTree is v as JSON, decoded.
func jsonTree(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var tree any
	if err := json.Unmarshal(b, &tree); err != nil {
		t.Fatal(err)
	}
	return tree
}

// dropParts removes every part from a data dir's store, as a store
// written before parts were kept has none.
func dropParts(t *testing.T, dataDir string) {
	t.Helper()
	db, err := pebble.Open(filepath.Join(dataDir, "events"), &pebble.Options{FormatMajorVersion: eventlog.FormatVersion})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.DeleteRange([]byte{'a'}, []byte{'a' + 1}, pebble.Sync); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

// readPages reads a thread size runs at a time, from run 1 to the newest,
// and puts the pages end to end.
func readPages(t *testing.T, h *orchestrator.Host, threadID string, size int) domain.Thread {
	t.Helper()
	var all domain.Thread
	for from := 1; ; {
		page, pg, err := h.ThreadPage(threadID, orchestrator.PageQuery{FromRun: from, MaxRuns: size})
		if err != nil {
			t.Fatal(err)
		}
		if pg.NextMessagesAfter != 0 || pg.MessagesAfter != 0 {
			t.Fatalf("page from run %d: messages %d on, next %d", from, pg.MessagesAfter, pg.NextMessagesAfter)
		}
		all.AddPage(page)
		if pg.LastRun >= pg.Runs {
			return all
		}
		from = pg.LastRun + 1
	}
}

// rebuilt is the thread its log rebuilds, keeping every run.
func rebuilt(t *testing.T, h *orchestrator.Host, threadID string) *domain.Thread {
	t.Helper()
	recs, err := h.ThreadEvents(threadID, 0)
	if err != nil {
		t.Fatal(err)
	}
	th := &domain.Thread{}
	th.KeepAll()
	for _, r := range recs {
		p, err := domain.DecodePayload(r.Type, r.Data)
		if err != nil {
			t.Fatal(err)
		}
		domain.Evolve(th, domain.Event{Sequence: r.Sequence, ThreadID: r.ThreadID, At: r.At, Payload: p})
	}
	return th
}
