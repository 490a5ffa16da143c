package service

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"

	batonv1 "github.com/baton-run/baton/host/api/baton/v1"
	"github.com/baton-run/baton/host/internal/domain"
	"github.com/baton-run/baton/host/internal/eventlog"
	"github.com/baton-run/baton/host/internal/orchestrator"
)

var update = flag.Bool("update", false, "write testdata/schema from what the converters make")

// caseOf is the name of the oneof case an event's payload is in ("": none).
func caseOf(ev *batonv1.Event) string {
	m := ev.ProtoReflect()
	f := m.WhichOneof(m.Descriptor().Oneofs().ByName("payload"))
	if f == nil {
		return ""
	}
	return string(f.Name())
}

// Every event type the domain records has its own case in the API's
// Event, named for it (run.started is run_started), and every case is a
// type the domain records: an event type added to the domain without a
// case here fails this test, not a client.
func TestEveryEventTypeHasACase(t *testing.T) {
	cases := map[string]bool{}
	fields := (&batonv1.Event{}).ProtoReflect().Descriptor().Oneofs().ByName("payload").Fields()
	for i := range fields.Len() {
		cases[string(fields.Get(i).Name())] = true
	}
	for _, typ := range domain.EventTypes() {
		ev, err := eventPB(eventlog.Record{Sequence: 1, ThreadID: "thr", Type: typ, Data: []byte(`{}`)})
		if err != nil {
			t.Errorf("%s: %v", typ, err)
			continue
		}
		want := strings.ReplaceAll(typ, ".", "_")
		if got := caseOf(ev); got != want {
			t.Errorf("%s: payload in case %q, want %q", typ, got, want)
		}
		delete(cases, want)
	}
	for c := range cases {
		t.Errorf("Event's case %s is no event type the domain records", c)
	}
}

// epoch is the instant every filled time is.
var epoch = time.Date(2026, 12, 1, 9, 30, 15, 123456789, time.UTC)

// fill sets every exported field of v, at every depth, to a value that is
// not its zero: strings to their field's name, numbers to 7, a slice to
// one element, a pointer to a filled value. A field a converter forgets
// is then a difference a round trip shows.
func fill(v reflect.Value, name string) {
	switch v.Interface().(type) {
	case time.Time:
		v.Set(reflect.ValueOf(epoch))
		return
	case domain.Text:
		v.Set(reflect.ValueOf(domain.NewText(name + " text")))
		return
	case json.RawMessage:
		v.Set(reflect.ValueOf(json.RawMessage(`{"` + name + `":[1,"two"]}`)))
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(strings.ToLower(name))
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int32, reflect.Int64:
		v.SetInt(7)
	case reflect.Uint32, reflect.Uint64:
		v.SetUint(7)
	case reflect.Float64:
		v.SetFloat(42.5)
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(v.Elem(), name)
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		fill(v.Index(0), name)
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		fill(k, name+"Key")
		fill(e, name+"Value")
		m.SetMapIndex(k, e)
		v.Set(m)
	case reflect.Struct:
		for i := range v.NumField() {
			if f := v.Type().Field(i); f.IsExported() {
				fill(v.Field(i), f.Name)
			}
		}
	default:
		panic("fill: no value for a " + v.Type().String() + " (" + name + ")")
	}
}

// filledThread is a thread with every field set.
func filledThread() domain.Thread {
	var th domain.Thread
	fill(reflect.ValueOf(&th).Elem(), "Thread")
	th.Runs[0].Status = domain.RunStatusRunning // the active run's id is the projection's too
	return th
}

// filledPayload is an event of type typ with every field set.
func filledPayload(t testing.TB, typ string) domain.Payload {
	zero, err := domain.DecodePayload(typ, []byte(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	v := reflect.New(reflect.TypeOf(zero)).Elem()
	fill(v, v.Type().Name())
	return v.Interface().(domain.Payload)
}

var domainOpts = cmp.Options{cmpopts.IgnoreUnexported(domain.Thread{}, domain.Run{}),
	cmp.Comparer(func(a, b domain.Text) bool { return a.String() == b.String() })}

// A thread and an event of every type, every field set, come back from
// the API's messages as they went in: each converter carries every field
// of its type, both ways (a field the domain adds that either leaves out
// fails here).
func TestConversionsRoundTrip(t *testing.T) {
	th := filledThread()
	pb := threadPB(th, orchestrator.Page{})
	if pb.GetActiveRunId() != th.Runs[0].ID {
		t.Errorf("active_run_id %q, want %q", pb.GetActiveRunId(), th.Runs[0].ID)
	}
	// The usage ledger is read through Usage, not with the thread.
	ledger := cmpopts.IgnoreFields(domain.Thread{}, "Ledger")
	attemptLedger := cmpopts.IgnoreFields(domain.Attempt{}, "Ledger")
	if d := cmp.Diff(th, ThreadOf(pb), domainOpts, ledger, attemptLedger); d != "" {
		t.Errorf("thread (-domain +from the API):\n%s", d)
	}
	var sum domain.ThreadSummary
	fill(reflect.ValueOf(&sum).Elem(), "ThreadSummary")
	if d := cmp.Diff(sum, SummaryOf(summaryPB(sum)), domainOpts); d != "" {
		t.Errorf("summary (-domain +from the API):\n%s", d)
	}
	if got := SummaryOf(&batonv1.ThreadSummary{Id: "thr"}); !got.CreatedAt.IsZero() || !got.UpdatedAt.IsZero() {
		t.Errorf("a summary without its times reads %v, %v; want the zero time", got.CreatedAt, got.UpdatedAt)
	}
	for _, typ := range domain.EventTypes() {
		p := filledPayload(t, typ)
		ev := &batonv1.Event{Type: typ}
		if err := setPayload(ev, p); err != nil {
			t.Fatal(err)
		}
		got, err := PayloadOf(ev)
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(p, got, domainOpts); d != "" {
			t.Errorf("%s (-domain +from the API):\n%s", typ, d)
		}
	}
}

// schemaEvents are the events the schema's golden files pin: one of each
// type, every field set.
func schemaEvents(t testing.TB) []*batonv1.Event {
	var out []*batonv1.Event
	for i, typ := range domain.EventTypes() {
		b, err := json.Marshal(filledPayload(t, typ))
		if err != nil {
			t.Fatal(err)
		}
		ev, err := eventPB(eventlog.Record{Sequence: uint64(i + 1), ThreadID: "thr_01jq3v5x8kz6m2n4p7r9s0t1ab", Type: typ, At: epoch, Data: b})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, ev)
	}
	return out
}

// schemaThread is the thread the schema's golden files pin.
func schemaThread() *batonv1.Thread {
	return threadPB(filledThread(), orchestrator.Page{FirstRun: 1, LastRun: 1, Runs: 1, Messages: 1,
		Summary: domain.ThreadSummary{ID: "id", Provider: "provider", Cwd: "cwd", Model: "model", CreatedAt: epoch, UpdatedAt: epoch, Runs: 1, Status: domain.ThreadStatus(domain.RunStatusRunning), Sequence: 7}})
}

// golden compares got with the file's bytes (or, with -update, writes it).
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", "schema", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run the test with -update to write it)", err)
	}
	if !bytes.Equal(want, got) {
		t.Errorf("%s changed (a field renamed, renumbered or dropped breaks every client; -update if it only grew):\n%s", path,
			cmp.Diff(string(want), string(got)))
	}
}

// jsonForm is m's protojson form, indented by encoding/json: protojson
// varies its spacing from build to build on purpose, the field names and
// values are what the schema pins.
func jsonForm(t *testing.T, m proto.Message) []byte {
	b, err := protojson.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := json.Indent(&out, b, "", "  "); err != nil {
		t.Fatal(err)
	}
	return append(out.Bytes(), '\n')
}

// The JSON and binary forms of a thread and of an event of every type
// are pinned: a field renamed or renumbered, a name's case changed, a
// value's encoding changed, fails here first.
func TestSchema(t *testing.T) {
	golden(t, "thread.json", jsonForm(t, schemaThread()))
	bin, err := proto.MarshalOptions{Deterministic: true}.Marshal(schemaThread())
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "thread.binpb", bin)
	var js, bins []byte
	for _, ev := range schemaEvents(t) {
		js = append(js, jsonForm(t, ev)...)
		b, err := proto.MarshalOptions{Deterministic: true}.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		bins = protowire.AppendBytes(bins, b) // length-delimited, one after another
	}
	golden(t, "events.json", js)
	golden(t, "events.binpb", bins)

	// The goldens decode back to the messages: JSON and binary alike.
	var th batonv1.Thread
	if err := protojson.Unmarshal(readGolden(t, "thread.json"), &th); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(schemaThread(), &th, protocmp.Transform()); d != "" {
		t.Errorf("thread.json decodes to (-want +got):\n%s", d)
	}
}

func readGolden(t *testing.T, name string) []byte {
	b, err := os.ReadFile(filepath.Join("testdata", "schema", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A reader built before a field was added is not broken by it: a message
// with a field it does not know (a newer service's, here number 999 of
// Event and of Thread, and an event type's case number 99) decodes,
// gives every field it knows, and keeps the new one when it encodes the
// message again.
func TestAnAddedFieldDoesNotBreakAnOlderReader(t *testing.T) {
	ev := schemaEvents(t)[0]
	for _, tc := range []struct {
		name string
		msg  proto.Message
		into func() proto.Message
	}{
		{"event", ev, func() proto.Message { return &batonv1.Event{} }},
		{"thread", schemaThread(), func() proto.Message { return &batonv1.Thread{} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			old, err := proto.MarshalOptions{Deterministic: true}.Marshal(tc.msg)
			if err != nil {
				t.Fatal(err)
			}
			added := protowire.AppendTag(nil, 999, protowire.BytesType)
			added = protowire.AppendString(added, "a field from a newer service")
			got := tc.into()
			if err := proto.Unmarshal(append(old, added...), got); err != nil {
				t.Fatalf("decoding with a field added: %v", err)
			}
			if d := cmp.Diff(tc.msg, got, protocmp.Transform(), protocmp.IgnoreUnknown()); d != "" {
				t.Errorf("the fields it knows (-sent +read):\n%s", d)
			}
			if u := got.ProtoReflect().GetUnknown(); !bytes.Equal(u, added) {
				t.Errorf("unknown fields kept: %q, want %q", u, added)
			}
			again, err := proto.MarshalOptions{Deterministic: true}.Marshal(got)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(again, append(old, added...)) {
				t.Errorf("encoded again:\n%x\nwant\n%x", again, append(old, added...))
			}
		})
	}

	// An event of a type the reader does not know: its sequence, thread,
	// type and instant read, its payload none of the cases it has, and
	// the CLI's reader says which type it could not read.
	head := &batonv1.Event{Sequence: 9, ThreadId: "thr", Type: "thread.renamed", At: ev.GetAt()}
	b, err := proto.Marshal(head)
	if err != nil {
		t.Fatal(err)
	}
	b = protowire.AppendTag(b, 99, protowire.BytesType)
	b = protowire.AppendBytes(b, protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), "new name"))
	var got batonv1.Event
	if err := proto.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(head, &got, protocmp.Transform(), protocmp.IgnoreUnknown()); d != "" || got.GetPayload() != nil {
		t.Errorf("an event of a new type read as (-sent +read):\n%s (payload %v)", d, got.GetPayload())
	}
	if _, err := PayloadOf(&got); err == nil || err.Error() != "event 9 (thread.renamed): a payload this client does not know" {
		t.Errorf("PayloadOf: %v", err)
	}

	// Over JSON, a reader that discards what it does not know (as
	// protojson's DiscardUnknown, or any JSON reader of a field it
	// ignores) reads the rest.
	js := bytes.Replace(jsonForm(t, ev), []byte("{"), []byte(`{"addedLater": {"x": 1},`), 1)
	var fromJSON batonv1.Event
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(js, &fromJSON); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(ev, &fromJSON, protocmp.Transform()); d != "" {
		t.Errorf("JSON with a field added (-sent +read):\n%s", d)
	}
}
