package service

import (
	"encoding/json"
	"fmt"
	"strings"

	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	batonv1 "github.com/baton-run/baton/host/api/baton/v1"
	"github.com/baton-run/baton/host/internal/domain"
	"github.com/baton-run/baton/host/internal/eventlog"
	"github.com/baton-run/baton/host/internal/orchestrator"
)

// Conversions between the host's types and baton.v1's.

// modes are the dispatch modes by the names a client may use: the short
// ones (domain.ModeWords) and the domain's.
var modes = func() map[string]domain.DispatchMode {
	m := map[string]domain.DispatchMode{"": ""}
	for word, mode := range domain.ModeWords {
		m[word], m[string(mode)] = mode, mode
	}
	return m
}()

func receiptPB(rc domain.Receipt, runID string) *batonv1.Receipt {
	return &batonv1.Receipt{CommandId: rc.CommandID, Type: rc.Type, ThreadId: rc.ThreadID, Sequence: rc.Sequence,
		At: timestamppb.New(rc.At), RunId: runID}
}

func summaryPB(s domain.ThreadSummary) *batonv1.ThreadSummary {
	return &batonv1.ThreadSummary{Id: s.ID, Provider: s.Provider, Cwd: s.Cwd, Model: s.Model,
		CreatedAt: timestamppb.New(s.CreatedAt), UpdatedAt: timestamppb.New(s.UpdatedAt),
		Runs: uint32(s.Runs), Queued: uint32(s.Queued), Status: string(s.Status), LastRun: string(s.LastRun), Sequence: s.Sequence}
}

// jsonStruct is a JSON object as a Struct (numbers become doubles, as in
// any JSON reader).
func jsonStruct(b []byte) (*structpb.Struct, error) {
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("not a JSON object: %w", err)
	}
	return structpb.NewStruct(m)
}

// pagePB says what a page holds, and in words what it leaves out.
func pagePB(pg orchestrator.Page) *batonv1.ThreadPage {
	out := &batonv1.ThreadPage{FirstRun: uint32(pg.FirstRun), LastRun: uint32(pg.LastRun), Runs: uint32(pg.Runs),
		Messages: uint32(pg.Messages), MessagesAfter: uint32(pg.MessagesAfter), NextMessagesAfter: uint32(pg.NextMessagesAfter),
		Complete: pg.Complete()}
	var left []string
	runs := func(from, to int) string {
		if from == to {
			return fmt.Sprintf("run %d", from)
		}
		return fmt.Sprintf("runs %d-%d", from, to)
	}
	switch {
	case pg.Runs > 0 && pg.FirstRun == 0:
		left = append(left, runs(1, pg.Runs)+" (ask from_run 1)")
	case pg.FirstRun > 1:
		left = append(left, runs(1, pg.FirstRun-1)+" (ask from_run 1)")
	}
	if pg.LastRun > 0 && pg.LastRun < pg.Runs {
		left = append(left, fmt.Sprintf("%s (ask from_run %d)", runs(pg.LastRun+1, pg.Runs), pg.LastRun+1))
	}
	if pg.MessagesAfter > 0 {
		left = append(left, fmt.Sprintf("the first %d of their %d messages (ask messages_after 0)", pg.MessagesAfter, pg.Messages))
	}
	if pg.NextMessagesAfter > 0 {
		left = append(left, fmt.Sprintf("their messages from the %d%s on (ask messages_after %d)", pg.NextMessagesAfter+1, ordinalSuffix(pg.NextMessagesAfter+1),
			pg.NextMessagesAfter))
	}
	if len(left) > 0 {
		out.LeftOut = "left out: " + strings.Join(left, "; ")
	}
	return out
}

// ordinalSuffix is n's English ordinal suffix ("st" for 1, "th" for 11).
func ordinalSuffix(n int) string {
	switch {
	case n%100 >= 11 && n%100 <= 13:
		return "th"
	case n%10 == 1:
		return "st"
	case n%10 == 2:
		return "nd"
	case n%10 == 3:
		return "rd"
	}
	return "th"
}

func eventPB(r eventlog.Record) (*batonv1.Event, error) {
	data, err := jsonStruct(r.Data)
	if err != nil {
		return nil, fmt.Errorf("event %d (%s): %w", r.Sequence, r.Type, err)
	}
	return &batonv1.Event{Sequence: r.Sequence, ThreadId: r.ThreadID, Type: r.Type, At: timestamppb.New(r.At), Data: data}, nil
}
