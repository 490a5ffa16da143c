package codex

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/sourcegraph/jsonrpc2"

	"github.com/baton-run/baton/sdk"
)

// page is a thread/turns/list result: turn ids newest first ("id!" is a
// turn in progress) and the next cursor ("" for null).
func page(next string, ids ...string) turnsListResult {
	var p turnsListResult
	for _, id := range ids {
		t := turn{ID: strings.TrimSuffix(id, "!"), Status: "completed"}
		if strings.HasSuffix(id, "!") {
			t.Status = "inProgress"
		}
		p.Data = append(p.Data, t)
	}
	if next != "" {
		p.NextCursor = json.RawMessage(jsonString(next))
	} else {
		p.NextCursor = json.RawMessage("null")
	}
	return p
}

// TestTurnPages: the oldest turn a rollback drops is the want-th newest,
// read from as many pages as it takes, and checked against the host's.
func TestTurnPages(t *testing.T) {
	for _, tc := range []struct {
		name   string
		want   int
		before string
		pages  []turnsListResult
		// cursors the collector asks to follow, and how many turns each
		// next page must hold
		follow []string
		target string
		err    error  // the sdk error the target is, when it fails
		errHas string // what the failure says
	}{
		{name: "one page", want: 2, pages: []turnsListResult{page("c1", "u3", "u2")}, target: "u2"},
		{name: "the host's turn checks", want: 2, before: "u2", pages: []turnsListResult{page("c1", "u3", "u2")}, target: "u2"},
		{name: "a page longer than asked", want: 1, pages: []turnsListResult{page("", "u3", "u2")}, target: "u3"},
		{name: "a short page is followed", want: 3, before: "u1",
			pages:  []turnsListResult{page("c1", "u3"), page("c2", "u2"), page("", "u1")},
			follow: []string{`"c1" 2`, `"c2" 1`}, target: "u1"},
		{name: "fewer turns than asked", want: 3, pages: []turnsListResult{page("", "u2", "u1")},
			err: sdk.ErrInvalid, errHas: "cannot drop 3 turns: codex has 2"},
		{name: "no turns at all", want: 1, pages: []turnsListResult{page("")},
			err: sdk.ErrInvalid, errHas: "codex has 0"},
		{name: "another turn than the host's", want: 2, before: "u1", pages: []turnsListResult{page("c1", "u3", "u2")},
			err: sdk.ErrInvalid, errHas: "the oldest of the last 2 turns is u2 in codex, but the host expected u1: codex's history differs"},
		{name: "another newest turn than the host's", want: 1, before: "u2", pages: []turnsListResult{page("c1", "u3")},
			err: sdk.ErrInvalid, errHas: "the newest turn is u3 in codex, but the host expected u2: codex's history differs"},
		{name: "a turn in progress", want: 2, pages: []turnsListResult{page("", "u3!", "u2")},
			err: sdk.ErrBusy, errHas: "codex has turn u3 in progress"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := turnPages{want: tc.want}
			var follow []string
			for i, pg := range tc.pages {
				next, err := p.add(pg)
				if err != nil {
					t.Fatalf("page %d: %v", i+1, err)
				}
				if next == nil {
					if i != len(tc.pages)-1 {
						t.Fatalf("stopped after page %d of %d", i+1, len(tc.pages))
					}
					break
				}
				follow = append(follow, fmt.Sprintf("%s %d", next, p.missing()))
			}
			if strings.Join(follow, ", ") != strings.Join(tc.follow, ", ") {
				t.Errorf("followed %q; want %q", follow, tc.follow)
			}
			got, err := p.target(tc.before)
			if tc.err != nil {
				if !errors.Is(err, tc.err) || !strings.Contains(err.Error(), tc.errHas) {
					t.Fatalf("target = %q, %v; want a %v error saying %q", got, err, tc.err, tc.errHas)
				}
				return
			}
			if err != nil || got != tc.target {
				t.Fatalf("target = %q, %v; want %s", got, err, tc.target)
			}
		})
	}
}

// TestTurnPagesBadPages: pages that would make the plugin list forever, or
// name a turn it cannot revert to, are errors.
func TestTurnPagesBadPages(t *testing.T) {
	for _, tc := range []struct {
		name  string
		pages []turnsListResult
		err   string
	}{
		{"an empty page with a cursor", []turnsListResult{page("c1")}, `codex listed no turns but a next page (cursor "c1")`},
		{"the same cursor twice", []turnsListResult{page("c1", "u3"), page("c1", "u2")}, `codex gave the same cursor twice ("c1")`},
		{"a turn without an id", []turnsListResult{{Data: []turn{{Status: "completed"}}}}, "codex listed a turn without an id"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := turnPages{want: 5}
			var err error
			for _, pg := range tc.pages {
				if _, err = p.add(pg); err != nil {
					break
				}
			}
			if err == nil || err.Error() != tc.err {
				t.Fatalf("error %v; want %q", err, tc.err)
			}
		})
	}
}

// TestHistoryMode: codex's thread objects say how the thread keeps its
// history; the normalizer remembers it per thread from the thread/start or
// thread/resume answer and from thread/started, and a thread object that
// does not say keeps what is known.
func TestHistoryMode(t *testing.T) {
	// From the thread/start response of codex 0.171.0 (probe p5_revert), trimmed.
	var res threadResult
	if err := json.Unmarshal([]byte(`{"thread":{"id":"T","forkedFromId":null,"parentThreadId":null,"historyMode":"paginated",`+
		`"model":"baton-scripted","status":{"type":"idle"},"cliVersion":"0.171.0","turns":[]},"model":"baton-scripted"}`), &res); err != nil {
		t.Fatal(err)
	}
	n := newNormalizer("", "/ws")
	n.setRoot(res.Thread.ID)
	n.rememberThread(res.Thread)
	if got := n.historyMode("T"); got != historyPaginated {
		t.Errorf("historyMode after thread/start = %q; want paginated", got)
	}
	n.rememberThread(thread{ID: "T"}) // a codex that does not say
	if got := n.historyMode("T"); got != historyPaginated {
		t.Errorf("historyMode after a thread object without it = %q; want paginated kept", got)
	}
	if evs := feed(n, `{"method":"thread/started","params":{"thread":{"id":"F","historyMode":"other","forkedFromId":"T"}}}`); kinds(evs) != "thread_started" {
		t.Errorf("thread/started of a fork: %s", kinds(evs))
	}
	if got := n.historyMode("F"); got != "other" {
		t.Errorf("historyMode of the thread from thread/started = %q; want other", got)
	}
	if got := n.historyMode("never-seen"); got != "" {
		t.Errorf("historyMode of an unknown thread = %q; want empty", got)
	}
}

// TestRevertNotificationsQuiet: what codex says around a thread/revert
// (its status going notLoaded and idle again, thread/reverted) gives no
// events and no diagnostics.
func TestRevertNotificationsQuiet(t *testing.T) {
	n := newNormalizer("T", "/ws")
	evs := feed(n,
		`{"method":"thread/status/changed","params":{"threadId":"T","status":{"type":"notLoaded"}},"emittedAtMs":1796036208958}`,
		`{"method":"thread/status/changed","params":{"threadId":"T","status":{"type":"idle"}},"emittedAtMs":1796036209029}`,
		`{"method":"thread/reverted","params":{"threadId":"T"},"emittedAtMs":1796036209048}`)
	if len(evs) != 0 {
		t.Errorf("events around a revert: %s", kinds(evs))
	}
}

// TestUnknownMethod: thread/rollback refused as a method codex does not
// have (0.171.0's answer, or JSON-RPC's method-not-found) sends the
// rollback the paginated way; any other failure is the rollback's.
func TestUnknownMethod(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{&jsonrpc2.Error{Code: jsonrpc2.CodeInvalidRequest, Message: "Invalid request: unknown variant `thread/rollback`, expected one of `initialize`, …"}, true},
		{fmt.Errorf("thread/rollback: %w", &jsonrpc2.Error{Code: jsonrpc2.CodeMethodNotFound, Message: "method not found"}), true},
		{&jsonrpc2.Error{Code: jsonrpc2.CodeInvalidRequest, Message: "thread not found"}, false},
		{&jsonrpc2.Error{Code: -32000, Message: "unknown variant"}, false},
		{errors.New("unknown variant"), false},
		{nil, false},
	} {
		if got := unknownMethod(tc.err); got != tc.want {
			t.Errorf("unknownMethod(%v) = %v; want %v", tc.err, got, tc.want)
		}
	}
}
