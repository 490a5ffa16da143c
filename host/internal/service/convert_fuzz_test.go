package service

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	batonv1 "github.com/baton-run/baton/host/api/baton/v1"
)

// What a client reads from the service is outside input to it: any
// bytes that decode as an Event or a Thread convert to the domain's
// types without a panic, an event of no case this client knows is an
// error, and a payload converted is the one its case names.
func FuzzClientConversions(f *testing.F) {
	for _, ev := range schemaEvents(f) {
		b, err := proto.Marshal(ev)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	th, err := proto.Marshal(schemaThread())
	if err != nil {
		f.Fatal(err)
	}
	f.Add(th)
	f.Add([]byte{}) // an event of no case
	f.Fuzz(func(t *testing.T, b []byte) {
		var ev batonv1.Event
		if proto.Unmarshal(b, &ev) == nil {
			p, err := PayloadOf(&ev)
			switch {
			case ev.GetPayload() == nil && err == nil:
				t.Fatalf("an event of no payload read as %#v", p)
			case ev.GetPayload() != nil && err != nil:
				t.Fatalf("an event of case %s: %v", caseOf(&ev), err)
			case err == nil && strings.ReplaceAll(p.EventType(), ".", "_") != caseOf(&ev):
				t.Fatalf("case %s read as %s", caseOf(&ev), p.EventType())
			}
		}
		var thread batonv1.Thread
		if proto.Unmarshal(b, &thread) == nil {
			ThreadOf(&thread)
		}
	})
}
