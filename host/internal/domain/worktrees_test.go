package domain

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/baton-run/baton/sdk"
)

// wtFact is what the host finds of the test repository.
var wtFact = WorktreeFact{Repository: "/repo", Path: "/data/worktrees/repo-thr", Branch: "baton/thr", Base: "base",
	BaseBranch: "main", Author: "Ann <ann@example.com>"}

// newWorktreeWorld is a world whose thread works on a worktree of /repo,
// made (its CreateWorktree recorded) unless setup says otherwise.
func newWorktreeWorld(t *testing.T, spec WorktreeSpec) *world {
	w := &world{t: t, thread: &Thread{}, replica: &Thread{}}
	f := wtFact
	w.facts = &Facts{Providers: map[string]ProviderFact{"acp": {Installed: true}}, Worktree: &f}
	d := w.must(Command{ID: "c", ThreadID: "thr", Payload: CreateThread{Provider: "acp", Cwd: "/repo/sub",
		ProviderCommand: ProviderCommand{Argv: []string{"agent"}}, Worktree: &spec}})
	w.facts = nil
	if got := types(d); got != "thread.created" {
		t.Fatalf("create: %s", got)
	}
	if e, ok := d.Effects[0].(CreateWorktree); !ok || e.Path != f.Path || e.Branch != f.Branch || e.Base != "base" ||
		e.Repository != "/repo" || !slices.Equal(e.Copy, spec.Copy) || e.Setup != spec.Setup {
		t.Fatalf("create effect: %+v", d.Effects)
	}
	return w
}

// fakeGit is a repository as the host's git work would leave it: the
// branch, its commits (each a parent and a tree), and the worktree's tree.
type fakeGit struct {
	rt      *rapid.T
	branch  string
	parents map[string]string // commit -> parent
	trees   map[string]string // commit -> tree
	cur     string            // the worktree's files
	n       int
}

func newFakeGit(rt *rapid.T) *fakeGit {
	return &fakeGit{rt: rt, branch: "base", parents: map[string]string{}, trees: map[string]string{"base": "t0"}, cur: "t0"}
}

// history is the branch's commits after the base, oldest first.
func (g *fakeGit) history() []string {
	var h []string
	for c := g.branch; c != "base"; c = g.parents[c] {
		h = append(h, c)
	}
	slices.Reverse(h)
	return h
}

// perform carries out the git effects of a decision (and those of the
// decisions their outcomes make), as the host does.
func (g *fakeGit) perform(w *world, d Decision) {
	for _, e := range d.Effects {
		var r Result
		switch e := e.(type) {
		case CaptureCheckpoint:
			r.Captured = RecordCheckpoint{Status: CheckpointReady, Commit: "cp:" + g.cur}
			if c := e.Commit; c != nil {
				if c.Parent != g.branch {
					g.rt.Fatalf("run commit on %s expects the branch at %s; it is at %s", c.Branch, c.Parent, g.branch)
				}
				if g.trees[g.branch] != g.cur {
					g.n++
					id := fmt.Sprintf("c%d", g.n)
					g.parents[id], g.trees[id] = g.branch, g.cur
					g.branch = id
					r.Captured.BranchCommit = id
				}
			}
		case RestoreFiles:
			g.cur = strings.TrimPrefix(e.Commit, "cp:")
			if b := e.Branch; b != nil {
				if b.From != g.branch {
					g.rt.Fatalf("rollback moves the branch from %s; it is at %s", b.From, g.branch)
				}
				g.branch = b.To
			}
		case ReconcileThread:
			r.Err = sdk.ErrUnsupported
		default:
			continue
		}
		cmd := Outcome(w.thread, e, r)
		g.perform(w, w.must(*cmd))
	}
}

// Property: whatever runs end how, change what, and are rolled back, the
// thread's branch is its completed, not-rolled-back runs that changed
// files, in order; each commit is made on the branch as the host left it;
// and the branch's newest tree is the newest such run's files.
func TestWorktreeBranchHistoryProperty(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		w := newWorktreeWorld(t, WorktreeSpec{})
		w.holdCaptures = true
		g := newFakeGit(rt)
		g.perform(w, w.must(Command{ID: "made", ThreadID: "thr", Payload: RecordWorktree{}}))
		w.open("s1")
		trees := 0
		for i, steps := 0, rapid.IntRange(1, 30).Draw(rt, "steps"); i < steps; i++ {
			if rapid.IntRange(0, 3).Draw(rt, "op") > 0 || len(w.thread.Runs) == 0 {
				g.perform(w, w.send("task"))
				r := w.thread.ActiveRun()
				turn := fmt.Sprintf("u%d", r.Ordinal)
				w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventTurnStarted, ThreadRef: "pt", TurnRef: turn})
				if rapid.Bool().Draw(rt, "changes") {
					trees++
					g.cur = fmt.Sprintf("t%d", trees)
				}
				status := rapid.SampledFrom([]sdk.Status{sdk.TurnCompleted, sdk.TurnCompleted, sdk.TurnFailed, sdk.TurnInterrupted}).Draw(rt, "status")
				g.perform(w, w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventTurnTerminal, TurnRef: turn, Status: status}))
			} else {
				var ready []Checkpoint
				for _, c := range w.whole().Checkpoints {
					if c.Status == CheckpointReady && c.NodeID == "" {
						ready = append(ready, c)
					}
				}
				c := rapid.SampledFrom(ready).Draw(rt, "target")
				g.perform(w, w.must(Command{ID: "rb", ThreadID: "thr", Payload: RollbackToCheckpoint{CheckpointID: c.ID}}))
			}
			if r := w.thread.ActiveRun(); r != nil || w.thread.RollingBack() {
				rt.Fatalf("the thread did not settle: %+v", w.thread.Runs)
			}
			var want []string
			tree := "t0"
			whole := w.whole() // with the runs that left the projection
			for _, r := range whole.Runs {
				if r.Status != RunStatusCompleted {
					if r.Commit != "" && r.Status != RunStatusRolledBack {
						rt.Fatalf("run %d is %s with a commit", r.Ordinal, r.Status)
					}
					continue
				}
				tree = strings.TrimPrefix(whole.checkpoint(r.CheckpointID).Commit, "cp:")
				if r.Commit != "" {
					want = append(want, r.Commit)
				}
			}
			if got := g.history(); !slices.Equal(got, want) {
				rt.Fatalf("the branch is %v; the completed runs' commits are %v", got, want)
			}
			if w.thread.Worktree.Head != g.branch {
				rt.Fatalf("the thread holds the branch at %s; it is at %s", w.thread.Worktree.Head, g.branch)
			}
			if g.trees[g.branch] != tree {
				rt.Fatalf("the branch's files are %s; the newest completed run's are %s", g.trees[g.branch], tree)
			}
		}
	})
}

func TestWorktreeThreadIsMadeBeforeItsFirstRun(t *testing.T) {
	w := newWorktreeWorld(t, WorktreeSpec{Copy: []string{".env"}, Setup: "make deps"})
	th := w.thread
	want := Worktree{Repository: "/repo", Path: wtFact.Path, Branch: "baton/thr", Base: "base", BaseBranch: "main",
		Author: "Ann <ann@example.com>", Copy: []string{".env"}, Setup: "make deps", Status: WorktreeStatusCreating, Head: "base"}
	if th.Cwd != wtFact.Path || jsonOf(th.Worktree) != jsonOf(want) {
		t.Fatalf("thread: cwd %s, worktree %s", th.Cwd, jsonOf(th.Worktree))
	}
	if s := th.Summary(); s.Branch != "baton/thr" || s.Archived {
		t.Fatalf("summary: %+v", s)
	}
	// A message waits for the worktree; "now" is refused.
	if d := w.send("one"); types(d) != "message.added run.queued" {
		t.Fatalf("send while the worktree is made: %s", types(d))
	}
	if _, err := w.dispatch(DispatchMessage{Text: "x", Mode: ModeStartImmediately}); !errors.Is(err, ErrConflict) {
		t.Fatalf("now while the worktree is made: %v", err)
	}
	// A merge or an archive waits too.
	for _, p := range []CommandPayload{MergeThread{}, ArchiveThread{}} {
		if _, err := w.decide(Command{ID: "x", ThreadID: "thr", Payload: p}); !errors.Is(err, ErrConflict) {
			t.Errorf("%s while the worktree is made: %v", p.CommandType(), err)
		}
	}
	setup := &SetupResult{Command: "make deps", ExitCode: 0, Output: "ok"}
	d := w.must(Command{ID: "made", ThreadID: "thr", Payload: RecordWorktree{Copied: []string{".env"}, Setup: setup}})
	if got := types(d); !strings.HasPrefix(got, "worktree.ready checkpoint.scope.opened checkpoint.requested run.started") {
		t.Fatalf("made: %s", got)
	}
	if w.thread.Worktree.Status != WorktreeStatusReady || !slices.Equal(w.thread.Worktree.Copied, []string{".env"}) ||
		w.thread.Worktree.SetupResult.Output != "ok" {
		t.Fatalf("worktree: %+v", w.thread.Worktree)
	}
	// Recorded again (a host that restarted made it again): nothing.
	if d := w.must(Command{ID: "made2", ThreadID: "thr", Payload: RecordWorktree{}}); len(d.Events) != 0 {
		t.Fatalf("recorded again: %s", types(d))
	}
}

func TestWorktreeSetupFailureFailsTheFirstRun(t *testing.T) {
	w := newWorktreeWorld(t, WorktreeSpec{Setup: "false"})
	w.send("one")
	w.send("two")
	setup := &SetupResult{Command: "false", ExitCode: 1, Output: "  no deps\n"}
	d := w.must(Command{ID: "made", ThreadID: "thr", Payload: RecordWorktree{Setup: setup}})
	if got := types(d); !strings.HasPrefix(got, "worktree.ready run.ended checkpoint.scope.opened checkpoint.requested run.started") {
		t.Fatalf("made: %s", got)
	}
	r1, r2 := w.thread.Runs[0], w.thread.Runs[1]
	if r1.Status != RunStatusFailed || r1.Failure == nil || r1.Failure.Code != SetupFailure ||
		r1.Failure.Message != "the worktree's setup \"false\" exited 1:\nno deps" || r2.Status != RunStatusStarting {
		t.Fatalf("runs: %+v / %+v", r1, r2)
	}
	if got := SetupMessage(&SetupResult{Command: "nope", ExitCode: -1}); got != `the worktree's setup "nope" could not run` {
		t.Fatalf("setup that could not run: %q", got)
	}
}

func TestWorktreeThatCouldNotBeMadeFailsItsRuns(t *testing.T) {
	w := newWorktreeWorld(t, WorktreeSpec{})
	w.send("one")
	d := w.must(Command{ID: "made", ThreadID: "thr", Payload: RecordWorktree{Failure: "disk full"}})
	if got := types(d); got != "worktree.failed run.ended" {
		t.Fatalf("failed: %s", got)
	}
	r := w.thread.Runs[0]
	if r.Status != RunStatusFailed || r.Failure.Code != WorktreeFailure || r.Failure.Message != "the thread's worktree could not be made: disk full" {
		t.Fatalf("run: %+v", r)
	}
	if _, err := w.dispatch(DispatchMessage{Text: "again"}); !errors.Is(err, ErrConflict) ||
		!strings.Contains(err.Error(), "the thread's worktree could not be made: disk full; it takes no more messages") {
		t.Fatalf("message to a failed worktree: %v", err)
	}
	// It can still be archived: there is nothing to merge.
	if _, err := w.decide(Command{ID: "m", ThreadID: "thr", Payload: MergeThread{}}); !errors.Is(err, ErrConflict) {
		t.Fatalf("merge: %v", err)
	}
	d = w.must(Command{ID: "a", ThreadID: "thr", Payload: ArchiveThread{}})
	if types(d) != "thread.archived" || len(d.Effects) != 1 {
		t.Fatalf("archive: %s %+v", types(d), d.Effects)
	}
}

func TestWorktreeCreationRefusals(t *testing.T) {
	for _, tc := range []struct {
		name string
		spec WorktreeSpec
		fact *WorktreeFact
		want string
	}{
		{"not gathered", WorktreeSpec{}, nil, "needs the host to look at the repository first"},
		{"problem", WorktreeSpec{}, &WorktreeFact{Problem: "/x is not in a git repository"}, "--worktree: /x is not in a git repository"},
		{"bad glob", WorktreeSpec{Copy: []string{"["}}, &wtFact, `--copy "[" is not a glob`},
		{"absolute glob", WorktreeSpec{Copy: []string{"/etc/passwd"}}, &wtFact, `--copy "/etc/passwd"`},
		{"escaping glob", WorktreeSpec{Copy: []string{"../x"}}, &wtFact, `--copy "../x"`},
		{"empty glob", WorktreeSpec{Copy: []string{""}}, &wtFact, `--copy ""`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := &world{t: t, thread: &Thread{}, replica: &Thread{}}
			w.facts = &Facts{Providers: map[string]ProviderFact{"acp": {Installed: true}}, Worktree: tc.fact}
			spec := tc.spec
			_, err := w.decide(Command{ID: "c", ThreadID: "thr", Payload: CreateThread{Provider: "acp", Cwd: "/repo",
				ProviderCommand: ProviderCommand{Argv: []string{"agent"}}, Worktree: &spec}})
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) || w.thread.Exists() {
				t.Fatalf("got %v; want an invalid command saying %q, and no thread", err, tc.want)
			}
		})
	}
	// No facts at all (a caller that gathers none): refused the same.
	w := &world{t: t, thread: &Thread{}, replica: &Thread{}}
	if _, err := w.decide(Command{ID: "c", ThreadID: "thr", Payload: CreateThread{Provider: "acp", Cwd: "/repo",
		Worktree: &WorktreeSpec{}}}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("no facts: %v", err)
	}
}

// readyWorktreeWorld is a worktree thread whose worktree is made and whose
// one run completed, committing c1.
func readyWorktreeWorld(t *testing.T) *world {
	w := newWorktreeWorld(t, WorktreeSpec{})
	w.must(Command{ID: "made", ThreadID: "thr", Payload: RecordWorktree{}})
	w.holdCaptures = true
	w.send("Add a README\n\nwith details")
	w.open("s1")
	w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventTurnStarted, ThreadRef: "pt", TurnRef: "u1"})
	w.finish("u1")
	e := lastEffect(w).(CaptureCheckpoint)
	want := BranchCommit{Branch: "baton/thr", Parent: "base", Subject: "Add a README", Author: "Ann <ann@example.com>",
		Trailers: []string{"Baton-Thread: thr", "Baton-Run: " + w.thread.Runs[0].ID, "Baton-Provider: acp"}}
	if e.Commit == nil || jsonOf(*e.Commit) != jsonOf(want) {
		t.Fatalf("capture's commit: %s", jsonOf(e.Commit))
	}
	w.must(Command{ID: "cap", ThreadID: "thr", Payload: RecordCheckpoint{CheckpointID: e.CheckpointID, Status: CheckpointReady,
		Commit: "cp1", BranchCommit: "c1"}})
	w.holdCaptures = false
	return w
}

func TestWorktreeMerge(t *testing.T) {
	w := readyWorktreeWorld(t)
	if r := w.thread.Runs[0]; r.Commit != "c1" || w.thread.Worktree.Head != "c1" {
		t.Fatalf("run %+v, head %s", r, w.thread.Worktree.Head)
	}
	d := w.must(Command{ID: "m", ThreadID: "thr", Payload: MergeThread{}})
	if types(d) != "thread.merge_requested" {
		t.Fatalf("merge: %s", types(d))
	}
	e := d.Effects[0].(MergeBranch)
	if e.Into != "main" || e.Branch != "baton/thr" || e.Repository != "/repo" || e.Squash ||
		e.Message != "Merge branch 'baton/thr' into main\n\nBaton-Thread: thr\n" || e.Author != "Ann <ann@example.com>" {
		t.Fatalf("merge effect: %+v", e)
	}
	// One at a time.
	if _, err := w.decide(Command{ID: "m2", ThreadID: "thr", Payload: MergeThread{}}); !errors.Is(err, ErrConflict) {
		t.Fatalf("second merge: %v", err)
	}
	if _, err := w.decide(Command{ID: "a", ThreadID: "thr", Payload: ArchiveThread{}}); !errors.Is(err, ErrConflict) {
		t.Fatalf("archive during a merge: %v", err)
	}
	if _, err := w.decide(Command{ID: "r", ThreadID: "thr", Payload: RecordMerge{Merge{ID: e.MergeID, Status: "odd"}}}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("odd status: %v", err)
	}
	cmd := Outcome(w.thread, e, Result{Merged: Merge{Status: MergeConflict, Conflicts: []string{"a.txt"}, From: "m0"}})
	if cmd.ID != "merged:"+e.MergeID {
		t.Fatalf("outcome id %s", cmd.ID)
	}
	d = w.must(*cmd)
	want := Merge{ID: e.MergeID, Into: "main", Status: MergeConflict, From: "m0", Conflicts: []string{"a.txt"}}
	if types(d) != "thread.merged" || jsonOf(w.thread.Merges) != jsonOf([]Merge{want}) {
		t.Fatalf("merged: %s %s", types(d), jsonOf(w.thread.Merges))
	}
	if d := w.must(*cmd); len(d.Events) != 0 {
		t.Fatal("recorded twice")
	}
	if MergeConflict.Landed() || !MergeUpToDate.Landed() {
		t.Fatal("Landed")
	}
	// A merge that failed, a squash into a named branch with a named id.
	d = w.must(Command{ID: "m3", ThreadID: "thr", Payload: MergeThread{MergeID: "mine", Into: "release", Squash: true}})
	e = d.Effects[0].(MergeBranch)
	if e.Into != "release" || !e.Squash || e.Message != "Add a README (squashed)\n\nBaton-Thread: thr\n" {
		t.Fatalf("squash effect: %+v", e)
	}
	w.must(*Outcome(w.thread, e, Result{Err: errors.New("git broke")}))
	if m := w.thread.Merges[1]; m.Status != MergeFailed || m.Error != "git broke" || m.Into != "release" || !m.Squash {
		t.Fatalf("failed merge: %+v", m)
	}
	if _, err := w.decide(Command{ID: "m4", ThreadID: "thr", Payload: MergeThread{MergeID: "mine"}}); !errors.Is(err, ErrExists) {
		t.Fatalf("merge id reused: %v", err)
	}
	if _, err := w.decide(Command{ID: "m5", ThreadID: "thr", Payload: MergeThread{MergeID: " x"}}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("merge id with space: %v", err)
	}
	if _, err := w.decide(Command{ID: "m6", ThreadID: "thr", Payload: MergeThread{Into: "baton/thr"}}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("merge into itself: %v", err)
	}
	if _, err := w.decide(Command{ID: "m7", ThreadID: "thr", Payload: RecordMerge{Merge{ID: "nope"}}}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown merge: %v", err)
	}
	// A base that was no branch needs --into.
	w.edit(func(t *Thread) { wt := *t.Worktree; wt.BaseBranch = ""; t.Worktree = &wt })
	if _, err := w.decide(Command{ID: "m8", ThreadID: "thr", Payload: MergeThread{}}); !errors.Is(err, ErrInvalid) ||
		!strings.Contains(err.Error(), "--into") {
		t.Fatalf("no base branch: %v", err)
	}
	// A thread without a worktree has nothing to merge.
	plain := newWorld(t)
	if _, err := plain.decide(Command{ID: "m", ThreadID: "thr", Payload: MergeThread{}}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("merge of a plain thread: %v", err)
	}
}

func TestWorktreeArchive(t *testing.T) {
	w := readyWorktreeWorld(t)
	w.holdCaptures = true
	w.send("two")
	if _, err := w.decide(Command{ID: "a", ThreadID: "thr", Payload: ArchiveThread{}}); !errors.Is(err, ErrConflict) {
		t.Fatalf("archive with a run active: %v", err)
	}
	w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventTurnStarted, ThreadRef: "pt", TurnRef: "u2"})
	w.ev("s1", sdk.RuntimeEvent{Kind: sdk.EventTurnTerminal, TurnRef: "u2", Status: sdk.TurnInterrupted})
	if e := lastEffect(w).(CaptureCheckpoint); e.Commit != nil {
		t.Fatalf("an interrupted run commits: %+v", e.Commit)
	}
	if _, err := w.decide(Command{ID: "a", ThreadID: "thr", Payload: ArchiveThread{}}); !errors.Is(err, ErrConflict) {
		t.Fatalf("archive while the run ends: %v", err)
	}
	w.must(Command{ID: "cap2", ThreadID: "thr", Payload: RecordCheckpoint{CheckpointID: w.thread.Runs[1].CheckpointID,
		Status: CheckpointReady, Commit: "cp2"}})
	w.holdCaptures = false
	// Idle: a queued run would be cancelled by the archive.
	w.edit(func(t *Thread) {
		t.Runs = append(t.Runs, Run{ID: "run_q", Ordinal: 15, Status: RunStatusQueued, Attempts: []Attempt{}, Nodes: []Node{}})
	})
	d := w.must(Command{ID: "a", ThreadID: "thr", Payload: ArchiveThread{DeleteBranch: true}})
	if got := types(d); got != "run.ended thread.archived" {
		t.Fatalf("archive: %s", got)
	}
	if s := w.thread.Summary(); !s.Archived {
		t.Fatalf("summary of an archived thread: %+v", s)
	}
	if q := w.thread.run("run_q"); q.Status != RunStatusCancelled || q.StopReason != "the thread was archived" {
		t.Fatalf("queued run: %+v", q)
	}
	e := d.Effects[0].(RemoveWorktree)
	if e.Path != wtFact.Path || e.Branch != "baton/thr" || !e.DeleteBranch || e.Repository != "/repo" {
		t.Fatalf("remove effect: %+v", e)
	}
	if _, err := w.dispatch(DispatchMessage{Text: "more"}); !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), "is archived") {
		t.Fatalf("message to an archived thread: %v", err)
	}
	if d := w.must(Command{ID: "a2", ThreadID: "thr", Payload: ArchiveThread{}}); len(d.Events) != 0 {
		t.Fatal("archived twice")
	}
	// Removing failed: said, and the worktree is still there.
	w.must(*Outcome(w.thread, e, Result{Err: errors.New("busy")}))
	if wt := w.thread.Worktree; wt.Status != WorktreeStatusReady || wt.Failure != "busy" {
		t.Fatalf("removal failed: %+v", wt)
	}
	w.must(Command{ID: "gone", ThreadID: "thr", Payload: RecordWorktreeRemoved{BranchDeleted: true}})
	if wt := w.thread.Worktree; wt.Status != WorktreeStatusRemoved || !wt.BranchDeleted {
		t.Fatalf("removed: %+v", wt)
	}
	if d := w.must(Command{ID: "gone2", ThreadID: "thr", Payload: RecordWorktreeRemoved{}}); len(d.Events) != 0 {
		t.Fatal("removed twice")
	}
	if _, err := w.decide(Command{ID: "m", ThreadID: "thr", Payload: MergeThread{}}); !errors.Is(err, ErrConflict) ||
		!strings.Contains(err.Error(), "was deleted") {
		t.Fatalf("merge of a deleted branch: %v", err)
	}
	// A plain thread archives with no effect.
	plain := newWorld(t)
	if d := plain.must(Command{ID: "a", ThreadID: "thr", Payload: ArchiveThread{}}); types(d) != "thread.archived" || len(d.Effects) != 0 {
		t.Fatalf("plain archive: %s %+v", types(d), d.Effects)
	}
	if d := plain.must(Command{ID: "r", ThreadID: "thr", Payload: RecordWorktreeRemoved{}}); len(d.Events) != 0 {
		t.Fatal("a plain thread's worktree removed")
	}
	if _, err := plain.decide(Command{ID: "w", ThreadID: "thr", Payload: RecordWorktree{}}); !errors.Is(err, ErrInvalid) {
		t.Fatal("a plain thread's worktree recorded")
	}
}

func TestSubjectAndCommitMessage(t *testing.T) {
	for in, want := range map[string]string{
		"  Fix the bug \nmore":          "Fix the bug",
		"":                              "",
		strings.Repeat("a", 72):         strings.Repeat("a", 72),
		strings.Repeat("a", 73):         strings.Repeat("a", 69) + "...",
		strings.Repeat("a", 68) + "ééé": strings.Repeat("a", 68) + "...",
	} {
		if got := Subject(in); got != want {
			t.Errorf("Subject(%q) = %q, want %q", in, got, want)
		}
	}
	c := BranchCommit{Subject: "Fix it", Trailers: []string{"Baton-Thread: t", "Baton-Run: r"}}
	files := []FileChange{{Path: "a", Kind: "added"}, {Path: "b", Kind: "modified"}, {Path: "c", Kind: "deleted"}, {Path: "d", Kind: "type_changed"}}
	if got := CommitMessage(c, files); got != "Fix it\n\nA a\nM b\nD c\nT d\n\nBaton-Thread: t\nBaton-Run: r\n" {
		t.Fatalf("message: %q", got)
	}
	if got := CommitMessage(BranchCommit{}, nil); got != "(empty message)\n\n" {
		t.Fatalf("empty message: %q", got)
	}
	if ShortID("thr_0123456789abcdef") != "89abcdef" || ShortID("thr") != "thr" || DefaultBranch("x_12345678") != "baton/12345678" {
		t.Fatal("ShortID")
	}
	if got := WorktreePath("/data/worktrees", "/src/app", "thr_0123456789abcdef"); got != "/data/worktrees/app-89abcdef" {
		t.Fatalf("WorktreePath: %s", got)
	}
	if (&Thread{}).firstInput() != "" {
		t.Fatal("firstInput of no runs")
	}
}

// The worktree effects are stored and read back whole, and a host that
// stopped with one in its outbox performs it again (each is git work that
// can be done again).
func TestWorktreeEffectsRoundTrip(t *testing.T) {
	head := EffectHead{ID: "1.0", ThreadID: "thr"}
	for _, e := range []Effect{
		CreateWorktree{EffectHead: head, Repository: "/repo", Path: "/wt", Branch: "b", Base: "c0", Copy: []string{".env"}, Setup: "make"},
		MergeBranch{EffectHead: head, MergeID: "m", Repository: "/repo", Branch: "b", Into: "main", Squash: true, Message: "msg", Author: "A <a@b>"},
		RemoveWorktree{EffectHead: head, Repository: "/repo", Path: "/wt", Branch: "b", DeleteBranch: true},
		CaptureCheckpoint{EffectHead: head, CheckpointID: "cp", Ref: "r", Commit: &BranchCommit{Branch: "b", Parent: "p", Subject: "s",
			Trailers: []string{"T: 1"}, Author: "A <a@b>"}},
		RestoreFiles{EffectHead: head, RollbackID: "rb", Branch: &BranchMove{Branch: "b", From: "f", To: "t", SaveRef: "refs/x"}},
	} {
		b, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		got, err := DecodeEffect(b)
		if err != nil {
			t.Fatal(err)
		}
		if jsonOf(got) != string(b) || got.EffectType() != e.EffectType() {
			t.Errorf("%s read back as %s", b, jsonOf(got))
		}
		if s := Stored(got, "thr-b", "k"); s.Head() != (EffectHead{ID: "k", ThreadID: "thr-b"}) {
			t.Errorf("%s stored: %+v", e.EffectType(), s.Head())
		}
		if _, again := Replay(got); !again || !e.EffectType().Replayable() {
			t.Errorf("%s is not performed again", e.EffectType())
		}
	}
	var types []string
	for _, p := range []CommandPayload{MergeThread{}, ArchiveThread{}, RecordWorktree{}, RecordMerge{}, RecordWorktreeRemoved{}} {
		types = append(types, p.CommandType())
	}
	if got := strings.Join(types, " "); got != "thread.merge thread.archive worktree.record thread.merge.record worktree.removed.record" {
		t.Errorf("command types: %s", got)
	}
}

func TestWorktreeOutcomes(t *testing.T) {
	create := CreateWorktree{EffectHead: EffectHead{ID: "1.0", ThreadID: "thr"}}
	setup := &SetupResult{Command: "make", Output: "ok"}
	for _, tc := range []struct {
		e    Effect
		r    Result
		want Command
	}{
		{create, Result{Worktree: RecordWorktree{Copied: []string{".env"}, Setup: setup}},
			Command{ID: "worktree:thr", ThreadID: "thr", Payload: RecordWorktree{Copied: []string{".env"}, Setup: setup}}},
		{create, Result{Err: errors.New("no space")}, Command{ID: "worktree:thr", ThreadID: "thr", Payload: RecordWorktree{Failure: "no space"}}},
		{RemoveWorktree{EffectHead: EffectHead{ID: "2.0", ThreadID: "thr"}}, Result{BranchDeleted: true},
			Command{ID: "unworktree:2.0", ThreadID: "thr", Payload: RecordWorktreeRemoved{BranchDeleted: true}}},
		{MergeBranch{EffectHead: EffectHead{ID: "3.0", ThreadID: "thr"}, MergeID: "m"}, Result{Merged: Merge{Status: MergeMerged, Commit: "c"}},
			Command{ID: "merged:m", ThreadID: "thr", Payload: RecordMerge{Merge{ID: "m", Status: MergeMerged, Commit: "c"}}}},
	} {
		if got := Outcome(nil, tc.e, tc.r); got == nil || jsonOf(*got) != jsonOf(tc.want) {
			t.Errorf("%s outcome: %s, want %s", tc.e.EffectType(), jsonOf(got), jsonOf(tc.want))
		}
	}
}
