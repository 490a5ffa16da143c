package main

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"

	"github.com/baton-run/baton/sdk"
	"github.com/baton-run/baton/sdk/plugintest"
)

// frames returns the frames of a transcript's entries, by label, as the
// replay peer sends them (one JSON line each).
func frames(t *testing.T, scenario string, labels ...string) []string {
	t.Helper()
	f, err := os.Open(filepath.Join(testdata, scenario+".ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	byLabel := map[string]string{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var e struct {
			Label string          `json:"label"`
			Frame json.RawMessage `json:"frame"`
		}
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatal(err)
		}
		byLabel[e.Label] = string(e.Frame)
	}
	var out []string
	for _, l := range labels {
		fr, ok := byLabel[l]
		if !ok {
			t.Fatalf("%s has no frame %q", scenario, l)
		}
		out = append(out, fr)
	}
	return out
}

// evidenceOf is the frames a limit was read from as the plugin keeps them:
// one a line, cut to sdk.MaxLimitEvidence.
func evidenceOf(frames []string) string {
	s := strings.Join(frames, "\n")
	if len(s) > sdk.MaxLimitEvidence {
		s = s[:sdk.MaxLimitEvidence]
	}
	return s
}

// usageLimit replays a recorded usage limit and its continuation (Claude
// Code 2.1.332 signed in to a plan; the model server's 429 carried the
// unified rate-limit headers of a spent window): the first turn fails on
// the limit, which carries the rejected rate_limit_event's reset and
// window and the frames it was read from; the continuation ("continue
// where you stopped", what baton run --on-limit wait sends after the
// reset) goes on in the same CLI process and completes.
func usageLimit(t *testing.T, scenario string, want sdk.Limit) {
	s := open(t, scenario, func(sdk.RuntimeEvent) (sdk.Decision, map[string]string) { return sdk.DecisionAccept, nil })
	turn := s.StartTurn(t, "Write notes.txt with the word done").TurnRef
	evs := s.WaitTurnRef(t, turn)
	term := evs[len(evs)-1]
	if term.Kind != sdk.EventTurnTerminal || term.Status != sdk.TurnFailed || !term.ThreadUsable || term.Failure == nil ||
		term.Failure.Code != "api_error_429" {
		t.Fatalf("turn ended %+v (%+v); want failed on the API's 429, the thread usable", term, term.Failure)
	}
	want.Evidence = evidenceOf(frames(t, scenario, "8.rate_limit_event", "11.result"))
	if diff := gocmp.Diff(&want, term.Limit); diff != "" {
		t.Errorf("limit (-want +got):\n%s", diff)
	}
	rl := plugintest.Find(t, evs, func(ev sdk.RuntimeEvent) bool { return ev.Kind == sdk.EventRateLimit })
	if rl.Title != "rejected" || rl.RateLimit == nil || *rl.RateLimit != (sdk.RateLimit{ResetsAt: want.ResetsAt, Scope: want.Scope, UsedPercent: 100}) {
		t.Errorf("rate limit %+v (%+v); want the rejected %s window", rl, rl.RateLimit, want.Scope)
	}

	turn = s.StartTurn(t, "continue where you stopped").TurnRef
	evs = s.WaitTurnRef(t, turn)
	if term := evs[len(evs)-1]; term.Status != sdk.TurnCompleted || term.Limit != nil {
		t.Fatalf("continuation ended %+v (%+v); want completed, no limit", term, term.Limit)
	}
	root := evs[0].ThreadRef
	if got := plugintest.ItemText(evs, root, sdk.ItemAssistantMessage); got != "I wrote notes.txt with the word done." {
		t.Errorf("continuation text = %q", got)
	}
	s.Close(t)
}

func TestUsageLimitWait(t *testing.T) {
	usageLimit(t, "usage_limit_wait", sdk.Limit{Kind: sdk.LimitUsageWindow, Scope: "five_hour",
		ResetsAt: time.Unix(1796154783, 0).UTC(), Message: "You've hit your 5-hour limit · resets 7:53pm (UTC)"})
}

// The seven-day window: recorded as a blocked run; its continuation is
// usage_limit_wait's (the transcript's metadata says so).
func TestUsageLimitSevenDay(t *testing.T) {
	usageLimit(t, "usage_limit_seven_day", sdk.Limit{Kind: sdk.LimitUsageWindow, Scope: "seven_day",
		ResetsAt: time.Unix(1796759613, 0).UTC(), Message: "You've hit your weekly limit · resets Dec 8, 7:53pm (UTC)"})
}
