package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/cobra"

	batonv1 "github.com/baton-run/baton/host/api/baton/v1"
	"github.com/baton-run/baton/host/internal/domain"
)

// showJSON is `baton show --json THREAD`, decoded.
func showJSON(t *testing.T, data, thread string) domain.Thread {
	t.Helper()
	out, errOut, code := baton(t, "show", "--json", "--data", data, thread)
	th, err := readThreadJSON([]byte(out))
	if code != exitOK || err != nil {
		t.Fatalf("show --json: exit %d, %v\n%s\n%s", code, err, out, errOut)
	}
	return th
}

// section is a part of baton show's output ("providers", "handoffs"): its
// lines, each with its runs of spaces made one.
func section(t *testing.T, out, name string) []string {
	t.Helper()
	_, rest, ok := strings.Cut(out, "\n"+name+" (")
	if !ok {
		t.Fatalf("show has no %s:\n%s", name, out)
	}
	body, _, _ := strings.Cut(strings.TrimRight(rest, "\n"), "\n\n")
	var lines []string
	for _, l := range strings.Split(body, "\n")[1:] {
		lines = append(lines, strings.Join(strings.Fields(l), " "))
	}
	return lines
}

// A thread moves from acp to codex (baton switch: recorded, printed with
// the handoff it makes) and back (baton run --thread --provider acp): the
// run starts on acp, in its own conversation resumed, and the handoff made
// for codex is withdrawn; baton show lists both providers and the handoff.
func TestSwitchAndReturn(t *testing.T) {
	data, ws := t.TempDir(), t.TempDir()
	thread, groups := firstACPRun(t, data, ws)
	codex := peerCommand(t, "codex/simple.ndjson")
	out, errOut, code := baton(t, "switch", thread, "--data", data, "--provider", "codex", "--model", "gpt-test",
		"--provider-command", codex, "--handoff-max-bytes", "8192")
	if code != exitOK {
		t.Fatalf("switch: exit %d\n%s\n%s", code, out, errOut)
	}
	th := showJSON(t, data, thread)
	if len(th.Handoffs) != 1 {
		t.Fatalf("handoffs after the switch: %+v", th.Handoffs)
	}
	h := th.Handoffs[0]
	want := fmt.Sprintf("⇄ switched to codex (model gpt-test); handoffs at most 8 KiB\n  ⓘ handoff to codex: run 1, %d bytes\n", h.Bytes)
	if d := cmp.Diff(want, out); d != "" || h.Bytes == 0 {
		t.Errorf("switch printed (-want +got):\n%s", d)
	}
	run1 := th.Runs[0]
	wantBindings := []domain.ProviderBinding{
		{Provider: "acp", Command: th.ProviderBindings[0].Command, SessionID: run1.Attempts[0].SessionID,
			ProviderThreadID: th.ProviderThreads[0].ID, ThreadRef: th.ProviderThreads[0].ProviderRef, SeenThrough: 1, Runs: []int{1}},
		{Provider: "codex", Model: "gpt-test", Command: domain.ProviderCommand{Argv: th.ProviderCommand.Argv}},
	}
	if d := cmp.Diff(wantBindings, th.ProviderBindings); d != "" || th.Provider != "codex" || th.HandoffMaxBytes != 8192 ||
		!strings.Contains(strings.Join(th.ProviderCommand.Argv, " "), "codex/simple.ndjson") {
		t.Errorf("after the switch: provider %s, bound %d, command %v; bindings (-want +got):\n%s", th.Provider, th.HandoffMaxBytes,
			th.ProviderCommand.Argv, d)
	}
	out, _, code = baton(t, "show", "--data", data, "--handoff", h.ID, thread)
	if code != exitOK || out != h.Text || !strings.Contains(out, "User: "+groups[0]) {
		t.Errorf("show --handoff: exit %d\n%s\nwant:\n%s", code, out, h.Text)
	}
	out, _, code = baton(t, "switch", thread, "--data", data, "--provider", "codex")
	if want := "thread " + thread + " already runs on codex (model gpt-test); nothing changed\n"; code != exitOK || out != want {
		t.Errorf("a switch to where the thread is: exit %d %q, want %q", code, out, want)
	}

	// Back to acp with the next message.
	out, errOut, code = baton(t, "run", "--data", data, "--thread", thread, "--provider", "acp", groups[2])
	if code != exitOK || !strings.HasPrefix(out, "⇄ switched to acp\n  ⓘ handoff withdrawn: nothing new to tell\n▶ run 2 queued") ||
		!strings.Contains(out, "The word was pineapple.") {
		t.Fatalf("run --thread --provider acp: exit %d\n%s\n%s", code, out, errOut)
	}
	th = showJSON(t, data, thread)
	wantBindings[0].SessionID, wantBindings[0].SeenThrough, wantBindings[0].Runs = th.Runs[1].Attempts[0].SessionID, 2, []int{1, 2}
	if d := cmp.Diff(wantBindings, th.ProviderBindings); d != "" || th.Provider != "acp" || th.Runs[1].Provider != "acp" {
		t.Errorf("after the return: provider %s, run 2 on %s; bindings (-want +got):\n%s", th.Provider, th.Runs[1].Provider, d)
	}

	out, _, code = baton(t, "show", "--data", data, thread)
	if code != exitOK {
		t.Fatalf("show: exit %d\n%s", code, out)
	}
	wantProviders := []string{
		"acp (current) default model conversation " + th.ProviderThreads[0].ProviderRef + " seen through run 2 ran runs 1-2",
		"codex model gpt-test no conversation has seen no run ran no runs",
	}
	if d := cmp.Diff(wantProviders, section(t, out, "providers")); d != "" {
		t.Errorf("show: providers (-want +got):\n%s\n%s", d, out)
	}
	wantHandoffs := []string{fmt.Sprintf("%s full_thread_summary acp -> codex run 1 %d bytes superseded", h.ID, h.Bytes)}
	if d := cmp.Diff(wantHandoffs, section(t, out, "handoffs")); d != "" {
		t.Errorf("show: handoffs (-want +got):\n%s\n%s", d, out)
	}
	for _, r := range th.Runs {
		if want := fmt.Sprintf("  %d  %s  completed (end_turn) on acp", r.Ordinal, r.ID); !strings.Contains(out, want) {
			t.Errorf("show lacks %q:\n%s", want, out)
		}
	}
}

// The switch flags are checked before anything is sent; what needs the
// thread is refused naming what is wrong; nothing is written.
func TestSwitchRefusals(t *testing.T) {
	data, ws := t.TempDir(), t.TempDir()
	// A new thread takes --handoff-max-bytes too (for a later switch or
	// rollback).
	out, errOut, code := baton(t, "run", "--data", data, "--cwd", ws, "--provider", "acp", "--handoff-max-bytes", "20000",
		"--provider-command", peerCommand(t, "acp/simple.ndjson"), lines(t, "acp/simple.messages")[0])
	if code != exitOK || !strings.Contains(out, "\n⇄ acp: provider settings changed; handoffs at most 20 KiB\n▶ run 1 queued") {
		t.Fatalf("run: exit %d\n%s\n%s", code, out, errOut)
	}
	thread := threadOf(t, out)
	before := showJSON(t, data, thread)
	if before.HandoffMaxBytes != 20000 || before.Provider != "acp" || len(before.ProviderBindings) != 1 {
		t.Errorf("a new thread with --handoff-max-bytes 20000: bound %d, provider %s, bindings %+v", before.HandoffMaxBytes,
			before.Provider, before.ProviderBindings)
	}
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"switch", thread}, "switch: give --provider (or --agent, --model, --provider-command, --handoff-max-bytes)"},
		{[]string{"switch", thread, "--provider", "codex", "--handoff-max-bytes", "100"}, "switch: --handoff-max-bytes must be at least 4096, got 100"},
		{[]string{"switch", thread, "--provider", "codex", "--provider-command", "'open"}, `switch: --provider-command "'open": cannot split it into words`},
		{[]string{"switch", thread, "--provider", "nope"}, `switch: provider "nope" is not installed; installed: acp, claude, codex, cursor, opencode`},
		{[]string{"switch", "thr_nope", "--provider", "codex"}, `thread "thr_nope"`},
		{[]string{"switch", thread, "--provider", "Co dex", "--provider-command", "x"}, `provider: "Co dex" is not a provider name`},
		{[]string{"switch"}, "accepts 1 arg(s), received 0"},
		{[]string{"run", "--thread", thread, "--provider", "codex", "--handoff-max-bytes", "-1", "hi"}, "run: --handoff-max-bytes must be at least 4096, got -1"},
		{[]string{"run", "--thread", thread, "--provider", "nope", "hi"}, `run: provider "nope" is not installed`},
		{[]string{"send", thread, "--provider", "codex", "--handoff-max-bytes", "10", "hi"}, "send: --handoff-max-bytes must be at least 4096, got 10"},
		{[]string{"send", thread, "--provider", "nope", "hi"}, `send: provider "nope" is not installed`},
	} {
		out, errOut, code := baton(t, append(tc.args, "--data", data)...)
		if code != exitUsage || out != "" || !strings.HasPrefix(errOut, "baton: ") || !strings.Contains(errOut, tc.msg) {
			t.Errorf("baton %v: exit %d\nstdout: %s\nstderr: %s\nwant exit %d with %q", tc.args, code, out, errOut, exitUsage, tc.msg)
		}
	}
	if after := showJSON(t, data, thread); after.Sequence != before.Sequence {
		t.Errorf("refused switches wrote events: sequence %d -> %d", before.Sequence, after.Sequence)
	}
}

// The stream's lines for switches and handoffs: whom a handoff is for,
// its strategy, the runs it covers, its size, and what was cut or why it
// is a full summary.
func TestSwitchAndHandoffLines(t *testing.T) {
	runs := func(ords ...int) []domain.HandoffRun {
		var out []domain.HandoffRun
		for _, o := range ords {
			out = append(out, domain.HandoffRun{Ordinal: o})
		}
		return out
	}
	events := []domain.Payload{
		domain.ProviderSwitched{From: "codex", To: "claude", ToModel: "opus", HandoffMaxBytes: 16 << 10},
		domain.HandoffCreated{HandoffID: "h1", Strategy: domain.HandoffFullThreadSummary, ToProvider: "claude", FromRun: 1, ToRun: 3,
			Runs: runs(1, 2, 3), Bytes: 12 << 10},
		domain.ProviderSwitched{From: "claude", To: "codex", FromModel: "opus"},
		domain.HandoffSuperseded{HandoffID: "h1", By: "h2"},
		domain.HandoffCreated{HandoffID: "h2", Strategy: domain.HandoffDeltaSinceLastSeen, ToProvider: "codex", FromRun: 2, ToRun: 3,
			Runs: runs(2, 3), Bytes: 3000, Truncated: true, Cut: "run 2 shortened"},
		domain.ProviderSwitched{From: "codex", To: "codex", ToModel: "gpt-5"},
		domain.HandoffSuperseded{HandoffID: "h2"},
		domain.ProviderSwitched{From: "codex", To: "codex", FromModel: "gpt-5", ToModel: "gpt-5", HandoffMaxBytes: 4096},
		domain.HandoffCreated{HandoffID: "h3", Strategy: domain.HandoffFullThreadSummary, ToProvider: "codex", FromRun: 1, ToRun: 5,
			Runs: runs(1, 2, 5), Bytes: 900, Fallback: "codex could not resume its conversation t1"},
		domain.HandoffCreated{HandoffID: "h4", RollbackID: "rb1", Strategy: domain.HandoffFullThreadSummary, FromRun: 1, ToRun: 1, Text: "short"},
		domain.HandoffConsumed{HandoffID: "h4", RunID: "r6"},
	}
	var b strings.Builder
	p := newPrinter(&b, false, &batonv1.Thread{Id: "thr"})
	for _, e := range events {
		p.event(apiEvent(t, 0, "thr", e))
	}
	want := `⇄ switched to claude (model opus); handoffs at most 16 KiB
  ⓘ handoff to claude: runs 1-3, 12 KiB
⇄ switched to codex
  ⓘ handoff to codex (delta since run 1): runs 2-3, 3 KiB, truncated
⇄ switched to codex's gpt-5 model
  ⓘ handoff withdrawn: nothing new to tell
⇄ codex: provider settings changed; handoffs at most 4 KiB
  ⓘ handoff to codex: runs 1-2, 5, 900 bytes; fallback: codex could not resume its conversation t1
  ⓘ handoff (after the rollback): run 1, 5 bytes
`
	if d := cmp.Diff(want, b.String()); d != "" {
		t.Errorf("lines (-want +got):\n%s", d)
	}
}

// Against a service, baton send --provider switches the thread before its
// message, prints the switch, and the message's run starts on the provider.
func TestServeSendSwitches(t *testing.T) {
	data, ws := t.TempDir(), t.TempDir()
	startServe(t, data)
	thread, groups := firstACPRun(t, data, ws)
	if out, errOut, code := baton(t, "switch", thread, "--data", data, "--provider", "codex", "--provider-command", peerCommand(t, "codex/simple.ndjson")); code != exitOK {
		t.Fatalf("switch: exit %d\n%s\n%s", code, out, errOut)
	}
	out, errOut, code := baton(t, "send", "--data", data, "--provider", "acp", thread, groups[2])
	if code != exitOK || !strings.HasPrefix(out, "⇄ switched to acp\n  ⓘ handoff withdrawn: nothing new to tell\nsent to thread "+thread+" (run run_") {
		t.Fatalf("send --provider acp: exit %d\n%s\n%s", code, out, errOut)
	}
	th := showJSON(t, data, thread)
	if len(th.Runs) != 2 || th.Provider != "acp" || th.Runs[1].Provider != "acp" {
		t.Errorf("after send --provider acp: thread on %s, runs %+v", th.Provider, th.Runs)
	}
}

// An environment meant for new threads never switches a thread that goes
// on; the command line does.
func TestSwitchFlagsFromTheEnvironmentAreForNewThreads(t *testing.T) {
	t.Setenv("BATON_PROVIDER", "codex")
	t.Setenv("BATON_MODEL", "gpt-test")
	t.Setenv("BATON_PROVIDER_COMMAND", "codex app-server")
	for _, tc := range []struct {
		args []string
		want switchFlags
	}{
		{nil, switchFlags{}},
		{[]string{"--provider", "claude"}, switchFlags{provider: "claude"}},
		{[]string{"--model", "m", "--provider-command", "x y"}, switchFlags{model: "m", command: "x y"}},
	} {
		var f switchFlags
		cmd := &cobra.Command{Use: "run"}
		addSwitchFlags(cmd.Flags(), &f, true)
		if err := cmd.Flags().Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		if err := applyEnv(cmd); err != nil {
			t.Fatal(err)
		}
		wantProvider := tc.want.provider
		if wantProvider == "" {
			wantProvider = "codex"
		}
		if f.provider != wantProvider {
			t.Errorf("%q: the environment did not set --provider (%q)", tc.args, f.provider)
		}
		f.explicit(cmd.Flags())
		if f != tc.want {
			t.Errorf("%q: the switch flags of a thread that goes on = %+v, want %+v", tc.args, f, tc.want)
		}
	}
}

// firstACPRun runs the first message of acp/resume (whose agent is started
// again for the second, resuming its session) on a new thread: the thread,
// and the scenario's messages.
func firstACPRun(t *testing.T, data, ws string) (string, []string) {
	t.Helper()
	groups := lines(t, "acp/resume.messages")
	acp := peerCommand(t, "acp/resume.ndjson") + " --state '" + filepath.Join(t.TempDir(), "cursor") + "'"
	out, errOut, code := baton(t, "run", "--data", data, "--cwd", ws, "--provider", "acp", "--provider-command", acp, groups[0])
	if code != exitOK {
		t.Fatalf("run: exit %d\n%s\n%s", code, out, errOut)
	}
	return threadOf(t, out), groups
}

// A line cut to fit never cuts a character in two.
func TestOneLineCutsBetweenCharacters(t *testing.T) {
	if got := oneLine("aé  b\nc", 2); got != "a…" {
		t.Errorf("oneLine = %q, want %q", got, "a…")
	}
	if got := oneLine("short", 10); got != "short" {
		t.Errorf("oneLine = %q", got)
	}
}
