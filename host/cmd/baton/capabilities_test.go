package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The README's capability matrix is what the plugins say of themselves:
// `make generate` writes it from `baton plugin list --markdown`.
func TestREADMECapabilityMatrix(t *testing.T) {
	got, stderr, code := baton(t, "plugin", "list", "--markdown")
	if code != 0 {
		t.Fatalf("baton plugin list: exit %d\n%s", code, stderr)
	}
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok1 := strings.Cut(string(readme), "<!-- capabilities:begin -->\n")
	want, _, ok2 := strings.Cut(rest, "<!-- capabilities:end -->")
	if !ok1 || !ok2 {
		t.Fatal("README.md has no capabilities:begin/end markers")
	}
	if got != want {
		t.Fatalf("README.md's capability matrix is out of date; run `make generate`.\nREADME:\n%s\nplugins say:\n%s", want, got)
	}
	for _, p := range []string{"acp", "codex"} {
		if !strings.Contains(got, "\n| "+p+" |") {
			t.Errorf("no row for %s:\n%s", p, got)
		}
	}
	// The plain listing names every plugin with its source (the whole
	// listing is TestPluginInstallFromModule's).
	out, _, code := baton(t, "plugin", "list")
	if code != 0 || !strings.Contains(out, " file:"+filepath.Join(binDir, "baton-plugin-codex")+" ") || !strings.HasPrefix(out, "NAME ") {
		t.Fatalf("baton plugin list: exit %d\n%s", code, out)
	}
	if _, _, code := baton(t, "plugin", "list", "extra"); code != exitUsage {
		t.Errorf("baton plugin list extra: exit %d, want %d", code, exitUsage)
	}
}
