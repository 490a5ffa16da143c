package main

import (
	"testing"

	"github.com/baton-run/baton/sdk/plugintest"
)

// The conformance suite on the recorded transcripts: the scenarios exec's
// capabilities call for (simple, multi_turn, turn_interrupt, resume), and
// crash_mid_turn and malformed_frames, which every plugin plays: exec's own
// recordings, since a line that is not JSON is text to exec (its malformed
// frame is a line that is not text).
func TestConformance(t *testing.T) {
	t.Setenv(EnvStateDir, t.TempDir()) // resume's state files
	plugintest.Conformance(t, plugintest.Build(t, "."), plugintest.Dir("testdata"))
}
