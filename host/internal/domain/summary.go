package domain

import (
	"strings"
	"time"
)

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
	// Title is the thread's first message, shortened (Thread.Title).
	Title string `json:"title,omitempty"`
	// Host is the thread's owner, on a log several hosts share
	// (Thread.Owner).
	Host string `json:"host,omitempty"`
	// HostLost says the thread's owner stopped renewing its lease (nil:
	// it has not, or the thread was claimed since).
	HostLost *HostLost `json:"hostLost,omitempty"`
	// Pending counts the requests (approvals, questions) waiting for a
	// person: the thread needs its user.
	Pending int `json:"pending,omitempty"`
	// Wait is the thread's next armed wait (a usage limit's reset, or a
	// return to a provider a switch left): when it fires and what it does.
	Wait *SummaryWait `json:"wait,omitempty"`
	// Worktree is the directory of the thread's own worktree ("": none);
	// Repository the user's worktree it was made from, which a list groups
	// it under.
	Worktree   string `json:"worktree,omitempty"`
	Repository string `json:"repository,omitempty"`
	// Usage is what the thread's runs used, the total of its ledger
	// (Thread.Ledger).
	Usage Usage `json:"usage,omitzero"`
}

// SummaryWait is an armed wait as a list shows it.
type SummaryWait struct {
	At       time.Time `json:"at"`
	Kind     WaitKind  `json:"kind"`
	Provider string    `json:"provider"`
	// RunID is the run that waits (a continue wait): interrupting it
	// cancels the wait.
	RunID string `json:"runId,omitempty"`
}

// titleMax is how many characters of its first message a title keeps.
const titleMax = 80

// TitleOf is a thread's title from its first message: the first line that
// is not blank, its spaces folded, at most titleMax characters (an
// ellipsis where it was cut).
func TitleOf(text string) string {
	var line string
	for l := range strings.Lines(text) {
		if line = strings.Join(strings.Fields(l), " "); line != "" {
			break
		}
	}
	if r := []rune(line); len(r) > titleMax {
		line = strings.TrimRight(string(r[:titleMax-1]), " ") + "…"
	}
	return line
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
		UpdatedAt: t.UpdatedAt, Runs: t.RunCount(), Status: ThreadIdle, Sequence: t.Sequence, Archived: t.Archived,
		Host: t.Owner(), HostLost: t.HostLost}
	if t.Worktree != nil {
		s.Branch, s.Worktree, s.Repository = t.Worktree.Branch, t.Worktree.Path, t.Worktree.Repository
	}
	s.Title = t.Title
	s.Usage = LedgerTotal(t.Ledger)
	for i := range t.Requests {
		if t.Requests[i].Status == RequestStatusPending {
			s.Pending++
		}
	}
	if w := t.NextWait(); w != nil {
		s.Wait = &SummaryWait{At: w.At, Kind: w.Kind, Provider: w.Provider, RunID: w.RunID}
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
