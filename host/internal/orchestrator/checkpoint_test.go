package orchestrator_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/baton-run/baton/host/internal/domain"
)

// readme is what every recorded workspace starts with (testdata/record.sh).
const readme = "# Replay workspace\n\nA throwaway repository for recording transcripts.\n"

// gitWorkspace makes the test's workspace a git repository with one commit,
// as the recordings had, plus an ignored file the agent never sees.
func (e *env) gitWorkspace() {
	e.t.Helper()
	e.git("init", "-q")
	e.write("README.md", readme)
	e.write(".gitignore", "*.log\n")
	e.write("build.log", "ignored\n")
	e.git("add", "README.md", ".gitignore")
	e.git("-c", "user.name=t", "-c", "user.email=t@example.invalid", "-c", "commit.gpgsign=false", "commit", "-q", "-m", "init")
}

func (e *env) git(args ...string) string {
	e.t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = e.ws
	out, err := cmd.CombinedOutput()
	if err != nil {
		e.t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func (e *env) write(name, content string) {
	e.t.Helper()
	if err := os.WriteFile(filepath.Join(e.ws, name), []byte(content), 0o644); err != nil {
		e.t.Fatal(err)
	}
}

// files is the workspace's files and contents, but .git.
func (e *env) files() map[string]string {
	e.t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(e.ws, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == ".git" {
				return filepath.SkipDir
			}
			return nil
		}
		b, err := os.ReadFile(p)
		rel, _ := filepath.Rel(e.ws, p)
		out[rel] = string(b)
		return err
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return out
}

func rootCheckpoints(th domain.Thread) []domain.Checkpoint {
	var out []domain.Checkpoint
	for _, c := range th.Checkpoints {
		for _, sc := range th.CheckpointScopes {
			if sc.ID == c.ScopeID && sc.Kind == domain.ScopeRootRun {
				out = append(out, c)
			}
		}
	}
	return out
}

func fileList(c domain.Checkpoint) []string {
	var out []string
	for _, f := range c.Files {
		out = append(out, f.Kind+" "+f.Path)
	}
	return out
}

// Invariants 5 and 6: three runs change files; a rollback to run 1 puts
// the files back byte for byte (files made later are removed, ignored ones
// kept), the provider's conversation back to run 1 (Codex drops its turns
// natively, Claude Code resumes a fork cut before run 2, ACP starts a
// fresh conversation with a handoff), runs 2 and 3
// are rolled back, their checkpoints stale and their refs gone, and the
// fourth run is accepted by the provider's transcript.
func TestThreadRollback(t *testing.T) {
	for _, tc := range []struct {
		provider       string
		reconciliation domain.Reconciliation
	}{
		{"codex", domain.ReconcileNative},
		{"claude", domain.ReconcileNative},
		{"acp", domain.ReconcileFreshThread},
	} {
		t.Run(tc.provider, func(t *testing.T) {
			e := newEnv(t)
			e.gitWorkspace()
			threadID, _, _ := e.newThread(tc.provider, tc.provider+"/thread_rollback.ndjson", domain.ApproveAccept)
			th := e.play(threadID, tc.provider+"/thread_rollback.steps.json")

			roots, rb := e.checkRolledBackToRun1(th, tc.reconciliation)
			if roots[4].BaseID != roots[1].ID {
				t.Errorf("run 4's checkpoint is against %s, want run 1's %s", roots[4].BaseID, roots[1].ID)
			}
			// The files as they were before the rollback are kept.
			if got := e.git("show", rb.SavedCommit+":c.txt"); got != "sea\n" {
				t.Errorf("c.txt in the files kept before the rollback = %q", got)
			}
			// Stale checkpoints, and only their refs gone.
			for _, c := range th.Checkpoints {
				wantStale := c.RunOrdinal == 2 || c.RunOrdinal == 3
				if (c.Status == domain.CheckpointStale) != wantStale {
					t.Errorf("checkpoint of run %d is %s", c.RunOrdinal, c.Status)
				}
			}
			refs := strings.Fields(e.git("for-each-ref", "--format=%(refname)", "refs/baton/"))
			wantRefs := []string{roots[0].Ref, roots[1].Ref, roots[4].Ref, rb.SavedRef}
			slices.Sort(refs)
			slices.Sort(wantRefs)
			if !slices.Equal(refs, wantRefs) {
				t.Errorf("checkpoint refs = %q, want %q", refs, wantRefs)
			}
			// The user's branch and index are untouched.
			if log := e.git("log", "--oneline"); strings.Count(log, "\n") != 1 {
				t.Errorf("the user's branch moved:\n%s", log)
			}
			if status := e.git("status", "--porcelain"); status != "?? a.txt\n" {
				t.Errorf("git status = %q", status)
			}
			// A run's diff, and a stale one's refusal.
			d, c, err := e.host.Diff(t.Context(), threadID, 1, 0)
			if err != nil || !strings.Contains(d.Text, "+one") || c.RunOrdinal != 1 || d.Truncated {
				t.Errorf("diff of run 1: %+v %v", d, err)
			}
			if _, _, err := e.host.Diff(t.Context(), threadID, 2, 0); !errors.Is(err, domain.ErrConflict) {
				t.Errorf("diff of a rolled-back run: %v", err)
			}
			if d, _, err := e.host.Diff(t.Context(), threadID, 1, 10); err != nil || !d.Truncated || !strings.Contains(d.Text, "cut at 10") {
				t.Errorf("a cut diff: %+v %v", d, err)
			}
			// Every session ended cleanly: the peer saw exactly what the
			// provider saw, the fresh conversation's prompt included.
			e.checkSessionsClosed(threadID)
		})
	}
}

// A child (subagent) turn's end captures a checkpoint in a scope nested
// under its run's, which does not advance the app run count; the run's
// own checkpoint still has every file the run changed.
func TestSubagentCheckpoint(t *testing.T) {
	e := newEnv(t)
	e.gitWorkspace()
	threadID, _, _ := e.newThread("codex", "codex/subagent_checkpoint.ndjson", domain.ApproveAccept)
	th := e.play(threadID, "codex/subagent_checkpoint.steps.json")
	if len(th.Runs) != 1 || th.Runs[0].Status != domain.RunStatusCompleted {
		t.Fatalf("runs: %+v", th.Runs)
	}
	sub, subCP, runCP := e.subagentCheckpoints(th)
	counted := 0
	for _, sc := range th.CheckpointScopes {
		if sc.AdvancesRunCount && sc.RunID != "" {
			counted++
		}
	}
	if counted != 1 {
		t.Fatalf("scopes: %+v; want only the run's to advance the run count", th.CheckpointScopes)
	}
	if sub.RunID != th.Runs[0].ID || sub.NodeID == "" {
		t.Fatalf("subagent scope: %+v", sub)
	}
	var node *domain.Node
	for i, n := range th.Runs[0].Nodes {
		if n.ID == sub.NodeID {
			node = &th.Runs[0].Nodes[i]
		}
	}
	if node == nil || node.Kind != domain.NodeSubagent {
		t.Fatalf("the subagent scope's node: %+v", node)
	}
	if got := fileList(subCP); !slices.Contains(got, "added notes.txt") {
		t.Errorf("subagent checkpoint: %+v", subCP)
	}
	if got := fileList(runCP); !slices.Equal(got, []string{"added notes.txt", "added summary.txt"}) {
		t.Errorf("run checkpoint files: %q", got)
	}
	if _, err := e.host.Dispatch(t.Context(), domain.Command{ID: "rb", ThreadID: threadID,
		Payload: domain.RollbackToCheckpoint{CheckpointID: subCP.ID}}); !errors.Is(err, domain.ErrUnsupported) {
		t.Errorf("rollback to a subagent checkpoint: %v", err)
	}
}

// A cwd outside git: checkpoints are missing, with the reason, and runs go
// on.
func TestCheckpointsMissingOutsideGit(t *testing.T) {
	e := newEnv(t)
	threadID := e.createThread("acp", "acp/simple.ndjson")
	e.dispatch(domain.Command{ID: "send", ThreadID: threadID, Payload: domain.DispatchMessage{Text: messages(t, "acp/simple.messages")[0]}})
	th := e.waitFor(threadID, "the run to end", allRunsEnded(1))
	if th.Runs[0].Status != domain.RunStatusCompleted {
		t.Fatalf("run: %+v", th.Runs[0])
	}
	for _, c := range th.Checkpoints {
		if c.Status != domain.CheckpointMissing || !strings.Contains(c.Reason, "git") {
			t.Errorf("checkpoint: %+v", c)
		}
	}
	if _, err := e.host.Dispatch(t.Context(), domain.Command{ID: "rb", ThreadID: threadID,
		Payload: domain.RollbackToCheckpoint{CheckpointID: th.Checkpoints[0].ID}}); !errors.Is(err, domain.ErrConflict) {
		t.Errorf("rollback to a missing checkpoint: %v", err)
	}
}

// A checkpoint capture cut short by the host closing stays in the outbox
// and the next host performs it: nothing the log promised is lost. Here
// another process holds the worktree's checkpoint lock, so the baseline's
// capture cannot finish before the host closes.
func TestCaptureLeftInTheOutboxIsPerformedByTheNextHost(t *testing.T) {
	e := newEnv(t)
	e.gitWorkspace()
	lockDir := filepath.Join(e.ws, ".git", "baton")
	if err := os.MkdirAll(lockDir, 0o755); err != nil {
		t.Fatal(err)
	}
	lock, err := os.OpenFile(filepath.Join(lockDir, "checkpoint.lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	threadID := e.createThread("acp", "acp/simple.ndjson")
	e.dispatch(domain.Command{ID: "send", ThreadID: threadID, Payload: domain.DispatchMessage{Text: messages(t, "acp/simple.messages")[0]}})
	e.waitFor(threadID, "the baseline to be asked for", func(th domain.Thread) bool { return len(th.Checkpoints) == 1 })
	e.restart()  // the capture waits on the lock; closing cuts it short
	lock.Close() // the other process lets go
	th := e.waitFor(threadID, "every checkpoint to be recorded", func(th domain.Thread) bool {
		for _, c := range th.Checkpoints {
			if c.Status == domain.CheckpointCapturing {
				return false
			}
		}
		return len(th.Checkpoints) == 2
	})
	for _, c := range th.Checkpoints {
		if c.Status != domain.CheckpointReady || c.Commit == "" {
			t.Errorf("checkpoint of run %d: %+v", c.RunOrdinal, c)
		}
	}
	// The turn that was waiting behind the capture was for a host that is
	// gone: it was cancelled, not sent, and the run was ended with the
	// reason by the host that closed.
	if r := th.Runs[0]; r.Status != domain.RunStatusInterrupted || r.Failure.Code != "host_shut_down" || r.CheckpointID != th.Checkpoints[1].ID {
		t.Errorf("run: %+v", r)
	}
	if types := e.types(threadID, 0); indexOf(types, "effect.cancelled") < 0 {
		t.Errorf("the start of the turn was not cancelled: %v", types)
	}
	if len(th.ProviderSessions) != 0 {
		t.Errorf("a provider session was opened: %+v", th.ProviderSessions)
	}
}
