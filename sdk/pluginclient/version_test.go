package pluginclient_test

import (
	"errors"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-run/baton/sdk/pluginclient"
)

// A plugin built for another plugin protocol version (here one offering
// version 2, through go-plugin with Baton's cookie) is refused at its
// handshake, with an error that names both versions and what to do.
func TestPluginOfAnotherProtocolVersionIsRefused(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "oldplugin")
	if out, err := exec.Command("go", "build", "-o", bin, "../internal/wire/testdata/v0/oldplugin").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	for _, tc := range []struct {
		version string
		want    string
	}{
		{"2", "start plugin " + bin + ": the plugin speaks plugin protocol version 2, this host speaks version 1: " +
			"upgrade baton to a release that speaks protocol 2, or install a release of the plugin built for protocol 1"},
		{"0", "start plugin " + bin + ": the plugin speaks plugin protocol version 0, this host speaks version 1: " +
			"rebuild the plugin with sdk v1 (github.com/baton-run/baton/sdk), or install a release of it built for protocol 1"},
	} {
		t.Run("v"+tc.version, func(t *testing.T) {
			p, err := pluginclient.Launch(pluginclient.LaunchConfig{Path: bin, Env: []string{"BATON_TEST_PROTOCOL=" + tc.version}})
			if err == nil {
				p.Kill()
				t.Fatal("a plugin of another protocol version was started")
			}
			var ve *pluginclient.VersionError
			if !errors.As(err, &ve) || !errors.Is(err, pluginclient.ErrVersion) {
				t.Fatalf("error %v is no VersionError", err)
			}
			if diff := cmp.Diff(tc.want, err.Error()); diff != "" {
				t.Errorf("the refusal (-want +got):\n%s", diff)
			}
		})
	}
	// The same binary offering version 1 starts.
	p, err := pluginclient.Launch(pluginclient.LaunchConfig{Path: bin})
	if err != nil {
		t.Fatalf("the plugin at version 1: %v", err)
	}
	p.Kill()
}
