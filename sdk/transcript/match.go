package transcript

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/big"
	"sort"
	"strings"
)

// Placeholders in expected frames.
const (
	// Any matches any value, and a missing key.
	Any = "<any>"
	// Workspace stands for the test's working directory wherever it appears
	// in a string ("<workspace>/src/main.go", "Write <workspace>/a.txt").
	Workspace = "<workspace>"
)

// Matcher compares outbound frames with expectations and rewrites inbound
// frames. It rebinds request ids: an expected request's id (the id recorded
// from the real client) is bound to the id the plugin really sent, and
// recorded responses to it carry the real id. It is not safe for concurrent
// use.
type Matcher struct {
	workspace string
	bindings  map[string]json.RawMessage
}

// NewMatcher returns a matcher for a workspace directory.
func NewMatcher(workspace string) *Matcher {
	return &Matcher{workspace: workspace, bindings: map[string]json.RawMessage{}}
}

// Mismatch is an outbound frame that differs from its expectation.
type Mismatch struct {
	Expected, Actual json.RawMessage
	Diffs            []string
}

func (m *Mismatch) Error() string {
	return fmt.Sprintf("frame differs from the expectation:\n  expected: %s\n  actual:   %s\n  differences:\n    %s",
		m.Expected, m.Actual, strings.Join(m.Diffs, "\n    "))
}

func parse(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if len(bytes.Trim(b[dec.InputOffset():], " \t\r\n")) > 0 { // JSON's whitespace only
		return nil, fmt.Errorf("more than one JSON value")
	}
	return v, nil
}

func marshal(v any) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v) // values from parse always encode
	return bytes.TrimRight(buf.Bytes(), "\n")
}

// isRequest says whether a frame is a JSON-RPC request (has an id and a
// method): its id is chosen by the sender.
func isRequest(obj map[string]any) bool {
	_, hasID := obj["id"]
	_, hasMethod := obj["method"]
	return hasID && hasMethod
}

// Claude Code's control protocol: a control_request carries a request_id
// its sender picks, and the control_response to it carries that id inside
// its response object.
const (
	controlRequest  = "control_request"
	controlResponse = "control_response"
	controlID       = "request_id"
)

// requestIDKey names the member holding a request's sender-chosen id: "id"
// for a JSON-RPC request, "request_id" for a control request, "" for any
// other frame.
func requestIDKey(obj map[string]any) string {
	if isRequest(obj) {
		return "id"
	}
	if _, ok := obj[controlID]; ok && obj["type"] == controlRequest {
		return controlID
	}
	return ""
}

// Answered says whether the provider answers a client frame, so that the
// provider's frames after it may be its answer, which the client waits
// for: every frame but a JSON-RPC notification (a method, no id) or
// response (an id, no method), or a Claude Code control_response, which
// get none. (The replay peer does not hold a frame the client sends right
// behind one of these as early: the client has nothing to wait for.) An
// HTTP request is always answered.
func Answered(frame []byte) bool {
	var obj map[string]json.RawMessage
	if json.Unmarshal(frame, &obj) != nil {
		return true
	}
	if _, ok := obj["http"]; ok {
		return true
	}
	_, hasID := obj["id"]
	_, hasMethod := obj["method"]
	if hasMethod != hasID {
		return false // a notification, or a response
	}
	var typ string
	_ = json.Unmarshal(obj["type"], &typ)
	return typ != controlResponse
}

// Match compares an actual outbound frame with the expected one. A *Mismatch
// lists every difference; an actual frame that is not JSON is an error too.
func (m *Matcher) Match(expected, actual []byte) error {
	exp, err := parse(expected)
	if err != nil {
		return fmt.Errorf("expected frame is not JSON: %v", err)
	}
	act, err := parse(actual)
	if err != nil {
		return &Mismatch{Expected: expected, Actual: actual, Diffs: []string{"actual frame is not JSON: " + err.Error()}}
	}
	var diffs []string
	var bind func()
	eo, eIsObj := exp.(map[string]any)
	ao, aIsObj := act.(map[string]any)
	if eIsObj && aIsObj {
		// The sender picks request ids: bind rather than compare.
		if key := requestIDKey(eo); key != "" && key == requestIDKey(ao) {
			recorded, real := canonical(eo[key]), marshal(ao[key])
			bind = func() { m.bindings[recorded] = real }
			exp, act = without(eo, key), without(ao, key)
		}
	}
	m.compare("$", exp, act, &diffs)
	if len(diffs) > 0 {
		return &Mismatch{Expected: expected, Actual: actual, Diffs: diffs}
	}
	if bind != nil {
		bind()
	}
	return nil
}

func without(o map[string]any, key string) map[string]any {
	c := make(map[string]any, len(o))
	for k, v := range o {
		if k != key {
			c[k] = v
		}
	}
	return c
}

func canonical(v any) string { return string(marshal(v)) }

func (m *Matcher) compare(path string, exp, act any, diffs *[]string) {
	if s, ok := exp.(string); ok {
		if s == Any {
			return
		}
		exp = strings.ReplaceAll(s, Workspace, m.workspace)
	}
	switch e := exp.(type) {
	case map[string]any:
		a, ok := act.(map[string]any)
		if !ok {
			*diffs = append(*diffs, fmt.Sprintf("%s: expected an object, got %s", path, marshal(act)))
			return
		}
		for _, k := range sortedKeys(e) {
			av, present := a[k]
			if !present {
				if s, ok := e[k].(string); ok && s == Any {
					continue
				}
				*diffs = append(*diffs, fmt.Sprintf("%s.%s: missing (expected %s)", path, k, marshal(e[k])))
				continue
			}
			m.compare(path+"."+k, e[k], av, diffs)
		}
		for _, k := range sortedKeys(a) {
			if _, ok := e[k]; !ok {
				*diffs = append(*diffs, fmt.Sprintf("%s.%s: not expected (got %s)", path, k, marshal(a[k])))
			}
		}
	case []any:
		a, ok := act.([]any)
		if !ok {
			*diffs = append(*diffs, fmt.Sprintf("%s: expected an array, got %s", path, marshal(act)))
			return
		}
		if len(a) != len(e) {
			*diffs = append(*diffs, fmt.Sprintf("%s: expected %d elements, got %d", path, len(e), len(a)))
			return
		}
		for i := range e {
			m.compare(fmt.Sprintf("%s[%d]", path, i), e[i], a[i], diffs)
		}
	case json.Number:
		a, ok := act.(json.Number)
		if !ok || !sameNumber(e, a) {
			*diffs = append(*diffs, fmt.Sprintf("%s: expected %s, got %s", path, e, marshal(act)))
		}
	default:
		if canonical(exp) != canonical(act) {
			*diffs = append(*diffs, fmt.Sprintf("%s: expected %s, got %s", path, marshal(exp), marshal(act)))
		}
	}
}

func sameNumber(a, b json.Number) bool {
	if a == b {
		return true
	}
	x, ok1 := new(big.Float).SetString(string(a))
	y, ok2 := new(big.Float).SetString(string(b))
	return ok1 && ok2 && x.Cmp(y) == 0
}

func sortedKeys(m map[string]any) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// Rewrite prepares a recorded inbound frame for sending: a response to a
// rebound request gets the id the client really used, and workspace
// placeholders become the real directory.
func (m *Matcher) Rewrite(frame []byte) ([]byte, error) {
	if !m.mayRewrite(frame) {
		if !json.Valid(frame) {
			return nil, errors.New("inbound frame is not JSON")
		}
		return frame, nil
	}
	return m.rewrite(frame)
}

// rewrite is Rewrite without the shortcut for frames it leaves alone.
func (m *Matcher) rewrite(frame []byte) ([]byte, error) {
	v, err := parse(frame)
	if err != nil {
		return nil, fmt.Errorf("inbound frame is not JSON: %v", err)
	}
	changed := false
	if o, ok := v.(map[string]any); ok && !isRequest(o) {
		if o["type"] == controlResponse {
			o, _ = o["response"].(map[string]any)
			if o != nil {
				changed = m.rebind(o, controlID) || changed
			}
		} else {
			changed = m.rebind(o, "id")
		}
	}
	v = m.substitute(v, &changed)
	if !changed {
		return frame, nil
	}
	return marshal(v), nil
}

// mayRewrite says whether Rewrite might change a frame: it names the
// workspace (a placeholder, plain or escaped), or it may carry an id to
// rebind. Most frames (a provider's notifications) do neither and are
// written as they are, without being decoded.
func (m *Matcher) mayRewrite(frame []byte) bool {
	if bytes.Contains(frame, []byte("workspace")) {
		return true
	}
	return len(m.bindings) > 0 && (bytes.Contains(frame, []byte(`"id"`)) || bytes.Contains(frame, []byte(`"`+controlID+`"`)))
}

// rebind gives o[key] the id the client really used for the request it
// answers, if that request was rebound.
func (m *Matcher) rebind(o map[string]any, key string) bool {
	id, ok := o[key]
	if !ok {
		return false
	}
	real, ok := m.bindings[canonical(id)]
	if !ok {
		return false
	}
	o[key] = json.RawMessage(real)
	return true
}

func (m *Matcher) substitute(v any, changed *bool) any {
	switch t := v.(type) {
	case string:
		if strings.Contains(t, Workspace) {
			*changed = true
			return strings.ReplaceAll(t, Workspace, m.workspace)
		}
	case map[string]any:
		renamed := map[string]any{}
		for k, x := range t {
			x = m.substitute(x, changed)
			if strings.Contains(k, Workspace) { // a map keyed by path
				*changed = true
				delete(t, k)
				renamed[strings.ReplaceAll(k, Workspace, m.workspace)] = x
				continue
			}
			t[k] = x
		}
		maps.Copy(t, renamed)
	case []any:
		for i, x := range t {
			t[i] = m.substitute(x, changed)
		}
	}
	return v
}
