package orchestrator

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/baton-run/baton/host/internal/domain"
	"github.com/baton-run/baton/host/internal/pluginhost"
)

// StubPlugins installs in dir a plugin for each name that is never meant
// to run (an empty file, its checksum recorded) and returns dir. A thread
// can be created only for an installed provider; the tests that drive a
// thread's provider events by hand, and the benchmarks that settle its
// effects themselves, create theirs with one of these. Started, it fails
// at once: an empty file is no executable.
func StubPlugins(dir string, names ...string) (string, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	for _, n := range names {
		if err := os.WriteFile(filepath.Join(dir, pluginhost.BinaryPrefix+n), nil, 0o700); err != nil {
			return "", err
		}
	}
	if _, err := pluginhost.Lock(dir); err != nil {
		return "", err
	}
	return dir, nil
}

// stubPlugins is StubPlugins in a test's temp dir, for provider "none".
func stubPlugins(t testing.TB) []string {
	dir, err := StubPlugins(t.TempDir(), "none")
	if err != nil {
		t.Fatal(err)
	}
	return []string{dir}
}

// The refusal of a provider with no plugin says what is installed, also
// when nothing is, and a plugin found without a recorded checksum is
// refused with what to do about it.
func TestUninstalledProviderRefusals(t *testing.T) {
	empty := t.TempDir()
	unlocked := t.TempDir()
	if err := os.WriteFile(filepath.Join(unlocked, pluginhost.BinaryPrefix+"x"), nil, 0o700); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		dirs     []string
		provider string
		want     string
	}{
		"no plugin directory": {[]string{}, "acp", `invalid command: provider "acp" is not installed; installed: none (no plugin directory is configured)`},
		"an empty directory":  {[]string{empty}, "acp", `invalid command: provider "acp" is not installed; installed: none (searched ` + empty + `)`},
		"no checksum": {[]string{unlocked}, "x", "invalid command: plugin x at " + filepath.Join(unlocked, "baton-plugin-x") +
			" has no checksum in " + filepath.Join(unlocked, "plugins.lock") + "; record it with 'baton plugin lock " + unlocked +
			"' or install it with 'baton plugin install'"},
	} {
		t.Run(name, func(t *testing.T) {
			h := quietHost(t, Config{PluginDirs: tc.dirs})
			_, err := h.Dispatch(t.Context(), domain.Command{ID: "c", ThreadID: "t", Payload: domain.CreateThread{Provider: tc.provider, Cwd: os.TempDir()}})
			if !errors.Is(err, domain.ErrInvalid) || err.Error() != tc.want {
				t.Fatalf("create: %v\nwant ErrInvalid: %s", err, tc.want)
			}
			if last := h.LastSequence(); last != 0 {
				t.Errorf("log head %d after the refusal; want 0", last)
			}
		})
	}
}

// ProjectionSchema is the schema of the snapshots this host writes.
const ProjectionSchema = projectionSchema
