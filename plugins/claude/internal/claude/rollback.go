package claude

import (
	"cmp"
	"context"
	"crypto/sha256"
	"fmt"

	"github.com/baton-run/baton/sdk"
)

// Rollback drops a conversation's last turns; files are the host's to
// restore (from its checkpoints). Claude Code has no rollback on the wire:
// the session is resumed in a new CLI process cut after the last assistant
// message before the oldest turn to drop (--resume-session-at), forked into
// a session of its own (--fork-session --session-id). The fork is needed
// because the CLI keeps a truncating resume only once a new message is
// written: a plain --resume of the original session would bring the
// dropped turns back. The fork's id is derived from the session and the
// cut, so a replay asks for the same one. The CLI writes the fork only with
// its first message: a second rollback before that cuts the session the
// fork came from.
//
// Only turns this session ran can be dropped (the cut is the last
// assistant message before them, seen on the wire); dropping the first turn
// of a conversation leaves nothing to resume. Both are refused, and the
// host falls back to a fresh conversation with a handoff.

// RollbackThread implements sdk.Rollbacker on the session's conversation.
func (a *Adapter) RollbackThread(ctx context.Context, req sdk.RollbackThreadRequest) (sdk.RollbackThreadResponse, error) {
	s, err := a.session(req.SessionID)
	if err != nil {
		return sdk.RollbackThreadResponse{}, err
	}
	if _, err := s.live("rollback"); err != nil {
		return sdk.RollbackThreadResponse{}, err
	}
	s.mu.Lock()
	root, running := s.norm.root, s.norm.activeTurn()
	turns := s.norm.turns
	// A fork the CLI has not written yet (no message since the last
	// rollback) is not there to resume: its source is, with every entry the
	// cut may name.
	source := cmp.Or(s.norm.forkOf, root)
	s.mu.Unlock()
	switch {
	case req.ThreadRef != "" && req.ThreadRef != root:
		return sdk.RollbackThreadResponse{}, sdk.Errorf(sdk.ErrInvalid, "rollback thread %s: the session's conversation is %s", req.ThreadRef, root)
	case req.Turns == 0:
		return sdk.RollbackThreadResponse{ThreadRef: root}, nil
	case running != "":
		return sdk.RollbackThreadResponse{}, sdk.Errorf(sdk.ErrBusy, "rollback thread %s: turn %s is running", root, running)
	case int(req.Turns) > len(turns):
		return sdk.RollbackThreadResponse{}, sdk.Errorf(sdk.ErrInvalid,
			"rollback thread %s by %d turns: this session ran %d of its turns; earlier ones cannot be cut here", root, req.Turns, len(turns))
	}
	first := turns[len(turns)-int(req.Turns)]
	if req.BeforeTurnRef != "" && req.BeforeTurnRef != first.ref {
		return sdk.RollbackThreadResponse{}, sdk.Errorf(sdk.ErrInvalid,
			"rollback thread %s by %d turns: the oldest of them is %s, not %s", root, req.Turns, first.ref, req.BeforeTurnRef)
	}
	// The cut: the last assistant message before the oldest turn dropped.
	cut := first.before
	if cut == "" {
		return sdk.RollbackThreadResponse{}, sdk.Errorf(sdk.ErrInvalid,
			"rollback thread %s: turn %s has no assistant message before it to resume at", root, first.ref)
	}
	fork := forkID(source, cut)
	ctx, cancel := context.WithTimeout(ctx, handshakeTimeout)
	defer cancel()
	if err := s.restart(ctx, "--resume", source, "--resume-session-at", cut, "--fork-session", "--session-id", fork); err != nil {
		return sdk.RollbackThreadResponse{}, fmt.Errorf("rollback thread %s by %d turns: %w", root, req.Turns, err)
	}
	s.mu.Lock()
	s.norm.rolledBack(fork, source, first.ref)
	s.emit.Emit(sdk.RuntimeEvent{Kind: sdk.EventThreadStarted, ThreadRef: fork,
		Title: fmt.Sprintf("%s without its last %d turns", root, req.Turns)})
	s.mu.Unlock()
	return sdk.RollbackThreadResponse{ThreadRef: fork}, nil
}

// forkID is the session id of the fork of session cut at entry: a UUID
// (version 8, name-based) from both.
func forkID(session, entry string) string {
	sum := sha256.Sum256([]byte("baton rollback\x00" + session + "\x00" + entry))
	return uuidString([16]byte(sum[:16]), 8)
}

// restart replaces the session's CLI process with one started with extra
// arguments. The old one's end is not the session's; a new one that fails
// to start is.
func (s *session) restart(ctx context.Context, extra ...string) error {
	s.mu.Lock()
	old := s.proc
	s.opening = true
	s.mu.Unlock()
	_ = old.Close(ctx)
	<-old.ended
	err := s.start(ctx, extra...)
	s.mu.Lock()
	s.opening = false
	p := s.proc
	s.mu.Unlock()
	select {
	case <-p.ended:
		s.finish(p)
		if err == nil {
			err = sdk.Errorf(sdk.ErrProviderExited, "claude exited right after it started")
		}
	default:
	}
	return err
}

var _ sdk.Rollbacker = (*Adapter)(nil)
