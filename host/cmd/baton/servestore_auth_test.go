//go:build linux

package main

import (
	"encoding/json"
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

// A host given the servers' token serves the shared log, and its status
// says where the log is.
func TestServeStoreWithANATSToken(t *testing.T) {
	cl := natstest.SingleWith(t, natstest.Token("s3cret"))
	a := startService(t, t.TempDir(), "--store", cl.URLs(), "--nats-token-file", tokenFile(t, "s3cret"),
		"--installation", "auth", "--host", "a")
	out, errOut, code := baton(t, "status", "--json", "--data", a.data)
	var st serviceStatus
	if err := json.Unmarshal([]byte(out), &st); err != nil || code != exitOK {
		t.Fatalf("status: exit %d, %v\n%s%s", code, err, out, errOut)
	}
	if st.Store.LeaseSince == nil {
		t.Errorf("status: no leaseSince in %+v", st.Store)
	}
	st.Store.LeaseSince = nil
	want := storeStatus{Kind: "jetstream", Servers: []string{cl.URLs()}, Installation: "auth", Host: "a"}
	if d := cmp.Diff(want, st.Store); d != "" {
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
