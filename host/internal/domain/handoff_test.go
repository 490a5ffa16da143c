package domain

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/baton-run/baton/sdk"
	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"
)

var update = flag.Bool("update", false, "write the handoff golden files from what composeHandoff makes")

// golden compares got with testdata/name, or writes it with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to write it)", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("%s differs (-want +got):\n%s", name, diff)
	}
}

// newWorldOn is a world whose thread starts on provider.
func newWorldOn(t *testing.T, provider string) *world {
	w := &world{t: t, thread: &Thread{}, replica: &Thread{}}
	w.must(Command{ID: "c", ThreadID: "thr", Payload: CreateThread{Provider: provider, Cwd: "/w",
		ProviderCommand: ProviderCommand{Argv: []string{provider}}}})
	return w
}

// step is one thing a provider's turn does.
type step struct {
	say     string          // an assistant message
	command string          // a command, with its output and exit code
	output  string          // the command's output
	exit    int             // the command's exit code
	tool    string          // a tool call's title
	edit    string          // a file change's paths
	plan    json.RawMessage // a plan update's detail
}

// turn runs the active run's turn on session (opened on provider with
// the conversation threadRef if it is not open) and ends it completed, its
// checkpoint recorded with files.
func (w *world) turn(session, provider, threadRef string, steps []step, files ...FileChange) {
	w.t.Helper()
	if s := w.thread.session(session); s == nil {
		w.must(Command{ID: "o", ThreadID: "thr", Payload: RecordSessionOpened{SessionID: session, Provider: provider,
			ProviderRef: "proc-" + session, ThreadRef: threadRef}})
	}
	r := w.thread.ActiveRun()
	ref := fmt.Sprintf("turn-%d", r.Ordinal)
	w.ev(session, sdk.RuntimeEvent{Kind: sdk.EventTurnStarted, ThreadRef: threadRef, TurnRef: ref, ClientTurnID: r.ActiveAttempt})
	for i, s := range steps {
		item := fmt.Sprintf("%s-item-%d", ref, i)
		switch {
		case s.say != "":
			w.ev(session, sdk.RuntimeEvent{Kind: sdk.EventItemStarted, TurnRef: ref, ItemRef: item, ItemKind: sdk.ItemAssistantMessage})
			w.ev(session, sdk.RuntimeEvent{Kind: sdk.EventContentDelta, TurnRef: ref, ItemRef: item, Text: s.say})
			w.ev(session, sdk.RuntimeEvent{Kind: sdk.EventItemCompleted, TurnRef: ref, ItemRef: item})
		case s.command != "":
			w.ev(session, sdk.RuntimeEvent{Kind: sdk.EventItemStarted, TurnRef: ref, ItemRef: item, ItemKind: "command_execution", Title: s.command})
			w.ev(session, sdk.RuntimeEvent{Kind: sdk.EventContentDelta, TurnRef: ref, ItemRef: item, Text: s.output})
			status := sdk.ItemDone
			if s.exit != 0 {
				status = sdk.ItemFailed
			}
			w.ev(session, sdk.RuntimeEvent{Kind: sdk.EventItemCompleted, TurnRef: ref, ItemRef: item, Status: status,
				Detail: json.RawMessage(fmt.Sprintf(`{"exitCode":%d}`, s.exit))})
		case s.tool != "":
			w.ev(session, sdk.RuntimeEvent{Kind: sdk.EventItemStarted, TurnRef: ref, ItemRef: item, ItemKind: "tool_call", Title: s.tool})
			w.ev(session, sdk.RuntimeEvent{Kind: sdk.EventItemCompleted, TurnRef: ref, ItemRef: item})
		case s.edit != "":
			w.ev(session, sdk.RuntimeEvent{Kind: sdk.EventItemStarted, TurnRef: ref, ItemRef: item, ItemKind: "file_change", Title: s.edit})
			w.ev(session, sdk.RuntimeEvent{Kind: sdk.EventItemCompleted, TurnRef: ref, ItemRef: item})
		default:
			w.ev(session, sdk.RuntimeEvent{Kind: sdk.EventPlanUpdated, TurnRef: ref, Detail: s.plan})
		}
	}
	hold := w.holdCaptures
	w.holdCaptures = true
	w.ev(session, sdk.RuntimeEvent{Kind: sdk.EventTurnTerminal, TurnRef: ref, Status: sdk.TurnCompleted})
	w.holdCaptures = hold
	w.must(Command{ID: "cap", ThreadID: "thr", Payload: RecordCheckpoint{CheckpointID: w.thread.run(r.ID).CheckpointID,
		Status: CheckpointReady, Commit: "commit", Files: files}})
	if r := w.thread.run(r.ID); r.Status != RunStatusCompleted {
		w.t.Fatalf("run %d is %s", r.Ordinal, r.Status)
	}
}

func (w *world) switchTo(provider string) Decision {
	w.t.Helper()
	return w.must(Command{ID: "sw", ThreadID: "thr", Payload: SwitchProvider{Provider: provider,
		ProviderCommand: ProviderCommand{Argv: []string{provider}}}})
}

// codexClaudeCodex is the example of the issue: two runs on codex, a
// switch to claude (a full summary), a run there, and a return to codex (a
// delta of the claude run).
func codexClaudeCodex(t *testing.T) (w *world, full, delta ContextHandoff) {
	w = newWorldOn(t, "codex")
	w.send("Add a --verbose flag to the CLI that logs each file it reads, and make the tests pass.")
	w.turn("s1", "codex", "codex-thread-7f3a", []step{
		{plan: json.RawMessage(`{"explanation":null,"plan":[{"step":"Add the flag","status":"completed"},{"step":"Log each file read","status":"completed"},{"step":"Fix the tests","status":"inProgress"}]}`)},
		{tool: "read cmd/cli/main.go"},
		{edit: "cmd/cli/main.go, internal/walk/walk.go"},
		{command: "go test ./...", exit: 1, output: "--- FAIL: TestWalk (0.00s)\n    walk_test.go:31: got 3 log lines, want 0\nFAIL\nFAIL\texample.com/cli/internal/walk\t0.012s\nok  \texample.com/cli/cmd/cli\t0.020s\nFAIL\n"},
		{edit: "internal/walk/walk_test.go"},
		{command: "go test ./...", output: "ok  \texample.com/cli/cmd/cli\t0.019s\nok  \texample.com/cli/internal/walk\t0.011s\n"},
		{plan: json.RawMessage(`{"explanation":null,"plan":[{"step":"Add the flag","status":"completed"},{"step":"Log each file read","status":"completed"},{"step":"Fix the tests","status":"completed"}]}`)},
		{say: "Added `--verbose` to `cmd/cli`: with it, `walk.Files` logs each path it reads to stderr. TestWalk expected no logging; it now runs with a discarding logger. `go test ./...` passes."},
	}, FileChange{Path: "cmd/cli/main.go", Kind: "modified", Additions: 9, Deletions: 2},
		FileChange{Path: "internal/walk/walk.go", Kind: "modified", Additions: 14, Deletions: 3},
		FileChange{Path: "internal/walk/walk_test.go", Kind: "modified", Additions: 4, Deletions: 1})
	w.send("Document the flag in the README, and add a changelog entry.")
	w.turn("s1", "codex", "codex-thread-7f3a", []step{
		{plan: json.RawMessage(`{"explanation":"docs","plan":[{"step":"README: usage of --verbose","status":"completed"},{"step":"CHANGELOG entry under Unreleased","status":"pending"}]}`)},
		{edit: "README.md"},
		{say: "The README's Usage section now shows `--verbose` with an example. I have not written the changelog entry yet: CHANGELOG.md does not exist, and I did not want to pick its format for you."},
	}, FileChange{Path: "README.md", Kind: "modified", Additions: 12, Deletions: 0})

	d := w.switchTo("claude")
	if got := types(d); got != "thread.provider_switched handoff.created" {
		t.Fatalf("switch to claude: %s", got)
	}
	full = w.thread.Handoffs[0]
	w.send("Create CHANGELOG.md in Keep a Changelog format with the --verbose entry.")
	w.turn("s2", "claude", "claude-session-41c9", []step{
		{tool: "Read README.md"},
		{command: "git log --oneline -3", output: "a1b2c3d Document --verbose\n9f8e7d6 Add --verbose\n0123abc Initial commit\n"},
		{edit: "CHANGELOG.md"},
		{say: "Created CHANGELOG.md (Keep a Changelog 1.1.0) with an Unreleased section: \"Added: `--verbose` logs each file the CLI reads.\""},
	}, FileChange{Path: "CHANGELOG.md", Kind: "added", Additions: 11, Deletions: 0})

	if got := types(w.switchTo("codex")); got != "thread.provider_switched handoff.created" {
		t.Fatalf("switch back to codex: %s", got)
	}
	delta = w.thread.Handoffs[1]
	return w, full, delta
}

// The example the closing note quotes: codex -> claude -> codex, the whole
// text of both handoffs.
func TestHandoffGolden(t *testing.T) {
	w, full, delta := codexClaudeCodex(t)
	golden(t, "handoff_full.golden", full.Text)
	golden(t, "handoff_delta.golden", delta.Text)
	r := w.thread.Runs
	msgs := func(r Run) []string {
		var ids []string
		for _, m := range w.thread.Messages {
			if m.RunID == r.ID {
				ids = append(ids, m.ID)
			}
		}
		return ids
	}
	want := []ContextHandoff{
		{ID: full.ID, Strategy: HandoffFullThreadSummary, Version: HandoffVersion, FromProvider: "codex", ToProvider: "claude",
			FromRun: 1, ToRun: 2, Runs: []HandoffRun{{Ordinal: 1, RunID: r[0].ID, Provider: "codex", MessageIDs: msgs(r[0])},
				{Ordinal: 2, RunID: r[1].ID, Provider: "codex", MessageIDs: msgs(r[1])}},
			Bytes: len(full.Text), Status: HandoffStatusConsumed, RunID: r[2].ID, Text: full.Text},
		{ID: delta.ID, Strategy: HandoffDeltaSinceLastSeen, Version: HandoffVersion, FromProvider: "claude", ToProvider: "codex",
			FromRun: 3, ToRun: 3, Runs: []HandoffRun{{Ordinal: 3, RunID: r[2].ID, Provider: "claude", MessageIDs: msgs(r[2])}},
			Bytes: len(delta.Text), Status: HandoffReady, Text: delta.Text},
	}
	if diff := cmp.Diff(want, w.thread.Handoffs); diff != "" {
		t.Errorf("handoffs (-want +got):\n%s", diff)
	}
}

// Bounded: with room for little, the older runs go first, in the order
// the text says, and the newest is kept whole as long as it fits.
func TestHandoffShortening(t *testing.T) {
	w, _, _ := codexClaudeCodex(t)
	th := w.thread.Clone()
	all := []int{1, 2, 3}
	whole := composeHandoff(&th, handoffSpec{Strategy: HandoffFullThreadSummary, To: "cursor", Runs: all})
	if whole.Truncated || whole.Cut != "" {
		t.Fatalf("the whole thread fits: %+v", whole)
	}
	type result struct {
		Cut       string
		Shortened []bool
		Has       []string
	}
	probe := []string{"    --- FAIL: TestWalk", "Assistant: Added `--verbose`", "Run 1 (completed, codex): Add a --verbose",
		"Runs 1-2 left out", "Run 1 left out", "Run 2 (completed, codex): Document", "## Run 3 (completed, claude)", "    0123abc Initial commit",
		"Run 3 (completed, claude): Create CHANGELOG.md"}
	// Grow the runs so that any bound between the minimum and the whole
	// text cuts something: each step of the order is reached.
	pad := strings.Repeat("All the output of a long build.\n", 200)
	w.edit(func(t *Thread) {
		for i := range t.TurnItems {
			if t.TurnItems[i].Kind == "command_execution" {
				t.TurnItems[i].Text = NewText(pad + t.TurnItems[i].Text.String())
			}
		}
		for i := range t.Messages {
			if t.Messages[i].Role == RoleAssistant {
				t.Messages[i].Text = NewText(t.Messages[i].Text.String() + strings.Repeat(" And more words.", 300))
			}
		}
	})
	// The newest run: more of it than its brief form has room for.
	w.edit(func(t *Thread) {
		r := t.Runs[2]
		for i := range 12 {
			t.TurnItems = append(t.TurnItems, TurnItem{ID: fmt.Sprintf("x%d", i), RunID: r.ID, Kind: "tool_call", Status: StatusCompleted,
				Title: fmt.Sprintf("search %d ", i) + strings.Repeat("for something long ", 20)})
		}
		t.Messages[len(t.Messages)-1].Text = NewText(strings.Repeat("Created CHANGELOG.md. ", 100))
		var steps []string
		for i := range 10 {
			steps = append(steps, fmt.Sprintf(`{"step":"step %d %s","status":"pending"}`, i, strings.Repeat("to do ", 30)))
		}
		t.TurnItems = append(t.TurnItems, TurnItem{ID: "plan", RunID: r.ID, Kind: NodePlan,
			Detail: json.RawMessage(`{"plan":[` + strings.Join(steps, ",") + `]}`)})
		c := t.checkpoint(r.CheckpointID)
		for i := range 10 {
			c.Files = append(c.Files, FileChange{Path: fmt.Sprintf("docs/%d/%s.md", i, strings.Repeat("long-name-", 15)), Kind: "added", Additions: 1})
		}
	})
	th = w.thread.Clone()
	var got []result
	for _, limit := range []int{1 << 20, 23500, 20000, 16000, 14000, 13000, 12380, 12300, 12000, 7000, MinHandoffMaxBytes} {
		h := composeHandoff(&th, handoffSpec{Strategy: HandoffFullThreadSummary, To: "cursor", Runs: all, MaxBytes: limit})
		if len(h.Text) > limit || h.Bytes != len(h.Text) || h.Truncated != (h.Cut != "") {
			t.Fatalf("bound %d: %d bytes, %+v", limit, len(h.Text), h)
		}
		res := result{Cut: h.Cut}
		for _, r := range h.Runs {
			res.Shortened = append(res.Shortened, r.Shortened)
		}
		for _, p := range probe {
			if strings.Contains(h.Text, p) {
				res.Has = append(res.Has, p)
			}
		}
		got = append(got, res)
	}
	want := []result{
		{
			Shortened: []bool{false, false, false},
			Has: []string{
				"    --- FAIL: TestWalk", "Assistant: Added `--verbose`",
				"## Run 3 (completed, claude)", "    0123abc Initial commit",
			},
		},
		{
			Cut:       "run 1 without command output",
			Shortened: []bool{true, false, false},
			Has: []string{
				"Assistant: Added `--verbose`", "## Run 3 (completed, claude)",
				"    0123abc Initial commit",
			},
		},
		{
			Cut:       "run 2 without command output; run 1 cut short",
			Shortened: []bool{true, true, false},
			Has: []string{
				"Assistant: Added `--verbose`", "## Run 3 (completed, claude)",
				"    0123abc Initial commit",
			},
		},
		{
			Cut:       "runs 1-2 cut short",
			Shortened: []bool{true, true, false},
			Has: []string{
				"Assistant: Added `--verbose`", "## Run 3 (completed, claude)",
				"    0123abc Initial commit",
			},
		},
		{
			Cut:       "run 2 cut short; run 1 cut to one line",
			Shortened: []bool{true, true, false},
			Has: []string{
				"Run 1 (completed, codex): Add a --verbose", "## Run 3 (completed, claude)",
				"    0123abc Initial commit",
			},
		},
		{
			Cut:       "runs 1-2 cut to one line",
			Shortened: []bool{true, true, false},
			Has: []string{
				"Run 1 (completed, codex): Add a --verbose",
				"Run 2 (completed, codex): Document", "## Run 3 (completed, claude)",
				"    0123abc Initial commit",
			},
		},
		{
			Cut:       "run 2 cut to one line; run 1 left out",
			Shortened: []bool{true, true, false},
			Has: []string{
				"Run 1 left out", "Run 2 (completed, codex): Document",
				"## Run 3 (completed, claude)", "    0123abc Initial commit",
			},
		},
		{
			Cut:       "runs 1-2 left out",
			Shortened: []bool{true, true, false},
			Has: []string{
				"Runs 1-2 left out", "## Run 3 (completed, claude)",
				"    0123abc Initial commit",
			},
		},
		{
			Cut:       "run 3 without command output; runs 1-2 left out",
			Shortened: []bool{true, true, true},
			Has:       []string{"Runs 1-2 left out", "## Run 3 (completed, claude)"},
		},
		{
			Cut:       "run 3 cut short; runs 1-2 left out",
			Shortened: []bool{true, true, true},
			Has:       []string{"Runs 1-2 left out", "## Run 3 (completed, claude)"},
		},
		{
			Cut:       "run 3 cut to one line; runs 1-2 left out",
			Shortened: []bool{true, true, true},
			Has:       []string{"Runs 1-2 left out", "Run 3 (completed, claude): Create CHANGELOG.md"},
		},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("shortening (-want +got):\n%s", diff)
	}
}

// The text's odd inputs: other detail shapes, invalid UTF-8, runs the
// thread does not have, rollback and fallback headers.
func TestHandoffEdges(t *testing.T) {
	th := &Thread{
		Runs: []Run{{ID: "r1", Ordinal: 1, Status: RunStatusCompleted, Provider: "acp", MessageID: "m1", Input: "in"},
			{ID: "r2", Ordinal: 2, Status: RunStatusFailed, Provider: "acp", Input: "second\nline"}},
		Messages: []Message{{ID: "m1", RunID: "r1", Role: RoleUser, Text: NewText("bad \xff byte")}, {ID: "m0", RunID: "r1"}},
		TurnItems: []TurnItem{
			{RunID: "r1", Kind: NodeReasoning, Text: NewText("thinking")},
			{RunID: "r1", Kind: "user_message", Title: "bad byte"},
			{RunID: "r1", Kind: "command_execution", Title: "make", Status: StatusCompleted, Detail: json.RawMessage(`{"output":"made\n"}`)},
			{RunID: "r1", Kind: "command_execution", Title: "ls", Status: StatusCompleted, Detail: json.RawMessage(`{"aggregatedOutput":"a\nb"}`)},
			{RunID: "r1", Kind: "command_execution", Title: "cat", Status: StatusFailed, Detail: json.RawMessage(`{"stdout":"o\n","stderr":"e"}`)},
			{RunID: "r1", Kind: "command_execution", Title: "rm", Status: "declined", Detail: json.RawMessage(`[1]`)},
			{RunID: "r1", Kind: NodePlan, Detail: json.RawMessage(`[{"content":"step one","status":"completed"},{"content":"step two","status":"pending"}]`)},
			{RunID: "r1", Kind: NodePlan, Detail: json.RawMessage(`"not a plan"`)},
			{RunID: "r1", Kind: NodePlan, Detail: json.RawMessage(`{"steps":[]}`)},
			{RunID: "r2", Kind: NodeSubagent, Title: "explore", Status: StatusInProgress},
			{RunID: "r2", Kind: NodePlan, Detail: json.RawMessage(`{"entries":[{"text":"all done","status":"done"}]}`)},
		},
		Requests: []RuntimeRequest{{Kind: RequestPermission, Title: "Run rm -rf", Status: RequestStatusPending},
			{Kind: RequestPermission, Title: "old", Status: RequestStatusResolved}},
	}
	h := composeHandoff(th, handoffSpec{Strategy: HandoffFullThreadSummary, To: "codex", Runs: []int{1, 2, 9}, RollbackTo: 2,
		MaxBytes: 100})
	golden(t, "handoff_edges.golden", h.Text)
	if !utf8.ValidString(h.Text) || len(h.Runs) != 2 {
		t.Errorf("edges: %+v", h)
	}
	h = composeHandoff(th, handoffSpec{Strategy: HandoffFullThreadSummary, To: "codex", Runs: []int{9}, Fallback: "codex could not resume its conversation x"})
	golden(t, "handoff_none.golden", h.Text)
	if h.FromRun != 0 || h.Runs != nil {
		t.Errorf("no runs: %+v", h)
	}
}

func TestHandoffHelpers(t *testing.T) {
	for _, tc := range []struct {
		ords []int
		want string
	}{
		{nil, "no runs"},
		{[]int{4}, "run 4"},
		{[]int{1, 2, 3, 5}, "runs 1-3, 5"},
		{[]int{1, 3, 5, 7, 9}, "5 runs from 1 to 9"},
	} {
		if got := RunList(tc.ords); got != tc.want {
			t.Errorf("RunList(%v) = %q, want %q", tc.ords, got, tc.want)
		}
	}
	// A handoff from before handoffs listed their runs covers from..to.
	for _, tc := range []struct {
		runs     []HandoffRun
		from, to int
		want     []int
	}{
		{nil, 1, 3, []int{1, 2, 3}},
		{[]HandoffRun{{Ordinal: 2}, {Ordinal: 4}}, 2, 4, []int{2, 4}},
		{nil, 0, 0, []int{}},
	} {
		if got := HandoffOrdinals(tc.runs, tc.from, tc.to); !slices.Equal(got, tc.want) {
			t.Errorf("HandoffOrdinals(%v, %d, %d) = %v, want %v", tc.runs, tc.from, tc.to, got, tc.want)
		}
	}
	if got := oneLine(strings.Repeat("é", 100), 10); got != "ééééé [...]" {
		t.Errorf("oneLine: %q", got)
	}
	// A tail cut inside a character starts at the next one.
	if got := outputTail(strings.Repeat("é", 1000) + "a"); got != "    [... output cut; its end:]\n    "+strings.Repeat("é", 599)+"a\n" {
		t.Errorf("outputTail: %q", got)
	}
}

// randomThread is a thread of ended runs with random messages, commands,
// files and plans, some of their text not UTF-8.
func randomThread(rt *rapid.T) (*Thread, []int) {
	th := &Thread{ID: "thr", Provider: "acp"}
	text := rapid.OneOf(rapid.StringN(0, 40, -1), rapid.StringN(0, 3000, -1),
		rapid.Map(rapid.SliceOfN(rapid.Byte(), 0, 200), func(b []byte) string { return string(b) }))
	var ords []int
	n := rapid.IntRange(0, 30).Draw(rt, "runs")
	for i := 1; i <= n; i++ {
		id := fmt.Sprintf("r%d", i)
		r := Run{ID: id, Ordinal: i, MessageID: "m" + id, Input: text.Draw(rt, "input"),
			Status:   rapid.SampledFrom([]RunStatus{RunStatusCompleted, RunStatusFailed, RunStatusInterrupted}).Draw(rt, "status"),
			Provider: rapid.SampledFrom([]string{"codex", "claude", "acp", strings.Repeat("x", 100)}).Draw(rt, "provider")}
		th.Messages = append(th.Messages, Message{ID: "m" + id, RunID: id, Role: RoleUser, Text: NewText(r.Input)})
		for j := range rapid.IntRange(0, 3).Draw(rt, "answers") {
			th.Messages = append(th.Messages, Message{ID: fmt.Sprintf("a%s-%d", id, j), RunID: id, Role: RoleAssistant,
				Text: NewText(text.Draw(rt, "answer"))})
		}
		for j := range rapid.IntRange(0, 12).Draw(rt, "items") {
			it := TurnItem{ID: fmt.Sprintf("i%s-%d", id, j), RunID: id, Title: text.Draw(rt, "title"),
				Kind:   rapid.SampledFrom([]NodeKind{"command_execution", "file_change", "tool_call", NodePlan}).Draw(rt, "kind"),
				Status: rapid.SampledFrom([]ItemStatus{StatusCompleted, StatusFailed, "declined"}).Draw(rt, "item status")}
			it.Text = NewText(text.Draw(rt, "output"))
			if it.Kind == NodePlan {
				steps := []map[string]string{}
				for range rapid.IntRange(0, 15).Draw(rt, "steps") {
					steps = append(steps, map[string]string{"step": text.Draw(rt, "step"),
						"status": rapid.SampledFrom([]string{"completed", "pending"}).Draw(rt, "step status")})
				}
				it.Detail, _ = json.Marshal(map[string]any{"plan": steps})
			}
			th.TurnItems = append(th.TurnItems, it)
		}
		if nf := rapid.IntRange(0, 40).Draw(rt, "files"); nf > 0 {
			c := Checkpoint{ID: "c" + id, RunID: id, RunOrdinal: i, Status: CheckpointReady}
			for range nf {
				c.Files = append(c.Files, FileChange{Path: text.Draw(rt, "path"), Kind: rapid.SampledFrom([]string{"added", "modified", "deleted"}).Draw(rt, "file kind"),
					Additions: rapid.IntRange(0, 1000).Draw(rt, "add"), Deletions: rapid.IntRange(0, 1000).Draw(rt, "del"), Binary: rapid.Bool().Draw(rt, "bin")})
			}
			th.Checkpoints = append(th.Checkpoints, c)
			r.CheckpointID = c.ID
		}
		th.Runs = append(th.Runs, r)
		if rapid.IntRange(0, 4).Draw(rt, "covered") > 0 {
			ords = append(ords, i)
		}
	}
	for range rapid.IntRange(0, 10).Draw(rt, "requests") {
		th.Requests = append(th.Requests, RuntimeRequest{Kind: RequestPermission, Title: text.Draw(rt, "request"), Status: RequestStatusPending})
	}
	return th, ords
}

// Property: for any thread and any bound from the least up, the text fits,
// is UTF-8, names every covered run in order, and is the same when made
// again or made from a copy of the thread.
func TestHandoffProperties(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		th, ords := randomThread(rt)
		spec := handoffSpec{Strategy: rapid.SampledFrom([]HandoffStrategy{HandoffFullThreadSummary, HandoffDeltaSinceLastSeen}).Draw(rt, "strategy"),
			To: rapid.SampledFrom([]string{"codex", "claude"}).Draw(rt, "to"), Runs: ords,
			MaxBytes:   rapid.OneOf(rapid.Just(0), rapid.IntRange(MinHandoffMaxBytes, 3*MinHandoffMaxBytes), rapid.IntRange(MinHandoffMaxBytes, 200<<10)).Draw(rt, "max"),
			RollbackTo: rapid.IntRange(0, 3).Draw(rt, "rollback to"), Fallback: rapid.StringN(0, 500, -1).Draw(rt, "fallback")}
		h := composeHandoff(th, spec)
		limit := spec.MaxBytes
		if limit == 0 {
			limit = DefaultHandoffMaxBytes
		}
		if len(h.Text) > limit || h.Bytes != len(h.Text) {
			rt.Fatalf("%d bytes over a bound of %d", len(h.Text), limit)
		}
		if !utf8.ValidString(h.Text) {
			rt.Fatalf("not UTF-8")
		}
		var got []int
		for _, r := range h.Runs {
			got = append(got, r.Ordinal)
			if r.RunID != fmt.Sprintf("r%d", r.Ordinal) || r.Shortened && !h.Truncated {
				rt.Fatalf("run %+v of %+v", r, h)
			}
		}
		if diff := cmp.Diff(ords, got); diff != "" {
			rt.Fatalf("covered runs (-spec +handoff):\n%s", diff)
		}
		again := composeHandoff(th, spec)
		c := th.Clone()
		copied := composeHandoff(&c, spec)
		if diff := cmp.Diff(h, again); diff != "" {
			rt.Fatalf("made again (-first +again):\n%s", diff)
		}
		if diff := cmp.Diff(h, copied); diff != "" {
			rt.Fatalf("made from a copy (-first +copy):\n%s", diff)
		}
	})
}

// benchThread is a thread of n runs of the same size.
func benchThread(n int) (*Thread, []int) {
	th := &Thread{ID: "thr"}
	var ords []int
	for i := 1; i <= n; i++ {
		id := fmt.Sprintf("r%d", i)
		th.Runs = append(th.Runs, Run{ID: id, Ordinal: i, Status: RunStatusCompleted, Provider: "codex", MessageID: "m" + id, CheckpointID: "c" + id})
		th.Messages = append(th.Messages, Message{ID: "m" + id, RunID: id, Role: RoleUser, Text: NewText(strings.Repeat("ask ", 100))},
			Message{ID: "a" + id, RunID: id, Role: RoleAssistant, Text: NewText(strings.Repeat("answer ", 300))})
		th.TurnItems = append(th.TurnItems, TurnItem{ID: "i" + id, RunID: id, Kind: "command_execution", Title: "go test ./...",
			Text: NewText(strings.Repeat("ok  \texample.com/x\t0.01s\n", 200)), Detail: json.RawMessage(`{"exitCode":0}`)})
		th.Checkpoints = append(th.Checkpoints, Checkpoint{ID: "c" + id, Files: []FileChange{{Path: fmt.Sprintf("f%d.go", i), Kind: "modified", Additions: 3}}})
		ords = append(ords, i)
	}
	return th, ords
}

// BenchmarkComposeHandoff at N and 10N runs: the cost grows with the runs
// (linearly), whatever the bound cuts.
func BenchmarkComposeHandoff(b *testing.B) {
	for _, n := range []int{100, 1000} {
		th, ords := benchThread(n)
		b.Run(fmt.Sprintf("runs=%d", n), func(b *testing.B) {
			for b.Loop() {
				composeHandoff(th, handoffSpec{Strategy: HandoffFullThreadSummary, To: "claude", Runs: ords})
			}
		})
	}
}

// BenchmarkPlanHandoff at N and 10N runs, where the thread's provider has
// seen all but the newest: planning the next run's handoff costs the run it
// missed, not the thread's history.
func BenchmarkPlanHandoff(b *testing.B) {
	for _, n := range []int{100, 1000} {
		th, _ := benchThread(n)
		for i := range th.Runs {
			th.Runs[i].Attempts = []Attempt{{ID: "a", SessionID: "s"}}
		}
		th.Provider = "codex"
		th.ProviderBindings = []ProviderBinding{{Provider: "codex", ProviderThreadID: "pt", ThreadRef: "ref", SeenThrough: n - 1}}
		env := Env{NewID: func(p string) string { return p + "_1" }}
		b.Run(fmt.Sprintf("runs=%d", n), func(b *testing.B) {
			for b.Loop() {
				s := th.Scratch()
				d := Decision{t: &s}
				planHandoff(&s, env, &d, handoffSpec{})
				if len(d.Events) != 1 {
					b.Fatalf("events %v", d.Events)
				}
			}
		})
	}
}
