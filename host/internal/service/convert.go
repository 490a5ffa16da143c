package service

import (
	"encoding/json"
	"fmt"

	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	batonv1 "github.com/baton-run/baton/host/api/baton/v1"
	"github.com/baton-run/baton/host/internal/domain"
	"github.com/baton-run/baton/host/internal/eventlog"
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

func eventPB(r eventlog.Record) (*batonv1.Event, error) {
	data, err := jsonStruct(r.Data)
	if err != nil {
		return nil, fmt.Errorf("event %d (%s): %w", r.Sequence, r.Type, err)
	}
	return &batonv1.Event{Sequence: r.Sequence, ThreadId: r.ThreadID, Type: r.Type, At: timestamppb.New(r.At), Data: data}, nil
}
