package sdk

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// A provider's exit reads the same whoever fills it in: who, how (status
// or signal), when, what it printed instead of a frame (quoted, cut, with
// how many more), and the end of its stderr (of how many lines), bounded
// and escaped.
func TestProviderExitSays(t *testing.T) {
	long := strings.Repeat("y", 300)
	for name, tc := range map[string]struct {
		exit ProviderExit
		want string
	}{
		"status": {ProviderExit{Provider: "codex", Status: 2}, "codex exited with status 2"},
		"signal and when": {ProviderExit{Provider: "the agent", Signal: "SIGKILL", When: "during the turn"},
			"the agent was killed by SIGKILL during the turn"},
		"everything": {ProviderExit{Provider: "claude", Protocol: "stream-json", When: "during the turn", Status: 1,
			NotFrame: &NotFrame{Head: []byte("x 1"), Len: 3, More: 9999}, Stderr: []string{"e 9999", "e 10000"}, StderrLines: 10000},
			`claude exited with status 1 during the turn: it printed "x 1", not stream-json, and 9999 more lines that were not frames; ` +
				`its stderr ends: e 9999; e 10000 (the last 2 of 10000 lines)`},
		"one more line": {ProviderExit{Provider: "codex", Protocol: "JSON-RPC", Status: 1, NotFrame: &NotFrame{Head: []byte("a"), Len: 1, More: 1}},
			`codex exited with status 1: it printed "a", not JSON-RPC, and 1 more line that was not a frame`},
		"a long line": {ProviderExit{Provider: "codex", Protocol: "JSON-RPC", Status: 1, NotFrame: &NotFrame{Head: []byte(long), Len: 300}},
			`codex exited with status 1: it printed "` + long[:200] + `…" (300 bytes in all), not JSON-RPC`},
		"a line too long to read": {ProviderExit{Provider: "codex", Protocol: "JSON-RPC", Status: 1,
			NotFrame: &NotFrame{Head: []byte("\xffz"), Len: 20 << 20, Limit: 16 << 20}},
			`codex exited with status 1: it printed a line over the limit of 16777216 bytes: "\xffz" (20971520 bytes in all)`},
		"stderr alone, counted, blank lines dropped": {ProviderExit{Provider: "opencode", Status: 1,
			Stderr: []string{"  ", "\x1b[31mboom\x1b[0m", "bye"}, StderrLines: 40},
			`opencode exited with status 1: \x1b[31mboom\x1b[0m; bye (the last 2 of 40 lines of its stderr)`},
		"stderr all told": {ProviderExit{Provider: "opencode", Status: 1, Stderr: []string{"a", "b"}, StderrLines: 2},
			`opencode exited with status 1: a; b`},
		"a long stderr": {ProviderExit{Provider: "opencode", Status: 1, Stderr: []string{"start" + long + long + "end"}},
			`opencode exited with status 1: …` + (long + long + "end")[603-512:]},
	} {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, tc.exit.Error()); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if !errors.Is(&tc.exit, ErrProviderExited) {
				t.Errorf("not of kind ErrProviderExited")
			}
		})
	}
}
