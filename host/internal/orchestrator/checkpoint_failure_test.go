package orchestrator_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-run/baton/host/internal/domain"
	"github.com/baton-run/baton/host/internal/scenario"
)

// Git work that fails: the outcome is recorded, saying why, and the thread
// goes on as far as it safely can. The failures are git's own, brought
// about in the workspace's repository: a file where git must make a
// directory of refs, a ref's lock file left behind.

// gitReason is a failure's text up to git's own words (which vary with
// git's version), the workspace's path written <ws>, and whether git's
// words name ref.
func (e *env) gitReason(text, ref string) string {
	head, words, _ := strings.Cut(strings.ReplaceAll(text, e.ws, "<ws>"), ": fatal: ")
	if !strings.Contains(words, ref) {
		return head + " (git's words do not name " + ref + ": " + words + ")"
	}
	return head
}

// blockRefs puts a file where git must make the directory of refs under
// name (relative to .git/refs): no ref below it can be written.
func (e *env) blockRefs(name string) string {
	e.t.Helper()
	p := filepath.Join(e.ws, ".git", "refs", filepath.FromSlash(name))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		e.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte("in the way\n"), 0o644); err != nil {
		e.t.Fatal(err)
	}
	return p
}

// A capture git cannot make is an error checkpoint, with git's reason;
// the run still ends (completed, as the provider said) and its thread
// takes the next message.
func TestCaptureFailureIsAnErrorCheckpoint(t *testing.T) {
	e := newEnv(t)
	e.gitWorkspace()
	e.blockRefs("baton")
	threadID := e.createThread("acp", "acp/simple.ndjson")
	e.dispatch(domain.Command{ID: "send", ThreadID: threadID, Payload: domain.DispatchMessage{Text: messages(t, "acp/simple.messages")[0]}})
	th := e.waitFor(threadID, "the run to end", allRunsEnded(1))

	type checkpoint struct {
		Run    int
		Status domain.CheckpointStatus
		Commit string
		Reason string
	}
	var got []checkpoint
	for _, c := range th.Checkpoints {
		got = append(got, checkpoint{c.RunOrdinal, c.Status, c.Commit, e.gitReason(c.Reason, c.Ref)})
	}
	wantReason := "checkpoint: capture <ws>: git update-ref: exit status 128"
	want := []checkpoint{{0, domain.CheckpointError, "", wantReason}, {1, domain.CheckpointError, "", wantReason}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("checkpoints (-want +got):\n%s", diff)
	}
	if r := th.Runs[0]; r.Status != domain.RunStatusCompleted || r.CheckpointID != th.Checkpoints[1].ID {
		t.Errorf("run: %s with checkpoint %s; want completed with the error checkpoint %s", r.Status, r.CheckpointID, th.Checkpoints[1].ID)
	}
	if _, _, err := e.host.Diff(t.Context(), threadID, 1, 0); refused(err).Sentinel != "conflict" {
		t.Errorf("diff of a run whose checkpoint failed: %v", err)
	}
}

// A rollback whose files cannot be restored fails at that stage, with
// git's reason, leaving the files as they were; no run starts until a
// rollback succeeds. The next one does, and though the refs of the stale
// checkpoints cannot be deleted (a lock left behind), the rollback is
// complete and says so: a leftover ref is harmless.
func TestRollbackFailures(t *testing.T) {
	e := newEnv(t)
	e.gitWorkspace()
	threadID := e.createThreadWith("acp", "acp/thread_rollback.ndjson", domain.ApproveAccept)
	sc, err := scenario.Load(filepath.Join(root, "testdata", "acp/thread_rollback.steps.json"))
	if err != nil {
		t.Fatal(err)
	}
	at := slices.IndexFunc(sc.Steps, func(st scenario.Step) bool { return st.Rollback != nil })
	if at < 0 {
		t.Fatal("the scenario has no rollback")
	}
	before, after := sc, sc
	before.Steps, after.Steps = sc.Steps[:at], sc.Steps[at+1:]
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	if err := scenario.Run(ctx, scenario.Host(e.host), threadID, before, scenario.Options{}); err != nil {
		t.Fatal(err)
	}
	th := mustThread(t, e, threadID)
	roots := rootCheckpoints(th)
	files := e.files()

	// The files kept before a rollback go under pre-rollback/: blocked.
	blocker := e.blockRefs(strings.TrimPrefix(domain.RefPrefix, "refs/") + threadID + "/pre-rollback")
	rollback := func(id string) domain.Rollback {
		e.dispatch(domain.Command{ID: id, ThreadID: threadID, Payload: domain.RollbackToCheckpoint{CheckpointID: roots[1].ID}})
		th := e.waitFor(threadID, "the rollback to end", func(th domain.Thread) bool {
			n := len(th.Rollbacks)
			return n > 0 && th.Rollbacks[n-1].Status != domain.RollbackRestoringFiles && th.Rollbacks[n-1].Status != domain.RollbackReconciling
		})
		return th.Rollbacks[len(th.Rollbacks)-1]
	}
	failed := rollback("rollback-1")
	type outcome struct {
		Status  domain.RollbackStatus
		Stage   string
		Code    string
		Message string
	}
	got := outcome{failed.Status, failed.FailedStage, "", ""}
	if failed.Failure != nil {
		got.Code, got.Message = failed.Failure.Code, failed.Failure.Message
	}
	got.Message = e.gitReason(got.Message, domain.RefPrefix+threadID+"/pre-rollback/"+failed.ID)
	wantMessage := "checkpoint: restore <ws>: git update-ref: exit status 128"
	if diff := cmp.Diff(outcome{domain.RollbackStatusFailed, "files", "restore_failed", wantMessage}, got); diff != "" {
		t.Errorf("the rollback whose files could not be kept (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(files, e.files()); diff != "" {
		t.Errorf("files after the failed rollback (-before +after):\n%s", diff)
	}
	_, err = e.host.Dispatch(t.Context(), domain.Command{ID: "refused", ThreadID: threadID, Payload: domain.DispatchMessage{Text: "hi"}})
	if r := refused(err); r.Sentinel != "conflict" || !strings.Contains(r.Text, "failed while restoring files") {
		t.Errorf("a message after the failed rollback: %+v", r)
	}

	// Unblocked, with a lock left on a stale checkpoint's ref.
	if err := os.Remove(blocker); err != nil {
		t.Fatal(err)
	}
	lock := filepath.Join(e.ws, ".git", filepath.FromSlash(roots[2].Ref)+".lock")
	if err := os.WriteFile(lock, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	done := rollback("rollback-2")
	type completed struct {
		Status         domain.RollbackStatus
		Reconciliation domain.Reconciliation
		Note           string
	}
	if diff := cmp.Diff(completed{domain.RollbackDone, domain.ReconcileFreshThread,
		"the acp provider cannot drop turns; the next run starts a fresh conversation with a summary of the earlier one; " +
			"the refs of stale checkpoints could not be deleted: checkpoint: delete refs in <ws>: git update-ref: exit status 128"},
		completed{done.Status, done.Reconciliation, e.gitReason(done.Note, roots[2].Ref)}); diff != "" {
		t.Errorf("the rollback whose stale refs stay (-want +got):\n%s", diff)
	}
	refs := strings.Fields(e.git("for-each-ref", "--format=%(refname)", "refs/baton/"))
	for _, c := range roots[2:4] {
		if !slices.Contains(refs, c.Ref) {
			t.Errorf("stale ref %s was deleted though the deletion failed; refs %q", c.Ref, refs)
		}
	}
	// The thread goes on from run 1, as the provider's transcript has it.
	if err := scenario.Run(ctx, scenario.Host(e.host), threadID, after, scenario.Options{CommandPrefix: "after-"}); err != nil {
		t.Fatal(err)
	}
	th = mustThread(t, e, threadID)
	if got := assistantText(th, th.Runs[3].ID); got != "a.txt says one." {
		t.Errorf("run 4 said %q", got)
	}
	e.checkSessionsClosed(threadID)
}

// A native rollback the provider refuses (codex answers thread/revert with
// an error; authored from the recorded thread_rollback) still completes:
// the files go back, and the conversation is reconciled as for a provider
// that cannot drop turns, the refusal recorded in the rollback's note. The
// old conversation is left (its session closed), and run 4 starts a fresh
// one carrying a summary of run 1.
func TestNativeRollbackRefused(t *testing.T) {
	e := newEnv(t)
	e.gitWorkspace()
	threadID, _, _ := e.newThread("codex", "codex/thread_rollback_refused.ndjson", domain.ApproveAccept)
	th := e.play(threadID, "codex/thread_rollback.steps.json")
	_, rb := e.checkRolledBackToRun1(th, domain.ReconcileFreshThread)
	type outcome struct {
		Status         domain.RollbackStatus
		Reconciliation domain.Reconciliation
		TurnsDropped   int
		Note           string
		Threads        []string // each provider thread's ref, and whether it was left
	}
	got := outcome{rb.Status, rb.Reconciliation, rb.TurnsDropped, rb.Note, nil}
	for _, pt := range th.ProviderThreads {
		got.Threads = append(got.Threads, fmt.Sprintf("%s detached=%t", pt.ProviderRef, pt.Detached))
	}
	want := outcome{domain.RollbackDone, domain.ReconcileFreshThread, 0,
		"the provider's rollback failed (codex rollback of 2 turns: rollback thread 01a22c6e-89c9-7732-b037-fd0edaa01936 " +
			"to before turn 01a22c6e-8ac2-7c62-a96a-61c7fc6e4d82: thread/revert: jsonrpc2: code -32603 message: " +
			"failed to rewrite the rollout of thread 01a22c6e-89c9-7732-b037-fd0edaa01936); " +
			"the next run starts a fresh conversation with a summary of the earlier one",
		[]string{"01a22c6e-89c9-7732-b037-fd0edaa01936 detached=true", "01a22c6e-8d10-7b55-9c21-6e3fa0b4d217 detached=false"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the rollback codex refused (-want +got):\n%s", diff)
	}
	th = e.checkSessionsClosed(threadID)
	if n := len(th.ProviderSessions); n != 2 {
		t.Errorf("%d provider sessions, want 2 (the one the rollback closed, and run 4's)", n)
	}
	if n := e.countFrames(th, `"method":"thread/revert"`); n != 1 {
		t.Errorf("thread/revert sent %d times, want 1", n)
	}
}
