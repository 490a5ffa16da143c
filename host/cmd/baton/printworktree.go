package main

import (
	"cmp"
	"fmt"
	"io"
	"strings"

	batonv1 "github.com/baton-run/baton/host/api/baton/v1"
	"github.com/baton-run/baton/host/internal/domain"
)

// What the printer says of a thread's own worktree and branch: made,
// merged, archived and removed.

// worktreeEvent: the worktree made (or not), merges, the archive and the
// worktree's removal.
func (p *printer) worktreeEvent(ev *batonv1.Event) bool {
	switch e := ev.GetPayload().(type) {
	case *batonv1.Event_WorktreeReady:
		p.line("⎇ worktree ready%s", readyNote(e.WorktreeReady))
	case *batonv1.Event_WorktreeFailed:
		p.line("✖ worktree could not be made: %s", oneLine(e.WorktreeFailed.GetFailure(), 160))
	case *batonv1.Event_ThreadMergeRequested:
		m := e.ThreadMergeRequested
		how := ""
		if m.GetSquash() {
			how = " (squashed)"
		}
		p.line("⇥ merge %s into %s%s requested", m.GetMergeId(), m.GetInto(), how)
	case *batonv1.Event_ThreadMerged:
		for _, l := range mergeLines(e.ThreadMerged, "the thread's branch") {
			p.line("%s", l)
		}
	case *batonv1.Event_ThreadArchived:
		p.line("■ thread archived%s", map[bool]string{true: "; its branch is to be deleted"}[e.ThreadArchived.GetDeleteBranch()])
	case *batonv1.Event_WorktreeRemoved:
		r := e.WorktreeRemoved
		switch {
		case r.GetFailure() != "":
			p.line("✖ worktree not removed: %s", oneLine(r.GetFailure(), 160))
		case r.GetBranchDeleted():
			p.line("⎇ worktree removed, and its branch")
		default:
			p.line("⎇ worktree removed; its branch is kept")
		}
	default:
		return false
	}
	return true
}

// readyNote is what a made worktree got: the files copied in and the
// setup's exit.
func readyNote(e *batonv1.WorktreeReady) string {
	var notes []string
	if n := len(e.GetCopied()); n > 0 {
		notes = append(notes, plural(n, "file")+" copied in")
	}
	if s := e.GetSetup(); s != nil {
		notes = append(notes, setupNote(s))
	}
	if len(notes) == 0 {
		return ""
	}
	return ": " + strings.Join(notes, "; ")
}

// setupNote is how a worktree's setup went: "setup `make deps` exited 0".
func setupNote(s *batonv1.SetupResult) string {
	if s.GetExitCode() < 0 {
		return fmt.Sprintf("setup `%s` could not run", oneLine(s.GetCommand(), 80))
	}
	return fmt.Sprintf("setup `%s` exited %d", oneLine(s.GetCommand(), 80), s.GetExitCode())
}

// baseName is where a worktree's branch started: its base branch and
// commit, or the commit alone.
func baseName(w *batonv1.Worktree) string {
	if w.GetBaseBranch() != "" {
		return fmt.Sprintf("%s (%s)", w.GetBaseBranch(), short(w.GetBase()))
	}
	return short(w.GetBase())
}

// worktreeLine is where a thread's work is: its branch and head, and its
// worktree (or what became of it).
func worktreeLine(w *batonv1.Worktree) string {
	s := fmt.Sprintf("branch %s at %s (from %s)", w.GetBranch(), short(w.GetHead()), baseName(w))
	switch domain.WorktreeStatus(w.GetStatus()) {
	case domain.WorktreeStatusRemoved:
		s += "; its worktree was removed"
		if w.GetBranchDeleted() {
			s = fmt.Sprintf("branch %s deleted; its worktree was removed", w.GetBranch())
		}
	case domain.WorktreeStatusFailed:
		s += "; its worktree could not be made: " + oneLine(w.GetFailure(), 120)
	default:
		s += " in " + w.GetPath()
	}
	return s
}

// mergeLines is how a merge of branch came out, in words: what landed
// where, or why nothing did (every conflicted path, every local change).
func mergeLines(m *batonv1.Merge, branch string) []string {
	into := m.GetInto()
	updated := ""
	if m.GetWorktree() != "" {
		updated = "; its worktree " + m.GetWorktree() + " is updated"
	}
	switch domain.MergeStatus(m.GetStatus()) {
	case domain.MergeMerged:
		how := "merged"
		if m.GetSquash() {
			how = "squashed"
		}
		return []string{fmt.Sprintf("✔ %s %s into %s: %s, %s now at %s%s", how, branch, into, plural(len(m.GetCommits()), "commit"),
			into, short(m.GetCommit()), updated)}
	case domain.MergeFastForward:
		return []string{fmt.Sprintf("✔ fast-forwarded %s to %s: %s from %s%s", into, short(m.GetCommit()),
			plural(len(m.GetCommits()), "commit"), branch, updated)}
	case domain.MergeUpToDate:
		return []string{fmt.Sprintf("✔ %s is up to date: it has every commit of %s already", into, branch)}
	case domain.MergeConflict:
		out := []string{fmt.Sprintf("✖ conflict: %s and %s both changed %s; nothing was changed",
			branch, into, plural(len(m.GetConflicts()), "path"))}
		for _, p := range m.GetConflicts() {
			out = append(out, "    "+p)
		}
		return out
	case domain.MergeDirty:
		out := []string{fmt.Sprintf("✖ %s is checked out in %s, which has local changes; commit or stash them, then merge again (nothing was changed):",
			into, cmp.Or(m.GetWorktree(), "a worktree"))}
		for _, p := range m.GetDirty() {
			out = append(out, "    "+p)
		}
		return out
	case domain.MergeFailed:
		return []string{fmt.Sprintf("✖ merge into %s failed: %s", into, oneLine(m.GetError(), 200))}
	}
	return []string{fmt.Sprintf("⇥ merge %s into %s: %s", m.GetId(), into, m.GetStatus())}
}

// short is a commit id as people read it: its first 12 digits.
func short(commit string) string {
	if len(commit) > 12 {
		return commit[:12]
	}
	return commit
}

// showWorktree is what baton show says of a thread's worktree and branch
// (nothing when it has none): where its work is, whether it is archived,
// and how each merge came out.
func showWorktree(out io.Writer, t *batonv1.Thread) {
	w := t.GetWorktree()
	if w == nil {
		if t.GetArchived() {
			fmt.Fprintln(out, "  archived")
		}
		return
	}
	fmt.Fprintf(out, "  %s\n", worktreeLine(w))
	if t.GetArchived() {
		fmt.Fprintln(out, "  archived")
	}
	for _, m := range t.GetMerges() {
		for _, l := range mergeLines(m, "branch "+w.GetBranch()) {
			fmt.Fprintf(out, "  %s\n", l)
		}
	}
}
