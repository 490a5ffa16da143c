package orchestrator_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-run/baton/host/internal/domain"
	"github.com/baton-run/baton/host/internal/scenario"
	"github.com/baton-run/baton/sdk/plugintest"
)

// switchPair is a provider switch and return: run 1 on first, a switch to
// second, run 2, a switch back, run 3 on first again.
type switchPair struct{ first, second string }

func (p switchPair) name() string { return p.first + "_" + p.second }

// switchPairs are the pairs recorded from the real binaries with `make
// record PROVIDER=FIRST+SECOND SCENARIO=provider_switch_return`.
var switchPairs = []switchPair{{"codex", "claude"}, {"acp", "opencode"}}

// switchMessages are the scenario's three user messages, one run each.
var switchMessages = []string{
	"Write a.txt saying one.",
	"Write b.txt saying two.",
	"Add a line saying three to a.txt.",
	"Write c.txt saying four.", // provider_switch_rollback only
}

// switchRecording is what testdata/record_switch.sh gives the test (in the
// file $BATON_SWITCH_RECORD names) when it records: the workspace, and the
// provider commands that run the real agents under `replaypeer record`.
type switchRecording struct {
	Scenario  string              `json:"scenario"`
	Pair      string              `json:"pair"`
	Workspace string              `json:"workspace"`
	Commands  map[string][]string `json:"commands"`
}

// recording is the recording the test is part of for the scenario and
// pair, or nil when it replays.
func recording(t *testing.T, scenario, pair string) *switchRecording {
	t.Helper()
	path := os.Getenv("BATON_SWITCH_RECORD")
	if path == "" {
		return nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var r switchRecording
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if r.Scenario != scenario || r.Pair != pair {
		t.Skipf("recording %s %s, not %s %s", r.Scenario, r.Pair, scenario, pair)
	}
	return &r
}

// switchThread is a thread on first whose provider commands replay
// transcripts (FIRST/NAME.ndjson and SECOND/SCENARIO.ndjson), or run the
// real agents when the test records.
type switchThread struct {
	e          *env
	id         string
	pair       switchPair
	cmd1, cmd2 domain.ProviderCommand
}

func newSwitchThread(t *testing.T, scenario string, pair switchPair, firstTranscript string) *switchThread {
	t.Helper()
	e := newEnv(t)
	s := &switchThread{e: e, pair: pair}
	if rec := recording(t, scenario, pair.name()); rec != nil {
		e.ws = rec.Workspace // a git repository with the README (record.sh)
		s.cmd1 = domain.ProviderCommand{Argv: rec.Commands[pair.first]}
		s.cmd2 = domain.ProviderCommand{Argv: rec.Commands[pair.second]}
	} else {
		e.gitWorkspace()
		s.cmd1 = e.peer(pair.first, pair.first+"/"+firstTranscript)
		s.cmd2 = e.peer(pair.second, pair.second+"/"+scenario+".ndjson")
	}
	s.id = e.dispatch(domain.Command{ID: "create", Payload: domain.CreateThread{Provider: pair.first, Cwd: e.ws,
		ProviderCommand: s.cmd1, ApprovalPolicy: domain.ApproveAccept}}).ThreadID
	return s
}

// run sends the scenario's nth message (1-based) and waits for its run to end.
func (s *switchThread) run(n int) domain.Thread {
	s.e.t.Helper()
	s.e.dispatch(domain.Command{ID: "send-" + string(rune('0'+n)), ThreadID: s.id,
		Payload: domain.DispatchMessage{Text: switchMessages[n-1]}})
	return s.e.waitFor(s.id, "run to end", allRunsEnded(n))
}

// switchTo switches the thread's next runs to provider.
func (s *switchThread) switchTo(id, provider string, cmd domain.ProviderCommand) {
	s.e.t.Helper()
	s.e.dispatch(domain.Command{ID: id, ThreadID: s.id, Payload: domain.SwitchProvider{Provider: provider, ProviderCommand: cmd}})
}

// play runs the whole scenario: run 1, switch, run 2, switch back (the
// command left to the binding), run 3.
func (s *switchThread) play() domain.Thread {
	s.run(1)
	s.switchTo("switch-away", s.pair.second, s.cmd2)
	s.run(2)
	s.switchTo("switch-back", s.pair.first, domain.ProviderCommand{})
	return s.run(3)
}

// runView is what the tests compare of a run.
type runView struct {
	Ordinal  int
	Provider string
	Status   domain.RunStatus
	Files    []string // its checkpoint's, "kind path +a -d"
}

// handoffView is what the tests compare of a handoff.
type handoffView struct {
	Strategy        domain.HandoffStrategy
	From, To        string
	FromRun, ToRun  int
	Runs            []int
	RunProviders    []string
	Status          domain.HandoffStatus
	ConsumedByRun   int
	Fallback        bool
	Truncated       bool
	BytesIsTextLen  bool
	TextHasMessages []bool // of switchMessages, in the text
	TextHasAnswers  []bool // of the runs' assistant answers, in the text
}

func runViews(th domain.Thread) []runView {
	var out []runView
	for _, r := range th.Runs {
		v := runView{Ordinal: r.Ordinal, Provider: r.Provider, Status: r.Status}
		for _, c := range th.Checkpoints {
			if c.ID == r.CheckpointID {
				for _, f := range c.Files {
					v.Files = append(v.Files, f.Kind+" "+f.Path+" +"+strconv.Itoa(f.Additions)+" -"+strconv.Itoa(f.Deletions))
				}
			}
		}
		out = append(out, v)
	}
	return out
}

func handoffViews(th domain.Thread) []handoffView {
	var out []handoffView
	for _, h := range th.Handoffs {
		v := handoffView{Strategy: h.Strategy, From: h.FromProvider, To: h.ToProvider, FromRun: h.FromRun, ToRun: h.ToRun,
			Status: h.Status, Fallback: h.Fallback != "", Truncated: h.Truncated, BytesIsTextLen: h.Bytes == len(h.Text)}
		for _, r := range h.Runs {
			v.Runs = append(v.Runs, r.Ordinal)
			v.RunProviders = append(v.RunProviders, r.Provider)
		}
		for _, r := range th.Runs {
			if r.ID == h.RunID {
				v.ConsumedByRun = r.Ordinal
			}
		}
		for _, m := range switchMessages {
			v.TextHasMessages = append(v.TextHasMessages, strings.Contains(h.Text, m))
		}
		for _, r := range th.Runs {
			a := assistantText(th, r.ID)
			v.TextHasAnswers = append(v.TextHasAnswers, a != "" && strings.Contains(h.Text, a))
		}
		out = append(out, v)
	}
	return out
}

// sessionOpenings are the thread's SessionOpened events, in order.
func (e *env) sessionOpenings(threadID string) []domain.SessionOpened {
	e.t.Helper()
	recs, err := e.host.ThreadEvents(threadID, 0)
	if err != nil {
		e.t.Fatal(err)
	}
	var out []domain.SessionOpened
	for _, r := range recs {
		p, err := domain.DecodePayload(r.Type, r.Data)
		if err != nil {
			e.t.Fatal(err)
		}
		if o, ok := p.(domain.SessionOpened); ok {
			out = append(out, o)
		}
	}
	return out
}

// Invariant 10, the tenth seed scenario (level 4, recorded from the real
// binaries): a thread runs on one provider, switches to another (whose
// fresh conversation's first prompt carries a full summary of run 1: the
// transcript expects exactly that prompt), and switches back: the first
// provider's own conversation is resumed (thread/resume, session/load)
// and its prompt carries only run 2. Run ordinals go on across providers,
// each run has its checkpoint, and the thread keeps a binding per
// provider with the runs it saw.
func TestProviderSwitchReturn(t *testing.T) {
	for _, pair := range switchPairs {
		t.Run(pair.name(), func(t *testing.T) {
			s := newSwitchThread(t, "provider_switch_return", pair, "provider_switch_return.ndjson")
			e, first, second := s.e, pair.first, pair.second
			s.play()
			th := e.checkSwitchSessions(s.id, []string{"the thread switched to " + second, "the thread switched to " + first, "closed"})
			if recording(t, "provider_switch_return", pair.name()) != nil {
				return // the replay checks the rest
			}

			if diff := cmp.Diff([]runView{
				{1, first, domain.RunStatusCompleted, []string{"added a.txt +1 -0"}},
				{2, second, domain.RunStatusCompleted, []string{"added b.txt +1 -0"}},
				{3, first, domain.RunStatusCompleted, []string{"modified a.txt +1 -0"}},
			}, runViews(th)); diff != "" {
				t.Errorf("runs (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]handoffView{{
				Strategy: domain.HandoffFullThreadSummary, From: first, To: second, FromRun: 1, ToRun: 1,
				Runs: []int{1}, RunProviders: []string{first}, Status: domain.HandoffStatusConsumed, ConsumedByRun: 2,
				BytesIsTextLen: true, TextHasMessages: []bool{true, false, false, false}, TextHasAnswers: []bool{true, false, false},
			}, {
				Strategy: domain.HandoffDeltaSinceLastSeen, From: second, To: first, FromRun: 2, ToRun: 2,
				Runs: []int{2}, RunProviders: []string{second}, Status: domain.HandoffStatusConsumed, ConsumedByRun: 3,
				BytesIsTextLen: true, TextHasMessages: []bool{false, true, false, false}, TextHasAnswers: []bool{false, true, false},
			}}, handoffViews(th)); diff != "" {
				t.Errorf("handoffs (-want +got):\n%s", diff)
			}

			// The provider threads: one per provider; the return made none.
			ses := th.ProviderSessions
			if len(ses) != 3 || len(th.ProviderThreads) != 2 {
				t.Fatalf("sessions %+v, provider threads %+v; want 3 sessions on 2 provider threads", ses, th.ProviderThreads)
			}
			pt1, pt2 := th.ProviderThreads[0], th.ProviderThreads[1]
			if diff := cmp.Diff([]domain.ProviderThread{
				{ID: pt1.ID, Provider: first, SessionID: ses[0].ID, ProviderRef: pt1.ProviderRef},
				{ID: pt2.ID, Provider: second, SessionID: ses[1].ID, ProviderRef: pt2.ProviderRef},
			}, th.ProviderThreads); diff != "" || pt1.ProviderRef == "" || pt2.ProviderRef == "" {
				t.Errorf("provider threads (-want +got):\n%s", diff)
			}
			// The return asked for the first provider's conversation and got it.
			var opened [][3]any
			for _, o := range e.sessionOpenings(s.id) {
				opened = append(opened, [3]any{o.Provider, o.ResumeRequested, o.Resumed})
			}
			if diff := cmp.Diff([][3]any{{first, "", false}, {second, "", false}, {first, pt1.ProviderRef, true}}, opened); diff != "" {
				t.Errorf("sessions opened (provider, resume requested, resumed) (-want +got):\n%s", diff)
			}
			// Each run's turn is on its provider's thread: run 3 on run 1's.
			var turnThreads []string
			for _, pt := range th.ProviderTurns {
				turnThreads = append(turnThreads, pt.ProviderThreadID)
			}
			if diff := cmp.Diff([]string{pt1.ID, pt2.ID, pt1.ID}, turnThreads); diff != "" {
				t.Errorf("provider turns' threads (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]domain.ProviderBinding{
				{Provider: first, Command: s.cmd1, SessionID: ses[2].ID, ProviderThreadID: pt1.ID, ThreadRef: pt1.ProviderRef,
					SeenThrough: 3, Runs: []int{1, 3}},
				{Provider: second, Command: s.cmd2, SessionID: ses[1].ID, ProviderThreadID: pt2.ID, ThreadRef: pt2.ProviderRef,
					SeenThrough: 2, Runs: []int{2}},
			}, th.ProviderBindings); diff != "" {
				t.Errorf("provider bindings (-want +got):\n%s", diff)
			}
			// What each provider was sent: the second provider got run 1 (in
			// the handoff) with its own message; the return got run 2 only.
			if diff := cmp.Diff([][]bool{{true, false, false, false}, {true, true, false, false}, {false, true, true, false}}, [][]bool{
				e.framesHave(ses[0].ID), e.framesHave(ses[1].ID), e.framesHave(ses[2].ID),
			}); diff != "" {
				t.Errorf("switchMessages in each session's raw frames (-want +got):\n%s", diff)
			}
			e.checkPrompt(ses[1].ID, th.Handoffs[0], switchMessages[1])
			e.checkPrompt(ses[2].ID, th.Handoffs[1], switchMessages[2])
			if got := e.files(); !hasFiles(got, map[string]string{"a.txt": "one\nthree\n", "b.txt": "two\n"}) {
				t.Errorf("workspace = %q", got)
			}
		})
	}
}

// framesHave says which of switchMessages the frames a session sent its
// provider carry (what the provider answered may quote its own history).
func (e *env) framesHave(sessionID string) []bool {
	e.t.Helper()
	var sent strings.Builder
	for _, line := range strings.Split(e.rawFrames(sessionID), "\n") {
		var rec struct {
			Dir   string          `json:"dir"`
			Frame json.RawMessage `json:"frame"`
		}
		if json.Unmarshal([]byte(line), &rec) == nil && rec.Dir == "out" {
			sent.Write(rec.Frame)
		}
	}
	var out []bool
	for _, m := range switchMessages {
		out = append(out, strings.Contains(sent.String(), m))
	}
	return out
}

// sentStrings are the strings in the frames a session sent its provider
// (every string value, at any depth).
func (e *env) sentStrings(sessionID string) []string {
	e.t.Helper()
	var out []string
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case string:
			out = append(out, v)
		case []any:
			for _, x := range v {
				walk(x)
			}
		case map[string]any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	for _, line := range strings.Split(e.rawFrames(sessionID), "\n") {
		var rec struct {
			Dir   string `json:"dir"`
			Frame any    `json:"frame"`
		}
		if json.Unmarshal([]byte(line), &rec) == nil && rec.Dir == "out" {
			walk(rec.Frame)
		}
	}
	return out
}

// checkPrompt checks that a session sent its provider the handoff and the
// message as one prompt, exactly (Thread.TurnText).
func (e *env) checkPrompt(sessionID string, h domain.ContextHandoff, message string) {
	e.t.Helper()
	if want := h.Text + "\n\n" + message; !slices.Contains(e.sentStrings(sessionID), want) {
		e.t.Errorf("session %s did not send the prompt %q", sessionID, want)
	}
}

// hasFiles says whether got has want's files (and others only under .git or
// ignored: README.md, .gitignore, build.log).
func hasFiles(got, want map[string]string) bool {
	for k, v := range want {
		if got[k] != v {
			return false
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok && !slices.Contains([]string{"README.md", ".gitignore", "build.log"}, k) {
			return false
		}
	}
	return true
}

// checkSwitchSessions restarts the host (closing the last session) and
// checks the thread's sessions ended as want says: a retired one with the
// switch, the last one closed with the peer content.
func (e *env) checkSwitchSessions(threadID string, want []string) domain.Thread {
	e.t.Helper()
	e.restart()
	th := mustThread(e.t, e, threadID)
	var got []string
	for _, s := range th.ProviderSessions {
		got = append(got, s.EndReason)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		e.t.Errorf("sessions' end reasons (-want +got):\n%s", diff)
	}
	return th
}

// A return whose resume fails falls back to a fresh conversation told the
// whole thread (codex: authored from the recorded transcript, the resume
// answered with the error codex gives for a thread it has no rollout of,
// the plugin starting a fresh thread). The handoff planned at the switch
// (a delta of run 2) is superseded by a full summary of runs 1 and 2 that
// says why, run 3 consumes it, and codex's old conversation is detached.
// The ACP plugin fails the session instead (session/load has no fresh
// fallback in the plugin), so only codex is here.
func TestProviderSwitchReturnResumeFails(t *testing.T) {
	if os.Getenv("BATON_SWITCH_RECORD") != "" {
		t.Skip("not recorded: derived from the recording by testdata/record_switch.sh")
	}
	s := newSwitchThread(t, "provider_switch_return", switchPair{"codex", "claude"}, "provider_switch_return_resume_fails.ndjson")
	e := s.e
	s.play()
	th := e.checkSwitchSessions(s.id, []string{"the thread switched to claude", "the thread switched to codex", "closed"})

	if diff := cmp.Diff([]runView{
		{1, "codex", domain.RunStatusCompleted, []string{"added a.txt +1 -0"}},
		{2, "claude", domain.RunStatusCompleted, []string{"added b.txt +1 -0"}},
		{3, "codex", domain.RunStatusCompleted, []string{"modified a.txt +1 -0"}},
	}, runViews(th)); diff != "" {
		t.Errorf("runs (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]handoffView{{
		Strategy: domain.HandoffFullThreadSummary, From: "codex", To: "claude", FromRun: 1, ToRun: 1,
		Runs: []int{1}, RunProviders: []string{"codex"}, Status: domain.HandoffStatusConsumed, ConsumedByRun: 2,
		BytesIsTextLen: true, TextHasMessages: []bool{true, false, false, false}, TextHasAnswers: []bool{true, false, false},
	}, {
		Strategy: domain.HandoffDeltaSinceLastSeen, From: "claude", To: "codex", FromRun: 2, ToRun: 2,
		Runs: []int{2}, RunProviders: []string{"claude"}, Status: domain.HandoffStatusSuperseded,
		BytesIsTextLen: true, TextHasMessages: []bool{false, true, false, false}, TextHasAnswers: []bool{false, true, false},
	}, {
		Strategy: domain.HandoffFullThreadSummary, From: "claude", To: "codex", FromRun: 1, ToRun: 2,
		Runs: []int{1, 2}, RunProviders: []string{"codex", "claude"}, Status: domain.HandoffStatusConsumed, ConsumedByRun: 3,
		Fallback: true, BytesIsTextLen: true, TextHasMessages: []bool{true, true, false, false}, TextHasAnswers: []bool{true, true, false},
	}}, handoffViews(th)); diff != "" {
		t.Errorf("handoffs (-want +got):\n%s", diff)
	}
	if f := th.Handoffs[2].Fallback; !strings.Contains(f, "could not resume") || !strings.Contains(f, th.ProviderThreads[0].ProviderRef) {
		t.Errorf("fallback = %q; want why, naming the conversation", f)
	}
	ses := th.ProviderSessions
	if len(ses) != 3 || len(th.ProviderThreads) != 3 {
		t.Fatalf("sessions %+v, provider threads %+v; want 3 sessions on 3 provider threads", ses, th.ProviderThreads)
	}
	pt := th.ProviderThreads
	if diff := cmp.Diff([]domain.ProviderThread{
		{ID: pt[0].ID, Provider: "codex", SessionID: ses[0].ID, ProviderRef: pt[0].ProviderRef, Detached: true},
		{ID: pt[1].ID, Provider: "claude", SessionID: ses[1].ID, ProviderRef: pt[1].ProviderRef},
		{ID: pt[2].ID, Provider: "codex", SessionID: ses[2].ID, ProviderRef: pt[2].ProviderRef},
	}, pt); diff != "" || pt[2].ProviderRef == pt[0].ProviderRef {
		t.Errorf("provider threads (-want +got):\n%s", diff)
	}
	var opened [][3]any
	for _, o := range e.sessionOpenings(s.id) {
		opened = append(opened, [3]any{o.Provider, o.ResumeRequested, o.Resumed})
	}
	if diff := cmp.Diff([][3]any{{"codex", "", false}, {"claude", "", false}, {"codex", pt[0].ProviderRef, false}}, opened); diff != "" {
		t.Errorf("sessions opened (provider, resume requested, resumed) (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]domain.ProviderBinding{
		{Provider: "codex", Command: s.cmd1, SessionID: ses[2].ID, ProviderThreadID: pt[2].ID, ThreadRef: pt[2].ProviderRef,
			SeenThrough: 3, Runs: []int{1, 3}},
		{Provider: "claude", Command: s.cmd2, SessionID: ses[1].ID, ProviderThreadID: pt[1].ID, ThreadRef: pt[1].ProviderRef,
			SeenThrough: 2, Runs: []int{2}},
	}, th.ProviderBindings); diff != "" {
		t.Errorf("provider bindings (-want +got):\n%s", diff)
	}
	// The fresh conversation was told runs 1 and 2.
	if diff := cmp.Diff([]bool{true, true, true, false}, e.framesHave(ses[2].ID)); diff != "" {
		t.Errorf("switchMessages in the fresh conversation's frames (-want +got):\n%s", diff)
	}
	e.checkPrompt(ses[2].ID, th.Handoffs[2], switchMessages[2])
}

// Rollback after a switch and return (level 4, recorded): after runs 1
// (first), 2 (second) and 3 (first, resumed), a rollback to run 1 on the
// first provider reconciles its own conversation (codex drops run 3's turn
// natively; the ACP agent, which has no rollback, gets a fresh
// conversation), and leaves the second provider's conversation behind: it
// saw run 2, which is dropped. The switch back to it starts a fresh
// conversation told the thread as it is now (a full summary of run 1).
func TestProviderSwitchRollback(t *testing.T) {
	for _, tc := range []struct {
		pair           switchPair
		reconciliation domain.Reconciliation
		// rolledBack is how the first provider's second session ended: in
		// use after a native rollback, closed by a fresh-thread one.
		rolledBack string
	}{
		{switchPair{"codex", "claude"}, domain.ReconcileNative, "the thread switched to claude"},
		{switchPair{"acp", "opencode"}, domain.ReconcileFreshThread, "closed"},
	} {
		pair := tc.pair
		t.Run(pair.name(), func(t *testing.T) {
			s := newSwitchThread(t, "provider_switch_rollback", pair, "provider_switch_rollback.ndjson")
			e, first, second := s.e, pair.first, pair.second
			s.play()
			rb, err := scenario.RollbackToRun(t.Context(), scenario.Host(e.host), s.id, "rollback", 1)
			if err != nil || rb.Status != domain.RollbackDone {
				t.Fatalf("rollback to run 1: %+v %v", rb, err)
			}
			s.switchTo("switch-again", second, domain.ProviderCommand{})
			s.run(4)
			th := e.checkSwitchSessions(s.id, []string{"the thread switched to " + second, "the thread switched to " + first,
				tc.rolledBack, "closed"})
			if recording(t, "provider_switch_rollback", pair.name()) != nil {
				return // the replay checks the rest
			}
			if diff := cmp.Diff([]runView{
				{1, first, domain.RunStatusCompleted, []string{"added a.txt +1 -0"}},
				{2, second, domain.RunStatusRolledBack, []string{"added b.txt +1 -0"}},
				{3, first, domain.RunStatusRolledBack, []string{"modified a.txt +1 -0"}},
				{4, second, domain.RunStatusCompleted, []string{"added c.txt +1 -0"}},
			}, runViews(th)); diff != "" {
				t.Errorf("runs (-want +got):\n%s", diff)
			}
			rb = th.Rollbacks[0]
			if rb.Reconciliation != tc.reconciliation || rb.Status != domain.RollbackDone ||
				(tc.reconciliation == domain.ReconcileNative) != (rb.TurnsDropped == 1) {
				t.Errorf("rollback = %s, %s, %d turns dropped; want %s (native: run 3's one turn)", rb.Status, rb.Reconciliation,
					rb.TurnsDropped, tc.reconciliation)
			}
			// The handoffs: the delta run 3 consumed covered run 2, which is
			// dropped (superseded); the second provider's fresh conversation
			// is told run 1 only. A fresh-thread rollback plans a handoff for
			// the first provider, which the switch supersedes.
			full := func(from, to string, run int, status domain.HandoffStatus) handoffView {
				return handoffView{Strategy: domain.HandoffFullThreadSummary, From: from, To: to, FromRun: 1, ToRun: 1,
					Runs: []int{1}, RunProviders: []string{first}, Status: status, ConsumedByRun: run, BytesIsTextLen: true,
					TextHasMessages: []bool{true, false, false, false}, TextHasAnswers: []bool{true, false, false, false}}
			}
			want := []handoffView{full(first, second, 2, domain.HandoffStatusConsumed), {
				Strategy: domain.HandoffDeltaSinceLastSeen, From: second, To: first, FromRun: 2, ToRun: 2,
				Runs: []int{2}, RunProviders: []string{second}, Status: domain.HandoffStatusSuperseded, ConsumedByRun: 3,
				BytesIsTextLen: true, TextHasMessages: []bool{false, true, false, false}, TextHasAnswers: []bool{false, true, false, false},
			}}
			if tc.reconciliation == domain.ReconcileFreshThread {
				want = append(want, full(first, first, 0, domain.HandoffStatusSuperseded))
			}
			want = append(want, full(first, second, 4, domain.HandoffStatusConsumed))
			if diff := cmp.Diff(want, handoffViews(th)); diff != "" {
				t.Errorf("handoffs (-want +got):\n%s", diff)
			}

			ses, pt := th.ProviderSessions, th.ProviderThreads
			if len(ses) != 4 || len(pt) != 3 {
				t.Fatalf("sessions %+v, provider threads %+v; want 4 sessions on 3 provider threads", ses, pt)
			}
			native := tc.reconciliation == domain.ReconcileNative
			if diff := cmp.Diff([]domain.ProviderThread{
				{ID: pt[0].ID, Provider: first, SessionID: ses[0].ID, ProviderRef: pt[0].ProviderRef, Detached: !native},
				{ID: pt[1].ID, Provider: second, SessionID: ses[1].ID, ProviderRef: pt[1].ProviderRef, Detached: true},
				{ID: pt[2].ID, Provider: second, SessionID: ses[3].ID, ProviderRef: pt[2].ProviderRef},
			}, pt); diff != "" || pt[2].ProviderRef == pt[1].ProviderRef {
				t.Errorf("provider threads (-want +got):\n%s", diff)
			}
			// The second provider's return opened a fresh conversation.
			var opened [][3]any
			for _, o := range e.sessionOpenings(s.id) {
				opened = append(opened, [3]any{o.Provider, o.ResumeRequested, o.Resumed})
			}
			if diff := cmp.Diff([][3]any{{first, "", false}, {second, "", false}, {first, pt[0].ProviderRef, true}, {second, "", false}},
				opened); diff != "" {
				t.Errorf("sessions opened (provider, resume requested, resumed) (-want +got):\n%s", diff)
			}
			firstBinding := domain.ProviderBinding{Provider: first, Command: s.cmd1, SessionID: ses[2].ID, SeenThrough: 0, Runs: []int{1, 3}}
			if native {
				firstBinding.ProviderThreadID, firstBinding.ThreadRef, firstBinding.SeenThrough = pt[0].ID, pt[0].ProviderRef, 1
			}
			if diff := cmp.Diff([]domain.ProviderBinding{firstBinding,
				{Provider: second, Command: s.cmd2, SessionID: ses[3].ID, ProviderThreadID: pt[2].ID, ThreadRef: pt[2].ProviderRef,
					SeenThrough: 4, Runs: []int{2, 4}},
			}, th.ProviderBindings); diff != "" {
				t.Errorf("provider bindings (-want +got):\n%s", diff)
			}
			// The fresh conversation was told run 1, not the dropped runs.
			if diff := cmp.Diff([]bool{true, false, false, true}, e.framesHave(ses[3].ID)); diff != "" {
				t.Errorf("switchMessages in the second provider's fresh conversation (-want +got):\n%s", diff)
			}
			e.checkPrompt(ses[3].ID, th.Handoffs[len(th.Handoffs)-1], switchMessages[3])
			if got := e.files(); !hasFiles(got, map[string]string{"a.txt": "one\n", "c.txt": "four\n"}) {
				t.Errorf("workspace = %q", got)
			}
		})
	}
}

// Rollback on the second provider, then the return (level 4, recorded):
// after run 1 (first) and run 2 (second), a rollback to run 1 reconciles
// the second provider's conversation (claude and opencode drop run 2
// natively), and the first provider, which saw run 1 and nothing since
// that is left, resumes its conversation with no handoff at all.
func TestProviderSwitchRollbackAway(t *testing.T) {
	for _, tc := range []struct {
		pair           switchPair
		reconciliation domain.Reconciliation
		// rolledBack is how the second provider's session ended: in use
		// after a native rollback, closed by a fresh-thread one.
		rolledBack string
	}{
		// Claude Code cannot cut its conversation before its first turn
		// (there is no assistant message to resume at): a fresh one.
		{switchPair{"codex", "claude"}, domain.ReconcileFreshThread, "closed"},
		{switchPair{"acp", "opencode"}, domain.ReconcileNative, "the thread switched to acp"},
	} {
		pair := tc.pair
		t.Run(pair.name(), func(t *testing.T) {
			s := newSwitchThread(t, "provider_switch_rollback_away", pair, "provider_switch_rollback_away.ndjson")
			e, first, second := s.e, pair.first, pair.second
			s.run(1)
			s.switchTo("switch-away", second, s.cmd2)
			s.run(2)
			rb, err := scenario.RollbackToRun(t.Context(), scenario.Host(e.host), s.id, "rollback", 1)
			if err != nil || rb.Status != domain.RollbackDone {
				t.Fatalf("rollback to run 1: %+v %v", rb, err)
			}
			s.switchTo("switch-back", first, domain.ProviderCommand{})
			s.run(3)
			th := e.checkSwitchSessions(s.id, []string{"the thread switched to " + second, tc.rolledBack, "closed"})
			if recording(t, "provider_switch_rollback_away", pair.name()) != nil {
				return // the replay checks the rest
			}
			if diff := cmp.Diff([]runView{
				{1, first, domain.RunStatusCompleted, []string{"added a.txt +1 -0"}},
				{2, second, domain.RunStatusRolledBack, []string{"added b.txt +1 -0"}},
				{3, first, domain.RunStatusCompleted, []string{"modified a.txt +1 -0"}},
			}, runViews(th)); diff != "" {
				t.Errorf("runs (-want +got):\n%s", diff)
			}
			native := tc.reconciliation == domain.ReconcileNative
			rb = th.Rollbacks[0]
			if rb.Reconciliation != tc.reconciliation || rb.Status != domain.RollbackDone || native != (rb.TurnsDropped == 1) {
				t.Errorf("rollback = %s, %s, %d turns dropped; want %s (native: run 2's one turn)", rb.Status, rb.Reconciliation,
					rb.TurnsDropped, tc.reconciliation)
			}
			// Run 3 carries no handoff: the first provider has seen run 1,
			// all that is left. (A fresh-thread rollback planned one for the
			// second provider's fresh conversation; the switch superseded it.)
			summary := func(status domain.HandoffStatus, run int) handoffView {
				return handoffView{Strategy: domain.HandoffFullThreadSummary, From: first, To: second, FromRun: 1, ToRun: 1,
					Runs: []int{1}, RunProviders: []string{first}, Status: status, ConsumedByRun: run, BytesIsTextLen: true,
					TextHasMessages: []bool{true, false, false, false}, TextHasAnswers: []bool{true, false, false}}
			}
			want := []handoffView{summary(domain.HandoffStatusConsumed, 2)}
			if !native {
				want = append(want, summary(domain.HandoffStatusSuperseded, 0))
			}
			if diff := cmp.Diff(want, handoffViews(th)); diff != "" {
				t.Errorf("handoffs (-want +got):\n%s", diff)
			}
			ses, pt := th.ProviderSessions, th.ProviderThreads
			if len(ses) != 3 || len(pt) != 2 {
				t.Fatalf("sessions %+v, provider threads %+v; want 3 sessions on 2 provider threads", ses, pt)
			}
			if diff := cmp.Diff([]domain.ProviderThread{
				{ID: pt[0].ID, Provider: first, SessionID: ses[0].ID, ProviderRef: pt[0].ProviderRef},
				{ID: pt[1].ID, Provider: second, SessionID: ses[1].ID, ProviderRef: pt[1].ProviderRef, Detached: !native},
			}, pt); diff != "" {
				t.Errorf("provider threads (-want +got):\n%s", diff)
			}
			var opened [][3]any
			for _, o := range e.sessionOpenings(s.id) {
				opened = append(opened, [3]any{o.Provider, o.ResumeRequested, o.Resumed})
			}
			if diff := cmp.Diff([][3]any{{first, "", false}, {second, "", false}, {first, pt[0].ProviderRef, true}}, opened); diff != "" {
				t.Errorf("sessions opened (provider, resume requested, resumed) (-want +got):\n%s", diff)
			}
			// The second provider's conversation has seen nothing that is
			// left (natively cut before run 2, or left behind).
			secondBinding := domain.ProviderBinding{Provider: second, Command: s.cmd2, SessionID: ses[1].ID, Runs: []int{2}}
			if native {
				secondBinding.ProviderThreadID, secondBinding.ThreadRef = pt[1].ID, pt[1].ProviderRef
			}
			if diff := cmp.Diff([]domain.ProviderBinding{
				{Provider: first, Command: s.cmd1, SessionID: ses[2].ID, ProviderThreadID: pt[0].ID, ThreadRef: pt[0].ProviderRef,
					SeenThrough: 3, Runs: []int{1, 3}},
				secondBinding,
			}, th.ProviderBindings); diff != "" {
				t.Errorf("provider bindings (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]bool{false, false, true, false}, e.framesHave(ses[2].ID)); diff != "" {
				t.Errorf("switchMessages in the return's frames (-want +got):\n%s", diff)
			}
			if got := e.files(); !hasFiles(got, map[string]string{"a.txt": "one\nthree\n"}) {
				t.Errorf("workspace = %q", got)
			}
		})
	}
}

// A switch that changes only the provider's command: the open session,
// running the old command, is retired with that reason, and the next run
// resumes the same conversation in a process running the new one, with no
// handoff (the conversation has seen every run).
func TestSwitchToAnotherCommandResumesTheConversation(t *testing.T) {
	e := newEnv(t)
	threadID := e.createThread("acp", "acp/resume.ndjson")
	groups := plugintest.ReadGroups(t, filepath.Join(root, "testdata", "acp/resume.messages"))
	e.dispatch(domain.Command{ID: "send-1", ThreadID: threadID, Payload: domain.DispatchMessage{Text: groups[0][0]}})
	th := e.waitFor(threadID, "run 1 to end", allRunsEnded(1))
	ended := th.Sequence
	// The same replay, started by another command line (a flag given twice).
	argv := append(slices.Clone(th.ProviderCommand.Argv), "--speed", "0")
	e.dispatch(domain.Command{ID: "switch", ThreadID: threadID, Payload: domain.SwitchProvider{Provider: "acp",
		ProviderCommand: domain.ProviderCommand{Argv: argv}}})
	e.dispatch(domain.Command{ID: "send-2", ThreadID: threadID, Payload: domain.DispatchMessage{Text: groups[1][0]}})
	th = e.waitFor(threadID, "run 2 to end", allRunsEnded(2))
	ref := th.ProviderThreads[0].ProviderRef
	want := []string{"run 2 started", "session ended: the thread switched to acp, with another command",
		fmt.Sprintf("session opened (resume %q: true)", ref), `run 2 ended completed "end_turn" `}
	if diff := cmp.Diff(want, e.lifecycle(threadID, ended)); diff != "" {
		t.Errorf("after run 1 (-want +got):\n%s", diff)
	}
	if got := assistantText(th, th.Runs[1].ID); got != "The word was pineapple." || len(th.Handoffs) != 0 || len(th.ProviderThreads) != 1 {
		t.Errorf("run 2 said %q; handoffs %+v; provider threads %+v", got, th.Handoffs, th.ProviderThreads)
	}
	if len(th.ProviderSessions) != 2 {
		t.Fatalf("sessions %+v; want the first retired and a second", th.ProviderSessions)
	}
	if s := th.ProviderSessions[1]; !slices.Equal(th.ProviderBindings[0].Command.Argv, argv) || s.Resumed != ref {
		t.Errorf("binding %+v, session %+v", th.ProviderBindings[0], s)
	}
}
