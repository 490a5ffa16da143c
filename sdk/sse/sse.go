// Package sse reads and writes server-sent event streams
// (text/event-stream): the framing of an HTTP response that carries a
// provider's events, as OpenCode's /event endpoint does.
//
// A stream is a sequence of events, each a run of "field: value" lines
// ended by a blank line. The decoder keeps the fields an event can carry
// (data, event, id, retry), joins multi-line data with "\n", skips comment
// lines (starting with ":"), and accepts LF, CRLF and CR line ends, as the
// HTML living standard describes.
package sse

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Event is one dispatched event.
type Event struct {
	// ID is the last "id" field seen (it carries over to later events, as
	// the standard's last event id does).
	ID string
	// Event is the "event" field ("" is the default type, "message").
	Event string
	// Data is the event's data lines joined with "\n".
	Data []byte
	// Retry is the "retry" field in milliseconds (0: none).
	Retry int
}

// MaxLine bounds one line of a stream, and an event's data; a longer one
// is an error rather than unbounded memory.
const MaxLine = 16 << 20

// keptLine bounds the line buffer a decoder keeps for the next line: a
// rare long line's is let go.
const keptLine = 64 << 10

// ErrLineTooLong is returned for a line over MaxLine bytes.
var ErrLineTooLong = errors.New("sse: line too long")

// Decoder reads events from a stream.
type Decoder struct {
	r      *bufio.Reader
	lastID string
	pendCR bool   // the last line ended in CR: a following LF belongs to it
	buf    []byte // the line being read, reused from line to line
}

// NewDecoder reads from r.
func NewDecoder(r io.Reader) *Decoder {
	return &Decoder{r: bufio.NewReaderSize(r, 64<<10)}
}

// line reads one line without its end; it is valid until the next call.
// io.EOF only when nothing was read. A line over MaxLine is read to its end
// and dropped: ErrLineTooLong.
func (d *Decoder) line() ([]byte, error) {
	buf := d.buf[:0]
	defer func() {
		if cap(buf) <= keptLine {
			d.buf = buf[:0]
		}
	}()
	long := false
	for {
		b, err := d.r.ReadByte()
		if err != nil {
			if err == io.EOF && long {
				return nil, ErrLineTooLong
			}
			if err == io.EOF && len(buf) > 0 {
				return buf, nil
			}
			return nil, err
		}
		if d.pendCR {
			d.pendCR = false
			if b == '\n' {
				continue
			}
		}
		switch b {
		case '\n', '\r':
			d.pendCR = b == '\r'
			if long {
				return nil, ErrLineTooLong
			}
			return buf, nil
		}
		if long {
			continue
		}
		if len(buf) >= MaxLine {
			long, buf = true, nil // a line this long is not kept either
			continue
		}
		buf = append(buf, b)
	}
}

// Next returns the next event. An event with no data field is not
// dispatched (as the standard says), so Next skips it. At the end of the
// stream it returns io.EOF; a last event not ended by a blank line is
// dropped, as a browser drops it.
//
// An event with a line over MaxLine, or more than MaxLine bytes of data,
// is read to its end and dropped: Next returns ErrLineTooLong, and the
// next call goes on with the event after it.
func (d *Decoder) Next() (Event, error) {
	var (
		data    bytes.Buffer
		hasData bool
		tooLong bool
		ev      Event
	)
	for {
		l, err := d.line()
		if errors.Is(err, ErrLineTooLong) {
			tooLong = true
			data = bytes.Buffer{}
			continue
		}
		if err != nil {
			if err == io.EOF && tooLong {
				return Event{}, fmt.Errorf("%w: an unfinished event at the end of the stream", ErrLineTooLong)
			}
			return Event{}, err
		}
		if len(l) == 0 { // dispatch
			if tooLong {
				return Event{}, fmt.Errorf("%w: an event over %d bytes was dropped", ErrLineTooLong, MaxLine)
			}
			if !hasData {
				ev = Event{}
				continue
			}
			ev.ID = d.lastID
			ev.Data = data.Bytes()
			return ev, nil
		}
		if l[0] == ':' {
			continue // comment (keep-alive)
		}
		field, value := l, []byte(nil)
		if i := bytes.IndexByte(l, ':'); i >= 0 {
			field, value = l[:i], l[i+1:]
			if len(value) > 0 && value[0] == ' ' {
				value = value[1:]
			}
		}
		switch string(field) {
		case "data":
			if tooLong {
				continue
			}
			if data.Len()+1+len(value) > MaxLine {
				tooLong = true
				data = bytes.Buffer{}
				continue
			}
			if hasData {
				data.WriteByte('\n')
			}
			data.Write(value)
			hasData = true
		case "event":
			ev.Event = string(value)
		case "id":
			if bytes.IndexByte(value, 0) < 0 {
				d.lastID = string(value)
			}
		case "retry":
			if n, err := strconv.Atoi(string(value)); err == nil && n >= 0 && isDigits(value) {
				ev.Retry = n
			}
		}
	}
}

func isDigits(b []byte) bool {
	for _, c := range b {
		if c < '0' || c > '9' {
			return false
		}
	}
	return len(b) > 0
}

// Encoder writes events.
type Encoder struct {
	w io.Writer
}

// NewEncoder writes to w.
func NewEncoder(w io.Writer) *Encoder { return &Encoder{w: w} }

// Encode writes one event: its event and id fields when set, one data
// line per line of Data, and the blank line that dispatches it. An id or
// event name with a line break cannot be written.
func (e *Encoder) Encode(ev Event) error {
	var b strings.Builder
	if ev.Event != "" {
		if strings.ContainsAny(ev.Event, "\r\n") {
			return fmt.Errorf("sse: event name %q has a line break", ev.Event)
		}
		b.WriteString("event: " + ev.Event + "\n")
	}
	if ev.ID != "" {
		if strings.ContainsAny(ev.ID, "\r\n\x00") {
			return fmt.Errorf("sse: id %q has a line break or NUL", ev.ID)
		}
		b.WriteString("id: " + ev.ID + "\n")
	}
	if ev.Retry > 0 {
		b.WriteString("retry: " + strconv.Itoa(ev.Retry) + "\n")
	}
	data := strings.ReplaceAll(strings.ReplaceAll(string(ev.Data), "\r\n", "\n"), "\r", "\n")
	for _, l := range strings.Split(data, "\n") {
		b.WriteString("data: " + l + "\n")
	}
	b.WriteString("\n")
	_, err := io.WriteString(e.w, b.String())
	return err
}
