package domain

// Draining: what a host that stops does with a thread's run. A run whose
// turn a live provider has is asked to stop (HostStopping), and waited
// for: its own terminal ends it, checkpoint and all. A run still in flight
// when the drain is over (its provider did not answer, or its turn never
// reached one) is ended by ShutDown. No run is left running.

// InFlight says whether the thread has a run going that a host that stops
// must end (one waiting for a limit is not: the next host arms its wait
// again).
func (t *Thread) InFlight() bool { return t.runInFlight() != nil }

func (t *Thread) runInFlight() *Run {
	for i := range t.Runs {
		if r := &t.Runs[i]; r.Status.Active() && r.WaitID == "" {
			return r
		}
	}
	return nil
}

// Drain says what a host that stops does about the thread's run in
// flight: the observation it sends (nil: none: no live provider has the
// run's turn, or its turn is over), and whether it waits for the run to
// end before it ends it itself. live says whether a session's process is
// still there.
func (t *Thread) Drain(live func(sessionID string) bool) (stop *HostStopping, wait bool) {
	r := t.runInFlight()
	switch {
	case r == nil:
		return nil, false
	case r.Ending != nil:
		return nil, true // its turn is over: it ends once its checkpoint is recorded
	}
	a := r.attempt(r.ActiveAttempt)
	if a == nil || a.SessionID == "" || !live(a.SessionID) {
		return nil, false // no live provider has its turn: ended by ShutDown
	}
	return &HostStopping{RunID: r.ID, AttemptID: a.ID}, true
}
