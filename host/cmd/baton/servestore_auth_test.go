//go:build linux

package main

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
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
	takenOver(t, a, alog) // the only host: it takes the lease and writes
	st := storeOf(t, a.data)
	if st.LeaseSince == nil {
		t.Errorf("status: no leaseSince in %+v", st)
	}
	st.LeaseSince = nil
	want := storeStatus{Kind: "jetstream", Servers: []string{cl.URLs()}, Installation: "auth", Host: "a", Role: "writer", Writer: "a"}
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
