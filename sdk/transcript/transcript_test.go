package transcript

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const hdr = `{"type":"transcript_start","provider":"acp","protocol":"acp/1","version":"0.16.2","scenario":"s","metadata":{"source":"recorded","agentVersion":"0.16.2","model":"scripted","capturedAt":"2026-11-30T10:21:57Z"}}`

// recorded is a recorded header with metadata.
func recorded(version, meta string) string {
	return `{"type":"transcript_start","provider":"acp","protocol":"acp/1","version":"` + version + `","scenario":"s","metadata":{"source":"recorded"` + meta + `}}`
}

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
		// Raw text: only sent, instead of a frame, on one line.
		{hdr + "\n" + `{"type":"expect_outbound","raw":"x"}`, "line 2: expect_outbound has raw text: only an emit_inbound entry sends some"},
		{hdr + "\n" + `{"type":"emit_inbound","frame":{},"raw":"x"}`, "line 2: emit_inbound has both a frame and raw text: give one"},
		{hdr + "\n" + `{"type":"emit_inbound","raw":"a\nb"}`, "line 2: emit_inbound raw text has a newline"},
		{`{"type":"transcript_start","provider":"p","protocol":"x","scenario":""}`, `header has no "scenario"`},
		// A recorded transcript says what it was recorded from.
		{recorded("", `,"model":"m","capturedAt":"2026-11-30T10:21:57Z"`), `line 1: a recorded transcript's header has no "version"`},
		{recorded("1", `,"agentVersion":"0.16.2","model":"m","capturedAt":"2026-11-30T10:21:57Z"`), `has "version" "1" but metadata.agentVersion 0.16.2`},
		{recorded("1", `,"capturedAt":"2026-11-30T10:21:57Z"`), "line 1: a recorded transcript's header has no metadata.model"},
		{recorded("1", `,"model":"","capturedAt":"2026-11-30T10:21:57Z"`), "has no metadata.model"},
		{recorded("1", `,"model":"m"`), "line 1: a recorded transcript's header has no metadata.capturedAt"},
		{recorded("1", `,"model":"m","capturedAt":"yesterday"`), `metadata.capturedAt "yesterday" is not an RFC 3339 time`},
		// How a process ends.
		{hdr + "\n" + `{"type":"runtime_exit","status":"error","code":256}`, "line 2: runtime_exit: code 256 is not an exit code"},
		{hdr + "\n" + `{"type":"runtime_exit","status":"error","code":-1}`, "code -1 is not an exit code"},
		{hdr + "\n" + `{"type":"runtime_exit","status":"error","signal":"SIGSEGV"}`, `line 2: runtime_exit: signal must be one of SIGKILL, SIGTERM, SIGINT, SIGHUP, got "SIGSEGV"`},
		{hdr + "\n" + `{"type":"runtime_exit","status":"error","signal":"SIGKILL","code":137}`, "give code or signal, not both"},
		{hdr + "\n" + `{"type":"runtime_exit","status":"error","closeStdout":true}`, `closeStdout is a process that lives on after closing stdout: wait must be`},
		{hdr + "\n" + `{"type":"runtime_exit","status":"success","closeStdout":true,"wait":"now"}`, `wait must be "stdin_close" or "signal"`},
		{hdr + "\n" + `{"type":"runtime_exit","status":"error","partial":"{\"a\":\n"}`, "partial is a frame cut short: it has no newline"},
		// Repeat: a frame sent, or stderr written, that many times.
		{hdr + "\n" + `{"type":"emit_inbound","raw":"x","repeat":-1}`, "line 2: repeat is negative (-1)"},
		{hdr + "\n" + `{"type":"expect_outbound","frame":{},"repeat":2}`, "line 2: expect_outbound has repeat: only an emit_inbound entry (its frame) or a runtime_exit (its stderr) repeats"},
		{hdr + "\n" + `{"type":"runtime_exit","status":"error","repeat":2}`, "line 2: runtime_exit has repeat but no stderr"},
	} {
		_, err := Decode(strings.NewReader(tc.in))
		if err == nil || !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Decode(%q) = %v, want an ErrFormat naming %q", tc.in, err, tc.want)
		}
	}
}

func TestEncodeDecodeRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	enc, err := NewEncoder(&buf, Header{Provider: "acp", Protocol: "acp/1", Version: "0.16.2", Scenario: "s",
		Metadata: map[string]any{"source": SourceRecorded, "model": "scripted", "capturedAt": "2026-11-30T10:21:57Z"}})
	if err != nil {
		t.Fatal(err)
	}
	content := "a <b> & c\n"
	two := 2
	want := []Entry{
		{Type: TypeExpectOutbound, Label: "x", Frame: []byte(`{"id":1,"method":"m"}`)},
		{Type: TypeEmitInbound, Frame: []byte(`{"id":1,"result":"<workspace>/f"}`), AfterMs: 5},
		{Type: TypeEmitInbound, Label: "junk", Raw: `not JSON {"`},
		{Type: TypeWorkspace, Op: OpWrite, Path: "dir/f.txt", Content: &content},
		{Type: TypeRuntimeExit, Status: ExitError, Code: &two, Stderr: "fatal <x>\n", Partial: `{"type":"res`, CloseStdout: true, Wait: WaitSignal},
		{Type: TypeRuntimeExit, Status: ExitSuccess, Signal: "SIGKILL"},
	}
	for _, e := range want {
		if err := enc.Encode(e); err != nil {
			t.Fatal(err)
		}
	}
	tr, err := Decode(&buf)
	if err != nil {
		t.Fatal(err)
	}
	for i := range want {
		want[i].Line = i + 2
	}
	if tr.Header.Source() != SourceRecorded {
		t.Errorf("source %q", tr.Header.Source())
	}
	if diff := cmp.Diff(want, tr.Entries); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
}

// A runtime_exit's exit code: its own, or the status's.
func TestExitCode(t *testing.T) {
	zero, three := 0, 3
	got := map[string]int{}
	for name, e := range map[string]Entry{
		"success":      {Status: ExitSuccess},
		"error":        {Status: ExitError},
		"cancelled":    {Status: ExitCancelled},
		"error code 3": {Status: ExitError, Code: &three},
		"error code 0": {Status: ExitError, Code: &zero},
	} {
		got[name] = e.ExitCode()
	}
	want := map[string]int{"success": 0, "error": 1, "cancelled": 130, "error code 3": 3, "error code 0": 0}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("exit codes (-want +got):\n%s", diff)
	}
}

// A transcript is played by the plugin it names: the header's provider and
// protocol are the plugin's Describe name and wire protocol, exactly.
func TestCheckDescription(t *testing.T) {
	h := Header{Provider: "acp", Protocol: "acp/1"}
	if err := h.CheckDescription("acp", "acp/1"); err != nil {
		t.Errorf("the same plugin: %v", err)
	}
	for _, d := range [][2]string{{"codex", "acp/1"}, {"acp", "acp/2"}, {"acp", "acp/1 json-rpc"}, {"", ""}} {
		err := h.CheckDescription(d[0], d[1])
		want := `the transcript is of provider "acp", protocol "acp/1"; the plugin is "` + d[0] + `", protocol "` + d[1] + `"`
		if err == nil || err.Error() != want {
			t.Errorf("CheckDescription(%q, %q) = %v, want %q", d[0], d[1], err, want)
		}
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
	f.Add([]byte(hdr + "\n" + `{"type":"emit_inbound","raw":"not JSON {"}`))
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

// A transcript is of an HTTP provider when one of its frames is an HTTP
// request or response, or a line such a server prints on stdout (one that
// dies before it listens has nothing else); a stdio provider's frames,
// whatever their keys, are not.
func TestIsHTTP(t *testing.T) {
	head := `{"type":"transcript_start","provider":"p","protocol":"x","version":"1","scenario":"s","metadata":{"source":"authored"}}` + "\n"
	for _, tc := range []struct {
		entry string
		want  bool
	}{
		{`{"type":"expect_outbound","frame":{"http":"request","method":"GET","path":"/"}}`, true},
		{`{"type":"emit_inbound","frame":{"http":"response","status":200}}`, true},
		{`{"type":"emit_inbound","frame":{"stdout":"listening on 127.0.0.1:1"}}`, true},
		{`{"type":"emit_inbound","frame":{"stdout":"x","type":"log"}}`, false},
		{`{"type":"emit_inbound","frame":{"jsonrpc":"2.0","method":"m"}}`, false},
		{`{"type":"runtime_exit","status":"error","wait":"now"}`, false},
	} {
		tr, err := Decode(strings.NewReader(head + tc.entry + "\n"))
		if err != nil {
			t.Fatalf("%s: %v", tc.entry, err)
		}
		if got := tr.IsHTTP(); got != tc.want {
			t.Errorf("%s: IsHTTP %v, want %v", tc.entry, got, tc.want)
		}
	}
}
