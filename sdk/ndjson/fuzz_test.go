package ndjson

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// model is what a Reader with lines of up to maxLine bytes must return for
// in: each line's frame, or the error for a line too long, in order.
// A line is the bytes before a "\n" (or the end); its frame is the line
// without the "\r"s that end it; a line longer than maxLine without its
// ending ("\n", or "\r\n") is too long, and its error gives its length
// and its first HeadBytes; a blank frame is skipped.
func model(in []byte, maxLine int) []string {
	var out []string
	segs := bytes.Split(in, []byte("\n"))
	if len(segs[len(segs)-1]) == 0 {
		segs = segs[:len(segs)-1] // the input ends with a newline, or is empty
	}
	for n, seg := range segs {
		size := len(seg)
		if n < len(segs)-1 || len(in) > 0 && in[len(in)-1] == '\n' {
			size -= len(seg) - len(bytes.TrimSuffix(seg, []byte("\r"))) // the \r of a \r\n ending
		}
		switch frame := bytes.TrimRight(seg, "\r"); {
		case size > maxLine:
			head, cut := seg[:min(size, HeadBytes)], ""
			if size > HeadBytes {
				cut = "…"
			}
			out = append(out, fmt.Sprintf("error: line %d: %v: %d bytes, over the limit of %d: %q%s", n+1, ErrLineTooLong, size, maxLine, head, cut))
		case len(bytes.TrimSpace(frame)) == 0:
		default:
			out = append(out, "frame: "+string(frame))
		}
	}
	return out
}

func read(r *Reader) []string {
	var out []string
	for {
		b, err := r.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			out = append(out, "error: "+err.Error())
			if !errors.Is(err, ErrLineTooLong) {
				return out
			}
			continue
		}
		out = append(out, "frame: "+string(b))
	}
}

// FuzzReader reads any input as lines of a small limit: the frames and
// the errors for lines too long are the model's, and a reader goes on
// after a line too long. What a Writer writes reads back as the frames it
// was given.
func FuzzReader(f *testing.F) {
	f.Add([]byte("{\"a\":1}\n\n{\"b\":2}\r\n{\"c\":3}"), uint8(16))
	f.Add([]byte("xxxx\r\nyyyyy\n"), uint8(4))
	f.Add([]byte("xxxxx"), uint8(4))
	f.Add([]byte("\r\r\n \t\n"), uint8(1))
	f.Add(append(bytes.Repeat([]byte("\xffx"), HeadBytes), "\r\nnext"...), uint8(8)) // a head cut short
	f.Fuzz(func(t *testing.T, in []byte, limit uint8) {
		maxLine := int(limit%64) + 1
		if diff := cmp.Diff(model(in, maxLine), read(NewReaderSize(bytes.NewReader(in), maxLine))); diff != "" {
			t.Fatalf("reading %q with lines of up to %d bytes (-model +reader):\n%s", in, maxLine, diff)
		}
		// Each "\n"-free piece of the input, written as a frame, reads back.
		var buf bytes.Buffer
		w := NewWriter(&buf)
		var want []string
		for _, frame := range bytes.Split(in, []byte("\n")) {
			if err := w.Write(frame); err != nil {
				t.Fatalf("write %q: %v", frame, err)
			}
			if trimmed := bytes.TrimRight(frame, "\r"); len(bytes.TrimSpace(trimmed)) > 0 {
				want = append(want, "frame: "+string(trimmed))
			}
		}
		if diff := cmp.Diff(want, read(NewReader(&buf))); diff != "" {
			t.Fatalf("frames written and read back (-written +read):\n%s", diff)
		}
		if err := w.Write(append(in, '\n')); err == nil {
			t.Fatalf("a frame with a newline was written")
		}
	})
}
