package orchestrator_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-run/baton/host/internal/domain"
	"github.com/baton-run/baton/host/internal/notify"
)

// A host with webhooks posts a usage-limit wait's start and end and the
// run's end, through the real plugin and replay peer, on the host's fake
// clock: the wait's end comes when the clock reaches the reset.
func TestWebhooksOfAUsageLimitWait(t *testing.T) {
	got := make(chan notify.Document, 16)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var d notify.Document
		b, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(b, &d); err != nil {
			t.Errorf("delivery %s: %v", b, err)
		}
		got <- d
	}))
	t.Cleanup(srv.Close)
	e := newEnv(t)
	e.notify = &notify.Config{Targets: []notify.Target{{URL: srv.URL}}}
	e.restart()
	name := "codex/usage_limit_wait.ndjson"
	e.atCapture(name)
	id := e.createThreadWith("codex", name, domain.ApproveAccept)
	e.setPolicy(id, domain.ContinuationPolicy{OnLimit: domain.OnLimitWait})
	e.dispatch(domain.Command{ID: "m1", ThreadID: id, Payload: domain.DispatchMessage{Text: messages(t, "codex/usage_limit_wait.messages")[0]}})
	next := func(what string) notify.Document {
		t.Helper()
		select {
		case d := <-got:
			return d
		case <-time.After(hangGuard):
			t.Fatalf("no delivery of %s", what)
			return notify.Document{}
		}
	}
	started := next("the wait's start")
	th := e.waitFor(id, "the run to wait for the limit", func(t domain.Thread) bool { return t.NextWait() != nil })
	w := *th.NextWait()
	e.clock.Set(w.At)
	ended, runEnded := next("the wait's end"), next("the run's end")
	type seen struct {
		Type            domain.NoticeType
		ThreadID, RunID string
		WaitID, Outcome string
		Until           time.Time
		Status          domain.RunStatus
	}
	see := func(d notify.Document) seen {
		return seen{d.Type, d.ThreadID, d.RunID, d.Detail.WaitID, string(d.Detail.Outcome), d.Detail.Until, d.Detail.Status}
	}
	r := th.Runs[0].ID
	want := []seen{
		{domain.NoticeWaitStarted, id, r, w.ID, "", w.At, ""},
		{domain.NoticeWaitEnded, id, r, w.ID, "fired", w.At, ""},
		{domain.NoticeRunEnded, id, r, "", "", time.Time{}, domain.RunStatusCompleted},
	}
	if diff := cmp.Diff(want, []seen{see(started), see(ended), see(runEnded)}); diff != "" {
		t.Errorf("deliveries (-want +got):\n%s", diff)
	}
	if started.Title == "" || started.Title != runEnded.Title || started.Detail.Provider != "codex" || started.Detail.Limit == "" {
		t.Errorf("the wait's start: %+v", started)
	}
}
