// Package worktree is the git side of threads that run on worktrees of
// their own: it makes a thread's worktree on a new branch (Create), turns
// each completed run into a commit on that branch (CommitRun), moves the
// branch back on a rollback (MoveBranch), merges the branch into another
// (Merge), and removes the worktree (Remove).
//
// Everything is git plumbing run through the git binary (package gitexec),
// and every function that writes is safe to call again after a crash
// part way through: Create recognizes and clears what a previous attempt
// left, and CommitRun, MoveBranch and Merge update refs only by
// compare-and-swap from the value the caller expects, recognizing the value
// an earlier call of their own left.
//
// No function here touches the user's own worktree (its files, index or
// HEAD), except Merge into a branch checked out there, which updates it
// as git merge would and only when it has no local changes.
package worktree
