// Package domaintest holds what tests of several packages compare
// threads with.
package domaintest

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/baton-run/baton/host/internal/domain"
)

// Normal is a thread's JSON tree with each collection in id order (runs
// by ordinal) and each binding's runs as a count: pages hold a thread's
// entries by run, its log in the order they happened.
func Normal(t *domain.Thread) any {
	th := t.Clone()
	th.Earlier = nil
	for i := range th.ProviderBindings {
		b := &th.ProviderBindings[i]
		b.RunsBefore, b.Runs = b.RunsBefore+len(b.Runs), nil
	}
	b, _ := json.Marshal(th)
	var tree map[string]any
	json.Unmarshal(b, &tree)
	for k, v := range tree {
		l, ok := v.([]any)
		switch {
		case !ok:
		case len(l) == 0:
			tree[k] = nil // none and an empty list are the same entries
		case k != "runs" && k != "providerBindings" && k != "rateLimits":
			slices.SortFunc(l, func(x, y any) int {
				a, b := x.(map[string]any), y.(map[string]any)
				return cmp.Compare(fmt.Sprint(a["id"], a["title"], a["text"]), fmt.Sprint(b["id"], b["title"], b["text"]))
			})
		}
	}
	return tree
}

// Settled is a condition a test waits for: the thread has at least n
// runs, all ended, and no checkpoint is still being captured (so a
// worktree thread's run commits are recorded: a host that starts again
// ends the run it finds completing at once and records its checkpoint
// after).
func Settled(n int) func(domain.Thread) bool {
	return func(th domain.Thread) bool {
		if len(th.Runs) < n {
			return false
		}
		for _, r := range th.Runs {
			if !r.Status.Terminal() {
				return false
			}
		}
		for _, c := range th.Checkpoints {
			if c.Status == domain.CheckpointCapturing {
				return false
			}
		}
		return true
	}
}
