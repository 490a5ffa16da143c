package atomicfile

import (
	"os"
	"path/filepath"
	"testing"
)

// Write replaces the file, private, leaving no temporary file; a write
// that cannot happen leaves the old file and no temporary file.
func TestWrite(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f.json")
	for _, data := range []string{"one\n", "two\n"} {
		if err := Write(path, []byte(data)); err != nil {
			t.Fatal(err)
		}
		if b, _ := os.ReadFile(path); string(b) != data {
			t.Fatalf("file %q, want %q", b, data)
		}
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o600 {
		t.Errorf("mode %v", st.Mode())
	}
	// A directory in the file's place: the rename fails.
	if err := Write(dir, []byte("x")); err == nil {
		t.Error("a directory was replaced")
	}
	if err := Write(filepath.Join(dir, "missing", "f"), []byte("x")); err == nil {
		t.Error("wrote into a directory that is not there")
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 || ents[0].Name() != "f.json" {
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Errorf("the directory holds %v, want only f.json", names)
	}
	if b, _ := os.ReadFile(path); string(b) != "two\n" {
		t.Errorf("the file after failed writes: %q", b)
	}
}
