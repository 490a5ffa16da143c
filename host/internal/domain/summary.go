package domain

import "time"

// ThreadSummary is what a list of threads shows of one: kept in an index
// beside the log, so that listing threads reads no thread's events.
type ThreadSummary struct {
	ID        string    `json:"id"`
	Provider  string    `json:"provider"`
	Cwd       string    `json:"cwd"`
	Model     string    `json:"model,omitempty"`
	CreatedAt time.Time `json:"createdAt"`
	UpdatedAt time.Time `json:"updatedAt"`
	// Runs counts the thread's runs; Queued those waiting to start.
	Runs   int `json:"runs"`
	Queued int `json:"queued,omitempty"`
	// Status is the active run's status, or "idle".
	Status ThreadStatus `json:"status"`
	// LastRun is the status of the newest run that has started.
	LastRun RunStatus `json:"lastRun,omitempty"`
	// Sequence is the thread's last event.
	Sequence uint64 `json:"sequence"`
	// Archived: the thread is put away; Branch is its own branch ("": it
	// has no worktree).
	Archived bool   `json:"archived,omitempty"`
	Branch   string `json:"branch,omitempty"`
}

// ThreadStatus is what a thread is doing.
type ThreadStatus string

// ThreadIdle is a thread with no active run; otherwise a thread's status
// is its active run's.
const ThreadIdle ThreadStatus = "idle"

// ThreadStatuses are the statuses a thread can have: idle, or an active
// run's (RunStatus.Active).
var ThreadStatuses = []ThreadStatus{ThreadIdle, ThreadStatus(RunStatusStarting), ThreadStatus(RunStatusRunning),
	ThreadStatus(RunStatusWaiting)}

// Summary is the thread as a list shows it.
func (t *Thread) Summary() ThreadSummary {
	s := ThreadSummary{ID: t.ID, Provider: t.Provider, Cwd: t.Cwd, Model: t.Model, CreatedAt: t.CreatedAt,
		UpdatedAt: t.UpdatedAt, Runs: t.RunCount(), Status: ThreadIdle, Sequence: t.Sequence, Archived: t.Archived}
	if t.Worktree != nil {
		s.Branch = t.Worktree.Branch
	}
	for i := len(t.Runs) - 1; i >= 0; i-- {
		r := &t.Runs[i]
		if r.StartedAt == nil {
			if r.Status == RunStatusQueued {
				s.Queued++
			}
			continue
		}
		s.LastRun = r.Status
		if r.Status.Active() {
			s.Status = ThreadStatus(r.Status)
		}
		break
	}
	return s
}

// Live says whether a host that stops now leaves the thread in flight: a
// provider session open, a run active or a wait armed. A host that starts reconciles
// every live thread.
func (t *Thread) Live() bool {
	for _, s := range t.ProviderSessions {
		if s.Status == SessionStatusOpen {
			return true
		}
	}
	return t.ActiveRun() != nil || t.NextWait() != nil
}
