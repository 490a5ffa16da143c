package main

import (
	"testing"

	"github.com/baton-run/baton/sdk/plugintest"
)

// The conformance suite on the recorded transcripts: the scenarios exec's
// capabilities call for (simple, multi_turn, turn_interrupt, resume, and
// the crash and malformed-frame scenarios made from simple).
func TestConformance(t *testing.T) {
	t.Setenv(EnvStateDir, t.TempDir()) // resume's state files
	plugintest.Conformance(t, plugintest.Build(t, "."), plugintest.Dir("testdata"))
}
