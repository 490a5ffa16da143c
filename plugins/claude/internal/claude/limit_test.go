package claude

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	gocmp "github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"

	"github.com/baton-run/baton/sdk"
)

// Frames probed from Claude Code 2.1.332 against the scripted model server
// (testdata/limit_*.ndjson; the CLI's system/init, command_lifecycle and
// control frames left out): what it sends when a model request fails on a
// limit.
//   - plan_five_hour: signed in to a plan (CLAUDE_CODE_OAUTH_TOKEN), a 429
//     with the unified headers of a spent five-hour window;
//   - api_key_429: the same 429 with an API key (the CLI ignores the
//     unified headers then), x-should-retry false;
//   - credits: 400 invalid_request_error "Your credit balance is too low…";
//   - overloaded: 529 overloaded_error, retried once
//     (CLAUDE_CODE_MAX_RETRIES=1).
func limitSeeds(f testing.TB) map[string][][]byte {
	files, _ := filepath.Glob("testdata/limit_*.ndjson")
	if len(files) == 0 {
		f.Fatal("no probed limit frames")
	}
	out := map[string][][]byte{}
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		name := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(file), "limit_"), ".ndjson")
		out[name] = bytes.Split(bytes.TrimSpace(b), []byte("\n"))
	}
	return out
}

// terminal feeds frames into a turn and returns its terminal event.
func terminal(t *testing.T, frames [][]byte) sdk.RuntimeEvent {
	t.Helper()
	n := newNormalizer("", "/ws")
	n.startTurn("t1", "c1")
	evs := feed(t, n, frames)
	if len(evs) == 0 || evs[len(evs)-1].Kind != sdk.EventTurnTerminal {
		t.Fatalf("events %+v; want the turn's terminal last", evs)
	}
	return evs[len(evs)-1]
}

// pick returns the lines of frames whose type is one of types.
func pick(frames [][]byte, types ...string) []json.RawMessage {
	var out []json.RawMessage
	for _, fr := range frames {
		var f struct {
			Type string `json:"type"`
		}
		_ = json.Unmarshal(fr, &f)
		for _, typ := range types {
			if f.Type == typ {
				out = append(out, fr)
			}
		}
	}
	return out
}

// Each probed failure ends the turn failed with its limit: the kind from
// what the CLI says (a spent window: usage_window; a plain 429:
// rate_limit; the credit balance: credits; 529: overload), the reset and
// window from the rejected rate_limit_event, the result's text, and as
// evidence the event and the result as they came.
func TestProbedLimits(t *testing.T) {
	seeds := limitSeeds(t)
	want := map[string]sdk.Limit{
		"plan_five_hour": {Kind: sdk.LimitUsageWindow, Scope: "five_hour", ResetsAt: time.Unix(1796154616, 0).UTC(),
			Message: "You've hit your 5-hour limit · resets 7:50pm (UTC)"},
		"api_key_429": {Kind: sdk.LimitRate,
			Message: "API Error: Request rejected (429) · This request would exceed your account's rate limit. Please try again later."},
		"credits": {Kind: sdk.LimitCredits, Message: "Credit balance is too low"},
		"overloaded": {Kind: sdk.LimitOverload,
			Message: "API Error: 529 Overloaded. This is a server-side issue, usually temporary — try again in a moment. If it persists, check your inference gateway (127.0.0.1:40373)."},
	}
	got := map[string]sdk.Limit{}
	for name, frames := range seeds {
		w := want[name]
		w.Evidence = sdk.LimitEvidence(pick(frames, "rate_limit_event", "result")...)
		want[name] = w
		term := terminal(t, frames)
		if term.Status != sdk.TurnFailed || term.Limit == nil {
			t.Fatalf("%s: turn ended %+v; want failed on a limit", name, term)
		}
		got[name] = *term.Limit
	}
	if diff := gocmp.Diff(want, got); diff != "" {
		t.Errorf("limits (-want +got):\n%s", diff)
	}
}

// echo is the CLI's echo of the turn's user message: the turn waits for it.
var echo = []byte(`{"type":"user","isReplay":true,"message":{"role":"user","content":"go"},"session_id":"s","parent_tool_use_id":null}`)

func result(text string, status int, extra string) []byte {
	q, _ := json.Marshal(text)
	return fmt.Appendf(nil, `{"type":"result","subtype":"success","is_error":true,"api_error_status":%d,"result":%s,"session_id":"s"%s}`,
		status, q, extra)
}

func rejected(typ string, resetsAt string) []byte {
	return fmt.Appendf(nil, `{"type":"rate_limit_event","rate_limit_info":{"status":"rejected","resetsAt":%s,"rateLimitType":%q},"session_id":"s"}`,
		resetsAt, typ)
}

// The other shapes a limit comes in: an older CLI's "usage limit
// reached|EPOCH" text (the reset after the bar, none when it is no
// number or too big for any instant), a rejected window whose reset is
// no instant, a spent overage (credits), a rejection a later event lifts
// (a plain rate limit), a 402, and failures that are no limit.
func TestLimitShapes(t *testing.T) {
	cases := []struct {
		name   string
		frames [][]byte
		want   *sdk.Limit
	}{
		{"old usage limit text", [][]byte{result("Claude AI usage limit reached|1760000400", 429, "")},
			&sdk.Limit{Kind: sdk.LimitUsageWindow, ResetsAt: time.Unix(1760000400, 0).UTC(), Message: "Claude AI usage limit reached|1760000400"}},
		{"old text, no number", [][]byte{result("Claude AI usage limit reached|soon", 0, "")},
			&sdk.Limit{Kind: sdk.LimitUsageWindow, Message: "Claude AI usage limit reached|soon"}},
		{"old text, past any instant", [][]byte{result("usage limit reached|99999999999999999999", 0, "")},
			&sdk.Limit{Kind: sdk.LimitUsageWindow, Message: "usage limit reached|99999999999999999999"}},
		{"old text, zero", [][]byte{result("usage limit reached|0", 0, "")},
			&sdk.Limit{Kind: sdk.LimitUsageWindow, Message: "usage limit reached|0"}},
		{"window reset no instant", [][]byte{rejected("seven_day_opus", "-5"), result("limit", 429, "")},
			&sdk.Limit{Kind: sdk.LimitUsageWindow, Scope: "seven_day_opus", Message: "limit"}},
		{"window reset past the year 9999", [][]byte{rejected("five_hour", "253402300800"), result("limit", 429, "")},
			&sdk.Limit{Kind: sdk.LimitUsageWindow, Scope: "five_hour", Message: "limit"}},
		// (A frame the plugin cannot decode is a diagnostic.)
		{"window reset not a number", [][]byte{rejected("five_hour", `"tomorrow"`), result("limit", 429, `,"api_error":"usage_limit_reached"`)},
			&sdk.Limit{Kind: sdk.LimitUsageWindow, Message: "limit"}},
		{"overage spent", [][]byte{rejected("overage", "1796154616"), result("You're out of usage credits", 429, "")},
			&sdk.Limit{Kind: sdk.LimitCredits, Scope: "overage", ResetsAt: time.Unix(1796154616, 0).UTC(), Message: "You're out of usage credits"}},
		{"rejection lifted", [][]byte{rejected("five_hour", "1796154616"),
			[]byte(`{"type":"rate_limit_event","rate_limit_info":{"status":"allowed","rateLimitType":"five_hour"},"session_id":"s"}`),
			result("slow down", 429, "")},
			&sdk.Limit{Kind: sdk.LimitRate, Message: "slow down"}},
		{"credit balance text", [][]byte{result("Credit balance is too low", 400, "")}, &sdk.Limit{Kind: sdk.LimitCredits, Message: "Credit balance is too low"}},
		{"402", [][]byte{result("payment required", 402, "")}, &sdk.Limit{Kind: sdk.LimitCredits, Message: "payment required"}},
		{"billing_error type", [][]byte{result("no", 400, `,"api_error_type":"billing_error"`)}, &sdk.Limit{Kind: sdk.LimitCredits, Message: "no"}},
		{"500", [][]byte{result("API Error: 500", 500, "")}, nil},
		{"error_during_execution", [][]byte{[]byte(`{"type":"result","subtype":"error_during_execution","is_error":true,"errors":["boom"],"session_id":"s"}`)}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			term := terminal(t, append([][]byte{echo}, c.frames...))
			if c.want != nil {
				c.want.Evidence = sdk.LimitEvidence(pick(c.frames, "result")...)
				if c.want.Scope != "" {
					c.want.Evidence = sdk.LimitEvidence(append(pick(c.frames[:1], "rate_limit_event"), pick(c.frames, "result")...)...)
				}
			}
			if diff := gocmp.Diff(c.want, term.Limit); diff != "" {
				t.Errorf("limit (-want +got):\n%s", diff)
			}
		})
	}
}

// A rejected event's resetsAt is the limit's reset to the second, or none
// when it is no instant; and the evidence is never longer than
// sdk.MaxLimitEvidence nor cut inside a character, whatever the frames.
func TestLimitProperties(tt *testing.T) {
	rapid.Check(tt, func(t *rapid.T) {
		sec := resetSecond().Draw(t, "resetsAt")
		text := rapid.StringN(0, 3000, -1).Draw(t, "text")
		frames := [][]byte{rejected("five_hour", fmt.Sprint(sec)), result(text, 429, "")}
		n := newNormalizer("s", "/ws")
		n.startTurn("t1", "c1")
		evs := feed(tt, n, append([][]byte{echo}, frames...))
		l := evs[len(evs)-1].Limit
		if l == nil || l.Kind != sdk.LimitUsageWindow {
			t.Fatalf("limit %+v; want the usage window", l)
		}
		if sec > 0 && sec <= sdk.MaxUnixSeconds {
			if l.ResetsAt.Unix() != sec {
				t.Fatalf("resetsAt %d came back as %v", sec, l.ResetsAt)
			}
		} else if !l.ResetsAt.IsZero() {
			t.Fatalf("resetsAt %d is no instant, got %v", sec, l.ResetsAt)
		}
		if len(l.Evidence) > sdk.MaxLimitEvidence || !utf8.ValidString(l.Evidence) {
			t.Fatalf("evidence of %d bytes, valid UTF-8 %v", len(l.Evidence), utf8.ValidString(l.Evidence))
		}
		if whole := string(frames[0]) + "\n" + string(frames[1]); !strings.HasPrefix(whole, l.Evidence) ||
			len(whole) > sdk.MaxLimitEvidence && len(l.Evidence) < sdk.MaxLimitEvidence-3 {
			t.Fatalf("evidence %q is not the frames' longest whole-character prefix", l.Evidence)
		}
	})
}

// checkLimit is what FuzzNormalize holds of a turn terminal's limit: only
// a failed turn has one, of a known kind, its evidence bounded, and the
// event encodes.
func checkLimit(t *testing.T, i int, ev sdk.RuntimeEvent) {
	l := ev.Limit
	if l == nil {
		return
	}
	switch {
	case ev.Status != sdk.TurnFailed:
		t.Fatalf("event %d: a %s turn with a limit %+v", i, ev.Status, l)
	case l.Kind != sdk.LimitUsageWindow && l.Kind != sdk.LimitRate && l.Kind != sdk.LimitCredits && l.Kind != sdk.LimitOverload:
		t.Fatalf("event %d: limit kind %q", i, l.Kind)
	case len(l.Evidence) > sdk.MaxLimitEvidence:
		t.Fatalf("event %d: %d bytes of evidence", i, len(l.Evidence))
	}
	if _, err := json.Marshal(ev); err != nil {
		t.Fatalf("event %d does not encode: %v", i, err)
	}
}
