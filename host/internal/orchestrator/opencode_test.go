package orchestrator_test

import (
	"strings"
	"testing"

	"github.com/baton-run/baton/host/internal/domain"
)

// The host with the real opencode plugin and the replay peer serving
// transcripts recorded from `opencode serve` (opencode-ai 1.18.33) over
// HTTP and server-sent events.

// opencodeThread creates an opencode thread on a transcript.
func (e *env) opencodeThread(scenario, policy string) (string, domain.Command, domain.Receipt) {
	e.t.Helper()
	return e.newThread("opencode", "opencode/"+scenario+".ndjson", policy)
}

// Two messages, two runs, each the assistant's answer to its own message;
// commands sent again return their receipts and reach opencode once.
func TestOpencodeSimpleAndMultiTurn(t *testing.T) {
	e := newEnv(t)
	threadID, create, created := e.opencodeThread("multi_turn", "")
	var cmds []domain.Command
	var receipts []domain.Receipt
	for i, text := range []string{"Say hello", "Say it again"} {
		cmd := domain.Command{ID: "send-" + text, ThreadID: threadID, Payload: domain.DispatchMessage{Text: text}}
		cmds, receipts = append(cmds, cmd), append(receipts, e.dispatch(cmd))
		e.waitFor(threadID, "the run to end", allRunsEnded(i+1))
	}
	th := mustThread(t, e, threadID)
	for i, want := range []string{"First reply.", "Second reply."} {
		r := th.Runs[i]
		if r.Status != domain.RunStatusCompleted || assistantText(th, r.ID) != want {
			t.Fatalf("run %d: %s %q", i+1, r.Status, assistantText(th, r.ID))
		}
	}
	if len(th.ProviderThreads) != 1 || !strings.HasPrefix(th.ProviderThreads[0].ProviderRef, "ses_") {
		t.Fatalf("provider threads: %+v", th.ProviderThreads)
	}
	// Each provider turn is the user message opencode made for the run.
	if len(th.ProviderTurns) != 2 || !strings.HasPrefix(th.ProviderTurns[0].ProviderRef, "msg_") {
		t.Fatalf("provider turns: %+v", th.ProviderTurns)
	}
	if u := th.Runs[0].Usage; u == nil || u.TotalTokens == 0 {
		t.Errorf("run 1 has no usage: %+v", th.Runs[0].Usage)
	}
	e.redispatchAll(append([]domain.Command{create}, cmds...), append([]domain.Receipt{created}, receipts...))
	e.restart()
	if n := e.countFrames(th, `"path":"/session/`+th.ProviderThreads[0].ProviderRef+`/prompt_async"`); n != 2 {
		t.Errorf("prompt_async sent %d times, want 2", n)
	}
	th, _ = e.host.Thread(threadID)
	for _, s := range th.ProviderSessions {
		if s.EndReason != "closed" {
			t.Errorf("session %s ended %q, want closed", s.ID, s.EndReason)
		}
	}
}

// Approvals answered by a client: accept runs the command and the write;
// decline leaves the file alone, the command item is declined, and the turn
// still completes.
func TestOpencodeApprovals(t *testing.T) {
	for _, tc := range []struct {
		scenario, decision, itemStatus string
		requests                       int
	}{
		{"approval_accept", "accept", domain.StatusCompleted, 2},
		{"approval_decline", "decline", "declined", 1},
	} {
		t.Run(tc.scenario, func(t *testing.T) {
			e := newEnv(t)
			threadID, _, _ := e.opencodeThread(tc.scenario, domain.ApproveAsk)
			th := e.play(threadID, "opencode/"+tc.scenario+".steps.json")
			if r := th.Runs[0]; r.Status != domain.RunStatusCompleted {
				t.Fatalf("run %s (%+v)", r.Status, r.Failure)
			}
			if len(th.Requests) != tc.requests {
				t.Fatalf("requests = %d, want %d", len(th.Requests), tc.requests)
			}
			for _, q := range th.Requests {
				if q.Status != domain.RequestStatusResolved || q.Decision != tc.decision || q.AnsweredBy != "client" {
					t.Errorf("request %+v", q)
				}
				if q.Kind != domain.RequestCommandApproval && q.Kind != domain.RequestFileChangeApproval {
					t.Errorf("request kind %q", q.Kind)
				}
			}
			var cmds int
			for _, it := range th.TurnItems {
				if it.Kind == "command_execution" {
					cmds++
					if it.Status != tc.itemStatus {
						t.Errorf("command item %q is %s, want %s", it.Title, it.Status, tc.itemStatus)
					}
				}
			}
			if cmds != 1 {
				t.Errorf("command items = %d, want 1", cmds)
			}
			e.restart()
			if n := e.countFrames(th, `"path":"/permission/`); n != tc.requests {
				t.Errorf("permission replies sent %d times, want %d", n, tc.requests)
			}
		})
	}
}

// A thread's policy answers opencode's permission requests itself.
func TestOpencodeApprovalByPolicy(t *testing.T) {
	e := newEnv(t)
	threadID, _, _ := e.opencodeThread("approval_accept", domain.ApproveAccept)
	send := domain.Command{ID: "send", ThreadID: threadID, Payload: domain.DispatchMessage{Text: "Create made.txt with a command, then hello.txt"}}
	e.dispatch(send)
	th := e.waitFor(threadID, "the run to end", allRunsEnded(1))
	if r := th.Runs[0]; r.Status != domain.RunStatusCompleted {
		t.Fatalf("run %s (%+v)", r.Status, r.Failure)
	}
	for _, q := range th.Requests {
		if q.Decision != "accept" || q.AnsweredBy != "policy" {
			t.Errorf("request %+v; want accepted by policy", q)
		}
	}
}

// Invariants 2 and 5: the task tool's child session is a subagent node
// nested under the run's root; its end does not end the run.
func TestOpencodeSubagent(t *testing.T) {
	e := newEnv(t)
	threadID, _, _ := e.opencodeThread("subagent", "")
	th := e.play(threadID, "opencode/subagent.steps.json")
	if len(th.Runs) != 1 {
		t.Fatalf("runs = %d, want 1", len(th.Runs))
	}
	r := th.Runs[0]
	// The run's messages are the child's answer and the root's.
	if r.Status != domain.RunStatusCompleted || assistantText(th, r.ID) != "Hi from the helper.The helper said hi." {
		t.Fatalf("run %s, said %q", r.Status, assistantText(th, r.ID))
	}
	root := r.Attempts[0].RootNode
	var sub *domain.Node
	for i, n := range r.Nodes {
		for _, pt := range th.ProviderTurns {
			if pt.NodeID == n.ID && n.ID != root {
				sub = &r.Nodes[i]
			}
		}
	}
	if sub == nil || sub.Kind != domain.NodeSubagent || sub.ParentID != root || sub.Status != domain.StatusCompleted {
		t.Fatalf("no completed subagent turn node under the root: %+v", r.Nodes)
	}
	var childMsgs int
	for _, n := range r.Nodes {
		if n.ParentID == sub.ID && n.Kind == domain.ItemAssistantMessage {
			childMsgs++
		}
	}
	if childMsgs != 1 {
		t.Errorf("%d assistant messages under the subagent node, want 1", childMsgs)
	}
	if len(th.ProviderThreads) != 2 || th.ProviderThreads[1].ParentID == "" {
		t.Fatalf("provider threads: %+v", th.ProviderThreads)
	}
	if n := strings.Count(strings.Join(e.types(threadID, 0), " "), "run.ended"); n != 1 {
		t.Fatalf("run.ended %d times", n)
	}
}
