package orchestrator_test

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/hashicorp/go-hclog"

	"github.com/baton-run/baton/host/internal/domain"
	"github.com/baton-run/baton/host/internal/eventlog"
	"github.com/baton-run/baton/host/internal/ids"
	"github.com/baton-run/baton/host/internal/notify"
	"github.com/baton-run/baton/host/internal/orchestrator"
	"github.com/baton-run/baton/host/internal/pluginhost"
	"github.com/baton-run/baton/host/internal/rawframes"
	"github.com/baton-run/baton/host/internal/scenario"
	"github.com/baton-run/baton/host/internal/testbin"
	"github.com/baton-run/baton/sdk"
	"github.com/baton-run/baton/sdk/clock"
	"github.com/baton-run/baton/sdk/plugintest"
	"github.com/baton-run/baton/sdk/replay"
	"github.com/baton-run/baton/sdk/transcript"
)

// root is the repository root, from this package's directory.
const root = "../../.."

var (
	pluginDir string // holds baton-plugin-* and plugins.lock
	peerBin   string // the replay peer
)

// TestMain builds the real plugin and replay peer binaries once (or uses
// the ones `make build` made, named by $BATON_BIN).
func TestMain(m *testing.M) {
	if dir := os.Getenv("BATON_CRASH_HELPER"); dir != "" {
		os.Exit(crashHelper(dir)) // this process is the host a test kills
	}
	if dir := os.Getenv("BATON_QUEUED_HELPER"); dir != "" {
		os.Exit(queuedHelper(dir)) // this process is the host a test kills mid-run
	}
	if dir := os.Getenv("BATON_WAITING_HELPER"); dir != "" {
		os.Exit(waitingHelper(dir)) // this process is the host a test kills during a wait
	}
	if dir := os.Getenv("BATON_RSS_HELPER"); dir != "" {
		os.Exit(orchestrator.RSSHelper(dir)) // this process is the host a benchmark measures
	}
	plugintest.CoverChildren()
	code, err := setup(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, "setup:", err)
		os.Exit(1)
	}
	os.Exit(code)
}

func setup(m *testing.M) (int, error) {
	bins, err := testbin.Build(root, false)
	if err != nil {
		return 0, err
	}
	defer bins.Remove()
	defer removeTestPlugins()
	pluginDir, peerBin = bins.Dir, bins.Peer
	return m.Run(), nil
}

// env is one test's world: a data dir, a workspace, a clock, and a host on
// them.
type env struct {
	t    *testing.T
	data string
	ws   string
	seed uint64
	// clock is the host's: it reads epoch until a test moves it, so every
	// recorded instant is known, and no timer of the host fires unless a
	// test moves time past it. A restarted host keeps it.
	clock *clock.Fake
	host  *orchestrator.Host
	// idle is the host's IdleTimeout (0: sessions are never reaped).
	idle time.Duration
	// dirs are plugin directories searched after pluginDir.
	dirs []string
	// calls is the host's PluginCallTimeout (0: callDeadline).
	calls time.Duration
	// grace is the host's InterruptGrace (0: domain.DefaultInterruptGrace).
	grace time.Duration
	// stall and requests are the host's TurnStallTimeout and
	// RequestTimeout (0: never).
	stall, requests time.Duration
	// embedded: the host is one embedded for a command, not an unattended
	// one (baton serve).
	embedded bool
	// frames is the host's raw-frame logs' policy; unless a test sets one,
	// the logs have no age bound, so that no retention pass is among the
	// timers a test expects (a log's age is by its file's time, not the
	// fake clock's).
	frames rawframes.Policy
	// storeFS is the file system the host's event log runs on (nil: the
	// operating system's).
	storeFS vfs.FS
	// notify is the host's webhooks (nil: none).
	notify *notify.Config
	// openLog opens the host's event log (nil: Pebble in the data dir).
	openLog func() (eventlog.Log, error)
	// hostName names the host on a shared log (openLog): it runs the
	// threads made on it and follows the others'.
	hostName string
}

// callDeadline is the plugin call timeout of a test's host unless it sets
// one: far from every other bound of the host, so that a test of those
// tells the deadlines of the plugin calls in flight apart (bounds).
const callDeadline = 1000 * time.Hour

// bounds is the fake clock's pending timers but the deadlines of plugin
// calls in flight (callDeadline's).
func bounds(c *clock.Fake) []time.Duration { return boundsOf(c.Pending()) }

// boundsOf is the pending durations p but plugin calls' deadlines.
func boundsOf(p []time.Duration) []time.Duration {
	var ds []time.Duration
	for _, d := range p {
		if d <= callDeadline/2 {
			ds = append(ds, d)
		}
	}
	return ds
}

// waitBounds waits until n timers but plugin calls' deadlines are pending
// (bounds) and returns them.
func waitBounds(ctx context.Context, c *clock.Fake, n int) ([]time.Duration, error) {
	p, err := c.WaitPending(ctx, func(p []time.Duration) bool { return len(boundsOf(p)) >= n })
	return boundsOf(p), err
}

// epoch is the instant every test's host starts at.
var epoch = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func newEnv(t *testing.T) *env {
	t.Helper()
	e := &env{t: t, data: t.TempDir(), ws: t.TempDir(), seed: 1, clock: clock.NewFake(epoch)}
	e.open()
	t.Cleanup(func() {
		if e.host != nil {
			e.host.Close()
		}
	})
	return e
}

func (e *env) open() {
	e.t.Helper()
	h, err := orchestrator.Open(orchestrator.Config{DataDir: e.data, PluginDirs: append([]string{pluginDir}, e.dirs...),
		Logger: hclog.New(&hclog.LoggerOptions{Name: "host", Level: hclog.Warn, Output: testWriter{e.t}}),
		IDs:    ids.Seeded(e.seed), Clock: e.clock, IdleTimeout: e.idle, Unattended: !e.embedded, PluginCallTimeout: cmp.Or(e.calls, callDeadline),
		InterruptGrace: e.grace, TurnStallTimeout: e.stall, RequestTimeout: e.requests,
		RawFrames: cmp.Or(e.frames, rawframes.Policy{MaxAge: -1}), StoreFS: e.storeFS, Notify: e.notify,
		OpenLog: e.openLog, Host: e.hostName})
	if err != nil {
		e.t.Fatalf("open host: %v", err)
	}
	e.seed++
	e.host = h
}

// restart closes the host and opens a new one on the same data dir.
func (e *env) restart() {
	e.t.Helper()
	if err := e.host.Close(); err != nil {
		e.t.Fatalf("close host: %v", err)
	}
	e.host = nil
	e.open()
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(b), "\n"))
	return len(b), nil
}

// peer is the provider command that plays a transcript in the workspace,
// refused unless the transcript was made for the provider's plugin.
func (e *env) peer(provider, name string) domain.ProviderCommand {
	abs, err := filepath.Abs(filepath.Join(root, "testdata", name))
	if err != nil {
		e.t.Fatal(err)
	}
	// The cursor file lets a provider started again (a resumed session)
	// continue the transcript.
	state := filepath.Join(e.t.TempDir(), "cursor")
	argv := []string{peerBin, "--transcript", abs, "--speed", "0", "--state", state}
	t, err := transcript.ReadFile(abs)
	if err != nil {
		e.t.Fatal(err)
	}
	if err := checkHeader(e.t.Context(), provider, t.Header); err != nil {
		e.t.Fatalf("%s: %v", name, err)
	}
	argv = append(argv, replay.PeerArgs(t)...)
	return domain.ProviderCommand{Argv: argv}
}

// described holds each plugin's Describe answer, asked once per package.
var described sync.Map // provider name -> sdk.Description

// checkHeader says whether a transcript's header names the provider and
// wire protocol of the plugin that will play it.
func checkHeader(ctx context.Context, provider string, h transcript.Header) error {
	d, ok := described.Load(provider)
	if !ok {
		m := pluginhost.New(pluginhost.Config{Dirs: []string{pluginDir}})
		defer m.Close()
		p, err := m.Get(ctx, provider)
		if err != nil {
			return err
		}
		d, _ = described.LoadOrStore(provider, p.Description)
	}
	desc := d.(sdk.Description)
	return h.CheckDescription(desc.Name, desc.WireProtocol)
}

func (e *env) dispatch(cmd domain.Command) domain.Receipt {
	e.t.Helper()
	rc, err := e.host.Dispatch(context.Background(), cmd)
	if err != nil {
		e.t.Fatalf("dispatch %s: %v", cmd.Payload.CommandType(), err)
	}
	return rc
}

func (e *env) createThread(provider, transcript string) string {
	e.t.Helper()
	return e.createThreadWith(provider, transcript, "")
}

// createThreadWith creates a thread with an approval policy.
func (e *env) createThreadWith(provider, transcript string, policy domain.ApprovalPolicy) string {
	e.t.Helper()
	id, _, _ := e.newThread(provider, transcript, policy)
	return id
}

// newThread creates a thread and also returns the command and its
// receipt, so that a test can send the same command again.
func (e *env) newThread(provider, transcript string, policy domain.ApprovalPolicy) (string, domain.Command, domain.Receipt) {
	e.t.Helper()
	id := "create-" + e.t.Name()
	if e.hostName != "" { // several hosts make threads on one log
		id += "-on-" + e.hostName
	}
	cmd := domain.Command{ID: id, Payload: domain.CreateThread{
		Provider: provider, Cwd: e.ws, ProviderCommand: e.peer(provider, transcript), ApprovalPolicy: policy}}
	rc := e.dispatch(cmd)
	return rc.ThreadID, cmd, rc
}

// rawFrames is a session's raw-frame log (read after the host closed it).
func (e *env) rawFrames(sessionID string) string {
	e.t.Helper()
	b, err := os.ReadFile(filepath.Join(e.data, "rawframes", sessionID+".ndjson"))
	if err != nil {
		e.t.Fatalf("raw-frame log: %v", err)
	}
	return string(b)
}

// waitFrame waits until a session's raw-frame log holds text. The plugin
// writes the log as frames go out and tells nobody: it is read again
// each few milliseconds, for at most a minute.
func (e *env) waitFrame(sessionID, text string) {
	e.t.Helper()
	path := filepath.Join(e.data, "rawframes", sessionID+".ndjson")
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(time.Minute)
	for {
		if b, err := os.ReadFile(path); err == nil && strings.Contains(string(b), text) {
			return
		}
		select {
		case <-tick.C:
		case <-deadline:
			e.t.Fatalf("session %s's raw frames never held %s", sessionID, text)
		}
	}
}

// countFrames counts a text in the raw frames of every session of the
// thread (read once the host has closed them).
func (e *env) countFrames(th domain.Thread, text string) int {
	e.t.Helper()
	n := 0
	for _, s := range th.ProviderSessions {
		n += strings.Count(e.rawFrames(s.ID), text)
	}
	return n
}

// waitFor waits until the thread's projection satisfies ok.
func (e *env) waitFor(threadID, what string, ok func(domain.Thread) bool) domain.Thread {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	t, seq, err := e.host.Snapshot(threadID)
	if err != nil {
		e.t.Fatal(err)
	}
	if ok(t) {
		return t
	}
	for _, err := range e.host.Events(ctx, seq) {
		if err != nil {
			e.t.Fatal(err)
		}
		if t, _ = e.host.Thread(threadID); ok(t) {
			return t
		}
	}
	t, _ = e.host.Thread(threadID)
	b, _ := json.MarshalIndent(t, "", "  ")
	e.t.Fatalf("timed out waiting for %s; the thread is:\n%s", what, b)
	return t
}

// allRunsEnded: at least n runs, all ended.
var allRunsEnded = scenario.RunsEnded

// messages reads a scenario's user messages (all groups, in order).
func messages(t *testing.T, name string) []string {
	t.Helper()
	return plugintest.ReadMessages(t, filepath.Join(root, "testdata", name))
}

// assistantTexts is the assistant text of each turn in a transcript.
func assistantTexts(t *testing.T, name string) []string {
	t.Helper()
	return plugintest.ACPReplies(t, filepath.Join(root, "testdata", name))
}

// assistantText joins a run's assistant messages.
func assistantText(t domain.Thread, runID string) string {
	var s string
	for _, m := range t.Messages {
		if m.RunID == runID && m.Role == domain.RoleAssistant {
			s += m.Text.String()
		}
	}
	return s
}
