// Package transcript is the replay transcript format: one NDJSON file per
// (scenario, provider). The first line is a header; each following line is
// an entry the replay peer plays in order. Frames are the provider's own
// wire frames, kept raw; a provider that is an HTTP server has frames for
// its requests, responses, event-stream events and stdout lines (see
// HTTPFrame).
package transcript

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"

	"github.com/baton-run/baton/sdk/ndjson"
)

// Entry types.
const (
	TypeStart          = "transcript_start"
	TypeExpectOutbound = "expect_outbound"
	TypeEmitInbound    = "emit_inbound"
	TypeRuntimeExit    = "runtime_exit"
	TypeWorkspace      = "workspace"
)

// Sources of a transcript.
const (
	SourceRecorded = "recorded" // captured from a real provider binary
	SourceAuthored = "authored" // written by hand
)

// Header is the first line.
type Header struct {
	Type     string         `json:"type"`
	Provider string         `json:"provider"`
	Protocol string         `json:"protocol"`
	Version  string         `json:"version"`
	Scenario string         `json:"scenario"`
	Metadata map[string]any `json:"metadata"`
}

// Source says where the frames came from (metadata.source).
func (h Header) Source() string {
	s, _ := h.Metadata["source"].(string)
	return s
}

// Entry is one step. Which fields are set depends on Type.
type Entry struct {
	Type  string          `json:"type"`
	Label string          `json:"label,omitempty"`
	Frame json.RawMessage `json:"frame,omitempty"`
	// AfterMs delays an emit_inbound entry.
	AfterMs int `json:"afterMs,omitempty"`

	// runtime_exit
	Status string `json:"status,omitempty"`
	Error  any    `json:"error,omitempty"`
	// Wait is when a runtime_exit happens: "stdin_close" (after the client
	// closes the provider's stdin, the default for status success), "now"
	// (the default for error and cancelled) or "signal" (when the client
	// stops the process with SIGTERM or SIGINT: a provider interrupted by
	// ending it).
	Wait string `json:"wait,omitempty"`

	// workspace
	Op      string  `json:"op,omitempty"`
	Path    string  `json:"path,omitempty"`
	Content *string `json:"content,omitempty"`
	To      string  `json:"to,omitempty"`

	// Line is the entry's line in its file (not encoded).
	Line int `json:"-"`
}

// Exit statuses.
const (
	ExitSuccess   = "success"
	ExitError     = "error"
	ExitCancelled = "cancelled"
)

// Workspace ops.
const (
	OpWrite  = "write"
	OpDelete = "delete"
	OpRename = "rename"
)

// Wait values of runtime_exit.
const (
	WaitStdinClose = "stdin_close"
	WaitNow        = "now"
	WaitSignal     = "signal"
)

// ExitWait is the effective Wait of a runtime_exit entry.
func (e Entry) ExitWait() string {
	if e.Wait != "" {
		return e.Wait
	}
	if e.Status == ExitSuccess {
		return WaitStdinClose
	}
	return WaitNow
}

// Name is how errors name the entry: its number, line and label.
func (e Entry) Name(index int) string {
	s := fmt.Sprintf("entry %d (line %d, %s", index+1, e.Line, e.Type)
	if e.Label != "" {
		s += fmt.Sprintf(" %q", e.Label)
	}
	return s + ")"
}

// Transcript is a decoded file.
type Transcript struct {
	Header  Header
	Entries []Entry
}

// InvocationFrame is the outbound frame a process's arguments make,
// {"argv": [...]}: the first frame of a provider the client starts with
// arguments of its own.
func InvocationFrame(args []string) []byte {
	if args == nil {
		args = []string{}
	}
	b, _ := json.Marshal(struct {
		Argv []string `json:"argv"`
	}{args}) // strings always encode
	return b
}

// Invoked says whether the provider's processes are checked on their
// arguments: the first entry after the workspace files expects an
// invocation frame ({"argv": [...]}), so the replay peer must be started
// with "--" after its own flags.
func (t *Transcript) Invoked() bool {
	for _, e := range t.Entries {
		if e.Type == TypeWorkspace {
			continue // the files the recording started from come first
		}
		if e.Type != TypeExpectOutbound {
			return false
		}
		var f struct {
			Argv json.RawMessage `json:"argv"`
		}
		return json.Unmarshal(e.Frame, &f) == nil && f.Argv != nil
	}
	return false
}

// ErrFormat is wrapped by every decoding error.
var ErrFormat = errors.New("bad transcript")

func lineErr(line int, format string, args ...any) error {
	return fmt.Errorf("%w: line %d: %s", ErrFormat, line, fmt.Sprintf(format, args...))
}

// ReadFile decodes a transcript file.
func ReadFile(name string) (*Transcript, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, fmt.Errorf("read transcript: %w", err)
	}
	defer f.Close()
	t, err := Decode(f)
	if err != nil {
		return nil, fmt.Errorf("read transcript %s: %w", name, err)
	}
	return t, nil
}

// Decode reads a transcript and checks every entry. Errors name the line
// and what is wrong with it.
func Decode(r io.Reader) (*Transcript, error) {
	nr := ndjson.NewReader(r)
	t := &Transcript{}
	first := true
	for {
		line, err := nr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrFormat, err)
		}
		n := nr.Line()
		if first {
			first = false
			if err := decodeHeader(line, n, &t.Header); err != nil {
				return nil, err
			}
			continue
		}
		e, err := decodeEntry(line, n)
		if err != nil {
			return nil, err
		}
		t.Entries = append(t.Entries, e)
	}
	if first {
		return nil, fmt.Errorf("%w: empty file: the first line must be a %s header", ErrFormat, TypeStart)
	}
	return t, nil
}

func strictUnmarshal(line []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(line))
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("more than one JSON value on the line")
	}
	return nil
}

func decodeHeader(line []byte, n int, h *Header) error {
	if err := strictUnmarshal(line, h); err != nil {
		return lineErr(n, "bad JSON in header: %v", err)
	}
	if h.Type != TypeStart {
		return lineErr(n, "the first line must be a %s header, got type %q", TypeStart, h.Type)
	}
	for _, f := range []struct{ name, v string }{{"provider", h.Provider}, {"protocol", h.Protocol}, {"scenario", h.Scenario}} {
		if f.v == "" {
			return lineErr(n, "header has no %q", f.name)
		}
	}
	switch h.Source() {
	case SourceRecorded, SourceAuthored:
	default:
		return lineErr(n, "header metadata.source must be %q or %q, got %q", SourceRecorded, SourceAuthored, h.Source())
	}
	return nil
}

func decodeEntry(line []byte, n int) (Entry, error) {
	var e Entry
	if err := strictUnmarshal(line, &e); err != nil {
		return e, lineErr(n, "bad JSON: %v", err)
	}
	e.Line = n
	switch e.Type {
	case TypeExpectOutbound, TypeEmitInbound:
		if len(e.Frame) == 0 || string(e.Frame) == "null" {
			return e, lineErr(n, "%s has no frame", e.Type)
		}
		if e.AfterMs < 0 {
			return e, lineErr(n, "afterMs is negative (%d)", e.AfterMs)
		}
	case TypeRuntimeExit:
		switch e.Status {
		case ExitSuccess, ExitError, ExitCancelled:
		default:
			return e, lineErr(n, "runtime_exit status must be success, error or cancelled, got %q", e.Status)
		}
		switch e.Wait {
		case "", WaitStdinClose, WaitNow, WaitSignal:
		default:
			return e, lineErr(n, "runtime_exit wait must be %q, %q or %q, got %q", WaitStdinClose, WaitNow, WaitSignal, e.Wait)
		}
	case TypeWorkspace:
		if err := checkRelPath(e.Path); err != nil {
			return e, lineErr(n, "workspace path: %v", err)
		}
		switch e.Op {
		case OpWrite:
			if e.Content == nil {
				return e, lineErr(n, "workspace write of %q has no content", e.Path)
			}
		case OpDelete:
		case OpRename:
			if err := checkRelPath(e.To); err != nil {
				return e, lineErr(n, "workspace rename target: %v", err)
			}
		default:
			return e, lineErr(n, "workspace op must be write, delete or rename, got %q", e.Op)
		}
	case TypeStart:
		return e, lineErr(n, "a second %s header", TypeStart)
	case "":
		return e, lineErr(n, "entry has no type")
	default:
		return e, lineErr(n, "unknown entry type %q", e.Type)
	}
	return e, nil
}

// checkRelPath accepts a clean relative path inside the workspace.
func checkRelPath(p string) error {
	switch {
	case p == "":
		return errors.New("empty")
	case strings.HasPrefix(p, "/"):
		return fmt.Errorf("%q is absolute", p)
	case path.Clean(p) != p || p == "." || p == ".." || strings.HasPrefix(p, "../"):
		return fmt.Errorf("%q is not a clean path inside the workspace", p)
	}
	return nil
}

// Encoder writes a transcript a line at a time (the recorder uses it).
type Encoder struct {
	w *ndjson.Writer
}

// NewEncoder writes the header and returns an encoder for the entries.
func NewEncoder(w io.Writer, h Header) (*Encoder, error) {
	h.Type = TypeStart
	e := &Encoder{w: ndjson.NewWriter(w)}
	return e, e.write(h)
}

// NewEntryEncoder continues a transcript whose header is already written.
func NewEntryEncoder(w io.Writer) *Encoder { return &Encoder{w: ndjson.NewWriter(w)} }

// Encode writes one entry.
func (e *Encoder) Encode(en Entry) error { return e.write(en) }

func (e *Encoder) write(v any) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return err
	}
	return e.w.Write(bytes.TrimRight(buf.Bytes(), "\n"))
}
