package plugintest

import (
	"strings"
	"testing"

	"github.com/baton-run/baton/sdk"
)

// A session plays only a transcript made for its plugin: the header's
// provider and protocol are the plugin's Describe name and wire protocol.
func TestCheckTranscript(t *testing.T) {
	acp := sdk.Description{Name: "acp", Version: "1", WireProtocol: "acp/1"}
	peer := PeerCommand("../../testdata/acp/simple.ndjson", t.TempDir(), "").Argv
	if err := checkTranscript(acp, peer); err != nil {
		t.Errorf("the acp plugin playing an acp transcript: %v", err)
	}
	for _, tc := range []struct {
		d    sdk.Description
		want string
	}{
		{sdk.Description{Name: "codex", WireProtocol: "codex-app-server/v2"}, `the plugin is "codex", protocol "codex-app-server/v2"`},
		{sdk.Description{Name: "acp", WireProtocol: "acp/2"}, `the plugin is "acp", protocol "acp/2"`},
	} {
		err := checkTranscript(tc.d, peer)
		if err == nil || !strings.Contains(err.Error(), "testdata/acp/simple.ndjson: the transcript is of provider \"acp\", protocol \"acp/1\"; "+tc.want) {
			t.Errorf("%s playing an acp transcript: %v, want an error naming the file and %q", tc.d.Name, err, tc.want)
		}
	}
	// Each flag form is found; a command that plays no transcript passes.
	for _, argv := range [][]string{{"peer", "--transcript=../../testdata/acp/simple.ndjson"}, {"peer", "--transcript", "../../testdata/acp/simple.ndjson"}} {
		if err := checkTranscript(sdk.Description{Name: "codex"}, argv); err == nil {
			t.Errorf("%v: the transcript was not checked", argv)
		}
	}
	if err := checkTranscript(acp, []string{"agent", "--", "--transcript", "x"}); err != nil {
		t.Errorf("a command that plays no transcript: %v", err)
	}
	if err := checkTranscript(acp, []string{"peer", "--transcript", "no-such.ndjson"}); err == nil {
		t.Error("a transcript that cannot be read passed")
	}
}
