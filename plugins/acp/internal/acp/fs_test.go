package acp

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

func TestFileAccessStaysInCwd(t *testing.T) {
	ws, outside := t.TempDir(), t.TempDir()
	if err := os.Symlink(filepath.Join(outside, "dir"), filepath.Join(ws, "link")); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(outside, "secret"), []byte("s"), 0o644)
	os.Symlink(filepath.Join(outside, "secret"), filepath.Join(ws, "secret-link"))
	s := &session{cwd: ws}
	write := func(path string) error {
		b, _ := json.Marshal(writeTextFileParams{Path: path, Content: "x"})
		if _, err := s.writeTextFile(b); err != nil {
			return err
		}
		return nil
	}
	read := func(path string) error {
		b, _ := json.Marshal(readTextFileParams{Path: path})
		if _, err := s.readTextFile(b); err != nil {
			return err
		}
		return nil
	}
	for _, p := range []string{filepath.Join(ws, "link", "x.txt"), filepath.Join(ws, "..", "x.txt"), "/etc/x", "rel/x"} {
		if err := write(p); err == nil {
			t.Errorf("write %s succeeded", p)
		}
	}
	if err := read(filepath.Join(ws, "secret-link")); err == nil {
		t.Error("read through a symlink that leads out succeeded")
	}
	if err := write(filepath.Join(ws, "a", "b.txt")); err != nil {
		t.Errorf("write inside: %v", err)
	}
	if err := read(filepath.Join(ws, "a", "b.txt")); err != nil {
		t.Errorf("read inside: %v", err)
	}
	if entries, _ := os.ReadDir(filepath.Join(outside)); len(entries) != 1 {
		t.Errorf("something was written outside: %v", entries)
	}
}
