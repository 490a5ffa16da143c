package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// A provider that prints what is not its protocol and exits fails the run
// with a line that shows what it printed (its first 200 bytes, escaped,
// with its length when cut) and the end of its stderr: a line that is not
// JSON, a 10 MB line, bytes that are not UTF-8. Through the real baton, a
// JSON-RPC plugin of each kind (acp, codex) and the provider a script.
func TestProviderThatPrintsGarbageSaysWhat(t *testing.T) {
	x200 := strings.Repeat("x", 200)
	for _, tc := range []struct{ name, script, why string }{
		{"a line that is not JSON", `echo 'Welcome to the agent'; echo 'Error: no API key' >&2; exit 1`,
			`it printed "Welcome to the agent", not JSON-RPC; its stderr ends: Error: no API key`},
		{"a 10 MB line", `head -c 10485760 /dev/zero | tr '\0' x; echo; echo 'Error: out of memory' >&2; exit 1`,
			`it printed "` + x200 + `…" (10485760 bytes in all), not JSON-RPC; its stderr ends: Error: out of memory`},
		{"not UTF-8", `printf '\377\376garbage\200\n'; printf 'Error:\377 bad\n' >&2; exit 1`,
			`it printed "\xff\xfegarbage\x80", not JSON-RPC; its stderr ends: Error:\xff bad`},
	} {
		for provider, name := range map[string]string{"acp": "acp: the agent", "codex": "codex"} {
			t.Run(provider+"/"+tc.name, func(t *testing.T) {
				script := filepath.Join(t.TempDir(), "agent.sh")
				if err := os.WriteFile(script, []byte("#!/bin/sh\n"+tc.script+"\n"), 0o700); err != nil {
					t.Fatal(err)
				}
				out, errOut, code := baton(t, "run", "--data", t.TempDir(), "--cwd", t.TempDir(),
					"--provider", provider, "--provider-command", script, "hi")
				if code != 1 {
					t.Fatalf("exit %d, want 1\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
				}
				var failed []string
				for _, l := range strings.Split(out, "\n") {
					if strings.HasPrefix(l, "✖ ") {
						failed = append(failed, l)
					}
				}
				want := []string{fmt.Sprintf("✖ run 1 failed: %s exited with status 1 before answering initialize: %s", name, tc.why)}
				if diff := cmp.Diff(want, failed); diff != "" {
					t.Errorf("the failure (-want +got):\n%s\nstdout:\n%s", diff, out)
				}
			})
		}
	}
}
