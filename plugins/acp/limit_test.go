package main

import (
	"path/filepath"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/baton-run/baton/sdk"
	"github.com/baton-run/baton/sdk/plugintest"
)

// The recorded usage limit (claude-code-acp 0.16.2 signed in to a plan,
// its model call answered 429 with a spent five-hour window): session/prompt
// fails with a JSON-RPC internal error whose message is the CLI's "You've
// hit your limit · resets 7:59pm (UTC)". The turn fails on a usage window
// that resets at the next 19:59 UTC, the error object as evidence.
func TestUsageLimit(t *testing.T) {
	f := filepath.Join(testdata, "usage_limit.ndjson")
	s := plugintest.Start(t, plugintest.Build(t, ".")).Open(t, f, t.TempDir())
	s.StartTurn(t, "Write notes.txt with the word done")
	evs := s.WaitTurn(t)
	term := evs[len(evs)-1]
	if term.Kind != sdk.EventTurnTerminal || term.Status != sdk.TurnFailed || term.Limit == nil {
		t.Fatalf("turn ended %+v; want failed on a limit", term)
	}
	msg := "You've hit your limit · resets 7:59pm (UTC)"
	want := &sdk.Limit{Kind: sdk.LimitUsageWindow, Message: msg,
		Evidence: `{"error":{"code":-32603,"message":"Internal error: ` + msg + `"}}`}
	if diff := gocmp.Diff(want, term.Limit, cmpopts.IgnoreFields(sdk.Limit{}, "ResetsAt")); diff != "" {
		t.Errorf("limit (-want +got):\n%s", diff)
	}
	// The text has a time of day, no date: the plugin's clock (the
	// system's, in a plugin binary) picks the day.
	if r := term.Limit.ResetsAt; r.IsZero() || r.Location() != time.UTC || r.Hour() != 19 || r.Minute() != 59 || r.Second() != 0 {
		t.Errorf("resetsAt %v; want a 19:59 UTC", r)
	}
	s.Close(t)
}
