package codex

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sourcegraph/jsonrpc2"

	"github.com/baton-run/baton/sdk"
)

// Rollback drops a thread's last turns from codex's history; codex never
// touches files for it (the host restores those from its checkpoints).
//
// codex 0.171.0 keeps every thread's history in pages (historyMode
// "paginated") and has no thread/rollback: the turns are listed newest
// first (thread/turns/list), and thread/revert cuts the history before the
// oldest turn to drop. The thread keeps its id. A thread whose historyMode
// is another, or was never reported, is rolled back with thread/rollback
// {numTurns}, as older codex versions do; when codex refuses that method as
// unknown, the paginated way is taken.

// rollbackTimeout bounds a whole rollback: listing the turns and rewriting
// the thread's rollout file (about 100 ms for a short thread in 0.171.0).
const rollbackTimeout = 60 * time.Second

// RollbackThread implements sdk.Rollbacker on the session's own thread.
// The host asks between turns; a turn in progress (by the plugin's account
// or by codex's) is refused. thread/rollback names no turn, so only the
// paginated way checks req.BeforeTurnRef.
func (a *Adapter) RollbackThread(ctx context.Context, req sdk.RollbackThreadRequest) (sdk.RollbackThreadResponse, error) {
	s, err := a.session(req.SessionID)
	if err != nil {
		return sdk.RollbackThreadResponse{}, err
	}
	s.mu.Lock()
	thread, mode, running := s.thread, s.norm.historyMode(s.thread), s.norm.activeTurn(s.thread)
	s.mu.Unlock()
	done, err := req.Check(thread, running, s.ctx.Err() != nil)
	if err != nil {
		return sdk.RollbackThreadResponse{}, err
	}
	if done {
		return sdk.RollbackThreadResponse{ThreadRef: thread}, nil
	}
	ctx, cancel := context.WithTimeout(ctx, rollbackTimeout)
	defer cancel()
	var res threadResult
	if mode == historyPaginated {
		err = s.revert(ctx, thread, req, &res)
	} else {
		err = s.c.Call(ctx, "thread/rollback", threadRollbackParams{ThreadID: thread, NumTurns: req.Turns}, &res)
		if unknownMethod(err) {
			s.log.Debug("codex has no thread/rollback; reverting", "thread", thread, "historyMode", mode, "error", err)
			err = s.revert(ctx, thread, req, &res)
		} else if err != nil {
			err = fmt.Errorf("rollback thread %s by %d turns: %w", thread, req.Turns, err)
		}
	}
	if err != nil {
		return sdk.RollbackThreadResponse{}, err
	}
	if res.Thread.ID == "" {
		res.Thread.ID = thread
	}
	s.mu.Lock()
	if res.Thread.ID != s.thread {
		// Not seen in 0.171.0 (the thread keeps its id), but the answer
		// names the thread to go on with.
		s.thread = res.Thread.ID
		s.norm.setRoot(res.Thread.ID)
	}
	s.norm.rememberThread(res.Thread)
	s.mu.Unlock()
	return sdk.RollbackThreadResponse{ThreadRef: res.Thread.ID}, nil
}

// revert rolls a paginated thread back: it lists the newest req.Turns
// turns, checks the oldest of them against req.BeforeTurnRef, and cuts the
// history before it. Nothing is reverted when the check fails.
func (s *session) revert(ctx context.Context, thread string, req sdk.RollbackThreadRequest, res *threadResult) error {
	pages := turnPages{want: int(req.Turns)}
	params := turnsListParams{ThreadID: thread, Limit: pages.want, SortDirection: "desc", ItemsView: "summary"}
	for {
		var page turnsListResult
		if err := s.c.Call(ctx, "thread/turns/list", params, &page); err != nil {
			return fmt.Errorf("rollback thread %s: %w", thread, err)
		}
		next, err := pages.add(page)
		if err != nil {
			return fmt.Errorf("rollback thread %s: list its turns: %w", thread, err)
		}
		if next == nil {
			break
		}
		params.Cursor, params.Limit = next, pages.missing()
	}
	before, err := pages.target(req.BeforeTurnRef)
	if err != nil {
		return fmt.Errorf("rollback thread %s: %w", thread, err)
	}
	if err := s.c.Call(ctx, "thread/revert", threadRevertParams{ThreadID: thread, BeforeTurnID: before}, res); err != nil {
		return fmt.Errorf("rollback thread %s to before turn %s: %w", thread, before, err)
	}
	return nil
}

// unknownMethod says whether codex refused a call because it does not have
// the method: JSON-RPC's method-not-found, or, as 0.171.0 answers, an
// invalid request naming an "unknown variant".
func unknownMethod(err error) bool {
	var e *jsonrpc2.Error
	if !errors.As(err, &e) {
		return false
	}
	return e.Code == jsonrpc2.CodeMethodNotFound ||
		e.Code == jsonrpc2.CodeInvalidRequest && strings.Contains(e.Message, "unknown variant")
}

// turnPages collects a thread's newest turns from thread/turns/list pages
// (newest first) until it holds the want turns a rollback drops. It does no
// I/O.
type turnPages struct {
	want    int
	ids     []string        // newest first
	running string          // a listed turn codex has in progress
	cursor  json.RawMessage // the cursor last followed
}

// add takes the next page and returns the cursor of the page to read after
// it, or nil when no more are needed or codex has no more.
func (p *turnPages) add(page turnsListResult) (json.RawMessage, error) {
	for _, t := range page.Data {
		if t.ID == "" {
			return nil, errors.New("codex listed a turn without an id")
		}
		if t.Status == "inProgress" && p.running == "" {
			p.running = t.ID
		}
		p.ids = append(p.ids, t.ID)
	}
	next := page.NextCursor
	if len(p.ids) >= p.want || len(next) == 0 || string(next) == "null" {
		return nil, nil
	}
	switch {
	case len(page.Data) == 0:
		return nil, fmt.Errorf("codex listed no turns but a next page (cursor %s)", next)
	case bytes.Equal(next, p.cursor):
		return nil, fmt.Errorf("codex gave the same cursor twice (%s)", next)
	}
	p.cursor = next
	return next, nil
}

// missing is how many turns the next page must hold.
func (p *turnPages) missing() int { return p.want - len(p.ids) }

// target is the oldest turn to drop: the want-th newest. before, when not
// empty, is the turn the host expects it to be.
func (p *turnPages) target(before string) (string, error) {
	if p.running != "" {
		return "", sdk.Errorf(sdk.ErrBusy, "codex has turn %s in progress", p.running)
	}
	oldestFirst := slices.Clone(p.ids)
	slices.Reverse(oldestFirst)
	return sdk.RollbackTarget("codex", oldestFirst, p.want, before)
}
