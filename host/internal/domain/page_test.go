package domain

import (
	"testing"

	gocmp "github.com/google/go-cmp/cmp"
)

// A page lists each run's entries together, in run order, and the
// thread's own (of no run it holds: an answer that did not reach the
// provider) after them, whatever order they were recorded in.
func TestPageListsTheThreadsOwnEntriesLast(t *testing.T) {
	w := newWorld(t)
	w.send("one")
	w.send("two")
	r1, r2 := w.thread.Runs[0].ID, w.thread.Runs[1].ID
	w.edit(func(th *Thread) {
		th.Diagnostics = append(th.Diagnostics,
			Diagnostic{Title: "an answer did not reach the provider; answer again"},
			Diagnostic{RunID: r2, Title: "two's"},
			Diagnostic{RunID: r1, Title: "one's"},
		)
	})
	want := []Diagnostic{
		{RunID: r1, Title: "one's"},
		{RunID: r2, Title: "two's"},
		{Title: "an answer did not reach the provider; answer again"},
	}
	if d := gocmp.Diff(want, w.thread.Page(1, 2, nil).Diagnostics); d != "" {
		t.Fatalf("the page's diagnostics (-want +got):\n%s", d)
	}
	// The thread's own are the newest page's, not the first's.
	if d := gocmp.Diff([]Diagnostic{{RunID: r1, Title: "one's"}}, w.thread.Page(1, 1, nil).Diagnostics); d != "" {
		t.Fatalf("run 1's page (-want +got):\n%s", d)
	}
}
