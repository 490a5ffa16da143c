package opencode

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"

	"github.com/baton-run/baton/sdk"
	"github.com/baton-run/baton/sdk/clock"
)

// Recorded from opencode 1.18.33 against the scripted Messages API: a 400
// "credit balance is too low", which opencode does not retry.
const creditError = `{"id":"evt_2330d6dbf0015YmcXgOPBx4nqi","properties":{"error":{"data":{"isRetryable":false,"message":"Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits.","metadata":{"url":"http://127.0.0.1:46597/v1/messages"},"responseBody":"{\"type\": \"error\", \"error\": {\"type\": \"invalid_request_error\", \"message\": \"Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits.\"}}","responseHeaders":{"content-length":"196","content-type":"application/json","date":"Tue, 01 Dec 2026 19:20:47 GMT"},"statusCode":400},"name":"APIError"},"sessionID":"ses_root"},"type":"session.error"}`

const rateMsg = "This request would exceed your account's rate limit. Please try again later."

// apiError is a session.error of an APIError with status and headers.
func apiError(status, message string, headers string) []byte {
	m, _ := json.Marshal(message)
	return ev("session.error", fmt.Sprintf(`{"sessionID":"ses_root","error":{"name":"APIError","data":{"message":%s,"statusCode":%s,"isRetryable":false,"responseHeaders":%s}}}`,
		m, status, headers))
}

// retry is a session.status retry frame of opencode 1.18.33.
func retry(attempt int, next string) []byte {
	return ev("session.status", fmt.Sprintf(`{"sessionID":"ses_root","status":{"attempt":%d,"message":%q,"next":%s,"type":"retry"}}`,
		attempt, rateMsg, next))
}

var limitNow = time.Date(2026, 12, 1, 19, 20, 47, 0, time.UTC)

// turnOn runs a root turn to its end with frames in between, on a
// normalizer whose clock is at limitNow, and returns the events.
func turnOn(t *testing.T, frames ...[]byte) (*normalizer, []sdk.RuntimeEvent) {
	n := newNormalizer("ses_root", "/ws")
	n.clock = clock.NewFake(limitNow)
	out := feed(t, n, append(append([][]byte{user("ses_root", "msg_u1"), busy("ses_root")}, frames...), idle("ses_root"))...)
	return n, out
}

// A session error that is a limit ends the turn failed with it: its kind
// from the status and message, its reset from the API's headers (counted
// from the API's own date), the frame as evidence.
func TestErrorLimits(t *testing.T) {
	reset := limitNow.Add(time.Hour).Unix()
	unified := fmt.Sprintf(`{"date":"Tue, 01 Dec 2026 19:20:47 GMT","anthropic-ratelimit-unified-status":"rejected","anthropic-ratelimit-unified-reset":"%d","anthropic-ratelimit-unified-representative-claim":"five_hour","retry-after":"3600"}`, reset)
	for _, c := range []struct {
		name  string
		frame []byte
		want  *sdk.Limit
	}{
		{"credit balance (recorded)", []byte(creditError), &sdk.Limit{Kind: sdk.LimitCredits,
			Message: "Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits.", Evidence: creditError}},
		{"spent usage window", apiError("429", rateMsg, unified), &sdk.Limit{Kind: sdk.LimitUsageWindow, ResetsAt: time.Unix(reset, 0).UTC(),
			Scope: "five_hour", Message: rateMsg, Evidence: string(apiError("429", rateMsg, unified))}},
		{"429 with retry-after, from the API's date", apiError("429", rateMsg, `{"Date":"Tue, 01 Dec 2026 19:00:00 GMT","Retry-After":"30"}`),
			&sdk.Limit{Kind: sdk.LimitRate, ResetsAt: time.Date(2026, 12, 1, 19, 0, 30, 0, time.UTC), Message: rateMsg,
				Evidence: string(apiError("429", rateMsg, `{"Date":"Tue, 01 Dec 2026 19:00:00 GMT","Retry-After":"30"}`))}},
		{"a reset in the past", apiError("429", rateMsg, `{"anthropic-ratelimit-unified-reset":"1700000000"}`),
			&sdk.Limit{Kind: sdk.LimitRate, Message: rateMsg, Evidence: string(apiError("429", rateMsg, `{"anthropic-ratelimit-unified-reset":"1700000000"}`))}},
		{"malformed headers and status", apiError(`"429"`, rateMsg, `{"retry-after":"soon","date":7}`),
			&sdk.Limit{Kind: sdk.LimitRate, Message: rateMsg, Evidence: string(apiError(`"429"`, rateMsg, `{"retry-after":"soon","date":7}`))}},
		{"headers of another shape", apiError("529", "Overloaded", `[1]`),
			&sdk.Limit{Kind: sdk.LimitOverload, Message: "Overloaded", Evidence: string(apiError("529", "Overloaded", `[1]`))}},
		{"402", apiError("402", "x", `null`), &sdk.Limit{Kind: sdk.LimitCredits, Message: "x", Evidence: string(apiError("402", "x", `null`))}},
		{"a 500 is no limit", apiError("500", "Internal server error", `{}`), nil},
		{"other errors are no limit", ev("session.error", `{"sessionID":"ses_root","error":{"name":"ProviderAuthError","data":{"message":"rate limit"}}}`), nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, out := turnOn(t, c.frame)
			term := out[len(out)-1]
			if term.Kind != sdk.EventTurnTerminal || term.Status != sdk.TurnFailed {
				t.Fatalf("terminal %+v", term)
			}
			if d := cmp.Diff(c.want, term.Limit); d != "" {
				t.Errorf("limit (-want +got):\n%s", d)
			}
		})
	}
}

// opencode's retries: near ones are left to it; one more than
// retryPatience ahead, or the retryGiveUp-th attempt, makes the plugin
// abort the turn, which ends failed on the limit (its reset opencode's
// next call when that is to come).
func TestRetryLimits(t *testing.T) {
	ms := func(d time.Duration) string { return fmt.Sprint(limitNow.Add(d).UnixMilli()) }
	for _, c := range []struct {
		name   string
		frames [][]byte
		abort  bool
		want   *sdk.Limit
	}{
		{"near retries", [][]byte{retry(1, ms(2*time.Second)), retry(2, ms(4*time.Second))}, false, nil},
		{"a far retry", [][]byte{retry(1, ms(2*time.Hour))}, true, &sdk.Limit{Kind: sdk.LimitRate, ResetsAt: limitNow.Add(2 * time.Hour),
			Message: rateMsg, Evidence: string(retry(1, ms(2*time.Hour)))}},
		{"the third attempt", [][]byte{retry(1, ms(time.Second)), retry(2, ms(time.Second)), retry(3, ms(time.Second))}, true,
			&sdk.Limit{Kind: sdk.LimitRate, ResetsAt: limitNow.Add(time.Second), Message: rateMsg, Evidence: string(retry(3, ms(time.Second)))}},
		{"a third attempt in the past", [][]byte{retry(3, ms(-time.Second))}, true,
			&sdk.Limit{Kind: sdk.LimitRate, Message: rateMsg, Evidence: string(retry(3, ms(-time.Second)))}},
		{"a malformed next", [][]byte{retry(1, `"tomorrow"`), retry(2, `1e300`)}, false, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			n := newNormalizer("ses_root", "/ws")
			n.clock = clock.NewFake(limitNow)
			feed(t, n, append([][]byte{user("ses_root", "msg_u1"), busy("ses_root")}, c.frames...)...)
			if got := n.takeAbort(); (got == "ses_root") != c.abort {
				t.Fatalf("abort %q, want %v", got, c.abort)
			}
			out := feed(t, n, idle("ses_root"))
			term := out[len(out)-1]
			if d := cmp.Diff(c.want, term.Limit); d != "" {
				t.Errorf("limit (-want +got):\n%s", d)
			}
			wantStatus := sdk.TurnCompleted
			if c.want != nil {
				wantStatus = sdk.TurnFailed
				if term.Failure == nil || term.Failure.Code != "provider_limit" || term.Failure.Message != rateMsg {
					t.Errorf("failure %+v", term.Failure)
				}
			}
			if term.Status != wantStatus {
				t.Errorf("status %s, want %s", term.Status, wantStatus)
			}
		})
	}
	// A child session's retries are opencode's business: its parent's turn
	// waits for them.
	n := newNormalizer("ses_root", "/ws")
	n.clock = clock.NewFake(limitNow)
	feed(t, n, user("ses_root", "msg_u1"), busy("ses_root"),
		ev("session.created", `{"info":{"id":"ses_child","parentID":"ses_root"}}`), user("ses_child", "msg_c1"), busy("ses_child"),
		ev("session.status", fmt.Sprintf(`{"sessionID":"ses_child","status":{"attempt":9,"message":"x","next":%s,"type":"retry"}}`, ms(time.Hour))))
	if got := n.takeAbort(); got != "" {
		t.Errorf("a child's retry aborted %q", got)
	}
}

// Whatever next, attempt, status and headers opencode sends: no panic, a
// reset (when there is one) after now and an instant an event carries,
// evidence within its bound and whole characters.
func TestLimitProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		next := rapid.OneOf(rapid.Int64Range(limitNow.UnixMilli()-5000, limitNow.UnixMilli()+5000), rapid.Int64()).Draw(t, "next")
		attempt := rapid.IntRange(-1, 10).Draw(t, "attempt")
		header := rapid.OneOf(rapid.Map(rapid.Int64(), func(v int64) string { return fmt.Sprint(v) }),
			rapid.Map(rapid.Float64(), func(v float64) string { return fmt.Sprint(v) }), rapid.String()).Draw(t, "header")
		pad := strings.Repeat(rapid.SampledFrom([]string{"é", "x", "𝄞"}).Draw(t, "char"), rapid.IntRange(0, 3000).Draw(t, "pad"))
		hs, _ := json.Marshal(map[string]string{"retry-after": header, "anthropic-ratelimit-unified-reset": header, "date": header})
		for _, frame := range [][]byte{
			ev("session.status", fmt.Sprintf(`{"sessionID":"ses_root","status":{"attempt":%d,"message":%q,"next":%d,"type":"retry"}}`, attempt, "rate limit"+pad, next)),
			apiError("429", "rate limit"+pad, string(hs)),
		} {
			n := newNormalizer("ses_root", "/ws")
			n.clock = clock.NewFake(limitNow)
			var out []sdk.RuntimeEvent
			for _, b := range [][]byte{user("ses_root", "msg_u1"), busy("ses_root"), frame, idle("ses_root")} {
				e, err := decodeEvent(b)
				if err != nil {
					t.Fatalf("decode %s: %v", b, err)
				}
				out = append(out, n.event(e)...)
			}
			l := out[len(out)-1].Limit
			if l == nil {
				continue
			}
			if !l.ResetsAt.IsZero() && (!l.ResetsAt.After(limitNow) && !strings.Contains(string(frame), "date\":\""+header)) {
				t.Fatalf("reset %v is not after now %v", l.ResetsAt, limitNow)
			}
			if !l.ResetsAt.IsZero() && l.ResetsAt.Unix() > sdk.MaxUnixSeconds {
				t.Fatalf("reset %v past what an event carries", l.ResetsAt)
			}
			if len(l.Evidence) > sdk.MaxLimitEvidence || !utf8.ValidString(l.Evidence) {
				t.Fatalf("evidence of %d bytes, valid UTF-8 %v", len(l.Evidence), utf8.ValidString(l.Evidence))
			}
			if _, err := json.Marshal(out[len(out)-1]); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// FuzzLimitEvents feeds a turn one event of any content between its start
// and its end: the terminal's limit, if any, is one of the kinds and
// within its bounds.
func FuzzLimitEvents(f *testing.F) {
	f.Add([]byte(creditError))
	f.Add(retry(3, "1796152963745"))
	f.Add(apiError("429", rateMsg, `{"anthropic-ratelimit-unified-status":"rejected","anthropic-ratelimit-unified-reset":"1796156447"}`))
	f.Add(apiError("1e999", "Overloaded", `{"retry-after":"-1"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		e, err := decodeEvent(data)
		if err != nil {
			return
		}
		n := newNormalizer("ses_root", "/ws")
		n.clock = clock.NewFake(limitNow)
		out := feed(t, n, user("ses_root", "msg_u1"), busy("ses_root"))
		out = append(out, n.event(e)...)
		out = append(out, feed(t, n, idle("ses_root"))...)
		for _, ev := range out {
			l := ev.Limit
			if l == nil {
				continue
			}
			switch l.Kind {
			case sdk.LimitUsageWindow, sdk.LimitRate, sdk.LimitCredits, sdk.LimitOverload:
			default:
				t.Fatalf("kind %q", l.Kind)
			}
			if len(l.Evidence) > sdk.MaxLimitEvidence {
				t.Fatalf("evidence of %d bytes", len(l.Evidence))
			}
			if _, err := json.Marshal(ev); err != nil {
				t.Fatal(err)
			}
		}
	})
}
