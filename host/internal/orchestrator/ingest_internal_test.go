package orchestrator

import (
	"context"
	"errors"
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/baton-run/baton/host/internal/domain"
	"github.com/baton-run/baton/host/internal/ids"
	"github.com/baton-run/baton/sdk"
)

// A batch of provider events is one command: its events are decided in
// order, committed together, and the live projection is the one a rebuild
// from the log gives. The same batch again changes nothing; the same id
// with other events is a conflict.
func TestIngestBatch(t *testing.T) {
	h, err := Open(Config{DataDir: t.TempDir(), PluginDirs: stubPlugins(t), IDs: ids.Seeded(7)})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	ctx := context.Background()
	rc, err := h.Dispatch(ctx, domain.Command{ID: "c", Payload: domain.CreateThread{Provider: "none", Cwd: os.TempDir(),
		ProviderCommand: domain.ProviderCommand{Argv: []string{"x"}}}})
	if err != nil {
		t.Fatal(err)
	}
	th := rc.ThreadID
	if _, err := h.Dispatch(ctx, domain.Command{ID: "o", ThreadID: th, Payload: domain.RecordSessionOpened{SessionID: "s1"}}); err != nil {
		t.Fatal(err)
	}
	evs := []sdk.RuntimeEvent{
		{Sequence: 1, Kind: sdk.EventThreadStarted, ThreadRef: "pt"},
		{Sequence: 2, Kind: sdk.EventThreadStarted, ThreadRef: "child", ParentThreadRef: "pt"}, // needs the one before
		{Sequence: 3, Kind: sdk.EventDiagnostic, Title: "one"},
		{Sequence: 4, Kind: sdk.EventDiagnostic, Title: "two"},
	}
	head := h.LastSequence()
	if err := h.ingestEvents(th, "s1", "pev:s1:1-4", evs); err != nil {
		t.Fatal(err)
	}
	if got := h.LastSequence() - head; got != 4 {
		t.Fatalf("%d events committed, want 4", got)
	}
	live, _ := h.Thread(th)
	if live.ProviderThreads[1].ParentID != live.ProviderThreads[0].ID {
		t.Fatalf("the second event was not decided against the first: %+v", live.ProviderThreads)
	}
	rebuilt, _, err := h.loadThread(th)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(live, *rebuilt, cmpopts.IgnoreUnexported(domain.Thread{}, domain.Run{})); diff != "" {
		t.Fatalf("live projection differs from the log's (-live +log):\n%s", diff)
	}
	head = h.LastSequence()
	if err := h.ingestEvents(th, "s1", "pev:s1:1-4", evs); err != nil || h.LastSequence() != head {
		t.Fatalf("the same batch again: %v, head %d -> %d", err, head, h.LastSequence())
	}
	if err := h.ingestEvents(th, "s1", "pev:s1:1-4", evs[:2]); !errors.Is(err, domain.ErrConflict) {
		t.Fatalf("the same id with other events: %v", err)
	}
	if err := h.ingestEvents("nope", "s1", "pev:x", evs); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("unknown thread: %v", err)
	}
	h.Close()
	if err := h.ingestEvents(th, "s1", "pev:s1:5-6", evs); !errors.Is(err, ErrClosed) {
		t.Fatalf("after close: %v", err)
	}
}
