package ndjson

import (
	"bytes"
	"errors"
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

func TestReaderLineTooLong(t *testing.T) {
	in := strings.Repeat("x", 200<<10) + "\n" + `{"next":1}` + "\n"
	r := NewReaderSize(strings.NewReader(in), 100<<10)
	if _, err := r.Next(); !errors.Is(err, ErrLineTooLong) || !strings.Contains(err.Error(), "line 1") {
		t.Fatalf("err = %v, want ErrLineTooLong naming line 1", err)
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
	const ok, long = "frame: abc", "error: line 1: ndjson: line too long (limit 3 bytes)"
	got := map[string][]string{}
	for _, in := range []string{"abc\r\n", "abc\n", "abc", "abcd\r\n", "abcd\n", "abcd", "abc\r"} {
		got[in] = read(NewReaderSize(strings.NewReader(in), 3))
	}
	want := map[string][]string{"abc\r\n": {ok}, "abc\n": {ok}, "abc": {ok}, "abcd\r\n": {long}, "abcd\n": {long}, "abcd": {long}, "abc\r": {long}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("lines at the limit of 3 bytes (-want +got):\n%s", diff)
	}
}
