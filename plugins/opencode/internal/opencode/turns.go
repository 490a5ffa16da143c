package opencode

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/baton-run/baton/sdk"
)

// modelOf maps the host's model ("provider/model") to opencode's; a model
// without a provider is left to opencode's configuration.
func modelOf(model string) *modelRef {
	p, m, ok := strings.Cut(model, "/")
	if !ok || p == "" || m == "" {
		return nil
	}
	return &modelRef{ProviderID: p, ModelID: m}
}

// StartTurn implements sdk.Adapter: prompt_async on the session. opencode
// answers at once; the turn's user message (whose id is the turn ref)
// starts it on the event stream.
func (a *Adapter) StartTurn(ctx context.Context, req sdk.StartTurnRequest) (sdk.StartTurnResponse, error) {
	s, err := a.session(req.SessionID)
	if err != nil {
		return sdk.StartTurnResponse{}, err
	}
	if s.ctx.Err() != nil {
		select {
		case <-s.proc.Done():
			return sdk.StartTurnResponse{}, fmt.Errorf("start turn: %w", s.proc.Exit(""))
		default:
			return sdk.StartTurnResponse{}, sdk.Errorf(sdk.ErrProviderExited, "start turn: the session was closed")
		}
	}
	s.mu.Lock()
	root, running := s.norm.root, s.norm.activeTurn(s.norm.root)
	if running != "" {
		s.mu.Unlock()
		return sdk.StartTurnResponse{}, sdk.Errorf(sdk.ErrBusy, "start turn: turn %s is running", running)
	}
	s.norm.expectTurn(req.ClientTurnID)
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	body := promptBody{Parts: []textPartInput{{Type: "text", Text: req.Input.Text}}, Model: modelOf(s.model)}
	if _, err := s.call(ctx, http.MethodPost, "/session/"+url.PathEscape(root)+"/prompt_async", body, nil); err != nil {
		s.mu.Lock()
		s.norm.unexpectTurn() // a late user message must not take the next turn's id
		s.mu.Unlock()
		return sdk.StartTurnResponse{}, fmt.Errorf("start turn: %w", err)
	}
	return sdk.StartTurnResponse{}, nil
}

// InterruptTurn implements sdk.Adapter: abort. The turn ends (interrupted)
// when the session goes idle.
func (a *Adapter) InterruptTurn(ctx context.Context, req sdk.InterruptTurnRequest) error {
	s, err := a.session(req.SessionID)
	if err != nil {
		return err
	}
	s.mu.Lock()
	root, turn := s.norm.root, s.norm.activeTurn(s.norm.root)
	if turn != "" && (req.TurnRef == "" || req.TurnRef == turn) {
		s.norm.abort(root)
	}
	if turn == "" && req.TurnRef == "" && s.norm.abortExpected() {
		// The prompt was accepted and its turn has not started: it is
		// aborted once it runs.
		s.mu.Unlock()
		return nil
	}
	s.mu.Unlock()
	if turn == "" || (req.TurnRef != "" && req.TurnRef != turn) {
		return nil // nothing to stop; the acknowledgement is still true
	}
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	if _, err := s.call(ctx, http.MethodPost, "/session/"+url.PathEscape(root)+"/abort", nil, nil); err != nil {
		return fmt.Errorf("interrupt turn %s: %w", turn, err)
	}
	return nil
}

// reply maps a decision to opencode's permission reply.
func reply(d sdk.Decision) (string, error) {
	switch d {
	case sdk.DecisionAccept:
		return "once", nil
	case sdk.DecisionAcceptForSession:
		return "always", nil
	case sdk.DecisionDecline, sdk.DecisionCancel:
		return "reject", nil
	}
	return "", sdk.Errorf(sdk.ErrInvalid, "decision %q: a permission takes accept, accept_for_session, decline or cancel", d)
}

// RespondToRequest implements sdk.Adapter.
func (a *Adapter) RespondToRequest(ctx context.Context, req sdk.RespondToRequestRequest) error {
	s, err := a.sessions.ForRequest(req.SessionID, req.RequestRef)
	if err != nil {
		return err
	}
	answer, err := reply(req.Decision)
	if err != nil {
		return err
	}
	s.mu.Lock()
	q, ok := s.pending.Take(req.RequestRef)
	if !ok {
		s.mu.Unlock()
		return sdk.Errorf(sdk.ErrUnknownRequest, "request %q", req.RequestRef)
	}
	if answer == "reject" {
		s.norm.rejectedCall(q.callID)
	}
	s.mu.Unlock()
	// The resolution is emitted before the reply: the reply lets opencode
	// go on, and what it does next must come after.
	s.emit.Emit(sdk.RuntimeEvent{Kind: sdk.EventRequestResolved, ThreadRef: q.thread, TurnRef: q.turn,
		RequestRef: req.RequestRef, RequestKind: q.kind, Status: req.Decision})
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	if _, err := s.call(ctx, http.MethodPost, "/permission/"+url.PathEscape(req.RequestRef)+"/reply", permissionReply{Reply: answer}, nil); err != nil {
		if s.ctx.Err() != nil {
			return sdk.Errorf(sdk.ErrNotResumable, "answer request %s: opencode is gone (%v)", req.RequestRef, err)
		}
		return fmt.Errorf("answer request %s: %w", req.RequestRef, err)
	}
	return nil
}

// CloseSession implements sdk.Adapter.
func (a *Adapter) CloseSession(ctx context.Context, sessionID string) error {
	s, err := a.session(sessionID)
	if err != nil {
		return err
	}
	return s.close(ctx)
}
