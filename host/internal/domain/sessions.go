package domain

import (
	"slices"
)

// Which provider session takes a run's turn. The host holds a thread's
// open session (a process, not a record); before it starts a turn it asks
// ChooseSession whether that session may take it, or must be retired for
// a new one, and which of the provider's conversations a new one resumes.

// LiveSession is the thread's open session as the host holds it: what it
// runs.
type LiveSession struct {
	ID       string
	Provider string
	Model    string
	Command  ProviderCommand
}

// SessionChoice is where a run's turn goes.
type SessionChoice struct {
	// Provider, Model and Command are what the session runs: the run's
	// provider and model (the thread's when the run names none) and the
	// command the thread keeps for that provider.
	Provider string
	Model    string
	Command  ProviderCommand
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
// ("" provider: the thread's own): the live one (nil: none), when it runs
// the same provider, model and command and its conversation is the one
// the provider goes on in; else a new one, which resumes the provider's
// own conversation of the thread where it has one, the live one retired
// first: a run that starts after a switch runs where the switch says.
func (t *Thread) ChooseSession(live *LiveSession, provider, model string) SessionChoice {
	if provider == "" {
		provider, model = t.Provider, t.Model
	}
	b, _ := t.Binding(provider)
	c := SessionChoice{Provider: provider, Model: model, Command: b.Command, Resume: b.ThreadRef}
	if live == nil {
		return c
	}
	if live.Provider == provider && live.Model == model && slices.Equal(live.Command.Argv, b.Command.Argv) &&
		slices.Equal(live.Command.Env, b.Command.Env) && !t.leftBehind(b, live.ID) {
		c.Reuse = true
		return c
	}
	to := provider
	if model != "" {
		to += " (" + model + ")"
	}
	if live.Provider == provider && live.Model == model {
		to += ", with another command"
	}
	c.Retire = "the thread switched to " + to
	return c
}

// ResumeRef is the conversation a new session asks its plugin to resume:
// none when the plugin cannot resume one (the session is then recorded as
// not resumed, and the run is told the whole thread).
func (c SessionChoice) ResumeRef(canResume bool) string {
	if !canResume {
		return ""
	}
	return c.Resume
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
