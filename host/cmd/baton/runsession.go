package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"golang.org/x/term"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	batonv1 "github.com/baton-run/baton/host/api/baton/v1"
	"github.com/baton-run/baton/host/internal/domain"
	"github.com/baton-run/baton/host/internal/ids"
)

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

	answers     <-chan string            // the user's lines (ask policy)
	asking      []*batonv1.RequestOpened // requests waiting for the user, the first one asked
	stdinClosed bool
	opened      map[string]*batonv1.RequestOpened

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
	t, err := s.c.thread(ctx, s.threadID)
	if err != nil {
		return true // the final read says what is wrong
	}
	if t.GetUnattended() || t.GetActiveRunId() != "" {
		return false // a wait, a check or a run to come: its events will follow
	}
	s.loopOver, s.needSeq = true, t.GetSequence()
	return s.lastSeq >= s.needSeq
}

func (s *session) event(ctx context.Context, ev *batonv1.Event) {
	s.lastSeq = ev.GetSequence()
	if ev.GetThreadId() != s.threadID {
		return
	}
	s.out.event(ev)
	switch e := ev.GetPayload().(type) {
	case *batonv1.Event_RunQueued:
		q := e.RunQueued
		if !slices.Contains(s.mine, q.GetRunId()) {
			s.mine = append(s.mine, q.GetRunId())
		}
		delete(s.wanted, q.GetMessageId())
		if s.interrupted { // queued after Ctrl-C (a script's send, a requeued message): cancel it
			s.interrupt(ctx, q.GetRunId())
		}
	case *batonv1.Event_RunEnded:
		s.ended[e.RunEnded.GetRunId()] = true
	case *batonv1.Event_RequestAnswerFailed:
		// The answer did not get through. The policy may answer again; the
		// user is asked again.
		if q, ok := s.opened[e.RequestAnswerFailed.GetRequestId()]; ok && (s.answers != nil || s.stdinClosed) {
			s.asking = append(s.asking, q)
			if len(s.asking) == 1 {
				s.prompt()
			}
		}
	case *batonv1.Event_RequestOpened:
		q := e.RequestOpened
		s.opened[q.GetRequestId()] = q
		switch {
		case s.answers != nil || s.stdinClosed:
			s.asking = append(s.asking, q)
			if len(s.asking) == 1 {
				s.prompt()
			}
		case s.policy != domain.ApproveAsk && domain.RequestKind(q.GetKind()) == domain.RequestGeneric:
			// No policy answers a request of a kind Baton does not know, and
			// there is no one to ask: this client declines it, and says so.
			fmt.Fprintf(s.stderr, "baton: declining %s request %s: no one to ask (answer such requests with --approve ask on a terminal)\n",
				q.GetTitle(), q.GetRequestId())
			s.respond(ctx, q.GetRequestId(), domain.DecisionDecline, nil)
		}
	case *batonv1.Event_RequestAnswered:
		s.forget(e.RequestAnswered.GetRequestId())
	case *batonv1.Event_RequestResolved:
		s.forget(e.RequestResolved.GetRequestId())
	}
}

// forget drops a request that no longer waits for the user (answered by
// someone, or expired); the next one is asked.
func (s *session) forget(requestID string) {
	for i, q := range s.asking {
		if q.GetRequestId() != requestID {
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
		fmt.Fprintf(s.stdout, "  ? request %s: no more input: declined\n", q.GetRequestId())
		s.respond(context.Background(), q.GetRequestId(), domain.DecisionDecline, nil)
		return
	}
	if domain.RequestKind(q.GetKind()) == domain.RequestUserInput {
		fmt.Fprintf(s.stdout, "  ? answer (empty line declines): ")
	} else {
		fmt.Fprintf(s.stdout, "  ? [a]ccept, accept for [s]ession, [d]ecline, [c]ancel the turn: ")
	}
}

// answer takes the user's line for the first waiting request.
func (s *session) answer(ctx context.Context, line string, ok bool) {
	q := s.asking[0]
	var decision domain.RequestDecision
	var answers map[string]string
	line = strings.TrimSpace(line)
	question := domain.RequestKind(q.GetKind()) == domain.RequestUserInput
	switch {
	case !ok:
		s.answers, s.stdinClosed = nil, true
		fmt.Fprintln(s.stdout, "(no more input: declined)")
		decision = domain.DecisionDecline
	case question && line != "":
		decision, answers = domain.DecisionAnswer, map[string]string{"answer": line}
	case question:
		decision = domain.DecisionDecline
	default:
		decision = map[string]domain.RequestDecision{"a": domain.DecisionAccept, "s": domain.DecisionAcceptForSession,
			"d": domain.DecisionDecline, "c": domain.DecisionCancel}[strings.ToLower(line)]
	}
	if decision == "" {
		fmt.Fprintf(s.stdout, "  ? please type a, s, d or c: ")
		return
	}
	s.respond(ctx, q.GetRequestId(), decision, answers)
	s.asking = s.asking[1:]
	if len(s.asking) > 0 {
		s.prompt()
	}
}

func (s *session) respond(ctx context.Context, requestID string, decision domain.RequestDecision, answers map[string]string) {
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
