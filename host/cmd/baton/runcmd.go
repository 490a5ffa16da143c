package main

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	batonv1 "github.com/baton-run/baton/host/api/baton/v1"
	"github.com/baton-run/baton/host/internal/domain"
	"github.com/baton-run/baton/host/internal/ids"
	"github.com/baton-run/baton/host/internal/scenario"
	"github.com/baton-run/baton/sdk"
)

type runFlags struct {
	switchFlags
	policyFlags
	cwd, thread, approve, script string
	files                        []string
	json, detach                 bool
}

func runCommand(g *globals) *cobra.Command {
	f := &runFlags{}
	c := &cobra.Command{
		Use:   "run [flags] MESSAGE...",
		Short: "Run messages on a thread (a new one, or --thread ID) and stream what happens",
		Long: `Run creates a thread (or continues one with --thread), sends each MESSAGE as a
run of its own, streams what happens, and exits when every run it queued has
ended: 0 when all completed, 1 when one did not, 130 when interrupted.

A MESSAGE of - is read from stdin, and --file PATH reads one from a file (as
many as given, in order, instead of MESSAGE arguments): for a message that is
long or spans lines. A message is UTF-8 text of at most ` + domain.MaxMessageSize + `; one that is
empty or only white space, not text, or longer is refused before anything is
written (exit 2).

The first Ctrl-C interrupts the runs: they end when the provider confirms, or,
if it has not within --grace (10s), when the host has ended its process. A
second Ctrl-C (or SIGTERM) exits at once: the runs still going end interrupted
(host shut down), and the summary says so. Against a service, the runs are
the service's: a second Ctrl-C leaves them to it, and --detach makes the first
leave them going (follow them with baton watch).

The agent's requests (a command to run, a file to write) are answered by
--approve: ask (at the terminal, the default on a terminal), accept, or
decline (the default otherwise).

With --thread, --provider (or --model, --provider-command) switches the thread
before its messages, as baton switch does: the runs start on that provider,
the first carrying a handoff of what it has not seen. --handoff-max-bytes
bounds the thread's handoffs (a new thread's too, for those after a rollback
or a later switch).

--on-limit, --until and the budgets (--max-runs, --max-hours, --max-tokens)
set the thread's continuation policy before its messages, and run then follows
the thread until its loop is over: every run, wait and check. A run that hits
a provider's limit waits for the reset (--on-limit wait) or goes on on another
provider (--on-limit switch:claude, and with ,return comes back after the
reset); with --until, runs go on until the check command exits 0. Exit codes:
0 when the check passed (without --until: the last run completed), 1 when the
loop ended blocked, failed or out of budget, 130 when interrupted. Ctrl-C
during a wait cancels it.`,
		Example: `  baton run --provider acp "Write hello.txt"
  baton run --provider codex --approve accept --cwd ~/src/app "Fix the failing test"
  baton run --provider codex --file task.md
  go test ./... 2>&1 | baton run --provider claude -
  baton run --thread thr_123 "Now add a README"
  baton run --thread thr_123 --provider claude "Review what codex did"
  baton run --json --provider acp "Explain main.go" | jq .
  baton run --provider codex --on-limit wait "Migrate the tests to testify"
  baton run --provider codex --on-limit switch:claude,return --until 'go test ./...' --max-runs 10 "Fix the build"`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if f.thread != "" {
				f.switchFlags.explicit(cmd.Flags())
			}
			f.policyFlags.collect(cmd.Flags(), f.thread != "")
			return runRun(cmd.Context(), g, f, args)
		},
	}
	fl := c.Flags()
	addSwitchFlags(fl, &f.switchFlags, true)
	addPolicyFlags(fl, &f.policyFlags)
	fl.StringVar(&f.cwd, "cwd", "", "the new thread's working `directory` (default: the current directory)")
	fl.StringVar(&f.thread, "thread", "", "continue this thread `id` instead of creating one")
	fl.BoolVar(&f.json, "json", false, "print one JSON object per line; the last is the final thread projection")
	fl.StringVar(&f.approve, "approve", "", "the `policy` for the agent's requests on a new thread: ask, accept or decline (default: ask on a terminal, else decline)")
	fl.StringVar(&f.script, "script", "", "run a scenario `file` of steps (send, waitFor, interrupt, respond) instead of MESSAGE arguments")
	fl.StringArrayVar(&f.files, "file", nil, "read a message from this `file` (- for stdin) instead of MESSAGE arguments (repeatable: a run each, in order)")
	fl.BoolVar(&f.detach, "detach", false, "against a service, Ctrl-C leaves the runs going instead of interrupting them")
	c.RegisterFlagCompletionFunc("approve", fixedCompletion(domain.Strings(domain.ApprovalPolicies...)...))
	return c
}

// runOptions are run's flags, checked before anything is written.
type runOptions struct {
	verb     string // the verb for errors (default: run)
	messages []string
	mode     string // of the messages (default: queue)
	script   *scenario.Script
	policy   domain.ApprovalPolicy
	cwd      string
	argv     []string
	// switchArgv is --provider-command's words for a switch of a
	// continued thread (nil: not given).
	switchArgv []string
	// noCommand: a new thread of a provider with no default command, and
	// no --provider-command (what is wrong depends on what is installed).
	noCommand bool
	// cont is the continuation policy the flags ask (nil: none given).
	cont *batonv1.ContinuationPolicy
	// target is the ordinal of the run the messages are meant for (send
	// --run; 0: none).
	target int
}

func (f *runFlags) check(g *globals, messages []string) (runOptions, error) {
	o := runOptions{}
	approve := f.approve
	if f.script != "" {
		if len(messages) > 0 || len(f.files) > 0 {
			return o, usagef("run: give MESSAGE arguments (or --file) or --script, not both")
		}
		s, err := scenario.Load(f.script)
		if err != nil {
			return o, usagef("run: --script: %v", err)
		}
		o.script = &s
		if approve == "" {
			approve = s.Approve
		}
	} else if len(messages) == 0 && len(f.files) == 0 {
		return o, usagef("run: give at least one MESSAGE (or --file PATH, or --script FILE)")
	}
	if f.thread == "" && f.provider == "" {
		return o, usagef("run: --provider is required for a new thread (or continue one with --thread)")
	}
	o.policy = domain.ApprovalPolicy(approve)
	if o.policy != "" && !slices.Contains(domain.ApprovalPolicies, o.policy) {
		return o, usagef("run: --approve must be %s, got %q", domain.OneOf(domain.ApprovalPolicies...), approve)
	}
	msgs, usedStdin, err := messageInput{args: messages, files: f.files}.read("run", g.stdin)
	if err != nil {
		return o, err
	}
	o.messages = msgs
	switch {
	case o.policy == "" && isTerminal(g.stdin):
		o.policy = domain.ApproveAsk
	case o.policy == "":
		o.policy = domain.ApproveDecline
	case o.policy == domain.ApproveAsk && usedStdin && !isTerminal(g.stdin):
		return o, usagef("run: --approve ask reads your answers from stdin, which held the message (-); give --approve accept or decline, or the message with --file")
	}
	cwd := f.cwd
	if cwd == "" {
		cwd, _ = os.Getwd()
	}
	if o.cwd, err = filepath.Abs(cwd); err != nil {
		return o, usagef("run: --cwd: %v", err)
	}
	if o.argv, err = f.switchFlags.check("run"); err != nil {
		return o, err
	}
	if o.cont, err = f.policyFlags.check("run"); err != nil {
		return o, err
	}
	if f.thread != "" {
		o.switchArgv = o.argv
	} else if o.argv == nil {
		o.argv = defaultCommand(f.provider)
		o.noCommand = len(o.argv) == 0
	}
	return o, nil
}

// noCommand is the usage error of verb for a provider new to the thread
// (or a new thread) without a provider command: the provider is not
// installed (naming those that are), or it has no default command.
func noCommand(ctx context.Context, verb string, c *client, provider string) error {
	resp, err := c.ListPlugins(ctx, &batonv1.ListPluginsRequest{})
	if err != nil {
		return rpcError("list plugins", err)
	}
	var names []string
	for _, p := range resp.GetPlugins() {
		if p.GetName() == provider {
			return usagef("%s: provider %q has no default command; pass --provider-command", verb, provider)
		}
		names = append(names, p.GetName())
	}
	return usagef("%s: provider %q is not installed; installed: %s", verb, provider, cmp.Or(strings.Join(names, ", "), "none"))
}

// signals delivers the first SIGINT on first; a second signal (or SIGTERM)
// cancels ctx.
func signals(ctx context.Context, cancel context.CancelFunc) (first <-chan struct{}, stop func()) {
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	ch := make(chan struct{}, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for n := 0; ; n++ {
			select {
			case sig := <-sigs:
				if n == 0 && sig == os.Interrupt {
					ch <- struct{}{}
					continue
				}
				cancel()
				return
			case <-ctx.Done():
				return
			}
		}
	}()
	return ch, func() {
		signal.Stop(sigs)
		cancel()
		<-done
	}
}

func runRun(parent context.Context, g *globals, f *runFlags, messages []string) error {
	o, err := f.check(g, messages)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(parent)
	interruptReq, stopSignals := signals(ctx, cancel)
	defer stopSignals()
	c, err := g.connect(ctx)
	if err != nil {
		return err
	}
	defer c.close()
	return runOn(ctx, g, c, f, o, interruptReq)
}

// runOn is baton run on a client: it creates the thread (or continues
// it), sends the messages, and follows the runs they make until they end.
func runOn(ctx context.Context, g *globals, c *client, f *runFlags, o runOptions, interruptReq <-chan struct{}) error {
	if f.detach && c.embedded {
		fmt.Fprintln(g.stderr, "baton: --detach needs a service (baton serve); Ctrl-C will interrupt the runs")
	}
	idgen := ids.New()
	threadID := f.thread
	if o.noCommand {
		return noCommand(ctx, "run", c, f.provider)
	}
	if threadID == "" {
		// What the new thread's policy needs is checked before the thread
		// is made: a refusal writes nothing.
		if missing := missingCommand(domain.Thread{Provider: f.provider}, o.cont); missing != "" && missing != f.provider {
			return noCommand(ctx, "run", c, missing)
		}
		rc, err := c.CreateThread(ctx, &batonv1.CreateThreadRequest{CommandId: idgen.NewID("cmd"), Provider: f.provider,
			Cwd: o.cwd, Model: f.model, ProviderCommand: &batonv1.ProviderCommand{Argv: o.argv}, ApprovalPolicy: string(o.policy)})
		if err != nil {
			return rpcError("create thread", err)
		}
		threadID = rc.GetThreadId()
	}
	at, th, err := c.threadFor(ctx, "thread "+threadID, threadID)
	if err != nil {
		return err
	}
	// The runs this verb follows go on through their waits (a host
	// embedded for it arms them; a service arms every thread's).
	defer c.followWaits(threadID)()
	verb := cmp.Or(o.verb, "run")
	targetID, err := targetRun(ctx, c, verb, at, th, o.target)
	if err != nil {
		return err
	}
	if missing := missingCommand(th, o.cont); missing != "" {
		return noCommand(ctx, verb, c, missing) // before the switch writes anything
	}
	// A continued thread switches as its flags say; a new one is on its
	// provider already, and only takes the handoff bound.
	sw, switchArgv := f.switchFlags, o.switchArgv
	if f.thread == "" {
		sw, switchArgv = switchFlags{handoffMax: f.handoffMax}, nil
	}
	if _, err := switchThread(ctx, verb, c, idgen, th, sw, switchArgv); err != nil {
		return err
	}
	if err := setPolicy(ctx, verb, c, idgen, th, o.cont); err != nil {
		return err
	}
	start := at.GetSequence()
	if f.thread == "" {
		start = 0 // a new thread: show it from its creation (a continued one: what this run adds)
	}
	out := newPrinter(g.stdout, f.json, th)
	s := &session{c: c, idgen: idgen, threadID: threadID, out: out, stdout: g.stdout, stderr: g.stderr,
		wanted: map[string]bool{}, scripted: o.script != nil, ended: map[string]bool{}, policy: th.ApprovalPolicy,
		opened: map[string]domain.RequestOpened{}, loop: o.cont != nil || (th.Loop != nil && !th.Loop.Policy.Off())}
	mode := cmp.Or(o.mode, string(domain.ModeQueueAfterActive))
	for _, m := range o.messages {
		msgID := idgen.NewID("msg")
		rc, err := c.SendMessage(ctx, &batonv1.SendMessageRequest{CommandId: idgen.NewID("cmd"), ThreadId: threadID,
			MessageId: msgID, Text: m, Mode: mode, TargetRunId: targetID})
		if err != nil {
			return rpcError(cmp.Or(o.verb, "send message"), err) // send's words whether embedded or not
		}
		if rc.GetRunId() != "" && mode != string(domain.ModeQueueAfterActive) {
			s.mine = append(s.mine, rc.GetRunId()) // it may have joined a run queued before
		} else {
			s.wanted[msgID] = true
		}
	}
	scriptDone := make(chan error, 1)
	scriptCtx, stopScript := context.WithCancel(ctx)
	defer stopScript()
	if o.script != nil {
		go func() {
			scriptDone <- runScript(scriptCtx, c, threadID, *o.script, idgen.NewID("script")+":")
		}()
	} else {
		scriptDone <- nil
	}
	if f.json {
		s.stdout = g.stderr // prompts must not break the JSON lines
	}
	if th.ApprovalPolicy == domain.ApproveAsk && o.script == nil { // a script answers by its steps
		s.answers = readLines(ctx, g.stdin)
	}
	recs, errs := follow(ctx, c, threadID, start)
	interrupted := false
loop:
	for !s.done(ctx) {
		var answers <-chan string
		if len(s.asking) > 0 {
			answers = s.answers
		}
		select {
		case <-interruptReq:
			if f.detach && !c.embedded {
				fmt.Fprintf(g.stderr, "baton: detached; the runs go on. Follow them with: baton watch %s --server %s\n", threadID, c.target)
				return nil
			}
			fmt.Fprintln(g.stderr, "baton: interrupting; press Ctrl-C again to stop at once")
			interrupted = true
			stopScript()
			s.interruptAll(ctx)
		case err := <-errs:
			if ctx.Err() != nil {
				break loop
			}
			return streamEnded("read events", threadID, err)
		case err := <-scriptDone:
			scriptDone = nil
			if err != nil && !interrupted && ctx.Err() == nil {
				fmt.Fprintf(g.stderr, "baton: run: --script: %v\n", err)
				if final, err := finalThread(c, threadID, s.first()); err == nil {
					out.final(final, s.mine)
				}
				return silent(exitFailed)
			}
			// Done once the stream has shown everything the script caused.
			if t, err := c.GetThread(ctx, &batonv1.GetThreadRequest{ThreadId: threadID}); err == nil {
				s.needSeq = t.GetSequence()
			}
			s.scripted = false
		case line, ok := <-answers:
			s.answer(ctx, line, ok)
		case rec, ok := <-recs:
			if !ok {
				break loop
			}
			s.event(ctx, rec)
		}
	}
	if ctx.Err() != nil {
		// A second Ctrl-C (or SIGTERM): the user will not wait. An
		// embedded host's runs end now, as the host shuts down, so that
		// what is printed below is what the log holds.
		interrupted = true
		c.haltNow()
	}
	final, err := finalThread(c, threadID, s.first())
	if err != nil {
		return rpcError("thread "+threadID, err)
	}
	out.final(final, s.mine)
	switch {
	case interrupted:
		return silent(exitInterrupted)
	case s.loop && loopFailed(final, s.mine):
		return silent(exitFailed)
	case !s.loop && anyFailed(final, s.mine, o.script != nil):
		return silent(exitFailed)
	}
	return nil
}

// finalThread reads the thread once more, from run from on (the first of
// this invocation's: they are all in it), even after the command's context
// ended (a second Ctrl-C).
func finalThread(c *client, threadID string, from int) (domain.Thread, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, t, err := c.threadFrom(ctx, threadID, from)
	return t, err
}

// first is the ordinal of this invocation's first run (1 when it is not
// known: every run is read).
func (s *session) first() int {
	first := 0
	for _, id := range s.mine {
		o, ok := s.out.ordinals[id]
		if !ok {
			return 1
		}
		if first == 0 || o < first {
			first = o
		}
	}
	return max(first, 1)
}

// follow streams a thread's events after a sequence, until ctx ends: a
// goroutine reads them so that the caller also hears Ctrl-C and the user's
// answers. A subscriber the service cut off for falling behind subscribes
// again after the last event it got. errs gets the stream's error, if it
// ends with one.
func follow(ctx context.Context, c *client, threadID string, after uint64) (<-chan followed, <-chan error) {
	recs := make(chan followed)
	errs := make(chan error, 1)
	go func() {
		defer close(recs)
		for {
			err := followOnce(ctx, c, threadID, &after, recs)
			if status.Code(err) == codes.ResourceExhausted && ctx.Err() == nil {
				continue
			}
			if err != nil {
				errs <- err
			}
			return
		}
	}()
	return recs, errs
}

// followOnce is one subscription; after is the last sequence delivered.
func followOnce(ctx context.Context, c *client, threadID string, after *uint64, recs chan<- followed) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := c.Subscribe(ctx, &batonv1.SubscribeRequest{ThreadId: threadID, AfterSequence: *after})
	if err != nil {
		return err
	}
	for {
		ev, err := stream.Recv()
		if err == io.EOF {
			return nil
		} else if err != nil {
			return err
		}
		rec, err := decodeEvent(ev)
		if err != nil {
			return err
		}
		select {
		case recs <- rec:
			*after = rec.Sequence
		case <-ctx.Done():
			return nil
		}
	}
}

// session is what baton run follows of its thread: the runs it queued,
// which have ended, and the requests waiting for the user's answer.
type session struct {
	c        *client
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

	// loop: the thread has a continuation policy; it is followed until its
	// loop is over (loopOver: the projection said so at needSeq).
	loop, loopOver bool
}

// done: the script (if any) is over, the stream has caught up with it,
// and the runs of this invocation have all ended; with a policy, the
// thread's loop has no work to come by itself either.
func (s *session) done(ctx context.Context) bool {
	if s.scripted || len(s.wanted) > 0 || s.lastSeq < s.needSeq {
		return false
	}
	for _, id := range s.mine {
		if !s.ended[id] {
			return false
		}
	}
	if !s.loop || s.loopOver {
		return true
	}
	at, t, err := s.c.thread(ctx, s.threadID)
	if err != nil {
		return true // the final read says what is wrong
	}
	if t.Unattended() || activeRun(t) != nil {
		return false // a wait, a check or a run to come: its events will follow
	}
	s.loopOver, s.needSeq = true, at.GetSequence()
	return s.lastSeq >= s.needSeq
}

// activeRun is the thread's run that holds it (a waiting one too), if any.
func activeRun(t domain.Thread) *domain.Run {
	for i := range t.Runs {
		if t.Runs[i].Status.Active() {
			return &t.Runs[i]
		}
	}
	return nil
}

func (s *session) event(ctx context.Context, rec followed) {
	s.lastSeq = rec.Sequence
	if rec.ThreadID != s.threadID {
		return
	}
	pl := rec.Payload
	s.out.event(rec.Record, pl)
	switch e := pl.(type) {
	case domain.RunQueued:
		if !slices.Contains(s.mine, e.RunID) {
			s.mine = append(s.mine, e.RunID)
		}
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
		case s.policy != domain.ApproveAsk && e.Kind == sdk.RequestGeneric:
			// No policy answers a request of a kind Baton does not know, and
			// there is no one to ask: this client declines it, and says so.
			fmt.Fprintf(s.stderr, "baton: declining %s request %s: no one to ask (answer such requests with --approve ask on a terminal)\n",
				e.Title, e.RequestID)
			s.respond(ctx, e.RequestID, sdk.DecisionDecline, nil)
		}
	case domain.RequestAnswered:
		s.forget(e.RequestID)
	case domain.RequestResolved:
		s.forget(e.RequestID)
	}
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
		s.respond(context.Background(), q.RequestID, sdk.DecisionDecline, nil)
		return
	}
	if q.Kind == sdk.RequestUserInput {
		fmt.Fprintf(s.stdout, "  ? answer (empty line declines): ")
	} else {
		fmt.Fprintf(s.stdout, "  ? [a]ccept, accept for [s]ession, [d]ecline, [c]ancel the turn: ")
	}
}

// answer takes the user's line for the first waiting request.
func (s *session) answer(ctx context.Context, line string, ok bool) {
	q := s.asking[0]
	var decision sdk.Decision
	var answers map[string]string
	line = strings.TrimSpace(line)
	question := q.Kind == sdk.RequestUserInput
	switch {
	case !ok:
		s.answers, s.stdinClosed = nil, true
		fmt.Fprintln(s.stdout, "(no more input: declined)")
		decision = sdk.DecisionDecline
	case question && line != "":
		decision, answers = sdk.DecisionAnswer, map[string]string{"answer": line}
	case question:
		decision = sdk.DecisionDecline
	default:
		decision = map[string]sdk.Decision{"a": sdk.DecisionAccept, "s": sdk.DecisionAcceptForSession,
			"d": sdk.DecisionDecline, "c": sdk.DecisionCancel}[strings.ToLower(line)]
	}
	if decision == "" {
		fmt.Fprintf(s.stdout, "  ? please type a, s, d or c: ")
		return
	}
	s.respond(ctx, q.RequestID, decision, answers)
	s.asking = s.asking[1:]
	if len(s.asking) > 0 {
		s.prompt()
	}
}

func (s *session) respond(ctx context.Context, requestID string, decision sdk.Decision, answers map[string]string) {
	if _, err := s.c.AnswerRequest(ctx, &batonv1.AnswerRequestRequest{CommandId: s.idgen.NewID("cmd"), ThreadId: s.threadID,
		RequestId: requestID, Decision: string(decision), Answers: answers}); err != nil {
		fmt.Fprintf(s.stderr, "baton: answer request %s: %s\n", requestID, status.Convert(err).Message())
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
	_, err := s.c.Interrupt(ctx, &batonv1.InterruptRequest{CommandId: s.idgen.NewID("cmd"), ThreadId: s.threadID, RunId: runID})
	if err != nil && status.Code(err) != codes.FailedPrecondition { // ended meanwhile
		fmt.Fprintf(s.stderr, "baton: interrupt run %s: %s\n", runID, status.Convert(err).Message())
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

// loopFailed says whether a loop did not end as asked: with --until, its
// check did not pass; without, its last run did not complete.
func loopFailed(t domain.Thread, mine []string) bool {
	if t.Loop != nil && t.Loop.Policy.Until != "" {
		return t.Loop.Status != domain.LoopDone
	}
	for i := len(mine) - 1; i >= 0; i-- {
		if r := runOf(t, mine[i]); r != nil {
			return r.Status != domain.RunStatusCompleted
		}
	}
	return false
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
