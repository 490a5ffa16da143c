package transcript

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const hdr = `{"type":"transcript_start","provider":"acp","protocol":"acp/1","version":"1","scenario":"s","metadata":{"source":"recorded"}}`

func TestDecodeErrorsNameTheLine(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", "empty file"},
		{"\n\n", "empty file"},
		{`{"type":"expect_outbound","frame":{}}`, "line 1: the first line must be a transcript_start header"},
		{`not json`, "line 1: bad JSON in header"},
		{hdr + "\n" + `{"type":"expect_outbound"}`, "line 2: expect_outbound has no frame"},
		{hdr + "\n" + `{"type":"emit_inbound","frame":{},"afterMs":-1}`, "line 2: afterMs is negative"},
		{hdr + "\n" + `{"type":"nope"}`, `line 2: unknown entry type "nope"`},
		{hdr + "\n" + `{}`, "line 2: entry has no type"},
		{hdr + "\n" + hdr, "line 2: a second transcript_start header"},
		{hdr + "\n" + `{"type":"runtime_exit","status":"success","wait":"later"}`, "line 2: runtime_exit wait"},
		{hdr + "\n" + `{"type":"workspace","op":"write","path":"/etc/x","content":""}`, "is absolute"},
		{hdr + "\n" + `{"type":"workspace","op":"write","path":"a"}`, "has no content"},
		{hdr + "\n" + `{"type":"workspace","op":"rename","path":"a","to":"a/../../b"}`, "rename target"},
		{hdr + "\n" + `{"type":"workspace","op":"chmod","path":"a"}`, "workspace op must be"},
		{hdr + "\n" + `{"type":"emit_inbound","frame":{}} {}`, "line 2: bad JSON: more than one JSON value"},
		{`{"type":"transcript_start","provider":"p","protocol":"x","scenario":""}`, `header has no "scenario"`},
	} {
		_, err := Decode(strings.NewReader(tc.in))
		if err == nil || !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Decode(%q) = %v, want an ErrFormat naming %q", tc.in, err, tc.want)
		}
	}
}

func TestEncodeDecodeRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	enc, err := NewEncoder(&buf, Header{Provider: "acp", Protocol: "acp/1", Version: "1", Scenario: "s",
		Metadata: map[string]any{"source": SourceRecorded}})
	if err != nil {
		t.Fatal(err)
	}
	content := "a <b> & c\n"
	for _, e := range []Entry{
		{Type: TypeExpectOutbound, Label: "x", Frame: []byte(`{"id":1,"method":"m"}`)},
		{Type: TypeEmitInbound, Frame: []byte(`{"id":1,"result":"<workspace>/f"}`), AfterMs: 5},
		{Type: TypeWorkspace, Op: OpWrite, Path: "dir/f.txt", Content: &content},
		{Type: TypeRuntimeExit, Status: ExitSuccess},
	} {
		if err := enc.Encode(e); err != nil {
			t.Fatal(err)
		}
	}
	tr, err := Decode(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if tr.Header.Source() != SourceRecorded || len(tr.Entries) != 4 || *tr.Entries[2].Content != content ||
		tr.Entries[1].AfterMs != 5 || tr.Entries[3].ExitWait() != WaitStdinClose || tr.Entries[0].Line != 2 {
		t.Errorf("round trip lost something: %+v", tr)
	}
}

// Every transcript in the repository decodes.
func TestRepositoryTranscriptsDecode(t *testing.T) {
	files, _ := filepath.Glob("../../testdata/*/*.ndjson")
	if len(files) == 0 {
		t.Skip("no transcripts found")
	}
	for _, f := range files {
		if _, err := ReadFile(f); err != nil {
			t.Error(err)
		}
	}
}

// A transcript checks the provider's arguments when its first entry after
// the workspace files it starts from expects an invocation frame.
func TestInvoked(t *testing.T) {
	ws := `{"type":"workspace","op":"write","path":"README.md","content":"x"}`
	inv := `{"type":"expect_outbound","frame":{"argv":["-p"]}}`
	for _, c := range []struct {
		entries []string
		want    bool
	}{
		{[]string{inv}, true},
		{[]string{ws, ws, inv}, true},
		{[]string{ws, `{"type":"expect_outbound","frame":{"method":"initialize"}}`, inv}, false},
		{[]string{`{"type":"emit_inbound","frame":{"argv":[]}}`}, false},
		{[]string{ws}, false},
		{nil, false},
	} {
		tr, err := Decode(strings.NewReader(strings.Join(append([]string{hdr}, c.entries...), "\n")))
		if err != nil {
			t.Fatal(err)
		}
		if got := tr.Invoked(); got != c.want {
			t.Errorf("Invoked() of %v = %v, want %v", c.entries, got, c.want)
		}
	}
}

func FuzzDecode(f *testing.F) {
	f.Add([]byte(hdr + "\n" + `{"type":"emit_inbound","frame":{"a":1}}` + "\n"))
	f.Add([]byte(hdr + "\n" + `{"type":"workspace","op":"rename","path":"a","to":"b"}`))
	f.Add([]byte(hdr + "\n" + `{"type":"runtime_exit","status":"error","error":{"x":1}}`))
	if b, err := os.ReadFile("../../testdata/acp/simple.ndjson"); err == nil {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		tr, err := Decode(bytes.NewReader(b))
		if err != nil {
			if !errors.Is(err, ErrFormat) {
				t.Fatalf("error %v is not an ErrFormat", err)
			}
			return
		}
		// What decodes re-encodes to something that decodes the same way.
		var buf bytes.Buffer
		enc, err := NewEncoder(&buf, tr.Header)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range tr.Entries {
			if err := enc.Encode(e); err != nil {
				t.Fatal(err)
			}
		}
		again, err := Decode(&buf)
		if err != nil {
			t.Fatalf("re-encoded transcript does not decode: %v\n%s", err, buf.Bytes())
		}
		if len(again.Entries) != len(tr.Entries) {
			t.Fatalf("entries %d != %d", len(again.Entries), len(tr.Entries))
		}
	})
}

// BodyValue: a JSON body compacted, any other body a JSON string, none nil.
func TestBodyValue(t *testing.T) {
	for _, tc := range []struct{ body, want string }{
		{" {\"a\": [1, 2],\n \"b\": \"x y\"}\n", `{"a":[1,2],"b":"x y"}`},
		{`"text"`, `"text"`},
		{`{"a":1} {"b":2}`, `"{\"a\":1} {\"b\":2}"`},
		{`{"a":`, `"{\"a\":"`},
		{"plain <b>text</b>", `"plain \u003cb\u003etext\u003c/b\u003e"`},
		{" \n", ""},
	} {
		if got := string(BodyValue([]byte(tc.body))); got != tc.want {
			t.Errorf("BodyValue(%q) = %s, want %s", tc.body, got, tc.want)
		}
	}
}
