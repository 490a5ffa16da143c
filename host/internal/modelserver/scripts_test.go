package modelserver

import (
	"path/filepath"
	"strings"
	"testing"
)

// scriptDirs are the model scripts the recordings and make live-test
// serve (testdata/PROVIDER/scenarios), each with the API its provider
// speaks: codex the Responses API, the others Anthropic's Messages API.
var scriptDirs = []struct {
	provider string
	load     func(path string) (int, error)
}{
	{"acp", loadLen(LoadScript)},
	{"claude", loadLen(LoadScript)},
	{"opencode", loadLen(LoadScript)},
	{"codex", loadLen(LoadResponsesScript)},
}

// loadLen adapts a script loader to return the script's number of replies.
func loadLen[S ~[]R, R any](load func(string) (S, error)) func(string) (int, error) {
	return func(path string) (int, error) {
		s, err := load(path)
		return len(s), err
	}
}

// Every model script under testdata parses for its provider's API and has
// a reply, so that a script broken by an edit fails here and not minutes
// into a live run with real agents.
func TestRecordingScriptsParse(t *testing.T) {
	for _, d := range scriptDirs {
		paths, err := filepath.Glob(filepath.Join("..", "..", "..", "testdata", d.provider, "scenarios", "*.json"))
		if err != nil {
			t.Fatal(err)
		}
		if len(paths) == 0 {
			t.Errorf("no model scripts in testdata/%s/scenarios", d.provider)
		}
		for _, p := range paths {
			if strings.HasSuffix(p, ".config.json") {
				continue // a recorder's overlay of the provider's config, not a model script
			}
			n, err := d.load(p)
			switch {
			case err != nil:
				t.Error(err) // it names the file
			case n == 0:
				t.Errorf("%s: no replies", p)
			}
		}
	}
}
