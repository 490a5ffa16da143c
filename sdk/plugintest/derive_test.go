package plugintest

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-run/baton/sdk/transcript"
)

// writeTranscript writes lines (a header first) to a temporary file.
func writeTranscript(t *testing.T, lines ...string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "simple.ndjson")
	if err := os.WriteFile(f, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

// entries decodes a made transcript and lists its entries as their
// types, labels and frames (or raw text), and its header's scenario.
func entries(t *testing.T, made func() ([]byte, error)) (string, []string) {
	t.Helper()
	b, err := made()
	if err != nil {
		t.Fatal(err)
	}
	tr, err := transcript.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("the made transcript does not decode: %v\n%s", err, b)
	}
	if tr.Header.Source() != transcript.SourceAuthored {
		t.Errorf("source %q, want authored", tr.Header.Source())
	}
	var out []string
	for _, e := range tr.Entries {
		var parts []string
		for _, p := range []string{e.Type, e.Label, string(e.Frame), e.Raw, string(e.Status)} {
			if p != "" {
				parts = append(parts, p)
			}
		}
		out = append(out, strings.Join(parts, " "))
	}
	return tr.Header.Scenario, out
}

const stdioSimple = `{"type":"transcript_start","provider":"p","protocol":"x","version":"1","scenario":"simple","metadata":{"source":"recorded","model":"m","capturedAt":"2026-11-30T10:21:57Z"}}
{"type":"expect_outbound","label":"init","frame":{"id":0,"method":"initialize"}}
{"type":"emit_inbound","label":"init.result","frame":{"id":0,"result":{}}}
{"type":"expect_outbound","label":"prompt","frame":{"id":1,"method":"prompt","params":{"text":"Say \"hi\""}}}
{"type":"emit_inbound","label":"chunk","frame":{"method":"chunk","params":{"text":"Hi"}}}
{"type":"emit_inbound","label":"prompt.result","frame":{"id":1,"result":{"stop":"end"}}}
{"type":"runtime_exit","status":"success"}`

// The crash is cut after the turn's first inbound frame: the first after
// the request that carries the input; malformed frames go in there.
func TestDerivedTranscripts(t *testing.T) {
	f := writeTranscript(t, strings.Split(stdioSimple, "\n")...)
	sc, got := entries(t, func() ([]byte, error) { return CrashTranscript(f, `Say "hi"`) })
	want := []string{
		`expect_outbound init {"id":0,"method":"initialize"}`,
		`emit_inbound init.result {"id":0,"result":{}}`,
		`expect_outbound prompt {"id":1,"method":"prompt","params":{"text":"Say \"hi\""}}`,
		`emit_inbound chunk {"method":"chunk","params":{"text":"Hi"}}`,
		`runtime_exit error`,
	}
	if diff := cmp.Diff(want, got); diff != "" || sc != string(CrashMidTurn) {
		t.Errorf("crash transcript %s (-want +got):\n%s", sc, diff)
	}
	sc, got = entries(t, func() ([]byte, error) { return MalformedTranscript(f, `Say "hi"`) })
	want = []string{
		`expect_outbound init {"id":0,"method":"initialize"}`,
		`emit_inbound init.result {"id":0,"result":{}}`,
		`expect_outbound prompt {"id":1,"method":"prompt","params":{"text":"Say \"hi\""}}`,
		`emit_inbound chunk {"method":"chunk","params":{"text":"Hi"}}`,
		`emit_inbound conformance: not JSON ` + NotJSON,
		`emit_inbound conformance: wrong shape ` + WrongShape,
		`emit_inbound prompt.result {"id":1,"result":{"stop":"end"}}`,
		`runtime_exit success`,
	}
	if diff := cmp.Diff(want, got); diff != "" || sc != string(MalformedFrames) {
		t.Errorf("malformed transcript %s (-want +got):\n%s", sc, diff)
	}
	for _, in := range []string{"Say hello", "Say \"hi\" twice"} {
		if _, err := CrashTranscript(f, in); err == nil || !strings.Contains(err.Error(), "no expect_outbound frame carries the turn's input") {
			t.Errorf("crash of a turn no frame carries: %v", err)
		}
	}
	if _, err := CrashTranscript(writeTranscript(t, strings.Split(stdioSimple, "\n")[:4]...), `Say "hi"`); err == nil ||
		!strings.Contains(err.Error(), `no inbound frame after the turn's request (entry 3 (line 4, expect_outbound "prompt"))`) {
		t.Errorf("crash of a turn with no inbound frame: %v", err)
	}
	if _, err := CrashTranscript(filepath.Join(t.TempDir(), "none.ndjson"), "x"); err == nil {
		t.Error("crash of a transcript that is not there: no error")
	}
}

// For an HTTP provider the cut is after the response to the turn's
// request (events before it stay), and the malformed frames are events.
func TestDerivedHTTPTranscripts(t *testing.T) {
	f := writeTranscript(t,
		`{"type":"transcript_start","provider":"p","protocol":"http","version":"1","scenario":"simple","metadata":{"source":"authored"}}`,
		`{"type":"expect_outbound","label":"events","frame":{"http":"request","method":"GET","path":"/event"}}`,
		`{"type":"emit_inbound","label":"stream","frame":{"http":"response","status":200,"stream":true}}`,
		`{"type":"expect_outbound","label":"prompt","frame":{"http":"request","method":"POST","path":"/prompt","body":{"text":"hello"}}}`,
		`{"type":"emit_inbound","label":"busy","frame":{"sse":{"type":"busy"}}}`,
		`{"type":"emit_inbound","label":"204","frame":{"http":"response","status":204}}`,
		`{"type":"emit_inbound","label":"idle","frame":{"sse":{"type":"idle"}}}`,
		`{"type":"runtime_exit","status":"success"}`)
	_, got := entries(t, func() ([]byte, error) { return CrashTranscript(f, "hello") })
	want := []string{
		`expect_outbound events {"http":"request","method":"GET","path":"/event"}`,
		`emit_inbound stream {"http":"response","status":200,"stream":true}`,
		`expect_outbound prompt {"http":"request","method":"POST","path":"/prompt","body":{"text":"hello"}}`,
		`emit_inbound busy {"sse":{"type":"busy"}}`,
		`emit_inbound 204 {"http":"response","status":204}`,
		`runtime_exit error`,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("crash transcript (-want +got):\n%s", diff)
	}
	_, got = entries(t, func() ([]byte, error) { return MalformedTranscript(f, "hello") })
	wrong, _ := json.Marshal(map[string]json.RawMessage{"sse": json.RawMessage(WrongShape)})
	want = append(want[:5:5], `emit_inbound conformance: not JSON `+NotJSON, `emit_inbound conformance: wrong shape `+string(wrong),
		`emit_inbound idle {"sse":{"type":"idle"}}`, `runtime_exit success`)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("malformed transcript (-want +got):\n%s", diff)
	}
}
