// Package ndjson reads and writes newline-delimited JSON frames, the framing
// most provider processes speak on stdio. Lines of many megabytes (file
// contents, diffs) are normal; only MaxLine bounds them.
package ndjson

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"sync"
)

// DefaultMaxLine bounds one frame. Providers put whole files and diffs into
// single frames, so this is generous; a longer line is an error, not a hang.
const DefaultMaxLine = 64 << 20

// ErrLineTooLong is returned for a line longer than the reader's limit
// (as a *LineTooLongError).
var ErrLineTooLong = errors.New("ndjson: line too long")

// HeadBytes is how much of a line too long a LineTooLongError keeps: what
// a report quotes of it, so that a user sees what the provider printed.
const HeadBytes = 256

// LineTooLongError is a line longer than the reader's limit, which was
// skipped. It is ErrLineTooLong for errors.Is.
type LineTooLongError struct {
	Line  int    // its number, from 1
	Len   int64  // its length in bytes, without its ending
	Limit int    // the reader's limit
	Head  []byte // its first bytes, at most HeadBytes
}

func (e *LineTooLongError) Error() string {
	cut := ""
	if int64(len(e.Head)) < e.Len {
		cut = "…"
	}
	return fmt.Sprintf("line %d: %v: %d bytes, over the limit of %d: %q%s", e.Line, ErrLineTooLong, e.Len, e.Limit, e.Head, cut)
}

// Unwrap makes the error ErrLineTooLong.
func (e *LineTooLongError) Unwrap() error { return ErrLineTooLong }

// Reader reads lines. Blank lines are skipped; a trailing \r is removed.
type Reader struct {
	r       *bufio.Reader
	maxLine int
	line    int
}

// NewReader returns a Reader with DefaultMaxLine.
func NewReader(r io.Reader) *Reader { return NewReaderSize(r, DefaultMaxLine) }

// NewReaderSize returns a Reader whose lines may be up to maxLine bytes.
func NewReaderSize(r io.Reader, maxLine int) *Reader {
	return &Reader{r: bufio.NewReaderSize(r, 64<<10), maxLine: maxLine}
}

// Line is the number of the line last returned, from 1.
func (r *Reader) Line() int { return r.line }

// Next returns the next non-blank line without its line ending (the
// "\n" and the "\r"s before it). The slice is the caller's. At the end of
// input it returns io.EOF; a last line without a newline is still returned
// first. A line longer than the limit, not counting a "\n" or "\r\n"
// ending, is skipped and reported with a *LineTooLongError (its length and
// its first bytes); the next call reads on after it.
func (r *Reader) Next() ([]byte, error) {
	for {
		var buf []byte
		for {
			chunk, err := r.r.ReadSlice('\n')
			if r.tooLong(len(buf)+len(chunk), chunk, err) {
				r.line++
				return nil, r.skipLine(buf, chunk, err)
			}
			buf = append(buf, chunk...)
			if err == bufio.ErrBufferFull {
				continue
			}
			if err != nil && err != io.EOF {
				return nil, err
			}
			if len(buf) == 0 && err == io.EOF {
				return nil, io.EOF
			}
			break
		}
		r.line++
		buf = bytes.TrimRight(buf, "\r\n")
		if len(bytes.TrimSpace(buf)) == 0 {
			continue
		}
		return buf, nil
	}
}

// tooLong says whether a line of which n bytes are read, the last of them
// chunk (as ReadSlice returned it, with err), is longer than the limit
// without its ending. While the line goes on, its last byte may be the
// "\r" of a "\r\n" ending.
func (r *Reader) tooLong(n int, chunk []byte, err error) bool {
	switch {
	case err == bufio.ErrBufferFull:
		return n-1 > r.maxLine
	case bytes.HasSuffix(chunk, []byte("\r\n")):
		return n-2 > r.maxLine
	case bytes.HasSuffix(chunk, []byte("\n")):
		return n-1 > r.maxLine
	}
	return n > r.maxLine // the last line, with no ending
}

// skipLine skips the rest of an over-long line, of which buf and then
// chunk (as ReadSlice returned it, with err) are read, and says what it
// was: a *LineTooLongError, or the error that cut the read short.
func (r *Reader) skipLine(buf, chunk []byte, err error) error {
	e := &LineTooLongError{Line: r.line, Limit: r.maxLine}
	e.Head = append(e.Head, buf[:min(len(buf), HeadBytes)]...)
	e.Head = append(e.Head, chunk[:min(len(chunk), HeadBytes-len(e.Head))]...)
	n := int64(len(buf) + len(chunk))
	var end [2]byte // the last two bytes read, for the line's ending
	last := func(chunk []byte) {
		if len(chunk) >= 2 {
			end = [2]byte{chunk[len(chunk)-2], chunk[len(chunk)-1]}
		} else if len(chunk) == 1 {
			end = [2]byte{end[1], chunk[0]}
		}
	}
	if len(buf) > 0 {
		last(buf)
	}
	last(chunk)
	for err == bufio.ErrBufferFull {
		chunk, err = r.r.ReadSlice('\n')
		n += int64(len(chunk))
		last(chunk)
	}
	if err != nil && err != io.EOF {
		return err
	}
	if err == nil { // it ends with "\n", or "\r\n"
		n--
		if end[0] == '\r' {
			n--
		}
	}
	e.Len = n
	e.Head = e.Head[:min(int64(len(e.Head)), n)]
	return e
}

// Writer writes one frame per line; it is safe for concurrent use.
type Writer struct {
	mu sync.Mutex
	w  io.Writer
}

// NewWriter returns a Writer.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

// Write writes frame followed by a newline, in one write. A frame that
// contains a newline is refused: it would split into two frames.
func (w *Writer) Write(frame []byte) error {
	if bytes.IndexByte(frame, '\n') >= 0 {
		return errors.New("ndjson: frame contains a newline")
	}
	line := make([]byte, 0, len(frame)+1)
	line = append(line, frame...)
	line = append(line, '\n')
	w.mu.Lock()
	defer w.mu.Unlock()
	_, err := w.w.Write(line)
	return err
}
