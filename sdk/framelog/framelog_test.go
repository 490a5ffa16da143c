package framelog

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"
)

func TestLogRotatesAndNumbers(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.ndjson")
	l, err := Open(path, 300)
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 10; i++ {
		if got := l.Append(In, []byte(`{"jsonrpc":"2.0","method":"x","params":{"i":1}}`)); got != uint64(i) {
			t.Fatalf("index %d, want %d", got, i)
		}
	}
	if l.Append(Stderr, []byte("not json")) != 11 {
		t.Fatal("stderr lines are numbered too")
	}
	l.Close()
	cur, _ := os.ReadFile(path)
	old, err := os.ReadFile(path + ".1")
	if err != nil {
		t.Fatalf("no rotated file: %v", err)
	}
	if len(cur) > 300 || len(old) > 300 {
		t.Errorf("files of %d and %d bytes exceed the bound", len(cur), len(old))
	}
	if !strings.Contains(string(cur), `"text":"not json"`) || !strings.Contains(string(cur), `"i":11`) {
		t.Errorf("last frame missing: %s", cur)
	}
	counter, _ := Open("", 0)
	if counter.Append(Out, []byte("{}")) != 1 || counter.Close() != nil {
		t.Error("a log without a path still counts")
	}
}

// A record line reads back as the record it stands for: the frame
// compacted when it is JSON, else as text, whatever its characters.
func TestRecordLineProperty(t *testing.T) {
	at := time.Date(2026, 12, 1, 10, 0, 0, 123456789, time.UTC)
	l := &Log{now: func() time.Time { return at }}
	rapid.Check(t, func(rt *rapid.T) {
		var frame []byte
		if rapid.Bool().Draw(rt, "json") {
			v := rapid.MapOf(rapid.StringMatching(`[a-z<>&"\\ é]{0,6}`), rapid.OneOf(
				rapid.Just[any](nil), rapid.Map(rapid.Int(), func(i int) any { return i }),
				rapid.Map(rapid.String(), func(s string) any { return s }))).Draw(rt, "v")
			if rapid.Bool().Draw(rt, "pretty") {
				frame, _ = json.MarshalIndent(v, "", "  ")
			} else {
				frame, _ = json.Marshal(v)
			}
		} else {
			frame = []byte(rapid.String().Draw(rt, "text"))
		}
		dir := rapid.SampledFrom([]Direction{In, Out, Stderr}).Draw(rt, "dir")
		line := appendLine(nil, 7, l.now(), dir, frame)
		var got record
		if err := json.Unmarshal(line, &got); err != nil {
			rt.Fatalf("line %s: %v", line, err)
		}
		if bytes.ContainsRune(line, '\n') || got.Index != 7 || !got.Time.Equal(at) || got.Dir != dir {
			rt.Fatalf("line %s", line)
		}
		if json.Valid(frame) {
			var want, have any
			json.Unmarshal(frame, &want)
			if json.Unmarshal(got.Frame, &have); !reflect.DeepEqual(want, have) || got.Text != "" {
				rt.Fatalf("frame %s came back as %s", frame, got.Frame)
			}
		} else if got.Text != strings.ToValidUTF8(string(frame), "\uFFFD") || got.Frame != nil {
			rt.Fatalf("text %q came back as %q", frame, got.Text)
		}
	})
}

// A redacted secret appears in no record, neither as sent nor as JSON
// escapes it; the rest of the frame is kept.
func TestRedact(t *testing.T) {
	path := filepath.Join(t.TempDir(), "frames.ndjson")
	l, err := Open(path, 0)
	if err != nil {
		t.Fatal(err)
	}
	l.Redact("s3cret", `a"b<c`, "")
	l.Append(Out, []byte(`{"env":[{"name":"TOKEN","value":"s3cret"}],"h":"a\"b\u003cc"}`))
	l.Append(Stderr, []byte(`token is s3cret`))
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var r record
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("record %q: %v", line, err)
		}
		got = append(got, string(r.Frame)+r.Text)
	}
	want := []string{`{"env":[{"name":"TOKEN","value":"***"}],"h":"***"}`, `token is ***`}
	if got := string(l.Redacted([]byte("s3cret or a\"b<c"))); got != "*** or ***" {
		t.Errorf("redacted text: %q", got)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("records (-want +got):\n%s", diff)
	}
}

// Property: for any bytes a provider sends, the record is one line of JSON,
// and its frame is the JSON they are (compacted, it is what encoding/json's
// Compact makes of them: the line is built by hand, and a frame that is
// already one line goes as it came), or, when they are not JSON, its text
// is them.
func FuzzRecordLine(f *testing.F) {
	for _, s := range []string{`{"a": [1, 2.50, "x y"]}`, `{"s":"\u00e9\ud83d\ude00 <&>"}`, "not json", `{"a":1}x`, " 1 ", `"\xff"`, `{"a":"\u2028"}`, ``} {
		f.Add([]byte(s))
	}
	l := &Log{now: func() time.Time { return time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC) }}
	f.Fuzz(func(t *testing.T, frame []byte) {
		// After the records held before it, which it leaves as they are.
		held := []byte(`{"i":6,"frame":{"a":1}}` + "\n")
		line := appendLine(bytes.Clone(held), 7, l.now(), In, frame)
		if !bytes.HasPrefix(line, held) {
			t.Fatalf("%q: the records before it changed: %q", frame, line)
		}
		line = line[len(held):]
		var rec struct {
			Frame json.RawMessage `json:"frame"`
			Text  *string         `json:"text"`
		}
		if err := json.Unmarshal(line, &rec); err != nil {
			t.Fatalf("%q: the record line is not JSON: %v\n%s", frame, err, line)
		}
		var want bytes.Buffer
		if err := json.Compact(&want, frame); err != nil {
			var text string // as encoding/json writes a string: each invalid byte as U+FFFD
			q, _ := json.Marshal(string(frame))
			json.Unmarshal(q, &text)
			if rec.Frame != nil || rec.Text == nil || *rec.Text != text {
				t.Fatalf("%q is not JSON: want it as text, got %s", frame, line)
			}
			return
		}
		var got bytes.Buffer // the frame as it came, or compacted: the same JSON
		if err := json.Compact(&got, rec.Frame); err != nil || !bytes.Equal(got.Bytes(), want.Bytes()) {
			t.Fatalf("%q: frame %s, encoding/json compacts it to %s", frame, rec.Frame, want.Bytes())
		}
		if bytes.ContainsAny(line, "\r\n") {
			t.Fatalf("%q: the record is not one line: %q", frame, line)
		}
	})
}
