package framelog

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
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
