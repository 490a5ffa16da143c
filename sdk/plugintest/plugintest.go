// Package plugintest is the conformance kit for Baton plugins. A plugin's
// tests build the real plugin binary, start it through go-plugin exactly as
// the host does, and give it the replay peer as its provider process, so the
// whole child-process boundary is under test.
//
// Every plugin runs the conformance suite, Conformance: the standard
// scenarios its declared capabilities call for, each played from a replay
// transcript in its testdata directory (Dir), every session's events
// checked against the event contract (CheckContract):
//
//	func TestMain(m *testing.M) { plugintest.Main(m) }
//
//	func TestConformance(t *testing.T) {
//		plugintest.Conformance(t, plugintest.Build(t, "."), plugintest.Dir("testdata"))
//	}
//
// Its own tests drive sessions by hand:
//
//	func TestSimple(t *testing.T) {
//		p := plugintest.Start(t, plugintest.Build(t, "."))
//		s := p.Open(t, "testdata/simple.ndjson", t.TempDir())
//		s.StartTurn(t, "hello") // the input it was recorded with: the peer checks what the plugin sends
//		events := s.WaitTurn(t)
//		if got := plugintest.ItemText(events, "", sdk.ItemAssistantMessage); got != "Hello!" {
//			t.Errorf("assistant text = %q", got)
//		}
//		plugintest.CheckItemsClosed(t, events)
//		s.Close(t)
//	}
//
// Filter, Count, Index and Find select events; ItemText, CheckItemsClosed
// and CheckRawFrames state what every plugin's events must show.
//
// Transcripts are recorded from the real provider (`replaypeer record`
// wrapped around it as the session's provider command; see the README's
// "Writing a plugin"), or written by hand (see package transcript, and
// CrashTranscript and MalformedTranscript for the two Conformance derives).
// A scenario's inputs sit beside its transcript (see Dir).
//
// The replay peer is the test binary itself, re-executed (or the binary
// named by $BATON_REPLAYPEER), so a plugin module needs nothing but sdk.
package plugintest

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/baton-run/baton/sdk"
	"github.com/baton-run/baton/sdk/clock"
	"github.com/baton-run/baton/sdk/pluginclient"
	"github.com/baton-run/baton/sdk/replay"
	"github.com/baton-run/baton/sdk/transcript"
)

const peerEnv = "BATON_PLUGINTEST_PEER"

// Main runs the package's tests. When the test binary is started as the
// replay peer it plays a transcript instead.
func Main(m *testing.M) {
	if os.Getenv(peerEnv) == "1" {
		os.Exit(replay.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	}
	CoverChildren()
	os.Exit(m.Run())
}

// CoverChildren makes the processes this test binary starts write their
// coverage counters where it writes its own: it points $GOCOVERDIR at
// -test.gocoverdir. A binary built with -cover (the plugin, the replay
// peer) writes to $GOCOVERDIR when it exits. go test points both at a
// temporary directory of its own and keeps only the test binary's counters
// from it; run with -args -test.gocoverdir=DIR, the test binary and all
// its children write to DIR, which go tool covdata reads. Call it from
// TestMain, before m.Run; Main calls it.
func CoverChildren() {
	flag.Parse()
	if f := flag.Lookup("test.gocoverdir"); f != nil && f.Value.String() != "" {
		os.Setenv("GOCOVERDIR", f.Value.String())
	}
}

var (
	buildMu sync.Mutex
	built   = map[string]string{}
)

// Build builds the main package in dir once per test binary and returns the
// executable's path. The go command sees the test's environment, so
// GOFLAGS="-cover -coverpkg=..." builds a plugin that reports its coverage
// (see CoverChildren).
func Build(t testing.TB, dir string) string {
	t.Helper()
	buildMu.Lock()
	defer buildMu.Unlock()
	abs, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	if p, ok := built[abs]; ok {
		return p
	}
	out, err := os.MkdirTemp("", "plugintest-")
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(out, filepath.Base(abs))
	cmd := exec.Command("go", "build", "-o", bin, ".")
	cmd.Dir = abs
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build plugin in %s: %v\n%s", abs, err, b)
	}
	built[abs] = bin
	return bin
}

// PeerCommand is the provider command that plays transcript in workspace.
// The peer keeps its cursor in stateFile (if not empty), so that a provider
// started again (a resumed session) continues the transcript. When the
// transcript checks the provider's arguments (transcript.Invoked), the
// command ends in "--", so that what the plugin appends is checked; an
// HTTP transcript (transcript.IsHTTP) is served on a free port of
// 127.0.0.1 (--listen).
func PeerCommand(file, workspace, stateFile string) sdk.ProviderCommand {
	abs, _ := filepath.Abs(file)
	args := []string{"--transcript", abs, "--workspace", workspace, "--speed", "0"}
	if stateFile != "" {
		args = append(args, "--state", stateFile)
	}
	if t, err := transcript.ReadFile(abs); err == nil {
		args = append(args, replay.PeerArgs(t)...)
	}
	if peer := os.Getenv("BATON_REPLAYPEER"); peer != "" {
		return sdk.ProviderCommand{Argv: append([]string{peer}, args...)}
	}
	self, _ := os.Executable()
	return sdk.ProviderCommand{Argv: append([]string{self}, args...), Env: []string{peerEnv + "=1"}}
}

// checkTranscript says whether a provider command that plays a transcript
// (a replay peer's --transcript) plays one for the plugin described by d:
// the header's provider and protocol must be its name and wire protocol.
// A command that plays none passes.
func checkTranscript(d sdk.Description, argv []string) error {
	file := transcriptArg(argv)
	if file == "" {
		return nil
	}
	tr, err := transcript.ReadFile(file)
	if err != nil {
		return err
	}
	if err := tr.Header.CheckDescription(d.Name, d.WireProtocol); err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	return nil
}

// transcriptArg is the transcript a replay peer command plays: the value
// of its --transcript flag, or "".
func transcriptArg(argv []string) string {
	for i, a := range argv {
		if a == "--" {
			break
		}
		if a == "--transcript" && i+1 < len(argv) {
			return argv[i+1]
		}
		if v, ok := strings.CutPrefix(a, "--transcript="); ok {
			return v
		}
	}
	return ""
}

// Plugin is a plugin process started for a test.
type Plugin struct {
	*pluginclient.Plugin
	Description sdk.Description
}

// Start launches the plugin binary through go-plugin and checks that it
// describes itself sensibly. It is killed when the test ends.
func Start(t testing.TB, bin string) *Plugin {
	t.Helper()
	p, err := pluginclient.Launch(pluginclient.LaunchConfig{Path: bin, Logger: hclog.New(&hclog.LoggerOptions{
		Name: "plugin", Level: hclog.Warn, Output: testWriter{t}})})
	if err != nil {
		t.Fatalf("launch plugin: %v", err)
	}
	t.Cleanup(p.Kill)
	d, err := p.Describe(context.Background())
	if err != nil {
		t.Fatalf("describe: %v", err)
	}
	if d.Name == "" || d.Version == "" || d.WireProtocol == "" {
		t.Fatalf("describe: name, version and wire protocol must all be set, got %+v", d)
	}
	return &Plugin{Plugin: p, Description: d}
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(b), "\n"))
	return len(b), nil
}

// Session is an open session whose events the test reads.
type Session struct {
	ID string
	// Answer is how requests the provider opens are answered while the
	// test waits for events (default: decline, as a host does by default).
	Answer sdk.Decision
	// AnswerFunc, when set, answers instead of Answer: a decision and
	// answers for each request ("" leaves the request pending).
	AnswerFunc func(sdk.RuntimeEvent) (sdk.Decision, map[string]string)

	Open   sdk.OpenSessionResponse
	req    sdk.OpenSessionRequest
	plugin *Plugin
	events chan sdk.RuntimeEvent
	errc   chan error
	all    []sdk.RuntimeEvent
	cancel context.CancelFunc
	turns  int
}

var sessionSeq struct {
	sync.Mutex
	n int
}

// Open opens a session whose provider is the replay peer playing
// transcript in workspace.
func (p *Plugin) Open(t testing.TB, transcript, workspace string) *Session {
	t.Helper()
	state := filepath.Join(t.TempDir(), "cursor")
	return p.OpenWith(t, sdk.OpenSessionRequest{Cwd: workspace, Command: PeerCommand(transcript, workspace, state)})
}

// Resume closes the session (its provider ends) and opens another on the
// same provider command, asking it to resume the provider's thread: what a
// host does when a thread continues in a new session.
func (s *Session) Resume(t testing.TB) *Session {
	t.Helper()
	s.Close(t)
	req := s.req
	req.SessionID = ""
	req.ResumeThreadRef = s.Open.ProviderThreadRef
	return s.plugin.OpenWith(t, req)
}

// OpenWith opens a session with a request of the test's own. When its
// provider command plays a transcript (--transcript), the transcript must
// be one for this plugin: its header's provider and protocol are the
// plugin's Describe name and wire protocol.
func (p *Plugin) OpenWith(t testing.TB, req sdk.OpenSessionRequest) *Session {
	t.Helper()
	if err := checkTranscript(p.Description, req.Command.Argv); err != nil {
		t.Fatalf("open session: %v", err)
	}
	if req.SessionID == "" {
		sessionSeq.Lock()
		sessionSeq.n++
		req.SessionID = fmt.Sprintf("test-session-%d", sessionSeq.n)
		sessionSeq.Unlock()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := p.OpenSession(ctx, req)
	if err != nil {
		t.Fatalf("open session: %v", err)
	}
	sctx, scancel := context.WithCancel(context.Background())
	s := &Session{ID: req.SessionID, Open: resp, req: req, plugin: p, events: make(chan sdk.RuntimeEvent, 1024),
		errc: make(chan error, 1), cancel: scancel}
	go func() {
		defer close(s.events)
		for ev, err := range p.Events(sctx, req.SessionID, 0) {
			if err != nil {
				s.errc <- err
				return
			}
			s.events <- ev
		}
	}()
	t.Cleanup(func() {
		scancel()
		_ = p.CloseSession(context.Background(), req.SessionID)
	})
	return s
}

// StartTurn starts a turn. Its client turn id is "client-turn-N" (N
// counts the session's turns from 1), which the plugin should echo on the
// turn's turn_started event.
func (s *Session) StartTurn(t testing.TB, text string) sdk.StartTurnResponse {
	t.Helper()
	s.turns++
	r, err := s.plugin.StartTurn(context.Background(), sdk.StartTurnRequest{SessionID: s.ID, Input: sdk.TurnInput{Text: text},
		ClientTurnID: fmt.Sprintf("client-turn-%d", s.turns)})
	if err != nil {
		t.Fatalf("start turn: %v", err)
	}
	return r
}

// Interrupt asks the plugin to stop a turn (empty: the current one).
func (s *Session) Interrupt(t testing.TB, turnRef string) {
	t.Helper()
	if err := s.plugin.InterruptTurn(context.Background(), sdk.InterruptTurnRequest{SessionID: s.ID, TurnRef: turnRef}); err != nil {
		t.Fatalf("interrupt turn: %v", err)
	}
}

// Steer adds input to a running turn; the error is the plugin's.
func (s *Session) Steer(turnRef, text string) error {
	return s.plugin.SteerTurn(context.Background(), sdk.SteerTurnRequest{SessionID: s.ID, TurnRef: turnRef, Input: sdk.TurnInput{Text: text}})
}

// Timeout bounds each wait for events; a replay needs no real time, so
// hitting it means the plugin or the peer is stuck.
var Timeout = 30 * time.Second

// Clock is the clock Timeout is read on (nil: the system clock).
var Clock clock.Clock

// Until reads events until one satisfies stop and returns them all (that
// one included).
func (s *Session) Until(t testing.TB, what string, stop func(sdk.RuntimeEvent) bool) []sdk.RuntimeEvent {
	t.Helper()
	var got []sdk.RuntimeEvent
	deadline := clock.Or(Clock).NewTimer(Timeout)
	defer deadline.Stop()
	for {
		select {
		case ev, ok := <-s.events:
			if !ok {
				select {
				case err := <-s.errc:
					t.Fatalf("waiting for %s: event stream failed: %v (events so far: %s)", what, err, Kinds(got))
				default:
				}
				t.Fatalf("waiting for %s: the event stream ended (events so far: %s)", what, Kinds(got))
			}
			got = append(got, ev)
			s.all = append(s.all, ev)
			if ev.Kind == sdk.EventRequestOpened {
				answer, answers := s.Answer, map[string]string(nil)
				if answer == "" {
					answer = sdk.DecisionDecline
				}
				if s.AnswerFunc != nil {
					answer, answers = s.AnswerFunc(ev)
				}
				if answer != "" {
					if err := s.plugin.RespondToRequest(context.Background(), sdk.RespondToRequestRequest{SessionID: s.ID,
						RequestRef: ev.RequestRef, Decision: answer, Answers: answers}); err != nil {
						t.Fatalf("answer request %s: %v", ev.RequestRef, err)
					}
				}
			}
			if stop(ev) {
				return got
			}
		case <-deadline.C():
			t.Fatalf("waiting for %s: nothing after %v (events so far: %s)", what, Timeout, Kinds(got))
		}
	}
}

// WaitTurn reads events up to and including the next turn terminal event.
func (s *Session) WaitTurn(t testing.TB) []sdk.RuntimeEvent {
	t.Helper()
	return s.Until(t, "the turn's terminal event", func(ev sdk.RuntimeEvent) bool { return ev.Kind == sdk.EventTurnTerminal })
}

// WaitTurnRef reads events up to and including the terminal event of the
// turn named turnRef (one StartTurn answered, or a turn_started named),
// past other turns' terminals: a subagent's, or a turn queued before it.
func (s *Session) WaitTurnRef(t testing.TB, turnRef string) []sdk.RuntimeEvent {
	t.Helper()
	if turnRef == "" {
		t.Fatal("wait for a turn: no turn ref (the plugin named none)")
	}
	return s.Until(t, "turn "+turnRef+" to end", func(ev sdk.RuntimeEvent) bool {
		return ev.Kind == sdk.EventTurnTerminal && ev.TurnRef == turnRef
	})
}

// Close closes the session and checks that the provider ended cleanly: a
// replay peer that saw a mismatch or kept unused entries exits non-zero,
// and that fails the test here with the peer's own explanation.
func (s *Session) Close(t testing.TB) []sdk.RuntimeEvent {
	t.Helper()
	if err := s.plugin.CloseSession(context.Background(), s.ID); err != nil {
		t.Fatalf("close session: %v", err)
	}
	evs := s.Until(t, "runtime exit", func(ev sdk.RuntimeEvent) bool { return ev.Kind == sdk.EventRuntimeExited })
	last := evs[len(evs)-1]
	if last.Failure != nil {
		t.Fatalf("the provider did not end cleanly: %s", last.Failure.Message)
	}
	return evs
}

// Plugin is the plugin the session is open in, for the calls a test makes
// itself (RespondToRequest, RollbackThread, ...).
func (s *Session) Plugin() *Plugin { return s.plugin }

// Request is the request the session was opened with.
func (s *Session) Request() sdk.OpenSessionRequest { return s.req }

// All is every event read so far.
func (s *Session) All() []sdk.RuntimeEvent { return s.all }

// Kinds lists event kinds, for failure messages.
func Kinds(evs []sdk.RuntimeEvent) string {
	ks := make([]string, len(evs))
	for i, ev := range evs {
		ks[i] = string(ev.Kind)
		if ev.ItemKind != "" {
			ks[i] += "(" + string(ev.ItemKind) + ")"
		}
	}
	return "[" + strings.Join(ks, " ") + "]"
}

// ReadGroups reads a scenario's user messages: one per line, in groups
// separated by "---" lines. Each group after the first is sent after the
// provider was started again (a resumed session).
func ReadGroups(t testing.TB, file string) [][]string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	groups := [][]string{nil}
	for _, l := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
		switch {
		case l == "---":
			groups = append(groups, nil)
		case l != "":
			groups[len(groups)-1] = append(groups[len(groups)-1], l)
		}
	}
	return groups
}

// ReadMessages reads a scenario's user messages, every group's, in order.
func ReadMessages(t testing.TB, file string) []string {
	t.Helper()
	var out []string
	for _, g := range ReadGroups(t, file) {
		out = append(out, g...)
	}
	return out
}

// ACPReplies reads, from an ACP transcript, the assistant text the agent
// sends in each prompt turn (agent_message_chunk updates between a
// session/prompt and its stopReason response): what a replay must yield.
func ACPReplies(t testing.TB, file string) []string {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var texts []string
	inTurn := false
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		var e struct {
			Type  string `json:"type"`
			Frame struct {
				Method string `json:"method"`
				Result struct {
					StopReason string `json:"stopReason"`
				} `json:"result"`
				Params struct {
					Update struct {
						Kind    string `json:"sessionUpdate"`
						Content struct {
							Text string `json:"text"`
						} `json:"content"`
					} `json:"update"`
				} `json:"params"`
			} `json:"frame"`
		}
		if json.Unmarshal(sc.Bytes(), &e) != nil {
			continue
		}
		switch {
		case e.Type == "expect_outbound" && e.Frame.Method == "session/prompt":
			texts, inTurn = append(texts, ""), true
		case e.Type == "emit_inbound" && e.Frame.Result.StopReason != "":
			inTurn = false
		case inTurn && e.Type == "emit_inbound" && e.Frame.Params.Update.Kind == "agent_message_chunk":
			texts[len(texts)-1] += e.Frame.Params.Update.Content.Text
		}
	}
	return texts
}
