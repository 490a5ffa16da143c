package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	batonv1 "github.com/baton-run/baton/host/api/baton/v1"
	"github.com/baton-run/baton/host/internal/domain"
	"github.com/baton-run/baton/host/internal/scenario"
)

// runScript performs a scenario's steps on a thread through the API (as
// scenario.Run does on a host), then waits for every run to end.
func runScript(ctx context.Context, c *client, threadID string, s scenario.Script, prefix string) error {
	for i, st := range s.Steps {
		id := prefix + "step-" + strconv.Itoa(i+1)
		var err error
		switch {
		case st.Send != "":
			mode := st.Mode
			if mode == "" {
				mode = string(domain.ModeQueueAfterActive)
			} else if mode == "auto" {
				mode = ""
			}
			_, err = c.SendMessage(ctx, &batonv1.SendMessageRequest{CommandId: id, ThreadId: threadID, Text: st.Send, Mode: mode})
		case st.WaitFor != "":
			_, err = waitThread(ctx, c, threadID, func(t domain.Thread) bool { return scenario.Reached(t, st.WaitFor) })
		case st.Interrupt:
			var t domain.Thread
			if t, err = getThread(ctx, c, threadID); err == nil {
				r := newestRun(t)
				if r == nil {
					return fmt.Errorf("step %d: no run to interrupt", i+1)
				}
				_, err = c.Interrupt(ctx, &batonv1.InterruptRequest{CommandId: id, ThreadId: threadID, RunId: r.ID})
				if status.Code(err) == codes.FailedPrecondition {
					err = nil // it ended first: nothing to interrupt
				}
			}
		case st.Respond != "":
			var t domain.Thread
			if t, err = getThread(ctx, c, threadID); err == nil {
				q := pendingRequest(t)
				if q == nil {
					return fmt.Errorf("step %d: no pending request to answer", i+1)
				}
				_, err = c.AnswerRequest(ctx, &batonv1.AnswerRequestRequest{CommandId: id, ThreadId: threadID, RequestId: q.ID,
					Decision: st.Respond, Answers: st.Answers})
			}
		case st.Rollback != nil:
			var rb domain.Rollback
			if rb, err = rollbackTo(ctx, c, threadID, id, *st.Rollback); err == nil && rb.Status != domain.RollbackDone {
				err = fmt.Errorf("rollback to run %d %s: %s", *st.Rollback, rb.Status, rb.Failure.Message)
			}
		case st.SleepMS > 0:
			t := time.NewTimer(time.Duration(st.SleepMS) * time.Millisecond)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				err = ctx.Err()
			}
		}
		if err != nil {
			return fmt.Errorf("step %d: %w", i+1, errors.New(status.Convert(err).Message()))
		}
	}
	_, err := waitThread(ctx, c, threadID, func(t domain.Thread) bool { return scenario.Reached(t, scenario.WaitEnded) })
	return err
}

func getThread(ctx context.Context, c *client, threadID string) (domain.Thread, error) {
	t, err := c.GetThread(ctx, &batonv1.GetThreadRequest{ThreadId: threadID})
	if err != nil {
		return domain.Thread{}, err
	}
	return projection(t)
}

// waitThread waits until ok holds for the thread: it reads the projection
// again after each of the thread's events.
func waitThread(ctx context.Context, c *client, threadID string, ok func(domain.Thread) bool) (domain.Thread, error) {
	at, err := c.GetThread(ctx, &batonv1.GetThreadRequest{ThreadId: threadID})
	if err != nil {
		return domain.Thread{}, err
	}
	t, err := projection(at)
	if err != nil || ok(t) {
		return t, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := c.Subscribe(ctx, &batonv1.SubscribeRequest{ThreadId: threadID, AfterSequence: at.GetSequence()})
	if err != nil {
		return domain.Thread{}, err
	}
	for {
		if _, err := stream.Recv(); err != nil {
			return domain.Thread{}, err
		}
		if t, err = getThread(ctx, c, threadID); err != nil || ok(t) {
			return t, err
		}
	}
}

// rollbackTo rolls a thread back to run N's checkpoint and waits until the
// rollback has finished, one way or the other.
func rollbackTo(ctx context.Context, c *client, threadID, cmdID string, run int) (domain.Rollback, error) {
	if _, err := c.Rollback(ctx, &batonv1.RollbackRequest{CommandId: cmdID, ThreadId: threadID, Run: uint32(run)}); err != nil {
		return domain.Rollback{}, err
	}
	t, err := waitThread(ctx, c, threadID, func(t domain.Thread) bool { return !t.RollingBack() })
	if err != nil {
		return domain.Rollback{}, err
	}
	if len(t.Rollbacks) == 0 {
		return domain.Rollback{}, errors.New("no rollback recorded")
	}
	return t.Rollbacks[len(t.Rollbacks)-1], nil
}

func newestRun(t domain.Thread) *domain.Run {
	for i := len(t.Runs) - 1; i >= 0; i-- {
		if t.Runs[i].Status != domain.RunStatusQueued {
			return &t.Runs[i]
		}
	}
	return nil
}

func pendingRequest(t domain.Thread) *domain.RuntimeRequest {
	for i := range t.Requests {
		if q := &t.Requests[i]; q.Status == domain.RequestStatusPending && q.AnsweredBy == "" && q.Delivery == domain.DeliveryLive {
			return q
		}
	}
	return nil
}
