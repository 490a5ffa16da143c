package ndjson

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestReaderLinesOfSeveralMegabytes(t *testing.T) {
	big := `{"x":"` + strings.Repeat("a", 5<<20) + `"}`
	in := "\n" + `{"a":1}` + "\r\n\n" + big + "\n" + `{"last":true}` // no final newline
	r := NewReader(strings.NewReader(in))
	var got []string
	for {
		b, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, string(b))
	}
	if len(got) != 3 || got[0] != `{"a":1}` || got[1] != big || got[2] != `{"last":true}` {
		t.Fatalf("got %d lines", len(got))
	}
	if r.Line() != 5 {
		t.Errorf("Line() = %d, want 5", r.Line())
	}
}

// A line too long is skipped with an error that says which line, how long
// it was and how it began: a report can quote what the provider printed.
func TestReaderLineTooLong(t *testing.T) {
	big := "\xffstart" + strings.Repeat("x", 200<<10)
	in := big + "\r\n" + `{"next":1}` + "\n"
	r := NewReaderSize(strings.NewReader(in), 100<<10)
	_, err := r.Next()
	var e *LineTooLongError
	if !errors.As(err, &e) || !errors.Is(err, ErrLineTooLong) {
		t.Fatalf("err = %v, want a *LineTooLongError that is ErrLineTooLong", err)
	}
	want := &LineTooLongError{Line: 1, Len: int64(len(big)), Limit: 100 << 10, Head: []byte(big[:HeadBytes])}
	if diff := cmp.Diff(want, e); diff != "" {
		t.Errorf("the error (-want +got):\n%s", diff)
	}
	wantMsg := fmt.Sprintf(`line 1: ndjson: line too long: %d bytes, over the limit of 102400: "\xffstart%s"…`, len(big), strings.Repeat("x", HeadBytes-6))
	if diff := cmp.Diff(wantMsg, err.Error()); diff != "" {
		t.Errorf("the message (-want +got):\n%s", diff)
	}
	b, err := r.Next()
	if err != nil || string(b) != `{"next":1}` {
		t.Fatalf("after a long line: %q, %v; want the next line", b, err)
	}
}

func TestWriter(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf)
	if err := w.Write([]byte(`{"a":1}`)); err != nil {
		t.Fatal(err)
	}
	if err := w.Write([]byte("{\n}")); err == nil {
		t.Error("a frame with a newline must be refused")
	}
	if buf.String() != "{\"a\":1}\n" {
		t.Errorf("wrote %q", buf.String())
	}
}

func BenchmarkReader(b *testing.B) {
	line := `{"jsonrpc":"2.0","method":"session/update","params":{"update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"hello world"}}}}` + "\n"
	in := []byte(strings.Repeat(line, 1000))
	b.SetBytes(int64(len(in)))
	for b.Loop() {
		r := NewReader(bytes.NewReader(in))
		for {
			if _, err := r.Next(); err != nil {
				break
			}
		}
	}
}

// The limit is on a line without its ending: "\r\n" and "\n" endings do
// not count, and a last line with no ending is held to it too.
func TestReaderLimitLeavesOutTheEnding(t *testing.T) {
	const ok = "frame: abc"
	long := func(line string) string {
		return fmt.Sprintf("error: line 1: ndjson: line too long: %d bytes, over the limit of 3: %q", len(line), line)
	}
	got := map[string][]string{}
	for _, in := range []string{"abc\r\n", "abc\n", "abc", "abcd\r\n", "abcd\n", "abcd", "abc\r"} {
		got[in] = read(NewReaderSize(strings.NewReader(in), 3))
	}
	want := map[string][]string{"abc\r\n": {ok}, "abc\n": {ok}, "abc": {ok},
		"abcd\r\n": {long("abcd")}, "abcd\n": {long("abcd")}, "abcd": {long("abcd")}, "abc\r": {long("abc\r")}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("lines at the limit of 3 bytes (-want +got):\n%s", diff)
	}
}
