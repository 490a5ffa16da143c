package main

import (
	"testing"

	"github.com/baton-run/baton/sdk/plugintest"
)

// TestConformance plays the standard scenarios this plugin's capabilities
// call for against its testdata transcripts and checks the event contract
// (plugintest.Conformance).
func TestConformance(t *testing.T) {
	plugintest.Conformance(t, plugintest.Build(t, "."), plugintest.Dir("../../testdata/codex"))
}
