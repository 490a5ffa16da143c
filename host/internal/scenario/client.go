package scenario

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	batonv1 "github.com/baton-run/baton/host/api/baton/v1"
	"github.com/baton-run/baton/host/internal/domain"
	"github.com/baton-run/baton/host/internal/service"
	"github.com/baton-run/baton/sdk/clock"
)

// Client is a Driver over the host's service API (baton run --script, on
// a service or a host embedded for the command). A script decides on the
// domain's thread, so the driver reads each API thread back into it
// (service.ThreadOf). Its errors are the service's messages, without the
// status code around them.
func Client(c batonv1.BatonClient) Driver { return clientDriver{c} }

type clientDriver struct{ c batonv1.BatonClient }

// plain is an API error's message.
func plain(err error) error {
	if err == nil {
		return nil
	}
	return errors.New(status.Convert(err).Message())
}

func (d clientDriver) Send(ctx context.Context, threadID, cmdID, text string, mode domain.DispatchMode) error {
	_, err := d.c.SendMessage(ctx, &batonv1.SendMessageRequest{CommandId: cmdID, ThreadId: threadID, Text: text, Mode: string(mode)})
	return plain(err)
}

func (d clientDriver) Interrupt(ctx context.Context, threadID, cmdID, runID string) error {
	_, err := d.c.Interrupt(ctx, &batonv1.InterruptRequest{CommandId: cmdID, ThreadId: threadID, RunId: runID})
	if status.Code(err) == codes.FailedPrecondition {
		return nil // it ended first: nothing to interrupt
	}
	return plain(err)
}

func (d clientDriver) Respond(ctx context.Context, threadID, cmdID, requestID string, decision domain.RequestDecision, answers map[string]string) error {
	_, err := d.c.AnswerRequest(ctx, &batonv1.AnswerRequestRequest{CommandId: cmdID, ThreadId: threadID, RequestId: requestID,
		Decision: string(decision), Answers: answers})
	return plain(err)
}

func (d clientDriver) Rollback(ctx context.Context, threadID, cmdID string, run int) error {
	_, err := d.c.Rollback(ctx, &batonv1.RollbackRequest{CommandId: cmdID, ThreadId: threadID, Run: uint32(run)})
	return plain(err)
}

func (d clientDriver) Thread(ctx context.Context, threadID string) (domain.Thread, error) {
	t, _, err := d.read(ctx, threadID)
	return t, err
}

// read is the thread as the service holds it, and the sequence it shows.
func (d clientDriver) read(ctx context.Context, threadID string) (domain.Thread, uint64, error) {
	at, err := d.c.GetThread(ctx, &batonv1.GetThreadRequest{ThreadId: threadID})
	if err != nil {
		return domain.Thread{}, 0, plain(err)
	}
	return service.ThreadOf(at), at.GetSequence(), nil
}

// Wait reads the projection again after each of the thread's events.
func (d clientDriver) Wait(ctx context.Context, threadID string, ok func(domain.Thread) bool) (domain.Thread, error) {
	t, seq, err := d.read(ctx, threadID)
	if err != nil || ok(t) {
		return t, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := d.c.Subscribe(ctx, &batonv1.SubscribeRequest{ThreadId: threadID, AfterSequence: seq})
	if err != nil {
		return domain.Thread{}, plain(err)
	}
	for {
		if _, err := stream.Recv(); err != nil {
			return domain.Thread{}, plain(err)
		}
		if t, _, err = d.read(ctx, threadID); err != nil || ok(t) {
			return t, err
		}
	}
}

func (clientDriver) Clock() clock.Clock { return clock.System }
