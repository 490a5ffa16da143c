package main

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	batonv1 "github.com/baton-run/baton/host/api/baton/v1"
	"github.com/baton-run/baton/host/internal/domain"
	"github.com/baton-run/baton/host/internal/ids"
)

// baton run's loop: it creates or continues the thread, sends the
// messages, follows the events until this invocation's runs have ended
// (answering requests and Ctrl-C on the way), and prints the end.

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
	if len(o.providers) > 1 {
		return runMany(ctx, g, c, f, o, interruptReq)
	}
	idgen := ids.New()
	threadID := f.thread
	if o.noCommand {
		return noCommand(ctx, "run", c, f.provider)
	}
	if threadID == "" {
		if err := checkNewThread(ctx, c, f.provider, o); err != nil {
			return err
		}
		wt, err := f.worktree.options(f.provider, false)
		if err != nil {
			return err
		}
		if threadID, err = newThread(ctx, c, idgen, f, o, f.provider, o.command, wt); err != nil {
			return err
		}
	}
	return followRuns(ctx, g, c, idgen, f, o, threadID, f.thread == "", interruptReq)
}

// checkNewThread checks, before anything is written, what a new thread on
// provider needs of what is installed: its continuation policy's
// providers' commands (a refusal writes nothing).
func checkNewThread(ctx context.Context, c *client, provider string, o runOptions) error {
	if missing := missingCommand(&batonv1.Thread{Provider: provider}, o.cont); missing != "" && missing != provider {
		return noCommand(ctx, "run", c, missing)
	}
	return nil
}

// newThread creates a new thread on provider, running pc, on the
// worktree wt asks for (nil: in --cwd), and returns its id.
func newThread(ctx context.Context, c *client, idgen *ids.Allocator, f *runFlags, o runOptions, provider string, pc *batonv1.ProviderCommand,
	wt *batonv1.WorktreeOptions) (string, error) {
	rc, err := c.CreateThread(ctx, &batonv1.CreateThreadRequest{CommandId: idgen.NewID("cmd"), Provider: provider,
		Cwd: o.cwd, Model: f.model, ProviderCommand: pc, ApprovalPolicy: string(o.policy),
		Worktree: wt, SharedCwd: f.sharedCwd, OnHost: f.onHost})
	if err != nil {
		return "", rpcError("create thread", err)
	}
	return rc.GetThreadId(), nil
}

// followRuns sends the messages to the thread (fresh: made by this
// invocation) and follows the runs they make until they end, answering
// requests and Ctrl-C on the way; it prints the end.
func followRuns(ctx context.Context, g *globals, c *client, idgen *ids.Allocator, f *runFlags, o runOptions, threadID string, fresh bool,
	interruptReq <-chan struct{}) error {
	th, err := c.threadFor(ctx, "thread "+threadID, threadID)
	if err != nil {
		return err
	}
	// The runs this verb follows go on through their waits (a host
	// embedded for it arms them; a service arms every thread's).
	defer c.followWaits(threadID)()
	verb := cmp.Or(o.verb, "run")
	targetID, err := targetRun(ctx, c, verb, th, o.target)
	if err != nil {
		return err
	}
	if missing := missingCommand(th, o.cont); missing != "" {
		return noCommand(ctx, verb, c, missing) // before the switch writes anything
	}
	// A continued thread switches as its flags say; a new one is on its
	// provider already, and only takes the handoff bound.
	sw, switchCommand := f.switchFlags, o.switchCommand
	if fresh {
		sw, switchCommand = switchFlags{handoffMax: f.handoffMax}, nil
	}
	if _, err := switchThread(ctx, verb, c, idgen, th, sw, switchCommand); err != nil {
		return err
	}
	if err := setPolicy(ctx, verb, c, idgen, th, o.cont); err != nil {
		return err
	}
	start := th.GetSequence()
	if fresh {
		start = 0 // a new thread: show it from its creation (a continued one: what this run adds)
	}
	out := newPrinter(g.stdout, f.json, th)
	s := &session{c: c, idgen: idgen, threadID: threadID, out: out, stdout: g.stdout, stderr: g.stderr,
		wanted: map[string]bool{}, scripted: o.script != nil, ended: map[string]bool{}, policy: domain.ApprovalPolicy(th.GetApprovalPolicy()),
		opened: map[string]*batonv1.RequestOpened{}, loop: o.cont != nil || th.GetLoop().GetPolicy().GetApplied() != nil}
	mode := cmp.Or(o.mode, string(domain.ModeQueueAfterActive))
	for _, m := range o.messages {
		msgID := idgen.NewID("msg")
		rc, err := c.SendMessage(ctx, &batonv1.SendMessageRequest{CommandId: idgen.NewID("cmd"), ThreadId: threadID,
			MessageId: msgID, Text: m, Mode: mode, TargetRunId: targetID, Mcp: o.mcp, NoMcp: o.noMCP})
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
	if s.policy == domain.ApproveAsk && o.script == nil { // a script answers by its steps
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
func finalThread(c *client, threadID string, from int) (*batonv1.Thread, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return c.threadFrom(ctx, threadID, from)
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
