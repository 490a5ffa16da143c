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

// ErrLineTooLong is returned for a line longer than the reader's limit.
var ErrLineTooLong = errors.New("ndjson: line too long")

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
// ending, is skipped and reported with ErrLineTooLong; the next call reads
// on after it.
func (r *Reader) Next() ([]byte, error) {
	for {
		var buf []byte
		for {
			chunk, err := r.r.ReadSlice('\n')
			if r.tooLong(len(buf)+len(chunk), chunk, err) {
				r.line++
				if skipErr := r.discardLine(err); skipErr != nil {
					return nil, skipErr
				}
				return nil, fmt.Errorf("line %d: %w (limit %d bytes)", r.line, ErrLineTooLong, r.maxLine)
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

// discardLine skips the rest of an over-long line.
func (r *Reader) discardLine(err error) error {
	for err == bufio.ErrBufferFull {
		_, err = r.r.ReadSlice('\n')
	}
	if err != nil && err != io.EOF {
		return err
	}
	return nil
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
