package orchestrator_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-run/baton/host/internal/domain"
	"github.com/baton-run/baton/host/internal/orchestrator"
)

// A host opened read-only on a data dir another host holds shows its
// threads as the holder does, commits nothing (a command is
// ErrReadOnly), and leaves the holder's pid file and log to it: the holder
// goes on committing.
func TestReadOnlyHostOnAHeldDataDir(t *testing.T) {
	e := newEnv(t)
	id := e.createThread("acp", "acp/simple.ndjson")
	e.dispatch(domain.Command{ID: "send", ThreadID: id, Payload: domain.DispatchMessage{Text: "Say hello."}})
	want := e.waitFor(id, "the run's end", allRunsEnded(1))
	wantList, err := e.host.Threads("", 0)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := os.ReadFile(filepath.Join(e.data, orchestrator.PIDFileName))
	if err != nil {
		t.Fatal(err)
	}

	ro, err := orchestrator.Open(orchestrator.Config{DataDir: e.data, ReadOnly: true})
	if err != nil {
		t.Fatalf("open read-only a data dir another host holds: %v", err)
	}
	got, err := ro.Thread(id)
	if err != nil {
		t.Fatal(err)
	}
	list, err := ro.Threads("", 0)
	if err != nil {
		t.Fatal(err)
	}
	js := func(v any) string { b, _ := json.Marshal(v); return string(b) }
	if diff := cmp.Diff(js(want), js(got)); diff != "" {
		t.Errorf("the thread read read-only (-the holder's +read):\n%s", diff)
	}
	if diff := cmp.Diff(wantList, list); diff != "" {
		t.Errorf("the threads read read-only (-the holder's +read):\n%s", diff)
	}
	rc, err := ro.Dispatch(context.Background(), domain.Command{ID: "more", ThreadID: id, Payload: domain.DispatchMessage{Text: "More."}})
	if !errors.Is(err, orchestrator.ErrReadOnly) || rc != (domain.Receipt{}) {
		t.Errorf("a command to the read-only host: %+v, %v; want ErrReadOnly", rc, err)
	}
	if err := ro.Close(); err != nil {
		t.Fatal(err)
	}
	if after, err := os.ReadFile(filepath.Join(e.data, orchestrator.PIDFileName)); err != nil || string(after) != string(pid) {
		t.Errorf("the holder's pid file after the read-only host closed: %q, %v; want %q", after, err, pid)
	}
	e.dispatch(domain.Command{ID: "again", ThreadID: id, Payload: domain.DispatchMessage{Text: "Say hello."}})
	if th, _ := e.host.Thread(id); len(th.Runs) != 2 {
		t.Errorf("the holder after the read-only host: %d runs, want 2", len(th.Runs))
	}
}
