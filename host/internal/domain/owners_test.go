package domain

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"
)

// A thread on a worktree of its own is its creator's too, and keeps
// whether its directory is shared.
func TestAWorktreeThreadIsOwnedByItsCreator(t *testing.T) {
	w := &world{t: t, thread: &Thread{}, replica: &Thread{}, host: "a"}
	f := wtFact
	w.facts = &Facts{Providers: map[string]ProviderFact{"acp": {Installed: true}}, Worktree: &f}
	d := w.must(Command{ID: "c", ThreadID: "thr", Payload: CreateThread{Provider: "acp", Cwd: "/repo/sub",
		ProviderCommand: ProviderCommand{Argv: []string{"agent"}}, Worktree: &WorktreeSpec{}, SharedCwd: true}})
	created, _ := d.Events[0].(ThreadCreated)
	want := ThreadCreated{Provider: "acp", Cwd: f.Path, ProviderCommand: ProviderCommand{Argv: []string{"agent"}},
		Worktree: created.Worktree, Host: "a", SharedCwd: true}
	if diff := cmp.Diff(want, created); diff != "" {
		t.Errorf("thread.created (-want +got):\n%s", diff)
	}
	if got := w.thread.Owner(); got != "a" || !w.thread.SharedCwd {
		t.Errorf("owner %q, shared cwd %t; want a, true", got, w.thread.SharedCwd)
	}
}

// ownerModel is what the owner of a thread should be after a sequence of
// claims and losses, kept apart from the domain's code.
type ownerModel struct {
	owner string
	lost  *HostLost
}

// Claims and losses by any host, in any order: a claim by a named host
// makes it the owner and clears the loss, and moves the thread only when
// it was another's or lost; a loss marks the thread only when the host
// named owns it and it is not marked already, at the decision's time.
func TestClaimsAndLossesProperty(t *testing.T) {
	hosts := []string{"", "a", "b", "c"}
	rapid.Check(t, func(rt *rapid.T) {
		w := &world{t: t, thread: &Thread{}, replica: &Thread{}}
		w.host = rapid.SampledFrom(hosts).Draw(rt, "creator")
		w.must(Command{ID: "c", ThreadID: "thr", Payload: CreateThread{Provider: "acp", Cwd: "/w",
			ProviderCommand: ProviderCommand{Argv: []string{"agent"}}}})
		m := ownerModel{owner: w.host}
		now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
		for i := range rapid.IntRange(1, 12).Draw(rt, "steps") {
			now = now.Add(time.Minute)
			w.now = now
			host := rapid.SampledFrom(hosts).Draw(rt, "host")
			var want []Payload
			var cmd CommandPayload
			if rapid.Bool().Draw(rt, "claim") {
				w.host = host
				cmd = ClaimThread{Reason: ClaimHostLost}
				if host != "" && (m.owner != host || m.lost != nil) {
					want = []Payload{ThreadMoved{From: m.owner, To: host, Reason: ClaimHostLost}}
					m = ownerModel{owner: host}
				}
			} else {
				cmd = MarkHostLost{Host: host}
				if m.owner == host && m.lost == nil {
					want = []Payload{ThreadHostLost{Host: host}}
					m.lost = &HostLost{Host: host, At: now}
				}
			}
			d, err := w.decide(Command{ID: "x", ThreadID: "thr", Payload: cmd})
			if c, ok := cmd.(ClaimThread); ok && w.host == "" {
				if err == nil {
					rt.Fatalf("step %d: %s with no host: no error", i, c.CommandType())
				}
				continue
			}
			if err != nil {
				rt.Fatalf("step %d: %s: %v", i, cmd.CommandType(), err)
			}
			if diff := cmp.Diff(want, d.Events); diff != "" {
				rt.Fatalf("step %d: %s by %q: events (-want +got):\n%s", i, cmd.CommandType(), host, diff)
			}
			if got := w.thread.Owner(); got != m.owner {
				rt.Fatalf("step %d: owner %q, want %q", i, got, m.owner)
			}
			if diff := cmp.Diff(m.lost, w.thread.HostLost); diff != "" {
				rt.Fatalf("step %d: host lost (-want +got):\n%s", i, diff)
			}
		}
	})
}

// Owner falls back on the runs for a thread that recorded no owner: the
// host of the newest run that has started (a queued run's none), else "".
func TestOwnerOfAThreadWithNoRecordedHost(t *testing.T) {
	at := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name string
		th   Thread
		want string
	}{
		{"no runs", Thread{}, ""},
		{"queued only", Thread{Runs: []Run{{Host: "q"}}}, ""},
		{"the newest started", Thread{Runs: []Run{{Host: "a", StartedAt: &at}, {Host: "b", StartedAt: &at}, {Host: "q"}}}, "b"},
		{"the newest started ran on no named host", Thread{Runs: []Run{{Host: "a", StartedAt: &at}, {StartedAt: &at}}}, ""},
		{"recorded wins", Thread{Host: "h", Runs: []Run{{Host: "b", StartedAt: &at}}}, "h"},
	} {
		if got := tc.th.Owner(); got != tc.want {
			t.Errorf("%s: owner %q, want %q", tc.name, got, tc.want)
		}
		if got := tc.th.Summary().Host; got != tc.want {
			t.Errorf("%s: the summary's host %q, want %q", tc.name, got, tc.want)
		}
	}
}
