package scenario

import (
	"context"
	"errors"

	"github.com/baton-run/baton/host/internal/domain"
	"github.com/baton-run/baton/host/internal/orchestrator"
	"github.com/baton-run/baton/sdk/clock"
)

// Host drives scripts on a host directly.
func Host(h *orchestrator.Host) Driver { return hostDriver{h} }

type hostDriver struct{ h *orchestrator.Host }

func (d hostDriver) Send(ctx context.Context, threadID, cmdID, text string, mode domain.DispatchMode) error {
	_, err := d.h.Dispatch(ctx, domain.Command{ID: cmdID, ThreadID: threadID, Payload: domain.DispatchMessage{Text: text, Mode: mode}})
	return err
}

func (d hostDriver) Interrupt(ctx context.Context, threadID, cmdID, runID string) error {
	_, err := d.h.Dispatch(ctx, domain.Command{ID: cmdID, ThreadID: threadID, Payload: domain.InterruptRun{RunID: runID}})
	if errors.Is(err, domain.ErrConflict) {
		return nil // it ended first: nothing to interrupt
	}
	return err
}

func (d hostDriver) Respond(ctx context.Context, threadID, cmdID, requestID string, decision domain.RequestDecision, answers map[string]string) error {
	_, err := d.h.Dispatch(ctx, domain.Command{ID: cmdID, ThreadID: threadID,
		Payload: domain.RespondToRequest{RequestID: requestID, Decision: decision, Answers: answers}})
	return err
}

// Rollback finds run N's checkpoint scope, as the service does for a
// client, and rolls back to it.
func (d hostDriver) Rollback(ctx context.Context, threadID, cmdID string, run int) error {
	scope, err := d.h.RunScope(threadID, run)
	if err != nil {
		return err
	}
	_, err = d.h.Dispatch(ctx, domain.Command{ID: cmdID, ThreadID: threadID, Payload: domain.RollbackToCheckpoint{ScopeID: scope}})
	return err
}

func (d hostDriver) Thread(_ context.Context, threadID string) (domain.Thread, error) {
	return d.h.Thread(threadID)
}

func (d hostDriver) Wait(ctx context.Context, threadID string, ok func(domain.Thread) bool) (domain.Thread, error) {
	t, seq, err := d.h.Snapshot(threadID)
	if err != nil || ok(t) {
		return t, err
	}
	for _, err := range d.h.ThreadStream(ctx, threadID, seq) {
		if err != nil {
			return domain.Thread{}, err
		}
		if t, err = d.h.Thread(threadID); err != nil || ok(t) {
			return t, err
		}
	}
	if ctx.Err() != nil {
		return domain.Thread{}, ctx.Err()
	}
	return domain.Thread{}, orchestrator.ErrClosed
}

func (d hostDriver) Clock() clock.Clock { return d.h.Clock() }
