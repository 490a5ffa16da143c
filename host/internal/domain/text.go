package domain

import (
	"encoding/json"
	"sync/atomic"
	"unsafe"
)

// Text is text that grows by appending, as a message does delta by delta.
// Appending n bytes costs O(n) amortized, whatever the length so far: a
// message of 100,000 deltas is built in linear time, not quadratic.
//
// Copies of a Text (a thread's clone, a published projection) share one
// buffer. Bytes once written to it never change, so any copy can be read
// from any goroutine. Only the copy whose end is the buffer's end appends
// in place (it claims the bytes after it with one atomic step); any other
// copy that appends first copies what it has into a buffer of its own. So
// a scratch copy of a thread appends without touching what readers of the
// published copy see, and a scratch that is dropped costs its successor at
// most one copy.
//
// The zero Text is empty.
type Text struct {
	buf *textBuf
	n   int // this copy's length: buf.b[:n]
}

// textBuf is a Text's storage. b is allocated at its full capacity; end is
// how much of it has been claimed by appends.
type textBuf struct {
	b   []byte
	end atomic.Int64
}

// NewText returns a Text holding s.
func NewText(s string) Text {
	var t Text
	t.Append(s)
	return t
}

// String returns the text. It does not copy: the bytes it views are never
// written again.
func (t Text) String() string {
	if t.n == 0 {
		return ""
	}
	return unsafe.String(&t.buf.b[0], t.n)
}

// Len is the text's length in bytes.
func (t Text) Len() int { return t.n }

// IsZero says whether the text is empty (json's omitzero uses it).
func (t Text) IsZero() bool { return t.n == 0 }

// Append adds s to the end of the text.
func (t *Text) Append(s string) {
	if s == "" {
		return
	}
	n := t.n + len(s)
	if t.buf != nil && n <= len(t.buf.b) && t.buf.end.CompareAndSwap(int64(t.n), int64(n)) {
		// This copy was at the buffer's end, and now owns buf.b[t.n:n].
		copy(t.buf.b[t.n:n], s)
		t.n = n
		return
	}
	nb := &textBuf{b: make([]byte, max(2*n, 64))}
	if t.n > 0 {
		copy(nb.b, t.buf.b[:t.n])
	}
	copy(nb.b[t.n:], s)
	nb.end.Store(int64(n))
	t.buf, t.n = nb, n
}

// Equal says whether two texts hold the same bytes (go-cmp uses it).
func (t Text) Equal(u Text) bool { return t.String() == u.String() }

// MarshalJSON writes the text as a JSON string.
func (t Text) MarshalJSON() ([]byte, error) { return json.Marshal(t.String()) }

// UnmarshalJSON reads a JSON string.
func (t *Text) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	*t = NewText(s)
	return nil
}
