package checkpoint

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

const benchFiles = 10_000

// benchRepo makes a repository of benchFiles small files in nested
// directories, committed, so the user's index is warm.
func benchRepo(b *testing.B) (dir string, names []string) {
	b.Helper()
	dir = newRepo(b)
	for i := range benchFiles {
		name := filepath.Join(dir, fmt.Sprintf("d%02d", i%20), fmt.Sprintf("e%d", i/20%5), fmt.Sprintf("f%04d.txt", i))
		names = append(names, name)
		if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(name, fmt.Appendf(nil, "file %d\nline two\n", i), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	gitT(b, dir, "add", "-A")
	gitT(b, dir, "commit", "-q", "-m", "files")
	return dir, names
}

// change10 rewrites 10 files spread over the tree, different ones each
// iteration.
func change10(b *testing.B, names []string, iter int) {
	for k := range 10 {
		name := names[(iter*10+k)*997%len(names)]
		if err := os.WriteFile(name, fmt.Appendf(nil, "changed in iteration %d\n", iter), 0o644); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCapture10kFiles10Changed(b *testing.B) {
	dir, names := benchRepo(b)
	s := New()
	res, err := s.Capture(b.Context(), dir, "refs/baton/bench/0", "", now)
	if err != nil {
		b.Fatal(err)
	}
	base := res.Commit
	iter := 0
	for b.Loop() {
		iter++
		change10(b, names, iter)
		res, err := s.Capture(b.Context(), dir, "refs/baton/bench/0", base, now)
		if err != nil {
			b.Fatal(err)
		}
		if len(res.Files) != 10 {
			b.Fatalf("capture saw %d changed files, want 10", len(res.Files))
		}
		base = res.Commit
	}
}

// The baseline: what git itself takes to snapshot the same change with
// the repository's own index.
func BenchmarkGitAddWriteTree10kFiles10Changed(b *testing.B) {
	dir, names := benchRepo(b)
	iter := 0
	for b.Loop() {
		iter++
		change10(b, names, iter)
		for _, args := range [][]string{{"add", "-A"}, {"write-tree"}} {
			cmd := exec.Command("git", args...)
			cmd.Dir = dir
			if out, err := cmd.CombinedOutput(); err != nil {
				b.Fatalf("git %s: %v\n%s", args[0], err, out)
			}
		}
	}
}
