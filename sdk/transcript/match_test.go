package transcript

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestMatch(t *testing.T) {
	for _, tc := range []struct {
		name, exp, act string
		diffs          []string
	}{
		{"equal, keys in another order", `{"a":1,"b":[1,2]}`, `{"b":[1,2],"a":1}`, nil},
		{"numbers compare by value", `{"a":1}`, `{"a":1.0}`, nil},
		{"any matches a value", `{"a":"<any>"}`, `{"a":{"x":[1]}}`, nil},
		{"any matches a missing key", `{"a":"<any>","b":1}`, `{"b":1}`, nil},
		{"workspace", `{"p":"<workspace>/f.go"}`, `{"p":"/ws/f.go"}`, nil},
		{"workspace inside a string", `{"p":"cd <workspace> && ls <workspace>/x"}`, `{"p":"cd /ws && ls /ws/x"}`, nil},
		{"workspace mismatch", `{"p":"<workspace>"}`, `{"p":"/other"}`, []string{`$.p: expected "/ws", got "/other"`}},
		{"missing key", `{"a":1,"b":2}`, `{"a":1}`, []string{"$.b: missing (expected 2)"}},
		{"extra key", `{"a":1}`, `{"a":1,"c":3}`, []string{"$.c: not expected (got 3)"}},
		{"array length", `{"a":[1]}`, `{"a":[1,2]}`, []string{"$.a: expected 1 elements, got 2"}},
		{"nested", `{"a":[{"b":"x"}]}`, `{"a":[{"b":"y"}]}`, []string{`$.a[0].b: expected "x", got "y"`}},
		{"type", `{"a":{}}`, `{"a":[]}`, []string{"$.a: expected an object, got []"}},
		{"array type", `{"a":[]}`, `{"a":{}}`, []string{"$.a: expected an array, got {}"}},
		{"number type", `{"a":1}`, `{"a":"1"}`, []string{`$.a: expected 1, got "1"`}},
		{"request ids are rebound, not compared", `{"id":0,"method":"m"}`, `{"id":9,"method":"m"}`, nil},
		{"response ids are compared", `{"id":0,"result":1}`, `{"id":9,"result":1}`, []string{"$.id: expected 0, got 9"}},
		{"control request ids are rebound", `{"type":"control_request","request_id":"req_1_ab","request":{"subtype":"interrupt"}}`,
			`{"type":"control_request","request_id":"req_7_ff","request":{"subtype":"interrupt"}}`, nil},
		{"control responses are compared", `{"type":"control_response","response":{"request_id":"x"}}`,
			`{"type":"control_response","response":{"request_id":"y"}}`, []string{`$.response.request_id: expected "x", got "y"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := NewMatcher("/ws").Match([]byte(tc.exp), []byte(tc.act))
			var mm *Mismatch
			if tc.diffs == nil {
				if err != nil {
					t.Fatalf("unexpected mismatch: %v", err)
				}
				return
			}
			if !errors.As(err, &mm) {
				t.Fatalf("err = %v, want a mismatch", err)
			}
			if strings.Join(mm.Diffs, "|") != strings.Join(tc.diffs, "|") {
				t.Errorf("diffs = %q, want %q", mm.Diffs, tc.diffs)
			}
		})
	}
}

func TestMatchRejectsNonJSON(t *testing.T) {
	m := NewMatcher("/ws")
	if err := m.Match([]byte(`{`), []byte(`{}`)); err == nil || !strings.Contains(err.Error(), "expected frame is not JSON") {
		t.Errorf("bad expectation: %v", err)
	}
	var mm *Mismatch
	if err := m.Match([]byte(`{}`), []byte(`Warning: x`)); !errors.As(err, &mm) || !strings.Contains(mm.Error(), "actual frame is not JSON") {
		t.Errorf("bad actual frame: %v", err)
	}
}

func TestRewriteRebindsResponsesAndWorkspace(t *testing.T) {
	m := NewMatcher("/ws")
	if err := m.Match([]byte(`{"jsonrpc":"2.0","id":3,"method":"m"}`), []byte(`{"jsonrpc":"2.0","id":"abc","method":"m"}`)); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ in, want string }{
		{`{"jsonrpc":"2.0","id":3,"result":{"p":"<workspace>/x"}}`, `{"id":"abc","jsonrpc":"2.0","result":{"p":"/ws/x"}}`},
		{`{"jsonrpc":"2.0","id":4,"result":{}}`, `{"jsonrpc":"2.0","id":4,"result":{}}`}, // unbound: unchanged bytes
		{`{"jsonrpc":"2.0","id":3,"method":"peer/request"}`, `{"jsonrpc":"2.0","id":3,"method":"peer/request"}`},
		{`["<workspace>"]`, `["/ws"]`},
		{`{"title":"Write <workspace>/a.txt"}`, `{"title":"Write /ws/a.txt"}`},
		{`{"p":"\u003cworkspace\u003e/x"}`, `{"p":"/ws/x"}`}, // as encoding/json escapes it
		{`{"method":"session/update","params":{"sessionId":"s"}}`, `{"method":"session/update","params":{"sessionId":"s"}}`},
		{`{"changes":{"<workspace>/a.txt":{"type":"add"}}}`, `{"changes":{"/ws/a.txt":{"type":"add"}}}`}, // a map keyed by path
	} {
		got, err := m.Rewrite([]byte(tc.in))
		if err != nil || string(got) != tc.want {
			t.Errorf("Rewrite(%s) = %s, %v; want %s", tc.in, got, err, tc.want)
		}
	}
	if err := m.Match([]byte(`{"type":"control_request","request_id":"req_1_ab","request":{}}`),
		[]byte(`{"type":"control_request","request_id":"req_9_cd","request":{}}`)); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ in, want string }{
		{`{"type":"control_response","response":{"subtype":"success","request_id":"req_1_ab","response":{}}}`,
			`{"response":{"request_id":"req_9_cd","response":{},"subtype":"success"},"type":"control_response"}`},
		// The provider's own requests keep their ids.
		{`{"type":"control_request","request_id":"req_1_ab","request":{"subtype":"can_use_tool"}}`,
			`{"type":"control_request","request_id":"req_1_ab","request":{"subtype":"can_use_tool"}}`},
		{`{"type":"control_response","response":"odd"}`, `{"type":"control_response","response":"odd"}`},
	} {
		got, err := m.Rewrite([]byte(tc.in))
		if err != nil || string(got) != tc.want {
			t.Errorf("Rewrite(%s) = %s, %v; want %s", tc.in, got, err, tc.want)
		}
	}
	if _, err := m.Rewrite([]byte(`{`)); err == nil {
		t.Error("Rewrite of bad JSON should fail")
	}
}

func FuzzMatch(f *testing.F) {
	f.Add([]byte(`{"id":1,"method":"m","params":{"a":"<any>"}}`), []byte(`{"id":2,"method":"m","params":{"a":3}}`))
	f.Add([]byte(`[1,"<workspace>/x",{"b":null}]`), []byte(`[1.0,"/ws/x",{"b":null}]`))
	f.Fuzz(func(t *testing.T, exp, act []byte) {
		m := NewMatcher("/ws")
		_ = m.Match(exp, act)
		// The shortcut for frames Rewrite leaves alone changes no result.
		fast, ferr := m.Rewrite(act)
		slow, serr := m.rewrite(act)
		if (ferr == nil) != (serr == nil) || string(fast) != string(slow) {
			t.Fatalf("Rewrite(%s) = %s, %v; without the shortcut %s, %v", act, fast, ferr, slow, serr)
		}
		// A frame always matches itself (when it holds no placeholders).
		if !strings.Contains(string(exp), "<") {
			if err := NewMatcher("/ws").Match(exp, exp); err != nil {
				var mm *Mismatch
				if errors.As(err, &mm) {
					t.Fatalf("frame does not match itself: %v", err)
				}
			}
		}
	})
}

// The provider answers every client frame but a JSON-RPC notification or
// response and a control_response.
func TestAnswered(t *testing.T) {
	got := map[string]bool{}
	for _, f := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize"}`,
		`{"jsonrpc":"2.0","method":"initialized"}`,
		`{"jsonrpc":"2.0","id":7,"result":{}}`,
		`{"jsonrpc":"2.0","id":7,"error":{"code":1}}`,
		`{"type":"control_request","request_id":"r1","request":{"subtype":"interrupt"}}`,
		`{"type":"control_response","response":{"request_id":"r1"}}`,
		`{"type":"user","message":{}}`,
		`{"http":"request","method":"GET","path":"/event"}`,
		`not json`,
	} {
		got[f] = Answered([]byte(f))
	}
	want := map[string]bool{
		`{"jsonrpc":"2.0","id":1,"method":"initialize"}`:                                 true,
		`{"jsonrpc":"2.0","method":"initialized"}`:                                       false,
		`{"jsonrpc":"2.0","id":7,"result":{}}`:                                           false,
		`{"jsonrpc":"2.0","id":7,"error":{"code":1}}`:                                    false,
		`{"type":"control_request","request_id":"r1","request":{"subtype":"interrupt"}}`: true,
		`{"type":"control_response","response":{"request_id":"r1"}}`:                     false,
		`{"type":"user","message":{}}`:                                                   true,
		`{"http":"request","method":"GET","path":"/event"}`:                              true,
		`not json`: true,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Answered (-want +got):\n%s", diff)
	}
}
