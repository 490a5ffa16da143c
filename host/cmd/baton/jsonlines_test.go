package main

import (
	"encoding/json"
	"fmt"

	"google.golang.org/protobuf/encoding/protojson"

	batonv1 "github.com/baton-run/baton/host/api/baton/v1"
	"github.com/baton-run/baton/host/internal/domain"
	"github.com/baton-run/baton/host/internal/eventlog"
	"github.com/baton-run/baton/host/internal/service"
)

// printedLine is one line of a verb's --json output as a test reads it:
// its kind, and the event (as a stored record, its payload in the
// domain's JSON) or the thread, each read from baton.v1's JSON form as
// the CLI reads the API's messages.
type printedLine struct {
	Kind   string
	Record eventlog.Record
	Thread domain.Thread
}

// readPrinted reads a line of --json output: {"kind":"event",...} or
// {"kind":"thread",...}.
func readPrinted(b []byte) (printedLine, error) {
	var k struct {
		Kind string `json:"kind"`
	}
	if err := json.Unmarshal(b, &k); err != nil {
		return printedLine{}, err
	}
	opts := protojson.UnmarshalOptions{DiscardUnknown: true} // the line's kind is no field of the message
	switch k.Kind {
	case "event":
		var ev batonv1.Event
		if err := opts.Unmarshal(b, &ev); err != nil {
			return printedLine{}, err
		}
		pl, err := service.PayloadOf(&ev)
		if err != nil {
			return printedLine{}, err
		}
		data, err := json.Marshal(pl)
		if err != nil {
			return printedLine{}, err
		}
		return printedLine{Kind: k.Kind, Record: eventlog.Record{Sequence: ev.GetSequence(), ThreadID: ev.GetThreadId(),
			Type: ev.GetType(), At: ev.GetAt().AsTime(), Data: data}}, nil
	case "thread":
		th, err := readThreadJSON(b)
		return printedLine{Kind: k.Kind, Thread: th}, err
	}
	return printedLine{}, fmt.Errorf("a line of kind %q, not an event or a thread", k.Kind)
}

// readThreadJSON reads a thread's JSON form (show --json, or a thread line
// of run or watch --json) as the CLI reads the API's Thread.
func readThreadJSON(b []byte) (domain.Thread, error) {
	var th batonv1.Thread
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(b, &th); err != nil {
		return domain.Thread{}, err
	}
	return service.ThreadOf(&th), nil
}
