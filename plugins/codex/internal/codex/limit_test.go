package codex

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

// failedTurn is a turn/completed frame of codex 0.171.0 for a turn that
// failed with info and message, completed at the Unix second at.
func failedTurn(info, message string, at int64) string {
	m, _ := json.Marshal(message)
	return fmt.Sprintf(`{"method":"turn/completed","params":{"threadId":"T","turn":{"completedAt":%d,"durationMs":254,`+
		`"error":{"additionalDetails":null,"codexErrorInfo":%s,"message":%s,"misalignment":null},"id":"u","items":[],`+
		`"itemsView":"notLoaded","rootTurnId":"u","startedAt":%d,"status":"failed"}}}`, at, info, m, at)
}

const (
	// The frames codex 0.171.0 sent, recorded against the scripted
	// Responses API (error texts verbatim).
	usageMsg    = "You’ve hit your usage limit. Upgrade to Pro (https://chatgpt.com/explore/pro), visit https://chatgpt.com/settings/usage to purchase more credits or try again at 7:10 PM."
	notInclMsg  = "To use Codex with your ChatGPT plan, upgrade to Plus: https://chatgpt.com/explore/plus."
	quotaMsg    = "Quota exceeded. Check your plan and billing details."
	rateMsg     = "rate limit exceeded: Rate limit reached for gpt-5 on tokens per min. Please try again in 1.5s."
	retryMsg    = "exceeded retry limit, last status: 429 Too Many Requests, request id: req_rate_1"
	overloadMsg = "Selected model is at capacity. Please try a different model."
	snapshotAt  = `{"method":"account/rateLimits/updated","params":{"rateLimits":{"credits":null,"individualLimit":null,"limitId":"codex","limitName":null,"normalModelSlug":null,"planType":null,` +
		`"primary":{"resetsAt":%d,"usedPercent":100,"windowDurationMins":300},"rateLimitReachedType":null,"secondary":{"resetsAt":%d,"usedPercent":%v,"windowDurationMins":10080},"spendControlReached":null}}}`
	nullSnapshot = `{"method":"account/rateLimits/updated","params":{"rateLimits":{"credits":null,"individualLimit":null,"limitId":"codex","limitName":null,"normalModelSlug":null,"planType":null,"primary":null,"rateLimitReachedType":null,"secondary":null,"spendControlReached":null}}}`
)

const at = 1796152212 // completedAt of the recorded turns

// Each limit codex reports ends the turn with its kind, reset, scope,
// message and evidence; an error that is no limit ends it with none.
func TestLimitKinds(t *testing.T) {
	spent := fmt.Sprintf(snapshotAt, at+3, at+86400, 41)
	bothSpent := fmt.Sprintf(snapshotAt, at+3, at+86400, 100)
	for _, c := range []struct {
		name   string
		frames []string
		want   *sdk.Limit
	}{
		{"usage limit, reset from the spent window", []string{spent, failedTurn(`"usageLimitExceeded"`, usageMsg, at)},
			&sdk.Limit{Kind: sdk.LimitUsageWindow, ResetsAt: time.Unix(at+3, 0).UTC(), Scope: "codex/primary", Message: usageMsg,
				Evidence: spent + "\n" + failedTurn(`"usageLimitExceeded"`, usageMsg, at)}},
		{"both windows spent: the later reset", []string{bothSpent, failedTurn(`"usageLimitExceeded"`, usageMsg, at)},
			&sdk.Limit{Kind: sdk.LimitUsageWindow, ResetsAt: time.Unix(at+86400, 0).UTC(), Scope: "codex/secondary", Message: usageMsg,
				Evidence: bothSpent + "\n" + failedTurn(`"usageLimitExceeded"`, usageMsg, at)}},
		{"both windows spent, the first one later", []string{fmt.Sprintf(snapshotAt, at+86400, at+3, 100), failedTurn(`"usageLimitExceeded"`, usageMsg, at)},
			&sdk.Limit{Kind: sdk.LimitUsageWindow, ResetsAt: time.Unix(at+86400, 0).UTC(), Scope: "codex/primary", Message: usageMsg,
				Evidence: fmt.Sprintf(snapshotAt, at+86400, at+3, 100) + "\n" + failedTurn(`"usageLimitExceeded"`, usageMsg, at)}},
		{"usage limit without a snapshot", []string{failedTurn(`"usageLimitExceeded"`, usageMsg, at)},
			&sdk.Limit{Kind: sdk.LimitUsageWindow, Message: usageMsg, Evidence: failedTurn(`"usageLimitExceeded"`, usageMsg, at)}},
		{"a spent window whose reset passed", []string{fmt.Sprintf(snapshotAt, at-1, at, 41), failedTurn(`"usageLimitExceeded"`, usageMsg, at)},
			&sdk.Limit{Kind: sdk.LimitUsageWindow, Message: usageMsg, Evidence: failedTurn(`"usageLimitExceeded"`, usageMsg, at)}},
		{"usage not included", []string{failedTurn(`"usageLimitExceeded"`, notInclMsg, at)},
			&sdk.Limit{Kind: sdk.LimitCredits, Message: notInclMsg, Evidence: failedTurn(`"usageLimitExceeded"`, notInclMsg, at)}},
		{"insufficient quota", []string{nullSnapshot, failedTurn(`"usageLimitExceeded"`, quotaMsg, at)},
			&sdk.Limit{Kind: sdk.LimitCredits, Message: quotaMsg, Evidence: failedTurn(`"usageLimitExceeded"`, quotaMsg, at)}},
		{"rate limit with a hint", []string{nullSnapshot, failedTurn(`"rateLimitExceeded"`, rateMsg, at)},
			&sdk.Limit{Kind: sdk.LimitRate, ResetsAt: time.Unix(at, 0).Add(1500 * time.Millisecond).UTC(), Message: rateMsg,
				Evidence: failedTurn(`"rateLimitExceeded"`, rateMsg, at)}},
		{"plain 429 after codex's retries", []string{failedTurn(`{"responseTooManyFailedAttempts":{"httpStatusCode":429}}`, retryMsg, at)},
			&sdk.Limit{Kind: sdk.LimitRate, Message: retryMsg, Evidence: failedTurn(`{"responseTooManyFailedAttempts":{"httpStatusCode":429}}`, retryMsg, at)}},
		{"529 on the stream", []string{failedTurn(`{"responseStreamDisconnected":{"httpStatusCode":529}}`, "x", at)},
			&sdk.Limit{Kind: sdk.LimitOverload, Message: "x", Evidence: failedTurn(`{"responseStreamDisconnected":{"httpStatusCode":529}}`, "x", at)}},
		{"402", []string{failedTurn(`{"httpConnectionFailed":{"httpStatusCode":402}}`, "x", at)},
			&sdk.Limit{Kind: sdk.LimitCredits, Message: "x", Evidence: failedTurn(`{"httpConnectionFailed":{"httpStatusCode":402}}`, "x", at)}},
		{"overloaded", []string{failedTurn(`"serverOverloaded"`, overloadMsg, at)},
			&sdk.Limit{Kind: sdk.LimitOverload, Message: overloadMsg, Evidence: failedTurn(`"serverOverloaded"`, overloadMsg, at)}},
		{"500 after codex's retries is no limit", []string{failedTurn(`{"responseTooManyFailedAttempts":{"httpStatusCode":500}}`, "x", at)}, nil},
		{"no status", []string{failedTurn(`{"responseTooManyFailedAttempts":{"httpStatusCode":null}}`, "x", at)}, nil},
		{"other errors are no limit", []string{failedTurn(`"contextWindowExceeded"`, "x", at)}, nil},
		{"no info", []string{failedTurn(`null`, "x", at)}, nil},
		{"info of another shape", []string{failedTurn(`[1]`, "x", at)}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			evs := feed(newNormalizer("T", "/w"), c.frames...)
			term := evs[len(evs)-1]
			if term.Kind != sdk.EventTurnTerminal || term.Status != sdk.TurnFailed {
				t.Fatalf("last event %+v", term)
			}
			if d := cmp.Diff(c.want, term.Limit); d != "" {
				t.Errorf("limit (-want +got):\n%s", d)
			}
		})
	}
	// A completed turn carries no limit, whatever the snapshot said.
	evs := feed(newNormalizer("T", "/w"), spent, `{"method":"turn/completed","params":{"threadId":"T","turn":{"id":"u","status":"completed","error":null}}}`)
	if l := evs[len(evs)-1].Limit; l != nil {
		t.Errorf("completed turn: limit %+v", l)
	}
}

// Without completedAt, "now" is the normalizer's clock: a reset before it
// is no reset, one after it is.
func TestLimitResetAgainstClock(t *testing.T) {
	turn := `{"method":"turn/completed","params":{"threadId":"T","turn":{"id":"u","status":"failed","error":{"codexErrorInfo":"usageLimitExceeded","message":"usage limit"}}}}`
	for _, c := range []struct {
		now  int64
		want time.Time
	}{{at, time.Unix(at+3, 0).UTC()}, {at + 3, time.Time{}}} {
		n := newNormalizer("T", "/w")
		n.clock = clock.NewFake(time.Unix(c.now, 0))
		evs := feed(n, fmt.Sprintf(snapshotAt, at+3, 0, 0), turn)
		if got := evs[len(evs)-1].Limit.ResetsAt; !got.Equal(c.want) {
			t.Errorf("now %d: reset %v, want %v", c.now, got, c.want)
		}
	}
}

// Whatever resetsAt, completedAt and hint codex sends: no panic, a reset
// (when there is one) after the turn's end and no later than codex said,
// evidence within its bound and whole characters.
func TestLimitProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		done := rapid.OneOf(rapid.Int64Range(1_700_000_000, 2_000_000_000), resetSecond()).Draw(t, "completedAt")
		near := min(max(done, -1<<62), 1<<62)
		reset := rapid.OneOf(rapid.Int64Range(near-5, near+5), resetSecond()).Draw(t, "resetsAt")
		hint := rapid.OneOf(rapid.SampledFrom([]string{"1.5s", "20 seconds", "90ms", "0s", "1e999s", "99999999999999999999s"}),
			rapid.StringMatching(`[0-9]{1,25}(\.[0-9]{1,5})?(s|ms|second)`)).Draw(t, "hint")
		pad := strings.Repeat(rapid.SampledFrom([]string{"é", "x", "€", "𝄞"}).Draw(t, "char"), rapid.IntRange(0, 3000).Draw(t, "pad"))
		n := newNormalizer("T", "/w")
		now := time.Unix(1_800_000_000, 0).UTC()
		n.clock = clock.NewFake(now)
		evs := feed(n, fmt.Sprintf(snapshotAt, reset, reset, 100),
			failedTurn(`"usageLimitExceeded"`, "usage limit "+pad, done),
			failedTurn(`"rateLimitExceeded"`, "Please try again in "+hint+pad, done))
		var limits []*sdk.Limit
		for _, ev := range evs {
			if ev.Kind == sdk.EventTurnTerminal {
				limits = append(limits, ev.Limit)
			}
		}
		if len(limits) != 2 || limits[0] == nil || limits[1] == nil {
			t.Fatalf("limits %v", limits)
		}
		end := sdk.UnixSeconds(done)
		if end.IsZero() { // no instant: the turn ended now
			end = now
		}
		for _, l := range limits {
			if !l.ResetsAt.IsZero() && !l.ResetsAt.After(end) {
				t.Fatalf("reset %v is not after the turn's end %v", l.ResetsAt, end)
			}
			if len(l.Evidence) > sdk.MaxLimitEvidence || !utf8.ValidString(l.Evidence) {
				t.Fatalf("evidence of %d bytes, valid UTF-8 %v", len(l.Evidence), utf8.ValidString(l.Evidence))
			}
			if _, err := json.Marshal(l); err != nil {
				t.Fatal(err)
			}
		}
		if r := limits[0].ResetsAt; !r.IsZero() && r.Unix() != reset {
			t.Fatalf("usage reset %v, codex said %d", r, reset)
		}
		if r := limits[1].ResetsAt; !r.IsZero() && r.Sub(end) > maxRetryIn {
			t.Fatalf("rate reset %v is more than %v after %v", r, maxRetryIn, end)
		}
	})
}

// FuzzLimit feeds a snapshot and a failed turn of any error info and
// message: the limit, if any, is one of the kinds, within its bounds.
func FuzzLimit(f *testing.F) {
	f.Add(`"usageLimitExceeded"`, usageMsg, int64(at), int64(at+3))
	f.Add(`"rateLimitExceeded"`, rateMsg, int64(at), int64(0))
	f.Add(`{"responseTooManyFailedAttempts":{"httpStatusCode":429}}`, retryMsg, int64(at), int64(-1))
	f.Add(`"serverOverloaded"`, overloadMsg, int64(-1), int64(sdk.MaxUnixSeconds+1))
	f.Add(`{"httpConnectionFailed":{"httpStatusCode":402}}`, "try again in 1e400s", int64(0), int64(at))
	f.Fuzz(func(t *testing.T, info, message string, done, reset int64) {
		m, _ := json.Marshal(message)
		turn := fmt.Sprintf(`{"method":"turn/completed","params":{"threadId":"T","turn":{"completedAt":%d,"error":{"codexErrorInfo":%s,"message":%s},"id":"u","status":"failed"}}}`,
			done, info, m)
		evs := feed(newNormalizer("T", "/w"), fmt.Sprintf(snapshotAt, reset, reset, 100))
		var msg notification
		if json.Unmarshal([]byte(turn), &msg) != nil {
			return
		}
		evs = append(evs, newNormalizer("T", "/w").notification(msg.Method, msg.Params)...)
		for _, ev := range evs {
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
