package service

import (
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	batonv1 "github.com/baton-run/baton/host/api/baton/v1"
	"github.com/baton-run/baton/host/internal/domain"
	"github.com/baton-run/baton/host/internal/orchestrator"
)

// The API's messages of what a caller read without the service: a
// client that opens the store itself (shell completion, on a store
// another process holds) or a test that prints events it made. They are
// the messages the service would give, derived fields and all, so that
// such a caller reads baton.v1 like every other client.

// ThreadMessage is a whole thread's projection as the API's Thread.
func ThreadMessage(t domain.Thread) *batonv1.Thread {
	pg := orchestrator.Page{Runs: t.RunCount(), Summary: t.Summary()}
	if n := len(t.Runs); n > 0 {
		pg.FirstRun, pg.LastRun = t.Runs[0].Ordinal, t.Runs[n-1].Ordinal
	}
	return threadPB(t, pg)
}

// SummaryMessage is a thread's summary as the API's ThreadSummary.
func SummaryMessage(s domain.ThreadSummary) *batonv1.ThreadSummary { return summaryPB(s) }

// EventMessage is an event as the API's Event: pl, the thread's event of
// that sequence, committed at at. A payload with no case is an error
// naming its type.
func EventMessage(seq uint64, threadID string, at time.Time, pl domain.Payload) (*batonv1.Event, error) {
	ev := &batonv1.Event{Sequence: seq, ThreadId: threadID, Type: pl.EventType(), At: timestamppb.New(at)}
	if err := setPayload(ev, pl); err != nil {
		return nil, err
	}
	return ev, nil
}
