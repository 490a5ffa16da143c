package main

import (
	"cmp"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"

	"github.com/google/shlex"
	"github.com/hashicorp/go-hclog"

	"github.com/baton-run/baton/host/internal/domain"
	"github.com/baton-run/baton/host/internal/eventlog"
	"github.com/baton-run/baton/host/internal/ids"
	"github.com/baton-run/baton/host/internal/orchestrator"
)

// defaultCommands are the provider commands used when --provider-command is
// not given: each provider's real binary, as its users install it.
var defaultCommands = map[string][]string{
	"acp": {"claude-code-acp"},
}

type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

func runCmd(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("baton run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	provider := fs.String("provider", "", "provider `name` (a plugin baton-plugin-NAME)")
	command := fs.String("provider-command", "", "the provider process to run, split into words like a shell would (no shell runs)")
	cwd := fs.String("cwd", "", "the thread's working `directory` (default: the current directory)")
	data := fs.String("data", "", "data `directory` (default: "+defaultDataDir()+")")
	thread := fs.String("thread", "", "continue this thread `id` instead of creating one")
	model := fs.String("model", "", "provider `model`")
	jsonOut := fs.Bool("json", false, "print one JSON object per line; the last is the final thread projection")
	logLevel := fs.String("log-level", "warn", "host log `level` on stderr (trace, debug, info, warn, error)")
	approve := fs.String("approve", domain.ApproveDecline, "how to answer the agent's approval requests for a new thread: `decline` or accept")
	var pluginDirs stringList
	fs.Var(&pluginDirs, "plugin-dir", "extra plugin `directory` (repeatable)")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	messages := fs.Args()
	if len(messages) == 0 {
		fmt.Fprintln(stderr, "baton run: give at least one MESSAGE")
		return exitUsage
	}
	if *thread == "" && *provider == "" {
		fmt.Fprintln(stderr, "baton run: --provider is required for a new thread (or continue one with --thread)")
		return exitUsage
	}
	if *approve != domain.ApproveDecline && *approve != domain.ApproveAccept {
		fmt.Fprintf(stderr, "baton run: --approve must be decline or accept, got %q (answering each request at the terminal is not there yet)\n", *approve)
		return exitUsage
	}
	if *data == "" {
		*data = defaultDataDir()
	}
	if *cwd == "" {
		*cwd, _ = os.Getwd()
	}
	absCwd, err := filepath.Abs(*cwd)
	if err != nil {
		fmt.Fprintf(stderr, "baton run: --cwd: %v\n", err)
		return exitUsage
	}
	var argv []string
	if *command != "" {
		if argv, err = shlex.Split(*command); err != nil || len(argv) == 0 {
			fmt.Fprintf(stderr, "baton run: --provider-command %q: cannot split it into words: %v\n", *command, err)
			return exitUsage
		}
	}

	log := hclog.New(&hclog.LoggerOptions{Name: "baton", Output: stderr, Level: hclog.LevelFromString(*logLevel)})
	host, err := orchestrator.Open(orchestrator.Config{DataDir: *data, PluginDirs: append(pluginDirs, pluginSearchPath(*data)...), Logger: log})
	if err != nil {
		fmt.Fprintf(stderr, "baton run: %v\n", err)
		if strings.Contains(err.Error(), "lock") {
			fmt.Fprintln(stderr, "another baton may be using this data directory; pass --data to use another")
		}
		return exitFailed
	}
	defer host.Close()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	idgen := ids.New()
	threadID := *thread
	if threadID == "" {
		if argv == nil {
			argv = defaultCommands[*provider]
		}
		if len(argv) == 0 {
			fmt.Fprintf(stderr, "baton run: no default command for provider %q; pass --provider-command\n", *provider)
			return exitUsage
		}
		rc, err := host.Dispatch(ctx, domain.Command{ID: idgen.NewID("cmd"), Payload: domain.CreateThread{
			Provider: *provider, Cwd: absCwd, Model: *model, ProviderCommand: domain.ProviderCommand{Argv: argv},
			ApprovalPolicy: *approve}})
		if err != nil {
			fmt.Fprintf(stderr, "baton run: create thread: %v\n", err)
			return exitFailed
		}
		threadID = rc.ThreadID
	} else if _, err := host.Thread(threadID); err != nil {
		fmt.Fprintf(stderr, "baton run: %v\n", err)
		return exitUsage
	}

	th, _ := host.Thread(threadID)
	out := newPrinter(stdout, *jsonOut, th)
	start := uint64(0)
	if *thread != "" {
		start = host.LastSequence() // a continued thread: show only what this run adds
	}
	var mine []string
	for _, m := range messages {
		msgID := idgen.NewID("msg")
		if _, err := host.Dispatch(ctx, domain.Command{ID: idgen.NewID("cmd"), ThreadID: threadID,
			Payload: domain.DispatchMessage{MessageID: msgID, Text: m, Mode: domain.ModeQueueAfterActive}}); err != nil {
			fmt.Fprintf(stderr, "baton run: send message: %v\n", err)
			return exitFailed
		}
		mine = append(mine, msgID)
	}

	// The stream says when to stop: the runs of this invocation's messages
	// have all ended. The printer follows the stream incrementally; the
	// projection is read once at the end.
	ended := map[string]bool{}
	runOfMsg := map[string]string{}
	done := func() bool {
		for _, id := range mine {
			if r, ok := runOfMsg[id]; !ok || !ended[r] {
				return false
			}
		}
		return true
	}
	var final domain.Thread
	interrupted := false
	for rec, err := range host.Events(ctx, start) {
		if err != nil {
			fmt.Fprintf(stderr, "baton run: read events: %v\n", err)
			return exitFailed
		}
		if rec.ThreadID != threadID {
			continue
		}
		pl, err := domain.DecodePayload(rec.Type, rec.Data)
		if err != nil {
			fmt.Fprintf(stderr, "baton run: %v\n", err)
			return exitFailed
		}
		out.event(rec, pl)
		switch e := pl.(type) {
		case domain.RunQueued:
			runOfMsg[e.MessageID] = e.RunID
		case domain.RunEnded:
			ended[e.RunID] = true
		}
		if done() {
			final, _ = host.Thread(threadID)
			break
		}
	}
	if ctx.Err() != nil {
		interrupted = true
		final, _ = host.Thread(threadID)
	}
	out.final(final, mine)
	switch {
	case interrupted:
		return exitInterrupted
	case anyFailed(final, mine):
		return exitFailed
	}
	return exitOK
}

func runOf(t domain.Thread, messageID string) *domain.Run {
	for i := range t.Runs {
		if t.Runs[i].MessageID == messageID {
			return &t.Runs[i]
		}
	}
	return nil
}

func anyFailed(t domain.Thread, mine []string) bool {
	for _, id := range mine {
		if r := runOf(t, id); r != nil && r.Status != domain.RunStatusCompleted {
			return true
		}
	}
	return false
}

// pluginSearchPath is where first-party and installed plugins are: beside
// the baton executable, then the data dir's plugins directory.
func pluginSearchPath(data string) []string {
	var dirs []string
	if exe, err := os.Executable(); err == nil {
		if real, err := filepath.EvalSymlinks(exe); err == nil {
			exe = real
		}
		dirs = append(dirs, filepath.Dir(exe))
	}
	return append(dirs, filepath.Join(data, "plugins"))
}

// defaultDataDir is the user's data directory for baton.
func defaultDataDir() string {
	if d := os.Getenv("BATON_DATA"); d != "" {
		return d
	}
	home, _ := os.UserHomeDir()
	switch runtime.GOOS {
	case "darwin":
		return filepath.Join(home, "Library", "Application Support", "baton")
	case "windows":
		return filepath.Join(os.Getenv("LocalAppData"), "baton")
	}
	if x := os.Getenv("XDG_DATA_HOME"); x != "" {
		return filepath.Join(x, "baton")
	}
	return filepath.Join(home, ".local", "share", "baton")
}

// printer shows a thread's events, readably or as JSON lines. It keeps the
// little state it needs from the events themselves.
type printer struct {
	w        io.Writer
	json     bool
	threadID string
	policy   string
	inText   bool
	ordinals map[string]int   // run id -> ordinal
	items    map[string]*item // node id -> what to say about it
}

type item struct {
	kind, title, text string
}

func newPrinter(w io.Writer, jsonOut bool, t domain.Thread) *printer {
	p := &printer{w: w, json: jsonOut, threadID: t.ID, policy: t.ApprovalPolicy,
		ordinals: map[string]int{}, items: map[string]*item{}}
	for _, r := range t.Runs {
		p.ordinals[r.ID] = r.Ordinal
	}
	return p
}

func (p *printer) line(format string, args ...any) {
	if p.inText {
		fmt.Fprintln(p.w)
		p.inText = false
	}
	fmt.Fprintf(p.w, format+"\n", args...)
}

func (p *printer) event(rec eventlog.Record, pl domain.Payload) {
	if p.json {
		b, _ := json.Marshal(struct {
			Kind string `json:"kind"`
			eventlog.Record
		}{"event", rec})
		fmt.Fprintln(p.w, string(b))
	}
	switch e := pl.(type) {
	case domain.RunQueued:
		p.ordinals[e.RunID] = e.Ordinal
	case domain.NodeStarted:
		p.items[e.NodeID] = &item{kind: e.Kind, title: e.Title}
	case domain.NodeUpdated:
		if it := p.items[e.NodeID]; it != nil && e.Title != "" {
			it.title = e.Title
		}
	case domain.NodeDelta:
		if it := p.items[e.NodeID]; it != nil {
			it.text += e.Text
		}
	}
	if p.json {
		return
	}
	switch e := pl.(type) {
	case domain.ThreadCreated:
		p.policy = cmp.Or(e.ApprovalPolicy, domain.ApproveDecline)
		p.line("● thread %s · %s · %s", p.threadID, e.Provider, e.Cwd)
	case domain.RunQueued:
		p.line("▶ run %d queued: %s", e.Ordinal, oneLine(e.Input, 100))
	case domain.RunStarted:
		p.line("▶ run %d started", p.ordinals[e.RunID])
	case domain.MessageDelta:
		if !p.inText {
			fmt.Fprint(p.w, "  ")
		}
		fmt.Fprint(p.w, strings.ReplaceAll(e.Text, "\n", "\n  "))
		p.inText = true
	case domain.NodeStarted:
		if e.Kind != domain.NodeRootTurn && e.Kind != domain.ItemAssistantMessage && e.Kind != domain.ItemReasoning {
			p.line("  · %s %s", strings.ReplaceAll(e.Kind, "_", " "), e.Title)
		}
	case domain.NodeCompleted:
		if it := p.items[e.NodeID]; it != nil && it.kind != domain.NodeRootTurn && it.kind != domain.ItemAssistantMessage {
			text := ""
			if it.kind == domain.ItemReasoning && it.text != "" {
				text = ": " + oneLine(it.text, 100)
			}
			p.line("  · %s %s %s%s", strings.ReplaceAll(it.kind, "_", " "), it.title, e.Status, text)
		}
	case domain.RequestOpened:
		p.line("  ? %s request: %s (the thread's policy answers %s)", e.Kind, oneLine(e.Title, 100), p.policy)
	case domain.RequestResolved:
		switch {
		case e.Delivery == domain.DeliveryNotResumable:
			p.line("  ? request %s: %s (the provider is gone)", e.RequestID, e.Status)
		case e.Decision != "":
			p.line("  ? request answered: %s", e.Decision)
		default:
			p.line("  ? request %s", e.Status)
		}
	case domain.SessionOpened:
		p.line("  (provider session %s opened)", e.SessionID)
	case domain.SessionEnded:
		p.line("  (provider session %s ended: %s)", e.SessionID, e.Reason)
	case domain.RunEnded:
		n := p.ordinals[e.RunID]
		switch {
		case e.Failure != nil:
			p.line("✖ run %d %s: %s", n, e.Status, e.Failure.Message)
		case e.StopReason != "":
			p.line("✔ run %d %s (%s)", n, e.Status, e.StopReason)
		default:
			p.line("✔ run %d %s", n, e.Status)
		}
	case domain.DiagnosticRecorded:
		p.line("  ! %s %s", e.Title, oneLine(e.Text, 100))
	}
}

func (p *printer) final(t domain.Thread, mine []string) {
	if p.json {
		b, _ := json.Marshal(struct {
			Kind string `json:"kind"`
			domain.Thread
		}{"thread", t})
		fmt.Fprintln(p.w, string(b))
		return
	}
	var parts []string
	for _, id := range mine {
		if r := runOf(t, id); r != nil {
			parts = append(parts, fmt.Sprintf("run %d %s", r.Ordinal, r.Status))
		}
	}
	p.line("■ thread %s: %s (continue it with --thread %s)", t.ID, strings.Join(parts, ", "), t.ID)
}

func oneLine(s string, max int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > max {
		return s[:max] + "…"
	}
	return s
}
