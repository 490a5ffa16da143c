package orchestrator

import "slices"

// Followed lists the threads a host follows (timers.followed), once the
// commits of threadID have settled: it takes the thread's writer lock,
// which a commit holds until it has settled its follow.
func Followed(h *Host, threadID string) []string {
	e := h.cache.acquire(threadID)
	defer h.cache.release(e)
	e.mu.Lock()
	defer e.mu.Unlock()
	h.timers.mu.Lock()
	defer h.timers.mu.Unlock()
	ids := []string{}
	for id := range h.timers.followed {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}
