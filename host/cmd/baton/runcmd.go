package main

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
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
	"golang.org/x/term"

	"github.com/baton-run/baton/host/internal/domain"
	"github.com/baton-run/baton/host/internal/eventlog"
	"github.com/baton-run/baton/host/internal/ids"
	"github.com/baton-run/baton/host/internal/orchestrator"
	"github.com/baton-run/baton/host/internal/scenario"
)

// defaultCommands are the provider commands used when --provider-command is
// not given: each provider's real binary, as its users install it.
var defaultCommands = map[string][]string{
	"acp":      {"claude-code-acp"},
	"claude":   {"claude"},
	"codex":    {"codex", "app-server"},
	"cursor":   {"cursor-agent"},
	"opencode": {"opencode"},
}

type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

func runCmd(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
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
	approve := fs.String("approve", "", "how to answer the agent's requests for a new thread: ask (at the terminal), accept or decline (default: ask on a terminal, else decline)")
	script := fs.String("script", "", "run a scenario `file` of steps (send, waitFor, interrupt, respond) instead of MESSAGE arguments")
	var pluginDirs stringList
	fs.Var(&pluginDirs, "plugin-dir", "extra plugin `directory` (repeatable)")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	messages := fs.Args()
	var sc *scenario.Script
	if *script != "" {
		if len(messages) > 0 {
			fmt.Fprintln(stderr, "baton run: give MESSAGE arguments or --script, not both")
			return exitUsage
		}
		s, err := scenario.Load(*script)
		if err != nil {
			fmt.Fprintf(stderr, "baton run: --script: %v\n", err)
			return exitUsage
		}
		sc = &s
		if *approve == "" {
			*approve = s.Approve
		}
	} else if len(messages) == 0 {
		fmt.Fprintln(stderr, "baton run: give at least one MESSAGE (or --script FILE)")
		return exitUsage
	}
	if *thread == "" && *provider == "" {
		fmt.Fprintln(stderr, "baton run: --provider is required for a new thread (or continue one with --thread)")
		return exitUsage
	}
	policy := domain.ApprovalPolicy(*approve)
	switch policy {
	case "":
		policy = domain.ApproveDecline
		if isTerminal(stdin) {
			policy = domain.ApproveAsk
		}
	case domain.ApproveAsk, domain.ApproveAccept, domain.ApproveDecline:
	default:
		fmt.Fprintf(stderr, "baton run: --approve must be ask, accept or decline, got %q\n", *approve)
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
		// A relative path to the program means here, not the thread's cwd
		// (where the plugin starts it).
		if strings.ContainsRune(argv[0], '/') && !filepath.IsAbs(argv[0]) {
			if abs, err := filepath.Abs(argv[0]); err == nil {
				argv[0] = abs
			}
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

	// The first Ctrl-C interrupts this invocation's runs, which end when
	// the provider confirms; a second one, or SIGTERM, stops at once (the
	// log is consistent either way: the next host reconciles).
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	interruptReq := make(chan struct{}, 1)
	go func() {
		for n := 0; ; n++ {
			select {
			case sig := <-sigs:
				if n == 0 && sig == os.Interrupt {
					fmt.Fprintln(stderr, "baton run: interrupting; press Ctrl-C again to stop at once")
					interruptReq <- struct{}{}
					continue
				}
				cancel()
				return
			case <-ctx.Done():
				return
			}
		}
	}()

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
			ApprovalPolicy: policy}})
		if err != nil {
			fmt.Fprintf(stderr, "baton run: create thread: %v\n", err)
			return exitFailed
		}
		threadID = rc.ThreadID
	} else if _, err := host.Thread(threadID); err != nil {
		fmt.Fprintf(stderr, "baton run: %v\n", err)
		return exitUsage
	}

	th, start, _ := host.Snapshot(threadID)
	out := newPrinter(stdout, *jsonOut, th)
	if *thread == "" {
		start = 0 // a new thread: show it from its creation (a continued one: what this run adds)
	}
	wanted := map[string]bool{} // message ids this invocation sent
	for _, m := range messages {
		msgID := idgen.NewID("msg")
		if _, err := host.Dispatch(ctx, domain.Command{ID: idgen.NewID("cmd"), ThreadID: threadID,
			Payload: domain.DispatchMessage{MessageID: msgID, Text: m, Mode: domain.ModeQueueAfterActive}}); err != nil {
			fmt.Fprintf(stderr, "baton run: send message: %v\n", err)
			return exitFailed
		}
		wanted[msgID] = true
	}
	scriptDone := make(chan error, 1)
	scriptCtx, stopScript := context.WithCancel(ctx)
	defer stopScript()
	if sc != nil {
		go func() {
			scriptDone <- scenario.Run(scriptCtx, host, threadID, *sc, scenario.Options{Sleep: true, CommandPrefix: idgen.NewID("script") + ":"})
		}()
	} else {
		scriptDone <- nil
	}

	s := &session{host: host, idgen: idgen, threadID: threadID, out: out, stdout: stdout, stderr: stderr,
		wanted: wanted, scripted: sc != nil, ended: map[string]bool{}, policy: th.ApprovalPolicy,
		opened: map[string]domain.RequestOpened{}}
	if *jsonOut {
		s.stdout = stderr // prompts must not break the JSON lines
	}
	if th.ApprovalPolicy == domain.ApproveAsk && sc == nil { // a script answers by its steps
		s.answers = readLines(ctx, stdin)
	}
	// The thread's stream is read by a goroutine so that the loop below
	// also hears Ctrl-C and the user's answers; it ends with ctx, or when
	// the host closes.
	recs := make(chan eventlog.Record)
	errs := make(chan error, 1)
	go func() {
		defer close(recs)
		for rec, err := range host.ThreadStream(ctx, threadID, start) {
			if err != nil {
				errs <- err
				return
			}
			select {
			case recs <- rec:
			case <-ctx.Done():
				return
			}
		}
	}()
	interrupted := false
loop:
	for !s.done() {
		var answers <-chan string
		if len(s.asking) > 0 {
			answers = s.answers
		}
		select {
		case <-interruptReq:
			interrupted = true
			stopScript()
			s.interruptAll(ctx)
		case err := <-errs:
			fmt.Fprintf(stderr, "baton run: read events: %v\n", err)
			return exitFailed
		case err := <-scriptDone:
			scriptDone = nil
			if err != nil && !interrupted && ctx.Err() == nil {
				fmt.Fprintf(stderr, "baton run: --script: %v\n", err)
				final, _ := host.Thread(threadID)
				out.final(final, s.mine)
				return exitFailed
			}
			// Done once the stream has shown everything the script caused.
			_, seq, _ := host.Snapshot(threadID)
			s.scripted, s.needSeq = false, seq
		case line, ok := <-answers:
			s.answer(ctx, line, ok)
		case rec, ok := <-recs:
			if !ok {
				break loop
			}
			if err := s.event(ctx, rec); err != nil {
				fmt.Fprintf(stderr, "baton run: %v\n", err)
				return exitFailed
			}
		}
	}
	if ctx.Err() != nil {
		interrupted = true
	}
	final, _ := host.Thread(threadID)
	out.final(final, s.mine)
	switch {
	case interrupted:
		return exitInterrupted
	case anyFailed(final, s.mine, sc != nil):
		return exitFailed
	}
	return exitOK
}

// session is what baton run follows of its thread: the runs it queued,
// which have ended, and the requests waiting for the user's answer.
type session struct {
	host     *orchestrator.Host
	idgen    *ids.Allocator
	threadID string
	out      *printer
	stdout   io.Writer // where prompts go
	stderr   io.Writer
	policy   domain.ApprovalPolicy

	wanted   map[string]bool // messages sent whose runs have not shown up yet
	scripted bool            // a script is still running
	needSeq  uint64          // the stream must reach this sequence first
	lastSeq  uint64
	mine     []string // run ids, in order
	ended    map[string]bool

	answers     <-chan string          // the user's lines (ask policy)
	asking      []domain.RequestOpened // requests waiting for the user, the first one asked
	stdinClosed bool
	opened      map[string]domain.RequestOpened

	interrupted bool // Ctrl-C: every run of this invocation is to stop
}

// done: the script (if any) is over, the stream has caught up with it,
// and the runs of this invocation have all ended.
func (s *session) done() bool {
	if s.scripted || len(s.wanted) > 0 || s.lastSeq < s.needSeq {
		return false
	}
	for _, id := range s.mine {
		if !s.ended[id] {
			return false
		}
	}
	return true
}

func (s *session) event(ctx context.Context, rec eventlog.Record) error {
	s.lastSeq = rec.Sequence
	if rec.ThreadID != s.threadID {
		return nil
	}
	pl, err := domain.DecodePayload(rec.Type, rec.Data)
	if err != nil {
		return err
	}
	s.out.event(rec, pl)
	switch e := pl.(type) {
	case domain.RunQueued:
		s.mine = append(s.mine, e.RunID)
		delete(s.wanted, e.MessageID)
		if s.interrupted { // queued after Ctrl-C (a script's send, a requeued message): cancel it
			s.interrupt(ctx, e.RunID)
		}
	case domain.RunEnded:
		s.ended[e.RunID] = true
	case domain.RequestAnswerFailed:
		// The answer did not get through. The policy may answer again; the
		// user is asked again.
		if q, ok := s.opened[e.RequestID]; ok && (s.answers != nil || s.stdinClosed) {
			s.asking = append(s.asking, q)
			if len(s.asking) == 1 {
				s.prompt()
			}
		}
	case domain.RequestOpened:
		s.opened[e.RequestID] = e
		switch {
		case s.answers != nil || s.stdinClosed:
			s.asking = append(s.asking, e)
			if len(s.asking) == 1 {
				s.prompt()
			}
		case s.policy != domain.ApproveAsk && e.Kind == domain.RequestGeneric:
			// No policy answers a request of a kind Baton does not know, and
			// there is no one to ask: this client declines it, and says so.
			fmt.Fprintf(s.stderr, "baton run: declining %s request %s: no one to ask (answer such requests with --approve ask on a terminal)\n",
				e.Title, e.RequestID)
			s.respond(ctx, domain.RespondToRequest{RequestID: e.RequestID, Decision: domain.VerdictDecline})
		}
	case domain.RequestAnswered:
		s.forget(e.RequestID)
	case domain.RequestResolved:
		s.forget(e.RequestID)
	}
	return nil
}

// forget drops a request that no longer waits for the user (answered by
// someone, or expired); the next one is asked.
func (s *session) forget(requestID string) {
	for i, q := range s.asking {
		if q.RequestID != requestID {
			continue
		}
		s.asking = append(s.asking[:i], s.asking[i+1:]...)
		if i == 0 {
			fmt.Fprintln(s.stdout)
			if len(s.asking) > 0 {
				s.prompt()
			}
		}
		return
	}
}

// prompt asks about the first waiting request; with stdin at its end, it
// declines it at once.
func (s *session) prompt() {
	q := s.asking[0]
	if s.stdinClosed {
		fmt.Fprintf(s.stdout, "  ? request %s: no more input: declined\n", q.RequestID)
		s.respond(context.Background(), domain.RespondToRequest{RequestID: q.RequestID, Decision: domain.VerdictDecline})
		return
	}
	if q.Kind == domain.RequestUserInput {
		fmt.Fprintf(s.stdout, "  ? answer (empty line declines): ")
	} else {
		fmt.Fprintf(s.stdout, "  ? [a]ccept, accept for [s]ession, [d]ecline, [c]ancel the turn: ")
	}
}

// answer takes the user's line for the first waiting request.
func (s *session) answer(ctx context.Context, line string, ok bool) {
	q := s.asking[0]
	p := domain.RespondToRequest{RequestID: q.RequestID}
	line = strings.TrimSpace(line)
	question := q.Kind == domain.RequestUserInput
	switch {
	case !ok:
		s.answers, s.stdinClosed = nil, true
		fmt.Fprintln(s.stdout, "(no more input: declined)")
		p.Decision = domain.VerdictDecline
	case question && line != "":
		p.Decision, p.Answers = domain.VerdictAnswer, map[string]string{"answer": line}
	case question:
		p.Decision = domain.VerdictDecline
	default:
		p.Decision = map[string]domain.Verdict{"a": domain.VerdictAccept, "s": domain.VerdictAcceptForSession,
			"d": domain.VerdictDecline, "c": domain.VerdictCancel}[strings.ToLower(line)]
	}
	if p.Decision == "" {
		fmt.Fprintf(s.stdout, "  ? please type a, s, d or c: ")
		return
	}
	s.respond(ctx, p)
	s.asking = s.asking[1:]
	if len(s.asking) > 0 {
		s.prompt()
	}
}

func (s *session) respond(ctx context.Context, p domain.RespondToRequest) {
	if _, err := s.host.Dispatch(ctx, domain.Command{ID: s.idgen.NewID("cmd"), ThreadID: s.threadID, Payload: p}); err != nil {
		fmt.Fprintf(s.stderr, "baton run: answer request %s: %v\n", p.RequestID, err)
	}
}

// interruptAll asks the host to stop every run of this invocation that has
// not ended (the active one is interrupted, queued ones cancelled), and
// every run that shows up later.
func (s *session) interruptAll(ctx context.Context) {
	s.interrupted = true
	for _, id := range s.mine {
		if !s.ended[id] {
			s.interrupt(ctx, id)
		}
	}
}

func (s *session) interrupt(ctx context.Context, runID string) {
	_, err := s.host.Dispatch(ctx, domain.Command{ID: s.idgen.NewID("cmd"), ThreadID: s.threadID, Payload: domain.InterruptRun{RunID: runID}})
	if err != nil && !errors.Is(err, domain.ErrConflict) { // ended meanwhile
		fmt.Fprintf(s.stderr, "baton run: interrupt run %s: %v\n", runID, err)
	}
}

// readLines reads lines from r until ctx ends; the channel closes at end
// of input.
func readLines(ctx context.Context, r io.Reader) <-chan string {
	ch := make(chan string)
	go func() {
		defer close(ch)
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			select {
			case ch <- sc.Text():
			case <-ctx.Done():
				return
			}
		}
	}()
	return ch
}

// isTerminal says whether r is a terminal (not merely a character device:
// /dev/null is one too).
func isTerminal(r io.Reader) bool {
	f, ok := r.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

func runOf(t domain.Thread, runID string) *domain.Run {
	for i := range t.Runs {
		if t.Runs[i].ID == runID {
			return &t.Runs[i]
		}
	}
	return nil
}

// anyFailed says whether a run did not complete. A script interrupts and
// restarts runs on purpose, so for a script only a failed run counts.
func anyFailed(t domain.Thread, mine []string, scripted bool) bool {
	for _, id := range mine {
		r := runOf(t, id)
		if r == nil {
			continue
		}
		if r.Status == domain.RunStatusFailed || (!scripted && r.Status != domain.RunStatusCompleted) {
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
	policy   domain.ApprovalPolicy
	inText   bool
	ordinals map[string]int              // run id -> ordinal
	items    map[string]*item            // node id -> what to say about it
	scopes   map[string]domain.ScopeKind // checkpoint scope id -> kind
	cps      map[string]string           // checkpoint id -> what it is ("run 2", "a subagent of run 2")
}

type item struct {
	kind        domain.NodeKind
	title, text string
}

func newPrinter(w io.Writer, jsonOut bool, t domain.Thread) *printer {
	p := &printer{w: w, json: jsonOut, threadID: t.ID, policy: t.ApprovalPolicy,
		ordinals: map[string]int{}, items: map[string]*item{}, scopes: map[string]domain.ScopeKind{}, cps: map[string]string{}}
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
	case domain.CheckpointScopeOpened:
		p.scopes[e.ScopeID] = e.Kind
	case domain.CheckpointRequested:
		switch {
		case p.scopes[e.ScopeID] == domain.ScopeSubagent:
			p.cps[e.CheckpointID] = fmt.Sprintf("a subagent of run %d", e.RunOrdinal)
		case e.RunOrdinal == 0:
			p.cps[e.CheckpointID] = "the baseline"
		default:
			p.cps[e.CheckpointID] = fmt.Sprintf("run %d", e.RunOrdinal)
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
			p.line("  · %s %s", words(string(e.Kind)), e.Title)
		}
	case domain.NodeCompleted:
		if it := p.items[e.NodeID]; it != nil && it.kind != domain.NodeRootTurn && it.kind != domain.ItemAssistantMessage {
			text := ""
			if it.kind == domain.ItemReasoning && it.text != "" {
				text = ": " + oneLine(it.text, 100)
			}
			p.line("  · %s %s %s%s", words(string(it.kind)), it.title, e.Status, text)
		}
	case domain.RequestOpened:
		p.line("  ? %s request %s: %s", words(string(e.Kind)), e.RequestID, oneLine(e.Title, 100))
	case domain.RequestAnswered:
		p.line("  ? request %s: %s (by %s)", e.RequestID, e.Decision, e.By)
	case domain.RunSteered:
		p.line("  » message added to run %d's turn", p.ordinals[e.RunID])
	case domain.RestartRequested:
		p.line("  » run %d is stopping its turn to restart with: %s", p.ordinals[e.RunID], oneLine(e.Text, 80))
	case domain.InterruptRequested:
		p.line("  ⏸ run %d: interrupt sent; waiting for the provider", p.ordinals[e.RunID])
	case domain.AttemptEnded:
		p.line("  ↻ run %d: attempt ended (%s)", p.ordinals[e.RunID], e.Status)
	case domain.AttemptStarted:
		if e.Reason != domain.AttemptInitial {
			p.line("  ↻ run %d: new attempt (%s)", p.ordinals[e.RunID], words(string(e.Reason)))
		}
	case domain.RequestAnswerFailed:
		p.line("  ! the answer to request %s did not reach the provider: %s", e.RequestID, oneLine(e.Reason, 100))
	case domain.RateLimitReported:
		resets := ""
		if !e.ResetsAt.IsZero() {
			resets = ", resets " + e.ResetsAt.Local().Format("Jan 2 15:04")
		}
		p.line("  ⓘ %s limit: %.0f%% used%s", e.Scope, e.UsedPercent, resets)
	case domain.EffectCancelled:
		p.line("  ! a %s action was not performed: %s", e.Type, e.Reason)
	case domain.RequestResolved:
		switch {
		case e.Delivery == domain.DeliveryNotResumable:
			p.line("  ? request %s: %s (the provider is gone)", e.RequestID, e.Status)
		case e.Decision != "":
			p.line("  ? request %s resolved: %s", e.RequestID, e.Decision)
		default:
			p.line("  ? request %s", e.Status)
		}
	case domain.SessionOpened:
		p.line("  (provider session %s opened)", e.SessionID)
	case domain.SessionEnded:
		p.line("  (provider session %s ended: %s)", e.SessionID, e.Reason)
	case domain.RunEnded:
		n := p.ordinals[e.RunID]
		mark := "✔"
		switch e.Status {
		case domain.RunStatusFailed:
			mark = "✖"
		case domain.RunStatusInterrupted, domain.RunStatusCancelled:
			mark = "⏹"
		}
		switch {
		case e.Failure != nil:
			p.line("%s run %d %s: %s", mark, n, e.Status, e.Failure.Message)
		case e.StopReason != "":
			p.line("%s run %d %s (%s)", mark, n, e.Status, e.StopReason)
		default:
			p.line("%s run %d %s", mark, n, e.Status)
		}
	case domain.DiagnosticRecorded:
		p.line("  ! %s %s", e.Title, oneLine(e.Text, 100))
	case domain.CheckpointRecorded:
		p.checkpoint(e)
	case domain.RollbackStarted:
		p.line("↺ rolling back to the checkpoint of run %d: restoring files", e.TargetRunOrdinal)
	case domain.RollbackFilesRestored:
		p.line("  ↺ files restored: %d written, %d removed (as they were before: git checkout %s -- .)", e.Written, e.Removed, e.SavedRef)
	case domain.RollbackFailed:
		p.line("✖ rollback failed while restoring %s: %s", e.Stage, e.Failure.Message)
	case domain.RollbackCompleted:
		how := map[domain.Reconciliation]string{domain.ReconcileNone: "the provider had no turns to drop",
			domain.ReconcileNative:      fmt.Sprintf("the provider dropped %d turns", e.TurnsDropped),
			domain.ReconcileFreshThread: "the next run starts a fresh provider conversation"}[e.Reconciliation]
		p.line("↺ rolled back; %s", how)
		if e.Note != "" {
			p.line("  ! %s", e.Note)
		}
	case domain.HandoffCreated:
		runs := fmt.Sprintf("runs %d-%d", e.FromRun, e.ToRun)
		if e.FromRun == e.ToRun {
			runs = fmt.Sprintf("run %d", e.ToRun)
		}
		p.line("  ⓘ the next run carries a summary of %s", runs)
	}
}

// checkpoint shows what a checkpoint kept: its status, and the files it
// changed.
func (p *printer) checkpoint(e domain.CheckpointRecorded) {
	what := cmp.Or(p.cps[e.CheckpointID], "checkpoint")
	switch {
	case e.Status != domain.CheckpointReady:
		p.line("  ⛁ checkpoint of %s: %s (%s)", what, e.Status, oneLine(e.Reason, 100))
	case len(e.Files) == 0:
		p.line("  ⛁ checkpoint of %s: no files changed", what)
	default:
		p.line("  ⛁ checkpoint of %s: %s changed", what, plural(len(e.Files), "file"))
		for i, f := range e.Files {
			if i == 20 {
				p.line("      … and %d more (baton diff %s)", len(e.Files)-i, p.threadID)
				break
			}
			stat := fmt.Sprintf("+%d -%d", f.Additions, f.Deletions)
			if f.Binary {
				stat = "binary"
			}
			p.line("      %s %s (%s)", f.Kind, f.Path, stat)
		}
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

// words is a vocabulary word as words: command_execution -> command execution.
func words(s string) string { return strings.ReplaceAll(s, "_", " ") }

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

func oneLine(s string, max int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > max {
		return s[:max] + "…"
	}
	return s
}
