package orchestrator

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/baton-run/baton/host/internal/domain"
	"github.com/baton-run/baton/sdk"
)

// A reader that sees a projection finds, in ThreadEvents, every event it
// was made from, while commits go on: the log publishes a commit's
// sequence only after the projection is swapped in, so events read up to
// the log's published last could end short of the projection.
func TestThreadEventsCoverTheProjectionTheyStandBehind(t *testing.T) {
	h := quietHost(t, Config{})
	ctx := context.Background()
	for i, p := range []domain.CommandPayload{
		domain.CreateThread{Provider: "none", Cwd: os.TempDir(), ProviderCommand: domain.ProviderCommand{Argv: []string{"x"}}},
		domain.RecordSessionOpened{SessionID: "s1", ThreadRef: "pt"},
		domain.DispatchMessage{Text: "hello"},
	} {
		if _, err := h.Dispatch(ctx, domain.Command{ID: fmt.Sprint("c", i), ThreadID: "t", Payload: p}); err != nil {
			t.Fatal(err)
		}
	}
	if err := h.ingestEvents("t", "s1", "turn", []sdk.RuntimeEvent{{Kind: sdk.EventTurnStarted, ThreadRef: "pt", TurnRef: "u1"}}); err != nil {
		t.Fatal(err)
	}
	const deltas = 500
	written := make(chan error, 1)
	go func() {
		for i := range deltas {
			ev := sdk.RuntimeEvent{Kind: sdk.EventContentDelta, TurnRef: "u1", ItemRef: "a", Text: "x"}
			if err := h.ingestEvents("t", "s1", fmt.Sprint("d", i), []sdk.RuntimeEvent{ev}); err != nil {
				written <- err
				return
			}
		}
		written <- nil
	}()
	for {
		select {
		case err := <-written:
			if err != nil {
				t.Fatal(err)
			}
			return
		default:
		}
		th, err := h.view("t")
		if err != nil {
			t.Fatal(err)
		}
		recs, err := h.ThreadEvents("t", th.Sequence-1)
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) == 0 || recs[0].Sequence != th.Sequence {
			t.Fatalf("the projection stands at sequence %d; the events read after it from %d are %v", th.Sequence, th.Sequence-1, recs)
		}
	}
}
