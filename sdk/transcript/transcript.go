// Package transcript is the replay transcript format: one NDJSON file per
// (scenario, provider). The first line is a header; each following line is
// an entry the replay peer plays in order. Frames are the provider's own
// wire frames, kept raw; a provider that is an HTTP server has frames for
// its requests, responses, event-stream events and stdout lines (see
// HTTPFrame).
//
// The header:
//
//	{"type":"transcript_start","provider":"acp","protocol":"acp/1","version":"0.16.2","scenario":"simple",
//	 "metadata":{"source":"recorded","model":"...","capturedAt":"2026-11-30T10:21:57Z",...}}
//
// provider and protocol are the plugin's Describe name and wire protocol
// (CheckDescription); version is the provider's version. metadata.source is
// "recorded" (captured from a real provider binary) or "authored" (written
// by hand); a recorded transcript must also say which provider version
// (version, equal to metadata.agentVersion when that is given), which model
// (metadata.model) and when (metadata.capturedAt, RFC 3339) it was recorded
// from.
//
// The entries:
//
//	{"type":"expect_outbound","label":…,"frame":…}      the client's next frame
//	{"type":"emit_inbound","label":…,"frame":…,"afterMs":…}  a frame the provider sends
//	{"type":"emit_inbound","label":…,"raw":"…"}        bytes that are no frame (see Entry.Raw)
//	{"type":"workspace","op":"write|delete|rename","path":…,"content":…,"to":…}
//	{"type":"runtime_exit","status":"success|error|cancelled",…}  how the process ends
//
// An expect_outbound frame may come only after the emit_inbound entries
// before it were due: a client frame that arrives earlier is a mismatch
// ("sent too early"), as a frame that differs is. The emit_inbound entries
// after an expectation, up to one with an afterMs wait, are due at once
// when the client's frame is taken (the provider's answer to it); so a
// frame is early when the client sent it before the frame the transcript
// has the provider answer first, or during an afterMs wait. The frames of
// an HTTP provider's consecutive expect_outbound entries (no emit_inbound
// between them) are requests the client may send at once: they are
// matched by content, in any order.
//
// A runtime_exit says how the process ends, and so what a client sees of
// its end. All but status are optional:
//
//	{"type":"runtime_exit","status":"error",
//	 "wait":"now",              // when: "stdin_close", "now", "signal" or "kill" (see Entry.Wait)
//	 "partial":"{\"type\":\"res", // written on stdout with no newline: a last frame cut short
//	 "stderr":"fatal: ...\n",   // written on stderr; then the peer writes nothing else there
//	 "closeStdout":true,        // stdout closed, the process living on until wait says
//	 "code":2,                  // the exit code (default: 0 success, 1 error, 130 cancelled)
//	 "signal":"SIGKILL",        // or: death by this signal (SIGKILL, SIGTERM, SIGINT, SIGHUP)
//	 "error":"..."}             // what the failure was, for a reader of the transcript
//
// In that order: the partial frame, the stderr text, stdout closed, the
// wait, then the exit (or the signal).
//
// A provider that floods its output is written with "repeat": an
// emit_inbound entry with "repeat":N sends its frame (or raw text) N times
// back to back, and a runtime_exit with "repeat":N writes its stderr text
// N times; in each copy "<n>" stands for its number (1 to N), so the first
// and the last differ:
//
//	{"type":"emit_inbound","label":"garbage","raw":"garbage <n>","repeat":10000}
//	{"type":"runtime_exit","status":"error","stderr":"warning <n>\n","repeat":10000}
package transcript

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

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
	// Raw, on an emit_inbound entry instead of Frame, is text the provider
	// sends as it is, though it is no frame (not JSON): a line on stdout,
	// or for an HTTP provider an event's data on the newest event stream.
	// It has no newline. A malformed frame, for a test of how a client
	// takes one.
	Raw string `json:"raw,omitempty"`

	// runtime_exit
	Status ExitStatus `json:"status,omitempty"`
	Error  any        `json:"error,omitempty"`
	// Wait is when a runtime_exit happens: "stdin_close" (after the client
	// closes the provider's stdin, the default for status success), "now"
	// (the default for error and cancelled) or "signal" (when the client
	// stops the process with SIGTERM or SIGINT: a provider interrupted by
	// ending it) or "kill" (never by itself: it ignores its stdin closing,
	// SIGTERM and SIGINT, and ends only when SIGKILL kills it: a provider
	// that will not stop, which its client must end by force).
	Wait ExitWait `json:"wait,omitempty"`
	// Code is the process's exit code (nil: ExitCode's default for the
	// status).
	Code *int `json:"code,omitempty"`
	// Stderr is written on the process's stderr before it ends.
	Stderr string `json:"stderr,omitempty"`
	// Signal, when set, is the signal the process dies by instead of
	// exiting (one of Signals).
	Signal string `json:"signal,omitempty"`
	// Partial is written on stdout, with no newline, before the end: a
	// last frame cut short.
	Partial string `json:"partial,omitempty"`
	// CloseStdout closes the process's stdout before the wait: a process
	// that lives on after its output ended.
	CloseStdout bool `json:"closeStdout,omitempty"`

	// Repeat, on an emit_inbound entry, sends its frame Repeat times back
	// to back; on a runtime_exit, writes its stderr Repeat times (0: once).
	// "<n>" in each copy is its number, from 1 (see Copy).
	Repeat int `json:"repeat,omitempty"`

	// workspace
	Op      string  `json:"op,omitempty"`
	Path    string  `json:"path,omitempty"`
	Content *string `json:"content,omitempty"`
	To      string  `json:"to,omitempty"`

	// Line is the entry's line in its file (not encoded).
	Line int `json:"-"`
}

// ExitStatus is how a runtime_exit's process ends: the transcript's own
// vocabulary (a process's exit), not the sdk's ExitStatus (a session's end
// as a plugin reports it).
type ExitStatus string

// Exit statuses.
const (
	ExitSuccess   ExitStatus = "success"
	ExitError     ExitStatus = "error"
	ExitCancelled ExitStatus = "cancelled"
)

// Workspace ops.
const (
	OpWrite  = "write"
	OpDelete = "delete"
	OpRename = "rename"
)

// ExitWait is when a runtime_exit happens (Entry.Wait).
type ExitWait string

// Wait values of runtime_exit.
const (
	WaitStdinClose ExitWait = "stdin_close"
	WaitNow        ExitWait = "now"
	WaitSignal     ExitWait = "signal"
	WaitKill       ExitWait = "kill"
)

// Signals a runtime_exit may die by: those a process dies of without a
// core dump or a handler of its own.
var Signals = []string{"SIGKILL", "SIGTERM", "SIGINT", "SIGHUP"}

// RepeatN stands for a copy's number in a repeated entry's text.
const RepeatN = "<n>"

// Copies is how many times an entry's frame (emit_inbound) or stderr text
// (runtime_exit) is sent: Repeat, or once.
func (e Entry) Copies() int { return max(e.Repeat, 1) }

// Copy is copy k (from 1) of an entry's text: with Repeat set, "<n>" in
// it stands for k; without, text is as it is.
func (e Entry) Copy(text []byte, k int) []byte {
	if e.Repeat == 0 {
		return text
	}
	return bytes.ReplaceAll(text, []byte(RepeatN), []byte(strconv.Itoa(k)))
}

// ExitCode is the exit code of a runtime_exit entry that does not die by a
// signal: its Code, or 0 for success, 1 for error and 130 (interrupted)
// for cancelled.
func (e Entry) ExitCode() int {
	switch {
	case e.Code != nil:
		return *e.Code
	case e.Status == ExitError:
		return 1
	case e.Status == ExitCancelled:
		return 130
	}
	return 0
}

// ExitWait is the effective Wait of a runtime_exit entry.
func (e Entry) ExitWait() ExitWait {
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
	case SourceRecorded:
		if err := h.checkRecorded(); err != nil {
			return lineErr(n, "%v", err)
		}
	case SourceAuthored:
	default:
		return lineErr(n, "header metadata.source must be %q or %q, got %q", SourceRecorded, SourceAuthored, h.Source())
	}
	return nil
}

// checkRecorded checks that a recorded header says what it was recorded
// from: the provider's version, the model and the capture time.
func (h Header) checkRecorded() error {
	if h.Version == "" {
		return errors.New(`a recorded transcript's header has no "version" (the provider's version it was recorded from)`)
	}
	if v, ok := h.Metadata["agentVersion"]; ok && v != h.Version {
		return fmt.Errorf(`a recorded transcript's header has "version" %q but metadata.agentVersion %v: the version is the provider's`, h.Version, v)
	}
	if m, _ := h.Metadata["model"].(string); m == "" {
		return errors.New("a recorded transcript's header has no metadata.model (the model it was recorded with)")
	}
	_, err := h.CapturedAt()
	return err
}

// CapturedAt is when a recorded transcript was recorded
// (metadata.capturedAt): a replay that depends on the instants its frames
// carry (a limit's reset) sets its clock there.
func (h Header) CapturedAt() (time.Time, error) {
	at, _ := h.Metadata["capturedAt"].(string)
	if at == "" {
		return time.Time{}, errors.New("a recorded transcript's header has no metadata.capturedAt (when it was recorded)")
	}
	t, err := time.Parse(time.RFC3339, at)
	if err != nil {
		return time.Time{}, fmt.Errorf("a recorded transcript's metadata.capturedAt %q is not an RFC 3339 time", at)
	}
	return t, nil
}

// CheckDescription says whether the header was made for a plugin that
// describes itself with name and wireProtocol (its Describe answer): the
// header's provider and protocol must be exactly those.
func (h Header) CheckDescription(name, wireProtocol string) error {
	if h.Provider != name || h.Protocol != wireProtocol {
		return fmt.Errorf("the transcript is of provider %q, protocol %q; the plugin is %q, protocol %q",
			h.Provider, h.Protocol, name, wireProtocol)
	}
	return nil
}

func decodeEntry(line []byte, n int) (Entry, error) {
	var e Entry
	if err := strictUnmarshal(line, &e); err != nil {
		return e, lineErr(n, "bad JSON: %v", err)
	}
	e.Line = n
	if e.Repeat < 0 {
		return e, lineErr(n, "repeat is negative (%d)", e.Repeat)
	}
	switch {
	case e.Repeat > 0 && e.Type != TypeEmitInbound && e.Type != TypeRuntimeExit:
		return e, lineErr(n, "%s has repeat: only an emit_inbound entry (its frame) or a runtime_exit (its stderr) repeats", e.Type)
	case e.Repeat > 0 && e.Type == TypeRuntimeExit && e.Stderr == "":
		return e, lineErr(n, "runtime_exit has repeat but no stderr: repeat writes its stderr that many times")
	}
	switch e.Type {
	case TypeExpectOutbound, TypeEmitInbound:
		noFrame := len(e.Frame) == 0 || string(e.Frame) == "null"
		switch {
		case e.Raw != "" && e.Type == TypeExpectOutbound:
			return e, lineErr(n, "%s has raw text: only an emit_inbound entry sends some", e.Type)
		case e.Raw != "" && !noFrame:
			return e, lineErr(n, "%s has both a frame and raw text: give one", e.Type)
		case strings.Contains(e.Raw, "\n"):
			return e, lineErr(n, "%s raw text has a newline: it would be two lines", e.Type)
		case noFrame && e.Raw == "":
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
		case "", WaitStdinClose, WaitNow, WaitSignal, WaitKill:
		default:
			return e, lineErr(n, "runtime_exit wait must be %q, %q, %q or %q, got %q", WaitStdinClose, WaitNow, WaitSignal, WaitKill, e.Wait)
		}
		if err := checkExit(e); err != nil {
			return e, lineErr(n, "runtime_exit: %v", err)
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

// checkExit checks how a runtime_exit entry ends the process.
func checkExit(e Entry) error {
	if e.Code != nil && (*e.Code < 0 || *e.Code > 255) {
		return fmt.Errorf("code %d is not an exit code (0 to 255)", *e.Code)
	}
	if e.Signal != "" {
		if !slices.Contains(Signals, e.Signal) {
			return fmt.Errorf("signal must be one of %s, got %q", strings.Join(Signals, ", "), e.Signal)
		}
		if e.Code != nil {
			return errors.New("a process that dies by a signal has no exit code: give code or signal, not both")
		}
	}
	if e.CloseStdout && e.ExitWait() == WaitNow {
		return errors.New(`closeStdout is a process that lives on after closing stdout: wait must be "stdin_close" or "signal"`)
	}
	if strings.Contains(e.Partial, "\n") {
		return errors.New("partial is a frame cut short: it has no newline")
	}
	return nil
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
