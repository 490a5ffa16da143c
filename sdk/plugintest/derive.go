package plugintest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"

	"github.com/baton-run/baton/sdk/transcript"
)

// The malformed frames MalformedTranscript sends: a line that is not
// JSON, and JSON of a shape no provider frame has.
const (
	NotJSON    = `conformance: this line is not JSON {"`
	WrongShape = `["conformance","a frame of the wrong shape"]`
)

// CrashTranscript is the crash_mid_turn transcript made of a simple one
// (file) whose turn sends input: its entries up to the turn's first
// inbound frame, then a runtime_exit with an error: the provider crashing
// mid-turn. The turn's request is the first expect_outbound frame that
// carries input; its first inbound frame the first emit_inbound after it
// (for an HTTP provider, the response to the turn's request, so that the
// request is answered before the server dies).
func CrashTranscript(file, input string) ([]byte, error) {
	t, cut, err := turnCut(file, input)
	if err != nil {
		return nil, err
	}
	es := append([]transcript.Entry{}, t.Entries[:cut+1]...)
	es = append(es, transcript.Entry{Type: transcript.TypeRuntimeExit, Status: transcript.ExitError,
		Error: "conformance: the provider crashed mid-turn", Stderr: "conformance: the provider crashed mid-turn\n"})
	return encode(t, string(CrashMidTurn), file, es)
}

// MalformedTranscript is the malformed_frames transcript made of a simple
// one (file) whose turn sends input: after the turn's first inbound frame
// (see CrashTranscript) the provider sends a line that is not JSON
// (NotJSON) and a frame of the wrong shape (WrongShape), then the rest
// as it was. For an HTTP provider both are events on its event stream.
func MalformedTranscript(file, input string) ([]byte, error) {
	t, cut, err := turnCut(file, input)
	if err != nil {
		return nil, err
	}
	wrong := json.RawMessage(WrongShape)
	if t.IsHTTP() {
		b, _ := transcript.MarshalHTTPFrame(transcript.HTTPFrame{SSE: wrong}) // a raw message always encodes
		wrong = b
	}
	es := append([]transcript.Entry{}, t.Entries[:cut+1]...)
	es = append(es,
		transcript.Entry{Type: transcript.TypeEmitInbound, Label: "conformance: not JSON", Raw: NotJSON},
		transcript.Entry{Type: transcript.TypeEmitInbound, Label: "conformance: wrong shape", Frame: wrong})
	es = append(es, t.Entries[cut+1:]...)
	return encode(t, string(MalformedFrames), file, es)
}

// turnCut reads file and finds the entry of the turn's first inbound
// frame.
func turnCut(file, input string) (*transcript.Transcript, int, error) {
	t, err := transcript.ReadFile(file)
	if err != nil {
		return nil, 0, err
	}
	q, _ := json.Marshal(input) // a string always encodes
	needle := q[1 : len(q)-1]
	http := t.IsHTTP()
	turn := -1
	for i, e := range t.Entries {
		if turn < 0 {
			if e.Type == transcript.TypeExpectOutbound && bytes.Contains(e.Frame, needle) {
				turn = i
			}
			continue
		}
		if e.Type != transcript.TypeEmitInbound {
			continue
		}
		if http {
			if f, err := transcript.DecodeHTTPFrame(e.Frame); err != nil || f.Kind() != transcript.HTTPResponse {
				continue
			}
		}
		return t, i, nil
	}
	if turn < 0 {
		return nil, 0, fmt.Errorf("%s: no expect_outbound frame carries the turn's input %s", file, q)
	}
	return nil, 0, fmt.Errorf("%s: no inbound frame after the turn's request (%s)", file, t.Entries[turn].Name(turn))
}

// encode writes a transcript of entries es made from file's t, as an
// authored one of scenario.
func encode(t *transcript.Transcript, scenario, file string, es []transcript.Entry) ([]byte, error) {
	h := t.Header
	h.Scenario = scenario
	h.Metadata = maps.Clone(h.Metadata)
	if h.Metadata == nil {
		h.Metadata = map[string]any{}
	}
	h.Metadata["source"] = transcript.SourceAuthored
	h.Metadata["note"] = "made by plugintest from " + file
	var buf bytes.Buffer
	enc, err := transcript.NewEncoder(&buf, h)
	if err != nil {
		return nil, err
	}
	for _, e := range es {
		if err := enc.Encode(e); err != nil {
			return nil, err
		}
	}
	return buf.Bytes(), nil
}
