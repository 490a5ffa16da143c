package domain

import (
	"cmp"
	"fmt"
	"path"
	"slices"
	"strings"
	"unicode/utf8"
)

// Worktrees. A thread created with a WorktreeSpec works in a git worktree
// of its own, on a new branch from a base commit, made by the host
// (CreateWorktree) after the thread is created; no run starts before it is
// made. Each completed run that changed files becomes a commit on the
// branch (the capture of its checkpoint makes it: CaptureCheckpoint.Commit),
// a rollback moves the branch back with the files (RestoreFiles.Branch) to
// where it was when the target checkpoint was captured
// (Checkpoint.BranchHead), a merge brings the branch into another
// (MergeBranch), and archiving the thread removes the worktree
// (RemoveWorktree). The branch's history is always the commits of the
// thread's completed, not-rolled-back runs that changed files, in order.

// WorktreeStatus is where a thread's worktree stands.
type WorktreeStatus string

// Worktree statuses.
const (
	WorktreeStatusCreating WorktreeStatus = "creating"
	WorktreeStatusReady    WorktreeStatus = "ready"
	WorktreeStatusFailed   WorktreeStatus = "failed"
	WorktreeStatusRemoved  WorktreeStatus = "removed"
)

// BranchPrefix is the default branch's prefix: baton/<short thread id>.
const BranchPrefix = "baton/"

// WorktreeSpec asks for a thread on a worktree of its own (CreateThread).
type WorktreeSpec struct {
	// Branch is the new branch ("": baton/<short thread id>); Base the
	// commit it starts at ("": the repository's HEAD); Dir where the
	// worktree goes ("": the host's worktree directory).
	Branch string `json:"branch,omitempty"`
	Base   string `json:"base,omitempty"`
	Dir    string `json:"dir,omitempty"`
	// Copy are globs of files copied from the user's worktree (.env, local
	// config); Setup a shell command run in the new worktree before the
	// first run.
	Copy  []string `json:"copy,omitempty"`
	Setup string   `json:"setup,omitempty"`
	// Author is the run commits' author ("Name <email>"; "": the user's git
	// config).
	Author string `json:"author,omitempty"`
}

// WorktreeFact is what the host found of a worktree thread's repository
// before anything was written (Facts.Worktree).
type WorktreeFact struct {
	// Problem says why the worktree cannot be made ("/x is not in a git
	// repository", a base that does not resolve, a branch that exists).
	Problem string `json:"problem,omitempty"`
	// Repository is the user's worktree the thread's comes from; Path the
	// new worktree; Branch its branch; Base the commit the base resolved
	// to and BaseBranch the branch it came from ("": none); Author the
	// commits' author.
	Repository string `json:"repository,omitempty"`
	Path       string `json:"path,omitempty"`
	Branch     string `json:"branch,omitempty"`
	Base       string `json:"base,omitempty"`
	BaseBranch string `json:"baseBranch,omitempty"`
	Author     string `json:"author,omitempty"`
}

// ShortID is the part of a thread id that names its branch and worktree:
// its last eight characters (a time-ordered id's random tail).
func ShortID(threadID string) string {
	if len(threadID) <= 8 {
		return threadID
	}
	return threadID[len(threadID)-8:]
}

// DefaultBranch is a worktree thread's branch when none is named.
func DefaultBranch(threadID string) string { return BranchPrefix + ShortID(threadID) }

// WorktreePath is where a thread's worktree goes under dir: the
// repository's name and the thread's short id.
func WorktreePath(dir, repository, threadID string) string {
	return path.Join(dir, path.Base(repository)+"-"+ShortID(threadID))
}

// Worktree is a thread's own git worktree and branch.
type Worktree struct {
	Repository string         `json:"repository"`
	Path       string         `json:"path"`
	Branch     string         `json:"branch"`
	Base       string         `json:"base"`
	BaseBranch string         `json:"baseBranch,omitempty"`
	Author     string         `json:"author,omitempty"`
	Copy       []string       `json:"copy,omitempty"`
	Setup      string         `json:"setup,omitempty"`
	Status     WorktreeStatus `json:"status"`
	// Failure says why it could not be made (failed) or removed.
	Failure string `json:"failure,omitempty"`
	// Copied are the files copied in; SetupResult what the setup did.
	Copied      []string     `json:"copied,omitempty"`
	SetupResult *SetupResult `json:"setupResult,omitempty"`
	// Head is the branch's commit as the thread made it: Base, or the
	// newest kept run's commit.
	Head string `json:"head"`
	// BranchDeleted: archiving deleted the branch too.
	BranchDeleted bool `json:"branchDeleted,omitempty"`
}

// SetupResult is what a worktree's setup command did.
type SetupResult struct {
	Command  string `json:"command"`
	ExitCode int    `json:"exitCode"`
	Output   string `json:"output,omitempty"`
}

// Failed says whether the setup failed.
func (s *SetupResult) Failed() bool { return s != nil && s.ExitCode != 0 }

// BranchCommit asks a run's capture to commit the checkpoint's tree on
// the thread's branch: parent Parent (the branch's head), Subject as the
// message's first line (CommitMessage), the trailers naming the thread,
// run and provider. No commit is made when the tree is Parent's.
type BranchCommit struct {
	Branch   string   `json:"branch"`
	Parent   string   `json:"parent"`
	Subject  string   `json:"subject"`
	Trailers []string `json:"trailers"`
	Author   string   `json:"author,omitempty"`
}

// BranchMove asks a rollback's restore to move the thread's branch from
// From back to To, keeping From under SaveRef.
type BranchMove struct {
	Branch  string `json:"branch"`
	From    string `json:"from"`
	To      string `json:"to"`
	SaveRef string `json:"saveRef"`
}

// Merge is one merge of a thread's branch into another.
type Merge struct {
	ID      string      `json:"id"`
	Into    string      `json:"into"`
	Squash  bool        `json:"squash,omitempty"`
	Status  MergeStatus `json:"status"`
	From    string      `json:"from,omitempty"`
	Commit  string      `json:"commit,omitempty"`
	Commits []string    `json:"commits,omitempty"`
	// Conflicts are the paths both sides changed (conflict); Dirty the
	// local changes in the worktree where Into is checked out (dirty).
	Conflicts []string `json:"conflicts,omitempty"`
	Dirty     []string `json:"dirty,omitempty"`
	// Worktree is where Into is checked out and was updated.
	Worktree string `json:"worktree,omitempty"`
	Error    string `json:"error,omitempty"`
}

// MergeStatus is how a merge came out.
type MergeStatus string

// Merge statuses.
const (
	MergePending     MergeStatus = "pending"
	MergeMerged      MergeStatus = "merged"
	MergeFastForward MergeStatus = "fast_forward"
	MergeUpToDate    MergeStatus = "up_to_date"
	MergeConflict    MergeStatus = "conflict"
	MergeDirty       MergeStatus = "dirty"
	MergeFailed      MergeStatus = "failed"
)

// MergeStatuses are the statuses a merge's outcome may have.
var MergeStatuses = []MergeStatus{MergeMerged, MergeFastForward, MergeUpToDate, MergeConflict, MergeDirty, MergeFailed}

// Landed says whether the merge changed the target or found it had the
// branch already.
func (s MergeStatus) Landed() bool {
	return s == MergeMerged || s == MergeFastForward || s == MergeUpToDate
}

// Commands of worktrees.
type (
	// MergeThread brings the thread's branch into Into ("": the branch its
	// base came from), as one squashed commit when Squash.
	MergeThread struct {
		MergeID string `json:"mergeId,omitempty"`
		Into    string `json:"into,omitempty"`
		Squash  bool   `json:"squash,omitempty"`
	}
	// ArchiveThread puts a thread away: it takes no more messages, and its
	// worktree is removed (its branch and checkpoints kept, unless
	// DeleteBranch).
	ArchiveThread struct {
		DeleteBranch bool `json:"deleteBranch,omitempty"`
	}
	// RecordWorktree is what making a thread's worktree found.
	RecordWorktree struct {
		Failure string       `json:"failure,omitempty"`
		Copied  []string     `json:"copied,omitempty"`
		Setup   *SetupResult `json:"setup,omitempty"`
	}
	// RecordMerge is how a merge came out.
	RecordMerge struct {
		Merge
	}
	// RecordWorktreeRemoved is what removing an archived thread's worktree
	// found.
	RecordWorktreeRemoved struct {
		Failure       string `json:"failure,omitempty"`
		BranchDeleted bool   `json:"branchDeleted,omitempty"`
	}
)

func (MergeThread) CommandType() string           { return "thread.merge" }
func (ArchiveThread) CommandType() string         { return "thread.archive" }
func (RecordWorktree) CommandType() string        { return "worktree.record" }
func (RecordMerge) CommandType() string           { return "thread.merge.record" }
func (RecordWorktreeRemoved) CommandType() string { return "worktree.removed.record" }

// Events of worktrees.
type (
	// WorktreeReady: the thread's worktree was made (and its files copied
	// and setup run: a setup that failed fails the first run).
	WorktreeReady struct {
		Copied []string     `json:"copied,omitempty"`
		Setup  *SetupResult `json:"setup,omitempty"`
	}
	// WorktreeFailed: the thread's worktree could not be made.
	WorktreeFailed struct {
		Failure string `json:"failure"`
	}
	// MergeRequested: a merge of the thread's branch was asked for.
	MergeRequested struct {
		MergeID string `json:"mergeId"`
		Into    string `json:"into"`
		Squash  bool   `json:"squash,omitempty"`
	}
	// Merged: how a merge came out (landed or not).
	Merged struct {
		Merge
	}
	// ThreadArchived: the thread is put away.
	ThreadArchived struct {
		DeleteBranch bool `json:"deleteBranch,omitempty"`
	}
	// WorktreeRemoved: the archived thread's worktree is gone (or could
	// not be removed: Failure).
	WorktreeRemoved struct {
		Failure       string `json:"failure,omitempty"`
		BranchDeleted bool   `json:"branchDeleted,omitempty"`
	}
)

func (WorktreeReady) EventType() string   { return "worktree.ready" }
func (WorktreeFailed) EventType() string  { return "worktree.failed" }
func (MergeRequested) EventType() string  { return "thread.merge_requested" }
func (Merged) EventType() string          { return "thread.merged" }
func (ThreadArchived) EventType() string  { return "thread.archived" }
func (WorktreeRemoved) EventType() string { return "worktree.removed" }

// Effects of worktrees.
type (
	// CreateWorktree makes a thread's worktree: Branch from Base at Path,
	// in Repository's repository, then copies the Copy globs' files from
	// Repository and runs Setup in it. Made again from scratch when a host
	// stopped in the middle.
	CreateWorktree struct {
		EffectHead
		Repository string   `json:"repository"`
		Path       string   `json:"path"`
		Branch     string   `json:"branch"`
		Base       string   `json:"base"`
		Copy       []string `json:"copy,omitempty"`
		Setup      string   `json:"setup,omitempty"`
	}
	// MergeBranch merges Branch into Into in Repository's repository,
	// checking for conflicts first without touching any worktree.
	MergeBranch struct {
		EffectHead
		MergeID    string `json:"mergeId"`
		Repository string `json:"repository"`
		Branch     string `json:"branch"`
		Into       string `json:"into"`
		Squash     bool   `json:"squash,omitempty"`
		Message    string `json:"message"`
		Author     string `json:"author,omitempty"`
	}
	// RemoveWorktree removes an archived thread's worktree (and its
	// branch, when DeleteBranch).
	RemoveWorktree struct {
		EffectHead
		Repository   string `json:"repository"`
		Path         string `json:"path"`
		Branch       string `json:"branch"`
		DeleteBranch bool   `json:"deleteBranch,omitempty"`
	}
)

// worktreeHolds says whether the thread's worktree keeps runs from
// starting: it is being made.
func (t *Thread) worktreeHolds() bool {
	return t.Worktree != nil && t.Worktree.Status == WorktreeStatusCreating
}

// worktreeW is the thread's worktree, copied for writing (a scratch copy
// shares it with the projection).
func (t *Thread) worktreeW() *Worktree {
	w := *t.Worktree
	t.Worktree = &w
	return t.Worktree
}

// createWorktree decides a worktree thread's creation, from what the host
// found (f): the thread works in the new worktree, which is made next.
func createWorktree(id string, p CreateThread, f *WorktreeFact, env Env, d *Decision) error {
	if f == nil {
		return fmt.Errorf("%w: thread.create with a worktree needs the host to look at the repository first", ErrInvalid)
	}
	if f.Problem != "" {
		return fmt.Errorf("%w: --worktree: %s", ErrInvalid, f.Problem)
	}
	for _, g := range p.Worktree.Copy {
		if _, err := path.Match(g, ""); err != nil || g == "" || strings.HasPrefix(g, "/") || slices.Contains(strings.Split(g, "/"), "..") {
			return fmt.Errorf("%w: --copy %q is not a glob of paths inside the repository", ErrInvalid, g)
		}
	}
	w := &Worktree{Repository: f.Repository, Path: f.Path, Branch: f.Branch, Base: f.Base, BaseBranch: f.BaseBranch,
		Author: f.Author, Copy: p.Worktree.Copy, Setup: p.Worktree.Setup, Status: WorktreeStatusCreating, Head: f.Base}
	d.emit(ThreadCreated{Provider: p.Provider, Cwd: f.Path, Model: p.Model, ProviderCommand: p.ProviderCommand,
		ApprovalPolicy: p.ApprovalPolicy, Worktree: w, Host: env.Host, SharedCwd: p.SharedCwd})
	d.effect(CreateWorktree{EffectHead: EffectHead{ThreadID: id}, Repository: w.Repository, Path: w.Path, Branch: w.Branch,
		Base: w.Base, Copy: w.Copy, Setup: w.Setup})
	return nil
}

// SetupFailure is the code of a run failed by its worktree's setup.
const SetupFailure = "worktree_setup_failed"

// WorktreeFailure is the code of a run failed because its thread's
// worktree could not be made.
const WorktreeFailure = "worktree_failed"

func decideRecordWorktree(t *Thread, p RecordWorktree, env Env, d *Decision) error {
	if t.Worktree == nil {
		return fmt.Errorf("%w: thread %s has no worktree", ErrInvalid, t.ID)
	}
	if t.Worktree.Status != WorktreeStatusCreating {
		return nil // recorded before
	}
	if p.Failure != "" {
		d.emit(WorktreeFailed{Failure: p.Failure})
		for _, r := range t.Runs {
			if r.Status == RunStatusQueued {
				d.emit(RunEnded{RunID: r.ID, Status: RunStatusFailed, StopReason: "worktree",
					Failure: &Failure{Code: WorktreeFailure, Message: "the thread's worktree could not be made: " + p.Failure}})
			}
		}
		return nil
	}
	d.emit(WorktreeReady{Copied: p.Copied, Setup: p.Setup})
	if p.Setup.Failed() {
		// The first run fails with the setup's output, not silently; the
		// runs after it go on in the worktree as it is.
		if r := t.oldestQueued(); r != nil {
			d.emit(RunEnded{RunID: r.ID, Status: RunStatusFailed, StopReason: "setup",
				Failure: &Failure{Code: SetupFailure, Message: SetupMessage(p.Setup)}})
		}
	}
	startNextQueued(t, env, d)
	return nil
}

// SetupMessage says how a setup failed, with its output.
func SetupMessage(s *SetupResult) string {
	msg := fmt.Sprintf("the worktree's setup %q exited %d", s.Command, s.ExitCode)
	if s.ExitCode < 0 {
		msg = fmt.Sprintf("the worktree's setup %q could not run", s.Command)
	}
	if out := strings.TrimSpace(s.Output); out != "" {
		msg += ":\n" + out
	}
	return msg
}

// worktreeRefusal says why a thread cannot take a message, or "".
func (t *Thread) worktreeRefusal() string {
	switch {
	case t.Archived:
		return "thread " + t.ID + " is archived"
	case t.Worktree != nil && t.Worktree.Status == WorktreeStatusFailed:
		return "the thread's worktree could not be made: " + t.Worktree.Failure
	}
	return ""
}

// branchCommit is the commit a completed run's capture makes on the
// thread's branch, or nil (no worktree, or the run did not complete).
func (t *Thread) branchCommit(r *Run) *BranchCommit {
	w := t.Worktree
	if w == nil || w.Status != WorktreeStatusReady || r == nil || r.Ending == nil || r.Ending.Status != RunStatusCompleted {
		return nil
	}
	return &BranchCommit{Branch: w.Branch, Parent: w.Head, Subject: Subject(r.Input), Author: w.Author,
		Trailers: []string{"Baton-Thread: " + t.ID, "Baton-Run: " + r.ID, "Baton-Provider: " + cmp.Or(r.Provider, t.Provider)}}
}

// SubjectMax bounds a run commit's subject line.
const SubjectMax = 72

// Subject is the first line of a message, cut to SubjectMax bytes at a
// rune boundary.
func Subject(text string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(text), "\n")
	line = strings.TrimSpace(line)
	if len(line) <= SubjectMax {
		return line
	}
	cut := SubjectMax - 3
	for cut > 0 && !utf8.RuneStart(line[cut]) {
		cut--
	}
	return line[:cut] + "..."
}

// CommitMessage is a run commit's message: the subject, the files the run
// changed, and the trailers.
func CommitMessage(c BranchCommit, files []FileChange) string {
	var b strings.Builder
	b.WriteString(cmp.Or(c.Subject, "(empty message)"))
	b.WriteString("\n\n")
	if len(files) > 0 {
		for _, f := range files {
			fmt.Fprintf(&b, "%s %s\n", kindLetter(f.Kind), f.Path)
		}
		b.WriteString("\n")
	}
	for _, tr := range c.Trailers {
		b.WriteString(tr)
		b.WriteString("\n")
	}
	return b.String()
}

func kindLetter(kind string) string {
	switch kind {
	case "added":
		return "A"
	case "deleted":
		return "D"
	case "type_changed":
		return "T"
	}
	return "M"
}

// branchMove is the move a rollback to checkpoint c makes of the
// thread's branch (nil: no worktree, or it is there already).
func (t *Thread) branchMove(c *Checkpoint, rollbackID string) *BranchMove {
	w := t.Worktree
	if w == nil || w.Status != WorktreeStatusReady {
		return nil
	}
	to := cmp.Or(c.BranchHead, w.Base)
	if to == w.Head {
		return nil
	}
	return &BranchMove{Branch: w.Branch, From: w.Head, To: to,
		SaveRef: RefPrefix + refComponent(t.ID) + "/pre-rollback/" + refComponent(rollbackID) + "-branch"}
}

func decideMerge(t *Thread, p MergeThread, env Env, d *Decision) error {
	w := t.Worktree
	switch {
	case w == nil:
		return fmt.Errorf("%w: thread %s has no worktree of its own; only a thread made with --worktree has a branch to merge", ErrInvalid, t.ID)
	case w.Status == WorktreeStatusCreating:
		return fmt.Errorf("%w: thread %s's worktree is still being made", ErrConflict, t.ID)
	case w.Status == WorktreeStatusFailed:
		return fmt.Errorf("%w: thread %s's worktree could not be made: %s", ErrConflict, t.ID, w.Failure)
	case w.BranchDeleted:
		return fmt.Errorf("%w: thread %s's branch %s was deleted when it was archived", ErrConflict, t.ID, w.Branch)
	}
	into := cmp.Or(p.Into, w.BaseBranch)
	if into == "" {
		return fmt.Errorf("%w: thread %s's base %.12s was not a branch; give the branch to merge into (--into)", ErrInvalid, t.ID, w.Base)
	}
	if into == w.Branch {
		return fmt.Errorf("%w: cannot merge branch %s into itself", ErrInvalid, into)
	}
	for _, m := range t.Merges {
		if m.Status == MergePending {
			return fmt.Errorf("%w: merge %s into %s is in progress", ErrConflict, m.ID, m.Into)
		}
	}
	if p.MergeID != "" {
		if err := validRef("mergeId", p.MergeID); err != nil {
			return err
		}
		for _, m := range t.Merges {
			if m.ID == p.MergeID {
				return fmt.Errorf("%w: merge %q %w", ErrConflict, p.MergeID, ErrExists)
			}
		}
	}
	id := cmp.Or(p.MergeID, env.NewID("mrg"))
	d.emit(MergeRequested{MergeID: id, Into: into, Squash: p.Squash})
	msg := fmt.Sprintf("Merge branch '%s' into %s", w.Branch, into)
	if p.Squash {
		msg = fmt.Sprintf("%s (squashed)", Subject(t.firstInput()))
	}
	msg += "\n\nBaton-Thread: " + t.ID + "\n"
	d.effect(MergeBranch{EffectHead: EffectHead{ThreadID: t.ID}, MergeID: id, Repository: w.Repository, Branch: w.Branch,
		Into: into, Squash: p.Squash, Message: msg, Author: w.Author})
	return nil
}

// validRef refuses an id that is empty of meaning in an event: white space
// or control characters.
func validRef(what, id string) error {
	if strings.TrimSpace(id) != id || strings.ContainsFunc(id, func(r rune) bool { return r < ' ' }) {
		return fmt.Errorf("%w: %s %q has white space or control characters", ErrInvalid, what, id)
	}
	return nil
}

// firstInput is the thread's first run's message.
func (t *Thread) firstInput() string {
	for _, r := range t.Runs {
		return r.Input
	}
	return t.ID
}

func decideRecordMerge(t *Thread, p RecordMerge, d *Decision) error {
	m := t.merge(p.ID)
	if m == nil {
		return fmt.Errorf("%w: merge %q", ErrNotFound, p.ID)
	}
	if m.Status != MergePending {
		return nil // recorded before
	}
	if !slices.Contains(MergeStatuses, p.Status) {
		return fmt.Errorf("%w: a merge's outcome is one of %s, not %q", ErrInvalid, OneOf(MergeStatuses...), p.Status)
	}
	out := p.Merge
	out.Into, out.Squash = m.Into, m.Squash
	d.emit(Merged{Merge: out})
	return nil
}

func (t *Thread) merge(id string) *Merge {
	for i := range t.Merges {
		if t.Merges[i].ID == id {
			return &t.Merges[i]
		}
	}
	return nil
}

func decideArchive(t *Thread, p ArchiveThread, d *Decision) error {
	if t.Archived {
		return nil // archived before: nothing more to do
	}
	if r := t.ActiveRun(); r != nil {
		return fmt.Errorf("%w: run %d is %s; interrupt it (or let it end) before archiving the thread", ErrConflict, r.Ordinal, r.Status)
	}
	if t.worktreeHolds() {
		return fmt.Errorf("%w: thread %s's worktree is still being made", ErrConflict, t.ID)
	}
	for _, m := range t.Merges {
		if m.Status == MergePending {
			return fmt.Errorf("%w: merge %s into %s is in progress", ErrConflict, m.ID, m.Into)
		}
	}
	for _, r := range t.Runs {
		if r.Status == RunStatusQueued {
			cancelQueued(r.ID, "the thread was archived", d)
		}
	}
	d.emit(ThreadArchived{DeleteBranch: p.DeleteBranch})
	if w := t.Worktree; w != nil && (w.Status == WorktreeStatusReady || w.Status == WorktreeStatusFailed) {
		d.effect(RemoveWorktree{EffectHead: EffectHead{ThreadID: t.ID}, Repository: w.Repository, Path: w.Path,
			Branch: w.Branch, DeleteBranch: p.DeleteBranch})
	}
	return nil
}

func decideWorktreeRemoved(t *Thread, p RecordWorktreeRemoved, d *Decision) error {
	if t.Worktree == nil || t.Worktree.Status == WorktreeStatusRemoved {
		return nil
	}
	d.emit(WorktreeRemoved(p))
	return nil
}
