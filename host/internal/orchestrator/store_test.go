package orchestrator_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/hashicorp/go-hclog"

	"github.com/baton-run/baton/host/internal/domain"
	"github.com/baton-run/baton/host/internal/eventlog"
	"github.com/baton-run/baton/host/internal/ids"
	"github.com/baton-run/baton/host/internal/orchestrator"
	"github.com/baton-run/baton/sdk/clock"
)

// What a host does with the store it opens: a log from before the thread
// index, and a store it cannot trust (written by a newer host, or damaged).

// ignoreUnexported leaves out what a projection shares with the thread it
// was copied from.
var ignoreUnexported = cmpopts.IgnoreUnexported(domain.Thread{}, domain.Run{})

// openStore opens a data dir's event log directly, as a host from before
// would have written it or as a disk might have left it.
func openStore(t *testing.T, dataDir string) *eventlog.Store {
	t.Helper()
	s, err := eventlog.Open(filepath.Join(dataDir, "events"), nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// appendEvent appends one event, with nothing beside it: no receipt, no
// thread head, no live marker, no snapshot.
func appendEvent(t *testing.T, s *eventlog.Store, threadID string, p domain.Payload) {
	t.Helper()
	appendRaw(t, s, eventlog.Pending{ThreadID: threadID, Type: p.EventType(), At: epoch, Data: mustJSON(t, p)})
}

func appendRaw(t *testing.T, s *eventlog.Store, evs ...eventlog.Pending) {
	t.Helper()
	if _, _, err := s.Append(eventlog.Batch{Events: evs}); err != nil {
		t.Fatal(err)
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// openHost opens a host on a data dir with a logger that keeps what it
// says, and returns both.
func openHost(t *testing.T, dataDir string) (*orchestrator.Host, *syncWriter, error) {
	t.Helper()
	logged := &syncWriter{w: &strings.Builder{}}
	h, err := orchestrator.Open(orchestrator.Config{DataDir: dataDir, PluginDirs: []string{pluginDir}, IDs: ids.Seeded(50),
		Clock: clock.NewFake(epoch), Logger: hclog.New(&hclog.LoggerOptions{Output: logged, Level: hclog.Warn})})
	if err == nil {
		t.Cleanup(func() { h.Close() })
	}
	return h, logged, err
}

func (s *syncWriter) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.String()
}

// A log written by a host from before the thread index (its events only:
// no layout recorded, no thread heads, live markers or snapshots) is read
// once, whole, at open: every thread is listed and loads as its events
// make it, and a thread that was in flight when that host stopped is
// found and reconciled like any other. The layout is recorded, so that no
// later open reads the log again.
func TestOpenIndexesALogFromBeforeTheIndex(t *testing.T) {
	// The events: a thread whose run ended, and one whose run was in
	// flight at the last event (as a host killed then would leave it).
	ref := newEnv(t)
	done := ref.dispatch(domain.Command{ID: "create-done", Payload: domain.CreateThread{Provider: "acp", Cwd: ref.ws,
		ProviderCommand: ref.peer("acp", "acp/simple.ndjson")}}).ThreadID
	ref.dispatch(domain.Command{ID: "send-done", ThreadID: done, Payload: domain.DispatchMessage{Text: messages(t, "acp/simple.messages")[0]}})
	ref.waitFor(done, "the run to end", allRunsEnded(1))
	inFlight := ref.dispatch(domain.Command{ID: "create-stalled", Payload: domain.CreateThread{Provider: "acp", Cwd: ref.ws,
		ProviderCommand: ref.peer("acp", "acp/stall.ndjson")}}).ThreadID
	ref.dispatch(domain.Command{ID: "send-stalled", ThreadID: inFlight, Payload: domain.DispatchMessage{Text: "Take your time"}})
	stalled := ref.waitFor(inFlight, "the provider to start thinking", func(th domain.Thread) bool { return len(th.TurnItems) > 0 })
	if stalled.Runs[0].Status != domain.RunStatusRunning {
		t.Fatalf("run of the stalled thread is %s, want running", stalled.Runs[0].Status)
	}
	wantDone := mustThread(t, ref, done)
	summaries, err := ref.host.Threads("", 0)
	if err != nil {
		t.Fatal(err)
	}
	cut := ref.host.LastSequence()
	old, err := ref.host.ThreadEvents(done, 0)
	if err != nil {
		t.Fatal(err)
	}
	more, err := ref.host.ThreadEvents(inFlight, 0)
	if err != nil {
		t.Fatal(err)
	}
	ref.closePastDrain() // the stalled agent does not stop when asked

	// The same events, in their order, as the host from before wrote them.
	byseq := map[uint64]eventlog.Record{}
	for _, r := range append(old, more...) {
		byseq[r.Sequence] = r
	}
	dir := t.TempDir()
	s := openStore(t, dir)
	for seq := uint64(1); seq <= cut; seq++ {
		r, ok := byseq[seq]
		if !ok {
			t.Fatalf("event %d is of neither thread", seq)
		}
		appendRaw(t, s, eventlog.Pending{ThreadID: r.ThreadID, Type: r.Type, At: r.At, Data: r.Data})
	}
	s.Close()

	h, _, err := openHost(t, dir)
	if err != nil {
		t.Fatal(err)
	}
	got, err := h.Thread(done)
	if err != nil {
		t.Fatal(err)
	}
	// Its session was open at the last event: it was found live, and its
	// session ended, as a restart ends it.
	why := "the host restarted while this was in progress"
	wantDone.ProviderSessions[0].Status = domain.SessionStatusEnded
	wantDone.ProviderSessions[0].EndedAt = &epoch
	wantDone.ProviderSessions[0].EndReason = why
	wantDone.Sequence = got.Sequence // after the reconciliation's event
	if diff := cmp.Diff(wantDone, got, ignoreUnexported); diff != "" {
		t.Errorf("the ended thread, indexed (-as its host had it +indexed):\n%s", diff)
	}
	// The thread in flight was found live and reconciled: its run failed
	// saying why (once its checkpoint, captured after the recovery, is
	// recorded), its session ended.
	recovered := (&env{t: t, host: h}).waitFor(inFlight, "the failed run's checkpoint", func(th domain.Thread) bool {
		return len(th.Checkpoints) == 2 && th.Checkpoints[1].Status != domain.CheckpointCapturing
	})
	type outcome struct {
		Status   domain.RunStatus
		Failure  *domain.Failure
		Sessions []string
	}
	want := outcome{domain.RunStatusFailed, &domain.Failure{Code: "host_restarted", Message: why}, []string{"ended: " + why}}
	gotOutcome := outcome{Status: recovered.Runs[0].Status, Failure: recovered.Runs[0].Failure}
	for _, ps := range recovered.ProviderSessions {
		gotOutcome.Sessions = append(gotOutcome.Sessions, string(ps.Status)+": "+ps.EndReason)
	}
	if diff := cmp.Diff(want, gotOutcome); diff != "" {
		t.Errorf("the thread in flight after the open (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(rebuild(t, h, inFlight), recovered, ignoreUnexported); diff != "" {
		t.Errorf("the reconciled thread differs from its events (-events +loaded):\n%s", diff)
	}
	// Both are listed, from the heads the open wrote.
	list, err := h.Threads("", 0)
	if err != nil {
		t.Fatal(err)
	}
	for i := range summaries {
		switch summaries[i].ID {
		case inFlight:
			summaries[i] = recovered.Summary()
		case done:
			summaries[i].Sequence = got.Sequence
		}
	}
	if diff := cmp.Diff(summaries, list); diff != "" {
		t.Errorf("threads listed (-want +got):\n%s", diff)
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	s = openStore(t, dir)
	defer s.Close()
	if v, ok, err := s.Meta("layout"); err != nil || !ok || string(v) != "2" {
		t.Errorf("layout after the open = %q %v %v; want 2", v, ok, err)
	}
}

// A store the host cannot read right is refused at open, saying what is
// wrong with it, rather than half read.
func TestOpenRefusesAStoreItCannotRead(t *testing.T) {
	created := domain.ThreadCreated{Provider: "acp", Cwd: "/w", ProviderCommand: domain.ProviderCommand{Argv: []string{"x"}}}
	effect := func(threadID string) []byte {
		return mustJSON(t, domain.StartTurn{EffectHead: domain.EffectHead{ThreadID: threadID}, RunID: "run-1", AttemptID: "att-1", Text: "hi"})
	}
	for _, c := range []struct {
		name  string
		write func(t *testing.T, s *eventlog.Store)
		want  string
	}{
		{"indexes of a newer layout", func(t *testing.T, s *eventlog.Store) {
			if err := s.SetMeta("layout", []byte("3")); err != nil {
				t.Fatal(err)
			}
		}, "open host: the event log's indexes are layout 3; this baton knows layout 2 (a newer baton wrote them?)"},
		{"an event of a thread never created", func(t *testing.T, s *eventlog.Store) {
			appendEvent(t, s, "thr-a", created)
			appendEvent(t, s, "thr-b", domain.RunQueued{RunID: "run-1", Ordinal: 1, MessageID: "msg-1", Input: "hi"})
		}, "open host: index the event log: thread thr-b: event 2 (run.queued) is for thread thr-b, which was never created"},
		{"an event of a type no host writes", func(t *testing.T, s *eventlog.Store) {
			appendEvent(t, s, "thr-a", created)
			appendRaw(t, s, eventlog.Pending{ThreadID: "thr-a", Type: "thread.renamed", At: epoch, Data: []byte(`{}`)})
		}, `open host: index the event log: thread thr-a: event 2: unknown event type "thread.renamed"`},
		{"a corrupt outbox entry", func(t *testing.T, s *eventlog.Store) {
			if err := s.SetMeta("layout", []byte("1")); err != nil {
				t.Fatal(err)
			}
			if _, _, err := s.Append(eventlog.Batch{Events: []eventlog.Pending{{ThreadID: "thr-a", Type: created.EventType(), At: epoch,
				Data: mustJSON(t, created)}}, Effects: []eventlog.Effect{{ThreadID: "thr-a", Data: []byte(`{"type":`)}}}); err != nil {
				t.Fatal(err)
			}
		}, "open host: recover thread thr-a: outbox entry 1.0 is corrupt: unexpected end of JSON input"},
		{"an outbox entry of a thread that has no events", func(t *testing.T, s *eventlog.Store) {
			if err := s.SetMeta("layout", []byte("1")); err != nil {
				t.Fatal(err)
			}
			if _, _, err := s.Append(eventlog.Batch{Events: []eventlog.Pending{{ThreadID: "thr-a", Type: created.EventType(), At: epoch,
				Data: mustJSON(t, created)}}, Effects: []eventlog.Effect{{ThreadID: "thr-ghost", Data: effect("thr-ghost")}}}); err != nil {
				t.Fatal(err)
			}
		}, `open host: recover thread thr-ghost: not found: thread "thr-ghost"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			s := openStore(t, dir)
			c.write(t, s)
			s.Close()
			_, _, err := openHost(t, dir)
			if err == nil {
				t.Fatal("the host opened")
			}
			if diff := cmp.Diff(c.want, err.Error()); diff != "" {
				t.Errorf("open (-want +got):\n%s", diff)
			}
		})
	}
}

// storedThread is a data dir with one thread, created by a host that has
// closed, and that thread's projection.
func storedThread(t *testing.T) (dir string, th domain.Thread) {
	t.Helper()
	e := newEnv(t)
	id := e.createThread("acp", "acp/simple.ndjson")
	th = mustThread(t, e, id)
	if err := e.host.Close(); err != nil {
		t.Fatal(err)
	}
	e.host = nil
	return e.data, th
}

// A thread's head that cannot be read makes the list fail, naming the
// thread, rather than list a thread that is not there.
func TestThreadsRefusesAHeadItCannotRead(t *testing.T) {
	for _, c := range []struct {
		name string
		head string
		want string
	}{
		{"not JSON", `{"id":`, "list threads: head of %s: unexpected end of JSON input"},
		{"no thread id", `{"provider":"acp"}`, "list threads: head of %s: no thread id"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir, th := storedThread(t)
			s := openStore(t, dir)
			if err := s.PutThreadState(th.ID, []byte(c.head), false, nil); err != nil {
				t.Fatal(err)
			}
			s.Close()
			h, _, err := openHost(t, dir)
			if err != nil {
				t.Fatal(err)
			}
			list, err := h.Threads("", 0)
			if err == nil {
				t.Fatalf("listed %+v", list)
			}
			if diff := cmp.Diff(strings.ReplaceAll(c.want, "%s", th.ID), err.Error()); diff != "" {
				t.Errorf("list (-want +got):\n%s", diff)
			}
		})
	}
}

// A snapshot of another schema, or whose watermark is not one of its
// thread's events, is not used: the thread is loaded from its events, and
// the log says why. (The snapshots here hold a thread that is not the
// real one: used, it would show.)
func TestUntrustedSnapshotIsRebuiltFromEvents(t *testing.T) {
	for _, c := range []struct {
		name   string
		schema uint16
		seq    func(th domain.Thread) uint64
		why    string
	}{
		{"another schema", orchestrator.ProjectionSchema + 1, func(th domain.Thread) uint64 { return th.Sequence },
			fmt.Sprintf("schema %d, this host writes %d", orchestrator.ProjectionSchema+1, orchestrator.ProjectionSchema)},
		{"a watermark that is not the thread's", orchestrator.ProjectionSchema, func(th domain.Thread) uint64 { return th.Sequence + 1000 }, "its watermark %d is not one of the thread's events"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir, th := storedThread(t)
			forged := th
			forged.Model = "forged"
			seq := c.seq(th)
			s := openStore(t, dir)
			head, ok, err := s.Head(th.ID)
			if err != nil || !ok {
				t.Fatalf("head: %v %v", ok, err)
			}
			if err := s.PutThreadState(th.ID, head, false, &eventlog.Snapshot{Schema: c.schema, Seq: seq, Body: mustJSON(t, forged)}); err != nil {
				t.Fatal(err)
			}
			s.Close()
			h, logged, err := openHost(t, dir)
			if err != nil {
				t.Fatal(err)
			}
			got, err := h.Thread(th.ID)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(th, got, ignoreUnexported); diff != "" {
				t.Errorf("thread loaded (-its events +loaded):\n%s", diff)
			}
			why := strings.ReplaceAll(c.why, "%d", strconv.FormatUint(seq, 10))
			if !strings.Contains(logged.String(), "snapshot cannot be trusted") || !strings.Contains(logged.String(), why) {
				t.Errorf("the log does not say the snapshot was not used because %q:\n%s", why, logged.String())
			}
		})
	}
}

// A thread whose stored events cannot be applied is not loaded: reading
// it, streaming it and committing to it each fail saying which event, and
// other threads are not affected.
func TestThreadWithAnEventItCannotReadIsNotLoaded(t *testing.T) {
	dir, th := storedThread(t)
	s := openStore(t, dir)
	appendRaw(t, s, eventlog.Pending{ThreadID: th.ID, Type: "thread.renamed", At: epoch, Data: []byte(`{}`)})
	s.Close()
	h, _, err := openHost(t, dir)
	if err != nil {
		t.Fatal(err)
	}
	want := "load thread " + th.ID + `: event ` + strconv.FormatUint(th.Sequence+1, 10) + `: unknown event type "thread.renamed"`
	errText := func(err error) string {
		if err == nil {
			return "<nil>"
		}
		return err.Error()
	}
	_, err = h.Thread(th.ID)
	got := []string{errText(err)}
	_, _, err = h.Snapshot(th.ID)
	got = append(got, errText(err))
	_, err = h.Dispatch(t.Context(), domain.Command{ID: "send", ThreadID: th.ID, Payload: domain.DispatchMessage{Text: "hi"}})
	got = append(got, errText(err))
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	for _, err := range h.ThreadStream(ctx, th.ID, 0) {
		got = append(got, errText(err))
		if err == nil {
			cancel()
		}
	}
	if diff := cmp.Diff([]string{want, want, want, want}, got); diff != "" {
		t.Errorf("read, snapshot, dispatch, stream (-want +got):\n%s", diff)
	}
	// Another thread is created and read as ever.
	rc, err := h.Dispatch(t.Context(), domain.Command{ID: "create-other", Payload: domain.CreateThread{Provider: "acp", Cwd: os.TempDir(),
		ProviderCommand: domain.ProviderCommand{Argv: []string{"x"}}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.Thread(rc.ThreadID); err != nil {
		t.Errorf("another thread: %v", err)
	}
}

// A command whose stored receipt cannot be read is refused, saying so,
// rather than committed a second time.
func TestCorruptReceiptRefusesItsCommand(t *testing.T) {
	dir, th := storedThread(t)
	s := openStore(t, dir)
	if _, _, err := s.Append(eventlog.Batch{CommandID: "send", Receipt: func(uint64) []byte { return []byte(`{"commandId":`) },
		Events: []eventlog.Pending{{ThreadID: th.ID, Type: domain.DiagnosticRecorded{}.EventType(), At: epoch,
			Data: mustJSON(t, domain.DiagnosticRecorded{Title: "a note"})}}}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	h, _, err := openHost(t, dir)
	if err != nil {
		t.Fatal(err)
	}
	head := h.LastSequence()
	_, err = h.Dispatch(t.Context(), domain.Command{ID: "send", ThreadID: th.ID, Payload: domain.DispatchMessage{Text: "hi"}})
	if diff := cmp.Diff(refusal{"other", "receipt of send is corrupt: unexpected end of JSON input"}, refused(err)); diff != "" {
		t.Errorf("dispatch (-want +got):\n%s", diff)
	}
	if h.LastSequence() != head {
		t.Errorf("the command was committed: head %d -> %d", head, h.LastSequence())
	}
}
