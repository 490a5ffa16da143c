package orchestrator_test

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-run/baton/host/internal/orchestrator"
)

// Plugins lists every installed plugin with its description, and one that
// cannot start with why; a closed host lists nothing.
func TestPluginsListsEveryInstalledPlugin(t *testing.T) {
	stubs, err := orchestrator.StubPlugins(t.TempDir(), "broken") // an empty file: it cannot start
	if err != nil {
		t.Fatal(err)
	}
	h, err := orchestrator.Open(orchestrator.Config{DataDir: t.TempDir(), PluginDirs: []string{pluginDir, stubs}})
	if err != nil {
		t.Fatal(err)
	}
	list, err := h.Plugins(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	type row struct{ Name, Dir, Protocol, Version string }
	var got []row
	for _, p := range list {
		r := row{Name: p.Name, Dir: filepath.Dir(p.Path), Protocol: p.Description.WireProtocol, Version: p.Description.Version}
		if p.Err != nil {
			r.Version = "error"
		}
		got = append(got, r)
	}
	want := []row{
		{"acp", pluginDir, "acp/1", "0.1.0"},
		{"broken", stubs, "", "error"},
		{"claude", pluginDir, "claude-code/stream-json", "0.1.0"},
		{"codex", pluginDir, "codex-app-server/v2", "0.1.0"},
		{"cursor", pluginDir, "cursor-agent-print/stream-json", "0.1.0"},
		{"opencode", pluginDir, "opencode-server/1 http+sse", "0.1.0"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("plugins (-want +got):\n%s", diff)
	}
	h.Close()
	if _, err := h.Plugins(t.Context()); !errors.Is(err, orchestrator.ErrClosed) {
		t.Errorf("Plugins on a closed host: %v, want ErrClosed", err)
	}
}
