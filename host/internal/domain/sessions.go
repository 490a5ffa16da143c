package domain

import (
	"slices"
)

// Which provider session takes a run's turn. The host holds a thread's
// open session (a process, not a record) and says what it runs (Env.Live);
// when an attempt starts, ChooseSession decides whether that session takes
// the turn, or is retired for a new one, and which of the provider's
// conversations a new one resumes; startTurn hands out the effects, in
// the order the host performs them: retire_session, open_session,
// start_turn, each one plugin call.

// LiveSession is the thread's open session as the host holds it: what it
// runs. The host gives none once the session's stream has ended.
type LiveSession struct {
	ID       string
	Provider string
	Model    string
	Command  ProviderCommand
	// MCP are the MCP servers it was opened with.
	MCP []MCPServerRef
}

// SessionChoice is where a run's turn goes.
type SessionChoice struct {
	// Provider, Model and Command are what the session runs: the run's
	// provider and model (the thread's when the run names none) and the
	// command the thread keeps for that provider.
	Provider string
	Model    string
	Command  ProviderCommand
	// MCP are the MCP servers the session has: the run's (Thread.MCPFor).
	MCP []MCPServerRef
	// Reuse: the live session takes the turn.
	Reuse bool
	// Retire is why the live session is retired first ("": there is none,
	// or it is reused).
	Retire string
	// Resume is the provider's own conversation of the thread that a new
	// session resumes ("": it has none).
	Resume string
}

// ChooseSession decides which session takes a turn on provider and model
// ("" provider: the thread's own) with the MCP servers mcp: the live one
// (nil: none), when it runs the same provider, model and command with the
// same servers and its conversation is the one the provider goes on in;
// else a new one, which resumes the provider's own conversation of the
// thread where it has one, the live one retired first: a run that starts
// after a switch runs where the switch says, and a change to the MCP
// servers takes effect at the next session.
func (t *Thread) ChooseSession(live *LiveSession, provider, model string, mcp []MCPServerRef) SessionChoice {
	if provider == "" {
		provider, model = t.Provider, t.Model
	}
	b, _ := t.Binding(provider)
	c := SessionChoice{Provider: provider, Model: model, Command: b.Command, Resume: b.ThreadRef, MCP: mcp}
	if live == nil {
		return c
	}
	same := live.Provider == provider && live.Model == model
	sameCommand := slices.Equal(live.Command.Argv, b.Command.Argv) && slices.Equal(live.Command.Env, b.Command.Env)
	switch {
	case same && sameCommand && !slices.Equal(live.MCP, mcp):
		c.Retire = "its MCP servers changed (now " + mcpNames(mcp) + ")"
	case same && sameCommand && !t.leftBehind(b, live.ID):
		c.Reuse = true
	case same && sameCommand:
		c.Retire = "its conversation was left behind"
	default:
		to := provider
		if model != "" {
			to += " (" + model + ")"
		}
		if same {
			to += ", with another command"
		}
		c.Retire = "the thread switched to " + to
	}
	return c
}

// ResumeRef is the conversation the session asks its plugin to resume:
// none when the plugin cannot resume one (the session is then recorded as
// not resumed, and the run is told the whole thread).
func (e OpenSession) ResumeRef(canResume bool) string {
	if !canResume {
		return ""
	}
	return e.Resume
}

// Open is the effect that opens the new session the choice names, as
// sessionID, in the thread threadID.
func (c SessionChoice) Open(threadID, sessionID string) OpenSession {
	return OpenSession{EffectHead: EffectHead{ThreadID: threadID}, SessionID: sessionID, Provider: c.Provider,
		Model: c.Model, Command: c.Command, Resume: c.Resume, MCP: c.MCP}
}

// startTurn decides the session an attempt's turn goes to (useSession)
// and hands out the effects that send it there.
func startTurn(t *Thread, runID, attemptID, text, provider, model string, live *LiveSession, env Env, d *Decision) {
	id, reused := t.useSession(live, provider, model, runID, attemptID, env, d)
	d.effect(StartTurn{EffectHead: EffectHead{ThreadID: t.ID}, RunID: runID, AttemptID: attemptID, Text: text, SessionID: id,
		Reused: reused})
}

// useSession decides the session that works for a run's attempt (none
// named: a rollback's) on provider and model, given the host's live
// session (nil: none), and says whether it is the live one: the live
// session when ChooseSession reuses it; else a new one, opened by an
// open_session effect, the live one retired first (its end recorded now,
// with the reason).
func (t *Thread) useSession(live *LiveSession, provider, model, runID, attemptID string, env Env, d *Decision) (id string, reused bool) {
	if live != nil {
		if s := t.session(live.ID); s == nil || s.Status != SessionStatusOpen {
			live = nil // its end is recorded: the host's process is on its way out
		}
	}
	c := t.ChooseSession(live, provider, model, t.MCPFor(runID, env, d))
	if c.Reuse {
		return live.ID, true
	}
	if c.Retire != "" {
		endSession(t, live.ID, c.Retire, d)
		d.effect(RetireSession{EffectHead: EffectHead{ThreadID: t.ID}, SessionID: live.ID})
	}
	open := c.Open(t.ID, env.NewID("ses"))
	open.RunID, open.AttemptID = runID, attemptID
	d.effect(open)
	return open.SessionID, false
}

// decideRestartTurn starts again, in a new session, a turn its session
// could not take because it had ended (its provider exited after the
// last run, or as the turn started): once. A run that ended, or an
// attempt replaced, is left alone.
func decideRestartTurn(t *Thread, p RestartTurn, env Env, d *Decision) {
	if !Current(t, StartTurn{RunID: p.RunID, AttemptID: p.AttemptID}) {
		return
	}
	r := t.run(p.RunID)
	d.emit(DiagnosticRecorded{RunID: r.ID, Title: "the turn starts again in a new session", Text: p.Reason})
	startTurn(t, r.ID, p.AttemptID, p.Text, r.Provider, r.Model, nil, env, d)
	start := d.Effects[len(d.Effects)-1].(StartTurn)
	start.Restarted = true
	d.Effects[len(d.Effects)-1] = start
}

// leftBehind says whether session's conversation was left behind (a
// rollback after a switch away from its provider detached it): the
// provider's next run must not go on in it.
func (t *Thread) leftBehind(b ProviderBinding, session string) bool {
	if b.ThreadRef != "" && b.SessionID == session {
		return false
	}
	for _, pt := range t.ProviderThreads {
		if pt.ParentID == "" && pt.Detached && pt.SessionID == session {
			return true
		}
	}
	for _, s := range t.ProviderSessions {
		if s.ID == session && s.Resumed != "" && b.ThreadRef != s.Resumed {
			return true // it resumed a conversation the provider no longer goes on in
		}
	}
	return false
}
