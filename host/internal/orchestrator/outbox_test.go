package orchestrator_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-run/baton/host/internal/domain"
	"github.com/baton-run/baton/host/internal/scenario"
)

// How the effects of a thread are performed when the provider cannot be
// reached.

// A thread whose provider has no plugin installed is refused before
// anything is written, naming the providers that are installed: no thread,
// no event, no receipt (the same command id then creates the thread for an
// installed provider).
func TestProviderWithNoPluginIsRefused(t *testing.T) {
	e := newEnv(t)
	create := domain.Command{ID: "create", Payload: domain.CreateThread{Provider: "nope", Cwd: e.ws,
		ProviderCommand: domain.ProviderCommand{Argv: []string{"nope-agent"}}}}
	_, err := e.host.Dispatch(t.Context(), create)
	if !errors.Is(err, domain.ErrInvalid) {
		t.Fatalf("create for provider nope: %v; want ErrInvalid", err)
	}
	want := `invalid command: provider "nope" is not installed; installed: acp, claude, codex, cursor, opencode`
	if diff := cmp.Diff(want, err.Error()); diff != "" {
		t.Errorf("refusal (-want +got):\n%s", diff)
	}
	threads, err := e.host.Threads("", 0)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(uint64(0), e.host.LastSequence()); diff != "" {
		t.Errorf("log head after the refusal (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]domain.ThreadSummary{}, threads); diff != "" {
		t.Errorf("threads after the refusal (-want +got):\n%s", diff)
	}
	create.Payload = domain.CreateThread{Provider: "acp", Cwd: e.ws, ProviderCommand: domain.ProviderCommand{Argv: []string{"acp-agent"}}}
	if _, err := e.host.Dispatch(t.Context(), create); err != nil {
		t.Errorf("the same command id for an installed provider: %v; want the thread created", err)
	}
}

// An answer the plugin refuses (here codex's: a question answered under an
// id it did not ask) does not get through, and the provider hears nothing
// of it: the request is open again, saying why, and the client's next
// answer is the one the provider gets. The run then goes on as recorded.
func TestRefusedAnswerCanBeGivenAgain(t *testing.T) {
	e := newEnv(t)
	threadID, _, _ := e.codexThread("unknown_request", domain.ApproveAsk)
	sc, err := scenario.Load(filepath.Join(root, "testdata", "codex/unknown_request.steps.json"))
	if err != nil {
		t.Fatal(err)
	}
	last := len(sc.Steps) - 1
	if sc.Steps[last].Respond != "answer" {
		t.Fatalf("the scenario's last step is %+v; want the question's answer", sc.Steps[last])
	}
	answer := sc.Steps[last].Answers
	sc.Steps = sc.Steps[:last]
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	played := make(chan error, 1)
	go func() { // its last wait ends with the run; the question's answers are given below
		played <- scenario.Run(ctx, scenario.Host(e.host), threadID, sc, scenario.Options{})
	}()
	question := func(th domain.Thread) *domain.RuntimeRequest {
		for i := range th.Requests {
			if q := &th.Requests[i]; q.Kind == domain.RequestUserInput {
				return q
			}
		}
		return nil
	}
	th := e.waitFor(threadID, "the question", func(th domain.Thread) bool { return question(th) != nil })
	q := *question(th)
	e.dispatch(domain.Command{ID: "wrong", ThreadID: threadID, Payload: domain.RespondToRequest{RequestID: q.ID,
		Decision: domain.DecisionAnswer, Answers: map[string]string{"colour": "Blue"}}})
	th = e.waitFor(threadID, "the answer to fail", func(th domain.Thread) bool { return question(th).AnswerFailures > 0 })
	wantDiag := domain.Diagnostic{Title: "an answer did not reach the provider; answer again",
		Text: `request ` + q.ProviderRef + ` asks 1 question(s); the answer has none of their ids (or "answer"): invalid request`}
	open := q
	open.AnswerFailures = 1
	if diff := cmp.Diff(open, *question(th)); diff != "" {
		t.Errorf("the question after the refused answer (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]domain.Diagnostic{wantDiag}, th.Diagnostics); diff != "" {
		t.Errorf("diagnostics (-want +got):\n%s", diff)
	}
	e.dispatch(domain.Command{ID: "right", ThreadID: threadID, Payload: domain.RespondToRequest{RequestID: q.ID,
		Decision: domain.DecisionAnswer, Answers: answer}})
	th = e.waitFor(threadID, "the run to end", allRunsEnded(1))
	answered := open
	answered.Status, answered.Decision, answered.Answers, answered.AnsweredBy = domain.RequestStatusResolved, domain.DecisionAnswer, answer, domain.AnsweredByClient
	if diff := cmp.Diff(answered, *question(th)); diff != "" {
		t.Errorf("the question at the end (-want +got):\n%s", diff)
	}
	if r := th.Runs[0]; r.Status != domain.RunStatusCompleted {
		t.Errorf("run %s", r.Status)
	}
	if err := <-played; err != nil {
		t.Fatal(err)
	}
	e.checkSessionsClosed(threadID)
}
