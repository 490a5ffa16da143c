package opencode

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/baton-run/baton/sdk"
)

// rollbackTimeout bounds a whole rollback: reading the session and its
// messages, and the revert (which also restores opencode's own file
// snapshot).
const rollbackTimeout = 60 * time.Second

// RollbackThread implements sdk.Rollbacker on the session's own opencode
// session: the turns are its user messages that started a turn, oldest
// first; the oldest of the last req.Turns is checked against
// req.BeforeTurnRef, and the session is reverted to before it (POST
// /session/{id}/revert {messageID}). opencode keeps the session id, and
// drops the reverted messages when the next prompt comes. It also puts back
// the files it changed since, as the host's checkpoint restore does.
func (a *Adapter) RollbackThread(ctx context.Context, req sdk.RollbackThreadRequest) (sdk.RollbackThreadResponse, error) {
	s, err := a.session(req.SessionID)
	if err != nil {
		return sdk.RollbackThreadResponse{}, err
	}
	s.mu.Lock()
	root, running := s.norm.root, s.norm.activeTurn(s.norm.root)
	s.mu.Unlock()
	done, err := req.Check(root, running, s.ctx.Err() != nil)
	if err != nil {
		return sdk.RollbackThreadResponse{}, err
	}
	if done {
		return sdk.RollbackThreadResponse{ThreadRef: root}, nil
	}
	ctx, cancel := context.WithTimeout(ctx, rollbackTimeout)
	defer cancel()
	path := "/session/" + url.PathEscape(root)
	var info sessionInfo
	if _, err := s.call(ctx, http.MethodGet, path, nil, &info); err != nil {
		return sdk.RollbackThreadResponse{}, fmt.Errorf("rollback thread %s: %w", root, err)
	}
	var msgs []messageWithParts
	if _, err := s.call(ctx, http.MethodGet, path+"/message", nil, &msgs); err != nil {
		return sdk.RollbackThreadResponse{}, fmt.Errorf("rollback thread %s: %w", root, err)
	}
	s.mu.Lock()
	turns := s.norm.turns(msgs, info)
	s.mu.Unlock()
	target, err := sdk.RollbackTarget("opencode", turns, int(req.Turns), req.BeforeTurnRef)
	if err != nil {
		return sdk.RollbackThreadResponse{}, fmt.Errorf("rollback thread %s: %w", root, err)
	}
	if _, err := s.call(ctx, http.MethodPost, path+"/revert", revertBody{MessageID: target}, &info); err != nil {
		return sdk.RollbackThreadResponse{}, fmt.Errorf("rollback thread %s to before message %s: %w", root, target, err)
	}
	return sdk.RollbackThreadResponse{ThreadRef: root}, nil
}

// turns lists the session's turns, oldest first, from its messages: the
// user messages that started a turn (one queued into a running turn is
// not one), before the message a previous revert cut at.
func (n *normalizer) turns(msgs []messageWithParts, info sessionInfo) []string {
	var out []string
	for _, m := range msgs {
		if info.Revert != nil && m.Info.ID == info.Revert.MessageID {
			break
		}
		if m.Info.Role != "user" {
			continue
		}
		if t, ok := n.msgTurn[m.Info.ID]; ok && t != m.Info.ID {
			continue
		}
		out = append(out, m.Info.ID)
	}
	return out
}
