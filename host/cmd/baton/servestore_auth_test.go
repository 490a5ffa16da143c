//go:build linux

package main

import (
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-run/baton/host/internal/natstest"
)

// tokenFile writes a NATS token to a mode 0600 file, as serve wants it.
func tokenFile(t *testing.T, token string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "nats-token")
	if err := os.WriteFile(p, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// A host given the servers' token writes the shared log, and its status
// says where the log is.
func TestServeStoreWithANATSToken(t *testing.T) {
	cl := natstest.SingleWith(t, natstest.Token("s3cret"))
	alog := newLogWatch()
	a := launchService(t, t.TempDir(), alog, func(*exec.Cmd) {}, "--store", cl.URLs(),
		"--nats-token-file", tokenFile(t, "s3cret"), "--installation", "auth", "--host", "a")
	st := coordinatorStatus(t, a, alog) // the only host: it writes its threads and coordinates
	if st.LeaseSince == nil {
		t.Errorf("status: no leaseSince in %+v", st)
	}
	st.LeaseSince = nil
	want := storeStatus{Kind: "jetstream", Servers: []string{cl.URLs()}, Installation: "auth", Host: "a", Role: "coordinator", Coordinator: "a"}
	if d := cmp.Diff(want, st); d != "" {
		t.Errorf("status: store (-want +got):\n%s", d)
	}
}

// A host given a token the servers refuse does not wait for ever as if
// they were down: it exits 1 at once, saying the authorization failed.
func TestServeStoreWithAWrongNATSTokenExitsSayingSo(t *testing.T) {
	cl := natstest.SingleWith(t, natstest.Token("s3cret"))
	s := launchService(t, t.TempDir(), io.Discard, func(*exec.Cmd) {}, "--store", cl.URLs(),
		"--nats-token-file", tokenFile(t, "guess"), "--installation", "auth", "--host", "a")
	select {
	case <-s.done:
	case <-time.After(60 * time.Second):
		s.cmd.Process.Kill()
		<-s.done
		t.Fatalf("serve with a wrong token still runs after a minute; want it to exit saying the authorization failed\n%s", s.stderr)
	}
	code := -1
	if s.cmd.ProcessState != nil {
		code = s.cmd.ProcessState.ExitCode()
	}
	lines := strings.Split(strings.TrimRight(s.stderr.String(), "\n"), "\n")
	want := []any{exitFailed, "baton: serve: connect to " + cl.URLs() +
		": the servers refused this client: authorization failed (the token or credentials are not the servers'): nats: Authorization Violation"}
	if d := cmp.Diff(want, []any{code, lines[len(lines)-1]}); d != "" {
		t.Errorf("serve with a wrong token: exit and last line (-want +got):\n%s\nstderr:\n%s", d, s.stderr)
	}
}

// coordinatorStatus waits until host s, alone in its installation,
// coordinates it, and returns its store's status. The host may take the
// installation's lease before or after it says it serves, so no line of
// its log alone says both are done: the status is asked again after each
// line the host logs, until it says coordinator.
func coordinatorStatus(t *testing.T, s *batonService, log *logWatch) storeStatus {
	t.Helper()
	log.wait(t, regexp.MustCompile(`this host coordinates the installation`))
	timeout := time.After(60 * time.Second)
	for {
		log.mu.Lock()
		changed := log.changed // taken before the status, so no line after it is missed
		log.mu.Unlock()
		// The service may not listen yet as it takes the lease: a failed
		// call is asked again too.
		out, errOut, code := baton(t, "status", "--json", "--data", s.data)
		var st serviceStatus
		if err := json.Unmarshal([]byte(out), &st); err == nil && code == exitOK && st.Store.Role == "coordinator" {
			return st.Store
		}
		select {
		case <-changed:
		case <-timeout:
			t.Fatalf("host %s coordinates but its status did not say so in a minute (last: exit %d\n%s%s)\n%s",
				s.data, code, out, errOut, log)
		}
	}
}
