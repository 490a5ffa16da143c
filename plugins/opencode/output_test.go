package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-run/baton/sdk"
	"github.com/baton-run/baton/sdk/plugintest"
)

// An opencode server that answers what is not what was expected fails the
// session's open with an error that shows the answer, bounded and escaped:
// a body that is not JSON (its first 200 bytes, quoted, with its length),
// a failure status with a long body with control characters (its first
// 1024 bytes, escaped).
func TestAnswersThatAreNotWhatWasExpected(t *testing.T) {
	page := "<html>" + strings.Repeat("Bad Gateway ", 30) + "</html>"
	notText := "\x1b[31mError:\n" + strings.Repeat("y", 1100) // (a transcript's JSON holds only UTF-8)
	for name, tc := range map[string]struct {
		response map[string]any
		want     string
	}{
		"not JSON": {map[string]any{"http": "response", "status": 200, "body": page, "contentType": "text/html"},
			`GET /global/health: the answer is not what was expected (invalid character '<' looking for beginning of value): "` +
				page[:200] + `…" (` + strconv.Itoa(len(page)) + ` bytes in all)`},
		"a failure status without a body": {map[string]any{"http": "response", "status": 502},
			`GET /global/health: status 502`},
		"a failure status": {map[string]any{"http": "response", "status": 502, "body": notText, "contentType": "text/plain"},
			`GET /global/health: status 502: \x1b[31mError:\n` + strings.Repeat("y", 1024-len("\x1b[31mError:\n")) + "…"},
	} {
		t.Run(name, func(t *testing.T) {
			var b strings.Builder
			for _, l := range strings.SplitAfter(readFile(t, filepath.Join(testdata, "simple.ndjson")), "\n") {
				if strings.Contains(l, `"label":"5.response 200"`) {
					f, err := json.Marshal(map[string]any{"type": "emit_inbound", "label": "5.response", "frame": tc.response})
					if err != nil {
						t.Fatal(err)
					}
					l = string(f) + "\n"
				}
				b.WriteString(l)
			}
			path := filepath.Join(t.TempDir(), "answer.ndjson")
			if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
				t.Fatal(err)
			}
			ws := t.TempDir()
			p := start(t)
			_, err := p.OpenSession(context.Background(), sdk.OpenSessionRequest{SessionID: "answer", Cwd: ws,
				Command: plugintest.PeerCommand(path, ws, "")})
			if err == nil {
				t.Fatal("the session opened")
			}
			if diff := cmp.Diff(tc.want, err.Error()); diff != "" {
				t.Errorf("open (-want +got):\n%s", diff)
			}
		})
	}
}
