package main

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	batonv1 "github.com/baton-run/baton/host/api/baton/v1"
	"github.com/baton-run/baton/host/internal/domain"
	"github.com/baton-run/baton/host/internal/scenario"
	"github.com/baton-run/baton/sdk/clock"
)

// runScript performs a scenario's steps on a thread through the API, then
// waits for every run to end. Its pauses (sleepMs) are real ones.
func runScript(ctx context.Context, c *client, threadID string, s scenario.Script, prefix string) error {
	return scenario.Run(ctx, scriptDriver{c}, threadID, s, scenario.Options{Sleep: true, CommandPrefix: prefix})
}

// scriptDriver is a scenario.Driver over the API. Its errors are the
// service's messages, without the status code around them.
type scriptDriver struct{ c *client }

// plain is an API error's message.
func plain(err error) error {
	if err == nil {
		return nil
	}
	return errors.New(status.Convert(err).Message())
}

func (d scriptDriver) Send(ctx context.Context, threadID, cmdID, text string, mode domain.DispatchMode) error {
	_, err := d.c.SendMessage(ctx, &batonv1.SendMessageRequest{CommandId: cmdID, ThreadId: threadID, Text: text, Mode: string(mode)})
	return plain(err)
}

func (d scriptDriver) Interrupt(ctx context.Context, threadID, cmdID, runID string) error {
	_, err := d.c.Interrupt(ctx, &batonv1.InterruptRequest{CommandId: cmdID, ThreadId: threadID, RunId: runID})
	if status.Code(err) == codes.FailedPrecondition {
		return nil // it ended first: nothing to interrupt
	}
	return plain(err)
}

func (d scriptDriver) Respond(ctx context.Context, threadID, cmdID, requestID string, decision domain.RequestDecision, answers map[string]string) error {
	_, err := d.c.AnswerRequest(ctx, &batonv1.AnswerRequestRequest{CommandId: cmdID, ThreadId: threadID, RequestId: requestID,
		Decision: string(decision), Answers: answers})
	return plain(err)
}

func (d scriptDriver) Rollback(ctx context.Context, threadID, cmdID string, run int) error {
	_, err := d.c.Rollback(ctx, &batonv1.RollbackRequest{CommandId: cmdID, ThreadId: threadID, Run: uint32(run)})
	return plain(err)
}

func (d scriptDriver) Thread(ctx context.Context, threadID string) (domain.Thread, error) {
	_, t, err := d.c.thread(ctx, threadID)
	return t, plain(err)
}

// Wait reads the projection again after each of the thread's events.
func (d scriptDriver) Wait(ctx context.Context, threadID string, ok func(domain.Thread) bool) (domain.Thread, error) {
	at, t, err := d.c.thread(ctx, threadID)
	if err != nil || ok(t) {
		return t, plain(err)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := d.c.Subscribe(ctx, &batonv1.SubscribeRequest{ThreadId: threadID, AfterSequence: at.GetSequence()})
	if err != nil {
		return domain.Thread{}, plain(err)
	}
	for {
		if _, err := stream.Recv(); err != nil {
			return domain.Thread{}, plain(err)
		}
		if _, t, err = d.c.thread(ctx, threadID); err != nil || ok(t) {
			return t, plain(err)
		}
	}
}

func (scriptDriver) Clock() clock.Clock { return clock.System }
