package orchestrator_test

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-run/baton/host/internal/domain"
)

// A thread is refused, before anything is written, a working directory
// that is not there or is not a directory; a thread whose directory went
// away since fails its next run naming the directory.
func TestCwdMustBeADirectory(t *testing.T) {
	e := newEnv(t)
	file := filepath.Join(e.ws, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	gone := filepath.Join(e.ws, "gone")
	got := map[string]string{}
	long := "/" + strings.Repeat("a", 5000)
	for i, cwd := range []string{gone, file, filepath.Join(file, "sub"), long} {
		_, err := e.host.Dispatch(t.Context(), domain.Command{ID: "create-" + strconv.Itoa(i), Payload: domain.CreateThread{
			Provider: "acp", Cwd: cwd, ProviderCommand: e.peer("acp", "acp/simple.ndjson")}})
		if err != nil && !errors.Is(err, domain.ErrInvalid) {
			t.Errorf("%s: %v; want an invalid command", cwd, err)
		}
		got[cwd] = errText(err)
	}
	want := map[string]string{
		gone:                       "invalid command: cwd " + gone + " does not exist; give a directory that exists",
		file:                       "invalid command: cwd " + file + " is not a directory; give a directory that exists",
		filepath.Join(file, "sub"): "invalid command: cwd " + filepath.Join(file, "sub") + " does not exist; give a directory that exists",
		long:                       "invalid command: cwd " + long + ": file name too long; give a directory that exists",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("creates (-want +got):\n%s", diff)
	}
	if threads, err := e.host.Threads("", 0); err != nil || len(threads) != 0 {
		t.Errorf("threads after the refused creates: %v, %v; want none", threads, err)
	}

	// A thread whose directory is removed before its run.
	ws := filepath.Join(e.ws, "ws")
	if err := os.Mkdir(ws, 0o700); err != nil {
		t.Fatal(err)
	}
	rc := e.dispatch(domain.Command{ID: "create", Payload: domain.CreateThread{Provider: "acp", Cwd: ws,
		ProviderCommand: e.peer("acp", "acp/simple.ndjson")}})
	if err := os.Remove(ws); err != nil {
		t.Fatal(err)
	}
	e.dispatch(domain.Command{ID: "send", ThreadID: rc.ThreadID, Payload: domain.DispatchMessage{Text: "Say hello."}})
	th := e.waitFor(rc.ThreadID, "the run to end", allRunsEnded(1))
	wantFailure := &domain.Failure{Code: "start_failed", Message: "the thread's working directory " + ws +
		" does not exist; restore it to go on with this thread, or start a new thread"}
	if diff := cmp.Diff(wantFailure, th.Runs[0].Failure); diff != "" || th.Runs[0].Status != domain.RunStatusFailed {
		t.Errorf("run %s, failure (-want +got):\n%s", th.Runs[0].Status, diff)
	}
	if len(th.ProviderSessions) != 0 {
		t.Errorf("sessions %+v; want none opened in a directory that is gone", th.ProviderSessions)
	}
}

// errText is an error's message, "" for none.
func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
