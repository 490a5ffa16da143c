package main

import (
	"io"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The providers baton knows out of the box: each one's usual command (a
// copy: a caller's change to it is its own), none for another plugin, and
// the help's names for them.
func TestProviders(t *testing.T) {
	got := map[string][]string{}
	for _, name := range []string{"acp", "claude", "codex", "cursor", "opencode", "myagent"} {
		got[name] = defaultCommand(name)
	}
	want := map[string][]string{"acp": {"claude-code-acp"}, "claude": {"claude"}, "codex": {"codex", "app-server"},
		"cursor": {"cursor-agent"}, "opencode": {"opencode"}, "myagent": nil}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("usual commands (-want +got):\n%s", d)
	}
	got["codex"][0] = "changed"
	if c := defaultCommand("codex"); c[0] != "codex" {
		t.Errorf("a caller changed the usual command: %q", c)
	}
	const help = "Baton runs coding agents (ACP, Codex, Claude, Cursor, OpenCode) behind one\ndurable model of threads and runs.\n"
	if long := newRoot(nil, io.Discard, io.Discard).Long; !strings.HasPrefix(long, help) {
		t.Errorf("baton's help begins %q; want %q", long[:min(len(long), len(help))], help)
	}
}
