package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/baton-run/baton/sdk"
	"github.com/baton-run/baton/sdk/plugintest"
)

func TestMain(m *testing.M) { plugintest.Main(m) }

const testdata = "../../testdata/acp"

func TestDescribe(t *testing.T) {
	p := plugintest.Start(t, plugintest.Build(t, "."))
	c := p.Description.Capabilities
	if c.NativeSteering || c.NativeRollback || !c.Interrupt || !c.Approvals || p.Description.WireProtocol != "acp/1" {
		t.Fatalf("description = %+v; want acp/1 with interrupt and approvals, no native steering or rollback", p.Description)
	}
}

// TestTranscripts replays every ACP scenario (level 3: raw transcript to
// normalized events) through the real plugin binary and the replay peer:
// each turn ends completed, its assistant text is what the agent sent, and
// the peer saw exactly the frames it expected.
func TestTranscripts(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(testdata, "*.ndjson"))
	bin := plugintest.Build(t, ".")
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".ndjson")
		msgFile := strings.TrimSuffix(f, ".ndjson") + ".messages"
		if _, err := os.Stat(msgFile); err != nil {
			continue // a transcript for a test of its own
		}
		if _, err := os.Stat(strings.TrimSuffix(f, ".ndjson") + ".exit"); err == nil {
			continue // a run that fails by design (a limit): a test of its own
		}
		if _, err := os.Stat(strings.TrimSuffix(f, ".ndjson") + ".mcp"); err == nil {
			continue // a session with MCP servers: a test of its own (mcp_test.go)
		}
		t.Run(name, func(t *testing.T) {
			p := plugintest.Start(t, bin)
			s := p.Open(t, f, t.TempDir())
			want := plugintest.ACPReplies(t, f)
			turn := 0
			for g, group := range plugintest.ReadGroups(t, msgFile) {
				if g > 0 {
					// The provider starts again and resumes its thread.
					s = s.Resume(t)
				}
				for _, m := range group {
					s.StartTurn(t, m)
					evs := s.WaitTurn(t)
					term := evs[len(evs)-1]
					if term.Status != sdk.TurnCompleted || !term.ThreadUsable {
						t.Fatalf("turn %d ended %s (%+v); want completed and usable", turn+1, term.Status, term.Failure)
					}
					if got := plugintest.ItemText(evs, "", sdk.ItemAssistantMessage); got != want[turn] {
						t.Errorf("turn %d assistant text = %q, want %q", turn+1, got, want[turn])
					}
					plugintest.CheckItemsClosed(t, evs)
					turn++
				}
			}
			s.Close(t)
		})
	}
}

// TestFileSystemStaysInsideCwd: reads and writes inside the session's cwd
// work; paths outside it, and requests the client does not offer, get
// errors; junk on stdout and unknown updates become diagnostics.
func TestFileSystemStaysInsideCwd(t *testing.T) {
	p := plugintest.Start(t, plugintest.Build(t, "."))
	ws, outside := t.TempDir(), t.TempDir()
	// A link inside the cwd that leads out of it (dangling until written).
	if err := os.Symlink(filepath.Join(outside, "dir"), filepath.Join(ws, "link")); err != nil {
		t.Fatal(err)
	}
	s := p.Open(t, filepath.Join(testdata, "fs_boundary.ndjson"), ws)
	s.StartTurn(t, "Check the files")
	evs := s.WaitTurn(t)
	if b, err := os.ReadFile(filepath.Join(ws, "notes", "b.txt")); err != nil || string(b) != "written\n" {
		t.Errorf("notes/b.txt = %q, %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(ws), "escaped.txt")); err == nil {
		t.Error("a write outside the cwd happened")
	}
	if _, err := os.Stat(filepath.Join(outside, "dir", "escaped.txt")); err == nil {
		t.Error("a write through a symlink left the cwd")
	}
	var diags []string
	for _, ev := range evs {
		if ev.Kind == sdk.EventDiagnostic {
			diags = append(diags, ev.Title)
			if ev.RawFrame == 0 {
				t.Errorf("diagnostic %q names no raw frame", ev.Title)
			}
		}
	}
	for _, want := range []string{"malformed frame", "unhandled agent method terminal/create", "unknown session/update future_kind"} {
		found := false
		for _, d := range diags {
			found = found || d == want
		}
		if !found {
			t.Errorf("no diagnostic %q in %q", want, diags)
		}
	}
	s.Close(t)
}

// A session the agent no longer has: session/load is refused (as
// claude-code-acp 0.16.2 answers it), and the plugin starts a fresh
// session, reported as not resumed, so that the host tells it the thread
// so far instead of failing the run.
func TestResumeOfAGoneSessionStartsAfresh(t *testing.T) {
	p := plugintest.Start(t, plugintest.Build(t, "."))
	s := p.Open(t, filepath.Join(testdata, "resume_unknown.ndjson"), t.TempDir())
	s.StartTurn(t, "Remember the word: pineapple.")
	s.WaitTurn(t)
	old := s.Open.ProviderThreadRef
	s = s.Resume(t)
	if s.Open.Resumed || s.Open.ProviderThreadRef == old || s.Open.ProviderThreadRef != "7f3e2a10-5b6c-4d8e-9f01-23456789abcd" {
		t.Fatalf("open after a refused load: %+v; want a fresh session (not %s), not resumed", s.Open, old)
	}
	s.StartTurn(t, "What was the word?")
	evs := s.WaitTurn(t)
	if got := plugintest.ItemText(evs, "", sdk.ItemAssistantMessage); got != "I don't know which word you mean." {
		t.Errorf("assistant text = %q", got)
	}
	if term := evs[len(evs)-1]; term.Status != sdk.TurnCompleted {
		t.Errorf("turn ended %+v", term)
	}
	s.Close(t)
}
