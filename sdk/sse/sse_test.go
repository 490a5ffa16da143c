package sse

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
)

func decodeAll(t testing.TB, s string) []Event {
	t.Helper()
	d := NewDecoder(strings.NewReader(s))
	var evs []Event
	for {
		ev, err := d.Next()
		if err == io.EOF {
			return evs
		}
		if err != nil {
			t.Fatalf("decode %q: %v", s, err)
		}
		evs = append(evs, ev)
	}
}

func TestDecode(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     []Event
	}{
		{"opencode", "data: {\"type\":\"server.connected\"}\n\ndata: {\"a\":1}\n\n",
			[]Event{{Data: []byte(`{"type":"server.connected"}`)}, {Data: []byte(`{"a":1}`)}}},
		{"multi-line data", "data: a\ndata:b\ndata:  c\n\n", []Event{{Data: []byte("a\nb\n c")}}},
		{"crlf and cr", "data: x\r\n\r\ndata: y\r\rdata: z\n\n", []Event{{Data: []byte("x")}, {Data: []byte("y")}, {Data: []byte("z")}}},
		{"fields", "event: ping\nid: 7\nretry: 1500\ndata: p\n\n", []Event{{Event: "ping", ID: "7", Retry: 1500, Data: []byte("p")}}},
		{"id carries over", "id: 1\ndata: a\n\ndata: b\n\n", []Event{{ID: "1", Data: []byte("a")}, {ID: "1", Data: []byte("b")}}},
		{"comments and empty events", ": keep-alive\n\nevent: x\n\ndata\n\n", []Event{{Data: []byte("")}}},
		{"unfinished last event dropped", "data: a\n\ndata: b", []Event{{Data: []byte("a")}}},
		{"bad retry ignored", "retry: x1\ndata: a\n\n", []Event{{Data: []byte("a")}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := decodeAll(t, tc.in)
			if len(got) != len(tc.want) {
				t.Fatalf("got %d events %+v, want %d", len(got), got, len(tc.want))
			}
			for i := range got {
				if !same(got[i], tc.want[i]) {
					t.Errorf("event %d: got %+v (data %q), want %+v (data %q)", i, got[i], got[i].Data, tc.want[i], tc.want[i].Data)
				}
			}
		})
	}
}

func same(a, b Event) bool {
	return a.ID == b.ID && a.Event == b.Event && a.Retry == b.Retry && bytes.Equal(a.Data, b.Data)
}

func TestLineTooLong(t *testing.T) {
	d := NewDecoder(io.MultiReader(strings.NewReader("data: "), bytes.NewReader(bytes.Repeat([]byte("x"), MaxLine))))
	if _, err := d.Next(); !errors.Is(err, ErrLineTooLong) {
		t.Fatalf("got %v, want ErrLineTooLong", err)
	}
}

func TestEncodeRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	e := NewEncoder(&buf)
	in := []Event{{Data: []byte(`{"x":1}`)}, {Event: "e", ID: "i", Retry: 3, Data: []byte("a\r\nb\rc\n")}}
	for _, ev := range in {
		if err := e.Encode(ev); err != nil {
			t.Fatal(err)
		}
	}
	if !strings.HasPrefix(buf.String(), "data: {\"x\":1}\n\n") {
		t.Fatalf("encoded %q", buf.String())
	}
	got := decodeAll(t, buf.String())
	want := []Event{in[0], {Event: "e", ID: "i", Retry: 3, Data: []byte("a\nb\nc\n")}}
	for i := range want {
		if !same(got[i], want[i]) {
			t.Errorf("event %d: got %+v, want %+v", i, got[i], want[i])
		}
	}
	if err := e.Encode(Event{Event: "a\nb"}); err == nil {
		t.Error("an event name with a line break was written")
	}
	if err := e.Encode(Event{ID: "a\rb"}); err == nil {
		t.Error("an id with a line break was written")
	}
}

// FuzzDecode: any byte stream decodes without panicking, and every event
// decoded survives an encode and a decode unchanged.
func FuzzDecode(f *testing.F) {
	f.Add([]byte("data: {\"type\":\"server.connected\",\"properties\":{}}\n\n"))
	f.Add([]byte("event: x\nid: 1\nretry: 10\ndata: a\ndata: b\r\n\r\n: c\n\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		d := NewDecoder(bytes.NewReader(b))
		for {
			ev, err := d.Next()
			if err != nil {
				return
			}
			var buf bytes.Buffer
			if err := NewEncoder(&buf).Encode(ev); err != nil {
				if strings.ContainsAny(ev.Event, "\r\n") || strings.ContainsAny(ev.ID, "\r\n\x00") {
					continue
				}
				t.Fatalf("encode %+v: %v", ev, err)
			}
			back, err := NewDecoder(&buf).Next()
			if err != nil {
				t.Fatalf("decode %q: %v", buf.String(), err)
			}
			if !same(ev, back) {
				t.Fatalf("round trip: %+v (data %q) became %+v (data %q)", ev, ev.Data, back, back.Data)
			}
		}
	})
}

// TestTooLongEventIsSkipped: an event with an over-long line, or with more
// data than MaxLine over many lines, is dropped with ErrLineTooLong (not
// kept in memory without bound), and the stream goes on after it.
func TestTooLongEventIsSkipped(t *testing.T) {
	// What passes MaxLine must not come back as a line of its own.
	long := append(bytes.Repeat([]byte("x"), MaxLine-len("data: ")), "Xdata: bogus"...)
	many := bytes.Repeat([]byte("data: "+strings.Repeat("y", 1<<20)+"\n"), MaxLine>>20+1)
	for name, ev := range map[string][]byte{
		"one long line":   append(append([]byte("id: 7\ndata: "), long...), "\n\n"...),
		"many data lines": append(many, '\n'),
	} {
		t.Run(name, func(t *testing.T) {
			in := io.MultiReader(strings.NewReader("data: before\n\n"), bytes.NewReader(ev), strings.NewReader("data: after\n\n"))
			d := NewDecoder(in)
			if e, err := d.Next(); err != nil || string(e.Data) != "before" {
				t.Fatalf("first event %+v, %v", e, err)
			}
			if _, err := d.Next(); !errors.Is(err, ErrLineTooLong) {
				t.Fatalf("got %v, want ErrLineTooLong", err)
			}
			if e, err := d.Next(); err != nil || string(e.Data) != "after" {
				t.Fatalf("the event after it: %+v, %v", e, err)
			}
			if _, err := d.Next(); err != io.EOF {
				t.Fatalf("got %v, want io.EOF", err)
			}
		})
	}
}
