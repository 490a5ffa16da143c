// Package framelog keeps a session's raw provider frames for diagnosis: a
// size-bounded log that rotates to one older file. Frames are evidence, not
// state: nothing reads them back to decide anything.
package framelog

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	fastjson "github.com/segmentio/encoding/json"

	_ "github.com/baton-run/baton/sdk/internal/jsoncpu" // segmentio's scalar routines
)

// DefaultMaxBytes is the size at which the log rotates. Two files are kept,
// so a session's raw frames use at most twice this on disk.
const DefaultMaxBytes = 8 << 20

// Direction says which way a frame went.
type Direction string

const (
	In     Direction = "in"     // from the provider
	Out    Direction = "out"    // to the provider
	Stderr Direction = "stderr" // the provider's stderr, a line at a time
)

var redacted = []byte("***")

// Redacted is b with the log's secrets (Redact) as ***: what a plugin may
// quote of a frame or a stderr line elsewhere (a log line, an exit
// report). b itself is not changed.
func (l *Log) Redacted(b []byte) []byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.redact(b)
}

func (l *Log) redact(b []byte) []byte {
	for _, s := range l.secrets {
		b = bytes.ReplaceAll(b, s, redacted)
	}
	return b
}

// Log numbers frames from 1 and, with a path, writes them to disk.
type Log struct {
	mu       sync.Mutex
	path     string
	maxBytes int64
	f        *os.File
	size     int64
	next     uint64
	now      func() time.Time
	secrets  [][]byte // written as *** (Redact)
	buf      []byte   // the record being written, its memory kept
}

// Redact keeps each secret out of the log: a frame's record shows *** in
// its place, whether the secret appears as is or JSON-escaped. Empty
// secrets are ignored. It applies to frames appended after it.
func (l *Log) Redact(secrets ...string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range secrets {
		if s == "" {
			continue
		}
		l.secrets = append(l.secrets, []byte(s))
		// As encoding/json escapes it, with and without its HTML escapes.
		for _, html := range []bool{true, false} {
			var b bytes.Buffer
			enc := json.NewEncoder(&b)
			enc.SetEscapeHTML(html)
			_ = enc.Encode(s)
			e := bytes.TrimSuffix(b.Bytes(), []byte("\n"))
			if e = e[1 : len(e)-1]; string(e) != s {
				l.secrets = append(l.secrets, e)
			}
		}
	}
}

// Open starts a log at path (empty: count frames only). An existing file
// is rotated first, so a resumed session's earlier frames are kept as .1.
func Open(path string, maxBytes int64) (*Log, error) {
	if maxBytes <= 0 {
		maxBytes = DefaultMaxBytes
	}
	l := &Log{path: path, maxBytes: maxBytes, next: 1, now: time.Now}
	if path == "" {
		return l, nil
	}
	if err := l.rotate(); err != nil {
		return nil, err
	}
	return l, nil
}

func (l *Log) rotate() error {
	if l.f != nil {
		if err := l.f.Close(); err != nil {
			return fmt.Errorf("close frame log: %w", err)
		}
		l.f = nil
	}
	if _, err := os.Stat(l.path); err == nil {
		if err := os.Rename(l.path, l.path+".1"); err != nil {
			return fmt.Errorf("rotate frame log: %w", err)
		}
	}
	f, err := os.OpenFile(l.path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("open frame log: %w", err)
	}
	l.f, l.size = f, 0
	return nil
}

type record struct {
	Index uint64          `json:"i"`
	Time  time.Time       `json:"t"`
	Dir   Direction       `json:"dir"`
	Frame json.RawMessage `json:"frame,omitempty"`
	Text  string          `json:"text,omitempty"`
}

// Append records a frame and returns its index. A write error is kept out
// of the caller's way: the frame still gets its index and the log stops
// writing (diagnostics must never break a session).
func (l *Log) Append(dir Direction, frame []byte) uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	i := l.next
	l.next++
	if l.f == nil {
		return i
	}
	line := appendLine(l.buf[:0], i, l.now(), dir, frame)
	if len(l.secrets) > 0 {
		line = l.redact(line)
	}
	line = append(line, '\n')
	if cap(line) <= 64<<10 {
		l.buf = line // kept for the next record, unless a frame made it large
	}
	if l.size+int64(len(line)) > l.maxBytes && l.size > 0 {
		if err := l.rotate(); err != nil {
			l.f = nil
			return i
		}
	}
	n, err := l.f.Write(line)
	l.size += int64(n)
	if err != nil {
		l.f.Close()
		l.f = nil
	}
	return i
}

// appendLine appends a frame's record to b, {"i":…,"t":…,"dir":…,"frame":…}
// with the frame as JSON when it is JSON, else {…,"text":…}: built by hand,
// one pass over the frame, as encoding/json would write the record type.
// A frame that is valid JSON on one line with no tab goes as it came (most
// do: providers write compact JSON); any other JSON is compacted.
func appendLine(b []byte, i uint64, t time.Time, dir Direction, frame []byte) []byte {
	b = append(b, `{"i":`...)
	b = strconv.AppendUint(b, i, 10)
	b = append(b, `,"t":"`...)
	b = t.UTC().AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","dir":`...)
	b = strconv.AppendQuote(b, string(dir)) // a Direction is a plain ASCII word
	mark := len(b)
	b = append(b, `,"frame":`...)
	if !bytes.ContainsAny(frame, "\t\r\n") && fastjson.Valid(frame) {
		b = append(b, frame...)
	} else {
		buf := bytes.NewBuffer(b)
		if err := json.Compact(buf, frame); err != nil {
			t, _ := json.Marshal(string(frame))
			b = append(append(b[:mark], `,"text":`...), t...)
		} else {
			b = buf.Bytes()
		}
	}
	return append(b, '}')
}

// Close closes the file.
func (l *Log) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f = nil
	return err
}
