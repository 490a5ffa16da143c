package domain

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/baton-run/baton/sdk"
)

// TestSDKConversionsKeepEveryField: each of the provider's terms, filled
// in every field the sdk has, converts to (or from) the domain's own type
// whose JSON is the same bytes: the log stores what it always stored, and
// no field is dropped at the edge. A field the sdk adds fails the fixture
// check until it is filled here and the edge decides whether the log
// keeps it.
func TestSDKConversionsKeepEveryField(t *testing.T) {
	at := time.Date(2026, 11, 30, 13, 0, 0, 0, time.UTC)
	command := sdk.ProviderCommand{Argv: []string{"codex", "app-server"}, Env: []string{"A=1"}}
	option := sdk.RequestOption{ID: "o1", Label: "Allow", Kind: sdk.OptionAllowOnce}
	usage := sdk.Usage{InputTokens: 1, OutputTokens: 2, CachedInputTokens: 3, ReasoningTokens: 4, TotalTokens: 10, CostMicros: 5, Model: "m"}
	failure := sdk.Failure{Code: "crash", Message: "boom"}
	rateLimit := sdk.RateLimit{ResetsAt: at, UsedPercent: 42.5, Scope: "five_hour"}
	limit := sdk.Limit{Kind: sdk.LimitUsageWindow, ResetsAt: at, Scope: "five_hour", Message: "usage limit reached", Evidence: "{}"}
	for _, c := range []struct {
		name        string
		sdk, domain any
	}{
		{"a provider command, to the sdk", command, CommandToSDK(ProviderCommand{Argv: command.Argv, Env: command.Env})},
		{"a decision, to the sdk", sdk.DecisionAcceptForSession, DecisionToSDK(DecisionAcceptForSession)},
		{"a decision", sdk.DecisionCancel, decisionFromSDK(sdk.DecisionCancel)},
		{"a request kind", sdk.RequestUserInput, requestKindFromSDK(sdk.RequestUserInput)},
		{"request options", []sdk.RequestOption{option}, optionsFromSDK([]sdk.RequestOption{option})},
		{"usage", usage, usageFromSDK(usage)},
		{"a failure", &failure, failureFromSDK(&failure)},
		{"a rate limit", rateLimit, rateLimitFromSDK(rateLimit)},
		{"a limit", limit, limitFromSDK(limit)},
	} {
		t.Run(c.name, func(t *testing.T) {
			everyFieldSet(t, reflect.ValueOf(c.sdk), reflect.TypeOf(c.sdk).String())
			want, err := json.Marshal(c.sdk)
			if err != nil {
				t.Fatal(err)
			}
			got, err := json.Marshal(c.domain)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != string(want) {
				t.Errorf("converted, its JSON is\n%s\nwant the sdk's\n%s", got, want)
			}
		})
	}
}

// everyFieldSet fails the test for each field of v (through pointers and
// slices) that holds its zero value: a fixture that leaves a field out
// cannot show that the field crosses the edge.
func everyFieldSet(t *testing.T, v reflect.Value, path string) {
	t.Helper()
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			everyFieldSet(t, v.Elem(), path)
		}
	case reflect.Slice:
		if v.Len() > 0 {
			everyFieldSet(t, v.Index(0), path+"[0]")
		}
	case reflect.Struct:
		for i := range v.NumField() {
			f := v.Type().Field(i)
			if v.Field(i).IsZero() {
				t.Errorf("the fixture leaves %s.%s unset", path, f.Name)
			}
		}
	}
}

// TestConversionsKeepNone: a provider that says nothing of a failure or
// of a request's options leaves the stored field out.
func TestConversionsKeepNone(t *testing.T) {
	if f := failureFromSDK(nil); f != nil {
		t.Errorf("no failure converts to %+v, want none", f)
	}
	if o := optionsFromSDK(nil); o != nil {
		t.Errorf("no options convert to %#v, want none", o)
	}
}
