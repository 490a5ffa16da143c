package orchestrator_test

import (
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-run/baton/host/internal/domain"
	"github.com/baton-run/baton/host/internal/orchestrator"
)

// Every call into a plugin has a deadline on the host's clock, and no
// lock is held across one: a plugin that never answers a call (the crash
// plugin's hang modes, one for each call the host makes; installed as
// mute, it never answers Describe) holds up nothing but what it was asked
// to do. While it hangs, a thread on another plugin runs to its end with
// the host's clock standing still; when the deadline passes, the plugin
// is killed and what it was doing ends saying which call it did not
// answer and how long the host waited. (StartTurn, InterruptTurn and the
// CloseSession of a host that closes: pluginfail_test.go.)

// hangCase is one call a plugin hangs in: how a thread on it gets there,
// the deadline that ends it, and what its thread then shows.
type hangCase struct {
	call     string
	provider string
	argv     []string
	// provoke makes the host call into the plugin (after a first run
	// was sent): it returns once the call is made, or about to be.
	provoke  func(e *env, threadID string)
	deadline time.Duration
	// check checks the thread after the deadline passed.
	check func(t *testing.T, e *env, threadID string)
}

// waitTurn waits until the thread's first run's provider turn started.
func waitTurn(e *env, threadID string) domain.Thread {
	e.t.Helper()
	return e.waitFor(threadID, "the turn to start", func(th domain.Thread) bool { return len(th.ProviderTurns) > 0 })
}

// killedFor checks a failure message: the plugin was killed for not
// answering call within d.
func killedFor(t *testing.T, msg, plugin, call string, d time.Duration) {
	t.Helper()
	want := "the " + plugin + " plugin did not answer " + call + " within " + d.String() + ", so the host killed it"
	if !strings.HasPrefix(msg, want) {
		t.Errorf("the failure says:\n%s\nwant it to start with:\n%s", msg, want)
	}
}

// pluginGone checks that a session's plugin process is gone.
func pluginGone(t *testing.T, th domain.Thread) {
	t.Helper()
	pid := th.ProviderSessions[0].PluginPid
	if err := syscall.Kill(pid, 0); pid == 0 || err != syscall.ESRCH {
		t.Errorf("the plugin %d that hung: %v, want it gone", pid, err)
	}
}

func TestEveryPluginCallHasADeadline(t *testing.T) {
	call := orchestrator.DefaultPluginCallTimeout
	started := func(e *env, threadID string) {
		e.waitFor(threadID, "the run to start", func(th domain.Thread) bool { return len(th.Runs) == 1 && th.Runs[0].StartedAt != nil })
	}
	for _, c := range []hangCase{{
		call: "Describe", provider: "mute", argv: []string{"answer"}, provoke: started, deadline: call,
		check: func(t *testing.T, e *env, threadID string) {
			th := e.waitFor(threadID, "the run to end", allRunsEnded(1))
			want := runOutcome{Status: domain.RunStatusFailed, Code: "start_failed", EndedAt: epoch.Add(call), Attempts: []string{"failed"},
				Nodes: []string{"root_turn failed"}}
			if diff := cmp.Diff(want, outcomeOf(th, 0)); diff != "" {
				t.Errorf("the run (-want +got):\n%s", diff)
			}
			killedFor(t, th.Runs[0].Failure.Message, "mute", "Describe", call)
			if len(th.ProviderSessions) != 0 {
				t.Errorf("sessions %+v, want none: the plugin never started", th.ProviderSessions)
			}
		},
	}, {
		call: "OpenSession", provider: "crashy", argv: []string{"hang", "OpenSession"}, provoke: started, deadline: 2 * call,
		check: func(t *testing.T, e *env, threadID string) {
			th := e.waitFor(threadID, "the run to end", allRunsEnded(1))
			want := runOutcome{Status: domain.RunStatusFailed, Code: "start_failed", EndedAt: epoch.Add(2 * call), Attempts: []string{"failed"},
				Nodes: []string{"root_turn failed"}}
			if diff := cmp.Diff(want, outcomeOf(th, 0)); diff != "" {
				t.Errorf("the run (-want +got):\n%s", diff)
			}
			killedFor(t, th.Runs[0].Failure.Message, "crashy", "OpenSession", 2*call)
		},
	}, {
		call: "SteerTurn", provider: "crashy", argv: []string{"hang", "SteerTurn"}, deadline: call,
		provoke: func(e *env, threadID string) {
			th := waitTurn(e, threadID)
			e.dispatch(domain.Command{ID: "steer", ThreadID: threadID, Payload: domain.DispatchMessage{Text: "and this",
				Mode: domain.ModeSteerActive, TargetRunID: th.Runs[0].ID}})
		},
		check: func(t *testing.T, e *env, threadID string) {
			// The run fails with its plugin, and the message that did not
			// reach it becomes a run of its own (on a new plugin process).
			th := e.waitFor(threadID, "the message to be a run of its own", func(th domain.Thread) bool {
				return len(th.Runs) == 2 && th.Runs[0].Status.Terminal() && th.Runs[1].StartedAt != nil
			})
			want := runOutcome{Status: domain.RunStatusFailed, Code: "plugin_exited", EndedAt: epoch.Add(call), Attempts: []string{"failed"},
				Nodes: []string{"root_turn failed", "assistant_message cancelled"}}
			if diff := cmp.Diff(want, outcomeOf(th, 0)); diff != "" {
				t.Errorf("the run (-want +got):\n%s", diff)
			}
			killedFor(t, th.Runs[0].Failure.Message, "crashy", "SteerTurn", call)
			if in := th.Runs[1].Input; in != "and this" {
				t.Errorf("run 2's input %q, want the message that did not reach the plugin", in)
			}
			pluginGone(t, th)
		},
	}, {
		call: "RespondToRequest", provider: "crashy", argv: []string{"hang", "RespondToRequest"}, deadline: call,
		provoke: func(e *env, threadID string) {
			e.waitFor(threadID, "the policy's answer", func(th domain.Thread) bool {
				return len(th.Requests) == 1 && th.Requests[0].AnsweredBy == domain.AnsweredByPolicy
			})
		},
		check: func(t *testing.T, e *env, threadID string) {
			th := e.waitFor(threadID, "the run to end", allRunsEnded(1))
			want := runOutcome{Status: domain.RunStatusFailed, Code: "plugin_exited", EndedAt: epoch.Add(call), Attempts: []string{"failed"},
				Nodes: []string{"root_turn failed", "assistant_message cancelled"}}
			if diff := cmp.Diff(want, outcomeOf(th, 0)); diff != "" {
				t.Errorf("the run (-want +got):\n%s", diff)
			}
			killedFor(t, th.Runs[0].Failure.Message, "crashy", "RespondToRequest", call)
			if q := th.Requests[0]; q.Status != domain.RequestStatusExpired || q.Delivery != domain.DeliveryNotResumable {
				t.Errorf("the request: %s, %s; want expired, not resumable", q.Status, q.Delivery)
			}
			pluginGone(t, th)
		},
	}, {
		call: "RollbackThread", provider: "crashy", argv: []string{"hang", "RollbackThread"}, deadline: call,
		provoke: func(e *env, threadID string) {
			th := e.waitFor(threadID, "the run to end", allRunsEnded(1))
			e.dispatch(domain.Command{ID: "rollback", ThreadID: threadID, Payload: domain.RollbackToCheckpoint{CheckpointID: th.Checkpoints[0].ID}})
			e.waitFor(threadID, "the files restored", func(th domain.Thread) bool {
				return len(th.Rollbacks) == 1 && th.Rollbacks[0].Status == domain.RollbackReconciling
			})
		},
		check: func(t *testing.T, e *env, threadID string) {
			// The provider could not drop the turn: the next run starts a
			// fresh conversation, and the rollback says why.
			th := e.waitFor(threadID, "the rollback to end", func(th domain.Thread) bool { return !th.RollingBack() })
			rb := th.Rollbacks[0]
			if rb.Status != domain.RollbackDone || rb.Reconciliation != domain.ReconcileFreshThread {
				t.Errorf("the rollback: %s, %s; want done with a fresh thread", rb.Status, rb.Reconciliation)
			}
			want := "the provider's rollback failed (crashy rollback of 1 turns: the crashy plugin did not answer RollbackThread within 1m0s, so the host killed it"
			if !strings.HasPrefix(rb.Note, want) {
				t.Errorf("the rollback's note:\n%s\nwant it to start with:\n%s", rb.Note, want)
			}
			pluginGone(t, th)
		},
	}, {
		call: "CloseSession, forced", provider: "crashy", argv: []string{"hang", "ForceCloseSession"}, deadline: 15 * time.Second,
		provoke: func(e *env, threadID string) {
			th := waitTurn(e, threadID)
			e.dispatch(domain.Command{ID: "stop", ThreadID: threadID, Payload: domain.InterruptRun{RunID: th.Runs[0].ID, Force: true}})
		},
		check: func(t *testing.T, e *env, threadID string) {
			th := e.waitFor(threadID, "the run to end", allRunsEnded(1))
			reason := "stopped by force: the host ended the provider's process when asked to"
			want := runOutcome{Status: domain.RunStatusInterrupted, Code: domain.FailureForced, EndedAt: epoch.Add(15 * time.Second),
				Attempts: []string{"interrupted"}, Nodes: []string{"root_turn interrupted", "assistant_message cancelled"}}
			if diff := cmp.Diff(want, outcomeOf(th, 0)); diff != "" {
				t.Errorf("the run (-want +got):\n%s", diff)
			}
			if s := th.ProviderSessions[0]; s.Status != domain.SessionStatusEnded || s.EndReason != "ended by the host: "+reason {
				t.Errorf("the session: %s, %q", s.Status, s.EndReason)
			}
			pluginGone(t, th)
		},
	}} {
		t.Run(c.call, func(t *testing.T) {
			e := newCrashEnv(t)
			if c.call == "RollbackThread" {
				e.gitWorkspace()
			}
			a := e.crashThread("a", c.provider, c.argv...)
			b := e.crashThread("b", "steady", "answer")
			e.dispatch(domain.Command{ID: "send-a", ThreadID: a, Payload: domain.DispatchMessage{Text: "hang"}})
			c.provoke(e, a)
			// While it hangs, with the clock still, another plugin's thread
			// runs to its end.
			e.dispatch(domain.Command{ID: "send-b", ThreadID: b, Payload: domain.DispatchMessage{Text: "answer"}})
			thb := e.waitFor(b, "b's run to end while a's plugin hangs", allRunsEnded(1))
			if diff := cmp.Diff(runOutcome{Status: domain.RunStatusCompleted, EndedAt: epoch, Attempts: []string{"completed"},
				Nodes: []string{"root_turn completed", "assistant_message completed"}, Text: "ok"}, outcomeOf(thb, 0)); diff != "" {
				t.Errorf("b's run (-want +got):\n%s", diff)
			}
			e.advanceTo(c.deadline)
			c.check(t, e, a)
		})
	}
}
