package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-run/baton/sdk"
	"github.com/baton-run/baton/sdk/plugintest"
)

// The real plugin binary through go-plugin, its provider a real command:
// for exec any program is a provider, so these run sh. The replayed
// scenarios are in conformance_test.go.

func start(t *testing.T) *plugintest.Plugin {
	t.Helper()
	return plugintest.Start(t, plugintest.Build(t, "."))
}

func open(t *testing.T, p *plugintest.Plugin, env []string, argv ...string) *plugintest.Session {
	t.Helper()
	return p.OpenWith(t, sdk.OpenSessionRequest{Cwd: t.TempDir(), Command: sdk.ProviderCommand{Argv: argv, Env: env}})
}

// view is what a test compares of an event: its kind and what it says,
// refs and sequence numbers left out.
type view struct {
	Kind        sdk.EventKind
	Client      string `json:",omitempty"`
	ItemKind    sdk.ItemKind
	Status      sdk.Status
	Title, Text string
	Failure     string
	Usable      bool
}

func views(evs []sdk.RuntimeEvent) []view {
	out := make([]view, 0, len(evs))
	for _, ev := range evs {
		v := view{Kind: ev.Kind, Client: ev.ClientTurnID, ItemKind: ev.ItemKind, Status: ev.Status, Title: ev.Title, Text: ev.Text,
			Usable: ev.ThreadUsable}
		if ev.Failure != nil {
			v.Failure = ev.Failure.Code + ": " + ev.Failure.Message
		}
		out = append(out, v)
	}
	return out
}

func keep(vs []view, ok func(view) bool) []view {
	var out []view
	for _, v := range vs {
		if ok(v) {
			out = append(out, v)
		}
	}
	return out
}

func TestDescribe(t *testing.T) {
	d := start(t).Description
	if want := (sdk.Capabilities{Interrupt: true, Resume: true}); d.Capabilities != want {
		t.Errorf("capabilities %+v, want %+v", d.Capabilities, want)
	}
	for _, k := range []string{sdk.NoteSteering, sdk.NoteInterrupt, sdk.NoteApprovals, sdk.NoteSubagents, sdk.NoteRollback,
		sdk.NoteResume, sdk.NoteSnapshot} {
		if d.Notes[k] == "" {
			t.Errorf("no note for %s", k)
		}
	}
	if d.Name != "exec" || d.WireProtocol != WireProtocol || d.SDKVersion == "" {
		t.Errorf("describe = %+v", d)
	}
}

// A turn's whole event stream: the thread announced on the first turn,
// turn_started echoing the client turn id, the answer as one item, its
// text streamed as it came, a completed terminal. The second turn does
// not announce the thread again.
func TestTurnEvents(t *testing.T) {
	p := start(t)
	s := open(t, p, nil, "sh", "-c", `echo "one"; echo "two: $1"`, "sh")
	r := s.StartTurn(t, "hello")
	evs := s.WaitTurn(t)
	want := []view{
		{Kind: sdk.EventThreadStarted},
		{Kind: sdk.EventTurnStarted, Client: "client-turn-1"},
		{Kind: sdk.EventItemStarted, ItemKind: sdk.ItemAssistantMessage, Title: "sh", Status: sdk.ItemInProgress},
	}
	// The two lines come in one read or two.
	got := views(evs)
	deltas := ""
	for _, v := range got[3 : len(got)-2] {
		if v.Kind != sdk.EventContentDelta || v.ItemKind != sdk.ItemAssistantMessage {
			t.Errorf("between item_started and item_completed: %+v", v)
		}
		deltas += v.Text
	}
	if deltas != "one\ntwo: hello\n" {
		t.Errorf("deltas say %q", deltas)
	}
	want = append(want,
		view{Kind: sdk.EventItemCompleted, ItemKind: sdk.ItemAssistantMessage, Status: sdk.ItemDone, Text: "one\ntwo: hello\n"},
		view{Kind: sdk.EventTurnTerminal, Status: sdk.TurnCompleted, Usable: true})
	if diff := cmp.Diff(want, append(got[:3:3], got[len(got)-2:]...)); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	for _, ev := range evs {
		if ev.ThreadRef != s.Open.ProviderThreadRef || ev.Kind != sdk.EventThreadStarted && ev.TurnRef != r.TurnRef {
			t.Errorf("%s: thread %q turn %q; want thread %q turn %q", ev.Kind, ev.ThreadRef, ev.TurnRef, s.Open.ProviderThreadRef, r.TurnRef)
		}
	}
	// The item's end and the turn's are the process exit's, no frame.
	plugintest.CheckRawFrames(t, evs, sdk.EventItemCompleted, sdk.EventTurnTerminal)
	s.StartTurn(t, "again")
	if evs := s.WaitTurn(t); plugintest.Count(evs, func(ev sdk.RuntimeEvent) bool { return ev.Kind == sdk.EventThreadStarted }) != 0 {
		t.Errorf("the second turn announced the thread again: %s", plugintest.Kinds(evs))
	}
	ex := s.Close(t)
	if diff := cmp.Diff([]view{{Kind: sdk.EventRuntimeExited, Status: sdk.ExitClosed}}, views(ex)); diff != "" {
		t.Errorf("close (-want +got):\n%s", diff)
	}
}

// The prompt goes last, in place of a {prompt} argument, or on stdin;
// the second turn's prompt carries the first turn as a handoff.
func TestPrompt(t *testing.T) {
	p := start(t)
	for _, c := range []struct {
		name string
		env  []string
		argv []string
		want []string
	}{
		{"last", nil, []string{"sh", "-c", `printf '[%s]' "$@"`, "sh", "a"}, []string{"[a][hi]", "[a][" + Handoff([]exchange{{"hi", "[a][hi]"}}, "ho") + "]"}},
		{"placeholder", nil, []string{"sh", "-c", `printf '[%s]' "$@"`, "sh", PromptPlaceholder, "b"}, []string{"[hi][b]", "[" + Handoff([]exchange{{"hi", "[hi][b]"}}, "ho") + "][b]"}},
		{"stdin", []string{EnvPrompt + "=stdin"}, []string{"sh", "-c", `printf '[%s]' "$@"; cat`, "sh", "c"}, []string{"[c]hi", "[c]" + Handoff([]exchange{{"hi", "[c]hi"}}, "ho")}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := open(t, p, c.env, c.argv...)
			for i, msg := range []string{"hi", "ho"} {
				s.StartTurn(t, msg)
				if got := plugintest.ItemText(s.WaitTurn(t), "", sdk.ItemAssistantMessage); got != c.want[i] {
					t.Errorf("turn %d answered %q, want %q", i+1, got, c.want[i])
				}
			}
			s.Close(t)
		})
	}
}

// A command that exits non-zero fails the turn, quoting the end of its
// stderr; its stderr lines are diagnostics, the first maxDiagnostics of
// them, of which the sdk passes five and sums up the rest before the
// turn's end; the answer so far is a failed item. The thread stays usable: the
// next turn is a new process.
func TestFailedTurn(t *testing.T) {
	p := start(t)
	s := open(t, p, nil, "sh", "-c", `echo partial; i=1; while [ $i -le 25 ]; do echo "err $i" >&2; i=$((i+1)); done; exit 3`)
	s.StartTurn(t, "go")
	got := views(s.WaitTurn(t))
	var want []view
	for i := 1; i <= 5; i++ {
		want = append(want, view{Kind: sdk.EventDiagnostic, Title: "sh stderr", Text: "err " + strconv.Itoa(i)})
	}
	why := "sh exited with status 3: err 21; err 22; err 23; err 24; err 25"
	want = append(want,
		view{Kind: sdk.EventItemCompleted, ItemKind: sdk.ItemAssistantMessage, Status: sdk.ItemFailed, Text: "partial\n"},
		view{Kind: sdk.EventDiagnostic, Title: "sh stderr", Text: fmt.Sprintf("%d more like this, not reported one by one (%d in all); "+
			"the last 3: err 19; err 20; more than 20 lines: the rest are in the raw-frame log only", maxDiagnostics+1-5, maxDiagnostics+1)},
		view{Kind: sdk.EventTurnTerminal, Status: sdk.TurnFailed, Text: why, Failure: "exit_status: " + why, Usable: true})
	// Stdout and stderr are read apart: only their own orders are fixed.
	got = keep(got[2:], func(v view) bool { return v.Kind != sdk.EventItemStarted && v.Kind != sdk.EventContentDelta })
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	s.Close(t)
}

// A stdout line that is not text (bytes that are not UTF-8, or NUL) is
// the malformed frame of a text stream: a diagnostic each, the bytes shown
// as U+FFFD, the turn completed. The last line needs no newline.
func TestNotText(t *testing.T) {
	p := start(t)
	s := open(t, p, nil, "sh", "-c", `printf 'a\377b\nok\nc\000d'`)
	s.StartTurn(t, "go")
	evs := s.WaitTurn(t)
	d := keep(views(evs), func(v view) bool { return v.Kind == sdk.EventDiagnostic })
	diag := view{Kind: sdk.EventDiagnostic, Title: "malformed frame",
		Text: "sh wrote a line on stdout that is not text (bytes that are not UTF-8, or NUL): they are shown as U+FFFD"}
	if diff := cmp.Diff([]view{diag, diag}, d); diff != "" {
		t.Errorf("diagnostics (-want +got):\n%s", diff)
	}
	if got := plugintest.ItemText(evs, "", sdk.ItemAssistantMessage); got != "a\uFFFDb\nok\nc\uFFFDd" {
		t.Errorf("answer %q", got)
	}
	if term := evs[len(evs)-1]; term.Status != sdk.TurnCompleted {
		t.Errorf("the turn ended %s", term.Status)
	}
	s.Close(t)
}

// An interrupt stops the turn's whole process group, a command it left
// in the background too; the turn ends interrupted, its answer so far
// declined.
func TestInterruptStopsTheGroup(t *testing.T) {
	p := start(t)
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "pid")
	s := open(t, p, nil, "sh", "-c", `sleep 600 & echo $! >`+pidFile+`; echo started; wait`)
	s.StartTurn(t, "go")
	s.Until(t, "the answer's first line", func(ev sdk.RuntimeEvent) bool { return ev.Kind == sdk.EventContentDelta })
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	fd := plugintest.Pidfd(t, pid)
	s.Interrupt(t, "")
	got := views(s.WaitTurn(t))
	want := []view{
		{Kind: sdk.EventItemCompleted, ItemKind: sdk.ItemAssistantMessage, Status: sdk.ItemDeclined, Text: "started\n"},
		{Kind: sdk.EventTurnTerminal, Status: sdk.TurnInterrupted, Text: "interrupted: the process was stopped", Usable: true},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if !plugintest.Exited(t, fd, 10*time.Second) {
		t.Errorf("the background sleep (pid %d) lives on", pid)
	}
	s.Close(t)
}

// Closing a session with a turn running stops it: the turn ends
// interrupted, then runtime_exited comes, last.
func TestCloseDuringTurn(t *testing.T) {
	p := start(t)
	s := open(t, p, nil, "sh", "-c", `echo started; sleep 600`)
	s.StartTurn(t, "go")
	s.Until(t, "the answer's first line", func(ev sdk.RuntimeEvent) bool { return ev.Kind == sdk.EventContentDelta })
	got := views(s.Close(t))
	want := []view{
		{Kind: sdk.EventItemCompleted, ItemKind: sdk.ItemAssistantMessage, Status: sdk.ItemDeclined, Text: "started\n"},
		{Kind: sdk.EventTurnTerminal, Status: sdk.TurnInterrupted, Text: "the session was closed", Usable: true},
		{Kind: sdk.EventRuntimeExited, Status: sdk.ExitClosed},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

// A thread the plugin has no state for is not resumed: the session says
// so, and starts a thread of its own with no handoff.
func TestResumeUnknownThread(t *testing.T) {
	t.Setenv(EnvStateDir, t.TempDir())
	p := start(t)
	for _, ref := range []string{"exec-0123456789abcdef", "../../etc/passwd"} {
		s := p.OpenWith(t, sdk.OpenSessionRequest{Cwd: t.TempDir(), ResumeThreadRef: ref,
			Command: sdk.ProviderCommand{Argv: []string{"sh", "-c", `printf '%s' "$1"`, "sh"}}})
		if s.Open.Resumed || s.Open.ProviderThreadRef == ref || !threadRef.MatchString(s.Open.ProviderThreadRef) {
			t.Errorf("resume %q: %+v, want a fresh thread, not resumed", ref, s.Open)
		}
		s.StartTurn(t, "hi")
		evs := s.WaitTurn(t)
		if got := plugintest.ItemText(evs, "", sdk.ItemAssistantMessage); got != "hi" {
			t.Errorf("resume %q: the prompt was %q", ref, got)
		}
		if evs[0].Kind != sdk.EventThreadStarted || evs[0].ThreadRef != s.Open.ProviderThreadRef {
			t.Errorf("resume %q: the fresh thread is not announced: %s", ref, plugintest.Kinds(evs))
		}
		s.Close(t)
	}
}

func TestOpenRefuses(t *testing.T) {
	p := start(t)
	for _, req := range []sdk.OpenSessionRequest{
		{Cwd: "relative", Command: sdk.ProviderCommand{Argv: []string{"echo"}}},
		{Cwd: t.TempDir()},
		{Cwd: t.TempDir(), Command: sdk.ProviderCommand{Argv: []string{"echo"}}, RuntimePolicy: "force"},
		{Cwd: t.TempDir(), Command: sdk.ProviderCommand{Argv: []string{"echo"}, Env: []string{EnvPrompt + "=file"}}},
	} {
		req.SessionID = "refused"
		if _, err := p.OpenSession(t.Context(), req); err == nil || !strings.Contains(err.Error(), "open session") {
			t.Errorf("open %+v: %v, want a refusal", req, err)
		}
	}
}

// The session's model reaches the command in its environment.
func TestModelInEnv(t *testing.T) {
	p := start(t)
	s := p.OpenWith(t, sdk.OpenSessionRequest{Cwd: t.TempDir(), Model: "small-1",
		Command: sdk.ProviderCommand{Argv: []string{"sh", "-c", `printf '%s' "$` + EnvModel + `"`}}})
	s.StartTurn(t, "which model?")
	if got := plugintest.ItemText(s.WaitTurn(t), "", sdk.ItemAssistantMessage); got != "small-1" {
		t.Errorf("the command saw model %q", got)
	}
	s.Close(t)
}
